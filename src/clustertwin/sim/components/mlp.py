"""Dense MLP of one layer, one micro-batch, one rank.

Interface: ``dense_mlp(st) -> (fwd_s, bwd_s)``: the up (gate + up with SwiGLU) and down projections
after the TP split (column- then row-parallel). The activation kernel is an element-wise cost
(``elementwise.py``); MoE layers are ``moe.py``.
"""

from __future__ import annotations

from ..kernels import gemm_time, gemm_train_time
from .stage import Stage


def dense_mlp(st: Stage):
    model, hw, t, tok, ib = st.model, st.hw, st.t, st.tok, st.in_bytes
    h = float(model.hidden_size)
    mats = 2.0 if model.swiglu else 1.0
    f_dense = float(model.ffn_hidden_size)
    up_f, up_b = gemm_train_time(hw, tok, mats * f_dense / t, h, in_bytes=ib)
    dn_f, dn_b = gemm_train_time(hw, tok, h, f_dense / t, in_bytes=ib)
    return up_f + dn_f, up_b + dn_b


def dense_down_proj_fwd(st: Stage):
    """Forward time of the dense MLP's down projection (fc2, row-parallel) alone: the GEMM a JAX full recompute
    leaves out (its output only feeds the residual add, which no backward op reads; stack full_recompute)."""
    model = st.model
    return gemm_time(st.hw, st.tok, float(model.hidden_size), float(model.ffn_hidden_size) / st.t, in_bytes=st.in_bytes)

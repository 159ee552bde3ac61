"""Memory-bound element-wise kernels of one dense layer part, one micro-batch: two norms, residual
(bias-dropout-)adds, the MLP activation, RoPE, and the FP8/FP4 quantisation of the linear layers' inputs,
output gradients and weights (``fp8.quant_time``: bytes per element of the step dtype's recipe).

Interface: ``elementwise(st) -> (fwd_s, bwd_s)``; the backward moves twice the forward bytes of the
norms / adds / activation / RoPE; the casts are counted per pass (fp8.py). The
unfused attention softmax and the MoE permutation kernels are added by the composer from
``attention.core`` and ``moe.moe_layer``. Norms and residuals run on the SP-sharded tokens.
"""

from __future__ import annotations

from ... import xp as np  # numpy, or plain numbers for one plan (clustertwin/xp.py)
from ..kernels import mem_time
from .fp8 import quant_time
from .stage import Stage


def elementwise(st: Stage):
    model, t, tok, tok_sp = st.model, st.t, st.tok, st.tok_sp
    h, a, g = float(model.hidden_size), float(model.num_attention_heads), float(model.num_kv_heads)
    dq, dv = float(model.qk_head_dim), float(model.v_dim)
    drop = 1.0 if model.dropout else 0.0
    h_elems = 4.0 + (7.0 if drop else 6.0)  # 2 norms (r/w) + 2 residual (bias-dropout-)adds
    f_eff = (1 - st.frac_moe) * float(model.ffn_hidden_size)
    act_elems = (3.0 if model.swiglu else 2.0) * f_eff / t
    rope = 0.0 if model.dropout else 2.0 * (a + g) * dq
    mem_f_bytes = st.act_bytes * (h_elems * h * tok_sp + act_elems * tok + rope / t * tok)  # 2 B (4: TF32/FP32)
    fwd, bwd = mem_time(st.hw, mem_f_bytes, 8), mem_time(st.hw, 2.0 * mem_f_bytes, 12)
    if st.fp8:  # FP8/FP4 casts of the dense linear layers' operands (fp8.py; MoE experts: moe.py)
        dq = float(model.qk_head_dim)
        kv = 2.0 * np.maximum(g / t, 1.0)  # KV heads per rank (replicated when tp > g)
        mats = 2.0 if model.swiglu else 1.0
        qkv_out = (a / t + kv) * dq
        # inputs: QKV (h), output projection (a*dv/t), fc1 (h), fc2 (f/t); output gradients of the same four
        x_elems = tok * (2.0 * h + a * dv / t + f_eff / t)
        dy_elems = tok * (qkv_out + h + mats * f_eff / t + h)
        w_elems = h * (qkv_out + a * dv / t + (mats + 1.0) * f_eff / t)
        qf, qb = quant_time(st.hw, st.hw.dtype, x_elems=x_elems, dy_elems=dy_elems, w_elems=w_elems, operands=4.0,
                            weight_share=np.where(st.fp8_weight_cache, 1.0 / np.maximum(st.m, 1.0), 1.0),
                            rht=st.nvfp4_rht, mx_per_layout=st.mx_per_layout)
        fwd, bwd = fwd + qf, bwd + qb
    return fwd, bwd

"""Memory-bound element-wise kernels of one dense layer part, one micro-batch: two norms, residual
(bias-dropout-)adds, the MLP activation, RoPE, FP8 casts of GEMM inputs.

Interface: ``elementwise(st) -> (fwd_s, bwd_s)``; the backward moves twice the forward bytes. The
unfused attention softmax and the MoE permutation kernels are added by the composer from
``attention.core`` and ``moe.moe_layer``. Norms and residuals run on the SP-sharded tokens.
"""

from __future__ import annotations

from ..kernels import mem_time
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
    mem_f_bytes = 2.0 * (h_elems * h * tok_sp + act_elems * tok + rope / t * tok)
    if st.fp8:  # quantise GEMM inputs (read BF16, write FP8) and keep transposed copies for wgrad
        mem_f_bytes = mem_f_bytes + 3.0 * tok * (2.0 * h + a * dv / t + f_eff / t)
    return mem_time(st.hw, mem_f_bytes, 8), mem_time(st.hw, 2.0 * mem_f_bytes, 12)

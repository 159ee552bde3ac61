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
    rope_bytes = st.act_bytes * rope / t * tok  # the fused RoPE's forward: one read + write of q and k
    mem_f_bytes = st.act_bytes * (h_elems * h * tok_sp + act_elems * tok) + rope_bytes  # 2 B (4: TF32/FP32)
    fwd, bwd = mem_time(st.hw, mem_f_bytes, 8), mem_time(st.hw, 2.0 * mem_f_bytes, 12)
    if st.rope_mscale_unfused and model.rope_mscale != 1.0 and rope:
        rf, rb = unfused_rope_extra(st, rope_bytes)
        fwd, bwd = fwd + rf, bwd + rb
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


def unfused_rope_extra(st: Stage, fused_bytes):
    """(forward, backward) time the unfused RoPE of one layer adds to the fused kernel priced above.

    Megatron-Core applies RoPE with a YaRN concentration factor other than 1 (``ModelSpec.rope_mscale``; GPT-OSS:
    0.1 ln 32 + 1) in eager PyTorch: ``apply_rotary_pos_emb`` (megatron/core/models/common/embeddings/
    rope_utils.py) falls back from TE's fused RoPE ("mscale=... is not supported by TE's fused RoPE. Using unfused
    implementation.") to ``_apply_rotary_pos_emb_bshd``, once for the queries and once for the keys:
    ``t, t_pass = t[..., :rot_dim], t[..., rot_dim:]``; ``cos_ = (cos(freqs) * mscale).to(dtype)`` and the same for
    sin (six small kernels on [s, 1, 1, d]); ``t = t * cos_ + _rotate_half(t) * sin_`` with ``_rotate_half`` =
    ``cat((-x2, x1))`` of the two ``chunk`` halves; ``cat((t, t_pass))``. In passes over the rotated tensor (E =
    one read or one write of it): forward the product 2, the negation 1, the cat 2, the second product 2, the sum
    3, the final cat 2 = 12 E in 6 kernels (+ 6 on the frequencies); backward (autograd) the two products'
    gradients 2 + 2, the negation's 1, the chunk's ``split_backward`` cat 2, the sum of the two gradient paths 3,
    ``slice_backward`` of ``t[..., :rot_dim]`` (zeros + copy) 3, and of the empty ``t_pass`` (zeros) plus its sum
    4 = 17 E in 9 kernels. The fused kernel is priced at 2 E forward and 4 E backward (one read + write per pass);
    ``fused_bytes`` is its forward (2 E of the queries and keys of the micro-batch on this rank)."""
    e = 0.5 * np.asarray(fused_bytes, dtype=float)  # one pass over q and k
    # forward: 12 E instead of 2 E, 2 x 12 kernels instead of 2; backward 17 E instead of 4 E, 2 x 9 kernels instead of 2
    return mem_time(st.hw, 10.0 * e, 22.0), mem_time(st.hw, 13.0 * e, 16.0)

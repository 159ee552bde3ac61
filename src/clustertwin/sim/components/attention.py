"""Attention of one layer, one micro-batch, one rank: the projections (standard / GQA or MLA) and the
attention core (fused FlashAttention, with the CP ring merge, or unfused batched GEMMs + softmax).

Interface:
* ``projections(st) -> (fwd_s, bwd_s)``: QKV and output-projection GEMMs after the TP split (MLA:
  the q/kv down- and up-projections; column-parallel up-projections, row-parallel output).
* ``kv_elems_per_token(st)``: K and V elements per token on this rank (what CP exchanges; one head per query
  head where the model repeats the KV heads before the attention call, ``st.kv_repeat``).
* ``core(st) -> AttentionCore``: the core's forward/backward time and, unfused, the score-matrix
  element-wise kernels (``mem_fwd_s``/``mem_bwd_s``; zero when fused).

Fused attention runs at ``attention_efficiency`` (FlashAttention-2 class; ``attention_efficiency_cudnn`` when
the stack's ``attention_backend`` is TE's cuDNN fused attention) of the BF16 peak with a roll-off s/(s + s_half) in the
KV length one kernel call sees; the backward does 2.5x the forward FLOPs (FlashAttention recomputes
QK^T, MODELLING.md §1.4); causal masking skips all but the diagonal 128-blocks. With CP the core runs one
kernel per ring step on the local K,V chunk and merges the partial outputs (TE's p2p ring; PyTorch's
context_parallel, which torchtitan uses, does this with FP32 accumulators also when it all-gathers K,V).
"""

from __future__ import annotations

from typing import NamedTuple

from ... import xp as np  # numpy, or plain numbers for one plan (clustertwin/xp.py)
from ..kernels import gemm_time, gemm_train_time, mem_time
from .stage import Stage


class AttentionCore(NamedTuple):
    fwd_s: np.ndarray
    bwd_s: np.ndarray
    mem_fwd_s: np.ndarray  # score-matrix kernels (unfused only)
    mem_bwd_s: np.ndarray


def projections(st: Stage):
    model, hw, t, tok, ib = st.model, st.hw, st.t, st.tok, st.in_bytes
    h, a, g = float(model.hidden_size), float(model.num_attention_heads), float(model.num_kv_heads)
    dq, dv = float(model.qk_head_dim), float(model.v_dim)
    gf = np.zeros_like(tok)
    gb_ = np.zeros_like(tok)
    if model.is_mla:
        rq, rkv = float(model.q_lora_rank), float(model.kv_lora_rank)
        dn, dr = float(model.qk_nope_head_dim), float(model.qk_rope_head_dim)
        shapes = []
        if rq:
            shapes += [(rq, h, 1.0), (a * (dn + dr), rq, t)]
        else:
            shapes += [(a * (dn + dr), h, t)]
        shapes += [(rkv + dr, h, 1.0), (a * (dn + dv), rkv, t), (h, a * dv, None)]
        for n_out, k_in, split in shapes:
            if split is None:  # row-parallel output projection: K split
                f_, b_ = gemm_train_time(hw, tok, n_out, k_in / t, in_bytes=ib)
            else:
                f_, b_ = gemm_train_time(hw, tok, n_out / split, k_in, in_bytes=ib)
            gf, gb_ = gf + f_, gb_ + b_
        return gf, gb_
    # KV heads are replicated when tp > g (Megatron): each rank computes max(g/t, 1) KV heads
    f_, b_ = gemm_train_time(hw, tok, (a / t + 2.0 * np.maximum(g / t, 1.0)) * dq, h, in_bytes=ib)
    gf, gb_ = gf + f_, gb_ + b_
    f_, b_ = gemm_train_time(hw, tok, h, a * dv / t, in_bytes=ib)
    return gf + f_, gb_ + b_


def mla_up_proj_fwd(st: Stage):
    """Forward time of the MLA up-projections (q from the q latent, k/v from the kv latent; TP-split):
    what Megatron's ``--recompute-modules mla_up_proj`` redoes in the backward. Zero without MLA."""
    model, hw, t, tok, ib = st.model, st.hw, st.t, st.tok, st.in_bytes
    if not model.is_mla:
        return np.zeros_like(tok)
    a = float(model.num_attention_heads)
    rq, rkv = float(model.q_lora_rank), float(model.kv_lora_rank)
    dn, dr, dv = float(model.qk_nope_head_dim), float(model.qk_rope_head_dim), float(model.v_head_dim)
    out = gemm_time(hw, tok, a * (dn + dv) / t, rkv, in_bytes=ib)
    if rq:
        out = out + gemm_time(hw, tok, a * (dn + dr) / t, rq, in_bytes=ib)
    return out


def kv_elems_per_token(st: Stage):
    model, t = st.model, st.t
    a, g = float(model.num_attention_heads), float(model.num_kv_heads)
    dq, dv = float(model.qk_head_dim), float(model.v_dim)
    if model.is_mla:
        return a * (dq + dv) / t  # K and V per token after up-projection
    if st.kv_repeat:  # the model expanded K,V to the query heads before the attention call (stack sdpa_repeat_kv)
        return a / t * (dq + dv)
    return np.maximum(g / t, 1.0) * (dq + dv)


def attention_kernel_efficiency(st: Stage) -> float:
    """The fused-attention efficiency (share of the BF16 peak) of the stack's attention backend on this chip:
    cuDNN fused attention (Transformer Engine prefers it over FlashAttention on sm90+) or the chip's
    FlashAttention-2-class ``attention_efficiency``."""
    eff = st.hw.eff
    if st.attn_backend == "cudnn":
        return eff.attention_efficiency_cudnn
    if st.attn_backend == "fa2":  # PyTorch SDPA's FLASH backend: the bundled FlashAttention-2 kernels
        return eff.attention_efficiency_fa2
    return eff.attention_efficiency


# cuDNN fused attention at head dim 64 relative to head dim 128 (forward, backward): FlashAttention-3 paper (Shah et
# al., arXiv:2407.08608) Fig. 5-6, H100 SXM5 BF16, 16K tokens: cuDNN forward 413 (hd 64) vs 595 (hd 128) TFLOP/s,
# backward 433 vs 516. The chip's attention_efficiency_cudnn describes hd 128; ASSUMED the same ratio on other chips
# (no cuDNN head-dim sweep found for them) and linear between hd 64 and 128, 1 from 128 up.
CUDNN_HD64_FWD = 413.0 / 595.0
CUDNN_HD64_BWD = 433.0 / 516.0


def cudnn_head_dim_factors(st: Stage) -> tuple[float, float]:
    """(forward, backward) rate factor of the stack's fused attention for the model's QK head dim: < 1 only for
    cuDNN fused attention (Transformer Engine) below head dim 128 (CUDNN_HD64_*)."""
    if st.attn_backend != "cudnn":
        return 1.0, 1.0
    d = float(st.model.qk_head_dim)
    x = min(max((d - 64.0) / 64.0, 0.0), 1.0)
    return CUDNN_HD64_FWD + (1.0 - CUDNN_HD64_FWD) * x, CUDNN_HD64_BWD + (1.0 - CUDNN_HD64_BWD) * x


def core(st: Stage) -> AttentionCore:
    model, hw, t, c, b, s, tok = st.model, st.hw, st.t, st.c, st.b, st.s, st.tok
    a = float(model.num_attention_heads)
    dq, dv = float(model.qk_head_dim), float(model.v_dim)
    heads = a / t
    s_q = s / c
    core_full = 2.0 * b * s_q * s * heads * (dq + dv)  # forward FLOPs, non-causal
    if st.flash:
        kern = hw.eff.kernel_overhead_s
        blk = 128.0
        causal_frac = 0.5 * (1.0 + blk / np.maximum(s_q, blk))
        # roll-off with the KV length one kernel call sees: the full sequence, or with a CP ring the local
        # chunk s/c (one call per ring step); the CP all-gather path attends to the gathered K,V in one call,
        # except PyTorch's context_parallel, which runs its per-chunk ring loop over the gathered K,V as well
        ring = st.cp_comm != "allgather" or st.cp_torch_ring
        s_kv = s / c if ring else s
        eff = attention_kernel_efficiency(st)
        rate = hw.peak_bf16 * eff * st.attn_speed * s_kv / (s_kv + hw.eff.attention_seq_half)
        hf, hb = cudnn_head_dim_factors(st)
        attn_f = core_full * causal_frac / (rate * hf) + 2 * kern
        attn_b = 2.5 * core_full * causal_frac / (rate * hb) + 4 * kern
        fw = float(model.sliding_window_fraction)
        if fw > 0:
            # sliding-window layers: a query attends to its last w keys, computed in 128-blocks (w + one block
            # of keys per query block), at the short-KV rate of a w-long kernel call
            w = np.minimum(float(model.sliding_window) + blk, s_kv)
            rate_w = hw.peak_bf16 * eff * w / (w + hw.eff.attention_seq_half)
            win = core_full * w / s
            attn_f = (1.0 - fw) * attn_f + fw * (win / (rate_w * hf) + 2 * kern)
            attn_b = (1.0 - fw) * attn_b + fw * (2.5 * win / (rate_w * hb) + 4 * kern)
        if ring:
            # CP ring (TE AttnFuncWithCPAndKVP2P): one attention call per ring step, and the partial
            # results are merged: forward reads each step's BF16 output (+ LSE) and rescales the BF16
            # output accumulator (read + write), backward adds each step's dQ (local) and the travelling
            # dK, dV into their accumulators: 2 + 2 + 2 B per element per step. PyTorch's context_parallel
            # keeps the accumulators in FP32 (convert_to_f32: _SDPAMerger upcasts each step's output and
            # LSE, the backward accumulates dQ, dK, dV in float32 and rotates dK, dV in float32): 2 + 4 + 4 B
            steps = c - 1.0
            acc = 10.0 if st.cp_torch_ring else 6.0
            out_elems = b * s_q * heads * dv
            dq_elems = b * s_q * heads * dq
            kv_e = b * s_q * kv_elems_per_token(st)
            attn_f = attn_f + np.where(c > 1, mem_time(hw, c * acc * out_elems, 2.0 * steps + 1.0), 0.0)
            attn_b = attn_b + np.where(c > 1, mem_time(hw, c * acc * (dq_elems + kv_e), 4.0 * steps + 1.0), 0.0)
        zero = np.zeros_like(tok)
        return AttentionCore(attn_f * np.ones_like(tok), attn_b * np.ones_like(tok), zero, zero)
    bh = b * heads
    # unfused: batched GEMMs at the BF16 peak (FP8/FP4 recipes keep attention in BF16), or with a TF32 / FP32
    # step at that dtype's peak on 4-byte operands; the score kernels move act_bytes per element
    ab = st.act_bytes
    wide = ab > 2.0
    pk = hw.peak if wide else hw.peak_bf16
    qk_f = gemm_time(hw, s_q, s, dq, bh, in_bytes=ab, peak=pk)
    pv_f = gemm_time(hw, s_q, dv, s, bh, in_bytes=ab, peak=pk)
    qk_b = gemm_time(hw, s_q, dq, s, bh, in_bytes=ab, peak=pk) + gemm_time(hw, s, dq, s_q, bh, in_bytes=ab, peak=pk)
    pv_b = gemm_time(hw, s_q, s, dv, bh, in_bytes=ab, peak=pk) + gemm_time(hw, s, dv, s_q, bh, in_bytes=ab, peak=pk)
    scores = b * heads * s_q * s
    drop = 5.0 if model.dropout else 0.0
    w = ab / 2.0  # 1.0 for 16-bit scores (exact: the 16-bit sums are unchanged)
    return AttentionCore(qk_f + pv_f, qk_b + pv_b,
                         mem_time(hw, scores * (4.0 + drop) * w, 2),  # scale-mask-softmax r/w, dropout r/w/mask
                         mem_time(hw, scores * (6.0 + drop) * w, 2))

"""MoE layer compute of one micro-batch on one rank, as Megatron-Core runs it: router + top-k, token
permutation, the routed experts' GEMMs (TE ``GroupedLinear``: one GEMM per local expert), the expert
activation, FP8 casts of the expert inputs, shared experts. The EP all-to-all (dispatch + combine) is
priced in ``ep_comm.py`` from the bytes given here.

Interface: ``moe_layer(st) -> MoELayer``; all fields zero for a dense model. The composer
(``sim.costs.stage_costs``) weights them by the share of MoE layers.

* ``fwd_s``/``bwd_s``: GEMMs. Router [T, E, h] in BF16; each of the ``E/ep`` local experts runs its own
  fc1 [m, f_e*(2 if SwiGLU)/etp, h] and fc2 [m, h, f_e/etp] with m = T*k*ep*etp/E tokens (T = tokens
  entering the layer on the rank, ``tok/t`` with SP). TE's GroupedLinear launches one cuBLAS GEMM per
  expert on several streams (Megatron ``--moe-grouped-gemm`` help text), so the experts' tiles fill
  the SMs together (wave quantisation over all of them) but every expert GEMM is its own kernel
  (``kernel_overhead`` each) with its own tile quantisation and K efficiency: small experts (few tokens
  per expert, narrow f_e) lose efficiency through those terms and through the memory roofline (each
  expert's weights are read once per GEMM). Shared experts: dense GEMMs on all T*t tokens of the
  TP group, TP-split like the dense MLP, run after the routed experts (no shared-expert overlap).
* ``mem_fwd_s``/``mem_bwd_s``: HBM-bound kernels. Router scores, top-k and aux loss on [T, E] FP32
  (~10 kernels); ``permute`` (gather T rows of h into T*k rows) and ``unpermute`` (weighted scatter
  back), plus, when several local experts receive tokens from several EP ranks, the re-sort of the
  received chunks from rank-major to expert-major order and back (Megatron alltoall dispatcher
  ``sort_chunks_by_idxs``); the expert activation (SwiGLU reads 2 f_e, writes f_e; backward reads
  3 f_e, writes 2 f_e; a clamped GLU -- GPT-OSS -- adds Megatron-Core's eager clamp + concatenate passes
  over the fc1 output, ``megatron/core/fusions/fused_bias_geglu.py`` ``weighted_bias_quick_geglu_impl``);
  with FP8/FP4 GEMMs the expert inputs, output gradients and weights are quantised per expert by the step
  dtype's recipe (``fp8.quant_time``, the dense layers' function: tensorwise 6 B per element with its amax
  pass, MXFP8 4.06 B, NVFP4 5.1 B; the weights once per step where TE caches them). Backward moves the same permutation bytes
  (the gradients go through the same gathers/scatters).
  With ``linear_bias`` (GPT-OSS) the routed experts' fc2 bias is added per expert, scaled by the router
  probability, in eager PyTorch (``expert_bias_time``: 12 B per element of the fc2 output forward, 16 B
  backward, in BF16).
* ``recompute_fwd_s``: what Megatron's fine-grained selective recompute of MoE recipes redoes in the
  backward (``--recompute-modules moe_act layernorm``): the expert activation and the two norms.
* ``a2a_bytes``: bytes each rank sends in one dispatch all-to-all (T*k rows of h in BF16).

``host_idle(st, gpu_fwd_s, gpu_bwd_s)``: GPU idle time of one MoE layer while the host issues it.
Dropless routing makes the expert split sizes data-dependent; Megatron's token dispatcher copies the
tokens-per-expert counts to the host (a device-to-host synchronisation, ``cuda_sync_point``) before the
all-to-all and the grouped GEMMs, which need them as host integers. At that point the GPU queue is
empty: the GPU waits for the copy and for the host to issue the kernels after it, which in eager mode
(no CUDA graph over the MoE block) come one Python/launch call at a time, each slower to issue than the
small router / permutation / per-expert kernels are to run. Two parts: ``moe_host_layer`` (S), the GPU
time lost per MoE layer and micro-batch (forward + backward) this way, exposed whole (1/3 forward, 2/3
backward): a per-host-platform constant FITTED on the MoE rows (efficiency.yaml ``fitted``; it also
absorbs how much of the layer the platform's usual Megatron configuration captures in CUDA graphs);
and ``moe_host_expert`` x local experts (H, sourced: TE GroupedLinear prepares, quantises and launches
every expert's GEMMs separately; TE issues #1499, #2897), which hides under the block's own GPU work
(``gpu_*_s``: its GEMMs, permutation kernels and all-to-alls): idle = S + max(0, H - gpu). Token drop padded
to capacity (``ModelSpec.moe_token_drop``: Megatron's ``drop_and_pad``, static split sizes, ``cuda_sync_point``
"no_sync") has no sync: S = 0, only max(0, H - gpu).

Stacks (``SoftwareStack.moe_experts_impl``): the above is Megatron's (TE GroupedLinear). torchtitan runs the
experts as one ``torch._grouped_mm`` per projection (no per-expert kernels or host preparation) and syncs
with the host only for its EP all-to-all split sizes, once per layer in the forward (the combine and the
backward reuse the host-side splits), so it has no ``moe_host_expert`` term and, at EP > 1 only, a forward
stall ``moe_sync_stall`` (SOURCED, not Megatron's fitted S: 650 us, torchtitan's eager dispatch minus its
combine for the same payload on 2x H100, meta-pytorch/kraken PR #32; efficiency.yaml; ASSUMED the same
on other chips). MegaBlocks' dropless MoE (llm-foundry's ``mb_dmoe`` FFN; ``moe_experts_impl =
"megablocks-gmm"``) also runs one grouped GEMM per projection (``grouped_gemm.ops.gmm``), but that kernel
takes the tokens-per-expert as a host tensor (megablocks/layers/mlp.py ``GroupedMLP.forward``:
``batch_sizes = tokens_per_expert.cpu()``), so it syncs in every MoE layer, EP 1 included: the same
forward stall (ASSUMED equal to torchtitan's), no per-expert host terms.

DeepSpeed-MoE (``moe_experts_impl = "deepspeed-einsum"``: the deepspeed / Megatron-DeepSpeed stacks) runs
GShard's formulation (deepspeed/moe/sharded_moe.py ``MOELayer.forward``, ``top1gating`` / ``top2gating`` /
``topkgating``): with ``drop_tokens`` (the default) every expert takes a fixed capacity C = k * cf * S / E
of the S tokens of the rank (cf = ``capacity_factor``, default 1.0 in ``deepspeed.moe.layer.MoE``), so
the buffers have static shapes and nothing waits for the host: no stall S, only the per-expert host cost
beyond the GPU work (its ``Experts`` module loops over the local experts, one kernel set each). The
dispatch and combine are dense einsums over an [S, E, C] mask: ``sec,sm->ecm`` gathers the capacity
buffer as a GEMM contracting over the S tokens ([E*C, S] x [S, h]) and ``sec,ecm->sm`` scatters it back
([S, E*C] x [E*C, h]), 2 * S * E*C * h FLOPs each in the forward (backward: the input gradient of the dispatch, the expert-output and
combine-weight gradients of the combine, three more of the same size), which grows with the square of
the tokens per rank. The gating builds the FP32 combine weights [S, E, C] (one ``se,sc->sec`` product
per k, summed), their boolean dispatch mask, and the two casts to the activation dtype the einsums
take; backward casts the combine-weight gradient back and reduces it to the gates. With TP every rank
gates and dispatches the S tokens it holds (all of the micro-batch's without sequence parallelism) and
keeps 1/t of the capacity slots
(``drop_tokens``) for the all-to-all and its experts. The expert buffers travel as one plain all-to-all
(no token deduplication across domains).

Routing: balanced by default (every local expert gets the same m). The published MoE benchmarks force balanced
routing (``--moe-router-force-load-balancing``; validation README); with a capacity factor and padding to
capacity (``tokendrop`` runs) m is the capacity, which under balanced routing is the same m. A run with its
real router (``ModelSpec.moe_load_imbalance`` = u > 1: the max / mean token load of the EP ranks of one MoE
layer) waits in every MoE layer for its most-loaded rank: that rank's expert GEMMs see u*m tokens, its
received-token re-sort, activation, casts and fc2 bias run over u times the rows, and its all-to-all
receive (dispatch) and send (combine) carry u times the balanced bytes, which bound the collective. The
router, the sender-side permutation of the rank's own T tokens, shared experts, attention and the host
stall do not change. DeepSpeed-MoE's fixed capacity buffers drop an over-subscribed expert's excess
instead of waiting (u ignored). The value the validator uses for real routing,
``workload.model.REAL_ROUTING_LOAD_IMBALANCE`` = 1.75, is derived from NVIDIA Megatron-MoE-ModelZoo's
forced-balance / dropless pairs (best_practice/qwen3/readme.md "Long Context": Qwen3-235B-A22B, 256 H100,
TP4 PP8 VPP4 EP8, 16K-128K tokens, the same 16,384 tokens per rank and micro-batch at every length): this
model reproduces the published step ratios 1.245 / 1.209 / 1.150 / 1.090 with u = 1.70 / 1.76 / 1.79 / 1.77
(one value for all four, though the ratios fall as attention's share grows: evidence for the mechanism).
ASSUMED the same for other models, EP sizes and tokens per rank (no other published pair found).
"""

from __future__ import annotations

from typing import NamedTuple

from ... import xp as np  # numpy, or plain numbers for one plan (clustertwin/xp.py)
from ..kernels import gemm_time, gemm_train_time, mem_time
from .fp8 import quant_time
from .stage import Stage

# DeepSpeed-MoE capacity factor: ``deepspeed.moe.layer.MoE(capacity_factor=1.0)`` (training default; the
# gate multiplies it by k); a run that sets another value is not described by any column (ASSUMPTION)
DEEPSPEED_CAPACITY_FACTOR = 1.0


class MoELayer(NamedTuple):
    fwd_s: np.ndarray
    bwd_s: np.ndarray
    mem_fwd_s: np.ndarray
    mem_bwd_s: np.ndarray
    a2a_bytes: np.ndarray
    recompute_fwd_s: np.ndarray


def load_imbalance(st: Stage) -> float:
    """max / mean token load of the EP ranks (``ModelSpec.moe_load_imbalance``; module docstring "Routing");
    1 on DeepSpeed-MoE's capacity buffers (static shapes: an over-subscribed expert drops, it does not wait)."""
    return 1.0 if getattr(st, "moe_einsum", False) else float(getattr(st.model, "moe_load_imbalance", 1.0) or 1.0)


def tokens_per_expert(st: Stage):
    """Tokens one local expert GEMM of the most-loaded EP rank sees per micro-batch (the balanced share times
    the load imbalance), and the local expert count."""
    model = st.model
    E, k = float(model.num_experts), float(model.moe_topk)
    tok_rank = st.tok / st.t
    return tok_rank * k * st.e * st.etp / E * load_imbalance(st), E / st.e


def host_idle(st: Stage, gpu_fwd_s, gpu_bwd_s):
    """(forward, backward) GPU idle time of one MoE layer waiting for the host (see module docstring)."""
    if not st.model.is_moe:
        z = np.zeros_like(st.tok)
        return z, z
    eff = st.hw.eff
    _, local = tokens_per_expert(st)
    if st.moe_grouped_mm:  # one grouped-GEMM launch for all experts; torchtitan syncs only in the EP
        # dispatch, MegaBlocks in every layer (its group sizes live on the host); one sync, in the forward
        stall = np.where((st.e > 1) | st.moe_sync_ep1, eff.moe_sync_stall_s, 0.0) * np.ones_like(local)
        return stall, np.zeros_like(stall)
    elif st.moe_einsum:  # DeepSpeed-MoE: static capacity shapes, no sync; the host issues ahead of the GPU
        host = eff.moe_host_expert_s * local
        stall = np.zeros_like(local)
    else:
        host = eff.moe_host_expert_s * local
        # exposed whole: the GPU queue is empty at the sync. Token drop padded to capacity has static split
        # sizes (MoEAlltoAllTokenDispatcher.preprocess returns before any device-to-host copy, cuda_sync_point
        # "no_sync"): no sync, so the host issues ahead and only its per-expert work beyond the GPU's shows
        stall = 0.0 if getattr(st.model, "moe_token_drop", False) else eff.moe_host_layer_s
    gf, gb = glu_clamp_sync_stall(st)
    return (stall / 3.0 + np.maximum(0.0, host / 3.0 - gpu_fwd_s) + gf,
            2.0 * stall / 3.0 + np.maximum(0.0, 2.0 * host / 3.0 - gpu_bwd_s) + gb)


def glu_clamp_sync_stall(st: Stage):
    """(forward, backward) GPU idle of the host syncs in Megatron-Core's clamped GLU (GPT-OSS).

    ``weighted_bias_quick_geglu_impl`` (megatron/core/fusions/fused_bias_geglu.py, Megatron-LM main @1fb2a0c and
    @034fd2d) builds its offset operand with ``torch.tensor(linear_offset, dtype=..., device=input.device)`` on
    every call: a host-to-device copy from pageable memory with ``non_blocking=False``, which PyTorch runs as
    ``memcpy_and_sync`` (c10/cuda/CUDAFunctions.h: ``cudaMemcpyAsync`` + ``cudaStreamSynchronize``;
    pytorch/pytorch#120996: ``torch.tensor(3.14, device=dev)`` is reported as a synchronizing operation,
    ``torch.full`` is not). The stream drains and the GPU waits while the host issues the kernels after it
    (the fused activation, fc2's GroupedLinear, the per-expert bias loop). Once per MoE layer in the forward,
    and once more in the backward when the ``moe_act`` selective recompute re-runs the activation (Megatron's
    MoE recipes: recompute code 1 on a MoE model); full recompute repeats the forward's (``stage_costs`` adds
    the forward host idle to the backward). ASSUMED: each costs ``moe_sync_stall`` (650 us, the eager
    sync-and-reissue cost the grouped-GEMM MoE paths take, efficiency.yaml; MegaBlocks' ``.cpu()`` sync
    assumes the same). Only on Megatron's expert path (TE GroupedLinear): torchtitan / MegaBlocks /
    DeepSpeed-MoE do not run this function."""
    model = st.model
    z = np.zeros_like(st.tok)
    if not (getattr(model, "glu_clamp", False) and model.swiglu and model.is_moe) or st.moe_grouped_mm or st.moe_einsum:
        return z, z
    one = st.hw.eff.moe_sync_stall_s + z
    return one, np.where(st.rc == 1, one, z)


def grouped_gemm_train_time(st: Stage, M, N, K, experts, *, in_bytes: float):
    """(forward, backward) of one GroupedLinear: ``experts`` GEMMs of [M, N, K] each, one kernel per
    expert (fprop; dgrad + wgrad in the backward), their tiles sharing the SMs (see module docstring)."""
    hw = st.hw
    per_expert = 0.0 if st.moe_grouped_mm else 1.0  # torch._grouped_mm: one kernel for all experts
    extra = per_expert * np.maximum(np.asarray(experts, dtype=float) - 1.0, 0.0) * hw.eff.kernel_overhead_s
    f = gemm_time(hw, M, N, K, experts, in_bytes=in_bytes) + extra
    b = (gemm_time(hw, M, K, N, experts, in_bytes=in_bytes) + gemm_time(hw, K, N, M, experts, in_bytes=in_bytes)
         + 2.0 * extra)
    return f, b


def moe_layer(st: Stage) -> MoELayer:
    model, hw, tok = st.model, st.hw, st.tok
    if not model.is_moe:
        z = np.zeros_like(tok)
        return MoELayer(z, z, z, z, z, z)
    ib, t, e, etp_f = st.in_bytes, st.t, st.e, st.etp
    h = float(model.hidden_size)
    mats = 2.0 if model.swiglu else 1.0
    E, k, fe = float(model.num_experts), float(model.moe_topk), float(model.moe_ffn_hidden_size)
    tok_rank = tok / t  # tokens entering the MoE layer on this rank (SP / TP-sharded)
    m_exp, local = tokens_per_expert(st)
    uf, ub = grouped_gemm_train_time(st, m_exp, mats * fe / etp_f, h, local, in_bytes=ib)
    df, db = grouped_gemm_train_time(st, m_exp, h, fe / etp_f, local, in_bytes=ib)
    moe_f, moe_b = uf + df, ub + db
    if model.num_shared_experts:
        fsh = fe * model.num_shared_experts
        sf, sb = gemm_train_time(hw, tok, mats * fsh / t, h, in_bytes=ib)
        sf2, sb2 = gemm_train_time(hw, tok, h, fsh / t, in_bytes=ib)
        moe_f, moe_b = moe_f + sf + sf2, moe_b + sb + sb2
    ab = st.act_bytes  # 16-bit activations (4 B in a TF32 / FP32 step)
    rf, rb = gemm_train_time(hw, tok_rank, E, h, in_bytes=ab)  # router in BF16 (FP32 in a 32-bit step)
    moe_f, moe_b = moe_f + rf, moe_b + rb

    # ---- HBM-bound kernels ----
    rows = m_exp * local  # token-expert rows this rank's experts process (= T*k*etp under balance)
    router = mem_time(hw, tok_rank * E * 4.0 * 8.0, 10)  # FP32 logits/scores/top-k/aux loss, ~4 r/w passes
    sort = np.where((e > 1) & (local > 1), 1.0, 0.0)  # received chunks re-sorted by expert and back
    perm_bytes = ab * h * (2.0 * (tok_rank + tok_rank * k) + 4.0 * sort * rows)
    perm = mem_time(hw, perm_bytes, 2.0 + 2.0 * sort)
    act_f_bytes = ab * rows * (mats + 1.0) * fe / etp_f
    act_b_bytes = ab * rows * (2.0 * mats + 1.0) * fe / etp_f
    act_f, act_b = mem_time(hw, act_f_bytes, 1), mem_time(hw, act_b_bytes, 1)
    if model.glu_clamp and model.swiglu:
        # clamped GLU (GPT-OSS): Megatron-Core's weighted_bias_quick_geglu_impl clamps the two halves of the
        # fc1 output and concatenates them again in eager PyTorch before the fused activation. In units of
        # U = BF16 bytes of one half (rows x f_e): forward two clamps (read + write a half: 2 U each) and
        # the cat (read + write both halves: 4 U); backward the two clamp gradients (read the gradient and
        # the saved input, write the gradient: 3 U each; the cat's backward is views) and the gradient of
        # the chunk that split the fc1 output into the halves (PyTorch's split_backward concatenates the two
        # half gradients: read + write 4 U, one kernel). The selective recompute of moe_act redoes the
        # forward part (recompute_fwd_s includes act_f).
        u = ab * rows * fe / etp_f
        clamp_f = mem_time(hw, 8.0 * u, 3)
        act_f, act_b = act_f + clamp_f, act_b + mem_time(hw, 10.0 * u, 3)
    cast_f = cast_b = np.zeros_like(tok)
    if st.fp8:  # per-expert quantisation of GEMM inputs (fwd), output gradients (bwd) and weights (fp8.py)
        w_elems = local * h * (mats + 1.0) * fe / etp_f
        cast_f, cast_b = quant_time(hw, hw.dtype, x_elems=rows * (h + fe / etp_f), dy_elems=rows * (mats * fe / etp_f + h),
                                    w_elems=w_elems, operands=2.0 * local,
                                    weight_share=np.where(st.fp8_weight_cache, 1.0 / np.maximum(st.m, 1.0), 1.0),
                                    rht=st.nvfp4_rht, mx_per_layout=st.mx_per_layout)
    if st.moe_einsum:  # DeepSpeed-MoE: the einsum dispatch / combine replace the permutation kernels; with
        # TP every rank gates and dispatches all tokens it holds (all of them without sequence parallelism),
        # then keeps 1/t of the capacity slots (drop_tokens)
        gf, gb, perm_f, perm_b = _einsum_dispatch(st, st.tok_sp, h, k)
        moe_f, moe_b = moe_f + gf, moe_b + gb
    else:
        perm_f = perm_b = perm
    bias_f, bias_b = expert_bias_time(st, rows, local)
    mem_f = router + perm_f + act_f + cast_f + bias_f
    mem_b = router + perm_b + act_b + cast_b + bias_b
    norms = mem_time(hw, 2.0 * 2.0 * ab * h * st.tok_sp, 2)  # two RMSNorms, read + write h
    # the most-loaded rank receives (dispatch) and sends back (combine) imbalance x its balanced share
    return MoELayer(moe_f, moe_b, mem_f, mem_b, tok_rank * k * h * ab * load_imbalance(st), act_f + norms)


def expert_bias_time(st: Stage, rows, local):
    """(forward, backward) of the routed experts' fc2 bias on a model with ``linear_bias`` (GPT-OSS), as
    Megatron-Core runs it: TE ``GroupedLinear`` fc1 adds its bias inside the GEMM (``skip_bias_add=False``),
    but fc2 returns its bias (``skip_bias_add=True``) so that ``TEGroupedMLP._apply_bias`` can scale it by
    each token's router probability: ``torch.cat([t + b * p for t, b, p in zip(split(out), biases,
    split(probs))])`` in eager PyTorch, one expert at a time (megatron/core/transformer/moe/experts.py).
    In units of one activation-dtype pass over the ``rows`` x h fc2 output (probs in the activation dtype:
    ``moe_router_dtype`` None, "no changes for dtype"): forward ``b * p`` writes 1, ``t + .`` reads 2 and
    writes 1, the cat reads 1 and writes 1 (6); backward the bias gradient ``(g * p).sum(0)`` and the
    probability gradient ``(g * b).sum(-1)`` each read g, write the product and reduce it (6; the cat's
    and the add's backward are views), and the ``torch.split`` of the fc2 output gets its gradient back as
    one tensor (PyTorch's split_backward concatenates the per-expert gradients: read + write, 2). Kernels:
    2 per local expert + the cat forward, 4 per local expert + that cat backward. Zero without
    ``linear_bias`` and on the torchtitan / MegaBlocks / DeepSpeed expert paths
    (their bias handling is not modelled). Attention and other linear biases ride in the GEMM epilogue."""
    hw = st.hw
    if not getattr(st.model, "linear_bias", False) or st.moe_grouped_mm or st.moe_einsum:
        z = np.zeros_like(st.tok)
        return z, z
    el = rows * float(st.model.hidden_size)
    a = st.act_bytes
    return mem_time(hw, 6.0 * a * el, 2.0 * local + 1.0), mem_time(hw, 8.0 * a * el, 4.0 * local + 1.0)


def _einsum_dispatch(st: Stage, S, h: float, k: float):
    """(GEMM forward, GEMM backward, HBM forward, HBM backward) of DeepSpeed-MoE's einsum dispatch and combine
    of one layer on one rank (module docstring): S tokens, E*C = k * cf * S capacity slots."""
    hw, ab = st.hw, st.act_bytes
    # in the activation dtype: BF16 in FP8 / FP4 steps (the BF16 peak), 4-byte operands at the step's peak
    # in a TF32 / FP32 step
    pk = hw.peak if ab > 2.0 else hw.peak_bf16
    ec = k * DEEPSPEED_CAPACITY_FACTOR * S  # E * C
    disp = gemm_time(hw, ec, h, S, in_bytes=ab, peak=pk)  # sec,sm->ecm: [E*C, S] x [S, h]
    comb = gemm_time(hw, S, h, ec, in_bytes=ab, peak=pk)  # sec,ecm->sm: [S, E*C] x [E*C, h]
    comb_w = gemm_time(hw, S, ec, h, in_bytes=ab, peak=pk)  # combine-weight gradient: [S, h] x [h, E*C]
    fwd = disp + comb
    bwd = comb + disp + comb_w  # dispatch input grad [S, h, E*C]; combine: expert-output grad, weight grad
    sec = S * ec  # elements of one [S, E, C] tensor
    # forward, B per element: the FP32 combine weights (top-1: gates x one-hot locations, written 4; top-2:
    # two such products summed, 8 + 12; top-k: a [S, E, C] one-hot written 4, times the gates, 4 + 4), the
    # boolean dispatch mask (4 + 1) and the two casts to the activation dtype (1 + a, 4 + a; a = 2 B); backward:
    # the combine-weight gradient cast back (a + 4) and its reduction to the gates (4 per product read; top-k
    # reads the one-hot too)
    fwd_b = sec * np.where(k == 1, 4.0, np.where(k == 2, 20.0, 12.0)) + sec * (5.0 + (1.0 + ab) + (4.0 + ab))
    bwd_b = sec * ((ab + 4.0) + np.where(k == 1, 4.0, 8.0))
    return fwd, bwd, mem_time(hw, fwd_b, 5.0), mem_time(hw, bwd_b, 2.0)

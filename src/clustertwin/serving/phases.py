"""Forward-pass (serving) costs from the training op model: one engine iteration of prefill and decode tokens.

The GEMMs, element-wise kernels and collectives are timed with the same primitives as a training step
(``sim.kernels.gemm_time`` with tile/wave quantisation, ``sim.kernels.mem_time``, the single
``sim.comm.collective_time`` call site, ``sim.machine.make_hardware`` with the per-chip efficiency data),
forward only. The training components (``sim/components``) are shaped around one micro-batch's forward
and backward (``Stage``); serving needs the forward of a pass that mixes decode and prefill tokens, with
KV reads, active-expert counts and DP-attention, so it composes the same primitives here. A decode step is therefore HBM-bound at small batch (each
GEMM reads its weights once per step: ``gemm_time`` takes max(compute, bytes)) and turns compute-bound as
the batch grows; prefill is compute-bound. What serving adds (docs/serving.md):

* KV cache: GQA/MHA ``2 g d`` elements per token and layer, MLA ``kv_lora_rank + qk_rope_head_dim``
  (the compressed latent, one copy shared by all heads), at the KV dtype (FP8 = 1 B, BF16 = 2 B).
* decode attention: reads the KV of every sequence (bytes / HBM) and, for MLA with absorbed up-projections,
  computes ``2 a L_kv (2 r_kv + d_rope)`` FLOPs per token and layer, whichever is slower; prefill attention
  is ``2 a (d_qk + d_v)`` FLOPs per query-key pair (causal) at the fused-attention efficiency of the chip.
* MoE: tokens routed top-k, the expected number of distinct experts touched (each active expert's weights
  are read once per step), the busiest GPU's token load (mean + z sigma with z = sqrt(2 ln EP); sigma: the
  binomial spread of random routing plus the model's measured hot-expert spread, ``routing_rank_cv``),
  dispatch (FP8) / combine (BF16) all-to-all over the EP group (the busiest rank's bytes).
* DP-attention: attention (and dense layers) data-parallel, each rank its own batch; experts shared.

Units: seconds, bytes, FLOPs. All functions broadcast over numpy arrays of token counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ..errors import InputError
from ..hardware import ScaleOutTech, SystemSpec
from ..placement import ranks_per_domain
from ..sim.comm import ALL_REDUCE, ALL_TO_ALL, collective_time
from ..sim.kernels import gemm_time, mem_time
from ..sim.machine import Hardware, make_hardware, mamf_for
from ..workload.model import ModelSpec
from .engines import (
    EnginePreset,
    family_note,
    family_value,
    low_precision_k_overhead,
    low_precision_k_reference,
    serving_chip_constants,
)

DTYPE_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "mxfp8": 1.0, "int8": 1.0,
               "nvfp4": 0.5625, "fp4": 0.5625, "int4": 0.5,  # NVFP4: 4-bit + one FP8 scale per 16 values
               "w4a8": 0.5, "w8a16": 1.0}  # weight-only / mixed formats: group scales not counted
# Coherent CPU memory a GPU can stream weights from (NVLink-C2C), bytes/s per direction per GPU.
# NVIDIA GB200/GB300 NVL72 pages: Grace-Blackwell superchip, NVLink-C2C 900 GB/s bidirectional; taken
# per GPU (450 GB/s each way), an ASSUMPTION where the per-GPU share of the superchip link is not printed.
HOST_LINK_BW = {"gb200": 450e9, "gb300": 450e9}
# KV share kept in HBM when weights spill to host memory: at least this fraction of usable HBM (assumed).
MIN_KV_SHARE = 0.25
GEMM_DTYPE = {"bf16": "bf16", "fp16": "bf16", "fp8": "fp8", "int8": "int8", "nvfp4": "nvfp4", "fp4": "nvfp4",
              # weight-only formats dequantise to BF16 GEMMs (W4A16 AWQ/GPTQ/Marlin, W8A16); W4A8 runs FP8 GEMMs
              "int4": "bf16", "w8a16": "bf16", "w4a8": "fp8"}
# Precision of the attention projections (Q/KV down- and up-projections, output projection) when a run
# does not state it. NVIDIA's NVFP4 checkpoints of MoE models quantize the expert and dense-MLP linears
# and keep every attention projection in BF16: Model Optimizer hf_quant_config.json "exclude_modules"
# lists "model.layers.*.self_attn*" and "lm_head" (huggingface.co nvidia/DeepSeek-R1-0528-NVFP4,
# nvidia/GLM-4.7-NVFP4, nvidia/MiniMax-M2.5-NVFP4); TensorRT-LLM tech blog 1 (DeepSeek-R1 on B200)
# precision table: attention modules bf16, dense FFN and MoE nvfp4; tech blog 3: "97% of the weights
# ... are from MoE layers", about 80 GB of weights + activations per GPU at DP8/EP8, which holds with BF16
# attention (~58 GB if it were FP4). Dense NVFP4 checkpoints (Llama) quantize the attention too.
MOE_FP4_ATTENTION_DTYPE = "bf16"


KV_POLICIES = ("reserve", "on_demand")


@dataclass(frozen=True, slots=True, kw_only=True)
class Deployment:
    """How one serving instance (engine) is laid out and configured.

    ``tp`` GPUs per instance for dense models (tensor parallel); for MoE with ``ep > tp`` (SGLang/DeepSeek
    convention: ``--tp 1 --ep 32 --dp-attention``) the instance spans ``ep`` GPUs. ``dp_attention``: each
    GPU (or each ``attn_tp`` group) runs attention on its own batch. ``max_batch`` is the in-flight request
    limit per attention rank, ``max_num_tokens`` the token budget of one forward pass per attention rank.
    """

    tp: int = 1
    ep: int = 1
    pp: int = 1
    dp_attention: bool = False
    attn_tp: int = 0  # 0: tp (or 1 with dp_attention)
    weights_dtype: str = "bf16"
    # attention projections: a dtype, or per projection "o=nvfp4,q_b=fp8[,dtype for the rest]" (MLA: q_a, q_b,
    # kv_a, kv_b, o; GQA/MHA: qkv, o); "": weights_dtype (BF16 for MoE NVFP4, see MOE_FP4_ATTENTION_DTYPE)
    attn_weights_dtype: str = ""
    kv_dtype: str = "bf16"
    attention_dtype: str = ""  # attention math over an FP8 KV cache: "fp8" | "bf16" | "" (engine's fp8_attention)
    max_batch: int = 0  # 0: engine default
    max_num_tokens: int = 0  # 0: engine default
    spec_tokens: int = 0  # draft tokens verified per step (MTP depth / EAGLE length)
    acceptance: float = 0.0  # per-draft-token acceptance probability
    prefix_hit_rate: float = 0.0  # share of prompt tokens served from the prefix cache
    chunked_prefill: bool = True  # False: a prompt is prefilled whole in one pass
    scheduler_steps: int = 1  # multi-step scheduling (vLLM num_scheduler_steps): new requests join every k passes
    # KV-cache admission (serving/simulate.py): "reserve" = a request reserves its prompt + whole output on
    # admission, never evicted (TensorRT-LLM GUARANTEED_NO_EVICT, its default); "on_demand" = blocks are taken
    # as tokens are computed and the newest requests are paused (KV freed, recomputed on resume) when the
    # cache is full (TensorRT-LLM MAX_UTILIZATION)
    kv_policy: str = "reserve"

    @property
    def gpus(self) -> int:
        return max(self.tp, self.ep) * self.pp


@dataclass(frozen=True, slots=True)
class Instance:
    """A resolved serving instance: model, hardware view, layout and its memory budget."""

    model: ModelSpec
    hw: Hardware
    dep: Deployment
    engine: EnginePreset
    gpus: int
    attn_tp: int
    attn_dp: int
    ep: int
    moe_tp: int
    layers: float  # layers per GPU (pipeline stage)
    weight_bytes_gpu: float
    kv_bytes_token_gpu: float  # KV bytes per token held on each GPU of the token's attention rank
    kv_capacity_tokens: float  # tokens of KV cache one attention rank can hold
    offload_bytes_gpu: float  # weights streamed from host memory every pass (NVLink-C2C), 0 if they fit
    max_batch: int
    max_num_tokens: int
    w_bytes: float  # bytes per weight element of the GEMMs
    kv_elem_bytes: float
    notes: tuple[str, ...]
    attn_hw: Hardware | None = None  # hardware view of the attention projections (None: hw)
    attn_w_bytes: float = 0.0  # bytes per weight element of the attention projections (0: w_bytes)
    attn_proj: tuple = ()  # per projection (in attention_shapes order): (Hardware, weight bytes); () = attn_hw
    hw16: Hardware | None = None  # BF16 view: LM head and router (quantised checkpoints keep them BF16); None: hw

    @property
    def tokens_per_step(self) -> float:
        """Output tokens a sequence gains per decode step (speculative decoding / MTP)."""
        a, n = self.dep.acceptance, self.dep.spec_tokens
        return 1.0 + sum(a ** i for i in range(1, n + 1))


def kv_bytes_per_token(model: ModelSpec, kv_bytes: float) -> float:
    """KV-cache bytes of one token over all layers (MLA latent, or K and V of every KV head)."""
    if model.is_mla:
        return model.num_layers * (model.kv_lora_rank + model.qk_rope_head_dim) * kv_bytes
    return model.num_layers * 2.0 * model.num_kv_heads * model.head_dim * kv_bytes


def attention_projections(model: ModelSpec) -> tuple[str, ...]:
    """Names of the attention projections, in the order ``attention_shapes`` lists them."""
    if model.is_mla:
        return ("q_a", "q_b", "kv_a", "kv_b", "o") if model.q_lora_rank else ("q", "kv_a", "kv_b", "o")
    return ("qkv", "o")


def attention_shapes(model: ModelSpec, t: float = 1.0) -> list[tuple[float, float]]:
    """(N, K) of every attention projection GEMM after an attention-TP split ``t``."""
    h, a = float(model.hidden_size), float(model.num_attention_heads)
    if model.is_mla:
        rq, rkv = float(model.q_lora_rank), float(model.kv_lora_rank)
        dn, dr, dv = float(model.qk_nope_head_dim), float(model.qk_rope_head_dim), float(model.v_head_dim)
        shapes = [(rq, h), (a * (dn + dr) / t, rq)] if rq else [(a * (dn + dr) / t, h)]
        return shapes + [(rkv + dr, h), (a * (dn + dv) / t, rkv), (h, a * dv / t)]
    g, d = float(model.num_kv_heads), float(model.head_dim)
    return [((a / t + 2.0 * max(g / t, 1.0)) * d, h), (h, a * d / t)]


def _attn_dtypes(model: ModelSpec, spec: str, default: str) -> dict[str, str]:
    """Per-projection weight dtypes from ``spec`` ("bf16", or "o=nvfp4,q_b=fp8[,rest]")."""
    names = attention_projections(model)
    rest, given = default, {}
    for part in (x.strip().lower() for x in spec.split(",") if x.strip()):
        if "=" in part:
            name, dt = (x.strip() for x in part.split("=", 1))
            if name not in names:
                raise InputError(f"attention projection {name!r} is not one of {model.id}'s: {', '.join(names)}",
                                 hint="e.g. --attn-weights-dtype o=nvfp4,q_b=fp8,bf16")
            given[name] = dt
        else:
            rest = part
    out = {k: given.get(k, rest) for k in names}
    for dt in out.values():
        if dt not in GEMM_DTYPE:
            raise InputError(f"unknown attention weights dtype {dt!r}", hint="use bf16, fp8, int8, nvfp4 (or int4 / w4a8 / w8a16)")
    return out


def build_instance(model: ModelSpec, system: SystemSpec, scaleout: ScaleOutTech, dep: Deployment,
                   engine: EnginePreset, *, catalog=None) -> Instance:
    """Resolve the layout of one instance and its memory budget; clear errors for impossible layouts."""
    notes: list[str] = []
    wd = dep.weights_dtype.lower()
    if wd not in GEMM_DTYPE:
        raise InputError(f"unknown weights dtype {dep.weights_dtype!r}", hint="use bf16, fp8, int8, nvfp4 (or int4 / w4a8 / w8a16)")
    gdt = GEMM_DTYPE[wd]
    acc = system.accelerator
    if acc.peak(gdt) <= 0:
        fallback = "fp8" if acc.peak("fp8") > 0 and gdt in ("nvfp4", "int8") else "bf16"
        notes.append(f"{acc.name} has no {gdt} tensor-core peak: GEMMs run at {fallback} (weights stay {wd})")
        gdt = fallback
    # serving GEMM kernels reach a different share of MAMF than the training stacks: the engine's own value
    # for this chip (Blackwell, fitted per engine), else engines.yaml `chips` (Hopper family), else training's;
    # a chip those tables do not list takes its architecture family's value (engines.family_value)
    scale = family_value(engine.gemm_mamf_scale, acc.id, acc.arch)
    if scale is None:
        scale = serving_chip_constants(acc.id, acc.arch).get("gemm_mamf_scale")
    fam = family_note(acc.id, acc.arch)
    if fam:
        notes.append(fam)

    k_over = low_precision_k_overhead(acc.id, acc.arch)
    k_ref = low_precision_k_reference()

    def view(dt: str) -> Hardware:
        h = make_hardware(system, scaleout, dt, catalog=catalog)
        if scale is not None:
            h = replace(h, mamf=mamf_for(h.eff.mamf_fraction, dt) * float(scale))
        k0 = k_over.get(dt)
        if k0 is not None and k0 != h.eff.gemm_k_overhead:
            # low-precision GEMMs: the per-tile fixed cost (pipeline fill, scale / dequant epilogue, BF16
            # store) is a larger share of a K-loop that runs 2x (FP8) / 4x (FP4) the BF16 rate; the rate at
            # the shape MAMF was measured at (K = k_ref) is kept, so only the K-dependence changes
            norm = (k_ref + k0) / (k_ref + h.eff.gemm_k_overhead)
            h = replace(h, mamf=h.mamf * norm, eff=replace(h.eff, gemm_k_overhead=float(k0)))
        return h

    hw = view(gdt)
    default_awd = MOE_FP4_ATTENTION_DTYPE if (model.is_moe and GEMM_DTYPE[wd] == "nvfp4") else wd
    per_proj = _attn_dtypes(model, dep.attn_weights_dtype or "", default_awd)
    if not dep.attn_weights_dtype and default_awd != wd:
        notes.append(f"attention projections in {default_awd} (NVFP4 MoE checkpoints quantize the experts and MLPs only)")
    if dep.kv_policy not in KV_POLICIES:
        raise InputError(f"unknown kv_policy (--kv-policy) {dep.kv_policy!r}",
                         hint="use reserve (prompt + whole output up front, TensorRT-LLM GUARANTEED_NO_EVICT) or "
                              "on_demand (taken as generated, the newest requests paused when full: MAX_UTILIZATION)")
    if dep.attention_dtype not in ("", "fp8", "bf16"):
        raise InputError(f"unknown attention dtype {dep.attention_dtype!r}", hint="use fp8 or bf16 (or leave it to the engine preset)")
    views: dict[str, Hardware] = {gdt: hw}

    def proj_view(dt: str) -> tuple[Hardware, float]:
        g = GEMM_DTYPE[dt]
        if acc.peak(g) <= 0:
            g = "fp8" if acc.peak("fp8") > 0 and g in ("nvfp4", "int8") else "bf16"
        if g not in views:
            views[g] = view(g)
        return views[g], DTYPE_BYTES[dt]

    attn_proj = tuple(proj_view(per_proj[name]) for name in attention_projections(model))
    sizes = [N * K for N, K in attention_shapes(model)]
    aw_bytes = sum(b * z for (_, b), z in zip(attn_proj, sizes, strict=True)) / sum(sizes)  # parameter-weighted bytes
    attn_hw = attn_proj[0][0] if len({id(v) for v, _ in attn_proj}) == 1 else None
    for name in ("tp", "ep", "pp"):
        if getattr(dep, name) < 1:
            raise InputError(f"{name} must be >= 1, got {getattr(dep, name)}", hint=f"pass --{name} 1 or more")
    G = dep.gpus
    per_stage = G // dep.pp
    attn_tp = dep.attn_tp or (1 if dep.dp_attention else per_stage)
    if per_stage % attn_tp:
        raise InputError(f"attention TP {attn_tp} does not divide the {per_stage} GPUs of a pipeline stage",
                         hint="pick tp/ep so that the GPUs per stage are a multiple of the attention TP")
    attn_dp = per_stage // attn_tp
    ep = dep.ep if model.is_moe else 1
    if model.is_moe:
        if per_stage % ep:
            raise InputError(f"EP {ep} does not divide the {per_stage} GPUs of a pipeline stage", hint="use an EP that divides tp")
        if model.num_experts % ep and ep <= model.num_experts:
            notes.append(f"{model.num_experts} experts do not split evenly over EP {ep}: the busiest GPU holds ceil(E/EP)")
    moe_tp = per_stage // ep if model.is_moe else 1
    if model.num_layers < dep.pp:
        raise InputError(f"pp {dep.pp} exceeds the {model.num_layers} layers of {model.id}", hint="use a smaller --pp")
    layers = model.num_layers / dep.pp

    w_bytes = DTYPE_BYTES[wd]
    kv_elem = DTYPE_BYTES.get(dep.kv_dtype.lower(), 2.0)
    L, h, V = model.num_layers, model.hidden_size, model.vocab_size
    # weights per GPU: attention + dense MLP + shared experts split over attention TP; routed experts over
    # EP x expert-TP; embedding and LM head (BF16) vocab-parallel over attention TP
    attn_p = L * model.attention_params()
    dense_p = (L - model.num_moe_layers) * model.dense_mlp_params()
    shared_p = model.num_moe_layers * model.num_shared_experts * model.expert_params()
    experts_gpu = math.ceil(model.num_experts / ep) if model.is_moe else 0
    routed_p = model.num_moe_layers * experts_gpu * model.expert_params() / moe_tp
    emb_p = V * h * (1 if model.tied_embeddings else 2)
    weight_bytes = (attn_p / attn_tp * aw_bytes + ((dense_p + shared_p) / attn_tp + routed_p) * w_bytes) / dep.pp \
        + emb_p * 2.0 / attn_tp
    if dep.pp > 1:
        weight_bytes -= emb_p * 2.0 / attn_tp * (1 - 1 / dep.pp)  # embedding / head on the end stages only
    kv_tok = kv_bytes_per_token(model, kv_elem) / dep.pp
    if not model.is_mla:
        kv_tok /= min(attn_tp, model.num_kv_heads)  # KV heads split over TP (replicated beyond g)
    max_tokens = dep.max_num_tokens or engine.default_max_num_tokens
    act = max_tokens * (h * 2.0 * 8 + (model.ffn_hidden_size / attn_tp) * 2.0 * 3)  # forward activations of one pass
    # the KV budget starts from the driver-reported device memory, not training's plan capacity (hw.hbm_bytes
    # keeps efficiency.yaml memory_reserve_fraction back for caching-allocator fragmentation): an engine
    # pre-allocates its paged KV pool in one block, and its own memory fraction is its headroom. Two budget
    # rules (NVIDIA aiconfigurator estimate_kv_cache: "TRT-LLM free-fraction vs vLLM/SGLang total-fraction"):
    # "free" = the fraction of what is left after weights, runtime and activations (TensorRT-LLM
    # kvcacheconfig.md: free_gpu_memory_fraction 0.9 = "90% of free GPU memory (after loading weights)");
    # "total" = the fraction of the whole device, weights included (vLLM gpu_memory_utilization, SGLang
    # mem_fraction_static)
    dev = acc.memory_capacity_bytes
    if engine.kv_memory_basis == "total":
        cap = dev * engine.kv_memory_fraction - weight_bytes - act
    else:
        cap = (dev - hw.eff.runtime_overhead_bytes - weight_bytes - act) * engine.kv_memory_fraction
    offload = 0.0
    host_bw = HOST_LINK_BW.get(acc.id, 0.0)
    if cap < MIN_KV_SHARE * hw.hbm_bytes and host_bw:
        offload = MIN_KV_SHARE * hw.hbm_bytes - cap
        cap = MIN_KV_SHARE * hw.hbm_bytes
        notes.append(f"weights exceed HBM: {offload / 1e9:.0f} GB per GPU streamed from Grace memory over NVLink-C2C each pass")
    if cap <= 0:
        need = (weight_bytes + hw.eff.runtime_overhead_bytes) / 1e9
        raise InputError(
            f"{model.id} does not fit: {need:.0f} GB of weights+runtime per GPU vs {hw.hbm_bytes / 1e9:.0f} GB usable on {acc.name}",
            hint="use more GPUs per instance (--tp/--ep), lower-precision weights (--weights-dtype fp8/nvfp4) or a larger-memory GPU",
        )
    kv_capacity = cap / kv_tok
    return Instance(
        model=model, hw=hw, dep=dep, engine=engine, gpus=G, attn_tp=attn_tp, attn_dp=attn_dp, ep=ep,
        moe_tp=moe_tp, layers=layers, weight_bytes_gpu=weight_bytes, kv_bytes_token_gpu=kv_tok,
        kv_capacity_tokens=kv_capacity, offload_bytes_gpu=offload, max_batch=dep.max_batch or engine.default_max_batch,
        max_num_tokens=max_tokens, w_bytes=w_bytes, kv_elem_bytes=kv_elem, notes=tuple(notes),
        attn_hw=attn_hw, attn_w_bytes=aw_bytes, attn_proj=attn_proj, hw16=proj_view("bf16")[0],
    )


# share of the EP ranks' hot-expert load spread an expert-parallel load balancer leaves: std of the routed
# tokens per rank with / without EPLB, 52.0 / 491.6 (DeepSeek-R1 decode, 32 GB200, EP32, 9 vs 8 slots per
# rank; TensorRT-LLM tech blog 4 "Scaling Expert Parallelism", Table 1); ASSUMED the same at other EP sizes
EPLB_RESIDUAL = 52.0 / 491.6


def routing_rank_cv(m: ModelSpec, ep: int, engine: EnginePreset) -> float:
    """Coefficient of variation of the EP ranks' routed-token load from the real router's hot experts: the
    experts' load CV (``ModelSpec.moe_expert_load_cv``, measured per model) over the ``E / ep`` experts a rank
    holds (sum of independent loads, static placement: cv / sqrt(E / ep)), times ``EPLB_RESIDUAL`` where the
    engine balances expert placement. Check: DeepSeek-R1 at EP32 gives 1.28 / sqrt(8) = 0.45 against the
    0.48 per-rank CV that the same table measures (491.6 / 1024). 0 for a model without a measured CV."""
    cv = float(m.moe_expert_load_cv or 0.0)
    if cv <= 0.0 or ep <= 1 or not m.num_experts:
        return 0.0
    per_rank = max(1.0, m.num_experts / ep)
    return cv / math.sqrt(per_rank) * (EPLB_RESIDUAL if engine.eplb else 1.0)


def _gemm(hw: Hardware, M, N, K, batch=1.0, *, in_bytes: float = 2.0):
    """``gemm_time`` with split-K for skinny (decode) GEMMs: when the output tiles cannot fill the SMs,
    serving kernels split K into ``s`` slices (s partial GEMMs of K/s, CUTLASS split-K / stream-K), so
    the GEMM is timed as ``s`` batched GEMMs of depth K/s (same FLOPs and weight bytes, all SMs busy)."""
    e = hw.eff
    M = np.maximum(np.asarray(M, dtype=float), 1.0)
    tiles = np.ceil(M / e.gemm_tile_m) * np.ceil(float(N) / e.gemm_tile_n) * np.asarray(batch, dtype=float)
    s = np.clip(np.floor(e.num_sms / np.maximum(tiles, 1.0)), 1.0, max(1.0, float(K) / max(256.0, e.gemm_k_overhead)))
    return gemm_time(hw, M, N, float(K) / s, np.asarray(batch, dtype=float) * s, in_bytes=in_bytes)


STEP_FIELDS = ("gemm_s", "attention_s", "moe_s", "elementwise_s", "tp_comm_s", "ep_comm_s", "logits_s",
               "offload_s", "overhead_s")
# Work each attention rank does on its own tokens (projections, dense MLP, attention, norms, TP all-reduce,
# LM head) vs work shared by the instance's ranks (routed experts over all ranks' tokens, EP all-to-all,
# weight streaming, host overhead). With DP-attention the ranks meet at every MoE layer, so a pass takes
# the busiest rank's own work plus the shared work (TensorRT-LLM tech blog 10 "ADP Balance Strategy":
# iteration time = max over DP ranks).
RANK_FIELDS = ("gemm_s", "attention_s", "elementwise_s", "tp_comm_s", "logits_s")
SHARED_FIELDS = ("moe_s", "ep_comm_s", "offload_s", "overhead_s")


def step_costs(inst: Instance, tokens, kv_read_tokens, prefill_pairs, logit_tokens=None, *,
               queries_per_read: float | None = None) -> dict[str, np.ndarray]:
    """Time of one forward pass on one GPU (one pipeline stage), by component.

    Per attention rank: ``tokens`` new tokens in the pass (decode + prefill chunk), ``kv_read_tokens``
    the summed KV length the decode tokens attend to, ``prefill_pairs`` the summed causal query-key pairs
    of the prefill tokens, ``logit_tokens`` the tokens that need logits (default: all ``tokens``).

    Engines with two-batch overlap (``a2a_overlap`` > 0, MoE with all-to-all) split the pass into two
    micro-batches of half the tokens; each micro-batch's dispatch/combine runs under the other's compute:
    time = 2 x (compute(n/2) + max(0, a2a(n/2) - a2a_overlap x compute(n/2))). Weights are read twice,
    so at small batch TBO loses; the engine uses whichever is faster (per pass).
    """
    q = float(1 + inst.dep.spec_tokens) if queries_per_read is None else float(queries_per_read)
    one = _step_costs(inst, tokens, kv_read_tokens, prefill_pairs, logit_tokens, q)
    if not (inst.engine.a2a_overlap and inst.model.is_moe and np.any(one["ep_comm_s"] > 0)):
        return one
    half = _step_costs(inst, np.asarray(tokens, dtype=float) / 2.0, np.asarray(kv_read_tokens, dtype=float) / 2.0,
                       np.asarray(prefill_pairs, dtype=float) / 2.0,
                       None if logit_tokens is None else np.asarray(logit_tokens, dtype=float) / 2.0, q)
    busy = sum(half[k] for k in STEP_FIELDS if k not in ("ep_comm_s", "overhead_s"))
    tbo = {k: 2.0 * half[k] for k in STEP_FIELDS}
    tbo["ep_comm_s"] = 2.0 * np.maximum(half["ep_comm_s"] - inst.engine.a2a_overlap * busy, 0.0)
    tbo["overhead_s"] = one["overhead_s"]
    t_one = sum(one[k] for k in STEP_FIELDS)
    t_tbo = sum(tbo[k] for k in STEP_FIELDS)
    use = t_tbo < t_one
    return {k: np.where(use, tbo[k], one[k]) for k in STEP_FIELDS}


def _step_costs(inst: Instance, tokens, kv_read_tokens, prefill_pairs, logit_tokens=None,
                queries: float = 1.0) -> dict[str, np.ndarray]:
    m, hw, dep, eng = inst.model, inst.hw, inst.dep, inst.engine
    n = np.maximum(np.asarray(tokens, dtype=float), 1.0)
    kv_read = np.asarray(kv_read_tokens, dtype=float)
    pairs = np.asarray(prefill_pairs, dtype=float)
    nl = n if logit_tokens is None else np.maximum(np.asarray(logit_tokens, dtype=float), 1.0)
    t, h, a = float(inst.attn_tp), float(m.hidden_size), float(m.num_attention_heads)
    wb = inst.w_bytes
    heads = a / t
    layers = inst.layers
    kern = hw.eff.kernel_overhead_s
    hw16 = inst.hw16 or hw

    # ---- attention projections (per layer), each at its own weight precision ------------------
    shapes = attention_shapes(m, t)
    per = inst.attn_proj or ((inst.attn_hw or hw, inst.attn_w_bytes or wb),) * len(shapes)
    proj = sum(_gemm(ph, n, N, K, in_bytes=pb) for (N, K), (ph, pb) in zip(shapes, per, strict=True))

    # ---- attention core ------------------------------------------------------------------------
    attn_peak = hw.peak_bf16
    fp8_attn = {"fp8": True, "bf16": False}.get(dep.attention_dtype, eng.fp8_attention)
    if fp8_attn and inst.kv_elem_bytes <= 1.0:
        attn_peak = max(hw.system.accelerator.peak("fp8"), hw.peak_bf16)
    # MLA decode (absorbed, 576-wide latent) runs its MMAs in BF16 even over an FP8 KV cache: the published
    # kernels dequantise the latent in-kernel (FlashMLA FP8 decoding: cvt to bf16x2) and top out at BF16-rate
    # figures (FlashMLA README: 660 TFLOP/s dense on H800 = 0.67 of BF16 peak; 1024 TFLOP/s sparse FP8-KV
    # decoding on B200 = 0.46 of BF16 peak), so the FP8 attention rate applies to GQA/MHA kernels only.
    dec_peak = hw.peak_bf16 if m.is_mla else attn_peak
    # the stack's own fused-attention kernels (engines.yaml attention_efficiency; e.g. FlashAttention-3 class
    # on Hopper) where it lists the chip, else the chip's training value (FlashAttention-2 class)
    acc = hw.system.accelerator
    eff_attn = family_value(eng.attention_efficiency, acc.id, acc.arch)
    eff_attn = hw.eff.attention_efficiency if eff_attn is None else eff_attn
    eff_dec = family_value(eng.mla_decode_efficiency, acc.id, acc.arch) if m.is_mla else None
    eff_dec = eff_attn if eff_dec is None else eff_dec
    kv_layer_bytes = inst.kv_bytes_token_gpu / layers  # this GPU's share of one token's KV, one layer
    if m.is_mla:
        dec_flops = 2.0 * heads * kv_read * (2.0 * m.kv_lora_rank + m.qk_rope_head_dim)
        pre_flops = 2.0 * heads * pairs * (m.qk_head_dim + m.v_dim)
    else:
        dec_flops = 2.0 * heads * kv_read * (2.0 * m.head_dim)
        pre_flops = 2.0 * heads * pairs * (2.0 * m.head_dim)
    # a verification pass (MTP / speculative decoding) runs 1 + spec query tokens per sequence against the
    # same KV: the kernel reads each sequence's KV once (FlashMLA / FlashInfer take seq_len_q = 1 + spec) but
    # does the score and value MMAs for every query token, so the FLOPs scale with the queries, the bytes not
    dec_attn = np.maximum(kv_read * kv_layer_bytes / (hw.hbm_bw * hw.eff.hbm_efficiency),
                          queries * dec_flops / (dec_peak * eff_dec))
    s_half = hw.eff.attention_seq_half
    mean_ctx = np.where(n > 0, pairs / n, 0.0)
    pre_rate = attn_peak * eff_attn * (mean_ctx + 1.0) / (mean_ctx + 1.0 + s_half)
    pre_attn = pre_flops / pre_rate
    attn = dec_attn + pre_attn + 2 * kern

    # ---- MLP / MoE -------------------------------------------------------------------------------
    mats = 2.0 if m.swiglu else 1.0
    frac_moe = m.num_moe_layers / m.num_layers if m.is_moe else 0.0
    f = float(m.ffn_hidden_size)
    dense = _gemm(hw, n, mats * f / t, h, in_bytes=wb) + _gemm(hw, n, h, f / t, in_bytes=wb)
    moe = np.zeros_like(n)
    ep_comm = np.zeros_like(n)
    moe_mem = np.zeros_like(n)
    if m.is_moe:
        E, k, fe = float(m.num_experts), float(m.moe_topk), float(m.moe_ffn_hidden_size)
        ep, etp = float(inst.ep), float(inst.moe_tp)
        # unique tokens entering the MoE layer across the instance's stage: each attention rank brings n
        tok_inst = n * inst.attn_dp
        slots = tok_inst * k
        e_loc = math.ceil(E / ep)
        active = e_loc * (1.0 - np.power(1.0 - k / E, tok_inst))  # distinct local experts hit this pass
        mean_load = slots / ep
        z = math.sqrt(2.0 * math.log(ep)) if ep > 1 else 0.0
        cv_rank = routing_rank_cv(m, int(ep), eng)
        # busiest GPU: binomial spread of random routing plus the real router's hot-expert spread
        load = mean_load + z * np.sqrt(mean_load * (1.0 - 1.0 / ep) + (cv_rank * mean_load) ** 2)
        m_exp = load / np.maximum(active, 1e-9)
        moe = (_gemm(hw, m_exp, mats * fe / etp, h, active, in_bytes=wb)
               + _gemm(hw, m_exp, h, fe / etp, active, in_bytes=wb))
        if m.num_shared_experts:
            fsh = fe * m.num_shared_experts
            moe = moe + _gemm(hw, n, mats * fsh / t, h, in_bytes=wb) + _gemm(hw, n, h, fsh / t, in_bytes=wb)
        moe = moe + _gemm(hw16, n, E, h, in_bytes=2.0)  # router (BF16)
        moe_mem = mem_time(hw, load * h * 2.0 * 4.0 + load * fe / etp * 2.0 * 3.0, 4)  # permute/unpermute, act
        if inst.attn_dp > 1 or ep > t:
            # tokens leave their attention rank: dispatch (FP8) + combine (BF16) all-to-all over EP
            r_ep = ranks_per_domain(ep, etp, hw.domain)
            # elements one GPU sends; the busiest rank receives (dispatch) and returns (combine) 1 + z cv_rank
            # times the mean (hot experts), which bounds the collective
            per_rank = n * k / t * h * (1.0 + z * cv_rank)
            disp = collective_time(ALL_TO_ALL, per_rank * 1.0, ep, r_ep, hw)
            comb = collective_time(ALL_TO_ALL, per_rank * 2.0, ep, r_ep, hw)
            ep_comm = disp + comb
    mlp = (1 - frac_moe) * dense
    moe = frac_moe * (moe + moe_mem)
    ep_comm = frac_moe * ep_comm

    # ---- element-wise: 2 norms, 2 residual adds, RoPE, activation (BF16 read+write) ----------------
    act_f = (1 - frac_moe) * f / t
    elem = mem_time(hw, 2.0 * n * (10.0 * h + 3.0 * act_f + 2.0 * heads * m.qk_head_dim), 6)

    # ---- TP all-reduce after attention and after the MLP (attention-TP group) ---------------------
    tp_comm = np.zeros_like(n)
    if t > 1:
        r_tp = ranks_per_domain(t, 1.0, hw.domain)
        # (TP+EP inside the TP group: the MoE output is reduced by the same all-reduce)
        tp_comm = 2.0 * collective_time(ALL_REDUCE, n * h * 2.0, t, r_tp, hw)

    # LM head in BF16: quantised checkpoints exclude it (Model Optimizer exclude_modules "lm_head", see
    # MOE_FP4_ATTENTION_DTYPE), so it runs at the BF16 rate whatever the weights dtype
    logits = _gemm(hw16, nl, m.vocab_size / t, h, in_bytes=2.0) / dep.pp
    out = {
        "gemm_s": layers * (proj + mlp), "attention_s": layers * attn, "moe_s": layers * moe,
        "elementwise_s": layers * elem, "tp_comm_s": layers * tp_comm, "ep_comm_s": layers * ep_comm,
        "logits_s": logits, "overhead_s": np.full_like(n, eng.step_overhead_s),
    }
    # weights streamed from host memory are prefetched layer by layer: only what exceeds the compute shows
    busy = sum(out[k] for k in ("gemm_s", "attention_s", "moe_s", "elementwise_s", "tp_comm_s", "ep_comm_s", "logits_s"))
    host_bw = HOST_LINK_BW.get(hw.system.accelerator.id, 0.0)
    off = inst.offload_bytes_gpu / host_bw if inst.offload_bytes_gpu and host_bw else 0.0
    out["offload_s"] = np.maximum(off - busy, 0.0)
    shape = np.broadcast(*out.values()).shape
    return {k: np.broadcast_to(np.asarray(v, dtype=float), shape) for k, v in out.items()}


def step_time(inst: Instance, tokens, kv_read_tokens, prefill_pairs, logit_tokens=None) -> np.ndarray:
    c = step_costs(inst, tokens, kv_read_tokens, prefill_pairs, logit_tokens)
    return sum(c[k] for k in STEP_FIELDS)


def _fields_time(c: dict, fields) -> np.ndarray:
    out = np.zeros_like(np.asarray(c[fields[0]], dtype=float))
    for k in fields:
        out = out + np.asarray(c[k], dtype=float)
    return out


# prompts per rank per pass up to which the busiest-rank maximum is summed exactly (Poisson terms)
POISSON_EXACT_MAX = 64.0


def busiest_rank_prefill(inst: Instance, mean_tokens, unit, lump=None) -> np.ndarray:
    """Expected prefill tokens of the busiest of the ``attn_dp`` ranks in one pass.

    Each rank prefills on its own (independent ranks, the TensorRT-LLM baseline round-robin scheduler;
    TensorRT-LLM tech blog 10: iteration time = the slowest rank's). ``unit`` is the most one rank can
    prefill in a pass (the room its token budget leaves with chunked prefill, a whole prompt without) and
    ``lump`` the tokens one prompt brings to a pass (its whole computed prompt, at most ``unit``; default
    ``unit``):

    * ``lump == unit`` (a prompt fills the room, or no size is given): the rank either carries ``unit`` or
      nothing, with probability ``p = mean / unit``; the busiest of ``N`` carries ``unit`` with
      probability ``1 - (1 - p)^N``;
    * ``lump < unit`` (prompts shorter than the room): a rank's pass carries the ``K ~ Poisson(mean /
      lump)`` prompts that reached it since its last pass, ``min(K lump, unit)`` tokens, and the busiest of
      ``N`` carries ``E[max_i min(K_i lump, unit)]``. Without this the busiest rank would carry a whole
      room's worth of prompts with probability ``1 - (1 - mean/unit)^N``: more prompt tokens than arrive
      at all ``N`` ranks together once ``N`` is large (EP72 with DP-attention: 3x the total arrivals).

    Never less than the mean, never more than ``unit``."""
    mean = np.asarray(mean_tokens, dtype=float)
    u = np.maximum(np.asarray(unit, dtype=float), 1e-9)
    if inst.attn_dp <= 1:
        return mean
    n = inst.attn_dp
    lp = u if lump is None else np.minimum(np.maximum(np.asarray(lump, dtype=float), 1e-9), u)
    p = np.clip(mean / u, 0.0, 1.0)
    whole = u * (1.0 - np.power(1.0 - p, n))
    lam = mean / lp
    # E[max_i min(K_i lump, unit)] = sum_k P(max_i K_i >= k) x (the k-th lump's tokens below the cap);
    # many prompts per pass (lam > POISSON_EXACT_MAX): the Gaussian tail of the maximum instead
    lam_b, lp_b, u_b = np.broadcast_arrays(lam, lp, u)
    many = lam_b > POISSON_EXACT_MAX
    gauss = np.minimum(lp_b * (lam_b + np.sqrt(2.0 * lam_b * np.log(n))), u_b)
    lam_b = np.where(many, 0.0, lam_b)
    pmf = np.exp(-lam_b)
    cdf = pmf.copy()
    pois = np.zeros_like(lam_b)
    k = 1
    while True:
        inc = np.clip(u_b - (k - 1) * lp_b, 0.0, lp_b)
        tail = 1.0 - np.power(np.clip(cdf, 0.0, 1.0), n)  # P(max_i K_i >= k)
        pois = pois + tail * inc
        if not np.any((inc > 0) & (tail > 1e-9)):
            break
        pmf = pmf * lam_b / k
        cdf = cdf + pmf
        k += 1
    out = np.where(lp < u, np.where(many, gauss, pois), whole)
    return np.minimum(np.maximum(mean, out), np.maximum(u, mean))


@dataclass(frozen=True, slots=True)
class StepModel:
    """A fast step-time model for the simulator: per-rank and shared work on a token grid + linear
    attention terms.

    ``rank(tokens, kv_read, pairs, logit_tokens) = interp(base_rank, tokens) + interp(base_logits,
    logit_tokens) + kv_coef * kv_read + pair_coef * pairs`` (attention is linear in the KV read and in the
    prefill query-key pairs; the LM head runs on the tokens that need logits: every decode token and the last
    token of each prompt that completes in the pass, not every prompt token; default: all ``tokens``),
    ``shared(tokens) = interp(base_shared, tokens)``; a pass takes ``rank + shared`` (the busiest rank's own
    work under DP-attention). Built from ``step_costs`` so both share one op model.
    """

    grid: np.ndarray
    base_rank: np.ndarray  # per-rank work without the LM head
    base_shared: np.ndarray
    kv_coef: float
    pair_coef: float
    base_logits: np.ndarray | None = None  # LM head on the grid's token counts (None: inside base_rank)

    def rank(self, tokens, kv_read, pairs, logit_tokens=None):
        t = np.interp(tokens, self.grid, self.base_rank) + self.kv_coef * kv_read + self.pair_coef * pairs
        if self.base_logits is not None:
            lt = np.asarray(tokens if logit_tokens is None else logit_tokens, dtype=float)
            t = t + np.where(lt > 0, np.interp(lt, self.grid, self.base_logits), 0.0)
        return t

    def shared(self, tokens):
        return np.interp(tokens, self.grid, self.base_shared)

    def __call__(self, tokens, kv_read, pairs, logit_tokens=None):
        return self.rank(tokens, kv_read, pairs, logit_tokens) + self.shared(tokens)


def step_model(inst: Instance, max_tokens: int) -> StepModel:
    top = max(65, int(max_tokens))
    # GEMM tile quantisation makes the cost jump after every multiple of the M tile: put grid points on
    # both sides of each jump (and on the budget itself) so interpolation never smears a jump
    tile = int(inst.hw.eff.gemm_tile_m)
    edges = np.arange(tile, top + 1, tile * max(1, top // (tile * 256) + 1), dtype=float)
    grid = np.unique(np.concatenate([np.arange(1, 65), np.geomspace(64, top, 96).round(), edges, edges + 1.0,
                                     [float(top)]]))
    grid = grid[grid <= top]
    c = step_costs(inst, grid, 0.0, 0.0)
    big = 1e7
    kv_coef = float((step_time(inst, 1.0, big, 0.0) - step_time(inst, 1.0, 0.0, 0.0)) / big)
    ctx = 2048.0
    pairs = 64.0 * ctx
    pair_coef = float((step_time(inst, 64.0, 0.0, pairs) - step_time(inst, 64.0, 0.0, 0.0)) / pairs)
    own = tuple(f for f in RANK_FIELDS if f != "logits_s")
    return StepModel(grid=grid, base_rank=_fields_time(c, own), base_shared=_fields_time(c, SHARED_FIELDS),
                     kv_coef=kv_coef, pair_coef=pair_coef, base_logits=np.asarray(c["logits_s"], dtype=float))

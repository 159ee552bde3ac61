"""Closed-form composition of ``StageCosts`` into a step time (vectorised over plans).

Per layer and micro-batch: t_layer = fwd + bwd + recompute compute, plus the exposed part of the TP, CP
and EP collectives. With overlap (current Megatron-Core / TE), TP collectives of sequence-parallel layers
hide behind the layer's GEMMs except one chunk (1/t of them), CP ring hops hide behind the attention
core; every overlapped transfer slows the concurrent compute by ``overlap_slowdown`` (MODELLING.md §5).

Pipeline (Narayanan et al. 2021; MODELLING.md §4): step = m * T_last + (p-1)/v * T_avg, where T_last is
one micro-batch through the slowest rank of the layout (workload/pipeline.py: whole layers per rank; the
last one's layers + logits/loss) and T_avg the mean stage; interleaving divides the bubble by v. ZB-H1
and DualPipe (``pipeline_schedule``) change the bubble to (p-1)(F+B-2W) and (p/2-1)(F&B+B-3W)
(DeepSeek-V3 Table 2); DualPipe also hides the EP all-to-all behind the paired chunk's computation. P2P transfers are exposed per micro-batch without overlap, only in the fill and
drain with it.

Data parallel (MODELLING.md §5): Megatron syncs gradients during the last micro-batch's backward, so at
most that backward (one stage, one micro-batch) hides the reduce-scatter / all-reduce; the parameter
all-gather of the distributed optimizer hides behind the next forward; at least one bucket is exposed.
Without overlap everything is exposed. ZeRO-3/FSDP gathers parameters for every micro-batch's forward and
backward and reduce-scatters gradients, overlapped with the micro-batch compute.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import xp as np  # numpy, or plain numbers for one plan (clustertwin/xp.py)
from ..errors import InputError
from ..hardware import ScaleOutTech, SystemSpec
from ..workload.flops import forward_flops_total, hardware_flops_per_step, model_flops_per_step
from ..workload.memory import plan_memory
from ..workload.model import ModelSpec
from ..workload.pipeline import mixed_interleaved_chunks, schedule_code, stage_layout
from ..workload.plan import RECOMPUTE, RECOMPUTE_CODE, WIDE_DTYPES, ParallelPlan, check_plan, offload_code
from ..workload.rules import DEFAULT_MEMORY_MARGIN_GB, memory_fits, plan_mask
from ..workload.stacks import get_stack, layout_caveats, resolve_stack
from .comm import achieved_bandwidths
from .costs import Hardware, make_hardware, stage_costs
from .machine import uncalibrated_note
from .pp_layout import balanced_last_stage_time
from .result import StepResult

BREAKDOWN = (
    "gemm", "attention", "elementwise", "recompute", "moe_host", "logits", "tp_comm", "cp_comm", "ep_comm",
    "overlap_slowdown", "pp_bubble", "pp_p2p", "dp_comm", "fsdp_comm", "optimizer", "overhead",
)
MEMORY = ("weights", "gradients", "optimizer", "activations", "logits", "runtime")
_BREAKDOWN_KEYS = tuple((k, "breakdown_" + k) for k in BREAKDOWN)  # (name, estimate_batch key)
_MEMORY_KEYS = tuple((k, f"memory_{k}_gb") for k in MEMORY)

DUALPIPE_COMM_SMS = 20.0  # SMs DeepSeek's DualPipe gives the EP all-to-all (arXiv:2412.19437 Sec. 3.2.2)

PLAN_KEYS = ("tp", "pp", "dp", "cp", "ep", "vpp", "micro_batch", "recompute", "zero")


@dataclass(frozen=True, slots=True)
class _Opts:
    seq_len: int
    dtype: str
    flash: bool
    overlap: bool
    grad_reduce_bytes: float
    cp_comm: str = "p2p"
    stack: Any = None  # the resolved SoftwareStack (implementation properties: attention kernel, FSDP)


def _compose(model: ModelSpec, hw: Hardware, arr: dict[str, np.ndarray], o: _Opts) -> dict[str, np.ndarray]:
    tp, pp, dp, cp, ep, vpp = (arr[k] for k in ("tp", "pp", "dp", "cp", "ep", "vpp"))
    mb, rc, zero, gb, sp, etp = (arr[k] for k in ("micro_batch", "recompute", "zero", "global_batch", "sp", "etp"))
    c = stage_costs(model, hw, tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, vpp=vpp, micro_batch=mb, recompute=rc,
                    zero=zero, global_batch=gb, seq_len=o.seq_len, sp=sp, etp=etp, flash=o.flash,
                    overlap=o.overlap, grad_reduce_bytes=o.grad_reduce_bytes, cp_comm=o.cp_comm, stack=o.stack,
                    schedule=arr.get("schedule", 0), offload=arr.get("offload", 0),
                    activation_offload_layers=arr.get("act_offload", 0))
    shape = np.shape(c["layer_fwd_gemm_s"])
    t, p, v = np.asarray(tp, dtype=float), np.asarray(pp, dtype=float), np.asarray(vpp, dtype=float)
    z, spb = np.asarray(zero), np.asarray(sp, dtype=bool)
    if shape:
        t, p, v, z, spb = (np.broadcast_to(x, shape) for x in (t, p, v, z, spb))
    spb = spb & (t > 1)
    sigma = hw.eff.overlap_slowdown
    ov = bool(o.overlap)

    gemm_layer = c["layer_fwd_gemm_s"] + c["layer_bwd_gemm_s"]
    attn_layer = c["layer_fwd_attn_s"] + c["layer_bwd_attn_s"]
    mem_layer = c["layer_fwd_mem_s"] + c["layer_bwd_mem_s"]
    rec_layer = c["layer_recompute_s"]

    # TP: overlappable only with SP (TE userbuffers); one chunk of 1/t stays exposed
    tp_total = c["tp_comm_fwd_s"] + c["tp_comm_bwd_s"] + c["tp_comm_recompute_s"]
    window = gemm_layer + np.where(np.asarray(rc) == 2, c["layer_fwd_gemm_s"], 0.0)
    can_ov = spb & ov & (o.stack is None or bool(o.stack.tp_overlap))
    tp_exposed = np.where(can_ov, np.maximum(tp_total / np.maximum(t, 1.0), tp_total - window), tp_total)
    tp_slow = np.where(can_ov, sigma * np.minimum(tp_total, window), 0.0)
    # CP ring: hops overlap the attention core of the previous chunk
    cp_ring = np.maximum(0.0, c["cp_comm_fwd_s"] - c["layer_fwd_attn_s"]) + np.maximum(
        0.0, c["cp_comm_bwd_s"] - c["layer_bwd_attn_s"])
    cp_ov = c["cp_overlappable"] > 0.5
    cp_exposed = np.where(cp_ov, cp_ring, c["cp_comm_fwd_s"] + c["cp_comm_bwd_s"])
    cp_slow = np.where(cp_ov, sigma * np.minimum(c["cp_comm_fwd_s"] + c["cp_comm_bwd_s"], attn_layer), 0.0)
    sched = np.broadcast_to(np.asarray(arr.get("schedule", 0)), shape)
    dual = (sched == 2) & (p > 1)
    zb = (sched == 1) & (p > 1)
    compute_layer = gemm_layer + attn_layer + mem_layer + rec_layer
    ep_total = c["ep_comm_fwd_s"] + c["ep_comm_bwd_s"]
    # DualPipe: the all-to-all of one micro-batch's chunk runs beside the computation of the paired
    # chunk (forward of one micro-batch with the backward of another, DeepSeek-V3 Sec. 3.2.1); what the
    # paired computation cannot cover stays exposed. The dispatch/combine kernels hold
    # DUALPIPE_COMM_SMS of the chip's SMs for the whole overlapped computation (Sec. 3.2.2: "only 20 SMs
    # are sufficient to fully utilize the bandwidths of IB and NVLink"), which runs on the rest.
    ep_exposed = np.where(dual, np.maximum(0.0, ep_total - compute_layer), ep_total)
    sm_share = DUALPIPE_COMM_SMS / max(float(hw.eff.num_sms) - DUALPIPE_COMM_SMS, 1.0)
    ep_slow = np.where(dual & (ep_total > 0.0), sm_share * compute_layer, 0.0)

    host_layer = c["layer_fwd_host_s"] + c["layer_bwd_host_s"]
    t_layer = (gemm_layer + attn_layer + mem_layer + rec_layer + host_layer + tp_exposed + tp_slow + cp_exposed
               + cp_slow + ep_exposed + ep_slow)
    Lps = c["layers_per_stage"]
    m = c["num_micro_batches"]
    # output layer + loss; multi-token prediction adds one transformer layer per depth on the last stage
    logits = c["logits_fwd_s"] + c["logits_bwd_s"] + model.mtp_depth * t_layer
    # Stage balance (workload.pipeline.stage_layout): whole layers per rank. L divisible by p*v: every
    # rank has L/p layers and the last adds the output layer. L+2 divisible (Megatron account-for-
    # embedding/loss-in-pipeline-split, Llama 3's "first and last stage have one fewer layer"): the
    # first/last rank trade one layer slot for the embedding / output layer + loss. Otherwise an uneven
    # layout: the last rank holds fewer layers beside the output layer, the others at most `most`.
    # The pipeline runs at the pace of the slowest rank.
    L = float(model.num_layers)
    stages = p * v
    even = np.isclose(np.mod(L, stages), 0.0)
    plus2 = np.logical_not(even) & np.isclose(np.mod(L + 2.0, stages), 0.0) & (p > 1)
    slots = (L + 2.0) / p
    T_last = np.where(plus2, np.maximum(slots * t_layer, (slots - 1.0) * t_layer + logits), Lps * t_layer + logits)
    # Neither: Megatron needs an explicit layout (``pipeline_model_parallel_layout``; NVIDIA's DeepSeek-V3
    # recipes: "Et*4|(t*4|)*14tmL" for 61 layers on 16 virtual stages); we assume the balanced one, whole
    # layers per stage, the last rank trading layers for the output head(s) and MTP (pp_layout.py).
    custom = np.logical_not(even) & np.logical_not(plus2) & (p > 1)
    if np.needed(custom):  # (np.needed: False only for one plan that takes the other branch of the where)
        T_last = np.where(custom, balanced_last_stage_time(L, p, t_layer, logits), T_last)
    # DualPipe: rank i runs half of the micro-batches through stage i and half through stage p-1-i, so
    # the first rank carries the mean of the embedding stage and the loss stage (whole layers of
    # workload.pipeline.stage_layout, the layout the memory model holds)
    T_pace = T_last
    if np.needed(dual):
        lay_first, lay_last, lay_most = (np.broadcast_to(x, shape) for x in stage_layout(model, p, v))
        T_dual = np.maximum(np.where(p > 2, lay_most, 0.0) * t_layer,
                            0.5 * (lay_first + lay_last) * t_layer + 0.5 * logits)
        T_pace = np.where(dual, T_dual, T_last)
    T_avg = Lps * t_layer + logits / p
    # bubbles per schedule (workload/pipeline.py): F forward, B full backward, W weight gradient of one
    # stage and micro-batch (W: half of the backward GEMMs, the output layer's weight gradient a third
    # of its forward + backward)
    bubble = (p - 1.0) / v * T_avg  # 1F1B, interleaved
    if np.needed(dual | zb):
        F = Lps * (c["layer_fwd_gemm_s"] + c["layer_fwd_attn_s"] + c["layer_fwd_mem_s"]) + logits / (3.0 * p)
        W = Lps * 0.5 * c["layer_bwd_gemm_s"] + logits / (3.0 * p)
        B = np.maximum(T_avg - F, 0.0)
        bubble = np.where(dual, (p / 2.0 - 1.0) * np.maximum(T_avg + B - 3.0 * W, 0.0),
                          np.where(zb, (p - 1.0) * np.maximum(T_avg - 2.0 * W, 0.0), bubble))

    p2p = c["pp_p2p_s"]
    # Only the interleaved schedule overlaps its P2P (Megatron-Bridge comm_overlap.py: V > 1 sets
    # overlap_p2p_comm, clears batch_p2p_comm): then only the fill/drain hops are exposed. Without virtual
    # stages Megatron batches the P2P (batch_p2p_comm) and, with batch_p2p_sync (default True), follows every
    # exchange with torch.cuda.synchronize() (megatron/core/pipeline_parallel/p2p_communication.py
    # _communicate): each micro-batch's forward send and backward send block the stage, as the event engine
    # schedules them (graph.py: blocking sends on the compute stream unless interleaved).
    pp_exposed = np.where(p > 1, np.where(ov & (v > 1), 2.0 * (p - 1.0) * p2p, 2.0 * m * v * p2p), 0.0)

    # DP
    win_b = Lps * (c["layer_bwd_gemm_s"] + c["layer_bwd_attn_s"] + c["layer_bwd_mem_s"] + rec_layer)
    win_f = Lps * (c["layer_fwd_gemm_s"] + c["layer_fwd_attn_s"] + c["layer_fwd_mem_s"])
    rs = c["dp_rs_s"] + c["edp_rs_s"]
    ag = c["dp_ag_s"] + c["edp_ag_s"]
    ar = c["dp_ar_s"] + c["edp_ar_s"]
    bucket = c["dp_bucket_s"]
    if ov:
        dist = np.maximum(np.minimum(bucket, rs), rs - win_b) + np.maximum(np.minimum(bucket, ag), ag - win_f)
        plain = np.maximum(np.minimum(bucket, ar), ar - win_b)
        dp_slow = np.where(z == 0, sigma * np.minimum(ar, win_b),
                           sigma * (np.minimum(rs, win_b) + np.minimum(ag, win_f)))
    else:
        dist = rs + ag
        plain = ar
        dp_slow = np.zeros(shape)
    dp_exposed = np.where(z >= 3, 0.0, np.where(z == 0, plain, dist)) + np.where(z >= 3, 0.0, dp_slow)
    # ZeRO-2 shards gradients, so every micro-batch's backward ends in a reduce-scatter (no accumulation
    # in a full-size buffer): m-1 more reduce-scatters. The DP stream runs beside compute, and in the 1F1B
    # steady state a backward is followed by the next micro-batch's forward, so each reduce-scatter hides
    # behind one forward + backward of the stage (the steady-state period) except one bucket (with overlap);
    # the stage cannot go faster than its DP stream. Without overlap it is fully exposed.
    if np.needed(z == 2):
        win_fb = win_b + win_f
        rs_mb = np.where(ov, np.maximum(np.minimum(bucket, rs), rs - win_fb) + sigma * np.minimum(rs, win_fb), rs)
        dp_exposed = dp_exposed + np.where(z == 2, (m - 1.0) * rs_mb, 0.0)
    else:
        dp_exposed = dp_exposed + 0.0
    # FSDP: per micro-batch gathers + reduce-scatter, each pass behind that pass's compute: the forward's
    # parameter gathers behind the forward, the backward's gathers (+ the recompute re-gather) and gradient
    # reduce-scatters behind the backward and recompute (as the event engine schedules them per layer)
    if np.needed(z >= 3):
        fsdp_comm = c["fsdp_mb_s"]
        comm_f = c["fsdp_ag_s"]
        comm_b = np.maximum(fsdp_comm - comm_f, 0.0)
        first_unit = fsdp_comm / np.maximum(Lps, 1.0)
        # the share of min(comm, compute) the implementation hides (stack fsdp_overlap; 1 = separate stream
        # with prefetch: all but the first unit); the hidden part slows the concurrent compute by sigma
        share = float(o.stack.fsdp_overlap) if o.stack is not None else 1.0
        hidden = share * (np.minimum(comm_f, win_f) + np.minimum(comm_b, win_b))
        fsdp_exposed = np.where(z >= 3, m * (np.maximum(first_unit, fsdp_comm - hidden) + sigma * hidden), 0.0)
    else:
        fsdp_exposed = 0.0

    optimizer = c["optimizer_s"]
    overhead = c["step_overhead_s"]
    step = m * T_pace + bubble + pp_exposed + dp_exposed + fsdp_exposed + optimizer + overhead

    mL = m * Lps
    # the pace-setting rank's work beyond the average layer work: the output layer + loss (as far as
    # they set the pace) and what remains is pipeline imbalance
    beyond = np.maximum(T_pace - Lps * t_layer, 0.0)
    logits_paced = np.minimum(logits, beyond)
    imbalance = m * (beyond - logits_paced)
    br = {
        "gemm": mL * gemm_layer,
        "attention": mL * attn_layer,
        "elementwise": mL * mem_layer,
        "recompute": mL * rec_layer,
        "moe_host": mL * host_layer,
        "logits": m * logits_paced,
        "tp_comm": mL * tp_exposed,
        "cp_comm": mL * cp_exposed,
        "ep_comm": mL * ep_exposed,
        "overlap_slowdown": mL * (tp_slow + cp_slow + ep_slow),
        "pp_bubble": bubble + imbalance,
        "pp_p2p": pp_exposed,
        "dp_comm": dp_exposed,
        "fsdp_comm": fsdp_exposed,
        "optimizer": optimizer,
        "overhead": overhead,
    }
    out = {"step_time_s": step}
    for k, val in br.items():
        out["breakdown_" + k] = np.broadcast_to(val, shape) if shape else val
    out["num_micro_batches"] = m
    out["dp_comm_raw_s"] = np.where(z == 0, ar, rs + ag)
    out["tp_comm_raw_s"] = mL * tp_total
    return out


def estimate_batch(model: ModelSpec, system: SystemSpec, fabric: ScaleOutTech, plans: dict[str, Any], *,
                   seq_len: int | None = None, global_batch=None, dtype: str = "bf16", flash_attention: bool = True,
                   overlap: bool = True, grad_reduce_bytes: float = 2.0, cp_comm: str = "p2p", catalog: Any = None,
                   hardware: Hardware | None = None, sequence_parallel: bool | None = None,
                   stack: str | None = None, memory_margin_gb: float = DEFAULT_MEMORY_MARGIN_GB,
                   rule_mask: bool = True) -> dict[str, np.ndarray]:
    """Evaluate many plans at once. ``plans`` maps degree names to arrays (broadcast together):
    tp, pp, dp, cp, ep, vpp, micro_batch, recompute (code 0/1/2 or names), zero; optional
    global_batch, sequence_parallel (default: the keyword, else tp > 1), etp, uneven_pipeline. ``stack``: the
    software-stack preset whose implementation properties apply (attention kernel generation, selective
    recompute, sharded-DP gathers and overlap; default Megatron-Core). Returns arrays: step_time_s,
    tokens_per_s, mfu, hfu, tflops_per_gpu, tflops_per_gpu_hw, memory_gb_per_gpu, fits_memory, valid,
    breakdown_<component>, memory_<component>_gb. ``fits_memory``: the one memory rule
    (``workload.rules.memory_fits``) against the usable HBM with ``memory_margin_gb`` to spare; ``valid``
    (the plan rule) unless ``rule_mask=False``.
    """
    seq = int(seq_len or model.seq_len)
    plain = _plain_plan(plans, global_batch, sequence_parallel) if np.in_scalar_mode() else None
    a: dict[str, np.ndarray] = plain if plain is not None else _plan_arrays(plans, global_batch, sequence_parallel)

    hw = hardware or make_hardware(system, fabric, dtype, catalog)
    o = _Opts(seq_len=seq, dtype=dtype, flash=flash_attention, overlap=overlap, grad_reduce_bytes=grad_reduce_bytes,
              cp_comm=cp_comm, stack=resolve_stack(stack, catalog))
    # the one plan rule (workload.rules); ``rule_mask=False`` (scalar ``estimate``, which checks its plan
    # with the same rules itself) leaves ``valid`` out
    valid = plan_mask(model, {**a, "flash": flash_attention}, seq) if rule_mask else None
    # evaluate invalid plans with safe degrees (results masked by `valid`)
    safe = dict(a)
    safe["micro_batch"] = np.maximum(a["micro_batch"], 1)
    out = _compose(model, hw, safe, o)
    n_gpus = np.astype(a["tp"] * a["pp"] * a["dp"] * a["cp"], float)
    step = out["step_time_s"]
    tokens = np.astype(a["global_batch"], float) * seq
    mf = model_flops_per_step(model, seq, a["global_batch"])
    hf = hardware_flops_per_step(model, seq, a["global_batch"], a["recompute"])
    out["tokens_per_s"] = tokens / step
    out["tflops_per_gpu"] = mf / (step * n_gpus) / 1e12
    out["tflops_per_gpu_hw"] = hf / (step * n_gpus) / 1e12
    out["mfu"] = mf / (step * n_gpus * hw.peak)
    out["hfu"] = hf / (step * n_gpus * hw.peak)
    mem = plan_memory(model, a, seq_len=seq, dtype=dtype, flash=flash_attention, grad_bytes=float(grad_reduce_bytes),
                      runtime_overhead_bytes=hw.eff.runtime_overhead_bytes, stack=o.stack)
    shape = np.shape(step)
    for k in MEMORY:
        out[f"memory_{k}_gb"] = (np.broadcast_to(mem[k], shape) if shape else np.asarray(mem[k])) / 1e9
    out["memory_gb_per_gpu"] = (np.broadcast_to(mem["total"], shape) if shape else np.asarray(mem["total"])) / 1e9
    out["fits_memory"] = memory_fits(out["memory_gb_per_gpu"] * 1e9, hw.hbm_bytes, memory_margin_gb)
    out["num_gpus"] = n_gpus
    if valid is not None:
        out["valid"] = valid
    return out


def _plan_arrays(plans: dict[str, Any], global_batch: Any, sequence_parallel: Any) -> dict[str, np.ndarray]:
    """The plan degrees of ``estimate_batch`` as int64 / bool arrays broadcast together."""
    a: dict[str, np.ndarray] = {}
    for k in ("tp", "pp", "dp", "cp", "ep", "vpp", "micro_batch", "zero"):
        a[k] = np.astype(plans.get(k, 1 if k != "zero" else 1), np.int64)
    rc = plans.get("recompute", 0)
    if isinstance(rc, str) or (not isinstance(rc, int | float) and np.asarray(rc).dtype.kind in "US"):
        rc = np.vectorize(lambda x: RECOMPUTE_CODE[str(x)])(np.asarray(rc))
    a["recompute"] = np.astype(rc, np.int64)
    gbv = plans.get("global_batch", global_batch)
    if gbv is None:
        raise InputError("estimate_batch needs global_batch (in plans or as keyword)")
    a["global_batch"] = np.astype(gbv, np.int64)
    a["etp"] = np.astype(plans.get("etp", 1), np.int64)
    sp = plans.get("sequence_parallel", sequence_parallel)
    a["sp"] = (np.asarray(a["tp"]) > 1) if sp is None else (np.astype(sp, bool) & (a["tp"] > 1))
    a["uneven"] = np.astype(plans.get("uneven_pipeline", False), bool)
    a["mb_group"] = np.astype(plans.get("microbatch_group", 0), np.int64)
    a["schedule"] = schedule_code(plans.get("pipeline_schedule", plans.get("schedule", 0)))
    a["offload"] = offload_code(plans.get("offload", 0))
    a["act_offload"] = np.astype(plans.get("activation_offload_layers", 0), np.int64)
    if "fsdp" in plans:
        a["zero"] = np.where(np.astype(plans["fsdp"], bool), 3, a["zero"])
    if not (np.in_scalar_mode() and np.broadcast_shape(*a.values()) == ()):  # one plan: nothing to broadcast
        keys = list(a)
        a = dict(zip(keys, np.broadcast_arrays(*(a[k] for k in keys)), strict=True))
    return a


_INT_KEYS = ("tp", "pp", "dp", "cp", "ep", "vpp", "micro_batch", "zero")
_PLAIN = np._S  # plain numbers (clustertwin/xp.py)


def _plain_plan(plans: dict[str, Any], global_batch: Any, sequence_parallel: Any) -> dict[str, Any] | None:
    """``_plan_arrays`` of one plan of plain numbers in scalar mode (the values it gives there: ints and
    bools), without its ~40 conversions; None when a value is anything else (then ``_plan_arrays``)."""
    get = plans.get
    S = _PLAIN
    a: dict[str, Any] = {}
    for k in _INT_KEYS:
        v = get(k, 1)
        if type(v) not in S:
            return None
        a[k] = int(v)
    extra = (get("recompute", 0), get("global_batch", global_batch), get("etp", 1), get("uneven_pipeline", False),
             get("microbatch_group", 0))
    for v in extra:
        if type(v) not in S:
            return None
    rc, gb, etp, uneven, mbg = extra
    a["recompute"], a["global_batch"], a["etp"] = int(rc), int(gb), int(etp)
    sp = get("sequence_parallel", sequence_parallel)
    if sp is None:
        a["sp"] = a["tp"] > 1
    elif type(sp) in S:
        a["sp"] = bool(sp) & (a["tp"] > 1)
    else:
        return None
    a["uneven"], a["mb_group"] = bool(uneven), int(mbg)
    sched = get("pipeline_schedule", get("schedule", 0))
    if type(sched) is not str and type(sched) not in S:
        return None
    a["schedule"] = schedule_code(sched)
    off, n_off = get("offload", 0), get("activation_offload_layers", 0)
    if (type(off) is not str and type(off) not in S) or type(n_off) not in S:
        return None
    a["offload"], a["act_offload"] = offload_code(off), int(n_off)
    if "fsdp" in plans:
        f = plans["fsdp"]
        if type(f) not in S:
            return None
        if bool(f):
            a["zero"] = 3
    return a


_COMPONENT_TEXT = {
    "gemm": "GEMM compute",
    "attention": "attention-core compute",
    "elementwise": "memory-bound element-wise kernels",
    "recompute": "activation recomputation",
    "moe_host": "GPU idle while the host issues the dropless MoE layers (launch-bound experts)",
    "logits": "output layer + loss on the last stage",
    "tp_comm": "exposed TP collectives on {up}",
    "cp_comm": "exposed CP ring exchange",
    "ep_comm": "EP all-to-all ({ep_where})",
    "overlap_slowdown": "compute slowed by overlapped communication",
    "pp_bubble": "pipeline bubble",
    "pp_p2p": "pipeline P2P transfers",
    "dp_comm": "exposed DP gradient/parameter sync ({dp_where})",
    "fsdp_comm": "exposed FSDP parameter gathers / gradient reduce-scatter ({dp_where})",
    "optimizer": "optimizer step",
    "overhead": "per-step host overhead",
}


def _places(hw: Hardware) -> tuple[str, str, str]:
    """(scale-up name, "across <fabric>", "inside the <scale-up> domain"): the bottleneck's place words,
    once per machine."""
    hit = _PLACES.get(id(hw))
    if hit is None or hit[0] is not hw:
        net = f"{hw.scaleout.name}" if hw.scaleout else "scale-out"
        up = hw.system.scaleup.name
        if len(_PLACES) >= 256:
            _PLACES.clear()
        hit = _PLACES[id(hw)] = (hw, (up, f"across {net}", f"inside the {up} domain"))
    return hit[1]


_PLACES: dict[int, tuple] = {}  # id(hw) -> (hw, words); the entry keeps hw alive, so its id is not reused


def _bottleneck(br: dict[str, float], step: float, plan: ParallelPlan, hw: Hardware) -> str:
    dom = hw.domain
    up, across, inside = _places(hw)
    ctx = {"up": up, "dp_where": across if plan.tp * plan.dp * plan.cp > dom else inside,
           "ep_where": across if plan.ep > dom else inside}
    top = max(br, key=br.__getitem__)  # the first of the largest, as a stable sort by -value
    text = f"{_COMPONENT_TEXT[top].format(**ctx)} is {100 * br[top] / step:.0f}% of the step"
    if top in ("gemm", "attention"):
        others = [k for k in br if k not in ("gemm", "attention")]
        if others:
            k = max(others, key=br.__getitem__)
            v = br[k]
            if v > 0:
                text += f"; largest overhead: {_COMPONENT_TEXT[k].format(**ctx)} at {100 * v / step:.0f}%"
    return text


def bandwidth_assumption(hw: Hardware) -> str:
    """The printed bandwidth line: the figures the collectives priced the step with."""
    up, out = achieved_bandwidths(hw)
    v = hw.view
    limit = ("NIC-limited" if v.nic_line_bw < v.ports_per_nic * v.port_bw
             else "fabric-port-limited" if v.nic_line_bw > v.ports_per_nic * v.port_bw else "NIC = port rate")
    return (f"scale-up bus bandwidth {up / 1e9:.0f} GB/s/GPU, scale-out {out / 1e9:.1f} GB/s/GPU achieved "
            f"({v.nics_per_host} x {v.nic_bw * 8 / 1e9:.0f} Gb/s per {v.devices_per_host} GPUs, {limit})")


def moe_assumptions(model: ModelSpec, hw: Hardware) -> list[str]:
    """What the MoE cost model assumes (sim/components/moe.py), for every estimate of an MoE model."""
    if not model.is_moe:
        return []
    imb = float(getattr(model, "moe_load_imbalance", 1.0) or 1.0)
    routing = ("MoE: balanced routing, no load imbalance (the published MoE benchmarks force balance)" if imb <= 1.0
               else f"MoE: real routing, the most-loaded EP rank carries {imb:g}x the mean token load (its experts, "
                    "activations and all-to-all set each MoE layer's pace)")
    if getattr(model, "moe_token_drop", False):
        host = ("MoE: token drop padded to expert capacity: static split sizes, no dispatcher device-to-host sync "
                "(no per-layer host stall)")
    else:
        host = (f"MoE: {hw.eff.moe_host_layer_s * 1e3:.2f} ms of GPU idle per MoE layer per micro-batch at the "
                "dispatcher's device-to-host sync (fitted per host platform on Megatron runs; a CUDA-graphed or "
                "sync-free dispatcher is faster)")
    return [routing, host]


def _attention_assumption(hw: Hardware, stack: Any, catalog: Any) -> str:
    backend = resolve_stack(stack, catalog).attention_backend
    rocm = hw.system.accelerator.vendor == "AMD"  # ROCm has no cuDNN; torch SDPA's flash backend is AOTriton there
    if backend == "cudnn":
        lib = "TE fused attention, CK / AOTriton on ROCm" if rocm else "TE cuDNN backend"
        return f"fused attention ({lib}) at {hw.eff.attention_efficiency_cudnn:.2f} of BF16 peak"
    if backend == "fa2":
        lib = "PyTorch SDPA, AOTriton on ROCm" if rocm else "PyTorch SDPA FlashAttention-2 kernels"
        return f"fused attention ({lib}) at {hw.eff.attention_efficiency_fa2:.2f} of BF16 peak"
    return f"fused attention (FlashAttention) at {hw.eff.attention_efficiency:.2f} of BF16 peak"


def _compute_efficiency_assumption(stack: Any, catalog: Any) -> str:
    """The stack's kernel-rate factor (``SoftwareStack.compute_efficiency``) when it is not 1."""
    st = resolve_stack(stack, catalog)
    ce = float(st.compute_efficiency or 1.0)
    if ce == 1.0:
        return ""
    return (f"stack efficiency: {st.id} runs every layer kernel and the output layer at {ce:g} of the Megatron-Core / "
            "TE rate the chip constants describe (compute_efficiency: fitted per framework, or derived from a "
            "published same-hardware pair; workload/stacks.py)")


def _assumptions(model: ModelSpec, system: SystemSpec, hw: Hardware, plan: ParallelPlan, catalog: Any) -> list[str]:
    """The printed assumptions of an estimate (a new list). They depend on the machine, the model and the
    plan's precision / attention / overlap / stack, not on its layout, so the text is built once per
    such combination (``make_hardware`` gives one ``hw`` per machine)."""
    key = (id(hw), id(model), id(catalog), plan.dtype, plan.flash_attention, plan.overlap, plan.stack)
    hit = _ASSUMPTIONS.get(key)
    if hit is None or hit[0] is not hw or hit[1] is not model or hit[2] is not catalog:
        lines = [
            "MFU/HFU count attention without causal halving (Narayanan/PaLM convention) against the dense "
            f"{plan.dtype} peak {hw.peak / 1e12:.0f} TFLOP/s",
            f"GEMM ceiling = MAMF {hw.mamf:.3f} of peak x tile/wave/K efficiency ({hw.eff.num_sms} SMs)",
            _attention_assumption(hw, plan.stack, catalog) if plan.flash_attention
            else "unfused attention (batched GEMMs + softmax kernels)",
            "communication overlap on (Megatron-Core/TE)" if plan.overlap else "no communication overlap",
            bandwidth_assumption(hw),
        ] + [f"{k}: {v}" for k, v in hw.eff.assumptions.items()] + moe_assumptions(model, hw)
        ce_line = _compute_efficiency_assumption(plan.stack, catalog)
        if ce_line:
            lines.append(ce_line)
        if plan.dtype in WIDE_DTYPES:
            lines.append(f"{plan.dtype} step: 4-byte weights, activations, gradients and collective payloads; GEMMs at "
                         "the BF16 MAMF fraction of the 32-bit peak (assumed: no TF32/FP32 MAMF measured)")
            if plan.dtype == "tf32" and not system.accelerator.peak_flops.get("tf32"):
                lines.append(f"{system.accelerator.id} has no TF32 tensor cores: tf32 matmuls run at its FP32 "
                             "CUDA-core peak")
        flag = uncalibrated_note(system.accelerator.id)
        if flag:
            lines.insert(0, flag)
        if len(_ASSUMPTIONS) >= 1024:
            _ASSUMPTIONS.clear()
        hit = _ASSUMPTIONS[key] = (hw, model, catalog, tuple(lines))
    return list(hit[3])


# (id(hw), id(model), id(catalog), dtype, flash, overlap, stack) -> (hw, model, catalog, lines); the entry
# keeps the objects alive, so their ids are not reused while cached
_ASSUMPTIONS: dict[tuple, tuple] = {}


# One plan through the step model on plain Python numbers (``clustertwin.xp.scalar_mode``): the same
# formulas as a batch, ~10x fewer microseconds than numpy on 0-d arrays. False: through numpy (the
# reference tests/sim/test_fast_paths.py compares it with). A plan whose arithmetic divides by zero or
# overflows (numpy: inf with a warning, Python: an exception) is rerun through numpy; so is any other
# error unless STRICT_SCALAR (the tests), so a plain-number gap in a rarely used branch costs time, not
# a wrong answer or a crash.
SCALAR = True
STRICT_SCALAR = False
SCALAR_FALLBACKS = [0]  # plans rerun through numpy in this process (the tests read it)


def clear_tables() -> None:
    """Forget everything a process has memoised for one-plan estimates (benchmarks time cold calls with
    it): priced collectives and GEMMs, stage layouts and parameters, in-flight layer counts, activation and
    backward-transient bytes, per-layer compute (sim/costs.py), FLOP counts, assumption texts, the plans
    that passed ``check_plan``. None of them holds an answer: each is a pure function of its key (machine,
    model, shapes)."""
    from ..workload import flops, memory, pipeline
    from ..workload import plan as plan_module
    from . import comm, costs, kernels

    comm.clear_tables()
    kernels.clear_tables()
    pipeline._LAYOUTS.clear()
    memory._STAGE_PARAMS.clear()
    memory._INFLIGHT.clear()
    memory._ACT_BYTES.clear()
    memory._TRANSIENT.clear()
    costs._LAYER.clear()
    flops._PER_TOKEN.clear()
    _ASSUMPTIONS.clear()
    _PLACES.clear()
    plan_module._PASSED.clear()


def estimate(model: ModelSpec, system: SystemSpec, fabric: ScaleOutTech, plan: ParallelPlan, *,
             catalog: Any = None, check: bool = True, network: Any = None,
             memory_margin_gb: float = DEFAULT_MEMORY_MARGIN_GB) -> StepResult:
    """Scalar estimate of one plan; numerically identical to ``estimate_batch`` (it calls it)."""
    if not SCALAR:
        return _estimate(model, system, fabric, plan, catalog, check, network, memory_margin_gb)
    try:
        with np.scalar_mode():
            return _estimate(model, system, fabric, plan, catalog, check, network, memory_margin_gb)
    except InputError:
        raise
    except (ArithmeticError, ValueError):
        pass
    except (TypeError, AttributeError, IndexError, KeyError):
        if STRICT_SCALAR:
            raise
    SCALAR_FALLBACKS[0] += 1
    return _estimate(model, system, fabric, plan, catalog, check, network, memory_margin_gb)


def _estimate(model: ModelSpec, system: SystemSpec, fabric: ScaleOutTech, plan: ParallelPlan, catalog: Any,
              check: bool, network: Any, memory_margin_gb: float) -> StepResult:
    if check:
        check_plan(model, plan)
    plans = {"tp": plan.tp, "pp": plan.pp, "dp": plan.dp, "cp": plan.cp, "ep": plan.ep, "vpp": plan.vpp,
             "micro_batch": plan.micro_batch, "recompute": plan.recompute_code, "zero": plan.zero_effective,
             "global_batch": plan.global_batch, "sequence_parallel": plan.sequence_parallel, "etp": plan.etp,
             "uneven_pipeline": plan.uneven_pipeline, "microbatch_group": plan.microbatch_group,
             "pipeline_schedule": plan.pipeline_schedule, "offload": plan.offload_code,
             "activation_offload_layers": plan.activation_offload_layers}
    hw = make_hardware(system, fabric, plan.dtype, catalog, network=network)
    out = estimate_batch(model, system, fabric, plans, seq_len=plan.seq_len, dtype=plan.dtype,
                         flash_attention=plan.flash_attention, overlap=plan.overlap,
                         grad_reduce_bytes=plan.grad_reduce_bytes, cp_comm=plan.cp_comm, catalog=catalog,
                         hardware=hw, stack=plan.stack, memory_margin_gb=memory_margin_gb, rule_mask=False)
    f = {k: v if type(v) is float else (float(v) if np.ndim(v) == 0 else float(np.asarray(v).reshape(-1)[0]))
         for k, v in out.items()}
    step = f["step_time_s"]
    br = {k: f[key] for k, key in _BREAKDOWN_KEYS}
    mem = {k: f[key] for k, key in _MEMORY_KEYS}
    assumptions = _assumptions(model, system, hw, plan, catalog)
    if plan.uneven_pipeline and mixed_interleaved_chunks(model.num_layers, plan.pp, plan.vpp):
        c = -(-model.num_layers // (plan.pp * plan.vpp))
        assumptions.append(
            f"pipeline: {model.num_layers} layers on pp {plan.pp} x vpp {plan.vpp} mix virtual stages of {c - 1} and {c} "
            "layers inside the interleaved order; this closed form does not price the stalls that causes (the event "
            "engine, which runs Megatron's order, was 11-32 % slower on such layouts): check with --engine event")
    if model.is_moe or plan.zero_effective >= 2:
        assumptions += layout_caveats(get_stack(plan.stack), is_moe=model.is_moe, ep=int(plan.ep), etp=int(plan.etp),
                                      pp=int(plan.pp), zero=int(plan.zero_effective), domain=int(hw.domain))
    details = {"forward_flops_per_token": float(forward_flops_total(model, plan.seq_len)),
               "num_micro_batches": f["num_micro_batches"], "dp_comm_raw_s": f["dp_comm_raw_s"],
               "tp_comm_raw_s": f["tp_comm_raw_s"]}
    return StepResult(
        step_time_s=step, tokens_per_s=f["tokens_per_s"], mfu=f["mfu"], hfu=f["hfu"],
        tflops_per_gpu=f["tflops_per_gpu"], tflops_per_gpu_hw=f["tflops_per_gpu_hw"],
        memory_gb_per_gpu=f["memory_gb_per_gpu"], fits_memory=bool(f["fits_memory"]),
        memory_capacity_gb=hw.hbm_bytes / 1e9, memory_margin_gb=float(memory_margin_gb),
        breakdown=br, bottleneck=_bottleneck(br, step, plan, hw), memory_breakdown_gb=mem,
        num_gpus=plan.num_gpus, model=model.id, system=system.id, fabric=fabric.id,
        plan={**plan.to_dict(), "recompute": RECOMPUTE[plan.recompute_code]}, assumptions=assumptions,
        details=details,
    )

"""From (model, system, fabric, plan) to per-stage op durations, using the shared cost model.

Both engines take every per-op cost from ``clustertwin.sim.costs.stage_costs`` (composed from the
modules of ``sim/components/``: GEMM, attention, element-wise, TP/CP/EP/PP/DP collectives, logits,
optimizer); the event engine only schedules them.

Mapping (one layer, one micro-batch, one representative rank):
* ``fwd`` = GEMMs + attention core + element-wise kernels; ``bwd`` likewise; the backward GEMMs are
  half dgrad, half wgrad (same shapes), which gives the B / W split of zero-bubble schedules;
* ``recompute`` and ``tp_recompute`` as the cost model gives them (full: the whole forward; selective:
  the attention core);
* DP (per step): ZeRO-0 all-reduce, ZeRO-1/2 reduce-scatter + all-gather (distributed optimizer),
  ZeRO-3 per micro-batch gathers and reduce-scatters, spread over the stage's layers by parameters;
* the logits + cross-entropy block is one extra "layer" at the end of the last virtual stage.

Layers per virtual stage follow Megatron: even when ``p*v`` divides ``L``; when it divides ``L + 2``
the embedding and the loss count as one layer each, so the first and last virtual stages hold one
layer fewer (``account_for_embedding/loss_in_pipeline_split``); otherwise the run needs an explicit
layout and we take the balanced one of ``sim/pp_layout.py`` (as the analytical engine does; without
the head cost, the remainder goes to the middle stages).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ...errors import InputError
from ..pp_layout import balanced_virtual_stage_counts
from .core import simulate_work
from .engine import LINK_SCALEOUT, LINK_SCALEUP, InterferenceModel
from .result import EventResult, StepMeta
from .work import EventOptions, LayerWork, StageWork, Straggler

# Compute slowdown of an overlapped scale-out collective relative to a scale-up one. NCCL kernels hold
# their channels' CTAs (SMs) and stream through HBM for the whole collective whatever the transport,
# so the same chip constant applies (as in the analytical engine). Calculon's lower IB charge (2 % vs
# 15 %, MODELLING.md section 5) would be 2/15 here; it was tried and gave MAPE 4.56 % / max 17.5 % vs
# 4.35 % / 13.6 % on training.csv (docs/event-sim.md).
SCALEOUT_TO_SCALEUP_SLOWDOWN = 1.0


def layers_per_virtual_stage(num_layers: int, p: int, v: int, head_over_layer: float | None = None) -> list[int]:
    """Transformer layers of each virtual stage 0..p*v-1 (Megatron rules, see module docstring).
    ``head_over_layer``: the last stage's output head(s) + loss + MTP in units of one layer's time; given,
    a split that is neither even nor L + 2 takes the balanced custom layout (``sim/pp_layout.py``)."""
    n = p * v
    if num_layers % n == 0:
        return [num_layers // n] * n
    if (num_layers + 2) % n == 0 and (num_layers + 2) // n >= 1:
        k = (num_layers + 2) // n
        out = [k] * n
        out[0] -= 1
        out[-1] -= 1
        return out
    if head_over_layer is not None and p > 1:
        return balanced_virtual_stage_counts(num_layers, p, v, head_over_layer)
    base, extra = divmod(num_layers, n)
    out = [base] * n
    # remainder to the middle virtual stages (first and last also carry embedding / logits)
    order = sorted(range(n), key=lambda i: (i in (0, n - 1), abs(i - (n - 1) / 2)))
    for i in order[:extra]:
        out[i] += 1
    return out


def _scalar(costs: dict[str, np.ndarray]) -> dict[str, float]:
    return {k: float(np.asarray(v).reshape(-1)[0]) for k, v in costs.items()}


def _group_link(size: float, stride: float, domain: int) -> int:
    """Scale-up when the whole group fits inside one scale-up domain (Megatron order tp, cp, dp)."""
    return LINK_SCALEUP if size * stride <= domain or size <= 1 else LINK_SCALEOUT


def event_options_for(plan: Any, hw: Any, *, schedule: str | None = None, steps: int = 1,
                      interference: InterferenceModel | None = None) -> EventOptions:
    """Scheduling options implied by a ``ParallelPlan`` (Megatron-Core defaults with overlap on)."""
    v = int(plan.vpp)
    plan_sched = str(getattr(plan, "pipeline_schedule", "1f1b") or "1f1b")
    if plan_sched == "dualpipe" and schedule is None:
        raise InputError("the event engine has no DualPipe schedule (the plan's pipeline_schedule is dualpipe)",
                         hint="use --engine analytical, or --pipeline-schedule 1f1b / zb-h1")
    sched = schedule or ("zb-h1" if plan_sched == "zb-h1" else ("interleaved" if v > 1 else "1f1b"))
    m = int(plan.num_micro_batches)
    if m < 1:
        raise InputError(
            f"global batch {plan.global_batch} gives no micro-batch per pipeline (dp {plan.dp} x micro-batch {plan.micro_batch})",
            hint="raise --global-batch or lower --dp / --micro-batch",
        )
    from ...limits import check_limit

    check_limit("micro_batches", m * int(plan.vpp) * int(plan.pp), flag="micro-batches x virtual stages x stages (event engine)")
    zero = int(plan.zero_effective)
    domain = int(hw.domain)
    t, c, d, p, e = plan.tp, plan.cp, plan.dp, plan.pp, plan.ep
    if interference is None:
        sigma = float(hw.eff.overlap_slowdown)
        interference = InterferenceModel(compute_slowdown_scaleup=sigma,
                                         compute_slowdown_scaleout=sigma * SCALEOUT_TO_SCALEUP_SLOWDOWN)
    overlap = bool(plan.overlap)
    return EventOptions(
        schedule=sched,
        num_microbatches=m,
        microbatch_group=(int(getattr(plan, "microbatch_group", 0) or 0) or None) if v > 1 else None,
        zero_stage=zero,
        # ZeRO-3 / FSDP reduce-scatter each layer's sharded gradients as the backward produces them (there is
        # no unsharded buffer to accumulate into); how much hides is fsdp_exposed_share
        overlap_grad_reduce=overlap or zero >= 3,
        overlap_param_gather=overlap,
        tp_overlap=overlap and bool(plan.sequence_parallel) and t > 1 and _stack_tp_overlap(plan, hw),
        fsdp_exposed_share=_fsdp_exposed_share(plan, hw),
        tp_exposed_fraction=1.0 / t if t > 1 else 0.0,
        ep_overlap=False,
        p2p_overlap=overlap and v > 1,
        bucket_params=max(40e6, 1e6 * d * c),
        tp_link=_group_link(t, 1, domain),
        cp_link=_group_link(c, t, domain),
        ep_link=_group_link(e, plan.etp, domain),
        dp_link=_group_link(d * c, t, domain),
        pp_link=_group_link(p, t * c * d, domain),
        interference=interference,
        steps=steps,
    )


def layer_work_from_costs(model: Any, plan: Any, c: dict[str, float], *, grad_reduce_bytes: float = 2.0,
                          name: str = "L") -> LayerWork:
    """One layer, one micro-batch, from the scalar cost dict of ``sim.costs.stage_costs``."""
    zero = int(plan.zero_effective)
    lps = max(c["layers_per_stage"], 1e-9)
    fwd = c["layer_fwd_gemm_s"] + c["layer_fwd_attn_s"] + c["layer_fwd_mem_s"] + c["layer_fwd_host_s"]
    wgrad = 0.5 * c["layer_bwd_gemm_s"]
    bwd_in = c["layer_bwd_gemm_s"] - wgrad + c["layer_bwd_attn_s"] + c["layer_bwd_mem_s"] + c["layer_bwd_host_s"]
    # attention block share of the forward (CP ring overlaps it): attention GEMMs by parameter share
    attn_params = model.attention_params()
    mlp_params = max(model.dense_mlp_params(), 1)
    if model.is_moe:
        mlp_params = (model.moe_topk + model.num_shared_experts) * model.expert_params()
    attn_gemm = c["layer_fwd_gemm_s"] * attn_params / (attn_params + mlp_params)
    attn_fraction = min(0.95, (attn_gemm + c["layer_fwd_attn_s"]) / fwd) if fwd > 0 else 0.5
    # DP: per-step totals of the (most-loaded) stage, spread over its layers
    dp_param_bwd = None
    if zero >= 3 and "fsdp_ag_s" in c:  # the implementation's gathers (flat rings, recompute re-gather)
        dp_grad = c["fsdp_rs_s"] / lps
        dp_param = c["fsdp_ag_s"] / lps
        dp_param_bwd = dp_param * c["fsdp_bwd_gathers"]
    elif zero >= 1:  # ZeRO-3: reduce-scatter every micro-batch, gather before every fwd and bwd
        dp_grad = (c["dp_rs_s"] + c["edp_rs_s"]) / lps
        dp_param = (c["dp_ag_s"] + c["edp_ag_s"]) / lps
    else:
        dp_grad = (c["dp_ar_s"] + c["edp_ar_s"]) / lps
        dp_param = 0.0
    params = c["dp_grad_bytes"] / grad_reduce_bytes / lps
    return LayerWork(
        fwd=fwd, bwd_input=bwd_in, bwd_weight=wgrad, recompute=c["layer_recompute_s"],
        attn_fraction=attn_fraction, tp_fwd=c["tp_comm_fwd_s"], tp_bwd=c["tp_comm_bwd_s"],
        tp_recompute=c["tp_comm_recompute_s"], cp_fwd=c["cp_comm_fwd_s"], cp_bwd=c["cp_comm_bwd_s"],
        ep_fwd=c["ep_comm_fwd_s"], ep_bwd=c["ep_comm_bwd_s"], dp_grad=dp_grad, dp_param=dp_param,
        dp_param_bwd=dp_param_bwd,
        params=params, name=name, cp_overlap=c.get("cp_overlappable", 1.0) > 0.5,
    )


def stage_work_from_costs(model: Any, plan: Any, costs: dict[str, float], *, grad_reduce_bytes: float = 2.0,
                          layers: list[LayerWork] | None = None) -> tuple[StageWork, ...]:
    """Per-stage work of ``plan`` from the scalar cost dict of ``sim.costs.stage_costs``.

    ``layers``: the work of every global layer 0..L-1 (e.g. DeepSeek-V3's leading dense layers before
    the MoE layers); default: every layer the same (``costs`` averaged over layer types)."""
    c = costs
    p, v = int(plan.pp), int(plan.vpp)
    if layers is None:
        layers = [layer_work_from_costs(model, plan, c, grad_reduce_bytes=grad_reduce_bytes)] * model.num_layers
    logits = LayerWork(fwd=c["logits_fwd_s"], bwd_input=0.5 * c["logits_bwd_s"], bwd_weight=0.5 * c["logits_bwd_s"],
                       attn_fraction=0.0, name="logits")
    lw = layers[-1]
    t_layer = lw.fwd + lw.bwd_input + lw.bwd_weight + lw.recompute
    head = c["logits_fwd_s"] + c["logits_bwd_s"] + int(getattr(model, "mtp_depth", 0) or 0) * t_layer
    counts = layers_per_virtual_stage(model.num_layers, p, v, head / t_layer if t_layer > 0 else 0.0)
    first = [0] * (p * v)
    for k in range(1, p * v):
        first[k] = first[k - 1] + counts[k - 1]
    stages = []
    for i in range(p):
        chunks = []
        for ch in range(v):
            vs = ch * p + i
            chunk = list(layers[first[vs]:first[vs] + counts[vs]])
            if vs == p * v - 1:
                # multi-token prediction: one more transformer layer per depth before the output head
                chunk.extend([layers[-1]] * int(getattr(model, "mtp_depth", 0) or 0))
                chunk.append(logits)
            chunks.append(tuple(chunk))
        stages.append(StageWork(
            chunks=tuple(chunks),
            p2p_fwd=c["pp_p2p_s"] if p > 1 else 0.0,
            p2p_bwd=c["pp_p2p_s"] if p > 1 else 0.0,
            optimizer=c["optimizer_s"],
            step_overhead=c["step_overhead_s"],
        ))
    return tuple(stages)


def _dense_variant(model: Any) -> Any:
    """The model with every layer dense (the leading dense layers of an MoE model)."""
    return model.with_(num_experts=0, moe_topk=0, moe_ffn_hidden_size=0, num_shared_experts=0, num_dense_layers=0)


def _fsdp_exposed_share(plan, hw) -> float:
    st = _stack_of(plan, hw)
    return 0.0 if st is None else max(0.0, 1.0 - float(st.fsdp_overlap))


def _stack_tp_overlap(plan, hw) -> bool:
    st = _stack_of(plan, hw)
    return True if st is None else bool(st.tp_overlap)


def _stack_of(plan, hw):
    if not getattr(plan, "stack", None):
        return None
    from ...workload.stacks import resolve_stack

    return resolve_stack(plan.stack, getattr(hw, "catalog", None))


def _meta(model, plan, hw) -> StepMeta:
    from ...workload.flops import hardware_flops_per_step, model_flops_per_step
    from ...workload.memory import memory_per_gpu

    mf = float(model_flops_per_step(model, plan.seq_len, plan.global_batch))
    hf = float(hardware_flops_per_step(model, plan.seq_len, plan.global_batch, plan.recompute_code))
    mem = memory_per_gpu(
        model, seq_len=plan.seq_len, micro_batch=plan.micro_batch, num_micro_batches=plan.num_micro_batches,
        tp=plan.tp, pp=plan.pp, dp=plan.dp, cp=plan.cp, ep=plan.ep, etp=plan.etp, vpp=plan.vpp,
        zero=plan.zero_effective, sp=plan.sequence_parallel, recompute_code=plan.recompute_code,
        flash=plan.flash_attention, runtime_overhead_bytes=hw.eff.runtime_overhead_bytes,
        microbatch_group=getattr(plan, "microbatch_group", 0), stack=_stack_of(plan, hw),
        offload=getattr(plan, "offload_code", 0), activation_offload_layers=getattr(plan, "activation_offload_layers", 0),
    )
    return StepMeta(
        tokens_per_step=float(plan.global_batch * plan.seq_len), num_gpus=int(plan.num_gpus),
        model_flops=mf, hardware_flops=hf, peak_flops=float(hw.peak),
        memory_bytes_per_gpu=float(np.asarray(mem["total"]).reshape(-1)[0]), hbm_bytes=float(hw.hbm_bytes),
        memory_detail={k: float(np.asarray(x).reshape(-1)[0]) for k, x in mem.items()},
    )


def simulate(
    model: Any,
    system: Any,
    fabric: Any,
    plan: Any,
    *,
    catalog: Any = None,
    schedule: str | None = None,
    stragglers: tuple[Straggler, ...] = (),
    interference: InterferenceModel | None = None,
    steps: int = 1,
    trace: bool = False,
    check: bool = True,
    network: Any = None,
) -> EventResult:
    """Simulate one training step of ``model`` on ``system`` + scale-out ``fabric`` under ``plan``.

    ``schedule``: 1f1b | interleaved | zb-h1 | gpipe (default: interleaved when plan.vpp > 1, else 1f1b).
    ``stragglers``: per-stage slowdowns (:class:`Straggler`). ``trace``: keep the timeline for
    ``clustertwin.report.trace.write_chrome_trace``.
    """
    from ...workload.plan import check_plan
    from .. import costs as cm

    if check:
        check_plan(model, plan)
    hw = cm.make_hardware(system, fabric, plan.dtype, catalog, network=network)
    kw: dict[str, Any] = {}
    if hasattr(plan, "cp_comm"):
        kw["cp_comm"] = plan.cp_comm
    if getattr(plan, "stack", None):
        from ...workload.stacks import resolve_stack

        kw["stack"] = resolve_stack(plan.stack, catalog)  # same implementation properties as the analytical engine
    if getattr(plan, "offload_code", 0) or getattr(plan, "activation_offload_layers", 0):
        kw["offload"] = plan.offload_code
        kw["activation_offload_layers"] = plan.activation_offload_layers
    raw = cm.stage_costs(
        model, hw, tp=plan.tp, pp=plan.pp, dp=plan.dp, cp=plan.cp, ep=plan.ep, vpp=plan.vpp,
        micro_batch=plan.micro_batch, recompute=plan.recompute_code, zero=plan.zero_effective,
        global_batch=plan.global_batch, seq_len=plan.seq_len, sp=plan.sequence_parallel, etp=plan.etp,
        flash=plan.flash_attention, overlap=plan.overlap, grad_reduce_bytes=plan.grad_reduce_bytes, **kw,
    )
    costs = _scalar(raw)

    def costs_of(m):
        return _scalar(cm.stage_costs(
            m, hw, tp=plan.tp, pp=plan.pp, dp=plan.dp, cp=plan.cp, ep=plan.ep, vpp=plan.vpp,
            micro_batch=plan.micro_batch, recompute=plan.recompute_code, zero=plan.zero_effective,
            global_batch=plan.global_batch, seq_len=plan.seq_len, sp=plan.sequence_parallel, etp=plan.etp,
            flash=plan.flash_attention, overlap=plan.overlap, grad_reduce_bytes=plan.grad_reduce_bytes, **kw))

    layers = None
    if model.is_moe and 0 < model.num_dense_layers < model.num_layers:
        # leading dense layers and MoE layers as they are, not averaged (stage imbalance; EP only in MoE layers)
        gb = plan.grad_reduce_bytes
        dense = layer_work_from_costs(model, plan, costs_of(_dense_variant(model)), grad_reduce_bytes=gb, name="D")
        moe = layer_work_from_costs(model, plan, costs_of(model.with_(num_dense_layers=0)), grad_reduce_bytes=gb,
                                    name="E")
        layers = [dense] * model.num_dense_layers + [moe] * (model.num_layers - model.num_dense_layers)
    stages = stage_work_from_costs(model, plan, costs, grad_reduce_bytes=plan.grad_reduce_bytes, layers=layers)
    opts = event_options_for(plan, hw, schedule=schedule, steps=steps, interference=interference)
    if opts.schedule == "zb-h1" and plan.vpp != 1:
        plan = replace(plan, vpp=1)
    res = simulate_work(stages, opts, meta=_meta(model, plan, hw), stragglers=tuple(stragglers), trace=trace)
    return res


def estimate(model: Any, system: Any, fabric: Any, plan: Any, *, catalog: Any = None, check: bool = True,
             schedule: str | None = None, stragglers: tuple[Straggler, ...] = (),
             interference: InterferenceModel | None = None, steps: int = 1, trace: bool = False,
             network: Any = None, memory_margin_gb: float | None = None) -> EventResult:
    """Event-driven counterpart of ``clustertwin.sim.analytical.estimate`` (same arguments first).

    Step time, breakdown, bottleneck, critical path and utilisation come from the event engine; memory
    and the FLOP counts (MFU/HFU conventions) are the analytical model's, so both engines report the
    same memory and differ only in how the same per-op costs are scheduled and overlapped.
    """
    from ..analytical import estimate as analytical_estimate

    if check:
        from ...workload.plan import check_plan

        check_plan(model, plan)
    margin = {} if memory_margin_gb is None else {"memory_margin_gb": memory_margin_gb}
    ana = analytical_estimate(model, system, fabric, plan, catalog=catalog, check=False, network=network, **margin)
    res = simulate(model, system, fabric, plan, catalog=catalog, schedule=schedule, stragglers=stragglers,
                   interference=interference, steps=steps, trace=trace, check=False, network=network)
    step = res.step_time_s
    ratio = ana.step_time_s / step if step > 0 else 0.0
    assumptions = list(ana.assumptions) + [
        f"event engine: {res.schedule} schedule, one representative rank per pipeline stage, "
        f"{res.num_ops} ops; overlapped collectives slow compute by the chip's overlap_slowdown; "
        "links shared fairly between concurrent transfers",
    ]
    return res.with_(
        tokens_per_s=ana.tokens_per_s * ratio, mfu=ana.mfu * ratio, hfu=ana.hfu * ratio,
        tflops_per_gpu=ana.tflops_per_gpu * ratio, tflops_per_gpu_hw=ana.tflops_per_gpu_hw * ratio,
        memory_gb_per_gpu=ana.memory_gb_per_gpu, fits_memory=ana.fits_memory,
        memory_capacity_gb=ana.memory_capacity_gb, memory_margin_gb=ana.memory_margin_gb,
        memory_breakdown_gb=dict(ana.memory_breakdown_gb), num_gpus=ana.num_gpus, model=ana.model,
        system=ana.system, fabric=ana.fabric, plan=dict(ana.plan), assumptions=assumptions,
    )


estimate_event = estimate


def parse_straggler(text: str) -> Straggler:
    """Parse a CLI straggler spec: ``stage=3,compute=1.2`` / ``stage=0,comm=4,link=scale-out`` /
    ``stage=15,layers=1``."""
    fields: dict[str, str] = {}
    for part in str(text).split(","):
        if not part.strip():
            continue
        key, sep, val = part.partition("=")
        if not sep:
            raise InputError(f"cannot read straggler {text!r}", hint="write e.g. stage=3,compute=1.2,comm=2,layers=1")
        fields[key.strip().lower()] = val.strip()
    unknown = set(fields) - {"stage", "compute", "comm", "layers", "link"}
    if unknown or "stage" not in fields:
        raise InputError(f"cannot read straggler {text!r}",
                         hint="keys: stage (required), compute, comm (slowdown factors), layers (extra layers), "
                              "link (all | scale-up | scale-out: which links comm slows)")
    try:
        return Straggler(stage=int(fields["stage"]), compute=float(fields.get("compute", 1.0)),
                         comm=float(fields.get("comm", 1.0)), extra_layers=int(fields.get("layers", 0)),
                         link=fields.get("link", "all"))
    except ValueError:
        raise InputError(f"cannot read straggler {text!r}", hint="stage and layers are integers, factors numbers") from None


def straggler_slowdown(model: Any, system: Any, fabric: Any, plan: Any, stragglers: tuple[Straggler, ...], *,
                       catalog: Any = None, schedule: str | None = None) -> dict[str, float]:
    """How much ``stragglers`` slow one step: ``{"base_s", "perturbed_s", "slowdown_pct"}``."""
    base = simulate(model, system, fabric, plan, catalog=catalog, schedule=schedule)
    pert = simulate(model, system, fabric, plan, catalog=catalog, schedule=schedule, stragglers=tuple(stragglers),
                    check=False)
    return {"base_s": base.step_time_s, "perturbed_s": pert.step_time_s,
            "slowdown_pct": 100.0 * (pert.step_time_s / base.step_time_s - 1.0)}

"""Runs one step of per-stage work through the engine and reads the result (no cost model here)."""

from __future__ import annotations

import gc
from collections import defaultdict

from ...workload.rules import DEFAULT_MEMORY_MARGIN_GB, memory_fits
from .analysis import COMPUTE_CATS, critical_segments, stage_times, stream_utilisation
from .engine import Engine
from .graph import build_step
from .result import EventResult, StepMeta, Timeline
from .work import EventOptions, StageWork, Straggler, apply_stragglers

_BREAKDOWN_NAMES = {
    "forward": "forward",
    "backward": "backward",
    "wgrad": "backward",
    "recompute": "recompute",
    "logits": "logits",
    "optimizer": "optimizer",
    "overhead": "overhead",
    "pp": "pp_p2p",
    "tp": "tp_comm",
    "cp": "cp_comm",
    "ep": "ep_comm",
    "dp-grad": "dp_comm",
    "dp-param": "dp_comm",
}

_BOTTLENECK_TEXT = {
    "forward": "compute (forward)",
    "backward": "compute (backward)",
    "recompute": "activation recompute",
    "optimizer": "optimizer step",
    "overhead": "per-step overhead",
    "logits": "output layer + loss on the last stage",
    "overlap_slowdown": "compute slowed by overlapped communication",
    "fsdp_comm": "exposed FSDP parameter gathers / gradient reduce-scatter",
    "pp_p2p": "exposed pipeline (P2P) communication",
    "tp_comm": "exposed tensor-parallel communication",
    "cp_comm": "exposed context-parallel communication",
    "ep_comm": "exposed expert-parallel all-to-all",
    "dp_comm": "exposed data-parallel communication",
    "pp_bubble": "pipeline bubble / stage imbalance",
}


def simulate_work(
    stages: tuple[StageWork, ...],
    opts: EventOptions,
    *,
    meta: StepMeta | None = None,
    stragglers: tuple[Straggler, ...] = (),
    trace: bool = False,
) -> EventResult:
    """Simulate ``opts.steps`` steps of ``stages`` and report the last one."""
    meta = meta or StepMeta()
    if stragglers:
        stages = apply_stragglers(tuple(stages), tuple(stragglers), opts)
    # The graph is acyclic data (lists of floats/ints/tuples): pausing the cyclic garbage collector
    # while it is built and run saves its repeated full scans of the ~1e5 container objects.
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        built = build_step(tuple(stages), opts)
        g = built.graph
        sched = Engine(g, opts.interference).run()
    finally:
        if gc_was_on:
            gc.enable()
    ends = [float(sched.end[o]) for o in built.step_end_ops]
    t0 = ends[-2] if len(ends) > 1 else 0.0
    step = ends[-1] - t0
    segs = [s for s in critical_segments(g, sched) if s.end_s > t0]
    cp_s: dict[str, float] = defaultdict(float)
    for s in segs:
        cp_s[s.category] += s.end_s - max(s.start_s, t0)
    # The stage whose work reaches the end-of-step barrier last sets the step: report its breakdown.
    crit_stage = 0
    for s in segs:
        if s.category not in ("optimizer", "overhead", "sync", "dp-param"):
            crit_stage = s.stage
    times = stage_times(g, sched, step, t0)
    st = times[crit_stage]
    breakdown: dict[str, float] = defaultdict(float)
    wall = sum(st.compute_s.values())
    scale = min(1.0, st.compute_work_s / wall) if wall > 0 else 1.0
    for k, v in st.compute_s.items():
        breakdown[_BREAKDOWN_NAMES.get(k, k)] += v * scale
    breakdown["overlap_slowdown"] += wall * (1.0 - scale)
    dp_name = "fsdp_comm" if opts.zero_stage >= 3 else "dp_comm"
    for k, v in st.exposed_comm_s.items():
        name = _BREAKDOWN_NAMES.get(k, k)
        breakdown[dp_name if name == "dp_comm" else name] += v
    breakdown["pp_bubble"] += st.bubble_s
    breakdown = {k: float(v) for k, v in breakdown.items() if v > 0 or k == "pp_bubble"}
    bottleneck_key = max(breakdown, key=lambda k: breakdown[k]) if breakdown else "pp_bubble"
    bottleneck = f"{_BOTTLENECK_TEXT.get(bottleneck_key, bottleneck_key)} is {100 * breakdown.get(bottleneck_key, 0) / step:.0f}% of the step" if step > 0 else "nothing to run"
    if bottleneck_key in ("forward", "backward"):
        comp = sum(breakdown.get(k, 0.0) for k in ("forward", "backward", "recompute", "logits"))
        others = sorted(((v, k) for k, v in breakdown.items()
                         if k not in ("forward", "backward", "recompute", "logits")), reverse=True)
        bottleneck = f"compute is {100 * comp / step:.0f}% of the step"
        if others and others[0][0] > 0:
            v, k = others[0]
            bottleneck += f"; largest overhead: {_BOTTLENECK_TEXT.get(k, k)} at {100 * v / step:.0f}%"
    busy = [sum(t.compute_s.get(c, 0.0) for c in COMPUTE_CATS) for t in times]
    compute_crit = sum(st.compute_s.values())
    step_safe = step if step > 0 else float("nan")
    tokens_per_s = meta.tokens_per_step / step_safe if meta.tokens_per_step else 0.0
    denom = step_safe * meta.num_gpus * meta.peak_flops if meta.peak_flops else 0.0
    mfu = meta.model_flops / denom if denom else 0.0
    hfu = meta.hardware_flops / denom if denom else 0.0
    tflops = meta.model_flops / (step_safe * meta.num_gpus) / 1e12 if meta.model_flops else 0.0
    notes = []
    if stragglers:
        notes.append("stragglers: " + ", ".join(
            f"stage {s.stage} compute x{s.compute:g} comm x{s.comm:g} ({s.link}) +{s.extra_layers} layers"
            for s in stragglers))
    return EventResult(
        step_time_s=float(step),
        tokens_per_s=float(tokens_per_s),
        mfu=float(mfu),
        hfu=float(hfu),
        tflops_per_gpu=float(tflops),
        memory_gb_per_gpu=meta.memory_bytes_per_gpu / 1e9,
        fits_memory=bool(memory_fits(meta.memory_bytes_per_gpu, meta.hbm_bytes)) if meta.hbm_bytes else True,
        memory_capacity_gb=meta.hbm_bytes / 1e9, memory_margin_gb=DEFAULT_MEMORY_MARGIN_GB,
        breakdown=breakdown,
        bottleneck=bottleneck,
        critical_path=[
            {"stage": s.stage, "stream": s.stream, "category": s.category, "first_op": s.name, "ops": s.ops,
             "start_s": max(s.start_s, t0) - t0, "end_s": s.end_s - t0}
            for s in segs
        ],
        critical_path_s=dict(cp_s),
        stream_utilisation=stream_utilisation(g, sched, step) if len(ends) == 1 else {},
        exposed_comm_s=dict(st.exposed_comm_s),
        hidden_comm_s=dict(st.hidden_comm_s),
        stage_busy_s=busy,
        bubble_fraction=max(0.0, float(1.0 - compute_crit / step)) if step > 0 else 0.0,  # >= 0 under rounding
        critical_stage=crit_stage,
        num_stages=built.num_stages,
        num_ops=g.num_ops,
        events=sched.events,
        schedule=opts.schedule,
        notes=notes,
        timeline=Timeline(g, sched, tuple(f"stage {i}" for i in range(built.num_stages))) if trace else None,
    )

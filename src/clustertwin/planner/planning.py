"""``plan``: the best layouts for one model on one cluster, with clear errors for impossible asks.

This is the facade the CLI (and ``clustertwin.api``) call. It resolves names against the catalog
and the model zoo, builds the analytical evaluator (or takes an injected one), searches, optionally
re-ranks the top plans with the event-driven engine, and explains why the runner-up lost.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InputError
from ..workload.rules import DEFAULT_MEMORY_MARGIN_GB
from ..workload.stacks import DEFAULT_STACK, get_stack
from .evaluator import AnalyticalEvaluator, Evaluator, oversubscribed, resolve_model
from .search import SearchResult, explain_runner_up, minimum_gpus, search, usable_gpu_counts
from .space import ModelShape, SpaceOptions, space_size, structural_space, with_stack

DEFAULT_MODEL = "llama3-70b"
DEFAULT_SYSTEM = "hgx-h100"
DEFAULT_GPUS = 1024
DEFAULT_TOKENS_PER_BATCH = 1 << 22  # 4 Mi tokens per step when --global-batch is not given


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanRequest:
    model: Any = DEFAULT_MODEL
    system: str = DEFAULT_SYSTEM
    num_gpus: int | None = None
    domains: int | None = None
    global_batch: int | None = None
    seq_len: int | None = None
    fabric: str | None = None
    dtype: str = "bf16"
    oversubscription: float = 1.0
    top_k: int = 5
    engine: str = "analytical"
    options: SpaceOptions = field(default_factory=SpaceOptions)
    distinct_layouts: bool = True
    workers: int = 1
    engine_options: Mapping[str, Any] = field(default_factory=dict)  # passed to the engine (flash_attention, overlap ...)
    stack: str = DEFAULT_STACK  # software stack preset (workload/stacks.py); engine_options override its settings
    max_idle_gpus: int | None = None  # GPUs the plan may leave idle for a better layout (None: 2 %, whole domains)
    memory_margin_gb: float = DEFAULT_MEMORY_MARGIN_GB  # GB per GPU a plan leaves free beyond its modelled peak


@dataclass(frozen=True, slots=True)
class PlanReport:
    request: dict[str, Any]  # resolved inputs (defaults filled in)
    defaults_used: dict[str, Any]
    plans: list[dict[str, Any]]
    runner_up: dict[str, Any] | None
    stats: dict[str, Any]
    engine: str
    assumptions: list[str] = field(default_factory=list)  # e.g. "uncalibrated efficiency (assumed): ..."

    def to_json(self) -> dict[str, Any]:
        return {"plans": self.plans, "request": self.request, "defaults_used": self.defaults_used,
                "runner_up": self.runner_up, "stats": self.stats, "engine": self.engine,
                "assumptions": list(self.assumptions)}


IDLE_SHARE = 0.02  # default --max-idle-gpus: 2 % of the cluster (whole scale-up domains)
IDLE_GAIN = 0.02  # a smaller GPU count is only taken for >= 2 % more tokens/s than the best on all GPUs


def idle_budget(gpus: int, domain: int, max_idle: int | None) -> int:
    """GPUs a plan may leave idle: ``max_idle`` (whole domains), default :data:`IDLE_SHARE` of ``gpus``."""
    if max_idle is None:
        max_idle = int(gpus * IDLE_SHARE)
    if max_idle < 0:
        raise InputError(f"--max-idle-gpus must be >= 0, got {max_idle}")
    return min(int(max_idle), gpus - domain) // domain * domain if gpus > domain else 0


def idle_candidates(gpus: int, domain: int, max_idle: int) -> list[int]:
    """Smaller GPU counts worth trying within ``max_idle``: the largest multiples of ``domain * 2**k``
    (counts with many power-of-two factors admit the most TP/PP/DP/EP splits), at most four."""
    out: list[int] = []
    k = 1
    while domain * k <= gpus:
        n = gpus // (domain * k) * (domain * k)
        if n < gpus and gpus - n <= max_idle and n not in out:
            out.append(n)
        k *= 2
    return sorted(out, reverse=True)[-4:] if len(out) > 4 else out


def plan(req: PlanRequest, catalog: Any, *, evaluator_for: Callable[[int], Evaluator] | None = None) -> PlanReport:
    """Search the layouts of ``req`` and return the best ``top_k`` (InputError if none can run)."""
    defaults: dict[str, Any] = {}
    system = catalog.system(req.system) if isinstance(req.system, str) else req.system
    model = resolve_model(req.model)
    shape = ModelShape.of(model)
    domain = int(system.devices_per_domain)
    if req.num_gpus is not None and req.domains is not None and req.num_gpus != req.domains * domain:
        raise InputError(
            f"--gpus {req.num_gpus} and --domains {req.domains} disagree: {req.domains} domains of {system.id} "
            f"hold {req.domains * domain} GPUs",
            hint="pass only one of --gpus and --domains",
        )
    from ..limits import check_limit

    if req.domains is not None:
        check_limit("domains", req.domains)
    if req.num_gpus is not None:
        check_limit("gpus", req.num_gpus)
        gpus = int(req.num_gpus)
    elif req.domains is not None:
        gpus = int(req.domains) * domain
    else:
        gpus = DEFAULT_GPUS
        defaults["gpus"] = gpus
    seq = req.seq_len
    if seq is None:
        seq = int(getattr(model, "seq_len", 0) or 2048)
        defaults["seq_len"] = seq
    if seq < 1:
        raise InputError(f"--seq-len must be a positive integer, got {seq}", hint="tokens per sequence, e.g. 8192")
    gb = req.global_batch
    if gb is None:
        gb = max(1, DEFAULT_TOKENS_PER_BATCH // max(int(seq), 1))  # a bad --seq-len is refused just below
        defaults["global_batch"] = gb
    for name, v in (("--gpus", gpus), ("--global-batch", gb), ("--seq-len", seq), ("--top", req.top_k),
                    ("--workers", req.workers)):
        if v < 1:
            raise InputError(f"{name} must be a positive integer, got {v}", hint=f"pass {name} 1 or more")
    check_limit("global_batch", gb, flag="--global-batch")
    check_limit("seq_len", seq, flag="--seq-len")
    if req.fabric is not None and not isinstance(req.fabric, str):  # a resolved ScaleOutTech (plan --from-row)
        fabric, fabric_id = req.fabric, req.fabric.id
    else:
        fabric_id = req.fabric or system.default_scaleout
        if req.fabric is None:
            defaults["fabric"] = fabric_id
        fabric = catalog.fabric(fabric_id)
    from ..cluster.buildable import check_buildable

    check_buildable(system, fabric, gpus, oversubscription=req.oversubscription, catalog=catalog,
                    knobs=("fabric", "oversubscription"))
    if req.engine not in ("analytical", "event"):
        from ..errors import UnknownNameError

        raise UnknownNameError("engine", req.engine, ("analytical", "event"))
    stack = get_stack(req.stack) if isinstance(req.stack, str) or req.stack is None else req.stack
    options = with_stack(req.options, stack)
    engine_options = {**stack.engine_options(), **dict(req.engine_options)}

    def make(n: int) -> Evaluator:
        if evaluator_for is not None:
            return evaluator_for(n)
        return AnalyticalEvaluator(model=model, system=system, fabric=fabric, num_gpus=n, global_batch=gb,
                                   seq_len=seq, dtype=req.dtype, oversubscription=req.oversubscription,
                                   catalog=catalog, extra=engine_options, memory_margin_gb=req.memory_margin_gb)

    top = max(req.top_k, 10) if req.engine == "event" else req.top_k
    max_idle = idle_budget(gpus, domain, req.max_idle_gpus)
    res = search(shape, make(gpus), num_gpus=gpus, domain_size=domain, global_batch=gb, seq_len=seq,
                 options=options, top_k=top, distinct_layouts=req.distinct_layouts, workers=req.workers)
    used, all_best = gpus, (res.records(1)[0]["tokens_per_s"] if len(res) else 0.0)
    for n in idle_candidates(gpus, domain, max_idle):
        r2 = search(shape, make(n), num_gpus=n, domain_size=domain, global_batch=gb, seq_len=seq,
                    options=options, top_k=top, distinct_layouts=req.distinct_layouts, workers=req.workers)
        best2 = r2.records(1)[0]["tokens_per_s"] if len(r2) else 0.0
        best_now = res.records(1)[0]["tokens_per_s"] if len(res) else 0.0
        if best2 > best_now * (1 + IDLE_GAIN):  # only for a clearly better layout
            res, used = r2, n
    request = {"model": shape.name, "system": system.id, "gpus": gpus, "domains": gpus / domain,
               "global_batch": gb, "seq_len": seq, "fabric": fabric_id, "dtype": req.dtype,
               "oversubscription": req.oversubscription, "engine": req.engine, "stack": stack.id,
               "max_idle_gpus": max_idle, "gpus_used": used, "idle_gpus": gpus - used,
               "memory_margin_gb": float(req.memory_margin_gb)}
    if used != gpus:
        best_used = res.records(1)[0]["tokens_per_s"]
        request["idle_note"] = (
            f"uses {used:,} of {gpus:,} GPUs ({gpus - used:,} idle, --max-idle-gpus {max_idle:,}): "
            + (f"{best_used / all_best - 1:.1%} more tokens/s than the best layout on all {gpus:,}" if all_best
               else f"no layout uses all {gpus:,} GPUs"))
    if len(res) == 0:
        _raise_impossible(res, shape, system, gpus, gb, seq, domain, req, make, options)
    gpus = used
    records = res.records()
    engine = "analytical"
    if req.engine == "event":
        records = rerank_event(records, model=model, system=system,
                               fabric=oversubscribed(fabric, req.oversubscription, system), gpus=gpus, global_batch=gb,
                               seq_len=seq, dtype=req.dtype, catalog=catalog, engine_options=engine_options)
        engine = "event"
    records = records[: req.top_k]
    for i, r in enumerate(records):
        r["rank"] = i + 1
    stats = {
        "candidates": res.stats.num_structural, "fit_memory": res.stats.num_fit,
        "evaluated": res.stats.num_evaluated, "feasible": res.stats.num_feasible,
        "search_s": res.stats.elapsed_s, "memory_capacity_gb": res.stats.capacity_gb,
        "memory_margin_gb": res.stats.margin_gb,
    }
    from ..sim.machine import uncalibrated_note

    flag = uncalibrated_note(system.accelerator.id)
    notes = [flag] if flag else []
    if records:
        from ..workload.stacks import layout_caveats

        b = records[0]
        notes += [f"best plan: {c}" for c in layout_caveats(
            stack, is_moe=shape.is_moe, ep=int(b.get("ep", 1)), etp=int(b.get("etp", 1)), pp=int(b["pp"]),
            zero=int(b.get("zero", 0)), domain=int(domain))]
    return PlanReport(request=request, defaults_used=defaults, plans=records,
                      runner_up=explain_runner_up(records), stats=stats, engine=engine,
                      assumptions=notes)


def _raise_impossible(res: SearchResult, shape: ModelShape, system: Any, gpus: int, gb: int, seq: int,
                      domain: int, req: PlanRequest, make: Callable[[int], Evaluator],
                      options: SpaceOptions) -> None:
    acc = system.accelerator
    chip = acc.name if "GB" in acc.name else f"{acc.name} ({acc.hbm_bytes / 1e9:.0f} GB)"
    if res.stats.num_structural == 0 and options.fixed:
        import dataclasses

        free = dataclasses.replace(options, fixed={})
        sp = structural_space(shape, num_gpus=gpus, domain_size=domain, global_batch=gb, seq_len=seq, options=free)
        if space_size(sp):
            from .space import RECOMPUTE

            def show(axis: str, vals) -> str:
                return "/".join(RECOMPUTE[v] for v in vals) if axis == "recompute" else "/".join(str(v) for v in vals)

            asked = ", ".join(f"--{k.replace('_', '-')} {show(k, v)}" for k, v in options.fixed.items())
            valid = "; ".join(f"--{k.replace('_', '-')} {show(k, np.unique(sp[k]).tolist())}" for k in options.fixed)
            raise InputError(
                f"no valid layout of {shape.name} on {gpus} GPUs (global batch {gb}, seq-len {seq}) has {asked}",
                hint=f"values that can work here: {valid}",
            )
    if res.stats.num_structural == 0:
        near = usable_gpu_counts(shape, near=gpus, domain_size=domain, global_batch=gb, seq_len=seq,
                                 options=options)
        batch_ok = [b for b in _batch_candidates(gb, gpus) if space_size(structural_space(
            shape, num_gpus=gpus, domain_size=domain, global_batch=b, seq_len=seq, options=options))]
        hint = []
        if near:
            hint.append("use --gpus " + " or ".join(str(n) for n in near))
        if batch_ok:
            hint.append(f"or keep {gpus} GPUs with --global-batch {batch_ok[0]}")
        raise InputError(
            f"no parallel layout of {shape.name} can use {gpus} GPUs with global batch {gb}: tp must divide "
            f"the {shape.num_attention_heads} heads and fit a {domain}-GPU domain, pp be at most the "
            f"{shape.num_layers} layers" + ("" if options.uneven_pipeline else " and divide them")
            + ", and dp*micro-batch the global batch",
            hint=" ".join(hint) or "change --gpus or --global-batch",
        )
    need = minimum_gpus(shape, make, start=gpus + 1, domain_size=domain, global_batch=gb, seq_len=seq,
                        options=options)
    where = f"{shape.name} does not fit on {gpus} {chip} at any layout"
    margin = res.stats.margin_gb
    detail = (f" (the smallest layout needs {res.stats.min_memory_gb:.1f} GB per GPU, "
              f"{res.stats.capacity_gb:.1f} GB usable less a {margin:g} GB margin)")
    lower = (f"; or lower --memory-margin (now {margin:g} GB): the smallest layout fits with "
             f"{res.stats.capacity_gb - res.stats.min_memory_gb:.1f} GB to spare"
             if margin > 0 and res.stats.min_memory_gb <= res.stats.capacity_gb else "")
    if need is None:
        raise InputError(where + detail, hint="use a GPU with more memory or a smaller model" + lower)
    raise InputError(
        where + detail,
        hint=f"needs at least {need} {chip} for the weights, optimizer states and activations: "
             f"use --gpus {need} or more" + lower,
    )


def _batch_candidates(gb: int, gpus: int) -> list[int]:
    """Nearby global batches, closest first: multiples of powers of two and of the GPU count."""
    c = {max(1, gb - (gb % k)) for k in (8, 16, 32, 64, 128)} | {1 << max(0, (gb - 1).bit_length())}
    c |= {max(gpus, gb // gpus * gpus), -(-gb // gpus) * gpus}
    return sorted((b for b in c if b != gb), key=lambda b: (abs(b - gb), b))


def rerank_event(records: list[dict[str, Any]], *, model: Any, system: Any, fabric: Any, gpus: int,
                 global_batch: int, seq_len: int, dtype: str, catalog: Any = None,
                 engine_options: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Re-time the analytical top plans with the event-driven engine and re-sort by its throughput."""
    from .event_adapter import event_estimate

    out = []
    for r in records:  # k plans (about 10): the slow engine only sees the short list
        rr = dict(r)
        try:
            e = event_estimate(r, model=model, system=system, fabric=fabric, gpus=gpus, global_batch=global_batch,
                               seq_len=seq_len, dtype=dtype, catalog=catalog, engine_options=engine_options)
        except InputError as exc:
            rr["event_error"] = exc.message  # keeps its analytical figures, ranked after the event-timed plans
            rr["analytical_step_time_s"] = r["step_time_s"]
            out.append(rr)
            continue
        rr["analytical_step_time_s"] = r["step_time_s"]
        rr.update({k: e[k] for k in ("step_time_s", "tokens_per_s", "mfu", "hfu", "tflops_per_gpu") if k in e})
        if e.get("breakdown"):
            rr["breakdown"] = dict(e["breakdown"])
        if e.get("bottleneck"):
            rr["bottleneck"] = str(e["bottleneck"])
        out.append(rr)
    out.sort(key=lambda r: ("event_error" in r, -r["tokens_per_s"]))
    return out

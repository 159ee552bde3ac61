"""The facade the CLI and the web app call. Returns results, never prints.

>>> from clustertwin import api
>>> r = api.estimate(model="gpt3-175b", system="dgx-a100", gpus=1024, tp=8, pp=8, global_batch=1536)
>>> round(r.mfu, 2) > 0
True
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import InputError
from .sim.engines import ENGINES as _ENGINE_REGISTRY
from .sim.engines import get_engine
from .userfiles import read_yaml
from .workload.model import ModelSpec, get_model, model_from_dict
from .workload.plan import ParallelPlan, check_plan, make_plan

ENGINES = tuple(_ENGINE_REGISTRY.names())  # registered in sim/engines.py
NETWORKS = ("analytical", "flow")

_PLAN_KEYS = ("tp", "pp", "dp", "cp", "ep", "etp", "vpp", "micro_batch", "global_batch", "seq_len",
              "sequence_parallel", "zero", "fsdp", "recompute", "dtype", "flash_attention", "overlap",
              "grad_reduce_bytes", "uneven_pipeline", "cp_comm", "microbatch_group", "pipeline_schedule", "stack")


@dataclass(frozen=True, slots=True)
class Scenario:
    """Three orthogonal inputs: model, hardware (system + scale-out fabric), parallel plan."""

    model: ModelSpec
    system: Any  # SystemSpec
    fabric: Any  # ScaleOutTech
    plan: ParallelPlan
    name: str = ""
    catalog: Any = field(default=None, compare=False, repr=False)


def _catalog(catalog=None, catalog_paths=()):
    if catalog is not None:
        return catalog
    from .catalog import load_catalog

    return load_catalog(tuple(catalog_paths or ()))


def resolve_model(model: str | ModelSpec | dict, model_files: tuple[str, ...] = ()) -> ModelSpec:
    if isinstance(model, ModelSpec):
        return model
    if isinstance(model, dict):
        data = dict(model)
        base = data.pop("base", None)
        mid = str(data.pop("id", data.get("name", "custom"))).lower().replace(" ", "-")
        if base:
            return get_model(base, model_files).with_(id=mid, **data)
        return model_from_dict(mid, data, origin="scenario")
    return get_model(str(model), model_files)


def build_scenario(*, model: str | ModelSpec | dict, system: str, gpus: int | None = None, fabric: str | None = None,
                   catalog=None, catalog_paths=(), model_files: tuple[str, ...] = (), name: str = "",
                   **plan_kw: Any) -> Scenario:
    cat = _catalog(catalog, catalog_paths)
    m = resolve_model(model, model_files)
    sysspec = cat.system(system)
    fab = cat.fabric(fabric or sysspec.default_scaleout)
    unknown = set(plan_kw) - set(_PLAN_KEYS)
    if unknown:
        from .errors import closest

        k = sorted(unknown)[0]
        raise InputError(f"unknown plan field {k!r}", suggestions=closest(k, _PLAN_KEYS), hint="fields: " + ", ".join(_PLAN_KEYS))
    kw = {k: v for k, v in plan_kw.items() if v is not None}
    kw.setdefault("seq_len", m.seq_len)
    plan = make_plan(gpus=gpus, **kw)
    check_plan(m, plan)
    from .cluster.buildable import check_buildable

    check_buildable(sysspec, fab, plan.num_gpus, catalog=cat, knobs=("fabric",))
    return Scenario(model=m, system=sysspec, fabric=fab, plan=plan, name=name, catalog=cat)


def load_scenario(path: str | Path, *, catalog=None, catalog_paths=(), overrides: dict[str, Any] | None = None) -> Scenario:
    """Read a scenario YAML: ``model`` (zoo id or mapping), ``system``, ``fabric``, ``gpus``, ``plan``."""
    p = Path(path)
    data = read_yaml(p, "scenario file", hint="see scenarios/*.yaml for examples", shape="model, system, gpus and plan")
    from .schemas import ScenarioIn, parse

    sc = parse(ScenarioIn, data, f"scenario {str(p)!r}", hint="see scenarios/*.yaml for examples")
    data = sc.model_dump(exclude_none=True)
    plan = {k: v for k, v in sc.plan.model_dump().items() if v is not None} if sc.plan else {}
    plan.update({k: v for k, v in (overrides or {}).items() if v is not None and k in _PLAN_KEYS})
    ov = overrides or {}
    return build_scenario(
        model=ov.get("model") or data["model"], system=ov.get("system") or data["system"],
        gpus=ov.get("gpus") or data.get("gpus"), fabric=ov.get("fabric") or data.get("fabric"),
        catalog=catalog, catalog_paths=catalog_paths, name=str(data.get("name") or p.stem), **plan,
    )


def network_model(network: str = "analytical", *, routing: str | None = None, seed: int = 0,
                  topology: str | None = None, oversubscription: float = 1.0, fail_links: int = 0):
    """``None`` for the analytical network, or a ``FlowNetwork`` (``--network flow``) that adds the
    scale-out contention the flow-level fabric simulator finds to every collective of the step.

    The analytical network has no routing, topology choice or failed links: asking for one is refused
    with the reason (never silently ignored). ``oversubscription`` means the leaf down:up ratio in both:
    the flow model builds that fabric; the analytical one takes the worst case (``oversubscribed_scenario``).
    """
    if network not in NETWORKS:
        from .errors import UnknownNameError

        raise UnknownNameError("network model", network, NETWORKS)
    if network == "analytical":
        unused = [f for f, v in (("--routing", routing), ("--topology", topology), ("--fail-links", fail_links)) if v]
        if unused:
            raise InputError(f"{unused[0]} needs --network flow: the analytical network model has no routing, "
                             "topology or link failures (only the flow-level fabric simulator models them)",
                             hint=f"add --network flow, or drop {', '.join(unused)}")
        return None
    routing = routing or "ecmp"
    from .collectives.flow import FlowNetwork
    from .fabric import Faults, check_routing

    routing = check_routing(routing)
    if oversubscription < 1:
        raise InputError(f"--oversubscription must be >= 1, got {oversubscription}", hint="1 is full bisection, 2 is 2:1")
    if fail_links < 0:
        raise InputError(f"--fail-links must be >= 0, got {fail_links}")
    topo: dict[str, Any] = {"oversubscription": float(oversubscription)}
    if topology:
        topo["topology"] = topology
    if fail_links:
        topo["faults"] = Faults(random_links=int(fail_links), seed=int(seed))
    return FlowNetwork(routing=routing, seed=int(seed), topology=tuple(sorted(topo.items())))


def oversubscribed_fabric(system: Any, fabric: Any, oversubscription: float) -> Any:
    """``fabric`` on an ``oversubscription``:1 leaf as the analytical network sees it: the worst case,
    each NIC at 1/o of its rate on the fabric (the same rule as ``plan --oversubscription``)."""
    if oversubscription < 1:
        raise InputError(f"--oversubscription must be >= 1, got {oversubscription}", hint="1 is full bisection, 2 is 2:1")
    from .planner.evaluator import oversubscribed

    return oversubscribed(fabric, oversubscription, system)


def oversubscribed_scenario(scenario: Scenario, oversubscription: float) -> Scenario:
    """The scenario with ``oversubscribed_fabric`` (unchanged at 1)."""
    if oversubscription == 1:
        return scenario
    from dataclasses import replace

    return replace(scenario, fabric=oversubscribed_fabric(scenario.system, scenario.fabric, oversubscription))


def simulate(scenario: Scenario, *, engine: str = "analytical", trace: bool = False, schedule: str | None = None,
             stragglers: tuple[str, ...] = (), network: Any = None, memory_margin_gb: float | None = None):
    """Step estimate of a scenario with the chosen engine; returns a ``StepResult`` (analytical) or an
    ``EventResult`` (event: adds the critical path, stream utilisation and, with ``trace``, the timeline).

    ``schedule`` (1f1b | interleaved | zb-h1 | gpipe) and ``stragglers`` (specs such as
    ``"stage=3,compute=1.2"``) need the event engine. ``network``: ``network_model(...)`` (None =
    analytical collectives). ``memory_margin_gb``: GB the fit check keeps free (None: the default,
    ``workload.rules.DEFAULT_MEMORY_MARGIN_GB``).
    """
    from .workload.rules import DEFAULT_MEMORY_MARGIN_GB, check_memory_margin

    margin = DEFAULT_MEMORY_MARGIN_GB if memory_margin_gb is None else check_memory_margin(memory_margin_gb)
    eng = get_engine(engine)  # unknown: UnknownNameError with the closest name
    if engine != "event" and (trace or schedule or stragglers):
        what = "--trace" if trace else ("--schedule" if schedule else "--straggler")
        raise InputError(f"{what} needs the event engine", hint="add --engine event")
    if engine == "event":
        from .sim.event import parse_straggler

        parsed = tuple(parse_straggler(s) for s in stragglers)
        return eng.estimate(scenario.model, scenario.system, scenario.fabric, scenario.plan, catalog=scenario.catalog,
                            schedule=schedule, stragglers=parsed, trace=trace, network=network,
                            memory_margin_gb=margin)
    from .sim.analytical import estimate as _est

    return _est(scenario.model, scenario.system, scenario.fabric, scenario.plan, catalog=scenario.catalog,
                network=network, memory_margin_gb=margin)


def estimate(scenario: Scenario | str | Path | None = None, *, engine: str = "analytical",
             memory_margin_gb: float | None = None, **kw: Any):
    """Estimate one training step: pass a ``Scenario``, a scenario YAML path, or keyword arguments
    (``model``, ``system``, ``gpus``, ``fabric`` and plan fields such as ``tp``, ``pp``, ``global_batch``)."""
    if scenario is None:
        scenario = build_scenario(**kw)
    elif not isinstance(scenario, Scenario):
        scenario = load_scenario(scenario, catalog=kw.pop("catalog", None), overrides=kw)
    return simulate(scenario, engine=engine, memory_margin_gb=memory_margin_gb)


def validate(path: str | Path, *, engine: str = "analytical", catalog=None, catalog_paths=(), progress=None):
    """Predict every row of a validation CSV; returns a ``ValidationReport`` (``progress(done, total)``
    after each row)."""
    from .validate import validate_file

    get_engine(engine)
    return validate_file(path, catalog=_catalog(catalog, catalog_paths), engine=engine, progress=progress)


def validate_by(path: str | Path, columns: list[str], *, report=None, engine: str = "analytical", catalog=None,
                catalog_paths=()) -> list[dict]:
    """Per-category table (MAPE, bias, worst row per value of each column) of a validation CSV."""
    from .validate import by_table, read_rows

    rep = report or validate(path, engine=engine, catalog=catalog, catalog_paths=catalog_paths)
    return by_table(rep, read_rows(path), columns)


def validate_cross(path: str | Path, row_column: str, column: str, *, report=None, engine: str = "analytical",
                   catalog=None, catalog_paths=()) -> dict:
    """Two-way accuracy table of a validation CSV (e.g. ``system`` x ``size-band`` for collectives)."""
    from .validate import cross_table, read_rows

    rep = report or validate(path, engine=engine, catalog=catalog, catalog_paths=catalog_paths)
    return cross_table(rep, read_rows(path), row_column, column)


def cross_validate(path: str | Path, column: str = "source", *, catalog=None, catalog_paths=()):
    """Leave-one-``column``-out cross-validation of the fitted constants on a training or serving CSV
    (``CVReport``; serving: the engine overheads and the Hopper GEMM scale, serving/calibration.py)."""
    from .calibration import cross_validate as cv
    from .validate import read_rows

    rows = read_rows(path)
    if rows and "target_metric" in rows[0] and "measured_step_time_s" not in rows[0]:
        from .serving.calibration import cross_validate as serving_cv

        return serving_cv(rows, column, catalog=_catalog(catalog, catalog_paths))
    if rows and "measured_step_time_s" not in rows[0]:
        raise InputError(f"{path}: --cv needs a training-format (measured_step_time_s) or serving-format "
                         "(target_metric) file", hint="cross-validation refits the fitted constants of that model")
    return cv(rows, column, catalog=_catalog(catalog, catalog_paths))


def report(scenario: Scenario | str | Path | None = None, *, html: str | Path | None = None, db: str | Path | None = None,
           record_id: str | None = None, trace: str | Path | bool | None = None, fabric_domains: int | None = None,
           monte_carlo_runs: int = 2000, seed: int = 0, scheduling: bool = False, catalog=None,
           progress: Any = None) -> dict[str, Any]:
    """The HTML report's data for a scenario (object or YAML path) or a stored plan/sweep (``db`` +
    ``record_id``); with ``html`` also writes the self-contained page. ``scheduling`` adds the openb
    GPU-sharing experiment (a few seconds). Returns the data, plus ``html_path`` and ``html_bytes``
    when written."""
    from .report.build import report_data, write_report

    if scenario is not None and not isinstance(scenario, Scenario):
        scenario = load_scenario(scenario, catalog=catalog)
    data = report_data(sys.modules[__name__], scenario, db=db, record_id=record_id, html_path=html, trace=trace, fabric_domains=fabric_domains,
                       monte_carlo_runs=monte_carlo_runs, seed=seed, scheduling=scheduling, progress=progress)
    if html is not None:
        path, size = write_report(data, html)
        data["html_path"], data["html_bytes"] = str(path), size
    return data


def report_html(scenario: Scenario | str | Path | None = None, **kw: Any) -> str:
    """The report page as a string (nothing written)."""
    from .report.html import render_html

    kw.pop("html", None)
    return render_html(report(scenario, **kw))


def list_models(model_files: tuple[str, ...] = ()) -> list[str]:
    """Ids of the zoo models and of the models in ``model_files`` (YAML, docs/models.md)."""
    from .workload.model import builtin_models, load_models

    ids = set(builtin_models())
    for f in model_files:
        ids |= set(load_models(f))
    return sorted(ids)


# ----------------------------------------------------------------------------------- plan, sweep, compare, results
# The CLI and the web app call these, so the same input gives the same checks and the same errors.


def plan_request(*, model: str | ModelSpec | None = None, system: str | None = None, gpus: int | None = None,
                 domains: int | None = None, global_batch: int | None = None, seq_len: int | None = None,
                 fabric: str | None = None, dtype: str = "bf16", oversubscription: float = 1.0, top: int = 5,
                 engine: str = "analytical", tp: int | None = None, pp: int | None = None, dp: int | None = None,
                 cp: int | None = None, ep: int | None = None, vpp: int | None = None, zero: int | None = None,
                 micro_batch: int | None = None, recompute: str | None = None, cross_domain: bool = False,
                 all_variants: bool = False, workers: int = 1, stack: str | None = None,
                 max_idle_gpus: int | None = None, memory_margin: float | None = None, etp: int | None = None,
                 pipeline_schedule: str | None = None):
    """The planner request ``clustertwin plan`` builds from its flags (checked), and the defaults used."""
    from .errors import UnknownNameError
    from .planner.planning import DEFAULT_MODEL, DEFAULT_SYSTEM, PlanRequest
    from .planner.space import RECOMPUTE, SpaceOptions
    from .workload.rules import DEFAULT_MEMORY_MARGIN_GB, check_memory_margin
    from .workload.stacks import DEFAULT_STACK

    margin = DEFAULT_MEMORY_MARGIN_GB if memory_margin is None else check_memory_margin(memory_margin)
    if not oversubscription >= 1.0:
        raise InputError(f"--oversubscription must be >= 1 (leaf down:up ports), got {oversubscription}",
                         hint="1 is a non-blocking fat tree; 2 means 2:1")
    if top < 1:
        raise InputError(f"--top must be positive, got {top}")
    fixed = {k: (v,) for k, v in (("tp", tp), ("pp", pp), ("dp", dp), ("cp", cp), ("ep", ep), ("vpp", vpp),
                                   ("zero", zero), ("micro_batch", micro_batch)) if v is not None}
    for k, v in fixed.items():
        if v[0] < (0 if k == "zero" else 1):
            raise InputError(f"--{k.replace('_', '-')} must be positive, got {v[0]}")
    if recompute is not None:
        if recompute not in RECOMPUTE:
            raise UnknownNameError("recompute setting", recompute, RECOMPUTE)
        fixed["recompute"] = (RECOMPUTE.index(recompute),)
    if etp is not None:
        if etp < 1:
            raise InputError(f"--etp must be positive, got {etp}")
        fixed["etp"] = (etp,)
    if pipeline_schedule is not None:
        from .planner.space import SCHEDULES

        if pipeline_schedule not in SCHEDULES:
            raise UnknownNameError("pipeline schedule", pipeline_schedule, SCHEDULES)
        fixed["schedule"] = (SCHEDULES.index(pipeline_schedule),)
    opts = SpaceOptions(fixed=fixed, tp_across_domains=cross_domain, ep_across_domains=True,
                        max_vpp=max(8, vpp or 1), max_cp=max(32, cp or 1), max_pp=max(128, pp or 1),
                        micro_batches=(1, 2, 4, 8) if micro_batch is None else (micro_batch,),
                        zero_stages=(0, 1, 2, 3) if zero is None else (zero,))
    req = PlanRequest(model=model or DEFAULT_MODEL, system=system or DEFAULT_SYSTEM, num_gpus=gpus, domains=domains,
                      global_batch=global_batch, seq_len=seq_len, fabric=fabric, dtype=dtype, top_k=top,
                      oversubscription=oversubscription, engine=engine, options=opts,
                      distinct_layouts=not all_variants, workers=workers, stack=stack or DEFAULT_STACK,
                      max_idle_gpus=max_idle_gpus, memory_margin_gb=margin)
    defaults = {k: v for k, v in (("model", model is None and req.model), ("system", system is None and req.system)) if v}
    return req, defaults


def plan(*, store_db: str | Path | None = None, store: bool = True, catalog=None, catalog_paths=(), **kw: Any) -> dict[str, Any]:
    """``clustertwin plan --json``'s document: the best layouts, why the runner-up lost, the search stats;
    stored (``store``) in ``store_db`` (default: the per-user database): ``stored`` has the db and id,
    ``store_warning`` says why it could not be written."""
    from .planner.planning import plan as _plan

    req, defaults = plan_request(**kw)
    cat = _catalog(catalog, catalog_paths)
    rep = _plan(req, cat)
    defaults.update(rep.defaults_used)
    doc = rep.to_json()
    doc["defaults_used"] = defaults
    if store:
        from .planner.record import store_plan
        from .planner.store import ResultsStore

        try:
            rs = ResultsStore(store_db)
            doc["stored"] = {"db": str(rs.path), "id": store_plan(req, rep, rs, cat)}
        except InputError as exc:  # the plans are still returned: a read-only folder must not lose them
            doc["store_warning"] = exc.message
    return doc


def device_price_usd(system: Any) -> float | None:
    """All-in price per accelerator (server / rack share) for sweeps' cost: the catalog's
    ``price_usd_per_device``, else the reliability area's sourced/assumed defaults by system."""
    if system.price_usd_per_device is not None:
        return float(system.price_usd_per_device)
    try:
        from .reliability.params import load_params
    except ImportError:
        return None
    params = load_params()
    p = params.price_by_system.get(system.id) or params.cost.get("default_usd_per_device")
    return float(p.value) if p is not None else None


def design_cost_power(job: Any, catalog: Any) -> tuple[float | None, float | None]:
    """Cost and power of a sweep design: the planner's BOM adapter, accelerators priced by
    :func:`device_price_usd`. Module-level, so it pickles by reference to local and Ray workers."""
    from .planner.sweep import design_cost_power as via_bom

    return via_bom(job, catalog, device_price=device_price_usd)


def build_sweep(spec: dict[str, Any] | str | Path, *, catalog=None, catalog_paths=(), label: str | None = None):
    """A checked, expanded sweep from a sweep mapping or a sweep YAML path."""
    from .planner.sweep import build_sweep as _build
    from .planner.sweep import load_sweep_file

    data = spec if isinstance(spec, dict) else load_sweep_file(spec)
    return _build(data, _catalog(catalog, catalog_paths), label=label or (str(spec) if not isinstance(spec, dict) else "sweep"),
                  catalog_paths=[str(p) for p in catalog_paths or ()])


def sweep(sw: Any, *, db: str | Path | None = None, executor: str = "local", address: str | None = None, workers: int | None = None,
          progress: Any = None) -> dict[str, Any]:
    """Run (or resume) a sweep into ``db``; ``clustertwin sweep --json``'s document."""
    from .planner.executors import make_executor
    from .planner.store import ResultsStore
    from .planner.sweep import best_per_design, run_sweep

    ex = make_executor(executor, address=address, workers=workers)
    store = ResultsStore(db)
    out = run_sweep(sw, store, ex, progress=progress, cost_fn=design_cost_power)
    rows = best_per_design(out.rows)
    return {"sweep_id": sw.sweep_id, "name": sw.name, "db": str(store.path), "executor": ex.name,
            "catalog_version": sw.catalog_version, "computed_chunks": out.computed_chunks,
            "skipped_chunks": out.skipped_chunks, "num_chunks": len(sw.chunks), "rows": rows,
            "pareto": [r["job_index"] for r in rows if r["pareto"]]}


def results(db: str | Path | None = None, record_id: str | None = None) -> dict[str, Any]:
    """The sweeps and plans stored in ``db`` (``{"sweeps": [...]}``), or one of them with its rows
    (``{"sweep": meta, "rows": [...]}``: a plan's ranked plans, a sweep's best plan per design)."""
    from .planner.store import ResultsStore
    from .planner.sweep import best_per_design

    store = ResultsStore(db)  # opens read-only for reads and says so when it does not exist
    if record_id is None:
        return {"sweeps": store.sweeps()}
    meta = store.sweep(record_id)
    rows = store.results(meta["id"])
    if (meta.get("spec") or {}).get("kind") != "plan":
        rows = best_per_design(rows)
    return {"sweep": meta, "rows": rows}


def performance(cat: Any, system_id: str, gpus: int, fabric: str | None, model_id: str,
                global_batch: int | None = None, memory_margin_gb: float | None = None) -> dict[str, Any]:
    """Best layout's step time from the planner; ``{"error": why}`` when no layout can use the design.

    Without an explicit ``global_batch`` the planner's default batch is tried first and then the nearby
    batches it would suggest (multiples of powers of two and of the GPU count), so that designs whose
    GPU count does not divide the default batch (576 GPUs = 8 NVL72 racks) are still compared; the
    batch used is reported in ``basis``. Lives in the facade because reliability sits beside the
    planner, not above it.
    """
    import time

    from .planner import PlanRequest
    from .planner import plan as _plan
    from .planner.planning import DEFAULT_TOKENS_PER_BATCH, _batch_candidates
    from .workload.rules import DEFAULT_MEMORY_MARGIN_GB, check_memory_margin, memory_fit_text

    margin = DEFAULT_MEMORY_MARGIN_GB if memory_margin_gb is None else check_memory_margin(memory_margin_gb)
    t0 = time.perf_counter()
    first_error: InputError | None = None
    batches: list[int | None] = [global_batch]
    if global_batch is None:
        seq = int(getattr(get_model(model_id), "seq_len", 0) or 2048)
        default = max(1, DEFAULT_TOKENS_PER_BATCH // seq)
        batches = [default, *_batch_candidates(default, gpus)[:6]]
    for gb in batches:
        try:
            rep = _plan(PlanRequest(model=model_id, system=system_id, num_gpus=gpus, fabric=fabric,
                                    global_batch=gb, top_k=1, memory_margin_gb=margin), cat)
        except InputError as exc:
            first_error = first_error or exc
            continue
        best = rep.plans[0]
        keys = ("tp", "pp", "dp", "cp", "ep", "vpp", "zero", "micro_batch", "recompute")
        used = rep.request.get("global_batch", gb)
        fit = memory_fit_text(best["memory_gb_per_gpu"], rep.stats["memory_capacity_gb"], rep.stats["memory_margin_gb"])
        return {"step_time_s": best.get("step_time_s"), "tokens_per_s": best.get("tokens_per_s"),
                "mfu": best.get("mfu"), "plan": {k: best.get(k) for k in keys if k in best},
                "memory_gb_per_gpu": best["memory_gb_per_gpu"], "memory_left_gb": best["memory_left_gb"],
                "memory_margin_gb": rep.stats["memory_margin_gb"],
                "basis": f"planner best layout, global batch {used} ({rep.engine}, {time.perf_counter() - t0:.1f} s); "
                         f"memory {best['memory_gb_per_gpu']:.1f} GB per GPU, {fit}"}
    assert first_error is not None
    return {"error": f"planner: {first_error.message}"}


def compare(designs: list[str], *, model: str | None = None, gpus: int | None = None, mfu: float | None = None,
            utilization: float | None = None, pue: float | None = None, price_kwh: float | None = None,
            spares: int | None = None, no_plan: bool = False, defaults: tuple = (), catalog=None,
            catalog_paths=(), global_batch: int | None = None, memory_margin: float | None = None) -> dict[str, Any]:
    """``clustertwin compare --json``'s document for designs ``SYSTEM[xDOMAINS][@FABRIC]`` or scenario files.
    ``global_batch`` fixes the planner's batch (sequences) for every design, as a sweep does; without it
    each design gets the planner's default batch or the nearest one its GPU count can run."""
    from .reliability.compare import compare_designs
    from .reliability.cost import check_cost_inputs
    from .reliability.design import parse_design
    from .reliability.failures import build_failure_model
    from .reliability.params import load_params
    from .reliability.power import check_power_inputs

    if not designs:
        raise InputError("compare needs at least one design", hint="e.g. clustertwin compare gb200-nvl72x8 cloudmatrix-384")
    from .workload.rules import DEFAULT_MEMORY_MARGIN_GB, check_memory_margin

    margin = DEFAULT_MEMORY_MARGIN_GB if memory_margin is None else check_memory_margin(memory_margin)
    check_power_inputs(utilization, pue)
    check_cost_inputs(price_kwh)
    if gpus is not None and not gpus > 0:
        raise InputError(f"--gpus must be positive, got {gpus}", hint="pass a value above zero to --gpus")
    if mfu is not None and not 0 < mfu <= 1:
        raise InputError(f"--mfu must be in (0, 1], got {mfu}")
    if global_batch is not None and not global_batch > 0:
        raise InputError(f"--global-batch must be positive, got {global_batch}", hint="sequences per step, e.g. 1024")
    cat = _catalog(catalog, catalog_paths)
    prm = load_params(tuple(defaults or ()))
    ds = [parse_design(x, cat, prm, gpus=gpus) for x in designs]
    names = [d.name for d in ds]
    if len(set(names)) != len(names):
        raise InputError("the same design is listed twice", hint="give each design once")
    file_models = {d.model for d in ds if d.model}
    if model is None and len(file_models) == 1:
        model = file_models.pop()  # every scenario file names the same model
    m = get_model(model) if model else None
    perf: dict[str, dict] = {}
    omitted = None
    if m is not None and mfu is None:
        if no_plan:
            omitted = "step time / MFU omitted (--no-plan); pass --mfu to assume one"
        else:
            for d in ds:
                perf[d.name] = performance(cat, d.system.id, d.num_accelerators, d.fabric.id if d.fabric else None, m.id,
                                           global_batch=global_batch, memory_margin_gb=margin)
            errs = [p["error"] for p in perf.values() if p.get("error")]
            if errs and len(errs) == len(ds):
                omitted = "step time / MFU omitted: " + errs[0]
    elif m is None:
        omitted = "step time, MFU, goodput and tokens per dollar need --model"
    out = compare_designs(ds, prm, build_failure_model(prm), model=m, performance=perf, utilization=utilization,
                          pue=pue, price_kwh=price_kwh, mfu=mfu, spares=spares)
    if omitted:
        out["omitted"] = omitted
    return out



def cluster(system: str, domains: int = 1, *, fabric: str | None = None, topology: str = "rail",
            oversubscription: float = 1.0, tiers: int | str = "auto", domain_size: int | None = None,
            catalog=None, catalog_paths=()) -> dict[str, Any]:
    """A cluster design: ``clustertwin cluster --json``'s summary and ``clustertwin bom --json``'s bill
    of materials (``{"summary": ..., "bom": ...}``), with the cluster model's checks."""
    from .cluster import bill_of_materials, build_cluster

    c = build_cluster(system, domains, fabric, topology=topology, oversubscription=oversubscription, tiers=tiers,
                      domain_size=domain_size, catalog=_catalog(catalog, catalog_paths))
    return {"summary": c.summary(), "bom": bill_of_materials(c).to_dict()}


__all__ = ["ENGINES", "Scenario", "build_scenario", "build_sweep", "cluster", "compare", "cross_validate",
           "design_cost_power", "device_price_usd", "estimate", "list_models", "load_scenario", "performance", "plan",
           "plan_request", "report", "report_html", "results", "simulate", "sweep", "validate", "validate_by",
           "validate_cross"]

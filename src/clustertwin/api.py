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
from .workload.stacks import CAVEAT_PREFIXES  # how layout caveat lines start (the CLI prints them)

ENGINES = tuple(_ENGINE_REGISTRY.names())  # registered in sim/engines.py
NETWORKS = ("analytical", "flow")

_PLAN_KEYS = ("tp", "pp", "dp", "cp", "ep", "etp", "vpp", "micro_batch", "global_batch", "seq_len",
              "sequence_parallel", "zero", "fsdp", "recompute", "dtype", "flash_attention", "overlap",
              "grad_reduce_bytes", "uneven_pipeline", "cp_comm", "microbatch_group", "pipeline_schedule", "offload",
              "activation_offload_layers", "stack")


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
        if base:  # the zoo model's fields, changed by the given ones, through the same strict schema
            b = get_model(str(base), model_files)
            fields = {k: v for k, v in b.to_dict().items() if k != "id"}
            return model_from_dict(mid, {**fields, **data}, origin=f"a change of {b.id}").with_(extra=b.extra)
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
    from .errors import in_file

    with in_file(f"scenario {str(p)!r}"):  # an error in what the file gives names the file
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
    from .cluster.fattree import check_oversubscription

    check_oversubscription(oversubscription)
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
    from .cluster.fattree import check_oversubscription

    check_oversubscription(oversubscription)
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
    if rows and "measured_memory_gb_per_gpu" in rows[0]:
        from .validate import memory_cross_validate

        return memory_cross_validate(rows, column, catalog=_catalog(catalog, catalog_paths))
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
    from .cluster.fattree import check_oversubscription
    from .errors import UnknownNameError
    from .planner.planning import DEFAULT_MODEL, DEFAULT_SYSTEM, PlanRequest
    from .planner.space import RECOMPUTE, SpaceOptions
    from .workload.rules import DEFAULT_MEMORY_MARGIN_GB, check_memory_margin
    from .workload.stacks import DEFAULT_STACK

    margin = DEFAULT_MEMORY_MARGIN_GB if memory_margin is None else check_memory_margin(memory_margin)
    check_oversubscription(oversubscription)
    if workers < 1:
        raise InputError(f"--workers must be a positive integer, got {workers}", hint="1 evaluates in this process")
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


def plan(*, store_db: str | Path | None = None, store: bool = True, from_row: str | None = None, catalog=None,
         catalog_paths=(), **kw: Any) -> dict[str, Any]:
    """``clustertwin plan --json``'s document: the best layouts, why the runner-up lost, the search stats;
    stored (``store``) in ``store_db`` (default: the per-user database): ``stored`` has the db and id,
    ``store_warning`` says why it could not be written. ``from_row`` (``FILE.csv:ID`` or ``training:ID``)
    plans the job of a validation row (not stored) and compares with the row's layout (``from_row``)."""
    from .planner.planning import plan as _plan

    req, defaults = plan_request(**kw)
    cat = _catalog(catalog, catalog_paths)
    row_info: dict[str, Any] | None = None
    if from_row is not None:
        from .planner.fromrow import published_tokens_per_s, request_from_row, row_estimate, row_layout

        clash = [f"--{k.replace('_', '-')}" for k in ("model", "system", "gpus", "domains", "global_batch",
                                                      "seq_len", "fabric", "stack") if kw.get(k) is not None]
        if clash:
            raise InputError(f"--from-row takes the job from the row; do not also pass {', '.join(clash)}",
                             hint="drop those options, or plan without --from-row")
        dtype, max_idle = kw.get("dtype", "bf16"), kw.get("max_idle_gpus")
        req, row = request_from_row(from_row, cat, top_k=req.top_k, engine=req.engine, options=req.options,
                                    distinct_layouts=req.distinct_layouts, workers=req.workers,
                                    oversubscription=req.oversubscription, dtype=None if dtype == "bf16" else dtype,
                                    max_idle_gpus=0 if max_idle is None else max_idle,
                                    memory_margin_gb=req.memory_margin_gb)
        defaults, store = {}, False
        row_info = {"id": row["id"], "layout": row_layout(row), "published_tokens_per_s": published_tokens_per_s(row),
                    "row_estimate": row_estimate(row, cat, req.engine)}
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
    if row_info is not None:
        keys = ("tp", "pp", "dp", "cp", "ep")
        lay: dict[str, Any] = row_info["layout"]
        pub = row_info["published_tokens_per_s"]
        best = rep.plans[0]["tokens_per_s"] if rep.plans else None
        row_info["published_layout_rank"] = next(
            (p["rank"] for p in rep.plans if all(int(p[k]) == int(lay[k]) for k in keys)), None)
        row_info["best_over_published"] = (best / pub) if (best and pub) else None
        if rep.plans:  # where the best plan gains / pays against the row's layout, per term (seconds)
            from .planner.fromrow import breakdown_delta

            row_info["best_minus_row_s"] = dict(breakdown_delta(rep.plans[0]["breakdown"],
                                                                row_info["row_estimate"]["breakdown"]))
        doc["from_row"] = row_info
    return doc


def memory_fit_text(used_gb: float, capacity_gb: float, margin_gb: float) -> str:
    """How a plan's memory fits, in words (the plan rule's sentence, for a report)."""
    from .workload.rules import memory_fit_text as _text

    return _text(used_gb, capacity_gb, margin_gb)


def memory_basis(scenario: Scenario) -> dict[str, str]:
    """What each memory component of the scenario's estimate counts, one sentence each
    (``workload.memory.memory_basis``; ``estimate --json``: ``memory_basis``)."""
    from .workload.memory import memory_basis as _basis
    from .workload.stacks import resolve_stack

    return _basis(scenario.model, scenario.plan, resolve_stack(scenario.plan.stack, scenario.catalog))


def stacks() -> dict[str, Any]:
    """``clustertwin stacks --json``: the software-stack presets (registration order) and the default."""
    from .workload.stacks import DEFAULT_STACK, STACKS

    return {"default": DEFAULT_STACK, "stacks": [s.to_json() for s in STACKS.values()]}


def device_price_usd(system: Any) -> float | None:
    """All-in price per accelerator (server / rack share) for sweeps' cost: the catalog's
    ``price_usd_per_device``, else the reliability area's sourced/assumed defaults by system."""
    from .reliability.assumptions import device_price
    from .reliability.params import load_params

    return device_price(system, load_params()).value


def design_cost_power(job: Any, catalog: Any) -> tuple[float | None, float | None]:
    """Cost and power of a sweep design: the planner's BOM adapter, accelerators priced by
    :func:`device_price_usd`. Module-level, so it pickles by reference to local and Ray workers."""
    from .planner.sweep import design_cost_power as via_bom

    return via_bom(job, catalog, device_price=device_price_usd)


def build_sweep(spec: dict[str, Any] | str | Path, *, catalog=None, catalog_paths=(), label: str | None = None,
                memory_margin: float | None = None):
    """A checked, expanded sweep from a sweep mapping or a sweep YAML path; ``memory_margin`` overrides the
    file's ``memory_margin_gb`` (part of the sweep's identity: another margin is another sweep)."""
    from .planner.sweep import build_sweep as _build
    from .planner.sweep import load_sweep_file
    from .workload.rules import check_memory_margin

    data = spec if isinstance(spec, dict) else load_sweep_file(spec)
    if memory_margin is not None:
        data = {**data, "memory_margin_gb": check_memory_margin(memory_margin)}
    return _build(data, _catalog(catalog, catalog_paths), label=label or (str(spec) if not isinstance(spec, dict) else "sweep"),
                  catalog_paths=[str(p) for p in catalog_paths or ()])


def sweep(sw: Any, *, db: str | Path | None = None, executor: str = "local", address: str | None = None, workers: int | None = None,
          progress: Any = None) -> dict[str, Any]:
    """Run (or resume) a sweep into ``db``; ``clustertwin sweep --json``'s document."""
    from .planner.executors import make_executor
    from .planner.store import ResultsStore
    from .planner.sweep import best_per_design, run_sweep, sweep_assumptions

    ex = make_executor(executor, address=address, workers=workers)
    store = ResultsStore(db)
    out = run_sweep(sw, store, ex, progress=progress, cost_fn=design_cost_power)
    rows = best_per_design(out.rows)
    return {"sweep_id": sw.sweep_id, "name": sw.name, "db": str(store.path), "executor": ex.name,
            "catalog_version": sw.catalog_version, "computed_chunks": out.computed_chunks,
            "skipped_chunks": out.skipped_chunks, "num_chunks": len(sw.chunks), "rows": rows,
            "pareto": [r["job_index"] for r in rows if r["pareto"]], "memory_margin_gb": sw.spec["memory_margin_gb"],
            "assumptions": sweep_assumptions(sw, _catalog(None, sw.catalog_paths))}


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
    if (meta.get("spec") or {}).get("kind") not in ("plan", "schedule"):  # a sweep: its best plan per design
        rows = best_per_design(rows)
    return {"sweep": meta, "rows": rows}


def results_db_path(db: str | Path | None = None) -> Path:
    """The results database ``db`` names (default: the per-user one, ``$CLUSTERTWIN_RESULTS_DB``)."""
    from .planner.store import ResultsStore

    return ResultsStore(db).path


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
                "assumptions": list(rep.assumptions),
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
    from .limits import check_limit

    if gpus is not None:
        check_limit("gpus", gpus)
    if global_batch is not None:
        check_limit("global_batch", global_batch, flag="--global-batch")
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



def collective(op: str, *, system: str = "hgx-h100", domains: int | None = None, gpus: int | None = None,
               fabric: str | None = None, sizes: str = "8:8G", algo: str = "auto", dtype: str = "float",
               network: str = "analytical", routing: str | None = None, topology: str | None = None,
               oversubscription: float = 1.0, fail_links: int = 0, seed: int = 0, catalog=None,
               catalog_paths=()) -> dict[str, Any]:
    """``clustertwin collective --json``: an nccl-tests run predicted per message size (time, algbw, busbw,
    algorithm, protocol, count) for ``gpus`` ranks over ``domains`` scale-up domains of ``system``."""
    import math
    from dataclasses import replace

    from .collectives import normalize_op, sweep
    from .collectives.core import normalize_algo
    from .collectives.nccl_tests import count_for, dtype_info, parse_sizes
    from .limits import check_limit

    op = normalize_op(op)
    algo_n = normalize_algo(op, algo)
    _positive("--domains", domains)
    if domains is not None:
        check_limit("domains", domains)
    if gpus is not None:
        check_limit("gpus", gpus)
    _positive("--gpus", gpus)
    tname, width = dtype_info(dtype)
    size_arr = parse_sizes(sizes)
    cat = _catalog(catalog, catalog_paths)
    spec = cat.system(system)
    fab = cat.fabric(fabric or spec.default_scaleout)
    per_dom = spec.devices_per_domain
    if domains is None and gpus is None:
        domains, gpus = 1, per_dom
    elif domains is None:
        domains = max(1, math.ceil(gpus / per_dom))  # type: ignore[operator]
    elif gpus is None:
        gpus = domains * per_dom
    assert gpus is not None and domains is not None
    if gpus < domains:
        raise InputError(f"--gpus {gpus} is fewer than --domains {domains}", hint="every domain needs at least one rank")
    if gpus % domains:
        raise InputError(
            f"--gpus {gpus} does not split evenly over --domains {domains}",
            hint=f"use a multiple of {domains}, e.g. --gpus {domains * max(1, gpus // domains)}",
        )
    g = gpus // domains
    if g > per_dom:
        raise InputError(
            f"{g} ranks per domain is more than {system} has ({per_dom})",
            hint=f"use --domains {math.ceil(gpus / per_dom)} or fewer --gpus",
        )
    net = network_model(network, routing=routing, seed=seed, topology=topology, oversubscription=oversubscription,
                        fail_links=fail_links)
    priced_fab = oversubscribed_fabric(spec, fab, oversubscription) if net is None else fab
    results = sweep(op, size_arr, gpus, g, spec, priced_fab, algo_n, cat)
    if net is not None:
        # the scale-out contention penalty of the flow model added to each size's time; only this group
        # runs (nccl-tests semantics), so no sibling groups are simulated with it
        from .collectives.flow import contention_penalty

        pen = contention_penalty(op, size_arr, gpus, g, spec, fab, routing=net.routing, seed=net.seed,
                                 **dict(net.topology))
        flowed = []
        for r, pe in zip(results, pen, strict=True):
            ti = r.time_s + float(pe)
            alg = r.size_bytes / ti if ti > 0 else float("inf")
            flowed.append(replace(r, time_s=ti, algbw=alg, busbw=alg * (r.busbw / r.algbw if r.algbw else 0.0)))
        results = flowed
        algo_n = f"{algo_n} + scale-out contention from the flow simulator ({net.routing})"
    rows = []
    for r in results:
        d = r.to_dict()
        d["count"] = count_for(op, r.size_bytes, gpus, width)
        d["type"] = tname
        rows.append(d)
    return {"collective": op, "system": spec.id, "fabric": fab.id, "n_ranks": gpus, "ranks_per_domain": g,
            "domains": domains, "algo": algo_n, "dtype": tname, "rows": rows}


def calibrate(logs: list[str], *, out: str | Path, system: str | None = None, fabric: str | None = None,
              collective: str | None = None, catalog=None, catalog_paths=()) -> dict[str, Any]:
    """``clustertwin calibrate --json``: fit the collective model to nccl-tests logs and write the catalog
    overlay to ``out`` (merged if it exists)."""
    from .collectives.calibrate import calibrate as _calibrate
    from .collectives.calibrate import write_overlay

    res = _calibrate([str(p) for p in logs], _catalog(catalog, catalog_paths), system=system, fabric=fabric,
                     collective=collective)
    return {"out": str(write_overlay(res["overlay"], out)), "systems": res["report"]}


def calibrate_gpu(*, out: str | Path, device: str = "cuda", system: str | None = None, quick: bool = False,
                  collectives: bool = True, world: int | None = None, catalog=None, catalog_paths=()) -> dict[str, Any]:
    """``clustertwin calibrate-gpu --json``: measure this machine's GPUs with PyTorch and write the profile
    overlay to ``out``."""
    from . import calibrate_gpu as cg

    res = cg.run(device=device, system=system, catalog=_catalog(catalog, catalog_paths), quick=quick,
                 collectives=collectives, world=world)
    path = cg.write_profile(res["overlay"], out)
    return {"out": str(path), "system": res["system"], "measured": res["measured"], "overlay": res["overlay"]}


def serve_estimate(*, catalog=None, catalog_paths=(), **request: Any) -> dict[str, Any]:
    """``clustertwin serve estimate --json``: throughput, TTFT and TPOT of one serving layout; ``request``
    holds the fields of ``serving.service.ServeRequest``."""
    from .serving.service import ServeRequest
    from .serving.service import estimate as _estimate

    return _estimate(ServeRequest(**request), catalog=_catalog(catalog, catalog_paths))


def serve_plan(*, catalog=None, catalog_paths=(), **kw: Any) -> dict[str, Any]:
    """``clustertwin serve plan --json``: the serving-layout search under TTFT/TPOT SLOs
    (``serving.service.plan``'s keywords)."""
    from .serving.service import plan as _plan

    return _plan(catalog=_catalog(catalog, catalog_paths), **kw)


def write_trace(result: Any, path: str | Path) -> Path:
    """Write an event-engine result's Chrome/Perfetto trace (``estimate --engine event --trace PATH``)."""
    from .report.trace import write_chrome_trace

    return write_chrome_trace(result, path)


def schedule_openb(*, nodes: str = "gpu_node", pods: str = "default", policy: str = "fgd",
                   seeds: tuple[int, ...] = (42,)) -> dict[str, Any]:
    """``clustertwin schedule openb --json``: the openb GPU-sharing experiment (Weng et al., ATC'23) under one
    policy; one seed gives its run, several their mean curve. ``policy_label`` and ``tasks_in_list`` name the
    policy and the size of the pod list for a report."""
    import time

    from .errors import UnknownNameError
    from .scheduler.openb import POLICIES, POLICY_LABELS, load_nodes, load_pods, mean_curve, run_openb

    if policy not in POLICIES:
        raise UnknownNameError("openb policy", policy, POLICIES)
    seed_list = list(seeds)
    nd = load_nodes(nodes)
    pd_ = load_pods(pods)
    t0 = time.perf_counter()
    runs = [run_openb(nd, pd_, policy, s) for s in seed_list]
    wall = time.perf_counter() - t0
    if len(runs) == 1:
        out = runs[0].to_json()
    else:
        out = {"policy": policy, "seeds": seed_list, "total_gpus": nd.total_gpus, "curve": mean_curve(runs),
               "workload": pd_.source, "nodes": nd.source, "num_failed_mean": sum(r.num_failed for r in runs) / len(runs)}
    out["wall_s"] = round(wall, 3)
    out["policy_label"] = POLICY_LABELS[policy]
    out["tasks_in_list"] = len(pd_)
    return out


def _schedule_cluster(cluster: str, domains: int, fabric: str | None, topology: str, oversubscription: float,
                      unhealthy: int, seed: int):
    from .scheduler.inventory import build_inventory

    return build_inventory(cluster, domains, fabric, topology=topology, oversubscription=oversubscription,
                           unhealthy_per_domain=unhealthy, seed=seed)


def _schedule_jobs(ref: str, inv: Any, seed: int, load: float):
    """A job file, or ``llm:N`` for N generated LLM-cluster jobs."""
    from .scheduler.jobs import generate_llm_trace, read_jobs

    if ref.startswith("llm:"):
        try:
            n = int(ref[4:])
        except ValueError:
            raise InputError(f"JOBS {ref!r}: write llm:N with N a whole number of jobs, e.g. llm:10000") from None
        if not 1 <= n <= 1_000_000:
            raise InputError(f"JOBS {ref!r}: N must be 1 .. 1,000,000")
        from .scheduler.replay import StepModel

        sm = StepModel(inv)
        return generate_llm_trace(n, cluster_gpus=inv.schedulable_gpus, gpus_per_node=inv.gpus_per_node,
                                  gpus_per_domain=inv.max_domain_gpus, seed=seed, load=load, step_time=sm.ideal)
    return read_jobs(ref)


def schedule_replay(jobs: str, *, cluster: str = "gb200-nvl72", domains: int = 8, fabric: str | None = None,
                    topology: str = "rail", oversubscription: float = 1.0, unhealthy_per_domain: int = 0,
                    policies: tuple[str, ...] = ("tas",), queueing: str = "strict", faults: float = 0.0, seed: int = 0,
                    load: float = 0.9, jobs_csv: str | Path | None = None, db: str | Path | None = None,
                    store: bool = True, per_job: bool = False, progress: Any = None) -> dict[str, Any]:
    """``clustertwin schedule replay | compare``: replay a job trace (a file or ``llm:N``) on a catalog cluster
    under each of ``policies``: ``{"inventory", "jobs_source", "jobs", "queueing", "results": [per policy],
    "stored" | "store_warning"}``. ``jobs_csv`` writes the per-job records of every policy; ``progress(label)``
    -> a context manager yielding a progress callback."""
    import csv
    import io
    from contextlib import nullcontext

    from .scheduler.policies import gang_policy
    from .scheduler.record import store_schedule
    from .scheduler.replay import replay
    from .userfiles import write_atomic

    names = [p.strip() for p in policies if p.strip()]
    if not names:
        raise InputError("--policies is empty", hint="e.g. --policies fifo,tas,dra")
    for p in names:
        gang_policy(p)
    inv = _schedule_cluster(cluster, domains, fabric, topology, oversubscription, unhealthy_per_domain, seed)
    jt = _schedule_jobs(jobs, inv, seed, load)
    results = []
    for p in names:
        with (progress(f"replay {p}") if progress is not None else nullcontext()) as bar:
            results.append(replay(jt, inv, p, seed=seed, fault_scale=faults, queueing=queueing, progress=bar))
    if jobs_csv is not None:
        buf = io.StringIO()
        rows = [dict(policy=r.policy, **j.to_dict()) for r in results for j in r.jobs]
        w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
        write_atomic(jobs_csv, buf.getvalue())
    out: dict[str, Any] = {"inventory": inv.summary(), "jobs_source": jt.source, "jobs": len(jt), "queueing": queueing,
                           "results": [r.to_json(per_job=per_job) for r in results]}
    if store:
        try:
            out["stored"] = store_schedule(results, inv, jt.source, db)
        except InputError as exc:  # the results are still returned: a read-only folder must not lose them
            out["store_warning"] = exc.message
    return out


def schedule_trace(out: str | Path, *, jobs: int = 10000, cluster: str = "gb200-nvl72", domains: int = 256,
                   fabric: str | None = None, unhealthy_per_domain: int = 2, load: float = 0.9,
                   seed: int = 0) -> dict[str, Any]:
    """``clustertwin schedule gen-trace``: write a generated LLM-cluster job mix to ``out`` (.csv or .yaml)."""
    import yaml

    from .scheduler.jobs import write_jobs_csv
    from .userfiles import write_atomic

    if not 0 < load <= 10:
        raise InputError(f"--load must be in (0, 10], got {load}")
    out = Path(out)
    inv = _schedule_cluster(cluster, domains, fabric, "rail", 1.0, unhealthy_per_domain, seed)
    jt = _schedule_jobs(f"llm:{jobs}", inv, seed, load)
    if out.suffix.lower() == ".csv":
        write_atomic(out, write_jobs_csv(jt))
    elif out.suffix.lower() in (".yaml", ".yml"):
        write_atomic(out, yaml.safe_dump({"jobs": [j.model_dump(exclude_none=True) for j in jt.specs]}, sort_keys=False))
    else:
        raise InputError(f"{str(out)!r}: write .csv or .yaml", hint="the suffix picks the format")
    gpus = [j.gpus for j in jt.specs]
    return {"file": str(out), "jobs": len(jt), "max_gpus": max(gpus), "min_gpus": min(gpus),
            "training_jobs": sum(1 for j in jt.specs if j.model), "last_submit_h": jt.specs[-1].submit_s / 3600}


def schedule_export(format: str, *, cluster: str = "gb200-nvl72", domains: int = 8, fabric: str | None = None,
                    topology: str = "rail", unhealthy_per_domain: int = 0, seed: int = 0, name: str = "clustertwin",
                    node_prefix: str = "node-") -> dict[str, Any]:
    """``clustertwin schedule export``: the cluster's topology for Kueue, Volcano or Slurm (``text``)."""
    from .scheduler.export import export_topology

    inv = _schedule_cluster(cluster, domains, fabric, topology, 1.0, unhealthy_per_domain, seed)
    return {"text": export_topology(inv, format, name=name, node_prefix=node_prefix), "nodes": inv.num_nodes}


def load_catalog(paths: Any = ()) -> Any:
    """The shipped catalog with the user's overlay files ``paths`` (and ``CLUSTERTWIN_CATALOG``) applied."""
    return _catalog(None, tuple(paths or ()))


def _cluster_model(system: str, domains: int, fabric: str | None, topology: str | None, oversubscription: float,
                   tiers: int | str, domain_size: int | None, catalog, catalog_paths):
    from .cluster import build_cluster

    return build_cluster(system, domains, fabric, topology=topology, oversubscription=oversubscription, tiers=tiers,
                         domain_size=domain_size, catalog=_catalog(catalog, catalog_paths))


def cluster(system: str, domains: int = 1, *, fabric: str | None = None, topology: str = "rail",
            oversubscription: float = 1.0, tiers: int | str = "auto", domain_size: int | None = None,
            catalog=None, catalog_paths=()) -> dict[str, Any]:
    """A cluster design: ``clustertwin cluster --json``'s summary and ``clustertwin bom --json``'s bill
    of materials (``{"summary": ..., "bom": ...}``), with the cluster model's checks."""
    from .cluster import bill_of_materials

    c = _cluster_model(system, domains, fabric, topology, oversubscription, tiers, domain_size, catalog, catalog_paths)
    return {"summary": c.summary(), "bom": bill_of_materials(c).to_dict()}


GRAPH_CHECK_MAX_DEVICES = 4096  # `cluster --graph-check` builds a networkx graph and runs max-flow


def cluster_summary(system: str, domains: int = 1, *, fabric: str | None = None, topology: str | None = None,
                    oversubscription: float = 1.0, tiers: int | str = "auto", domain_size: int | None = None,
                    route: tuple[int, int] | None = None, graph_check: bool = False, catalog=None,
                    catalog_paths=()) -> dict[str, Any]:
    """``clustertwin cluster --json``: the cluster summary, with the route between two ranks (``route``), the
    bisections checked by max-flow on the graph (``graph_check``) and the catalog values that are assumed
    (``assumed``)."""
    c = _cluster_model(system, domains, fabric, topology, oversubscription, tiers, domain_size, catalog, catalog_paths)
    out = c.summary()
    if route is not None:
        out["route"] = c.route(*route).to_dict()
    if graph_check:
        from .cluster import graph_bisection

        if c.num_devices > GRAPH_CHECK_MAX_DEVICES:
            raise InputError(
                f"--graph-check builds a networkx graph and runs max-flow; limited to {GRAPH_CHECK_MAX_DEVICES} "
                f"devices, this cluster has {c.num_devices}",
                hint="use fewer --domains for the check; the closed forms are exact for full leaves",
            )
        check = {"scaleup_bisection_per_device_gbps":
                 graph_bisection(c, within_domain=True) / (c.devices_per_domain / 2) * 8 / 1e9}
        if c.domains >= 2 and c.scaleout is not None:
            half = c.devices_per_domain * (c.domains // 2)
            check["scaleout_bisection_per_device_gbps"] = graph_bisection(c) / half * 8 / 1e9
        out["graph_check"] = check
    out["assumed"] = sorted(c.system.assumptions) + [f"{c.fabric.id}.{k}" for k in sorted(c.fabric.assumptions)]
    return out


def bom(system: str, domains: int = 1, *, fabric: str | None = None, topology: str | None = None,
        oversubscription: float = 1.0, tiers: int | str = "auto", domain_size: int | None = None, catalog=None,
        catalog_paths=()) -> dict[str, Any]:
    """``clustertwin bom --json``: the bill of materials (devices, switches, NICs, optics, power, cost)."""
    from .cluster import bill_of_materials

    c = _cluster_model(system, domains, fabric, topology, oversubscription, tiers, domain_size, catalog, catalog_paths)
    return bill_of_materials(c).to_dict()


FABRIC_WORKLOADS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "step", "matrix", "jobs")
_FABRIC_BUS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")


def fabric_workload(name: str) -> str:
    """The canonical ``clustertwin fabric`` workload for ``name`` (collective aliases accepted)."""
    from .errors import UnknownNameError

    key = name.strip().lower().replace("-", "_")
    key = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
           "alltoall": "all_to_all", "a2a": "all_to_all"}.get(key, key)
    if key not in FABRIC_WORKLOADS:
        raise UnknownNameError("fabric workload", name, FABRIC_WORKLOADS,
                               hint="one of " + ", ".join(FABRIC_WORKLOADS))
    return key


def _fabric_run_summary(run, size_bytes: float | None, op: str | None, n_ranks: int | None, top: int) -> dict:
    out = {
        "time_s": run.time_s,
        "ideal_time_s": run.ideal_time_s,
        "efficiency": run.efficiency,
        "routing": run.routing,
        "phases": [{"name": n, "time_s": float(t), "repeat": float(r)}
                   for n, t, r in zip(run.phase_names, run.phase_times_s, run.phase_repeats, strict=True)],
        "flows_simulated": run.n_flows,
        "flows_total": run.n_flows_total,
        "scaleup_flows": run.n_scaleup_flows,
        "scaleout_bytes": run.scaleout_bytes,
        "events": run.events,
        "solver_iterations": run.iterations,
        "wall_s": run.wall_s,
        "tier_utilisation": run.tier_summary(),
        "hottest_links": run.hottest(top),
    }
    nic = [r for r in out["tier_utilisation"] if r["tier"] == "nic-up"]
    if nic and nic[0]["used"] and run.time_s > 0:
        nics = max(1.0, nic[0]["used"] / run.topo.shape.planes)  # a NIC has one port per plane
        out["nic_gbs"] = nic[0]["bytes"] / nics / run.time_s / 1e9
        out["nic_line_gbs"] = run.topo.nic_bw / 1e9
    if op in _FABRIC_BUS and size_bytes and run.time_s > 0 and n_ranks:
        out["algbw_gbs"] = size_bytes / run.time_s / 1e9
    return out


def simulate_fabric(what: str, *, system: str = "hgx-h100", domains: int = 16, fabric: str | None = None,
           topology: str | None = None, oversubscription: float = 1.0, tiers: int | None = None,
           routing: str = "ecmp", pxn: bool = True, fail_links: int = 0, fail_switch: tuple[str, ...] = (),
           slow_nics: dict | None = None, degraded_links: dict | None = None, stragglers: dict | None = None,
           seed: int = 0, size_bytes: float = 2**30, jobs: str | Path | None = None, matrix: str | Path | None = None,
           tp: int = 8, pp: int = 1, dp: int | None = None, act_bytes: float = 64 * 2**20, microbatches: int = 8,
           max_phases: int = 32, window: int = 1, channels: int = 1, top: int = 5, progress: Any = None,
           catalog=None, catalog_paths=()) -> dict[str, Any]:
    """``clustertwin fabric WHAT --json``: the flow-level simulation of scale-out traffic on ``domains`` x
    ``system`` (a collective, a training step's phases, a traffic matrix, or several jobs sharing the fabric),
    with faults and, where there are faults, the same run on the healthy fabric (``slowdown``).
    ``progress(label)`` -> a context manager yielding a progress callback (or ``None``)."""
    from contextlib import nullcontext

    from .cluster.fattree import check_oversubscription
    from .fabric import (
        Faults,
        check_routing,
        make_fabric,
        read_jobs,
        read_matrix,
        simulate_collective,
        simulate_jobs,
        simulate_phases,
        step_phases,
    )
    from .limits import check_limit

    check_limit("channels", channels)
    what_k = fabric_workload(what)
    routing_k = check_routing(routing)
    if domains < 1:
        raise InputError(f"--domains must be positive, got {domains}")
    check_oversubscription(oversubscription)
    if channels < 1:
        raise InputError(f"--channels must be >= 1, got {channels}")
    if fail_links < 0:
        raise InputError(f"--fail-links must be >= 0, got {fail_links}")
    cat = _catalog(catalog, catalog_paths)
    sysm = cat.system(system)
    so = cat.fabric(fabric or sysm.default_scaleout)
    n_gpus = domains * sysm.devices_per_domain
    faults = Faults(random_links=fail_links, switches=tuple(fail_switch or ()), seed=seed,
                    slow_nics=dict(slow_nics or {}), degraded=dict(degraded_links or {}),
                    stragglers=dict(stragglers or {}))
    fab = make_fabric(sysm, so, n_gpus, faults=faults, catalog=cat, topology=topology, tiers=tiers,
                      oversubscription=oversubscription)
    header = {
        "what": what_k, "system": sysm.id, "fabric": so.id, "domains": domains, "gpus": n_gpus,
        "topology": fab.topo.shape.kind, "tiers": fab.topo.shape.tiers, "oversubscription": fab.topo.shape.oversubscription,
        "switches": fab.topo.switch_counts, "routing": routing_k, "seed": seed,
        "link_gbps": fab.topo.link_bw * 8 / 1e9, "nic_gbps": fab.topo.nic_bw * 8 / 1e9,
        "faults": list(fab.topo.failed_note),
    }
    if what_k == "jobs" or jobs is not None:
        if jobs is None:
            raise InputError("`fabric jobs` needs --jobs FILE", hint="a YAML with jobs: [{name, gpus, placement, traffic, size}]")
        res = simulate_jobs(fab, read_jobs(jobs), routing=routing_k, seed=seed, pxn=pxn)
        return {**header, "jobs": [{"name": r.name, "gpus": r.gpus, "placement": r.placement, "traffic": r.traffic,
                                    "domains": list(r.domains), "alone_s": r.alone_s, "shared_s": r.shared_s,
                                    "slowdown": r.slowdown} for r in res]}

    def run_once(f, stragglers=None):
        with (progress(f"fabric {what_k} ({routing_k})") if progress is not None else nullcontext()) as bar:
            if what_k == "matrix":
                if matrix is None:
                    raise InputError("`fabric matrix` needs --matrix FILE", hint="CSV with header src,dst,bytes[,start_s]")
                return simulate_phases(f, [read_matrix(matrix, n_gpus)], routing=routing_k, seed=seed, pxn=pxn,
                                       channels=channels, progress=bar)
            if what_k == "step":
                d = dp or n_gpus // (tp * pp)
                if d < 1 or tp * pp * d > n_gpus:
                    raise InputError(f"tp*pp*dp = {tp * pp * (dp or 0)} does not fit {n_gpus} GPUs")
                phases = step_phases(tp=tp, pp=pp, dp=d, ranks_per_domain=sysm.devices_per_domain,
                                     grad_bytes=size_bytes, act_bytes=act_bytes, microbatches=microbatches)
                return simulate_phases(f, phases, routing=routing_k, seed=seed, pxn=pxn, channels=channels,
                                       progress=bar)
            return simulate_collective(f, what_k, size_bytes, routing=routing_k, seed=seed, pxn=pxn,
                                       max_phases=max_phases, window=window, channels=channels,
                                       stragglers=stragglers, progress=bar)

    run = run_once(fab, dict(faults.stragglers) or None)
    out = {**header, **_fabric_run_summary(run, size_bytes if what_k in _FABRIC_BUS else None, what_k, n_gpus, top)}
    if not faults.empty:
        healthy = run_once(make_fabric(sysm, so, n_gpus, topology=topology, tiers=tiers,
                                       oversubscription=oversubscription))
        out["healthy_time_s"] = healthy.time_s
        out["slowdown"] = run.time_s / healthy.time_s if healthy.time_s > 0 else 1.0
    return out


def _positive(name: str, v: float | int | None) -> None:
    if v is not None and not v > 0:
        raise InputError(f"{name} must be positive, got {v}", hint=f"pass a value above zero to {name}")


def goodput(*, system: str = "hgx-h100", gpus: int | None = None, domains: int | None = None,
            fabric: str | None = None, model: str | None = None, params_b: float | None = None, days: float = 30.0,
            interval_s: float | None = None, monte_carlo: int = 0, seed: int | None = None,
            spares: int | None = None, rates: dict[str, float] | None = None, write_tbps: float | None = None,
            read_tbps: float | None = None, restart_s: float | None = None, blocking: float | None = None,
            tokens_per_s: float | None = None, mfu: float | None = None, no_plan: bool = False,
            defaults: tuple = (), catalog=None, catalog_paths=()) -> dict[str, Any]:
    """``clustertwin goodput --json``: expected interruptions, checkpoint interval (``interval_s`` None =
    the Daly optimum), ETTR and tokens/day of one training job; throughput from ``tokens_per_s``, else the
    planner's best layout (unless ``no_plan``), else an assumed ``mfu``."""
    from .limits import check_limit
    from .reliability.design import domains_for, make_design
    from .reliability.failures import build_failure_model
    from .reliability.goodput import checkpoint_setup
    from .reliability.goodput import goodput as _goodput
    from .reliability.params import load_params
    from .reliability.throughput import mfu_throughput

    for name, v in (("--days", days), ("--write-tbps", write_tbps), ("--read-tbps", read_tbps),
                    ("--restart", restart_s), ("--tokens-per-s", tokens_per_s), ("--params", params_b),
                    ("--gpus", gpus), ("--domains", domains)):
        _positive(name, v)
    if monte_carlo < 0:
        raise InputError(f"--monte-carlo must not be negative, got {monte_carlo}")
    check_limit("monte_carlo", monte_carlo)
    check_limit("days", days)
    if params_b is not None:
        check_limit("params_b", params_b, flag="--params")
    cat = _catalog(catalog, catalog_paths)
    prm = load_params(tuple(defaults or ()))
    sysm = cat.system(system)
    if gpus is not None and domains is not None and gpus != domains * sysm.devices_per_domain:
        raise InputError(f"--gpus {gpus} and --domains {domains} disagree ({domains} x {sysm.devices_per_domain} = "
                         f"{domains * sysm.devices_per_domain})", hint="pass only one of them")
    n_dom = domains if domains is not None else (domains_for(sysm, gpus) if gpus is not None else 1)
    fab = cat.fabric(fabric) if fabric else cat.fabric(sysm.default_scaleout)
    design = make_design(f"{system}x{n_dom}", sysm, n_dom, fab, prm, origin="command line")
    fm = build_failure_model(prm, dict(rates or {}))
    m = get_model(model) if model else None
    if m is None and params_b is None:
        raise InputError("goodput needs the checkpoint size: pass --model (e.g. llama3-405b) or --params BILLIONS")
    n_params = params_b * 1e9 if params_b is not None else float(m.num_params())  # type: ignore[union-attr]
    ck = checkpoint_setup(prm, n_params, write_bw=write_tbps * 1e12 if write_tbps else None,
                          read_bw=read_tbps * 1e12 if read_tbps else None, blocking_fraction=blocking,
                          restart_s=restart_s)
    basis = None
    perf_note = None
    if tokens_per_s is None and m is not None:
        if mfu is None and not no_plan:
            perf = performance(cat, system, design.num_accelerators, fab.id, m.id)
            if perf.get("tokens_per_s"):
                tokens_per_s, basis = float(perf["tokens_per_s"]), perf["basis"]
            else:
                perf_note = perf.get("error")
        if tokens_per_s is None:
            mfu_v = mfu if mfu is not None else 0.4
            tokens_per_s = mfu_throughput(m, sysm.accelerator.peak("bf16"), design.num_accelerators, mfu_v)
            basis = (f"assumed MFU {mfu_v:g} x BF16 peak / (6N + 12 L h s) FLOP per token"
                     + ("" if mfu is not None else " (default assumption)"))
    elif tokens_per_s is not None:
        basis = "given (--tokens-per-s)"
    res = _goodput(fm, design.counts, ck, days=days, interval_s=interval_s, spares=spares, tokens_per_s=tokens_per_s,
                   throughput_basis=basis, monte_carlo_runs=monte_carlo, seed=seed)
    out = {"system": system, "fabric": fab.id, "model": m.id if m else None, "num_params": n_params,
           "counts_source": design.counts.source, **res.to_dict()}
    if perf_note:
        out["throughput_note"] = perf_note
    return out


def power(design: str, *, utilization: float | None = None, pue: float | None = None,
          price_kwh: float | None = None, defaults: tuple = (), catalog=None, catalog_paths=()) -> dict[str, Any]:
    """``clustertwin power --json``: power by component, facility power, energy and capital cost of one
    design (``SYSTEM[xDOMAINS][@FABRIC]`` or a scenario file)."""
    from .reliability.cost import check_cost_inputs, cost
    from .reliability.design import parse_design
    from .reliability.params import load_params
    from .reliability.power import check_power_inputs
    from .reliability.power import power as _power

    check_power_inputs(utilization, pue)
    check_cost_inputs(price_kwh)
    cat = _catalog(catalog, catalog_paths)
    prm = load_params(tuple(defaults or ()))
    d = parse_design(design, cat, prm)
    pw = _power(d.system, d.fabric, d.counts, prm, utilization=utilization, pue=pue)
    cst = cost(d.system, d.fabric, d.counts, pw, prm, price_kwh=price_kwh)
    peak = d.system.accelerator.peak("bf16") * d.num_accelerators
    out = {"design": d.name, "system": d.system.id, "domains": d.domains, "fabric": d.fabric.id if d.fabric else None,
           "num_accelerators": d.num_accelerators, **pw.to_dict(),
           "power_kw": pw.it_w / 1e3, "energy_usd_per_year": cst.energy_usd_per_hour * 8760.0,
           "peak_pflops_bf16": peak / 1e15, "peak_gflops_per_watt_it": peak / pw.it_w / 1e9,
           "cost": cst.to_dict(), "counts_source": d.counts.source,
           "counts": {"accelerators": d.counts.accelerators, "hosts": d.counts.hosts, "cpus": d.counts.cpus,
                      "scaleup_switches": d.counts.scaleup_switches, "scaleout_switches": d.counts.scaleout_switches,
                      "nics": d.counts.nics, "transceivers": d.counts.transceivers, "cables": d.counts.cables}}
    out["assumptions"] = list(dict.fromkeys(list(pw.assumptions) + list(cst.assumptions)))
    return out


__all__ = ["CAVEAT_PREFIXES", "ENGINES", "FABRIC_WORKLOADS", "Scenario", "bom", "build_scenario", "build_sweep", "calibrate",
           "calibrate_gpu", "cluster", "collective",
           "cluster_summary", "compare", "cross_validate", "design_cost_power", "device_price_usd", "estimate",
           "fabric_workload", "goodput", "list_models", "load_catalog", "load_scenario", "memory_fit_text", "performance",
           "plan", "plan_request", "power", "report", "report_html", "results", "results_db_path", "schedule_export", "schedule_openb", "schedule_replay", "schedule_trace",
           "serve_estimate", "serve_plan", "simulate", "simulate_fabric", "stacks", "sweep", "write_trace", "validate",
           "validate_by", "validate_cross"]

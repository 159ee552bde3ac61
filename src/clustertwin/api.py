"""The facade the CLI and the web app call. Returns results, never prints.

>>> from clustertwin import api
>>> r = api.estimate(model="gpt3-175b", system="dgx-a100", gpus=1024, tp=8, pp=8, global_batch=1536)
>>> round(r.mfu, 2) > 0
True
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import InputError
from .userfiles import read_yaml
from .workload.model import ModelSpec, get_model, model_from_dict
from .workload.plan import ParallelPlan, check_plan, make_plan

ENGINES = ("analytical", "event")
NETWORKS = ("analytical", "flow")

_PLAN_KEYS = ("tp", "pp", "dp", "cp", "ep", "etp", "vpp", "micro_batch", "global_batch", "seq_len",
              "sequence_parallel", "zero", "fsdp", "recompute", "dtype", "flash_attention", "overlap",
              "grad_reduce_bytes", "uneven_pipeline", "cp_comm", "microbatch_group", "stack")


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
    return Scenario(model=m, system=sysspec, fabric=fab, plan=plan, name=name, catalog=cat)


def load_scenario(path: str | Path, *, catalog=None, catalog_paths=(), overrides: dict[str, Any] | None = None) -> Scenario:
    """Read a scenario YAML: ``model`` (zoo id or mapping), ``system``, ``fabric``, ``gpus``, ``plan``."""
    p = Path(path)
    data = read_yaml(p, "scenario file", hint="see scenarios/*.yaml for examples", shape="model, system, gpus and plan")
    allowed = {"name", "description", "model", "system", "fabric", "gpus", "plan", "source"}
    bad = set(data) - allowed
    if bad:
        from .errors import closest

        k = sorted(bad)[0]
        raise InputError(f"scenario {str(p)!r}: unknown key {k!r}", suggestions=closest(k, allowed),
                         hint="keys: " + ", ".join(sorted(allowed)))
    for key in ("model", "system"):
        if key not in data:
            raise InputError(f"scenario {str(p)!r} has no {key!r}", hint="give model, system, gpus and plan")
    plan = dict(data.get("plan") or {})
    plan.update({k: v for k, v in (overrides or {}).items() if v is not None and k in _PLAN_KEYS})
    ov = overrides or {}
    return build_scenario(
        model=ov.get("model") or data["model"], system=ov.get("system") or data["system"],
        gpus=ov.get("gpus") or data.get("gpus"), fabric=ov.get("fabric") or data.get("fabric"),
        catalog=catalog, catalog_paths=catalog_paths, name=str(data.get("name") or p.stem), **plan,
    )


def _event_engine():
    try:
        return importlib.import_module("clustertwin.sim.event")
    except ImportError:
        raise InputError("the event engine is not available in this installation",
                         hint="use --engine analytical") from None


def network_model(network: str = "analytical", *, routing: str = "ecmp", seed: int = 0, topology: str | None = None,
                  oversubscription: float = 1.0, fail_links: int = 0):
    """``None`` for the analytical network, or a ``FlowNetwork`` (``--network flow``) that adds the
    scale-out contention the flow-level fabric simulator finds to every collective of the step."""
    if network not in NETWORKS:
        from .errors import UnknownNameError

        raise UnknownNameError("network model", network, NETWORKS)
    if network == "analytical":
        return None
    from .collectives.flow import FlowNetwork
    from .fabric import ROUTINGS, Faults

    if routing not in ROUTINGS:
        from .errors import UnknownNameError

        raise UnknownNameError("routing", routing, ROUTINGS)
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


def simulate(scenario: Scenario, *, engine: str = "analytical", trace: bool = False, schedule: str | None = None,
             stragglers: tuple[str, ...] = (), network: Any = None):
    """Step estimate of a scenario with the chosen engine; returns a ``StepResult`` (analytical) or an
    ``EventResult`` (event: adds the critical path, stream utilisation and, with ``trace``, the timeline).

    ``schedule`` (1f1b | interleaved | zb-h1 | gpipe) and ``stragglers`` (specs such as
    ``"stage=3,compute=1.2"``) need the event engine. ``network``: ``network_model(...)`` (None =
    analytical collectives).
    """
    if engine not in ENGINES:
        from .errors import closest

        raise InputError(f"unknown engine {engine!r}", suggestions=closest(engine, ENGINES), hint="use analytical or event")
    if engine != "event" and (trace or schedule or stragglers):
        what = "--trace" if trace else ("--schedule" if schedule else "--straggler")
        raise InputError(f"{what} needs the event engine", hint="add --engine event")
    if engine == "event":
        mod = _event_engine()
        fn = getattr(mod, "estimate", None)
        if fn is None:
            raise InputError("the event engine does not provide estimate() yet", hint="use --engine analytical")
        parsed = tuple(mod.parse_straggler(s) for s in stragglers)
        return fn(scenario.model, scenario.system, scenario.fabric, scenario.plan, catalog=scenario.catalog,
                  schedule=schedule, stragglers=parsed, trace=trace, network=network)
    from .sim.analytical import estimate as _est

    return _est(scenario.model, scenario.system, scenario.fabric, scenario.plan, catalog=scenario.catalog,
                network=network)


def estimate(scenario: Scenario | str | Path | None = None, *, engine: str = "analytical", **kw: Any):
    """Estimate one training step: pass a ``Scenario``, a scenario YAML path, or keyword arguments
    (``model``, ``system``, ``gpus``, ``fabric`` and plan fields such as ``tp``, ``pp``, ``global_batch``)."""
    if scenario is None:
        scenario = build_scenario(**kw)
    elif not isinstance(scenario, Scenario):
        scenario = load_scenario(scenario, catalog=kw.pop("catalog", None), overrides=kw)
    return simulate(scenario, engine=engine)


def validate(path: str | Path, *, engine: str = "analytical", catalog=None, catalog_paths=()):
    """Predict every row of a validation CSV; returns a ``ValidationReport``."""
    from .validate import validate_file

    if engine not in ENGINES:
        raise InputError(f"unknown engine {engine!r}", hint="use analytical or event")
    if engine == "event":
        _event_engine()
    return validate_file(path, catalog=_catalog(catalog, catalog_paths), engine=engine)


def validate_by(path: str | Path, columns: list[str], *, report=None, engine: str = "analytical", catalog=None,
                catalog_paths=()) -> list[dict]:
    """Per-category table (MAPE, bias, worst row per value of each column) of a validation CSV."""
    from .validate import by_table, read_rows

    rep = report or validate(path, engine=engine, catalog=catalog, catalog_paths=catalog_paths)
    return by_table(rep, read_rows(path), columns)


def cross_validate(path: str | Path, column: str = "source", *, catalog=None, catalog_paths=()):
    """Leave-one-``column``-out cross-validation of the fitted constants on a training CSV (``CVReport``)."""
    from .calibration import cross_validate as cv
    from .validate import read_rows

    rows = read_rows(path)
    if rows and "measured_step_time_s" not in rows[0]:
        raise InputError(f"{path}: --cv needs a training-format file (measured_step_time_s)",
                         hint="cross-validation refits the step-time constants")
    return cv(rows, column, catalog=_catalog(catalog, catalog_paths))


def report(scenario: Scenario | str | Path | None = None, *, html: str | Path | None = None, db: str | Path | None = None,
           record_id: str | None = None, trace: str | Path | bool | None = None, fabric_domains: int | None = None,
           monte_carlo_runs: int = 2000, seed: int = 0, catalog=None, progress: Any = None) -> dict[str, Any]:
    """The HTML report's data for a scenario (object or YAML path) or a stored plan/sweep (``db`` +
    ``record_id``); with ``html`` also writes the self-contained page. Returns the data, plus
    ``html_path`` and ``html_bytes`` when written."""
    from .report.build import report_data, write_report

    if scenario is not None and not isinstance(scenario, Scenario):
        scenario = load_scenario(scenario, catalog=catalog)
    data = report_data(sys.modules[__name__], scenario, db=db, record_id=record_id, html_path=html, trace=trace, fabric_domains=fabric_domains,
                       monte_carlo_runs=monte_carlo_runs, seed=seed, progress=progress)
    if html is not None:
        path, size = write_report(data, html)
        data["html_path"], data["html_bytes"] = str(path), size
    return data


def report_html(scenario: Scenario | str | Path | None = None, **kw: Any) -> str:
    """The report page as a string (nothing written)."""
    from .report.html import render_html

    kw.pop("html", None)
    return render_html(report(scenario, **kw))


def list_models() -> list[str]:
    from .workload.model import builtin_models

    return sorted(builtin_models())


__all__ = ["ENGINES", "Scenario", "build_scenario", "cross_validate", "estimate", "list_models", "load_scenario", "report", "report_html", "simulate", "validate", "validate_by"]

"""Gather everything a report shows, as plain JSON-able dicts (no HTML here).

``collect_scenario`` runs, for one scenario: the cluster summary and bill of materials, power and
cost; the analytical step estimate and the event-engine step (timeline, exposed vs hidden
communication); the planner's top layouts; a small design sweep around the scenario (GPU counts x the
scenario's fabric and one alternative) for the MFU-vs-GPUs curve and the throughput/cost/power Pareto
front; the flow-level fabric simulator with ECMP, adaptive routing and packet spraying; goodput with a
Monte-Carlo; and the packaged validation set. ``collect_from_db`` reads a stored plan or sweep.

Each part is optional: a part that cannot be computed for this input (no scale-out fabric, a model
the planner cannot place) is left out with the reason in ``data["skipped"]``, and the report shows the
reason instead of the section. Everything is deterministic for the same inputs (fixed seeds).
"""

from __future__ import annotations

import csv
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError

STEP_GROUPS = (  # breakdown keys -> waterfall components (order = the order the step spends them)
    ("GEMM", ("gemm",)),
    ("attention", ("attention",)),
    ("elementwise", ("elementwise",)),
    ("logits", ("logits",)),
    ("recompute", ("recompute",)),
    ("TP exposed", ("tp_comm",)),
    ("CP exposed", ("cp_comm",)),
    ("EP exposed", ("ep_comm",)),
    ("overlap slowdown", ("overlap_slowdown",)),
    ("DP exposed", ("dp_comm", "fsdp_comm")),
    ("PP exposed", ("pp_p2p",)),
    ("PP bubble", ("pp_bubble",)),
    ("optimizer", ("optimizer",)),
    ("overhead", ("overhead",)),
)
MEMORY_ORDER = ("weights", "gradients", "optimizer", "activations", "logits", "runtime")
FABRIC_MIN_DOMAINS = 64  # below this most single-system fabrics fit one leaf and routing cannot matter


def _f(x: Any) -> Any:
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    if isinstance(x, dict):
        return {k: _f(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_f(v) for v in x]
    return x


# ----------------------------------------------------------------------------------------- parts


def cluster_part(sc: Any) -> dict[str, Any]:
    from ..cluster import bill_of_materials, build_cluster
    from ..reliability.cost import cost
    from ..reliability.design import make_design
    from ..reliability.params import load_params
    from ..reliability.power import power

    sysm, fab = sc.system, sc.fabric
    domains = -(-sc.plan.num_gpus // sysm.devices_per_domain)
    cl = build_cluster(sysm, domains, fab, catalog=sc.catalog)
    summary = cl.summary()
    bom = bill_of_materials(cl).to_dict()
    prm = load_params()
    design = make_design(f"{sysm.id}x{domains}", sysm, domains, fab, prm, origin="report")
    pw = power(design.system, design.fabric, design.counts, prm)
    cst = cost(design.system, design.fabric, design.counts, pw, prm)
    assumed = sorted(sysm.assumptions) + [f"{fab.id}.{k}" for k in sorted(fab.assumptions)]
    return _f({"summary": summary, "bom": bom, "power": pw.to_dict(), "cost": cst.to_dict(),
               "catalog_assumed": assumed, "domains": domains,
               "sources": {"system": getattr(sysm, "source", None), "fabric": getattr(fab, "source", None)}})


def step_part(api: Any, sc: Any, trace_path: str | Path | None = None) -> dict[str, Any]:
    r = api.simulate(sc)
    d = r.to_dict()
    bd = d["breakdown"]
    water = [(label, float(sum(bd.get(k, 0.0) for k in keys))) for label, keys in STEP_GROUPS]
    used = {k for _, keys in STEP_GROUPS for k in keys}
    water += [(k, float(v)) for k, v in sorted(bd.items()) if k not in used]
    out: dict[str, Any] = {"estimate": _f(d), "waterfall": [(k, v) for k, v in water if v > 0],
                           "hbm_gb": float(sc.system.accelerator.memory_capacity_bytes / 1e9),
                           "hbm_nominal_gb": float(sc.system.accelerator.hbm_bytes / 1e9)}
    try:
        e = api.simulate(sc, engine="event", trace=True)
    except InputError as exc:
        out["event_error"] = exc.message
        return out
    ed = e.to_dict()
    out["event"] = _f({k: ed.get(k) for k in ("step_time_s", "mfu", "exposed_comm_s", "hidden_comm_s",
                                              "stream_utilisation", "critical_stage", "bubble_fraction",
                                              "critical_path_s", "schedule", "num_ops")})
    out["timeline"] = timeline_lanes(e.timeline, critical=int(ed.get("critical_stage") or 0))
    if trace_path is not None:
        from .trace import write_chrome_trace

        out["trace_file"] = str(write_chrome_trace(e, trace_path))
    return out


def timeline_lanes(tl: Any, *, critical: int = 0, max_lanes: int = 24, px: int = 600) -> dict[str, Any]:
    """Event timeline reduced for drawing at ``px`` pixels: ops of one lane closer than a pixel are
    merged into one bar, coloured by the category that holds most of its time (``a+b`` when none
    holds 80 %). So the drawing stays small at any step length; the full timeline is in the trace.

    Lanes are (stage, stream); with many stages only every stage's compute plus the critical stage's
    other streams are kept."""
    ops = [o for o in tl.ops() if o[5] > o[4]]
    if not ops:
        return {"lanes": [], "bars": [], "categories": []}
    t_end = max(o[5] for o in ops)
    labels = tl.stage_labels
    stream_rank = {s: i for i, s in enumerate(("compute", "tp", "cp", "ep", "pp-send-fwd", "pp-send-bwd", "dp-grad", "dp-param"))}
    keys = sorted({(o[1], o[2]) for o in ops}, key=lambda k: (k[0], stream_rank.get(k[1], 99), k[1]))
    if len(keys) > max_lanes:
        keys = [k for k in keys if k[1] == "compute" or k[0] == critical][:max_lanes]
    index = {k: i for i, k in enumerate(keys)}
    res = t_end / px
    merged: list[list[Any]] = []  # [lane, start, end, {cat: seconds}, first name, count]
    last: dict[int, list[Any]] = {}
    for name, stage, stream, cat, start, end in sorted(ops, key=lambda o: (o[1], o[2], o[4], o[5])):
        li = index.get((stage, stream))
        if li is None:
            continue
        cur = last.get(li)
        short = cur is not None and (cur[2] - cur[1] < res or end - start < res)
        if cur is not None and start - cur[2] <= res and (short or cat in cur[3] and len(cur[3]) == 1):
            cur[2] = max(cur[2], end)
            cur[3][cat] = cur[3].get(cat, 0.0) + (end - start)
            cur[5] += 1
        else:
            cur = [li, start, end, {cat: end - start}, name, 1]
            merged.append(cur)
            last[li] = cur
    bars = []
    for li, start, end, cats, name, count in merged:
        top = sorted(cats.items(), key=lambda kv: (-kv[1], kv[0]))
        total = sum(cats.values()) or 1.0
        cat = top[0][0] if top[0][1] >= 0.8 * total or len(top) == 1 else "+".join(sorted((top[0][0], top[1][0])))
        label = name if count == 1 else f"{count} ops: " + ", ".join(f"{k} {100 * v / total:.0f}%" for k, v in top[:3])
        bars.append((li, float(start), float(end), cat, label))
    lane_names = [f"{labels[s] if s < len(labels) else f'stage {s}'} · {st}" for s, st in keys]
    return {"lanes": lane_names, "bars": bars, "categories": sorted({b[3] for b in bars}), "t_end_s": float(t_end),
            "num_ops": len(ops)}


def plan_part(api: Any, sc: Any, top: int = 5) -> dict[str, Any]:
    from ..planner.planning import PlanRequest, plan

    p = sc.plan
    req = PlanRequest(model=sc.model, system=sc.system.id, num_gpus=p.num_gpus, global_batch=p.global_batch,
                      seq_len=p.seq_len, fabric=sc.fabric.id, dtype=p.dtype, top_k=top)
    rep = plan(req, sc.catalog)
    out = rep.to_json()
    out["memory"] = plan_memory(api, sc, out["plans"])
    return _f(out)


def plan_memory(api: Any, sc: Any, plans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Memory per GPU by kind for the scenario's own plan and each top layout (the estimate's model)."""
    rows = []
    est = api.simulate(sc)
    rows.append({"label": "scenario plan", "gb": est.memory_breakdown_gb, "total_gb": est.memory_gb_per_gpu})
    p = sc.plan
    for pl in plans:
        kw = {k: pl[k] for k in ("tp", "pp", "dp", "cp", "ep", "vpp", "zero", "micro_batch", "recompute") if k in pl}
        try:
            s2 = api.build_scenario(model=sc.model, system=sc.system.id, fabric=sc.fabric.id, catalog=sc.catalog,
                                    gpus=p.num_gpus, global_batch=p.global_batch, seq_len=p.seq_len, dtype=p.dtype, **kw)
            r = api.simulate(s2)
        except InputError:
            continue
        rows.append({"label": f"#{pl.get('rank')} " + layout_label(pl), "gb": r.memory_breakdown_gb,
                     "total_gb": r.memory_gb_per_gpu})
    return rows


def layout_label(p: dict[str, Any]) -> str:
    parts = [f"TP{p['tp']}", f"PP{p['pp']}" + (f"v{p['vpp']}" if (p.get("vpp") or 1) > 1 else ""), f"DP{p['dp']}"]
    parts += [f"CP{p['cp']}"] if (p.get("cp") or 1) > 1 else []
    parts += [f"EP{p['ep']}"] if (p.get("ep") or 1) > 1 else []
    return " ".join(parts)


def sweep_part(api: Any, sc: Any, factors: tuple[float, ...] = (0.5, 1, 2, 4, 8, 16)) -> dict[str, Any]:
    """A small design sweep around the scenario: its system at several GPU counts, on its fabric and on
    one alternative of the same port speed class, best plan per design (the scaling curve and Pareto)."""
    from ..planner.executors import LocalExecutor
    from ..planner.store import ResultsStore
    from ..planner.sweep import best_per_design, build_sweep, run_sweep
    from ..workload.model import builtin_models

    if sc.model.id not in builtin_models():  # sweep workers resolve models by zoo id
        raise InputError(f"the design sweep runs zoo models; the scenario's model {sc.model.id!r} is defined in the "
                         "scenario", hint="use a zoo id (clustertwin catalog list models) for the scaling and Pareto plots")
    p = sc.plan
    n = p.num_gpus
    dpd = sc.system.devices_per_domain
    domains = sorted({max(1, round(n * f / dpd)) for f in factors})
    fabrics = [sc.fabric.id]
    alt = _alternative_fabric(sc)
    if alt:
        fabrics.append(alt)
    model_ref = sc.model.id
    spec: dict[str, Any] = {"name": f"{sc.name or 'scenario'}-designs",
            "designs": [{"system": sc.system.id, "domains": domains, "fabric": fabrics}],
            "models": [model_ref], "global_batch": [p.global_batch], "seq_len": [p.seq_len], "dtype": p.dtype}

    from ..planner.sweep import resolve_model_cached

    sw = build_sweep(spec, sc.catalog, label="report design sweep",
                     resolve=lambda name: sc.model if name == model_ref else resolve_model_cached(name))
    with tempfile.TemporaryDirectory(prefix="ct-report-") as tmp:
        out = run_sweep(sw, ResultsStore(Path(tmp) / "sweep.db"), LocalExecutor(workers=1), cost_fn=api.design_cost_power)
        rows = best_per_design(out.rows)
    return _f({"spec": spec, "rows": [{k: v for k, v in r.items() if k != "breakdown"} for r in rows]})


def _alternative_fabric(sc: Any) -> str | None:
    """Another catalog fabric with the scenario fabric's port speed (InfiniBand <-> RoCE), if any."""
    cat = sc.catalog
    try:
        ids = sorted(cat.scaleout)
    except (AttributeError, TypeError):  # a catalog without a listing: no alternative
        return None
    mine = sc.fabric
    for fid in ids:
        f = cat.fabric(fid)
        if fid != mine.id and abs(f.port_bw - mine.port_bw) < 1 and getattr(f, "kind", None) != getattr(mine, "kind", None):
            return fid
    for fid in ids:
        f = cat.fabric(fid)
        if fid != mine.id and abs(f.port_bw - mine.port_bw) < 1:
            return fid
    return None


def fabric_part(sc: Any, domains: int | None = None, size_bytes: float = float(1 << 30), seed: int = 0) -> dict[str, Any]:
    from ..fabric import ROUTING_POLICIES, make_fabric, simulate_collective
    from ..fabric.topology import TIER_NAMES

    n_dom = max(domains or 0, -(-sc.plan.num_gpus // sc.system.devices_per_domain))
    scenario_domains = n_dom
    if domains is None:
        n_dom = max(n_dom, FABRIC_MIN_DOMAINS)
    n_gpus = n_dom * sc.system.devices_per_domain
    fab = make_fabric(sc.system, sc.fabric, n_gpus)
    runs: dict[str, Any] = {}
    heat: dict[str, Any] = {}
    for op in ("all_to_all", "all_reduce"):
        for r in ROUTING_POLICIES.names():
            run = simulate_collective(fab, op, size_bytes, routing=r, seed=seed)
            runs[f"{op}:{r}"] = {"op": op, "routing": r, "time_s": run.time_s, "ideal_time_s": run.ideal_time_s,
                                 "efficiency": run.efficiency, "tiers": run.tier_summary(), "hottest": run.hottest(8)}
            if op == "all_to_all" and r == "ecmp":
                u = run.utilisation()
                rows, cols_n = [], 48
                for k, name in enumerate(TIER_NAMES):
                    m = np.flatnonzero(fab.topo.tier == k)
                    if m.size == 0:
                        continue
                    bins = np.array_split(u[m], min(cols_n, m.size))
                    rows.append((name, [float(b.max()) for b in bins], int(m.size)))
                heat = {"rows": rows, "op": op, "routing": r}
    return _f({"domains": n_dom, "scenario_domains": scenario_domains, "gpus": n_gpus, "size_bytes": size_bytes,
               "topology": fab.topo.shape.kind, "tiers": fab.topo.shape.tiers, "switches": fab.topo.switch_counts,
               "link_gbps": fab.topo.link_bw * 8 / 1e9, "nic_gbps": fab.topo.nic_bw * 8 / 1e9,
               "runs": runs, "heatmap": heat, "seed": seed})


def reliability_part(sc: Any, tokens_per_s: float | None, days: float = 30.0, runs: int = 2000, seed: int = 0) -> dict[str, Any]:
    from ..reliability.design import make_design
    from ..reliability.failures import build_failure_model
    from ..reliability.goodput import checkpoint_setup, goodput
    from ..reliability.params import load_params

    prm = load_params()
    p = sc.plan
    domains = -(-(p.num_gpus) // sc.system.devices_per_domain)
    design = make_design(f"{sc.system.id}x{domains}", sc.system, domains, sc.fabric, prm, origin="report")
    fm = build_failure_model(prm, {})
    ck = checkpoint_setup(prm, float(sc.model.num_params()))
    res = goodput(fm, design.counts, ck, days=days, tokens_per_s=tokens_per_s,
                  throughput_basis="analytical step estimate of this scenario", monte_carlo_runs=runs, seed=seed)
    return _f(res.to_dict())


def validation_part(api: Any, name: str = "training", engine: str = "analytical") -> dict[str, Any]:
    from ..validate import packaged_path

    rep = api.validate(name, engine=engine)
    src = packaged_path(name)
    meta: dict[str, dict[str, str]] = {}
    if src.exists():
        with src.open(newline="", encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                meta[row["id"]] = {k: row.get(k, "") for k in ("source", "source_locator", "model", "gpu", "num_gpus",
                                                                "framework")}
    rows = []
    for r in rep.rows:
        m = meta.get(r.id, {})
        rows.append({"id": r.id, "measured": r.measured, "predicted": r.predicted, "error_pct": r.error_pct,
                     "unit": r.unit, "reason": r.reason, **m})
    return _f({"set": name, "engine": engine, "mape_pct": rep.mape_pct, "rows": rows,
               "modelled": len(rep.modelled), "failures": len(rep.failures)})


# ----------------------------------------------------------------------------------------- entry points


def _part(data: dict[str, Any], key: str, fn: Any, *args: Any, **kw: Any) -> Any:
    """Run one part; an input the part cannot handle leaves the section out with the reason."""
    try:
        data[key] = fn(*args, **kw)
    except InputError as exc:
        data["skipped"][key] = exc.message
    return data.get(key)


def collect_scenario(api: Any, sc: Any, *, trace_path: str | Path | None = None, fabric_domains: int | None = None,
                     monte_carlo_runs: int = 2000, seed: int = 0, validation: bool = True,
                     serving: bool = True, scheduling: bool = False, progress: Any = None) -> dict[str, Any]:
    """All report parts for one scenario (``api.Scenario``). ``api``: the facade (``clustertwin.api``)
    whose ``simulate``, ``build_scenario`` and ``validate`` the report calls; passed in, so that the
    report sits below the facade in the layers and tests can hand it a fake."""
    from .serving_sched import collect_scheduling, collect_serving

    steps = (["cluster", "step", "plan", "sweep", "fabric", "reliability"] + (["serving"] if serving else [])
             + (["scheduling"] if scheduling else []) + (["accuracy"] if validation else []))
    data: dict[str, Any] = {"kind": "scenario", "skipped": {}, "scenario": scenario_header(sc)}

    def tick(i: int) -> None:
        if progress:
            progress(i, len(steps))

    tick(0)
    _part(data, "cluster", cluster_part, sc)
    tick(1)
    step = _part(data, "step", step_part, api, sc, trace_path)
    tick(2)
    _part(data, "plan", plan_part, api, sc)
    tick(3)
    _part(data, "sweep", sweep_part, api, sc)
    tick(4)
    if sc.fabric is not None and getattr(sc.system, "nics_per_host", 1):
        _part(data, "fabric", fabric_part, sc, fabric_domains, seed=seed)
    tick(5)
    tps = step["estimate"]["tokens_per_s"] if step else None
    _part(data, "reliability", reliability_part, sc, tps, runs=monte_carlo_runs, seed=seed)
    done = 6
    tick(done)
    if serving:
        cost = (data.get("cluster") or {}).get("cost") or {}
        per_gpu_h = cost.get("usd_per_hour") / sc.plan.num_gpus if cost.get("usd_per_hour") else None
        _part(data, "serving", collect_serving, sc, usd_per_gpu_hour=per_gpu_h)
        done += 1
        tick(done)
    if scheduling:
        _part(data, "scheduling", collect_scheduling)
        done += 1
        tick(done)
    if validation:
        _part(data, "accuracy", validation_part, api)
        tick(done + 1)
    data["assumptions"] = assumptions(data)
    return data


def scenario_header(sc: Any) -> dict[str, Any]:
    p = sc.plan
    return {"name": sc.name, "model": sc.model.id, "system": sc.system.id, "fabric": sc.fabric.id if sc.fabric else None,
            "gpus": p.num_gpus, "plan": {k: getattr(p, k) for k in ("tp", "pp", "dp", "cp", "ep", "vpp",
                                                                                 "micro_batch", "global_batch", "seq_len",
                                                                                 "zero", "recompute", "dtype")
                                                          if hasattr(p, k)}}


def collect_from_db(db: str | Path, record_id: str) -> dict[str, Any]:
    """A stored plan (``clustertwin plan``) or sweep (``clustertwin sweep``) from a results database."""
    from ..planner.store import ResultsStore
    from ..planner.sweep import best_per_design

    p = Path(db)
    if not p.exists():
        raise InputError(f"results database {str(p)!r} does not exist",
                         hint="run `clustertwin plan` or `clustertwin sweep FILE --db PATH` first, or pass the right --db")
    store = ResultsStore(p)
    meta = store.sweep(record_id)
    rows = store.results(meta["id"])
    is_plan = (meta.get("spec") or {}).get("kind") == "plan"
    data: dict[str, Any] = {"kind": "plan" if is_plan else "sweep", "skipped": {}, "record": _f(meta), "db": str(p)}
    if is_plan:
        plans = sorted(rows, key=lambda r: r.get("rank") or 0)
        data["plan"] = _f({"plans": plans, "runner_up": (meta.get("spec") or {}).get("runner_up"),
                           "request": (meta.get("spec") or {}).get("request", {})})
    else:
        data["sweep"] = _f({"spec": meta.get("spec"), "rows": [{k: v for k, v in r.items() if k != "breakdown"}
                                                               for r in best_per_design(rows)]})
    data["assumptions"] = assumptions(data)
    return data


def assumptions(data: dict[str, Any]) -> list[dict[str, str]]:
    """The assumptions the numbers rest on, each with where it comes from."""
    out: list[dict[str, str]] = []
    seen: set[str] = set()

    def add(text: str, source: str) -> None:
        if text and text not in seen:
            seen.add(text)
            out.append({"text": text, "source": source})

    c = data.get("cluster")
    if c:
        for a in c.get("catalog_assumed", []):
            add(f"catalog value marked assumed: {a}", "catalog (clustertwin catalog show)")
        for a in c.get("power", {}).get("assumptions", []):
            add(a, "reliability/data defaults (power)")
        for a in c.get("cost", {}).get("assumptions", []):
            add(a, "reliability/data defaults (cost)")
        for n in c.get("bom", {}).get("notes", []):
            add(n, "cluster/bom.py rules")
    s = data.get("step")
    if s:
        for a in s["estimate"].get("assumptions", []) or []:
            add(str(a), "step model (workload/data/efficiency.yaml, docs/modelling.md)")
    r = data.get("reliability")
    if r:
        for a in r.get("assumptions", []):
            add(a, "reliability/data (Llama 3 paper, Table 5; checkpoint defaults)")
    f = data.get("fabric")
    if f and f["domains"] != f["scenario_domains"]:
        add(f"fabric study at {f['domains']} domains ({f['gpus']} GPUs), larger than the scenario's "
            f"{f['scenario_domains']}: at that size the scenario's fabric fits one leaf and routing cannot matter",
            "report default (--fabric-domains)")
    sw = data.get("sweep")
    if sw and data.get("kind") == "scenario":
        add("design sweep: accelerators priced with the catalog's price_usd_per_device or the reliability "
            "defaults' price by system; cost and power from the bill of materials", "planner/sweep.py, reliability/data")
    return out


__all__ = ["collect_from_db", "collect_scenario", "layout_label", "timeline_lanes"]

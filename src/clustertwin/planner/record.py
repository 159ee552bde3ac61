"""Storing a ``clustertwin plan`` run in the results database, next to the sweeps.

A plan run is stored like a one-chunk sweep whose spec says ``kind: plan``: the resolved request (model,
system, GPUs, batch, fabric, stack, engine, fixed axes), the catalog and tool versions, and one row per
ranked plan (``job_index`` = rank - 1) with the design's cost and power from the bill of materials. Its
id hashes the inputs and versions, so running the same plan again stores nothing twice; the rows go
in one transaction, so an interrupted run leaves no partial record.
"""

from __future__ import annotations

from typing import Any

from .. import __version__
from .planning import PlanReport, PlanRequest
from .store import ResultsStore
from .sweep import PLAN_ROW_KEYS, Job, _digest, design_cost_power, job_row


def store_plan(req: PlanRequest, report: PlanReport, store: ResultsStore, catalog: Any) -> str:
    """Write ``report`` into ``store``; returns the record id (``clustertwin results show ID``)."""
    r = report.request
    spec = {"kind": "plan", "request": dict(r),
            "fixed": {k: list(v) for k, v in dict(req.options.fixed).items()},
            "engine_options": dict(req.engine_options), "top_k": req.top_k,
            "distinct_layouts": req.distinct_layouts}
    rid = _digest({"spec": spec, "catalog": catalog.version, "tool": __version__})
    domains = float(r["domains"])  # gpus / scale-up domain size, as plan() resolved it
    job = Job(index=0, system=r["system"], num_gpus=int(r["gpus"]),
              domains=int(domains) if domains.is_integer() else None, fabric=r["fabric"],
              oversubscription=float(r["oversubscription"]), model=str(r["model"]), global_batch=int(r["global_batch"]),
              seq_len=int(r["seq_len"]), dtype=str(r["dtype"]))
    cost, power = design_cost_power(job, catalog)
    rows = []
    for i, p in enumerate(report.plans):
        row = job_row(job, rid)
        row.update({k: p.get(k) for k in PLAN_ROW_KEYS}, job_index=i, feasible=True, reason=None,
                   cost_usd=cost, power_w=power, num_candidates=report.stats["candidates"],
                   num_feasible=report.stats["feasible"])
        rows.append(row)
    name = (f"plan {r['model']} {r['gpus']}x{r['system']} {r['fabric']} b{r['global_batch']}x{r['seq_len']} "
            f"{r.get('stack', '')}").strip()
    store.begin_sweep(sweep_id=rid, name=name, spec=spec, catalog_version=catalog.version, tool_version=__version__,
                      num_jobs=len(rows), num_chunks=1, executor="plan")
    store.write_chunk(sweep_id=rid, chunk_id=rid, chunk_index=0, rows=rows)
    store.finish_sweep(rid)
    return rid

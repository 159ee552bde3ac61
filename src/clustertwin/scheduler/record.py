"""Storing ``clustertwin schedule replay | compare`` runs in the results database, next to sweeps and
plans (``planner/store.py``): one record (``kind: schedule``) per invocation, one row per policy.

The record id hashes the inventory, the job source and the policies with the tool and catalog
versions, so the same run stored twice is kept once. Rows use the common result columns: ``system``,
``num_gpus`` (schedulable), ``domains``, ``fabric``, ``oversubscription``, ``reason`` = the policy, and
``breakdown`` = the policy's metrics as JSON; ``results show ID`` prints them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .. import __version__


def store_schedule(results: list[Any], inv: Any, jobs_source: str, db: str | Path | None = None) -> dict[str, str]:
    import json

    from ..catalog import load_catalog
    from ..planner.store import ResultsStore
    from ..planner.sweep import _digest

    cat = load_catalog()
    spec = {"kind": "schedule", "inventory": inv.summary(), "jobs": jobs_source,
            "policies": [r.policy for r in results], "seed": results[0].seed,
            "metrics": {r.policy: r.metrics for r in results}}
    rid = _digest({"spec": {k: v for k, v in spec.items() if k != "metrics"}, "catalog": cat.version,
                   "tool": __version__})
    s = inv.summary()
    rows = []
    for i, r in enumerate(results):
        rows.append({"job_index": i, "chunk_id": rid, "system": s["system"], "num_gpus": s["schedulable_gpus"],
                     "domains": s["nvlink_domains"], "fabric": s["fabric"], "oversubscription": s["oversubscription"],
                     "feasible": True, "reason": f"policy {r.policy}", "breakdown": json.dumps(r.metrics, sort_keys=True)})
    store = ResultsStore(db)
    name = f"schedule {s['system']} x{s['nvlink_domains']} {','.join(spec['policies'])} {jobs_source}"
    store.begin_sweep(sweep_id=rid, name=name, spec=spec, catalog_version=cat.version, tool_version=__version__,
                      num_jobs=len(rows), num_chunks=1, executor="schedule")
    store.write_chunk(sweep_id=rid, chunk_id=rid, chunk_index=0, rows=rows)
    store.finish_sweep(rid)
    return {"db": str(store.path), "id": rid}

"""Adapter to the bill of materials (``clustertwin.cluster.bom``): cost and power of a sweep design."""

from __future__ import annotations

from typing import Any


def cost_power(bom: Any, job: Any, catalog: Any) -> tuple[float | None, float | None]:
    """(capital cost USD, power W) of the job's cluster, or ``(None, None)`` if the BOM cannot say."""
    fn = getattr(bom, "cluster_bom", None) or getattr(bom, "bill_of_materials", None)
    if fn is None:
        return None, None
    out = fn(catalog=catalog, system=job.system, num_gpus=job.num_gpus, fabric=job.fabric,
             oversubscription=job.oversubscription)
    get = (lambda k: out.get(k)) if isinstance(out, dict) else (lambda k: getattr(out, k, None))
    cost = get("total_cost_usd") or get("cost_usd")
    power = get("total_power_w") or get("power_w")
    return (float(cost) if cost is not None else None, float(power) if power is not None else None)

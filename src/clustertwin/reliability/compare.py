"""Design-vs-design comparison: hardware totals, power, cost, goodput and (when a step-time estimate
is supplied) throughput per watt and per dollar.

``compare_designs`` is pure: the caller (CLI / api) resolves designs and, if it can, the best layout's
step time for the model (planner or estimate API) and passes it in as ``performance``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..hardware import resolve_hardware
from .cost import cost, efficiency
from .design import Design
from .failures import DAY, FailureModel
from .goodput import checkpoint_setup, goodput
from .params import Params
from .power import power
from .throughput import mfu_throughput


def design_row(d: Design, params: Params, fm: FailureModel, *, model: Any = None,
               performance: Mapping[str, Any] | None = None, utilization: float | None = None,
               pue: float | None = None, price_kwh: float | None = None, mfu: float | None = None,
               spares: int | None = None) -> dict[str, Any]:
    sysm, acc, n = d.system, d.system.accelerator, d.num_accelerators
    pw = power(sysm, d.fabric, d.counts, params, utilization=utilization, pue=pue)
    rated = power(sysm, d.fabric, d.counts, params, utilization=1.0, pue=1.0)
    cst = cost(sysm, d.fabric, d.counts, pw, params, price_kwh=price_kwh)
    peak = acc.peak("bf16") * n
    row: dict[str, Any] = {
        "name": d.name,
        "system": sysm.id,
        "domains": d.domains,
        "fabric": d.fabric.id if d.fabric else None,
        "num_accelerators": n,
        "accelerator": acc.id,
        "peak_pflops_bf16": peak / 1e15,
        "hbm_tb": acc.hbm_bytes * n / 1e12,
        "hbm_tbps": acc.hbm_bw * n / 1e12,
        "scaleup_gbytes_per_s_per_gpu": sysm.scaleup_bw_per_device / 1e9,
        "scaleout_gbits_per_s_per_gpu": (resolve_hardware(sysm, d.fabric).scaleout_bw_per_device if d.fabric
                                         else sysm.nic_bw_per_device) * 8 / 1e9,
        "power_kw": pw.it_w / 1e3,
        "rated_power_kw": rated.it_w / 1e3,
        "facility_power_kw": pw.facility_w / 1e3,
        "power_by_component_kw": {k: v / 1e3 for k, v in pw.by_component_w.items()},
        "published_power_kw": published_power_kw(d),
        "quoted_power_kw": params.quoted_power_kw.get(sysm.id, (None, None))[0] * d.domains
        if sysm.id in params.quoted_power_kw else None,
        "cost_usd": cst.capex_usd,
        "usd_per_hour": cst.usd_per_hour,
        "peak_gflops_per_watt": peak / rated.it_w / 1e9,
        "counts": {"source": d.counts.source, "accelerators": d.counts.accelerators, "hosts": d.counts.hosts,
                   "scaleup_switches": d.counts.scaleup_switches, "scaleout_switches": d.counts.scaleout_switches,
                   "nics": d.counts.nics, "transceivers": d.counts.transceivers, "cables": d.counts.cables},
    }
    rates = fm.class_rates(d.counts.exposure())
    lam = float(rates.sum())
    row["interruptions_per_day"] = lam * DAY
    row["mtbi_h"] = (1.0 / lam / 3600.0) if lam > 0 else None
    assumptions = list(pw.assumptions) + list(cst.assumptions)
    row.update({"model": None, "ettr": None, "step_time_s": None, "mfu": None, "tokens_per_s": None,
                "tokens_per_day": None, "tokens_per_usd": None, "usd_per_million_tokens": None,
                "tokens_per_mwh": None, "performance_basis": None})
    if model is not None:
        row["model"] = getattr(model, "id", str(model))
        ck = checkpoint_setup(params, float(model.num_params()))
        gp = goodput(fm, d.counts, ck, days=1.0, spares=spares)
        row["ettr"] = gp.ettr
        row["checkpoint_interval_s"] = gp.interval_s
        assumptions += list(ck.assumptions)
        tps = None
        if performance and performance.get("tokens_per_s"):
            tps = float(performance["tokens_per_s"])
            row["step_time_s"] = performance.get("step_time_s")
            row["mfu"] = performance.get("mfu")
            row["performance_basis"] = performance.get("basis", "estimate")
            if performance.get("plan"):
                row["plan"] = performance["plan"]
            assumptions += list(performance.get("assumptions") or ())  # e.g. an uncalibrated chip
            for k in ("memory_gb_per_gpu", "memory_left_gb", "memory_margin_gb"):
                if k in performance:
                    row[k] = performance[k]
        elif mfu is not None:
            tps = mfu_throughput(model, acc.peak("bf16"), n, mfu)
            row["mfu"] = mfu
            row["performance_basis"] = f"assumed MFU {mfu:g} (no step-time estimate)"
        if performance and performance.get("error"):
            row["performance_error"] = performance["error"]
        if tps:
            row["tokens_per_s"] = tps
            row["tokens_per_day"] = tps * gp.ettr * DAY
            eff = efficiency(tokens_per_s=tps, ettr=gp.ettr, pw=pw, cst=cst, peak_flops=peak)
            row["tokens_per_usd"] = eff["tokens_per_usd"]
            row["usd_per_million_tokens"] = eff["usd_per_million_tokens"]
            row["tokens_per_mwh"] = eff["tokens_per_mwh"]
    row["assumptions"] = list(dict.fromkeys(assumptions))
    return row


def published_power_kw(d: Design) -> float | None:
    v = (d.system.bom or {}).get("domain_power_kw")
    return float(v) * d.domains if isinstance(v, (int, float)) else None


def efficiency_ratios(a: Mapping[str, Any], b: Mapping[str, Any], power_key: str = "rated_power_kw") -> dict[str, float | None]:
    """How design ``a`` compares with ``b`` on a power basis (``rated_power_kw``, ``published_power_kw``
    or ``quoted_power_kw``): ``power`` = P_b / P_a, and per-watt advantages of ``a`` over ``b``
    (values > 1 mean ``a`` is more efficient)."""
    pa, pb = a.get(power_key), b.get(power_key)
    if not pa or not pb:
        return {"basis": power_key, "power": None, "flops_per_watt": None, "hbm_bw_per_watt": None, "hbm_per_watt": None,
                "power_a_kw": pa, "power_b_kw": pb}

    def per_w(key: str) -> float:
        return (a[key] / pa) / (b[key] / pb)

    return {"basis": power_key, "power_a_kw": pa, "power_b_kw": pb, "power": pb / pa,
            "flops_per_watt": per_w("peak_pflops_bf16"), "hbm_bw_per_watt": per_w("hbm_tbps"), "hbm_per_watt": per_w("hbm_tb")}


def compare_designs(designs: Sequence[Design], params: Params, fm: FailureModel, *, model: Any = None,
                    performance: Mapping[str, Mapping[str, Any]] | None = None, **kw: Any) -> dict[str, Any]:
    rows = [design_row(d, params, fm, model=model, performance=(performance or {}).get(d.name), **kw) for d in designs]
    out: dict[str, Any] = {"designs": rows}
    if len(rows) >= 2:
        out["ratios_vs_first"] = [
            {"name": r["name"], **{k: v for k, v in efficiency_ratios(rows[0], r).items()}} for r in rows[1:]
        ]
    return out

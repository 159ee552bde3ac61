"""Latency at the logged load: is a server / interactive row's error the engine's speed or its dynamics?

    python benchmarks/check_serving_load.py                 # every server/interactive row with logged latencies
    python benchmarks/check_serving_load.py --rows mlperf41-0048-mixtral-8x7b-server --json
    python benchmarks/check_serving_load.py --no-fit        # only the simulation at the logged load

For every row of the packaged serving.csv whose scenario is server / interactive and which logs its
TTFT and TPOT, the row's own load (target tokens/s per GPU -> requests/s per attention rank) is
simulated (``serving.simulate.simulate``: the same instance, workload and scheduler the validator
builds from the row's columns; >= 4,000 requests and >= 8 request lifetimes, the steady-state window)
and the simulated TTFT / TPOT (mean, p99) are printed beside the logged ones.

Then a single factor ``f`` on every pass time (``simulate(time_scale=f)``) is bisected until the
simulated mean TPOT equals the logged mean TPOT. ``f`` is the pass-time error that alone would explain
the row's latency at its load. Near saturation the TPOT at a fixed load goes as ``a / (1 - rho)``, so a
modest speed error shows as a large TPOT gap; where the row's system also has an offline row, compare
``f`` with that row's error (``offline err``): equal means the scheduler / queueing model is right and
the error is the op model's speed; different means a dynamics effect. Nothing here is fitted into the
model; it is a diagnostic (docs/serving.md "Latency at load").
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import time
from importlib import resources


def _rows() -> list[dict]:
    path = resources.files("clustertwin") / "data" / "validation" / "serving.csv"
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _num(text) -> float | None:
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _offline_pair(row: dict, rows: list[dict]) -> dict | None:
    """An offline row of the same submission (id prefix) and model, else of the same chip, framework and model."""
    sub = "-".join(row["id"].split("-")[:2])
    same = [r for r in rows if r["scenario_kind"] == "offline" and r["model_ref"] == row["model_ref"]]
    for r in same:
        if r["id"].startswith(sub + "-"):
            return r
    for r in same:
        if r["gpu_id"] == row["gpu_id"] and r["framework"] == row["framework"]:
            return r
    return None


def check_row(row: dict, rows: list[dict], catalog, *, fit: bool = True, requests: int = 4000) -> dict:
    from clustertwin.serving.phases import build_instance
    from clustertwin.serving.simulate import MAX_SEARCH_REQUESTS, STABILITY_SPANS, simulate
    from clustertwin.serving.validation import predict_serving_row, row_inputs

    model, system, scaleout, dep, wl, engine, extras, _ = row_inputs(row, catalog)
    inst = build_instance(model, system, scaleout, dep, engine, catalog=catalog)
    q = float(row["target_value"]) * inst.attn_tp * inst.dep.pp / wl.output_len  # requests/s per attention rank
    life = wl.ttft_slo_s + wl.output_len * (wl.tpot_slo_s or 0.05)
    n = int(min(MAX_SEARCH_REQUESTS, max(requests, q * STABILITY_SPANS * life)))

    def run(f: float):
        return simulate(inst, wl, qps=q, requests=n, seed=0, time_scale=f)

    s = run(1.0)
    log = {k: _num(row.get(k)) for k in ("ttft_mean_ms", "ttft_p99_ms", "tpot_mean_ms", "tpot_p99_ms")}
    out = {"id": row["id"], "engine": engine.id, "qps_per_rank": q, "requests": n,
           "sim": {"ttft_mean_ms": s.ttft_s["mean"] * 1e3, "ttft_p99_ms": s.ttft_s["p99"] * 1e3,
                   "tpot_mean_ms": s.tpot_s["mean"] * 1e3, "tpot_p99_ms": s.tpot_s["p99"] * 1e3},
           "logged": log}
    pred = predict_serving_row(row, catalog).predicted
    out["error_pct"] = 100.0 * (pred - float(row["target_value"])) / float(row["target_value"])
    pair = _offline_pair(row, rows)
    if pair is not None:
        out["offline_row"] = pair["id"]
        p = predict_serving_row(pair, catalog).predicted
        out["offline_error_pct"] = 100.0 * (p - float(pair["target_value"])) / float(pair["target_value"])
    if fit and log["tpot_mean_ms"]:
        want = log["tpot_mean_ms"] / 1e3
        lo, hi = 0.25, 4.0
        for _ in range(12):  # simulated mean TPOT grows with the pass-time factor
            mid = math.sqrt(lo * hi)
            if run(mid).tpot_s["mean"] < want:
                lo = mid
            else:
                hi = mid
        f = math.sqrt(lo * hi)
        sf = run(f)
        out["tpot_factor"] = f
        out["at_factor"] = {"ttft_mean_ms": sf.ttft_s["mean"] * 1e3, "ttft_p99_ms": sf.ttft_s["p99"] * 1e3,
                            "tpot_mean_ms": sf.tpot_s["mean"] * 1e3, "tpot_p99_ms": sf.tpot_s["p99"] * 1e3}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default="", help="comma-separated row ids (default: every server/interactive row "
                                               "with logged TTFT and TPOT)")
    ap.add_argument("--no-fit", action="store_true", help="skip the pass-time factor bisection")
    ap.add_argument("--requests", type=int, default=4000)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    from clustertwin.catalog import load_catalog

    catalog = load_catalog()
    rows = _rows()
    want = {x.strip() for x in a.rows.split(",") if x.strip()}
    if want:
        sel = [r for r in rows if r["id"] in want]
    else:
        sel = [r for r in rows if r["scenario_kind"] in ("server", "interactive")
               and _num(r.get("tpot_mean_ms")) and _num(r.get("ttft_mean_ms"))]
    missing = want - {r["id"] for r in sel}
    if missing:
        print(f"error: no such row in serving.csv: {', '.join(sorted(missing))}", file=sys.stderr)
        return 2
    res = []
    t0 = time.perf_counter()
    for r in sel:
        c = check_row(r, rows, catalog, fit=not a.no_fit, requests=a.requests)
        res.append(c)
        if not a.json:
            g, s = c["logged"], c["sim"]
            line = (f"{c['id'][:44]:44s} {c['engine']:6s} err {c['error_pct']:+6.1f}% | at logged load: TPOT sim "
                    f"{s['tpot_mean_ms']:6.1f}/{s['tpot_p99_ms']:6.1f} log {g['tpot_mean_ms']:6.1f}/{g['tpot_p99_ms'] or 0:6.1f} ms, "
                    f"TTFT sim {s['ttft_mean_ms']:7.0f}/{s['ttft_p99_ms']:7.0f} log {g['ttft_mean_ms']:6.0f}/{g['ttft_p99_ms'] or 0:6.0f} ms")
            if "tpot_factor" in c:
                z = c["at_factor"]
                line += (f" | f = {c['tpot_factor']:4.2f}: TPOT p99 {z['tpot_p99_ms']:6.1f}, TTFT {z['ttft_mean_ms']:6.0f}/"
                         f"{z['ttft_p99_ms']:6.0f}")
            if "offline_error_pct" in c:
                line += f" | offline err {c['offline_error_pct']:+6.1f}% ({c['offline_row']})"
            print(line, flush=True)
    if a.json:
        print(json.dumps({"rows": res, "seconds": time.perf_counter() - t0}))
    else:
        print(f"{len(res)} rows in {time.perf_counter() - t0:.0f} s (mean/p99; f = pass-time factor matching the logged mean TPOT)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

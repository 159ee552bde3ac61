"""Re-derive the per-link-technology collective constants of collectives/data/nccl.yaml.

    python benchmarks/fit_collective_constants.py nvlink4 [--keys latency_scale,pipeline_fill_us]

Fit procedure (the one nccl.yaml cites): take EVERY row of the packaged public collectives.csv whose
system is built on the scale-up technology TECH, and minimise the mean |relative busbw error| (the
validation MAPE) over all of them jointly, with ONE parameter set for every system on that technology
(never one per system). Nelder-Mead in log-parameter space from a fixed grid of starts (deterministic).
Keys not fitted are held at their neutral value (latency_scale 1, fill 0, no channel modes), so the
result does not depend on what nccl.yaml currently ships. Prints the constants and the per-system /
size-band MAPE. Not a test.
"""

from __future__ import annotations

import argparse
import csv
import itertools
from types import SimpleNamespace

import numpy as np
from scipy.optimize import minimize

from clustertwin.catalog import load_catalog
from clustertwin.collectives.validation import predict_busbw_row, size_band
from clustertwin.validate import packaged_path

NEUTRAL = {
    "latency_scale": 1.0,
    "launch_overhead_us": 0.0,
    "channel_launch_us": 0.0,
    "small_msg_bw_fraction": 1.0,
    "pipeline_fill_us": 0.0,
    "pipeline_fill_max_us": 1000.0,
}
BOUNDS = {  # the physical ranges params.py accepts
    "latency_scale": (0.05, 50.0),
    "launch_overhead_us": (0.0, 1000.0),
    "channel_launch_us": (0.0, 100.0),
    "small_msg_bw_fraction": (1e-4, 1.0),
    "pipeline_fill_us": (0.0, 1000.0),
    "pipeline_fill_max_us": (0.0, 1e5),
    "host_launch_us": (0.0, 1000.0),
}
STARTS = {
    "latency_scale": (0.8, 1.0, 1.3, 2.5),
    "launch_overhead_us": (2.0, 20.0),
    "channel_launch_us": (0.1, 0.5),
    "small_msg_bw_fraction": (0.01, 0.1),
    "pipeline_fill_us": (0.5, 1.5, 3.0, 6.0),
    "pipeline_fill_max_us": (100.0, 1000.0),
    "host_launch_us": (3.0, 5.0),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("tech", help="catalog scale-up technology id, e.g. nvlink4; several comma-separated, or "
                    "'all', fit ONE parameter set over all their rows (host_launch_us is one host-side constant)")
    ap.add_argument("--keys", default="latency_scale,pipeline_fill_us")
    ap.add_argument("--systems", help="fit on these systems' rows only (comma-separated): leave-one-system-out")
    ap.add_argument("--start", help="one start point (comma-separated, one value per key) instead of the grid")
    a = ap.parse_args()
    keys = a.keys.split(",")
    base = load_catalog()
    with open(packaged_path("collectives"), newline="", encoding="utf-8") as fh:
        techs = a.tech.split(",")
        rows = [r for r in csv.DictReader(fh) if a.tech == "all" or base.system(r["system"]).scaleup.id in techs]
    held = []
    if a.systems:
        keep = set(a.systems.split(","))
        held = [r for r in rows if r["system"] not in keep]
        rows = [r for r in rows if r["system"] in keep]
    if not rows:
        raise SystemExit(f"no public collectives row on a {a.tech} system")
    systems = sorted({r["system"] for r in rows})
    meas = np.array([float(r["measured_busbw_GBps"]) for r in rows])

    def values(x):
        v = dict(NEUTRAL)
        v.update({k: float(np.clip(np.exp(xi), *BOUNDS[k])) for k, xi in zip(keys, x, strict=True)})
        return v

    def errors(x):
        v = values(x)
        # the same overlay for every system on the technology: one parameter set
        cat = SimpleNamespace(calibration={"collectives": {s: v for s in systems}})
        pred = np.array([predict_busbw_row(r, _Cat(base, cat)) for r in rows])
        return pred / meas - 1

    def loss(x):
        return float(np.mean(np.abs(errors(x))))

    best = None
    starts = [tuple(float(v) for v in a.start.split(","))] if a.start else itertools.product(*(STARTS[k] for k in keys))
    for start in starts:
        res = minimize(loss, np.log(start), method="Nelder-Mead", options={"maxiter": 2000, "xatol": 1e-4, "fatol": 1e-7})
        if best is None or res.fun < best.fun:
            best = res
    v = values(best.x)
    print(f"{a.tech}: {len(rows)} rows on {', '.join(systems)}; MAPE {100 * best.fun:.2f} %")
    for k in keys:
        print(f"  {k}: {v[k]:.4g}")
    err = errors(best.x)
    bands: dict[tuple[str, str], list[float]] = {}
    for r, e in zip(rows, err, strict=True):
        bands.setdefault((r["system"], size_band(float(r["size_bytes"]))), []).append(abs(e))
    for (s, b), es in sorted(bands.items()):
        print(f"  {s:12s} {b:10s} MAPE {100 * np.mean(es):5.1f} %  max {100 * max(es):5.1f} %  ({len(es)} rows)")
    if held:
        cat = SimpleNamespace(calibration={"collectives": {r["system"]: v for r in held}})
        he = [abs(predict_busbw_row(r, _Cat(base, cat)) / float(r["measured_busbw_GBps"]) - 1) for r in held]
        hs = sorted({r["system"] for r in held})
        print(f"  held out ({', '.join(hs)}, {len(held)} rows): MAPE {100 * np.mean(he):.2f} %")


class _Cat:
    """The packaged catalog with a replaced ``calibration`` section."""

    def __init__(self, base, cal):
        self._base, self.calibration = base, cal.calibration

    def __getattr__(self, name):
        return getattr(self._base, name)


if __name__ == "__main__":
    main()

"""Speed of the analytical step-time estimate.

Prints: per-call time of one scalar estimate of a 16,384-GPU plan (Llama 3 405B, Table 4 layout),
per-plan time of estimate_batch over 100,000 plans, and the CLI start-up time (`clustertwin --help`).
Run: python benchmarks/bench_estimate.py
"""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np

from clustertwin.catalog import load_catalog
from clustertwin.sim import estimate, estimate_batch
from clustertwin.workload import get_model, make_plan


def main() -> None:
    cat = load_catalog()
    model = get_model("llama3-405b")
    system = cat.system("hgx-h100")
    fabric = cat.fabric("roce-400g")
    plan = make_plan(gpus=16384, tp=8, pp=16, vpp=4, global_batch=2048, seq_len=8192, zero=2)
    estimate(model, system, fabric, plan, catalog=cat)  # warm caches
    n = 200
    t0 = time.perf_counter()
    for _ in range(n):
        estimate(model, system, fabric, plan, catalog=cat)
    per_call = (time.perf_counter() - t0) / n
    print(f"estimate() 16,384-GPU plan: {per_call * 1e3:.2f} ms per call (target < 10 ms)")

    rng = np.random.default_rng(0)
    k = 100_000
    tp = rng.choice([1, 2, 4, 8], k)
    pp = rng.choice([1, 2, 4, 8, 16], k)
    cp = rng.choice([1, 2], k)
    dp = 16384 // (tp * pp * cp)
    plans = {"tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": 1, "vpp": rng.choice([1, 2], k),
             "micro_batch": rng.choice([1, 2], k), "recompute": rng.choice([0, 1, 2], k), "zero": rng.choice([0, 1, 2, 3], k)}
    estimate_batch(model, system, fabric, {key: v[:10] if hasattr(v, "__len__") else v for key, v in plans.items()},
                   global_batch=4096, seq_len=8192, catalog=cat)
    t0 = time.perf_counter()
    out = estimate_batch(model, system, fabric, plans, global_batch=4096, seq_len=8192, catalog=cat)
    dt = time.perf_counter() - t0
    print(f"estimate_batch() {k:,} plans: {dt:.3f} s ({k / dt:,.0f} plans/s; {int(out['valid'].sum()):,} valid)")

    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "clustertwin", "--help"], capture_output=True, check=True)
    print(f"CLI start-up (clustertwin --help): {time.perf_counter() - t0:.2f} s")


if __name__ == "__main__":
    main()

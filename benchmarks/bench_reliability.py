"""Monte-Carlo goodput speed: simulated runs per second (Llama 3 405B on 16,384 H100, 54 days,
~466 interruptions per run), and the analytic ETTR evaluations per second.

    python benchmarks/bench_reliability.py [--runs 20000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from clustertwin.catalog import load_catalog
from clustertwin.reliability.design import parse_design
from clustertwin.reliability.failures import DAY, build_failure_model, spare_analysis
from clustertwin.reliability.goodput import checkpoint_setup, ettr_grid, goodput
from clustertwin.reliability.montecarlo import simulate
from clustertwin.reliability.params import load_params
from clustertwin.workload.model import get_model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    params = load_params()
    fm = build_failure_model(params)
    d = parse_design("hgx-h100x2048", load_catalog(), params)
    ck = checkpoint_setup(params, float(get_model("llama3-405b").num_params()))
    g = goodput(fm, d.counts, ck, days=54)
    rates = fm.class_rates(d.counts.exposure())
    _, block, waits = spare_analysis(fm, d.counts)
    kw = dict(class_rates=rates, block_prob=block, block_wait=waits, planned_rate=fm.planned_rate_s,
              tau=g.interval_s, delta=ck.blocking_s, restart=ck.restart_s, horizon_s=54 * DAY)
    print(f"scenario: llama3-405b on {d.num_accelerators} x hgx-h100, 54 days, "
          f"{g.unexpected_interruptions:.0f} unexpected + {g.planned_interruptions:.0f} planned interruptions per run")
    best = float("inf")
    for i in range(a.repeat):
        t0 = time.perf_counter()
        r = simulate(runs=a.runs, seed=i, **kw)
        best = min(best, time.perf_counter() - t0)
    print(f"Monte-Carlo: {a.runs} runs in {best:.3f} s -> {a.runs / best:,.0f} runs/s "
          f"({a.runs * (g.unexpected_interruptions + g.planned_interruptions) / best:,.0f} interruptions/s); "
          f"ETTR mean {r.ettr.mean():.4f} vs analytic {g.ettr:.4f}")
    taus = np.linspace(0.1, 10, 100_000) * g.interval_s
    t0 = time.perf_counter()
    ettr_grid(fm, d.counts, ck, taus)
    dt = time.perf_counter() - t0
    print(f"analytic ETTR (Daly 2006): {taus.size:,} intervals in {dt * 1e3:.1f} ms -> {taus.size / dt:,.0f} evaluations/s")


if __name__ == "__main__":
    main()

"""Pareto front of a large sweep: time and peak memory (issue #19: a 160k-design sweep asked for 71.5 GiB).

    python benchmarks/bench_pareto.py [N]
"""

from __future__ import annotations

import resource
import sys
import time

import numpy as np

from clustertwin.planner.pareto import pareto_mask


def main(n: int = 160_000) -> None:
    rng = np.random.default_rng(0)
    tput = rng.lognormal(10, 1, n)
    cost = tput * rng.uniform(0.5, 1.5, n)  # correlated, as real designs are
    power = tput * rng.uniform(0.5, 1.5, n)
    x = np.stack([tput, cost, power], axis=1)
    t0 = time.perf_counter()
    mask = pareto_mask(x, [True, False, False])
    dt = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"pareto_mask: {n:,} designs x 3 objectives -> {int(mask.sum()):,} on the front in {dt:.2f} s; "
          f"peak RSS {rss:.0f} MiB")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 160_000)

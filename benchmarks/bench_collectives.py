"""Speed of the collective engine (prints figures; not a test).

Target (issue 4): a full nccl-tests size sweep (8 B .. 8 GiB, 31 sizes) for a 16,384-GPU group in
< 50 ms in the library.
"""

from __future__ import annotations

import time

import numpy as np

from clustertwin.catalog import load_catalog
from clustertwin.collectives import collective_time, sweep
from clustertwin.collectives.nccl_tests import parse_sizes


def best_of(fn, repeat=7):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    cat = load_catalog()
    system = cat.system("hgx-h100")
    fabric = cat.fabric(system.default_scaleout)
    sizes = parse_sizes("8:8G")
    assert sizes.size == 31
    collective_time("all_reduce", sizes, 16384, 8, system, fabric)  # warm caches

    t_arr = best_of(lambda: collective_time("all_reduce", sizes, 16384, 8, system, fabric))
    t_sweep = best_of(lambda: sweep("all_reduce", sizes, 16384, 8, system, fabric))
    print(f"all_reduce sweep 8 B..8 GiB (31 sizes), 16384 GPUs, collective_time: {t_arr * 1e3:.2f} ms (target < 50 ms)")
    print(f"all_reduce sweep 8 B..8 GiB (31 sizes), 16384 GPUs, sweep() with results: {t_sweep * 1e3:.2f} ms")
    for op in ("all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv"):
        t = best_of(lambda op=op: sweep(op, sizes, 16384, 8, system, fabric))
        print(f"{op:15s} sweep, 16384 GPUs: {t * 1e3:.2f} ms")

    rng = np.random.default_rng(0)
    k = 100_000
    S = 2.0 ** rng.integers(10, 34, k)
    g = 2 ** rng.integers(0, 4, k)
    n = g * 2 ** rng.integers(0, 12, k)
    t = best_of(lambda: collective_time("all_reduce", S, n, g, system, fabric), repeat=3)
    print(f"planner batch: {k} (size, n, ranks_per_domain) candidates all_reduce: {t * 1e3:.1f} ms ({k / t / 1e6:.2f} M/s)")


if __name__ == "__main__":
    main()

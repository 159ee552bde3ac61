"""Fabric simulator speed and scale: ring all-reduce and all-to-all over 8,192 GPUs on a 3-tier
fat-tree (time per run, flows, events/s), and the 32,768-GPU runs with peak memory.

    python benchmarks/bench_fabric.py [--quick]
"""

from __future__ import annotations

import resource
import sys
import time
import tracemalloc

from clustertwin import load_catalog
from clustertwin.fabric import make_fabric, simulate_collective


def _run(fab, op: str, routing: str, repeat: int = 1, trace_mem: bool = False):
    best = float("inf")
    peak = None
    for _ in range(repeat):
        if trace_mem:
            tracemalloc.start()
        t0 = time.perf_counter()
        run = simulate_collective(fab, op, 1 << 30, routing=routing)
        dt = time.perf_counter() - t0
        if trace_mem:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        best = min(best, dt)
    return run, best, peak


def main() -> None:
    quick = "--quick" in sys.argv
    cat = load_catalog()
    sysm, so = cat.system("hgx-h100"), cat.fabric("ib-ndr-400g")
    print(f"{'GPUs':>6} {'topology':>9} {'op':>11} {'routing':>8} {'wall s':>8} {'flows':>9} {'events':>6} "
          f"{'events/s':>9} {'sim time':>10} {'eff':>6} {'peak MiB':>9}")
    cases = [(8192, "fat-tree", op, r) for op in ("all_reduce", "all_to_all") for r in ("ecmp", "spray", "adaptive")]
    cases += [(8192, "rail", op, "ecmp") for op in ("all_reduce", "all_to_all")]
    if not quick:
        cases += [(32768, "fat-tree", op, r) for op in ("all_reduce", "all_to_all") for r in ("ecmp", "spray")]
    fabs = {}
    for gpus, kind, op, routing in cases:
        if quick and routing == "adaptive" and op == "all_to_all":
            continue
        key = (gpus, kind)
        if key not in fabs:
            fabs[key] = make_fabric(sysm, so, gpus, topology=kind)
        fab = fabs[key]
        big = gpus > 8192
        run, wall, peak = _run(fab, op, routing, repeat=1, trace_mem=big)
        ev_s = run.events / wall if wall > 0 else float("inf")
        pk = f"{peak / 2**20:9.0f}" if peak is not None else f"{'':>9}"
        print(f"{gpus:>6} {kind:>9} {op:>11} {routing:>8} {wall:8.2f} {run.n_flows:>9,} {run.events:>6} "
              f"{ev_s:9.1f} {run.time_s * 1e3:8.2f}ms {run.efficiency:6.1%} {pk}", flush=True)
        assert fab.topo.shape.tiers == 3
    print(f"process peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()

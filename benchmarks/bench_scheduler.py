"""Scheduler twin speed: one openb policy run on the 6,212-GPU openb cluster (target < 10 s per run;
the paper's Go simulator takes about 10 min per experiment on 2 vCPU), and the LLM-trace replay.

    python benchmarks/bench_scheduler.py [--quick]

Prints seconds per run (best of the repeats) per policy and workload, and the tasks placed.
"""

from __future__ import annotations

import sys
import time

from clustertwin.scheduler import openb as ob


def bench_openb(workloads: list[str], repeats: int) -> None:
    nodes = ob.load_nodes()
    print(f"openb: {len(nodes.names)} nodes, {nodes.total_gpus} GPUs")
    print(f"{'workload':14s} {'policy':11s} {'tasks':>6s} {'failed':>6s} {'alloc@100%':>10s} {'best s':>7s}")
    for wl in workloads:
        pods = ob.load_pods(wl)
        for policy in ob.POLICIES:
            best = float("inf")
            for r in range(repeats):
                t0 = time.perf_counter()
                run = ob.run_openb(nodes, pods, policy, seed=42 + r)
                best = min(best, time.perf_counter() - t0)
            cv = {p["arrived_pct"]: p["allocated_pct"] for p in run.curve}
            print(f"{wl:14s} {policy:11s} {run.num_pods:6d} {run.num_failed:6d} {cv.get(100, float('nan')):10.2f} {best:7.2f}")


def main() -> None:
    quick = "--quick" in sys.argv
    bench_openb(["default"] if quick else ["default", "gpushare100", "multigpu50", "gpuspec33"], 1 if quick else 2)


if __name__ == "__main__":
    main()

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


def bench_replay(num_jobs: int, policies: list[str]) -> None:
    """10,000 LLM jobs on 256 GB200 NVL72 racks with 16 of 18 trays up = 16,384 schedulable GPUs
    (target: < 60 s per policy including placement-aware step times)."""
    from clustertwin.scheduler.inventory import build_inventory
    from clustertwin.scheduler.jobs import generate_llm_trace
    from clustertwin.scheduler.replay import StepModel, replay

    t0 = time.perf_counter()
    inv = build_inventory("gb200-nvl72", 256, unhealthy_per_domain=2, seed=0)
    jobs = generate_llm_trace(num_jobs, cluster_gpus=inv.schedulable_gpus, gpus_per_node=inv.gpus_per_node,
                              gpus_per_domain=inv.max_domain_gpus, seed=0, step_time=StepModel(inv).ideal)
    print(f"\nreplay: {inv.schedulable_gpus:,} schedulable GPUs ({inv.num_domains} NVL72 racks, 2 trays out each), "
          f"{len(jobs):,} jobs ({sum(1 for j in jobs.specs if j.model):,} training), set-up {time.perf_counter() - t0:.1f} s")
    print(f"{'policy':12s} {'wall s':>7s} {'evals':>6s} {'JCT h':>7s} {'p95 h':>7s} {'wait h':>7s} {'util':>6s} "
          f"{'goodput':>7s} {'strand':>7s} {'frag':>6s} {'penalty':>8s}")
    for p in policies:
        r = replay(jobs, inv, p, seed=0)
        m = r.metrics
        print(f"{p:12s} {r.wall_s:7.1f} {r.step_model_evaluations:6d} {m['jct_mean_h']:7.2f} {m['jct_p95_h']:7.1f} "
              f"{m['queue_mean_h']:7.2f} {m['utilisation']:6.1%} {m['goodput']:7.1%} {m['stranded_domain_gpus']:7.0f} "
              f"{m['fgd_frag_ratio']:6.1%} {m['mean_step_penalty']:+8.2%}")


def main() -> None:
    quick = "--quick" in sys.argv
    bench_openb(["default"] if quick else ["default", "gpushare100", "multigpu50", "gpuspec33"], 1 if quick else 2)
    bench_replay(2000 if quick else 10000, ["fifo", "tas"] if quick else
                 ["fifo", "backfill", "priority", "binpack", "tas", "slurm-block", "dra"])


if __name__ == "__main__":
    main()

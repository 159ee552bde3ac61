"""Sweep executors on one machine: a 1,200-row design sweep (chunk_size 1, the analytical planner per
design) with the local process pool (one chunk per call) and with Ray (chunks batched per task:
planner/executors.batch_size; a task's chunks of one machine and model searched in one vectorised pass,
planner/sweep.run_chunks), three runs each, alternating, rows checked identical. With ``--chunk-size N``
both executors get chunks of N jobs, each chunk's jobs of one machine and model searched in one pass.

Ray runs on a Ray cluster of the same CPUs started once on this machine for the benchmark (``ray start
--head`` on free, non-default ports, ``--num-cpus`` = ``--workers``; stopped at the end), as a user points
``--executor ray --address`` at a running cluster. The cluster's start-up is printed separately, and
``--cold-ray`` also times Ray started by the sweep itself (``RayExecutor(num_cpus=...)``, start-up and
shutdown inside the timed run).

    python benchmarks/bench_sweep_executors.py [--workers 2] [--rows 1200] [--runs 3] [--cold-ray] [--chunk-size 1]

Target (issue #15): on a >= 1,000-row sweep Ray is faster than the local executor.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from clustertwin import load_catalog
from clustertwin.planner.executors import LocalExecutor, RayExecutor
from clustertwin.planner.localray import local_cluster
from clustertwin.planner.store import ResultsStore
from clustertwin.planner.sweep import build_sweep, run_sweep


def spec(rows: int, chunk_size: int = 1) -> dict:
    domains = list(range(2, 2 + max(1, rows // 24)))  # 2 systems x 2 fabrics x 2 batches x 3 models = 24 per size
    return {"name": "bench-executors",
            "designs": {"system": ["hgx-h100", "hgx-b200"], "domains": domains, "fabric": ["ib-ndr-400g", "roce-400g"]},
            "models": ["llama3-8b", "llama3-70b", "mixtral-8x7b"], "global_batch": [256, 512], "seq_len": 4096,
            "chunk_size": chunk_size}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rows", type=int, default=1200)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cold-ray", action="store_true", help="also time Ray started (and stopped) by the sweep")
    ap.add_argument("--chunk-size", type=int, default=1,
                    help="jobs per chunk (1: every design its own chunk; larger chunks are searched in one pass "
                         "on either executor)")
    a = ap.parse_args()
    os.environ["RAY_AUTH_MODE"] = "disabled"  # the driver joins our private cluster
    cat = load_catalog()
    sw = build_sweep(spec(a.rows, a.chunk_size), cat)
    print(f"{len(sw.jobs):,} jobs in {len(sw.chunks):,} chunks, {a.workers} workers; "
          f"load average {os.getloadavg()[0]:.1f}")
    tmp = tempfile.mkdtemp(prefix="ct-bench-ray-", dir="/tmp")
    rates: dict[str, list[float]] = {}
    out = {}
    try:
        t0 = time.perf_counter()
        with local_cluster(cpus_per_node=a.workers) as address:
            print(f"Ray head ({a.workers} CPUs) started in {time.perf_counter() - t0:.1f} s (not in the timed runs below)")
            executors = [("local", lambda: LocalExecutor(workers=a.workers)),
                         ("ray (running cluster)", lambda: RayExecutor(address=address))]
            if a.cold_ray:
                executors.append(("ray (started by the sweep)", lambda: RayExecutor(num_cpus=a.workers)))
            for run in range(1, a.runs + 1):
                for name, make in executors:
                    db = Path(tmp) / f"{name[:5]}-{run}.db"
                    t0, c0 = time.perf_counter(), time.process_time()
                    res = run_sweep(sw, ResultsStore(db), make())
                    dt, dc = time.perf_counter() - t0, time.process_time() - c0
                    rates.setdefault(name, []).append(len(res.rows) / dt)
                    out.setdefault(name, res.rows)
                    assert res.rows == out[name]
                    con = sqlite3.connect(db)
                    busy = con.execute("SELECT SUM(elapsed_s) FROM chunks").fetchone()[0] or 0.0
                    con.close()
                    print(f"run {run} {name:>26}: {dt:6.1f} s  {len(res.rows) / dt:7.1f} rows/s  (chunks computing "
                          f"{busy:.1f} s = {busy / (dt * a.workers):.0%} of {a.workers} workers' time; driver CPU "
                          f"{dc:.1f} s; load average {os.getloadavg()[0]:.1f})", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for name, r in rates.items():
        print(f"{name:>26}: median {statistics.median(r):.1f} rows/s over {len(r)} runs ({', '.join(f'{x:.1f}' for x in r)})")
    if "ray (running cluster)" in rates:
        ratio = statistics.median(rates["ray (running cluster)"]) / statistics.median(rates["local"])
        print(f"Ray / local (medians): {ratio:.2f}; Ray faster in "
              f"{sum(r > q for r, q in zip(rates['ray (running cluster)'], rates['local'], strict=True))} of {a.runs} runs")
    print("identical rows:", all(rows == out["local"] for rows in out.values()))


if __name__ == "__main__":
    main()

"""Sweep executors on one machine: a 1,200-row design sweep (chunk_size 1, the analytical planner
per design) with the local process pool and with Ray (a local Ray instance of the same CPUs, chunks
batched per task: planner/executors.batch_size). Prints rows/s and checks the rows are identical.

    python benchmarks/bench_sweep_executors.py [--workers 2] [--rows 1200]

Target (issue #15): on a >= 1,000-row sweep Ray is faster than the local executor.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from clustertwin import load_catalog
from clustertwin.planner.executors import LocalExecutor, RayExecutor
from clustertwin.planner.store import ResultsStore
from clustertwin.planner.sweep import build_sweep, run_sweep


def spec(rows: int) -> dict:
    domains = list(range(2, 2 + max(1, rows // 24)))  # 2 systems x 2 fabrics x 2 batches x 3 models = 24 per size
    return {"name": "bench-executors",
            "designs": {"system": ["hgx-h100", "hgx-b200"], "domains": domains, "fabric": ["ib-ndr-400g", "roce-400g"]},
            "models": ["llama3-8b", "llama3-70b", "mixtral-8x7b"], "global_batch": [256, 512], "seq_len": 4096,
            "chunk_size": 1}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rows", type=int, default=1200)
    a = ap.parse_args()
    cat = load_catalog()
    sw = build_sweep(spec(a.rows), cat)
    print(f"{len(sw.jobs):,} jobs in {len(sw.chunks):,} chunks, {a.workers} workers")
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, ex in (("local", LocalExecutor(workers=a.workers)), ("ray", RayExecutor(num_cpus=a.workers)),
                         ("ray, one chunk per task", RayExecutor(num_cpus=a.workers, batch=1))):
            t0 = time.perf_counter()
            res = run_sweep(sw, ResultsStore(Path(tmp) / f"{name}.db"), ex)
            dt = time.perf_counter() - t0
            out[name] = res.rows
            print(f"{name:>24}: {dt:6.1f} s  {len(res.rows) / dt:7.1f} rows/s", flush=True)
    print("identical rows:", all(rows == out["local"] for rows in out.values()))


if __name__ == "__main__":
    main()

"""Sweep executors on one machine: a 1,200-row design sweep (chunk_size 1, the analytical planner per
design) with the local process pool and with Ray (chunks batched per task: planner/executors.batch_size),
three runs each, alternating, rows checked identical.

Ray runs on a Ray cluster of the same CPUs started once on this machine for the benchmark (``ray start
--head`` on free, non-default ports, ``--num-cpus`` = ``--workers``; stopped at the end), as a user points
``--executor ray --address`` at a running cluster. The cluster's start-up is printed separately, and
``--cold-ray`` also times Ray started by the sweep itself (``RayExecutor(num_cpus=...)``, start-up and
shutdown inside the timed run).

    python benchmarks/bench_sweep_executors.py [--workers 2] [--rows 1200] [--runs 3] [--cold-ray]

Target (issue #15): on a >= 1,000-row sweep Ray is faster than the local executor.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
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


def _free_ports(n: int) -> list[int]:
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def start_head(cpus: int, tmp: str) -> tuple[subprocess.Popen, str, float]:
    """A private one-node Ray cluster on free ports (token auth off: it is ours alone)."""
    ray_bin = str(Path(sys.executable).with_name("ray"))
    gcs, nm, om, al, ag, rt, me = _free_ports(7)
    lo = 31000 + (os.getpid() % 1000) * 20
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
    t0 = time.perf_counter()
    p = subprocess.Popen(
        [ray_bin, "start", "--head", f"--port={gcs}", f"--temp-dir={tmp}", "--node-ip-address=127.0.0.1",
         "--include-dashboard=false", f"--node-manager-port={nm}", f"--object-manager-port={om}",
         f"--dashboard-agent-listen-port={al}", f"--dashboard-agent-grpc-port={ag}", f"--runtime-env-agent-port={rt}",
         f"--metrics-export-port={me}", f"--min-worker-port={lo}", f"--max-worker-port={lo + 19}",
         f"--num-cpus={cpus}", "--disable-usage-stats", "--block"],
        env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while True:
        try:
            socket.create_connection(("127.0.0.1", gcs), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline or p.poll() is not None:
                stop(p)
                raise SystemExit("the Ray head did not start") from None
            time.sleep(0.2)
    return p, f"127.0.0.1:{gcs}", time.perf_counter() - t0


def stop(p: subprocess.Popen) -> None:
    """End the `ray start --block` process group this benchmark started (SIGTERM, then SIGKILL)."""
    try:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=10)
    except ProcessLookupError:
        pass
    try:
        os.killpg(p.pid, signal.SIGKILL)  # anything left in the group
    except ProcessLookupError:
        pass


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rows", type=int, default=1200)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cold-ray", action="store_true", help="also time Ray started (and stopped) by the sweep")
    a = ap.parse_args()
    os.environ["RAY_AUTH_MODE"] = "disabled"  # the driver joins our private cluster
    cat = load_catalog()
    sw = build_sweep(spec(a.rows), cat)
    print(f"{len(sw.jobs):,} jobs in {len(sw.chunks):,} chunks, {a.workers} workers; "
          f"load average {os.getloadavg()[0]:.1f}")
    tmp = tempfile.mkdtemp(prefix="ct-bench-ray-", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    head = None
    rates: dict[str, list[float]] = {}
    out = {}
    try:
        head, address, t_start = start_head(a.workers, tmp)
        print(f"Ray head ({a.workers} CPUs) started in {t_start:.1f} s (not in the timed runs below)")
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
                print(f"run {run} {name:>26}: {dt:6.1f} s  {len(res.rows) / dt:7.1f} rows/s  (driver CPU {dc:.1f} s; "
                      f"load average {os.getloadavg()[0]:.1f})", flush=True)
    finally:
        if head is not None:
            stop(head)
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

"""A private Ray cluster on this machine: a head and optional worker nodes started with ``ray start
--block`` on free, non-default ports, token auth off (the cluster is ours alone), always stopped.

For trying ``clustertwin sweep --executor ray --address ...`` on one machine, for the executor benchmark
(benchmarks/bench_sweep_executors.py) and for the two-node test (tests/planner/test_ray_cluster.py). Needs
the ``ray`` extra (the ``ray`` command next to this Python).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import InputError

# a private cluster: no token shared through ~/.ray (other Ray users of this machine may rotate it)
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}


def free_ports(n: int) -> list[int]:
    """``n`` distinct TCP ports free on 127.0.0.1 right now."""
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _node_args(cpus: int, worker_ports: int) -> list[str]:
    nm, om, al, ag, rt, me = free_ports(6)
    lo = 30000 + (os.getpid() % 1000) * 20 + worker_ports  # worker port range away from Ray's default
    return [f"--node-manager-port={nm}", f"--object-manager-port={om}", f"--dashboard-agent-listen-port={al}",
            f"--dashboard-agent-grpc-port={ag}", f"--runtime-env-agent-port={rt}", f"--metrics-export-port={me}",
            f"--min-worker-port={lo}", f"--max-worker-port={lo + 19}", f"--num-cpus={cpus}",
            "--disable-usage-stats", "--block"]


def stop(p: subprocess.Popen, grace_s: float = 3.0) -> None:
    """End a ``ray start --block`` process group (see ``stop_all``)."""
    stop_all([p], grace_s)


def stop_all(procs: list[subprocess.Popen], grace_s: float = 3.0) -> None:
    """End ``ray start --block`` process groups: SIGTERM to all of them at once, then SIGKILL to each group
    after ``grace_s`` (shared) and for anything left in it. ``ray start --block`` did not exit within 15 s
    of SIGTERM on this machine (measured: both nodes of the two-node test ran into the old 15 s timeout
    one after the other, 30 s of teardown), and the cluster is private and thrown away (its temp folder
    is removed), so a short grace loses nothing."""
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + grace_s
    for p in procs:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def _wait_for_nodes(address: str, nodes: int, timeout_s: float, tmp: str) -> None:
    """Wait until ``nodes`` nodes are alive, asked from a fresh process (the caller may hold state of an
    earlier Ray session); on failure the error carries the tail of each worker node's log in ``tmp``."""
    probe = (f"import ray, time\nray.init(address={address!r}, include_dashboard=False, log_to_driver=False, "
             f"configure_logging=False)\nt = time.monotonic() + {timeout_s}\n"
             f"while len([n for n in ray.nodes() if n['Alive']]) < {nodes} and time.monotonic() < t:\n"
             "    time.sleep(0.5)\nprint(len([n for n in ray.nodes() if n['Alive']]))\nray.shutdown()\n")
    out = subprocess.run([sys.executable, "-c", probe], env={**os.environ, **RAY_ENV}, capture_output=True,
                         text=True, timeout=timeout_s + 60)
    if out.stdout.strip().splitlines()[-1:] != [str(nodes)]:
        logs = " ".join(p.read_text()[-2000:] for p in sorted(Path(tmp).glob("node*.log")))
        raise InputError(f"the local Ray cluster did not reach {nodes} nodes: {out.stderr[-1000:]} {logs}")


@contextmanager
def local_cluster(cpus_per_node: int = 1, nodes: int = 1, *, timeout_s: float = 120) -> Iterator[str]:
    """A head (+ ``nodes - 1`` worker nodes) with ``cpus_per_node`` CPUs each; yields the GCS address
    (``127.0.0.1:PORT``, what ``--address`` takes) and stops every process it started on exit."""
    ray_bin = shutil.which("ray", path=str(Path(sys.executable).parent)) or shutil.which("ray")
    if ray_bin is None:
        raise InputError("Ray is not installed", hint='pip install ".[ray]"')
    tmp = tempfile.mkdtemp(prefix="ct-ray-", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    env = {**os.environ, **RAY_ENV}
    (gcs,) = free_ports(1)
    address = f"127.0.0.1:{gcs}"
    procs: list[subprocess.Popen] = []
    try:
        procs.append(subprocess.Popen(
            [ray_bin, "start", "--head", f"--port={gcs}", f"--temp-dir={tmp}", "--node-ip-address=127.0.0.1",
             "--include-dashboard=false", *_node_args(cpus_per_node, 0)], env=env, start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        deadline = time.monotonic() + timeout_s
        while True:  # the head's GCS accepts connections
            try:
                socket.create_connection(("127.0.0.1", gcs), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or procs[0].poll() is not None:
                    raise InputError("the local Ray head did not start") from None
                time.sleep(0.2)
        for i in range(1, nodes):
            procs.append(subprocess.Popen(
                [ray_bin, "start", f"--address={address}", "--node-ip-address=127.0.0.1",
                 *_node_args(cpus_per_node, 50 * i)], env=env, start_new_session=True,
                stdout=open(os.path.join(tmp, f"node{i + 1}.log"), "w"), stderr=subprocess.STDOUT))
        if nodes > 1:
            _wait_for_nodes(address, nodes, timeout_s, tmp)
        yield address
    finally:
        stop_all(list(reversed(procs)))
        shutil.rmtree(tmp, ignore_errors=True)

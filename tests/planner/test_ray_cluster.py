"""A real two-node Ray cluster on this machine (``ray start --head``, then ``ray start --address``),
small resources, non-default free ports, always stopped: a sweep across both nodes gives the same
rows as the local executor (issue #15)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clustertwin.planner.executors import LocalExecutor, batch_size
from clustertwin.planner.store import ResultsStore
from clustertwin.planner.sweep import build_sweep, run_sweep

ray = pytest.importorskip("ray")


def _free_ports(n: int) -> list[int]:
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def _node_args(ports: list[int]) -> list[str]:
    nm, om, al, ag, re, me, lo = ports
    return [f"--node-manager-port={nm}", f"--object-manager-port={om}",
            f"--dashboard-agent-listen-port={al}", f"--dashboard-agent-grpc-port={ag}",
            f"--runtime-env-agent-port={re}", f"--metrics-export-port={me}", f"--min-worker-port={lo}",
            f"--max-worker-port={lo + 40}", "--num-cpus=1", "--disable-usage-stats", "--block"]


def _stop(p: subprocess.Popen) -> None:
    """End what this test started: the `ray start --block` process group (it stops its own Ray
    processes on SIGTERM; SIGKILL to the group after 10 s)."""
    if p.poll() is not None:
        return
    try:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=10)
    except ProcessLookupError:
        pass


@pytest.fixture
def two_node_cluster(monkeypatch):
    import shutil
    import tempfile

    tmp = tempfile.mkdtemp(prefix="ct-ray-", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    ray_bin = str(Path(sys.executable).with_name("ray"))
    gcs, *rest = _free_ports(1 + 16)
    base = 30000 + (os.getpid() % 2000) * 10  # worker port ranges of the two nodes, away from the default
    # a private cluster: no token shared through ~/.ray (other Ray users of this machine may rotate it)
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
    address = f"127.0.0.1:{gcs}"
    procs: list[subprocess.Popen] = []
    try:
        procs.append(subprocess.Popen(
            [ray_bin, "start", "--head", f"--port={gcs}", f"--temp-dir={tmp}", "--node-ip-address=127.0.0.1",
             "--include-dashboard=false", *_node_args([*rest[:6], base])], env=env, start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        deadline = time.monotonic() + 90
        while True:  # the head's GCS accepts connections
            try:
                socket.create_connection(("127.0.0.1", gcs), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or procs[0].poll() is not None:
                    pytest.fail("the Ray head did not start")
                time.sleep(0.5)
        procs.append(subprocess.Popen(
            [ray_bin, "start", f"--address={address}", "--node-ip-address=127.0.0.1", *_node_args([*rest[6:12], base + 50])],
            env=env, start_new_session=True, stdout=open(os.path.join(tmp, "node2.log"), "w"), stderr=subprocess.STDOUT))
        # wait for both nodes from a fresh process (this pytest process may hold state of an earlier Ray session)
        probe = (f"import ray, time\nray.init(address={address!r}, include_dashboard=False, log_to_driver=False, "
                 "configure_logging=False)\nt = time.monotonic() + 60\n"
                 "while len([n for n in ray.nodes() if n['Alive']]) < 2 and time.monotonic() < t:\n    time.sleep(0.5)\n"
                 "print(len([n for n in ray.nodes() if n['Alive']]))\nray.shutdown()\n")
        out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
        if out.stdout.strip().splitlines()[-1:] != ["2"]:
            log = Path(tmp, "node2.log").read_text()[-2000:]
            pytest.fail(f"the second Ray node did not join: {out.stderr[-1000:]} {log}")
        yield address
    finally:
        for p in reversed(procs):
            _stop(p)
        for p in procs:  # anything left in the groups this test started
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(tmp, ignore_errors=True)


_DRIVER = r"""
import json, sys
from clustertwin import load_catalog
from clustertwin.planner.executors import RayExecutor
from clustertwin.planner.store import ResultsStore
from clustertwin.planner.sweep import build_sweep, run_sweep
sw = build_sweep(json.loads(sys.argv[2]), load_catalog())
out = run_sweep(sw, ResultsStore(sys.argv[3]), RayExecutor(address=sys.argv[1], batch=1))
print(json.dumps(out.rows, sort_keys=True, default=str))
"""


def test_sweep_on_a_two_node_ray_cluster_equals_local(catalog, tmp_path, two_node_cluster):
    import json

    spec = {"name": "two-nodes", "designs": {"system": "hgx-h100", "domains": [2, 4], "fabric": ["ib-ndr-400g", "roce-400g"]},
            "models": "llama3-8b", "global_batch": 64, "seq_len": 4096, "chunk_size": 1}
    sw = build_sweep(spec, catalog)
    local = run_sweep(sw, ResultsStore(tmp_path / "local.db"), LocalExecutor(workers=1))
    # the Ray driver in its own process: a clean Ray client state whatever ran before in this one
    p = subprocess.run([sys.executable, "-c", _DRIVER, two_node_cluster, json.dumps(spec), str(tmp_path / "ray.db")],
                       capture_output=True, text=True, timeout=300, env={**os.environ, "RAY_AUTH_MODE": "disabled"})
    assert p.returncode == 0, p.stderr[-3000:]
    remote = json.loads(p.stdout.strip().splitlines()[-1])
    assert remote == json.loads(json.dumps(local.rows, sort_keys=True, default=str)) and len(remote) == 4
    assert all(r["feasible"] and r["tokens_per_s"] > 0 for r in remote)


def test_batch_size():
    assert batch_size(1728, 2) == 54 and batch_size(6, 2) == 1 and batch_size(0, 4) == 1

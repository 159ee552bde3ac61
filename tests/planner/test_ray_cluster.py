"""A real two-node Ray cluster on this machine (``ray start --head``, then ``ray start --address``),
small resources, non-default free ports, always stopped: a sweep across both nodes gives the same
rows as the local executor (issue #15)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from clustertwin.planner.executors import LocalExecutor, batch_size
from clustertwin.planner.store import ResultsStore
from clustertwin.planner.sweep import build_sweep, run_sweep

ray = pytest.importorskip("ray")


@pytest.fixture
def two_node_cluster(monkeypatch):
    from clustertwin.planner.localray import local_cluster

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # the driver joins our private cluster
    with local_cluster(cpus_per_node=1, nodes=2) as address:
        yield address


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

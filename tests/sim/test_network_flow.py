"""`estimate --network flow`: the step's collectives get the scale-out contention penalty from the
flow-level fabric simulator; on an uncontended fabric nothing changes, contention only adds time."""

from __future__ import annotations

import subprocess
import sys

import pytest

from clustertwin import api

# FP32 gradient reduce (the Megatron-LM default, as on the megatron-lm-2022 and pytorch-fsdp stacks): the DP
# traffic that crosses the leaf uplinks is what these tests are about
KW = dict(model="llama3-70b", system="hgx-h100", gpus=512, tp=8, pp=4, global_batch=512, seq_len=8192,
          grad_reduce_bytes=4)


@pytest.fixture(scope="module")
def scenario():
    return api.build_scenario(**KW)


def test_analytical_network_is_the_default(scenario):
    a = api.simulate(scenario)
    b = api.simulate(scenario, network=api.network_model("analytical"))
    assert a.step_time_s == b.step_time_s


def test_rail_optimised_fabric_has_no_dp_contention(scenario):
    """DP rings of an HGX job stay on their rail: the flow network agrees with the analytical one."""
    base = api.simulate(scenario)
    flow = api.simulate(scenario, network=api.network_model("flow", routing="ecmp"))
    assert flow.step_time_s == pytest.approx(base.step_time_s, rel=1e-9)


@pytest.mark.parametrize("engine", ["analytical", "event"])
def test_oversubscribed_fat_tree_slows_the_step(scenario, engine):
    """Each server's 8 DP rings leave its leaf together: with spraying they need 8 uplinks' worth of
    bandwidth, which a radix-64 leaf at full bisection has and at 16:1 (about 4 uplinks) does not."""
    base = api.simulate(scenario, engine=engine)
    net1 = api.network_model("flow", routing="spray", topology="fat-tree", oversubscription=1)
    net16 = api.network_model("flow", routing="spray", topology="fat-tree", oversubscription=16)
    full = api.simulate(scenario, engine=engine, network=net1)
    over = api.simulate(scenario, engine=engine, network=net16)
    assert full.step_time_s == pytest.approx(base.step_time_s, rel=1e-9)
    assert over.step_time_s > full.step_time_s * 1.02
    assert over.breakdown["dp_comm"] > full.breakdown["dp_comm"]


def test_ecmp_never_beats_spraying(scenario):
    spray = api.simulate(scenario, network=api.network_model("flow", routing="spray", topology="fat-tree"))
    for seed in range(3):
        ecmp = api.simulate(scenario, network=api.network_model("flow", routing="ecmp", topology="fat-tree", seed=seed))
        assert ecmp.step_time_s >= spray.step_time_s - 1e-9


def test_bad_network_inputs_exit_2():
    base = [sys.executable, "-m", "clustertwin", "estimate", "--model", "llama3-8b", "--system", "hgx-h100",
            "--gpus", "16", "--global-batch", "16"]
    for extra, needle in ((["--network", "flw"], "did you mean 'flow'"),
                          (["--network", "flow", "--routing", "ecmpp"], "did you mean 'ecmp'"),
                          (["--network", "flow", "--oversubscription", "0.5"], "oversubscription")):
        r = subprocess.run(base + extra, capture_output=True, text=True)
        assert r.returncode == 2, r.stderr
        assert needle in r.stderr and "Traceback" not in r.stderr

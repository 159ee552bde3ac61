"""`--network flow`: the analytical NCCL-style time plus what scale-out contention adds."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from clustertwin.collectives import collective_time
from clustertwin.collectives.flow import contention_penalty, flow_collective_times
from clustertwin.errors import InputError

SIZES = np.array([2.0**20, 2.0**26, 2.0**30])


@pytest.fixture(scope="module")
def h100(catalog):
    return catalog.system("hgx-h100"), catalog.fabric("ib-ndr-400g")


def test_uncontended_network_agrees_with_analytical(h100):
    system, fabric = h100
    base = collective_time("all_reduce", SIZES, 256, 8, system, fabric)
    flow = flow_collective_times("all_reduce", SIZES, 256, 8, system, fabric, routing="spray")
    np.testing.assert_allclose(flow, base, rtol=1e-9)


@pytest.mark.parametrize("routing", ["ecmp", "adaptive", "spray"])
@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "all_to_all"])
def test_contention_never_helps(h100, op, routing):
    system, fabric = h100
    base = collective_time(op, SIZES, 128, 8, system, fabric)
    flow = flow_collective_times(op, SIZES, 128, 8, system, fabric, routing=routing, topology="fat-tree",
                                 oversubscription=2)
    assert np.all(flow >= base - 1e-12)


def test_oversubscription_costs_more(h100):
    """All-to-all crosses the leaf uplinks: with spraying (no hash luck involved) the penalty grows with
    the leaf oversubscription and is nil at full bisection; ECMP's hash collisions cost more still."""
    system, fabric = h100
    spray = [float(contention_penalty("all_to_all", 2.0**30, 256, 8, system, fabric, routing="spray",
                                      topology="fat-tree", oversubscription=o)[0]) for o in (1, 2, 4)]
    assert spray[0] == pytest.approx(0.0, abs=1e-9)
    assert 0 < spray[1] < spray[2]
    base = float(collective_time("all_to_all", 2.0**30, 256, 8, system, fabric))
    assert spray[2] > 0.5 * base
    ecmp = float(contention_penalty("all_to_all", 2.0**30, 256, 8, system, fabric, routing="ecmp",
                                    topology="fat-tree", oversubscription=1)[0])
    assert ecmp > spray[0]


def test_penalty_is_affine_in_size(h100):
    system, fabric = h100
    sizes = np.array([2.0**28, 2.0**29, 2.0**30])
    p = contention_penalty("all_gather", sizes, 128, 8, system, fabric, routing="ecmp", topology="fat-tree",
                           oversubscription=3)
    assert p[2] - p[1] == pytest.approx(2 * (p[1] - p[0]), rel=1e-6)


def test_one_domain_has_no_scale_out_part(h100):
    system, fabric = h100
    assert np.all(contention_penalty("all_reduce", SIZES, 8, 8, system, fabric) == 0)


def test_unsupported_op_is_input_error(h100):
    system, fabric = h100
    with pytest.raises(InputError, match="does not model broadcast"):
        flow_collective_times("broadcast", SIZES, 64, 8, system, fabric)


def test_cli_network_flow_json():
    args = [sys.executable, "-m", "clustertwin", "collective", "all_reduce", "--system", "hgx-h100", "--domains", "32",
            "--sizes", "1G", "--json"]
    a = json.loads(subprocess.run(args, capture_output=True, text=True, check=True).stdout)
    f = json.loads(subprocess.run(args + ["--network", "flow", "--topology", "fat-tree", "--oversubscription", "4"],
                                  capture_output=True, text=True, check=True).stdout)
    assert f["rows"][0]["time_us"] > a["rows"][0]["time_us"]
    bad = subprocess.run(args + ["--network", "flw"], capture_output=True, text=True)
    assert bad.returncode == 2 and "did you mean 'flow'" in bad.stderr

"""Closed forms, nccl-tests semantics, vectorisation and input errors of the collective core."""

from __future__ import annotations

import numpy as np
import pytest

from clustertwin.collectives import busbw_factor, collective_time, estimate_collective, resolve_params, sweep
from clustertwin.collectives import model as M
from clustertwin.errors import InputError, UnknownNameError


@pytest.fixture(scope="module")
def a100(catalog):
    s = catalog.system("dgx-a100")
    return s, catalog.fabric(s.default_scaleout)


@pytest.fixture(scope="module")
def h100(catalog):
    s = catalog.system("hgx-h100")
    return s, catalog.fabric(s.default_scaleout)


def test_ring_allreduce_moves_2_n_minus_1_over_n_bytes_per_rank(a100):
    system, fabric = a100
    P = resolve_params(system, fabric)
    n = np.array([2.0, 4.0, 8.0])
    S = 1e9
    t1 = M.ring(P, "ar", S, n, n)[2]  # Simple protocol
    t2 = M.ring(P, "ar", 2 * S, n, n)[2]
    B = system.scaleup_bw_per_device * P.scaleup_fraction
    np.testing.assert_allclose(t2 - t1, 2 * (n - 1) / n * S / B, rtol=1e-9)


def test_ring_allgather_moves_n_minus_1_over_n(a100):
    system, fabric = a100
    P = resolve_params(system, fabric)
    t1 = M.ring(P, "ag", 1e9, 8.0, 8.0)[2]
    t2 = M.ring(P, "ag", 3e9, 8.0, 8.0)[2]
    B = system.scaleup_bw_per_device * P.scaleup_fraction
    assert t2 - t1 == pytest.approx(7 / 8 * 2e9 / B, rel=1e-9)


def test_multinode_ring_is_bounded_by_the_nics_the_group_drives(a100):
    system, fabric = a100
    P = resolve_params(system, fabric)
    # 3 nodes x 8 ranks: bus bandwidth = 8 ranks x 25 GB/s x fraction < NVLink
    t1 = M.ring(P, "ar", 1e9, 24.0, 8.0)[2]
    t2 = M.ring(P, "ar", 2e9, 24.0, 8.0)[2]
    B = 8 * system.nics_per_host * fabric.port_bw / system.devices_per_host * P.scaleout_fraction
    assert t2 - t1 == pytest.approx(2 * 23 / 24 * 1e9 / B, rel=1e-9)
    # one rank per node (a DP group with TP=8 inside) gets one NIC only
    t1 = M.ring(P, "ar", 1e9, 3.0, 1.0)[2]
    t2 = M.ring(P, "ar", 2e9, 3.0, 1.0)[2]
    assert t2 - t1 == pytest.approx(2 * 2 / 3 * 1e9 / (fabric.port_bw * P.scaleout_fraction), rel=1e-9)


@pytest.mark.parametrize(
    "op,n,factor",
    [
        ("all_reduce", 8, 2 * 7 / 8),
        ("all_gather", 8, 7 / 8),
        ("reduce_scatter", 4, 3 / 4),
        ("all_to_all", 16, 15 / 16),
        ("broadcast", 8, 1.0),
        ("reduce", 8, 1.0),
        ("send_recv", 2, 1.0),
    ],
)
def test_busbw_is_algbw_times_nccl_tests_factor(h100, op, n, factor):
    system, fabric = h100
    assert busbw_factor(op, n) == pytest.approx(factor)
    r = estimate_collective(op, 256 * 2**20, n, min(n, 8), system, fabric)
    assert r.algbw == pytest.approx(r.size_bytes / r.time_s)
    assert r.busbw == pytest.approx(r.algbw * factor)


def test_array_inputs_broadcast_and_scalars_give_float(h100):
    system, fabric = h100
    sizes = 2.0 ** np.arange(3, 34)
    n = np.array([[8], [64], [16384]])
    t = collective_time("all_reduce", sizes, n, 8, system, fabric)
    assert t.shape == (3, sizes.size)
    assert np.all(np.isfinite(t)) and np.all(t > 0)
    one = collective_time("all_reduce", 1e6, 8, 8, system, fabric)
    assert isinstance(one, float)
    assert one == pytest.approx(collective_time("all_reduce", np.array([1e6]), 8, 8, system, fabric)[0])


def test_group_of_one_rank_costs_nothing(h100):
    system, fabric = h100
    assert collective_time("all_reduce", 1e9, 1, 1, system, fabric) == 0.0
    t = collective_time("all_to_all", 1e6, np.array([0, 1, 2]), np.array([0, 1, 2]), system, fabric)
    assert t[0] == 0.0 and t[1] == 0.0 and t[2] > 0
    with pytest.raises(InputError):
        collective_time("all_reduce", 1e6, -2, 1, system, fabric)


def test_slower_fabric_path_costs_latency_not_bandwidth(catalog):
    system = catalog.system("hgx-h100")
    ib, tcp = catalog.fabric("ib-ndr-400g"), catalog.fabric("eth-tcp-100g")
    import dataclasses

    tcp_fast = dataclasses.replace(tcp, port_bw=ib.port_bw, protocol_efficiency=ib.protocol_efficiency)
    small_ib = collective_time("all_reduce", 8, 64, 8, system, ib)
    small_tcp = collective_time("all_reduce", 8, 64, 8, system, tcp_fast)
    assert small_tcp > small_ib + 10e-6  # TCP end-host latency on every network step


def test_every_collective_and_algorithm_runs(h100, a100):
    from clustertwin.collectives import ALGORITHMS

    system, fabric = h100
    for op, algos in ALGORITHMS.items():
        for algo in algos:
            n, g = (32, 8) if algo in ("collnet", "pxn", "hier") else (8, 8)
            if algo == "pat":
                n, g = 4, 1
            t = collective_time(op, 64 * 2**20, n, g, system, fabric, algo=algo)
            assert np.isfinite(t) and t > 0, (op, algo)


def test_unknown_collective_suggests_close_names(h100):
    system, fabric = h100
    with pytest.raises(UnknownNameError) as exc:
        collective_time("allreduc", 1e6, 8, 8, system, fabric)
    assert "all_reduce" in exc.value.suggestions


def test_aliases_are_accepted(h100):
    system, fabric = h100
    a = collective_time("allreduce", 1e6, 8, 8, system, fabric)
    b = collective_time("all_reduce", 1e6, 8, 8, system, fabric)
    assert a == b
    assert collective_time("alltoall", 1e6, 8, 8, system, fabric) > 0


def test_bad_algorithm_and_unsupported_hardware(a100):
    system, fabric = a100
    with pytest.raises(UnknownNameError):
        collective_time("all_reduce", 1e6, 8, 8, system, fabric, algo="rign")
    with pytest.raises(InputError, match="NVLS"):
        collective_time("all_reduce", 1e6, 8, 8, system, fabric, algo="nvls")
    with pytest.raises(InputError):
        collective_time("all_reduce", -1.0, 8, 8, system, fabric)
    with pytest.raises(InputError, match="PAT"):
        sweep("all_gather", [1e6], 16, 8, system, fabric, algo="pat")


def test_result_reports_algorithm_protocol_and_per_algorithm_times(h100):
    system, fabric = h100
    r = estimate_collective("all_reduce", 4 * 2**30, 8, 8, system, fabric)
    assert r.algorithm == "nvls" and r.protocol == "Simple"
    assert set(r.per_algorithm_s) == {"ring", "tree", "nvls"}
    assert r.time_s == min(r.per_algorithm_s.values())
    d = r.to_dict()
    assert d["busbw_GBps"] == pytest.approx(r.busbw / 1e9)

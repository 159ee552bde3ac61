"""Traffic builders, multi-tenancy, the integration hook, topology arithmetic."""

from __future__ import annotations

import numpy as np
import pytest

from clustertwin.errors import InputError
from clustertwin.fabric import (
    Faults,
    JobSpec,
    collective_phases,
    flow_collective_time,
    make_fabric,
    simulate_collective,
    simulate_jobs,
    step_phases,
)


def test_link_ids_are_distinct_and_named(small):
    for kind in ("fat-tree", "rail", "dual-plane"):
        fab = small(128, radix=8, per_host=4, nics=4, tiers=3, topology=kind)
        t = fab.topo
        s = t.shape
        ids = []
        for p in range(s.planes):
            e = np.arange(s.n_endpoints)
            ids += [t.nic_up(e, p), t.nic_down(e, p)]
            L, J = np.arange(s.n_leaves)[:, None], np.arange(s.u1)[None, :]
            ids += [t.leaf_up(L, J, p).ravel(), t.leaf_down(L, J, p).ravel()]
            P, J3, T = np.arange(s.n_pods)[:, None, None], np.arange(s.u1)[None, :, None], np.arange(s.u2)[None, None, :]
            ids += [t.spine_up(P, J3, T, p).ravel(), t.spine_down(P, J3, T, p).ravel()]
        ids = np.concatenate(ids)
        assert np.array_equal(np.sort(ids), np.arange(t.n_links))
        assert len({t.link_name(i) for i in range(t.n_links)}) == t.n_links


def test_switch_counts_come_from_cluster_sizing(cat):
    fab = make_fabric(cat.system("hgx-h100"), cat.fabric("ib-ndr-400g"), 1024 * 8, topology="fat-tree")
    sc = fab.topo.switch_counts
    assert sc["source"].startswith("clustertwin.cluster.fattree")
    # DGX SuperPOD B200 RA, 32 SU = 8192 GPUs: 256 leaf / 256 spine / 128 core (hardware README C.3)
    assert (sc["leaf"], sc["spine"], sc["core"]) == (256, 256, 128)


def test_collective_phase_volumes():
    S, n, g = 1 << 30, 64, 8
    D = n // g
    ar = collective_phases("all_reduce", S, n, g)
    assert ar[0].repeat == 2 * (D - 1) and np.allclose(ar[0].size, S / n)
    # per rank on the fabric: 2(D-1)/D x S/g (hierarchical ring)
    assert np.isclose(ar[0].size[0] * ar[0].repeat, 2 * (D - 1) / D * S / g)
    a2a = collective_phases("all_to_all", S, n, g)
    assert len(a2a) == D - 1
    sent = sum(p.size[0] * p.repeat for p in a2a)
    assert np.isclose(sent, S * (n - g) / n)  # everything not for the own domain
    many = collective_phases("all_to_all", S, 8 * 200, 8, max_phases=32)
    assert len(many) <= 32 and np.isclose(sum(p.repeat for p in many), 199)
    assert collective_phases("all_gather", S, 8, 8) == []  # one domain: nothing on the fabric


def test_all_to_all_sampling_is_close_to_exact(small):
    fab = small(512, radix=16, per_domain=8, per_host=8, nics=8, topology="rail")
    exact = simulate_collective(fab, "all_to_all", 1 << 28, routing="ecmp", max_phases=1000)
    sampled = simulate_collective(fab, "all_to_all", 1 << 28, routing="ecmp", max_phases=16)
    assert abs(sampled.time_s / exact.time_s - 1) < 0.10


def test_step_phases_layout():
    ph = step_phases(tp=8, pp=2, dp=4, ranks_per_domain=8, grad_bytes=8e9, act_bytes=1e6, microbatches=4)
    names = [p.name for p in ph]
    assert names == ["pp forward", "pp backward", "dp all-reduce step"]
    fwd = ph[0]
    assert np.all(fwd.dst - fwd.src == 8)  # next stage = next TP group
    dpr = ph[2]
    assert dpr.repeat == 6 and np.allclose(dpr.size, 8e9 / 16 / 4)


def test_jobs_spread_suffers_more_than_packed(small):
    fab = small(256, radix=16, per_domain=8, per_host=8, nics=8, topology="fat-tree", oversubscription=3.0)
    jobs = [JobSpec(name="a", gpus=64, placement="packed", traffic="all_to_all", size_bytes=2**26),
            JobSpec(name="b", gpus=64, placement="packed", traffic="all_to_all", size_bytes=2**26)]
    packed = simulate_jobs(fab, jobs)
    spread = simulate_jobs(fab, [JobSpec(name=j.name, gpus=64, placement="spread", traffic=j.traffic,
                                         size_bytes=j.size_bytes) for j in jobs])
    assert all(r.slowdown >= 1 - 1e-9 for r in packed + spread)
    assert max(r.slowdown for r in spread) >= max(r.slowdown for r in packed)
    assert packed[0].domains != spread[0].domains


def test_flow_collective_time_hook(cat):
    sysm, so = cat.system("hgx-h100"), cat.fabric("ib-ndr-400g")
    t1 = flow_collective_time("all_reduce", 1 << 28, 256, 8, sysm, so)
    t2 = flow_collective_time("all_reduce", 1 << 30, 256, 8, sysm, so)
    assert 0 < t1 < t2
    # line-rate floor: 2(D-1)/D x S/g over one NIC at the protocol efficiency
    D = 32
    floor = 2 * (D - 1) / D * (1 << 30) / 8 / (so.port_bw * so.protocol_efficiency)
    assert t2 >= floor * (1 - 1e-9)
    t_over = flow_collective_time("all_to_all", 1 << 28, 256, 8, sysm, so, oversubscription=3.0, topology="fat-tree")
    t_full = flow_collective_time("all_to_all", 1 << 28, 256, 8, sysm, so, topology="fat-tree")
    assert t_over > t_full
    assert flow_collective_time("all_reduce", 1 << 20, 8, 8, sysm, so) == 0.0  # one domain


def test_stragglers_and_slow_nic(small):
    fab = small(64, radix=8, per_domain=8, per_host=8, nics=8, topology="rail")
    base = simulate_collective(fab, "all_reduce", 1 << 26, routing="spray", pxn=False)
    late = simulate_collective(fab, "all_reduce", 1 << 26, routing="spray", pxn=False, stragglers={0: 1e-3})
    assert np.isclose(late.time_s - base.time_s, 1e-3, rtol=1e-6)
    slow = small(64, radix=8, per_domain=8, per_host=8, nics=8, topology="rail", faults=Faults(slow_nics={0: 0.5}))
    s = simulate_collective(slow, "all_reduce", 1 << 26, routing="spray")
    assert np.isclose(s.time_s / base.time_s, 2.0, rtol=1e-6)  # the ring runs at its slowest NIC


def test_bad_inputs(small):
    fab = small(32, radix=8)
    with pytest.raises(InputError, match="do not fill whole domains"):
        collective_phases("all_reduce", 1e6, 30, 8)
    with pytest.raises(InputError, match="routing"):
        simulate_collective(fab, "all_reduce", 1e6, routing="sprya")
    with pytest.raises(InputError, match="disconnects endpoint"):
        broken = small(32, radix=8, faults=Faults(switches=("leaf:2",)))
        simulate_collective(broken, "all_reduce", 1e6, ranks_per_domain=1)

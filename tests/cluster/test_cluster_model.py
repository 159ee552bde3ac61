from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustertwin.cluster import build_cluster, graph_bisection, torus_dims
from clustertwin.errors import InputError, UnknownNameError

SMALL = [
    dict(system="hgx-h100", domains=6),
    dict(system="dgx-a100", domains=10, fabric="ib-hdr-200g", topology="fat-tree", oversubscription=3),
    dict(system="hgx-h100", domains=20, fabric="ib-hdr-200g", topology="dual-plane"),
    dict(system="hgx-h100", domains=80, fabric="ib-hdr-200g", tiers=3),
    dict(system="gb200-nvl72", domains=2),
    dict(system="cloudmatrix-384", domains=2),
    dict(system="mi300x-8", domains=3),
    dict(system="pcie-8gpu", domains=2),
    dict(system="kunlun-p800-32", domains=2),
    dict(system="hgx-h100", domains=4, domain_size=4),
]


@pytest.fixture(scope="module", params=SMALL, ids=lambda kw: f"{kw['system']}x{kw['domains']}")
def small(request, catalog):
    return build_cluster(catalog=catalog, **request.param)


def test_addressing_vectorised_round_trip(small):
    r = np.arange(small.num_devices)
    assert np.array_equal(small.rank(small.domain_of(r), small.local_of(r)), r)
    hosts = small.host_of(r)
    assert hosts.max() == small.num_hosts - 1
    assert np.all(np.bincount(hosts) == small.devices_per_host)
    nics = small.nic_of(r)
    assert nics.max() < small.num_nics and np.all(small.rail_of(r) < small.nics_per_host)
    assert np.array_equal(nics // small.nics_per_host, hosts)  # a rank's NIC is in its own host


def test_routes_are_paths_of_the_graph_and_symmetric(small):
    g = small.graph()
    rng = np.random.default_rng(7)
    for a, b in rng.integers(0, small.num_devices, size=(150, 2)):
        r, back = small.route(a, b), small.route(b, a)
        assert back.path == tuple(reversed(r.path))
        assert (back.switch_hops, back.bandwidth, back.latency_s) == (r.switch_hops, r.bandwidth, r.latency_s)
        for u, v in zip(r.path, r.path[1:], strict=False):
            assert g.has_edge(u, v), (a, b, u, v)
        same = small.domain_of(a) == small.domain_of(b)
        assert r.layer == ("self" if a == b else "scale-up" if same else "scale-out")


def test_ports_per_switch_never_exceed_radix(small):
    t = small.topology_arrays()
    deg = t.degree_ports()
    so = small.scaleout
    for kind in ("leaf", "spine", "core"):
        if t.count(kind):
            assert deg[t.node(kind, np.arange(t.count(kind)))].max() <= so.radix
    assert t.count("leaf") == so.leaf and t.count("spine") == so.spine and t.count("core") == so.core


def test_bisection_closed_form_matches_graph(small):
    inside = graph_bisection(small, within_domain=True) / (small.devices_per_domain / 2)
    assert inside == pytest.approx(small.scaleup_bisection_per_device(), rel=1e-9)
    if small.domains >= 2 and small.domains % 2 == 0:
        s = small.scaleout
        per_leaf = s.leaf_down * s.planes * s.rails
        if s.tiers == 1 or s.endpoints % per_leaf == 0:  # closed form is exact for full leaves
            across = graph_bisection(small) / (small.num_devices / 2)
            assert across == pytest.approx(small.scaleout_bisection_per_device(), rel=1e-9)


def test_oversubscribed_bisection_graph_check(catalog):
    # ~2:1 at the leaf: radix 40 -> floor(40*2/3) = 26 down : 14 up; 13 hosts x 8 NICs = 4 full leaves
    c = build_cluster("dgx-a100", 13, "ib-hdr-200g", topology="fat-tree", oversubscription=2, catalog=catalog)
    s = c.scaleout
    assert (s.leaf_down, s.leaf_up, s.leaf) == (26, 14, 4)
    assert s.oversubscription == pytest.approx(26 / 14)
    closed = c.scaleout_bisection_per_device()
    assert closed == pytest.approx(c.port_bw * 14 / 26)
    c2 = build_cluster("dgx-a100", 26, "ib-hdr-200g", topology="fat-tree", oversubscription=2, catalog=catalog)
    assert graph_bisection(c2) / (c2.num_devices / 2) == pytest.approx(c2.scaleout_bisection_per_device())


@pytest.mark.parametrize("topo,size", [("torus-2d", 16), ("torus-3d", 64), ("torus-2d", 12)])
def test_torus_scaleup(catalog, topo, size):
    base = catalog.system("hgx-h100")
    sys_ = dataclasses.replace(base, scaleup_topology=topo, devices_per_domain=size, devices_per_host=4,
                               supported_domain_sizes=())
    c = build_cluster(sys_, 2, catalog=catalog)
    assert c.num_devices == 2 * size
    inside = graph_bisection(c, within_domain=True) / (size / 2)
    assert inside == pytest.approx(c.scaleup_bisection_per_device())
    g = c.graph()
    longest = 0
    for a in range(size):
        for b in range(size):
            r = c.route(a, b)
            longest = max(longest, r.links)
            assert c.route(b, a).path == tuple(reversed(r.path))
            for u, v in zip(r.path, r.path[1:], strict=False):
                assert g.has_edge(u, v)
    assert longest == c.summary()["scaleup"]["max_link_hops"]


def test_torus_dims():
    assert torus_dims(64, 3) == (4, 4, 4)
    assert torus_dims(16, 2) == (4, 4)
    assert np.prod(torus_dims(72, 2)) == 72


@settings(max_examples=40, deadline=None)
@given(
    system=st.sampled_from(["hgx-h100", "gb200-nvl72", "cloudmatrix-384", "mi300x-8", "kunlun-p800-64"]),
    domains=st.integers(1, 300),
    topology=st.sampled_from(["fat-tree", "rail", "dual-plane"]),
    data=st.data(),
)
def test_property_addressing_and_route_symmetry(catalog, system, domains, topology, data):
    c = build_cluster(system, domains, topology=topology, catalog=catalog)
    n = c.num_devices
    a = data.draw(st.integers(0, n - 1))
    b = data.draw(st.integers(0, n - 1))
    assert int(c.rank(c.domain_of(a), c.local_of(a))) == a
    assert int(c.host_of(a)) == a // c.devices_per_host
    r, back = c.route(a, b), c.route(b, a)
    assert back.path == tuple(reversed(r.path))
    assert back.switch_hops == r.switch_hops and back.bandwidth == r.bandwidth
    if r.layer == "scale-out":
        assert r.switch_hops <= c.scaleout.max_switch_hops


def test_bad_inputs(catalog):
    with pytest.raises(UnknownNameError):
        build_cluster("hgx-h10", 2, catalog=catalog)
    with pytest.raises(UnknownNameError):
        build_cluster("hgx-h100", 2, "ib-ndr-40g", catalog=catalog)
    with pytest.raises(InputError, match=">= 1"):
        build_cluster("hgx-h100", 0, catalog=catalog)
    with pytest.raises(InputError, match="oversubscription"):
        build_cluster("hgx-h100", 2, oversubscription=0.9, catalog=catalog)
    with pytest.raises(InputError, match="supported: 4, 8, 12, 24, 36, 72"):
        build_cluster("gb200-nvl72", 2, domain_size=10, catalog=catalog)
    with pytest.raises(InputError, match="limit is 65536"):  # 64-port 3-tier fat tree: k^3/4
        build_cluster("hgx-h100", 8193, catalog=catalog)
    with pytest.raises(InputError, match="limit is 2048"):
        build_cluster("hgx-h100", 257, tiers=2, catalog=catalog)
    with pytest.raises(InputError, match="outside"):
        build_cluster("hgx-h100", 2, catalog=catalog).route(0, 16)

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustertwin.cluster.fattree import max_endpoints, size_fat_tree
from clustertwin.errors import InputError

# NVIDIA DGX SuperPOD B200 reference architecture, compute fabric table (docs.nvidia.com, via
# shared/hardware/hardware.yaml DGX_SuperPOD_B200_table):
# [SU, nodes, gpus, leaf, spine, core, cables node-leaf, leaf-spine, spine-core]; 64-port QM9700, 8 rails.
SUPERPOD_B200 = [
    (2, 64, 512, 16, 8, None, 512, 512, None),
    (4, 128, 1024, 32, 16, None, 1024, 1024, None),
    (8, 256, 2048, 64, 32, None, 2048, 2048, None),
    (16, 512, 4096, 128, 128, 64, 4096, 4096, 4096),
    (32, 1024, 8192, 256, 256, 128, 8192, 8192, 8192),
    (64, 2048, 16384, 512, 512, 256, 16384, 16384, 16384),
]


@pytest.mark.parametrize("row", SUPERPOD_B200, ids=lambda r: f"{r[0]}SU")
@pytest.mark.parametrize("kind", ["rail", "fat-tree"])
def test_superpod_b200_table(row, kind):
    su, nodes, gpus, leaf, spine, core, c1, c2, c3 = row
    s = size_fat_tree(gpus, 64, kind=kind, rails=8 if kind == "rail" else 1)
    expect_sw = (leaf, spine) if core is None else (leaf, spine, core)
    expect_links = (c1, c2) if c3 is None else (c1, c2, c3)
    assert s.switches_per_tier == expect_sw
    assert s.links_per_tier == expect_links


def test_max_endpoints_closed_forms():
    for k in (8, 40, 64, 128):
        assert max_endpoints(k, 2) == k * k // 2
        assert max_endpoints(k, 3) == k**3 // 4
    assert max_endpoints(64, 2, planes=2) == 2 * 64 * 64 // 2


def test_auto_tiers_picks_smallest():
    assert size_fat_tree(64, 64).tiers == 1
    assert size_fat_tree(65, 64).tiers == 2
    assert size_fat_tree(2048, 64).tiers == 2
    assert size_fat_tree(2049, 64).tiers == 3


def test_partly_filled_rail_leaf_cables_only_needed_uplinks():
    # CloudMatrix384 RDMA plane: 48 hosts x 8 NICs at 400G on 128-port switches, rail-optimised.
    s = size_fat_tree(384, 128, kind="rail", rails=8)
    assert s.tiers == 2 and s.leaf == 8 and s.leaf_up == 48
    assert s.links_per_tier == (384, 384)


def test_impossible_inputs_state_the_limit():
    with pytest.raises(InputError, match="65536"):
        size_fat_tree(65537, 64)
    with pytest.raises(InputError, match=">= 1"):
        size_fat_tree(100, 64, oversubscription=0.5)
    with pytest.raises(InputError, match="2048"):
        size_fat_tree(4096, 64, tiers=2)
    with pytest.raises(InputError):
        size_fat_tree(0, 64)
    with pytest.raises(InputError):
        size_fat_tree(11, 64, kind="dual-plane")


def test_dual_plane_doubles_two_tier_reach():
    # Alibaba HPN idea: 2 planes of a 2-tier network hold twice the ports of one plane.
    one = max_endpoints(128, 2)
    s = size_fat_tree(2 * one, 128, kind="dual-plane")
    assert s.tiers == 2 and s.planes == 2
    assert s.leaf == 2 * size_fat_tree(one, 128).leaf


@settings(max_examples=60, deadline=None)
@given(
    e=st.integers(1, 40000),
    k=st.sampled_from([16, 32, 40, 64, 128]),
    o=st.sampled_from([1.0, 1.5, 2.0, 3.0, 7.0]),
    kind=st.sampled_from(["fat-tree", "dual-plane", "rail"]),
)
def test_ports_never_exceed_radix_and_bisection_closed_form(e, k, o, kind):
    if kind == "dual-plane":
        e = 2 * e
    rails = 8 if kind == "rail" else 1
    if kind == "rail":
        e = 8 * max(1, e // 8)
    try:
        s = size_fat_tree(e, k, oversubscription=o, kind=kind, rails=rails)
    except InputError:
        assert e > max_endpoints(k, 3, o, 2 if kind == "dual-plane" else 1) or kind == "rail"
        return
    for tier, used in s.ports_used().items():
        assert used <= k, (tier, used)
    assert s.leaf_down + s.leaf_up <= k
    if s.tiers > 1:
        assert s.oversubscription <= o + 1e-9
    # Full leaves: bisection = E / (2 * oversubscription) ports (closed form)
    if s.tiers >= 2 and e % (s.leaf_down * s.planes * rails) == 0:
        assert s.bisection_ports == pytest.approx(e / (2 * s.oversubscription))
    assert s.bisection_ports <= e / 2
    assert s.max_switch_hops == 2 * s.tiers - 1
    assert math.isfinite(s.bisection_bw(50e9))


def test_oversubscription_never_needs_more_switches():
    """#19: 1,024 GPUs on RoCE (radix 128) got 43 spines at 2:1 vs 8 at 1:1 -- 43 uplinks (prime)
    could only be spread evenly over 43 spines. Now every leaf spreads its uplinks in the same
    pattern over the fewest spines the ports allow, and a partly filled leaf keeps the ratio on the
    ports it uses (64 down : 32 up)."""
    one = size_fat_tree(1024, 128, oversubscription=1, kind="rail", rails=8)
    two = size_fat_tree(1024, 128, oversubscription=2, kind="rail", rails=8)
    assert (one.leaf, one.spine) == (16, 8)
    assert (two.leaf, two.spine, two.leaf_down, two.leaf_up) == (16, 4, 64, 32)
    assert two.oversubscription == 2.0
    for k in (40, 64, 128):
        for e in range(16, k * k // 2 + 1, 72):
            for o in (1.5, 2, 3):
                a = size_fat_tree(e, k, tiers=2)
                b = size_fat_tree(e, k, tiers=2, oversubscription=o)
                assert b.switches <= a.switches, (k, e, o)
                assert max(b.ports_used().values()) <= k
                assert b.oversubscription <= o + 1e-9


def test_oversubscribed_bom_costs_less(catalog):
    from clustertwin.cluster.bom import bill_of_materials
    from clustertwin.cluster.model import build_cluster

    cost = {}
    for o in (1, 2):
        c = build_cluster("hgx-h100", 128, "roce-400g", oversubscription=o, catalog=catalog)
        cost[o] = bill_of_materials(c).cost_usd
    assert cost[2] < cost[1]

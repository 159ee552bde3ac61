"""Pluggable pieces are registry.Registry objects: collective algorithms, routing policies, software stacks
and engines. Unknown names suggest the closest registered ones; a piece added to a registry is what the
model runs (no second list to keep in step); a name registered twice is refused."""

from __future__ import annotations

import numpy as np
import pytest

from clustertwin.errors import InputError, UnknownNameError
from clustertwin.registry import Registry


def test_registry_keeps_registration_order_and_suggests():
    r: Registry[int] = Registry("widget")
    r.add("zeta", 1)
    r.add("alpha", 2)
    assert r.names() == ["zeta", "alpha"] and list(r) == ["zeta", "alpha"] and r.values() == [1, 2]
    assert r["alpha"] == 2 and "zeta" in r and len(r) == 2
    with pytest.raises(UnknownNameError) as ei:
        r.get("alpah")
    assert ei.value.suggestions == ("alpha",) and "unknown widget 'alpah'" in str(ei.value)
    with pytest.raises(InputError, match="defined twice"):
        r.add("zeta", 3)


def test_collective_algorithm_registry_is_what_runs(catalog):
    from clustertwin.collectives import ALGORITHMS, AUTO, Algorithm, collective_time, register_algorithm

    assert isinstance(ALGORITHMS["all_reduce"], Registry)
    assert AUTO["all_reduce"] == ("ring", "tree", "nvls")  # NCCL's tuner order: ties keep the first
    assert "collnet" in ALGORITHMS["all_reduce"] and "collnet" not in AUTO["all_reduce"]
    system, fabric = catalog.system("hgx-h100"), catalog.fabric("ib-ndr-400g")
    with pytest.raises(UnknownNameError) as ei:
        collective_time("all_reduce", 1e6, 16, 8, system, fabric, algo="rign")
    assert "ring" in ei.value.suggestions
    assert collective_time("all_reduce", 1e6, 16, 8, system, fabric, algo="sharp") == collective_time(
        "all_reduce", 1e6, 16, 8, system, fabric, algo="collnet")  # an alias of the registered entry

    # a new algorithm registered as auto is taken into NCCL's choice at once
    fast = Algorithm("all_reduce", "test-instant", lambda P, S, n, g: np.full((3, *np.shape(S)), 1e-9))
    before = collective_time("all_reduce", 1e9, 16, 8, system, fabric)
    try:
        register_algorithm(fast)
        assert "test-instant" in AUTO["all_reduce"]
        assert collective_time("all_reduce", 1e9, 16, 8, system, fabric) == pytest.approx(1e-9)
        with pytest.raises(InputError, match="defined twice"):
            register_algorithm(fast)
    finally:
        ALGORITHMS["all_reduce"].remove("test-instant")
    assert collective_time("all_reduce", 1e9, 16, 8, system, fabric) == before


def test_routing_policy_registry_is_what_routes(catalog):
    from clustertwin.fabric import (
        ROUTING_POLICIES,
        RoutingPolicy,
        check_routing,
        make_fabric,
        simulate_collective,
    )

    assert ROUTING_POLICIES.names() == ["ecmp", "adaptive", "spray"]
    assert check_routing("AR") == "adaptive" and check_routing("packet_spraying") == "spray"
    with pytest.raises(UnknownNameError) as ei:
        check_routing("ecmpp")
    assert "ecmp" in ei.value.suggestions
    fab = make_fabric(catalog.system("hgx-h100"), catalog.fabric("ib-ndr-400g"), 128)
    adaptive = ROUTING_POLICIES.get("adaptive")
    ROUTING_POLICIES.add("test-bundles", RoutingPolicy("test-bundles", "adaptive under another name", adaptive.paths))
    try:
        got = simulate_collective(fab, "all_to_all", 2**26, routing="test-bundles")
        ref = simulate_collective(fab, "all_to_all", 2**26, routing="adaptive")
        assert got.time_s == ref.time_s
    finally:
        ROUTING_POLICIES.remove("test-bundles")
    with pytest.raises(UnknownNameError):
        simulate_collective(fab, "all_to_all", 2**26, routing="test-bundles")


def test_stack_registry():
    from clustertwin.workload.stacks import STACKS, get_stack, register_stack

    assert isinstance(STACKS, Registry) and STACKS.names()[0] == "megatron-core"
    assert get_stack(None) is STACKS["megatron-core"] and get_stack(" Torchtitan ") is STACKS["torchtitan"]
    with pytest.raises(UnknownNameError) as ei:
        get_stack("torchtitn")
    assert ei.value.suggestions[0] == "torchtitan"  # then torchtitan-2024
    with pytest.raises(InputError, match="defined twice"):
        register_stack(STACKS["torchtitan"])
    # presets written as another with what differs replaced keep every other setting of that one
    core, bridge = STACKS["megatron-core"], STACKS["megatron-bridge"]
    assert bridge.engine_options() | {"stack": "x"} == core.engine_options() | {"stack": "x"}

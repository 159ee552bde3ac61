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

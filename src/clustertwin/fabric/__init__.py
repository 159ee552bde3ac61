"""Flow-level scale-out fabric simulator: 2/3-tier fat-tree, rail-optimised and dual-plane
topologies; ECMP, adaptive routing and packet spraying (with PXN); max-min fair sharing re-solved
at every flow arrival and completion; failures and degradation; multi-tenancy.

>>> from clustertwin import load_catalog
>>> from clustertwin.fabric import flow_collective_time
>>> cat = load_catalog()
>>> t = flow_collective_time("all_reduce", 1 << 30, 64, 8, cat.system("hgx-h100"), cat.fabric("ib-ndr-400g"))
>>> 0 < t < 1
True

See docs/fabric.md for the model, its approximations and the checks.
"""

from __future__ import annotations

from .engine import alone_rates, max_min_rates, simulate_flows
from .faults import Faults, apply_faults
from .routing import ROUTING_POLICIES, ROUTINGS, RoutingPolicy, check_routing, flow_hash, route
from .simulate import (
    Fabric,
    FabricRun,
    JobResult,
    Layout,
    flow_collective_time,
    make_fabric,
    simulate_collective,
    simulate_jobs,
    simulate_phases,
)
from .topology import KINDS, TIER_NAMES, FabricTopology, build_topology
from .traffic import COLLECTIVES, JobSpec, Phase, collective_phases, read_jobs, read_matrix, step_phases

__all__ = [
    "COLLECTIVES",
    "KINDS",
    "ROUTINGS",
    "ROUTING_POLICIES",
    "RoutingPolicy",
    "TIER_NAMES",
    "Fabric",
    "FabricRun",
    "FabricTopology",
    "Faults",
    "JobResult",
    "JobSpec",
    "Layout",
    "Phase",
    "alone_rates",
    "apply_faults",
    "build_topology",
    "check_routing",
    "collective_phases",
    "flow_collective_time",
    "flow_hash",
    "make_fabric",
    "max_min_rates",
    "read_jobs",
    "read_matrix",
    "route",
    "simulate_collective",
    "simulate_flows",
    "simulate_jobs",
    "simulate_phases",
    "step_phases",
]

"""The schedulable inventory of a catalog cluster: nodes (hosts / NVL72 compute trays), the NVLink
(scale-up) domain of each, the leaf block and spine block it hangs off, and which nodes are healthy.

Derived from ``cluster.Cluster`` (the same addressing the fabric simulator uses):

* node ``h`` holds GPUs ``h * G .. h * G + G - 1`` (G = devices per host: 8 on HGX, 4 on a GB200
  compute tray);
* its NVLink domain is ``cluster.domain_of(first GPU)`` (one 8-GPU server, or one NVL72 rack of 18
  trays);
* its **leaf block** is the leaf of its rail-0 NIC (``cluster.leaf_of``): on a rail-optimised fabric
  every rail's leaf serves the same hosts, so the block is the scalable unit whose hosts share a leaf
  on every rail; traffic between blocks crosses the spines;
* its **spine block** (3-tier fabrics): a pod of ``radix / 2`` leaf blocks under one group of spines;
  on 1- and 2-tier fabrics there is one spine block.

Partial racks: ``unhealthy_per_domain = k`` marks k nodes of every NVLink domain unschedulable (the
published GB200 field report: 16 of 18 trays per rack guaranteed), chosen at random per domain with
``seed``; ``unhealthy_nodes`` marks given node indices.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..errors import InputError

LEVELS: tuple[str, ...] = ("node", "domain", "leaf", "spine", "cluster")


@dataclass(frozen=True)
class Inventory:
    system: str
    fabric: str
    topology: str
    oversubscription: float
    tiers: int
    gpus_per_node: int
    gpus_per_domain: int
    nodes_per_domain: int
    node_domain: np.ndarray  # (N,) NVLink domain of each node
    node_leaf: np.ndarray    # (N,) leaf block
    node_spine: np.ndarray   # (N,) spine block
    healthy: np.ndarray      # (N,) bool, schedulable at t = 0
    cluster: object = None   # the clustertwin.cluster.Cluster it came from (None for hand-built inventories)

    @property
    def num_nodes(self) -> int:
        return len(self.node_domain)

    @property
    def num_gpus(self) -> int:
        return self.num_nodes * self.gpus_per_node

    @property
    def schedulable_gpus(self) -> int:
        return int(self.healthy.sum()) * self.gpus_per_node

    @property
    def num_domains(self) -> int:
        return int(self.node_domain.max()) + 1

    @property
    def num_leaves(self) -> int:
        return int(self.node_leaf.max()) + 1

    @property
    def num_spines(self) -> int:
        return int(self.node_spine.max()) + 1

    def unit_of(self, level: str) -> np.ndarray:
        """Per node, the index of its unit at ``level`` (node, domain, leaf, spine, cluster)."""
        if level == "node":
            return np.arange(self.num_nodes)
        if level == "domain":
            return self.node_domain
        if level == "leaf":
            return self.node_leaf
        if level == "spine":
            return self.node_spine
        if level == "cluster":
            return np.zeros(self.num_nodes, np.int64)
        raise InputError(f"unknown topology level {level!r}", hint=f"levels: {', '.join(LEVELS)}")

    def level_gpus(self, level: str) -> int:
        """Schedulable GPUs of the largest unit at ``level`` (what one placement there can hold)."""
        units = self.unit_of(level)
        per = np.bincount(units, weights=self.healthy.astype(float), minlength=int(units.max()) + 1)
        return int(per.max()) * self.gpus_per_node

    @cached_property
    def max_domain_gpus(self) -> int:
        """Schedulable GPUs of the largest NVLink domain (64 on an NVL72 rack with 2 trays out)."""
        return self.level_gpus("domain")

    def summary(self) -> dict:
        return {"system": self.system, "fabric": self.fabric, "topology": self.topology, "tiers": self.tiers,
                "oversubscription": self.oversubscription, "nodes": self.num_nodes, "gpus": self.num_gpus,
                "schedulable_gpus": self.schedulable_gpus, "gpus_per_node": self.gpus_per_node,
                "nvlink_domains": self.num_domains, "gpus_per_domain": self.gpus_per_domain,
                "leaf_blocks": self.num_leaves, "spine_blocks": self.num_spines,
                "unhealthy_nodes": int((~self.healthy).sum())}


def build_inventory(system: str, domains: int, fabric: str | None = None, *, topology: str = "rail",
                    oversubscription: float = 1.0, unhealthy_per_domain: int = 0,
                    unhealthy_nodes: tuple[int, ...] = (), seed: int = 0, catalog=None) -> Inventory:
    from ..cluster import build_cluster

    c = build_cluster(system, domains, fabric, topology=topology, oversubscription=oversubscription, catalog=catalog)
    return inventory_from_cluster(c, unhealthy_per_domain=unhealthy_per_domain, unhealthy_nodes=unhealthy_nodes,
                                  seed=seed)


def inventory_from_cluster(c, *, unhealthy_per_domain: int = 0, unhealthy_nodes: tuple[int, ...] = (),
                           seed: int = 0) -> Inventory:
    g = c.devices_per_host
    n_nodes = c.num_hosts
    first = np.arange(n_nodes) * g
    dom = np.asarray(c.domain_of(first), np.int64)
    s = c.scaleout
    if s is None or c.domains == 1:
        leaf = np.zeros(n_nodes, np.int64)
        spine = np.zeros(n_nodes, np.int64)
        tiers = 0 if s is None else s.tiers
    else:
        leaf = np.asarray(c.leaf_of(first), np.int64)
        leaf = np.unique(leaf, return_inverse=True)[1].astype(np.int64)
        tiers = s.tiers
        spine = leaf // max(1, s.radix // 2) if tiers >= 3 else np.zeros(n_nodes, np.int64)
    nodes_per_domain = int(np.bincount(dom).max())
    healthy = np.ones(n_nodes, bool)
    if unhealthy_per_domain:
        if not 0 <= unhealthy_per_domain < nodes_per_domain:
            raise InputError(f"--unhealthy-per-domain {unhealthy_per_domain}: a domain has {nodes_per_domain} nodes",
                             hint=f"use 0..{nodes_per_domain - 1}")
        rng = np.random.default_rng(seed)
        for d in range(int(dom.max()) + 1):
            members = np.flatnonzero(dom == d)
            healthy[rng.choice(members, unhealthy_per_domain, replace=False)] = False
    for h in unhealthy_nodes:
        if not 0 <= h < n_nodes:
            raise InputError(f"unhealthy node {h} does not exist (the cluster has nodes 0..{n_nodes - 1})")
        healthy[h] = False
    return Inventory(system=c.system.id, fabric=c.fabric.id, topology=c.topology,
                     oversubscription=float(c.oversubscription), tiers=int(tiers), gpus_per_node=g,
                     gpus_per_domain=c.devices_per_domain, nodes_per_domain=nodes_per_domain, node_domain=dom,
                     node_leaf=leaf, node_spine=np.asarray(spine, np.int64), healthy=healthy, cluster=c)

"""Topology builders: compact numpy arrays for fast code, a networkx graph on request.

Node ids are dense ints ``0 .. num_nodes-1``, grouped by kind in the order of ``NODE_KINDS``:
devices first (node id == rank), then NICs, scale-up switches (``sw``; first tier for clos-2tier),
second-tier scale-up switches (``sw2``), leaf, spine and core switches. ``label(node)`` gives the
``(kind, index)`` pair that :meth:`Cluster.route` uses, so every route is a path in this graph.

Links are undirected with a capacity in bytes/s *per direction*; parallel cables between the same
two nodes are merged into one link with ``multiplicity`` cables and their summed capacity.
Link layers: ``LAYERS`` (scale-up device-switch / direct, device-NIC (PCIe), NIC-leaf, leaf-spine,
spine-core, scale-up L1-L2).

Wiring rules (documented in docs/cluster.md):
* switched: every device has one link to each of the domain's S switches, bw/S each (NVSwitch);
* full-mesh: one link per device pair, bw/(D-1) each (Infinity Fabric, XPU Link);
* torus-2d/3d: links to the +1 neighbour on every axis (with wrap-around), bw/(2*ndims) each;
* pcie: each device to its host's PCIe switch, full per-device bandwidth;
* clos-2tier: each device to each of its group's l1 first-tier switches (bw/l1 each); first-tier
  switch j of every group to logical second-tier switch j of the domain (one plane per j), with the
  group's full bandwidth (non-blocking);
* scale-out: NIC port -> leaf per :meth:`Cluster.leaf_of_nic`; 2 tiers: uplink j of every leaf goes to
  spine j mod S (every leaf reaches every spine with the same number of parallel links); 3 tiers: leaf of pod p to spines p*u + j,
  spine i of a pod to the cores of core group i.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

NODE_KINDS = ("dev", "nic", "sw", "sw2", "leaf", "spine", "core")
LAYERS = ("scaleup", "dev-nic", "nic-leaf", "leaf-spine", "spine-core", "scaleup-l2")


@dataclass(frozen=True)
class CompactTopology:
    """All nodes and links of a cluster as flat numpy arrays (no Python objects per element)."""

    kind_offsets: np.ndarray  # int64[len(NODE_KINDS)+1]: node ids of kind k are [off[k], off[k+1])
    link_src: np.ndarray  # int32[L]
    link_dst: np.ndarray  # int32[L]
    link_capacity: np.ndarray  # float64[L], bytes/s per direction
    link_latency: np.ndarray  # float64[L], seconds
    link_layer: np.ndarray  # int8[L], index into LAYERS
    link_multiplicity: np.ndarray  # int32[L], cables merged into the link

    @property
    def num_nodes(self) -> int:
        return int(self.kind_offsets[-1])

    @property
    def num_links(self) -> int:
        return int(self.link_src.size)

    @property
    def node_kind(self) -> np.ndarray:
        """int8[num_nodes]: index into NODE_KINDS."""
        counts = np.diff(self.kind_offsets)
        return np.repeat(np.arange(len(NODE_KINDS), dtype=np.int8), counts)

    def count(self, kind: str) -> int:
        k = NODE_KINDS.index(kind)
        return int(self.kind_offsets[k + 1] - self.kind_offsets[k])

    def node(self, kind: str, index) -> np.ndarray | int:
        """Global node id(s) of ``(kind, index)``."""
        return self.kind_offsets[NODE_KINDS.index(kind)] + np.asarray(index)

    def label(self, node: int) -> tuple[str, int]:
        k = int(np.searchsorted(self.kind_offsets, node, side="right") - 1)
        return NODE_KINDS[k], int(node - self.kind_offsets[k])

    def degree_ports(self) -> np.ndarray:
        """Cables attached to every node (sum of multiplicities), int64[num_nodes]."""
        deg = np.zeros(self.num_nodes, dtype=np.int64)
        np.add.at(deg, self.link_src, self.link_multiplicity)
        np.add.at(deg, self.link_dst, self.link_multiplicity)
        return deg

    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.kind_offsets, self.link_src, self.link_dst, self.link_capacity,
                                       self.link_latency, self.link_layer, self.link_multiplicity))

    def to_networkx(self):
        """A ``networkx.Graph`` with nodes ``(kind, index)`` and edge attributes capacity (bytes/s per
        direction), latency (s), layer (name) and multiplicity."""
        import networkx as nx

        g = nx.Graph()
        for k, kind in enumerate(NODE_KINDS):
            for i in range(int(self.kind_offsets[k + 1] - self.kind_offsets[k])):
                g.add_node((kind, i), kind=kind)
        labels = [self.label(int(n)) for n in range(self.num_nodes)]
        for s, d, c, lat, lay, m in zip(self.link_src.tolist(), self.link_dst.tolist(), self.link_capacity.tolist(),
                                        self.link_latency.tolist(), self.link_layer.tolist(),
                                        self.link_multiplicity.tolist(), strict=True):
            g.add_edge(labels[s], labels[d], capacity=c, latency=lat, layer=LAYERS[lay], multiplicity=m)
        return g


class _Links:
    def __init__(self) -> None:
        self.parts: list[tuple[np.ndarray, ...]] = []

    def add(self, src, dst, capacity_each: float, latency: float, layer: str) -> None:
        src = np.asarray(src, dtype=np.int64).ravel()
        dst = np.asarray(dst, dtype=np.int64).ravel()
        if src.size == 0:
            return
        n = src.size
        self.parts.append((src, dst, np.full(n, capacity_each), np.full(n, latency),
                           np.full(n, LAYERS.index(layer), dtype=np.int8)))

    def build(self, num_nodes: int):
        if not self.parts:
            e = np.zeros(0)
            return (e.astype(np.int32), e.astype(np.int32), e, e, e.astype(np.int8), e.astype(np.int32))
        src = np.concatenate([p[0] for p in self.parts])
        dst = np.concatenate([p[1] for p in self.parts])
        cap = np.concatenate([p[2] for p in self.parts])
        lat = np.concatenate([p[3] for p in self.parts])
        lay = np.concatenate([p[4] for p in self.parts])
        lo, hi = np.minimum(src, dst), np.maximum(src, dst)
        key = lo * num_nodes + hi
        uniq, first, inv, mult = np.unique(key, return_index=True, return_inverse=True, return_counts=True)
        capsum = np.zeros(uniq.size)
        np.add.at(capsum, inv, cap)
        return (lo[first].astype(np.int32), hi[first].astype(np.int32), capsum, lat[first], lay[first],
                mult.astype(np.int32))


def build_compact(cluster) -> CompactTopology:
    """Compact arrays of ``cluster`` (a :class:`~clustertwin.cluster.model.Cluster`). Vectorised."""
    sys_ = cluster.system
    n = cluster.num_devices
    d = cluster.devices_per_domain
    doms = cluster.domains
    topo = sys_.scaleup_topology
    bw = sys_.scaleup_bw_per_device
    lat = sys_.scaleup.latency_s
    s_up = cluster.scaleup_switches_per_domain
    n_sw2 = doms * cluster.l1_switches_per_group if topo == "clos-2tier" and d > cluster.l1_group_devices else 0
    so = cluster.scaleout
    counts = [n, cluster.num_nics, doms * s_up, n_sw2,
              so.leaf if so else 0, so.spine if so else 0, so.core if so else 0]
    off = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    links = _Links()
    ranks = np.arange(n, dtype=np.int64)
    dom = ranks // d
    local = ranks % d

    # ---- scale-up
    if d > 1:
        if topo == "switched":
            j = np.arange(s_up)
            links.add(np.repeat(ranks, s_up), off[2] + (dom[:, None] * s_up + j).ravel(), bw / s_up, lat / 2, "scaleup")
        elif topo == "pcie":
            sw = dom * s_up + local // cluster.devices_per_host
            links.add(ranks, off[2] + sw, bw, lat / 2, "scaleup")
        elif topo == "full-mesh":
            iu, ju = np.triu_indices(d, 1)
            base = (np.arange(doms, dtype=np.int64) * d)[:, None]
            links.add((base + iu).ravel(), (base + ju).ravel(), bw / (d - 1), lat, "scaleup")
        elif topo in ("torus-2d", "torus-3d"):
            shape = cluster.torus_shape
            coords = np.unravel_index(local, shape)
            for axis, size in enumerate(shape):
                if size < 2:
                    continue
                nxt = list(coords)
                nxt[axis] = (coords[axis] + 1) % size
                nb = dom * d + np.ravel_multi_index(nxt, shape)
                keep = slice(None) if size > 2 else (coords[axis] == 0)
                links.add(ranks[keep], nb[keep], bw / (2 * len(shape)), lat, "scaleup")
        elif topo == "clos-2tier":
            g, l1 = cluster.l1_group_devices, cluster.l1_switches_per_group
            groups = d // g
            grp = local // g
            j = np.arange(l1)
            l1_ids = ((dom * groups + grp)[:, None] * l1 + j).ravel()
            links.add(np.repeat(ranks, l1), off[2] + l1_ids, bw / l1, lat / 2, "scaleup")
            if n_sw2:
                all_l1 = np.arange(doms * groups * l1, dtype=np.int64)
                l1_dom = all_l1 // (groups * l1)
                links.add(off[2] + all_l1, off[3] + l1_dom * l1 + all_l1 % l1, g * bw / l1, lat / 2, "scaleup-l2")

    # ---- scale-out
    if so is not None:
        f = cluster.fabric
        links.add(ranks, off[1] + cluster.nic_of(ranks), cluster.nic_bw, 0.0, "dev-nic")
        nics = np.arange(cluster.num_nics, dtype=np.int64)
        for plane in range(so.planes):
            links.add(off[1] + nics, off[4] + cluster.leaf_of_nic(nics, plane), cluster.port_bw, f.hop_latency_s,
                      "nic-leaf")
        if so.tiers >= 2:
            per_plane_leaf = so.leaf // so.planes
            per_plane_spine = so.spine // so.planes
            u = so.leaf_up
            leaves = np.arange(per_plane_leaf, dtype=np.int64)
            j = np.arange(u, dtype=np.int64)
            for plane in range(so.planes):
                if so.tiers == 2:
                    sp = np.broadcast_to(j % per_plane_spine, (leaves.size, u))  # same pattern on every leaf
                else:
                    pod = leaves // (so.radix // 2)
                    sp = pod[:, None] * u + j
                src = off[4] + plane * per_plane_leaf + np.repeat(leaves, u)
                links.add(src, off[5] + plane * per_plane_spine + sp.ravel(), cluster.port_bw, f.hop_latency_s,
                          "leaf-spine")
            if so.tiers == 3:
                half = so.radix // 2
                gsz = so.core_group
                per_plane_core = so.core // so.planes
                spines = np.arange(per_plane_spine, dtype=np.int64)
                i = spines % u
                jj = np.arange(half, dtype=np.int64)
                core = (i[:, None] * gsz + jj % gsz).ravel()
                for plane in range(so.planes):
                    links.add(off[5] + plane * per_plane_spine + np.repeat(spines, half),
                              off[6] + plane * per_plane_core + core, cluster.port_bw, f.hop_latency_s, "spine-core")

    src, dst, cap, latency, layer, mult = links.build(int(off[-1]))
    return CompactTopology(off, src, dst, cap, latency, layer, mult)


def graph_bisection(cluster, within_domain: bool = False) -> float:
    """Max-flow check of the bisection bandwidth (bytes/s per direction) on the networkx graph.

    ``within_domain``: cut domain 0 in half (first half of its ranks vs the rest); otherwise cut the
    cluster between the first and second half of its domains. Meant for tests and small clusters.
    """
    import networkx as nx

    g = cluster.graph()
    if within_domain:
        d = cluster.devices_per_domain
        half_a, half_b = range(0, d // 2), range(d // 2, d)
        for u, v, data in list(g.edges(data=True)):  # keep only domain 0's scale-up fabric
            if data["layer"] not in ("scaleup", "scaleup-l2"):
                g.remove_edge(u, v)
    else:
        nd = cluster.devices_per_domain * (cluster.domains // 2)
        half_a, half_b = range(0, nd), range(nd, 2 * nd)
        for u, v, data in list(g.edges(data=True)):  # cross-domain traffic: scale-out only
            if data["layer"] in ("scaleup", "scaleup-l2"):
                g.remove_edge(u, v)
    for r in half_a:
        g.add_edge("S", ("dev", r), capacity=float("inf"))
    for r in half_b:
        g.add_edge(("dev", r), "T", capacity=float("inf"))
    dg = g.to_directed()
    for r in half_a:  # the super source/sink arcs are one-way
        dg.remove_edge(("dev", r), "S")
    for r in half_b:
        dg.remove_edge("T", ("dev", r))
    value, _ = nx.maximum_flow(dg, "S", "T")
    return float(value)


__all__ = ["LAYERS", "NODE_KINDS", "CompactTopology", "build_compact", "graph_bisection"]

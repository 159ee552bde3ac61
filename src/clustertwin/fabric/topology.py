"""Compact, array-based scale-out topologies: 2/3-tier fat-tree, rail-optimised and dual-plane.

No graph objects: every directed link has an integer id computed arithmetically from its role,
so routing and the max-min solver work on numpy arrays (see docs/fabric.md).

Structure (one *plane*; dual-plane repeats it, each plane with its own switches):

* ``E`` endpoints (NIC ports). Endpoint ``e`` hangs off leaf ``endpoint_leaf[e]``.
  fat-tree: a host's NICs sit under the same leaf; rail: NIC ``r`` of every host of a scalable
  unit (SU) sits under the SU's rail-``r`` leaf (NVIDIA DGX SuperPOD RA; Alibaba HPN tier 1).
* Leaves have ``down`` endpoint ports and ``u1`` uplinks. Uplink ``j`` of every leaf of a pod goes
  to *virtual spine* ``(pod, j)``. A physical spine with ``m`` parallel cables to each leaf is
  modelled as ``m`` virtual spines (one cable per leaf each) -- routing among parallel cables
  then follows the uplink choice, which is how a folded Clos is usually drawn.
* 3-tier: virtual spine ``(pod, j)`` has ``u2`` uplinks; uplink ``t`` goes to virtual core
  ``(j, t)``, which has one port to spine ``j`` of every pod (k-ary fat-tree wiring,
  Al-Fares et al., SIGCOMM 2008, Sec. 3.2).
* Sizing (tiers, leaf down:up ports, switch counts) comes from ``clustertwin.cluster.fattree``:
  oversubscription ``o`` is the leaf's down:up port ratio; the tiers above are non-blocking.

Link ids inside one plane (``L_plane`` links), each a directed link::

    nic_up     e                               E
    nic_down   E + e                           E
    leaf_up    2E + leaf*u1 + j                n_leaves*u1
    leaf_down  2E + NLU + leaf*u1 + j          (spine j -> leaf)
    spine_up   2E + 2NLU + (pod*u1+j)*u2 + t   (3-tier only)
    spine_down 2E + 2NLU + NSU + (pod*u1+j)*u2 + t   (core (j,t) -> spine (pod, j))

Plane ``p`` adds ``p * L_plane``. After the physical links come *bundle* ids used by packet
spraying on a uniform fabric (all up-links of a leaf, all up-links of a pod ...; see routing.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError

KINDS = ("fat-tree", "rail", "dual-plane")
TIER_NAMES = ("nic-up", "nic-down", "leaf-up", "spine-down", "spine-up", "core-down")


@dataclass(frozen=True, slots=True, kw_only=True)
class FabricShape:
    """The sizes that define the wiring (pure data; ``build_topology`` derives them)."""

    kind: str
    tiers: int
    planes: int
    n_endpoints: int  # NIC ports per plane
    rails: int  # NICs per host (rail topology: leaves per SU)
    radix: int
    down: int  # endpoint ports per leaf
    u1: int  # uplinks per leaf
    leaves_per_pod: int
    u2: int  # uplinks per virtual spine (3-tier), 0 otherwise
    n_leaves: int
    n_pods: int
    oversubscription: float


@dataclass(frozen=True, slots=True, kw_only=True)
class FabricTopology:
    """A built scale-out fabric: link capacities (bytes/s), link tiers, endpoint-to-leaf map.

    ``capacity`` has ``n_links`` physical links followed by ``n_bundles`` bundle ids.
    """

    shape: FabricShape
    endpoint_leaf: np.ndarray  # (E,) leaf of each endpoint (same in every plane)
    capacity: np.ndarray  # (n_links + n_bundles,) bytes/s per direction; 0 = failed
    tier: np.ndarray  # (n_links,) index into TIER_NAMES
    n_links: int
    link_bw: float
    nic_bw: float  # per endpoint, all planes together
    switch_counts: dict = field(default_factory=dict)  # physical switches per tier (reporting)
    failed_note: tuple[str, ...] = ()

    # ---- link id arithmetic (vectorised) -------------------------------------------------
    @property
    def plane_links(self) -> int:
        s = self.shape
        nlu = s.n_leaves * s.u1
        nsu = s.n_pods * s.u1 * s.u2 if s.tiers == 3 else 0
        return 2 * s.n_endpoints + 2 * nlu + 2 * nsu

    def nic_up(self, e, plane=0):
        return plane * self.plane_links + np.asarray(e)

    def nic_down(self, e, plane=0):
        return plane * self.plane_links + self.shape.n_endpoints + np.asarray(e)

    def leaf_up(self, leaf, j, plane=0):
        s = self.shape
        return plane * self.plane_links + 2 * s.n_endpoints + np.asarray(leaf) * s.u1 + j

    def leaf_down(self, leaf, j, plane=0):
        s = self.shape
        return plane * self.plane_links + 2 * s.n_endpoints + s.n_leaves * s.u1 + np.asarray(leaf) * s.u1 + j

    def spine_up(self, pod, j, t, plane=0):
        s = self.shape
        base = 2 * s.n_endpoints + 2 * s.n_leaves * s.u1
        return plane * self.plane_links + base + (np.asarray(pod) * s.u1 + j) * s.u2 + t

    def spine_down(self, pod, j, t, plane=0):
        s = self.shape
        base = 2 * s.n_endpoints + 2 * s.n_leaves * s.u1 + s.n_pods * s.u1 * s.u2
        return plane * self.plane_links + base + (np.asarray(pod) * s.u1 + j) * s.u2 + t

    # bundles: per plane [leaf-up(n_leaves), leaf-down(n_leaves), pod-up(n_pods), pod-down(n_pods)]
    @property
    def plane_bundles(self) -> int:
        s = self.shape
        return 2 * s.n_leaves + (2 * s.n_pods if s.tiers == 3 else 0)

    def bundle_leaf_up(self, leaf, plane=0):
        return self.n_links + plane * self.plane_bundles + np.asarray(leaf)

    def bundle_leaf_down(self, leaf, plane=0):
        return self.n_links + plane * self.plane_bundles + self.shape.n_leaves + np.asarray(leaf)

    def bundle_pod_up(self, pod, plane=0):
        return self.n_links + plane * self.plane_bundles + 2 * self.shape.n_leaves + np.asarray(pod)

    def bundle_pod_down(self, pod, plane=0):
        s = self.shape
        return self.n_links + plane * self.plane_bundles + 2 * s.n_leaves + s.n_pods + np.asarray(pod)

    def pod_of_leaf(self, leaf):
        return np.asarray(leaf) // self.shape.leaves_per_pod

    def n_paths(self, src_leaf, dst_leaf) -> np.ndarray:
        """Equal-cost paths per plane between two leaves (1 on the same leaf)."""
        s = self.shape
        src_leaf = np.asarray(src_leaf)
        dst_leaf = np.asarray(dst_leaf)
        same_pod = self.pod_of_leaf(src_leaf) == self.pod_of_leaf(dst_leaf)
        out = np.where(same_pod, s.u1, s.u1 * max(s.u2, 1))
        return np.where(src_leaf == dst_leaf, 1, out).astype(np.int64)

    def path_links(self, src, dst, path, plane) -> np.ndarray:
        """Links of path number ``path`` (0 <= path < n_paths) in ``plane``; (F, 6), -1 padded.

        Order: nic-up, leaf-up, spine-up, spine-down, leaf-down, nic-down.
        """
        s = self.shape
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        path = np.asarray(path, dtype=np.int64)
        plane = np.asarray(plane, dtype=np.int64)
        a = self.endpoint_leaf[src]
        b = self.endpoint_leaf[dst]
        pa, pb = self.pod_of_leaf(a), self.pod_of_leaf(b)
        same_leaf = a == b
        inter_pod = pa != pb
        j = path % s.u1
        t = path // s.u1
        out = np.full((src.size, 6), -1, dtype=np.int64)
        out[:, 0] = self.nic_up(src, plane)
        out[:, 5] = self.nic_down(dst, plane)
        up = ~same_leaf
        out[up, 1] = self.leaf_up(a[up], j[up], plane[up] if plane.ndim else plane)
        out[up, 4] = self.leaf_down(b[up], j[up], plane[up] if plane.ndim else plane)
        if s.tiers == 3 and inter_pod.any():
            ip = inter_pod
            pl = plane[ip] if plane.ndim else plane
            out[ip, 2] = self.spine_up(pa[ip], j[ip], t[ip], pl)
            out[ip, 3] = self.spine_down(pb[ip], j[ip], t[ip], pl)
        return out

    def class_paths(self, src_leaf: int, dst_leaf: int, plane: int) -> np.ndarray:
        """All switch links (leaf-up, spine-up, spine-down, leaf-down) of every path between two
        leaves in one plane: (n_paths, 4), -1 padded."""
        s = self.shape
        n = int(self.n_paths(src_leaf, dst_leaf))
        out = np.full((n, 4), -1, dtype=np.int64)
        if src_leaf == dst_leaf:
            return out
        p = np.arange(n)
        j, t = p % s.u1, p // s.u1
        out[:, 0] = self.leaf_up(src_leaf, j, plane)
        out[:, 3] = self.leaf_down(dst_leaf, j, plane)
        pa, pb = int(self.pod_of_leaf(src_leaf)), int(self.pod_of_leaf(dst_leaf))
        if s.tiers == 3 and pa != pb:
            out[:, 1] = self.spine_up(pa, j, t, plane)
            out[:, 2] = self.spine_down(pb, j, t, plane)
        return out

    @property
    def uniform_switch_links(self) -> bool:
        """True when every switch-to-switch link has the nominal bandwidth (no failure/degradation)."""
        s = self.shape
        sw = np.ones(self.n_links, dtype=bool)
        for p in range(s.planes):
            base = p * self.plane_links
            sw[base: base + 2 * s.n_endpoints] = False
        return bool(np.all(self.capacity[: self.n_links][sw] == self.link_bw))

    def link_name(self, link: int) -> str:
        """Human-readable name of a physical link id."""
        s = self.shape
        plane, r = divmod(int(link), self.plane_links)
        pfx = f"p{plane}:" if s.planes > 1 else ""
        E, NLU = s.n_endpoints, s.n_leaves * s.u1
        NSU = s.n_pods * s.u1 * s.u2 if s.tiers == 3 else 0
        if r < E:
            return f"{pfx}nic{r}->leaf{self.endpoint_leaf[r]}"
        r -= E
        if r < E:
            return f"{pfx}leaf{self.endpoint_leaf[r]}->nic{r}"
        r -= E
        if r < NLU:
            leaf, j = divmod(r, s.u1)
            return f"{pfx}leaf{leaf}->spine{leaf // s.leaves_per_pod}.{j}"
        r -= NLU
        if r < NLU:
            leaf, j = divmod(r, s.u1)
            return f"{pfx}spine{leaf // s.leaves_per_pod}.{j}->leaf{leaf}"
        r -= NLU
        if r < NSU:
            pj, t = divmod(r, s.u2)
            pod, j = divmod(pj, s.u1)
            return f"{pfx}spine{pod}.{j}->core{j}.{t}"
        r -= NSU
        pj, t = divmod(r, s.u2)
        pod, j = divmod(pj, s.u1)
        return f"{pfx}core{j}.{t}->spine{pod}.{j}"


def build_topology(
    *,
    n_endpoints: int,
    link_bw: float,
    nic_bw: float,
    radix: int,
    kind: str = "fat-tree",
    tiers: int | None = None,
    oversubscription: float = 1.0,
    rails: int = 8,
) -> FabricTopology:
    """Wire a fabric for ``n_endpoints`` NICs (per plane).

    Switch counts, tiers and the leaf down:up split come from the cluster area's sizing function
    (:func:`clustertwin.cluster.fattree.size_fat_tree`, oversubscription at the leaf, tiers above
    non-blocking); this function only adds the link-level wiring. ``tiers=None`` picks the fewest
    tiers that fit; a fabric that fits one switch is wired as a single leaf. ``rails``: NICs per
    host (rail and dual-plane wiring: NIC ``r`` of each host on the rail-``r`` leaf of its SU).
    """
    from ..cluster.fattree import size_fat_tree

    if kind not in KINDS:
        from ..errors import UnknownNameError

        raise UnknownNameError("topology", kind, KINDS)
    if n_endpoints < 1:
        raise InputError(f"a fabric needs at least one endpoint, got {n_endpoints}")
    if tiers is not None and tiers not in (2, 3):
        raise InputError(f"tiers must be 2 or 3, got {tiers}")
    planes = 2 if kind == "dual-plane" else 1
    E = int(n_endpoints)
    rails = max(1, min(int(rails), E))
    if E % rails:
        rails = 1
    sizing = size_fat_tree(
        endpoints=E * planes, radix=radix, tiers=tiers or "auto", oversubscription=oversubscription,
        kind=kind, rails=rails if kind == "rail" else 1,
    )
    rail_wiring = kind in ("rail", "dual-plane") and rails > 1 and sizing.tiers > 1
    if sizing.tiers == 1:  # one switch per plane: every endpoint on leaf 0
        d = E
        t = 2
    else:
        d = sizing.leaf_down
        t = sizing.tiers
    if rail_wiring:
        hosts = E // rails
        hosts_per_su = min(d, hosts)
        e = np.arange(E)
        endpoint_leaf = ((e // rails) // hosts_per_su) * rails + e % rails
        d_eff = hosts_per_su
    else:
        endpoint_leaf = np.arange(E) // d
        d_eff = min(d, E)
    n_leaves = int(endpoint_leaf.max()) + 1
    o = sizing.oversubscription if sizing.tiers > 1 else 1.0
    u1 = max(1, min(sizing.leaf_up or d_eff, round(d_eff / o))) if sizing.tiers > 1 else 1
    if t == 2:
        lpp, n_pods, u2 = n_leaves, 1, 0
    else:
        lpp = max(1, radix // 2)
        if rail_wiring and lpp % rails:
            lpp = max(rails, (lpp // rails) * rails)
        lpp = min(lpp, n_leaves)
        n_pods = -(-n_leaves // lpp)
        u2 = lpp
    shape = FabricShape(
        kind=kind, tiers=t, planes=planes, n_endpoints=E, rails=rails, radix=radix, down=d_eff, u1=u1,
        leaves_per_pod=lpp, u2=u2, n_leaves=n_leaves, n_pods=n_pods, oversubscription=float(o),
    )
    nlu = n_leaves * u1
    nsu = n_pods * u1 * u2 if t == 3 else 0
    per_plane = 2 * E + 2 * nlu + 2 * nsu
    tier_plane = np.concatenate([
        np.full(E, 0), np.full(E, 1), np.full(nlu, 2), np.full(nlu, 3), np.full(nsu, 4), np.full(nsu, 5),
    ]).astype(np.int8)
    cap_plane = np.where(tier_plane <= 1, nic_bw / planes, link_bw).astype(float)
    n_links = per_plane * planes
    bundles_per_plane = 2 * n_leaves + (2 * n_pods if t == 3 else 0)
    counts = {"source": "clustertwin.cluster.fattree.size_fat_tree", "tiers": sizing.tiers,
              "leaf": sizing.leaf, "spine": sizing.spine, "core": sizing.core,
              "leaf_down": sizing.leaf_down, "leaf_up": sizing.leaf_up,
              "oversubscription": sizing.oversubscription}
    topo = FabricTopology(
        shape=shape,
        endpoint_leaf=endpoint_leaf.astype(np.int64),
        capacity=np.concatenate([np.tile(cap_plane, planes), np.zeros(bundles_per_plane * planes)]),
        tier=np.tile(tier_plane, planes),
        n_links=n_links,
        link_bw=float(link_bw),
        nic_bw=float(nic_bw),
        switch_counts=counts,
    )
    refresh_bundles(topo)
    return topo


def refresh_bundles(topo: FabricTopology) -> None:
    """Recompute bundle capacities (sum of member capacities) after failures changed links."""
    s = topo.shape
    cap = topo.capacity
    for p in range(s.planes):
        lu = cap[topo.leaf_up(np.arange(s.n_leaves)[:, None], np.arange(s.u1)[None, :], p)].sum(1)
        ld = cap[topo.leaf_down(np.arange(s.n_leaves)[:, None], np.arange(s.u1)[None, :], p)].sum(1)
        cap[topo.bundle_leaf_up(np.arange(s.n_leaves), p)] = lu
        cap[topo.bundle_leaf_down(np.arange(s.n_leaves), p)] = ld
        if s.tiers == 3:
            pods = np.arange(s.n_pods)[:, None, None]
            j = np.arange(s.u1)[None, :, None]
            t = np.arange(s.u2)[None, None, :]
            cap[topo.bundle_pod_up(np.arange(s.n_pods), p)] = cap[topo.spine_up(pods, j, t, p)].reshape(s.n_pods, -1).sum(1)
            cap[topo.bundle_pod_down(np.arange(s.n_pods), p)] = cap[topo.spine_down(pods, j, t, p)].reshape(s.n_pods, -1).sum(1)

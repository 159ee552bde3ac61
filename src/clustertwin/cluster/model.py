"""The cluster model: N scale-up domains of one system + a scale-out fabric + a front-end network.

>>> from clustertwin.cluster import build_cluster
>>> c = build_cluster("hgx-h100", domains=4)
>>> c.num_devices, c.num_hosts, c.domain_of(13), c.local_of(13)
(32, 4, 1, 5)

Addressing (all functions accept ints or numpy integer arrays and are vectorised):

* global rank ``r = domain * D + local`` with D the (possibly partitioned) scale-up domain size;
* host ``r // devices_per_host`` (hosts are numbered across domains in rank order);
* NIC ``host * nics_per_host + rail`` with ``rail = (r % devices_per_host) * nics_per_host // devices_per_host``
  (NIC k of every host is on rail k - the rail-optimised convention of DGX SuperPOD);
* leaf of a NIC: rail-optimised: ``rail * leaves_per_rail + host // leaf_down``; fat-tree and
  dual-plane: ``nic // leaf_down`` (plus ``plane * leaves_per_plane``).

``route(a, b)`` returns one representative path (switch choices are symmetric in a and b, so the
reverse route is the same path reversed); the fabric simulator does ECMP / adaptive routing itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from ..errors import InputError, UnknownNameError
from ..hardware import HardwareView, ScaleOutTech, SystemSpec, resolve_hardware
from .fattree import KINDS as SCALEOUT_TOPOLOGIES
from .fattree import FatTreeSizing, check_oversubscription, size_fat_tree


@dataclass(frozen=True, slots=True)
class Route:
    """One path between two devices. ``path`` lists node labels ``(kind, index)``."""

    src: int
    dst: int
    layer: str  # self | scale-up | scale-out
    path: tuple[tuple[str, int], ...]
    switch_hops: int
    bandwidth: float  # bytes/s per direction, bottleneck of the path for one flow
    latency_s: float

    @property
    def links(self) -> int:
        return max(0, len(self.path) - 1)

    def to_dict(self) -> dict:
        return {
            "src": self.src, "dst": self.dst, "layer": self.layer, "path": [list(p) for p in self.path],
            "switch_hops": self.switch_hops, "links": self.links, "bandwidth_gbps": self.bandwidth * 8 / 1e9,
            "latency_us": self.latency_s * 1e6,
        }


def torus_dims(n: int, ndims: int) -> tuple[int, ...]:
    """Factor ``n`` into ``ndims`` near-equal torus dimensions (largest first)."""
    dims: list[int] = []
    rest = n
    for k in range(ndims, 0, -1):
        target = round(rest ** (1.0 / k))
        best = 1
        for cand in range(1, rest + 1):
            if rest % cand == 0 and abs(cand - target) < abs(best - target):
                best = cand
        dims.append(best)
        rest //= best
    return tuple(sorted(dims, reverse=True))


@dataclass(frozen=True)
class Cluster:
    """``domains`` scale-up domains of ``system`` joined by the ``fabric`` scale-out network.

    Build it with :func:`build_cluster` (which validates the input); the constructor does no I/O.
    """

    system: SystemSpec
    domains: int
    fabric: ScaleOutTech
    topology: str = "rail"  # fat-tree | rail | dual-plane (scale-out)
    oversubscription: float = 1.0
    tiers: int | str = "auto"
    domain_size: int = 0  # 0: the system's full domain
    extra: dict[str, Any] = field(default_factory=dict)

    # ----------------------------------------------------------------- sizes
    @property
    def devices_per_domain(self) -> int:
        return self.domain_size or self.system.devices_per_domain

    @property
    def devices_per_host(self) -> int:
        return self.system.devices_per_host

    @property
    def num_devices(self) -> int:
        return self.domains * self.devices_per_domain

    @property
    def num_hosts(self) -> int:
        return math.ceil(self.num_devices / self.devices_per_host)

    @property
    def nics_per_host(self) -> int:
        return self.system.nics_per_host

    @property
    def num_nics(self) -> int:
        return self.num_hosts * self.nics_per_host

    @property
    def ports_per_nic(self) -> int:
        return 2 if self.topology == "dual-plane" else 1

    @cached_property
    def view(self) -> HardwareView:
        """The resolved bandwidths of this system on this fabric (``hardware.resolve_hardware``)."""
        return resolve_hardware(self.system, self.fabric, ports_per_nic=self.ports_per_nic)

    @property
    def port_bw(self) -> float:
        """Line rate of one NIC port on this fabric (bytes/s per direction)."""
        return self.view.nic_bw / self.ports_per_nic

    @property
    def nic_bw(self) -> float:
        return self.view.nic_bw

    @property
    def nic_bw_per_device(self) -> float:
        return self.view.scaleout_bw_per_device

    @property
    def num_systems(self) -> int:
        """Physical systems (servers / racks / supernodes) needed; partitions share a system."""
        return math.ceil(self.num_devices / self.system.devices_per_domain)

    @property
    def switch_radix(self) -> int:
        """Switch ports at the NIC port speed: a switch port faster than the NIC port is split
        (breakout), e.g. a 64 x 400G QM9700 serves 128 x 200G (hardware.yaml Quantum2_QM9700)."""
        return self.view.switch_radix

    @cached_property
    def scaleout(self) -> FatTreeSizing | None:
        """Sizing of the compute scale-out network (None when no NIC is present)."""
        if self.num_nics == 0:
            return None
        return size_fat_tree(
            self.num_nics * self.ports_per_nic,
            self.switch_radix,
            tiers=self.tiers,
            oversubscription=self.oversubscription,
            kind=self.topology,
            rails=self.nics_per_host if self.topology == "rail" else 1,
        )

    @cached_property
    def frontend(self) -> FatTreeSizing | None:
        """Front-end / storage network: a non-blocking fat tree of the front-end NICs, same switch radix."""
        n = self.num_hosts * self.system.frontend_nics_per_host
        if n == 0:
            return None
        return size_fat_tree(n, self.fabric.switch_radix, tiers="auto", kind="fat-tree")

    # ------------------------------------------------------------ addressing
    def rank(self, domain, local):
        """(domain, local device) -> global rank."""
        return np.asarray(domain) * self.devices_per_domain + np.asarray(local)

    def domain_of(self, rank):
        return np.asarray(rank) // self.devices_per_domain

    def local_of(self, rank):
        return np.asarray(rank) % self.devices_per_domain

    def host_of(self, rank):
        return np.asarray(rank) // self.devices_per_host

    def rail_of(self, rank):
        """Index of the rank's NIC inside its host (the rail)."""
        if self.nics_per_host == 0:
            return np.zeros_like(np.asarray(rank))
        return (np.asarray(rank) % self.devices_per_host) * self.nics_per_host // self.devices_per_host

    def nic_of(self, rank):
        """Global NIC index of the rank (NICs numbered host-major)."""
        return self.host_of(rank) * self.nics_per_host + self.rail_of(rank)

    def leaf_of_nic(self, nic, plane=0):
        """Leaf switch (global index over planes) of a NIC port on ``plane``."""
        s = self.scaleout
        if s is None:
            raise InputError(f"system {self.system.id} has no scale-out NICs")
        nic = np.asarray(nic)
        per_plane = s.leaf // s.planes
        if s.tiers == 1:
            local = nic // s.radix
        elif s.kind == "rail":
            host, rail = nic // self.nics_per_host, nic % self.nics_per_host
            local = rail * (per_plane // s.rails) + host // s.leaf_down
        else:
            local = nic // s.leaf_down
        return np.asarray(plane) * per_plane + local

    def leaf_of(self, rank, plane=0):
        return self.leaf_of_nic(self.nic_of(rank), plane)

    def scaleup_group_of(self, rank):
        """First-tier switch group of a rank for clos-2tier scale-up (a node for CM384, a rack for NVL576)."""
        return np.asarray(rank) // self.l1_group_devices

    @property
    def l1_group_devices(self) -> int:
        bom = self.system.bom
        g = int(bom.get("l1_group_devices", self.devices_per_host))
        return max(1, min(g, self.devices_per_domain))

    @property
    def l1_switches_per_group(self) -> int:
        bom = self.system.bom
        if "l1_switches_per_group" in bom:
            return int(bom["l1_switches_per_group"])
        if "l1_switches_per_host" in bom:
            return int(bom["l1_switches_per_host"])
        groups = max(1, self.system.devices_per_domain // self.l1_group_devices)
        return max(1, self.system.scaleup_switches_per_domain // groups)

    @property
    def scaleup_switches_per_domain(self) -> int:
        """Scale-up switch nodes per (logical) domain in the topology model (at least 1 when switched)."""
        topo = self.system.scaleup_topology
        if topo == "switched":
            return max(1, self.system.scaleup_switches_per_domain)
        if topo == "pcie":
            return max(1, math.ceil(self.devices_per_domain / self.devices_per_host))
        if topo == "clos-2tier":
            return (self.devices_per_domain // self.l1_group_devices) * self.l1_switches_per_group
        return 0

    @property
    def torus_shape(self) -> tuple[int, ...]:
        topo = self.system.scaleup_topology
        if topo == "torus-2d":
            return torus_dims(self.devices_per_domain, 2)
        if topo == "torus-3d":
            return torus_dims(self.devices_per_domain, 3)
        return ()

    # ---------------------------------------------------------------- routes
    def _scaleup_route(self, a: int, b: int) -> Route:
        sys_ = self.system
        topo, bw, lat = sys_.scaleup_topology, sys_.scaleup_bw_per_device, sys_.scaleup.latency_s
        d = self.devices_per_domain
        dom = a // d
        if topo == "full-mesh":
            return Route(a, b, "scale-up", (("dev", a), ("dev", b)), 0, bw / max(1, d - 1), lat)
        if topo in ("torus-2d", "torus-3d"):
            shape = self.torus_shape
            ca = np.unravel_index(a % d, shape)
            cb = np.unravel_index(b % d, shape)
            path = [("dev", a)]
            cur = list(ca)
            for axis, n in enumerate(shape):  # dimension-order routing, shorter way round
                delta = (cb[axis] - cur[axis]) % n
                step = 1 if delta <= n - delta else -1
                if delta == n - delta and a > b:  # tie: make a->b the reverse of b->a
                    step = -step
                while cur[axis] != cb[axis]:
                    cur[axis] = (cur[axis] + step) % n
                    path.append(("dev", dom * d + int(np.ravel_multi_index(cur, shape))))
            if a > b:  # canonical path from the lower rank, reversed, for exact symmetry
                rev = self._scaleup_route(b, a)
                return Route(a, b, "scale-up", tuple(reversed(rev.path)), 0, rev.bandwidth, rev.latency_s)
            per_link = bw / (2 * len(shape))
            return Route(a, b, "scale-up", tuple(path), 0, per_link, lat * (len(path) - 1))
        if topo == "pcie":
            sw = dom * self.scaleup_switches_per_domain + (a % d) // self.devices_per_host
            sw_b = dom * self.scaleup_switches_per_domain + (b % d) // self.devices_per_host
            path = (("dev", a), ("sw", int(sw))) + ((("sw", int(sw_b)),) if sw_b != sw else ()) + (("dev", b),)
            return Route(a, b, "scale-up", path, len(path) - 2, bw, lat * (len(path) - 2))
        if topo == "clos-2tier":
            g, l1 = self.l1_group_devices, self.l1_switches_per_group
            groups = d // g
            j = (a + b) % l1
            ga, gb = (a % d) // g, (b % d) // g
            s_a = ("sw", dom * groups * l1 + ga * l1 + j)
            if ga == gb:
                return Route(a, b, "scale-up", (("dev", a), s_a, ("dev", b)), 1, bw, lat)
            s_b = ("sw", dom * groups * l1 + gb * l1 + j)
            l2 = ("sw2", dom * l1 + j)
            return Route(a, b, "scale-up", (("dev", a), s_a, l2, s_b, ("dev", b)), 3, bw, 3 * lat)
        # switched (NVSwitch, UALink ...): one switch hop, full per-device bandwidth
        s = self.scaleup_switches_per_domain
        sw = ("sw", dom * s + (a + b) % s)
        return Route(a, b, "scale-up", (("dev", a), sw, ("dev", b)), 1, bw, lat)

    def _scaleout_route(self, a: int, b: int) -> Route:
        s = self.scaleout
        if s is None:
            raise InputError(
                f"ranks {a} and {b} are in different scale-up domains but system {self.system.id} has no NICs",
                hint="use a single domain or a system with scale-out NICs",
            )
        f = self.fabric
        plane = (a + b) % s.planes
        na, nb = int(self.nic_of(a)), int(self.nic_of(b))
        bw = min(self.nic_bw_per_device, self.port_bw * self.ports_per_nic)
        if na == nb:
            path = (("dev", a), ("nic", na), ("dev", b))
            return Route(a, b, "scale-out", path, 0, bw, 2 * f.nic_latency_s)
        la, lb = int(self.leaf_of_nic(na, plane)), int(self.leaf_of_nic(nb, plane))
        head = (("dev", a), ("nic", na), ("leaf", la))
        tail = (("leaf", lb), ("nic", nb), ("dev", b))
        if la == lb:
            mid: tuple = ()
            path = head + tail[1:]
        elif s.tiers == 2:
            per_plane = s.spine // s.planes
            mid = (("spine", plane * per_plane + (la + lb) % per_plane),)
            path = head + mid + tail
        else:
            half = s.radix // 2
            per_plane_leaf = s.leaf // s.planes
            u = s.leaf_up
            pa, pb = (la % per_plane_leaf) // half, (lb % per_plane_leaf) // half
            i = (la + lb) % u
            sp0 = plane * (s.spine // s.planes)
            if pa == pb:
                mid = (("spine", sp0 + pa * u + i),)
            else:
                g = s.core_group
                core = plane * (s.core // s.planes) + i * g + (pa + pb) % g
                mid = (("spine", sp0 + pa * u + i), ("core", core), ("spine", sp0 + pb * u + i))
            path = head + mid + tail
        hops = len(path) - 4  # switches = nodes minus 2 devices and 2 NICs
        return Route(a, b, "scale-out", path, hops, bw, f.nic_latency_s + hops * f.hop_latency_s)

    def route(self, a: int, b: int) -> Route:
        """One path from rank ``a`` to rank ``b`` with its hops, bottleneck bandwidth and latency."""
        a, b = int(a), int(b)
        for r in (a, b):
            if not 0 <= r < self.num_devices:
                raise InputError(f"rank {r} is outside the cluster (0 .. {self.num_devices - 1})")
        if a == b:
            return Route(a, b, "self", (("dev", a),), 0, math.inf, 0.0)
        if a // self.devices_per_domain == b // self.devices_per_domain:
            return self._scaleup_route(a, b)
        return self._scaleout_route(a, b)

    # --------------------------------------------------------------- summary
    def scaleup_bisection_per_device(self) -> float:
        """Bisection bandwidth per device inside one domain (bytes/s per direction), closed form.

        switched / clos-2tier (non-blocking) / pcie: the device's full scale-up bandwidth;
        full mesh of D: (D/2)^2 links of bw/(D-1) across the cut, per device of one half (D/2)*bw/(D-1);
        torus with longest ring L (wrap-around): 2*D/L links of bw/(2*ndims), per device 4*bw/(2*ndims*L).
        """
        d = self.devices_per_domain
        bw = self.system.scaleup_bw_per_device
        if d <= 1:
            return 0.0
        topo = self.system.scaleup_topology
        if topo == "full-mesh":
            return (d // 2) * (d - d // 2) * bw / (d - 1) / (d // 2)
        if topo in ("torus-2d", "torus-3d"):
            shape = self.torus_shape
            longest = shape[0]
            if longest < 2:
                return 0.0
            crossing = (2 if longest > 2 else 1) * (d // longest)
            return crossing * bw / (2 * len(shape)) / (d / 2)
        return bw

    def scaleout_bisection_per_device(self) -> float:
        """Scale-out bisection bandwidth per device (bytes/s per direction), closed form of the fat tree."""
        s = self.scaleout
        if s is None or self.num_devices < 2:
            return 0.0
        return s.bisection_bw(self.port_bw) / (self.num_devices / 2)

    def summary(self) -> dict:
        s = self.scaleout
        sys_ = self.system
        out: dict[str, Any] = {
            "system": sys_.id,
            "accelerator": sys_.accelerator.id,
            "fabric": self.fabric.id,
            "topology": self.topology,
            "domains": self.domains,
            "domain_size": self.devices_per_domain,
            "devices": self.num_devices,
            "hosts": self.num_hosts,
            "systems": self.num_systems,
            "nics": self.num_nics,
            "scaleup": {
                "tech": sys_.scaleup.id,
                "topology": sys_.scaleup_topology,
                "bw_per_device_gbps": sys_.scaleup_bw_per_device * 8 / 1e9,
                "bisection_per_device_gbps": self.scaleup_bisection_per_device() * 8 / 1e9,
                "switches_per_domain": self.scaleup_switches_per_domain,
                "max_switch_hops": self._max_scaleup_hops(),
                "max_link_hops": self._max_scaleup_links(),
                "in_network_reduction": sys_.scaleup.in_network_reduction,
            },
            "scaleout": None,
            "frontend": self.frontend.to_dict() if self.frontend else None,
        }
        if s is not None:
            out["scaleout"] = {
                **s.to_dict(),
                "port_gbps": self.port_bw * 8 / 1e9,
                "nic_bw_per_device_gbps": self.nic_bw_per_device * 8 / 1e9,
                "bisection_per_device_gbps": self.scaleout_bisection_per_device() * 8 / 1e9,
                "bisection_tbps": s.bisection_bw(self.port_bw) * 8 / 1e12,
                "max_latency_us": (self.fabric.nic_latency_s + s.max_switch_hops * self.fabric.hop_latency_s) * 1e6,
            }
        return out

    def _max_scaleup_hops(self) -> int:
        topo = self.system.scaleup_topology
        if self.devices_per_domain <= 1:
            return 0
        if topo == "full-mesh":
            return 0
        if topo in ("torus-2d", "torus-3d"):
            return 0  # device-to-device links; see _max_scaleup_links
        if topo == "clos-2tier":
            return 3 if self.devices_per_domain > self.l1_group_devices else 1
        if topo == "pcie":
            return 2 if self.devices_per_domain > self.devices_per_host else 1
        return 1

    def _max_scaleup_links(self) -> int:
        """Links on the longest scale-up route inside a domain."""
        if self.devices_per_domain <= 1:
            return 0
        topo = self.system.scaleup_topology
        if topo in ("torus-2d", "torus-3d"):
            return sum(n // 2 for n in self.torus_shape)
        if topo == "full-mesh":
            return 1
        return self._max_scaleup_hops() + 1

    def topology_arrays(self):
        """Compact arrays of the whole cluster (no networkx); see :mod:`clustertwin.cluster.topology`."""
        from .topology import build_compact

        return build_compact(self)

    def graph(self):
        """networkx graph of devices, NICs, switches and links (built on request; slow above ~10k devices)."""
        return self.topology_arrays().to_networkx()


def build_cluster(
    system: str | SystemSpec,
    domains: int,
    fabric: str | ScaleOutTech | None = None,
    *,
    topology: str | None = None,
    oversubscription: float = 1.0,
    tiers: int | str = "auto",
    domain_size: int | None = None,
    catalog=None,
) -> Cluster:
    """Validate the input and build a :class:`Cluster`. Bad input raises ``InputError`` (exit 2)."""
    if catalog is None and (isinstance(system, str) or isinstance(fabric, str) or fabric is None):
        from ..catalog import load_catalog

        catalog = load_catalog()
    sys_ = catalog.system(system) if isinstance(system, str) else system
    if fabric is None:
        fabric = sys_.default_scaleout
    fab = catalog.fabric(fabric) if isinstance(fabric, str) else fabric
    if topology is None:
        from .buildable import default_topology

        topology = default_topology(sys_, fab)  # rail, or dual-plane for a two-plane fabric
    if topology not in SCALEOUT_TOPOLOGIES:
        raise UnknownNameError("scale-out topology", topology, SCALEOUT_TOPOLOGIES)
    if isinstance(domains, bool) or int(domains) != domains or domains < 1:
        raise InputError(f"--domains must be a whole number >= 1, got {domains}")
    from ..limits import check_limit

    check_limit("domains", domains)
    domains = int(domains)
    if isinstance(tiers, str) and tiers != "auto":
        if not tiers.isdigit():
            raise InputError(f"--tiers must be 1, 2, 3 or auto, got {tiers!r}")
        tiers = int(tiers)
    check_oversubscription(oversubscription)
    full = sys_.devices_per_domain
    size = full if domain_size is None else int(domain_size)
    allowed = sorted(set(sys_.supported_domain_sizes) | {full})
    if size not in allowed:
        raise InputError(
            f"system {sys_.id} does not support a scale-up domain of {size} devices; supported: "
            f"{', '.join(map(str, allowed))}",
            hint="pick one of the supported domain sizes (--domain-size) or omit it for the full domain",
        )
    if size > sys_.scaleup.max_domain and sys_.scaleup_topology == sys_.scaleup.topology:
        raise InputError(
            f"a domain of {size} exceeds the {sys_.scaleup.id} limit of {sys_.scaleup.max_domain} devices"
        )
    n = domains * size
    if n % sys_.devices_per_host and size < sys_.devices_per_host:
        raise InputError(
            f"{domains} domain(s) of {size} devices do not fill whole {sys_.devices_per_host}-device hosts of "
            f"{sys_.id}",
            hint=f"use a multiple of {sys_.devices_per_host // size} domains",
        )
    if domains > 1 and sys_.nics_per_host == 0:
        raise InputError(f"system {sys_.id} has no scale-out NICs, so it cannot form more than one domain")
    cluster = Cluster(
        system=sys_, domains=domains, fabric=fab, topology=topology, oversubscription=float(oversubscription),
        tiers=tiers, domain_size=size if size != full else 0,
    )
    try:  # size the network now so impossible fabrics fail here with the limit and what would work
        _ = cluster.scaleout
    except InputError as exc:
        from .buildable import unbuildable

        raise unbuildable(cluster, exc, catalog) from None
    _ = cluster.frontend
    return cluster


__all__ = ["Cluster", "Route", "build_cluster", "torus_dims"]

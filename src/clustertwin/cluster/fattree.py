"""Sizing of a scale-out fat tree (folded Clos) from the switch radix. Pure, no I/O, no numpy.

Stable API (the fabric simulator imports it)::

    from clustertwin.cluster.fattree import size_fat_tree, FatTreeSizing
    s = size_fat_tree(endpoints=2048, radix=64)            # tiers="auto", oversubscription=1, kind="fat-tree"
    s.tiers, s.leaf, s.spine, s.core                       # 2, 64, 32, 0
    s.switches_per_tier, s.links_per_tier                  # (64, 32), (2048, 2048)
    s.bisection_bw(port_bw=50e9)                           # bytes/s per direction across the worst half cut

Model (Leiserson 1985 fat trees; Al-Fares et al., SIGCOMM'08 "A scalable, commodity data center
network architecture" for the k-ary fat tree; NVIDIA DGX SuperPOD reference architectures for the
rail-optimised variant; Qian et al., SIGCOMM'24 "Alibaba HPN" for the dual-plane variant):

* every switch has ``radix`` = k ports at the endpoint port speed;
* the leaf (tier 1) splits its ports d down : u up with d/u ~ ``oversubscription`` (d + u = k,
  d = floor(k*o/(1+o))); the tiers above are non-blocking (k/2 down, k/2 up, the top tier uses all
  k ports downwards); when a rail (or the whole plane) fits on one partly filled leaf, that leaf
  cables only ceil(endpoints/o) uplinks (so 384 NICs on 8 rails use 8 x 48 uplinks, not 8 x 64);
* ``tiers="auto"``: 1 when every endpoint of a plane fits one switch, else the smallest of 2 and 3
  that fits;
* 2 tiers: ``leaf = ceil(E/d)``, ``spine`` = the fewest S >= ``ceil(leaf*u/k)`` with
  ``leaf*ceil(u/S) <= k``: every leaf spreads its uplinks over the spines in the same pattern
  (uplink j to spine j mod S), so each spine has the same number of parallel links to every leaf and
  any two leaves reach each other over all u links; when a partly filled leaf allows it, fewer down
  ports with a ratio-preserving uplink count are used if that needs fewer switches (a 2:1 design
  never needs more switches than 1:1; #19); at most k leaves, so ``max_endpoints = k*d`` (= k^2/2
  non-blocking);
* 3 tiers: pods of k/2 leaves and u pod-spines, ``pods = ceil(leaf/(k/2))``, ``spine = pods*u``;
  spine i of every pod connects to core group i of G cores, G = the smallest divisor of k/2 that is
  >= ``ceil(pods*(k/2)/k)``, so ``core = u*G``; at most k pods, so ``max_endpoints = k*(k/2)*d`` (= k^3/4);
* 1 tier: one switch per plane holds every endpoint (all rails), ``E <= k`` per plane;
* ``rail`` (rail-optimised): NIC r of every host sits on a leaf of rail r, so
  ``leaf = rails*ceil(E/rails/d)``; the layers above are shared as in a fat tree;
* ``dual-plane``: every NIC has 2 ports, one per plane; each plane is an independent fat tree for
  E/2 ports; counts below are totals over both planes.

These reproduce the DGX SuperPOD B200 compute-fabric table (2-64 SU, 64-port switches) exactly;
see tests/cluster/test_fattree.py.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from ..errors import InputError


def check_oversubscription(value: float) -> float:
    """``--oversubscription``: the leaf's down:up port ratio, one meaning in every command (cluster, bom,
    fabric, plan, estimate, collective, schedule): a finite number >= 1 (1 = non-blocking)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = math.nan
    if not (v >= 1.0) or not math.isfinite(v):
        raise InputError(f"--oversubscription must be >= 1 (the leaf's down:up port ratio), got {value}",
                         hint="1 is a non-blocking fat tree, 2 means 2:1")
    from ..limits import check_limit

    check_limit("oversubscription", v)  # absurd ratios (1e12:1) are refused, not priced
    return v

KINDS = ("fat-tree", "rail", "dual-plane")


@dataclass(frozen=True)
class FatTreeSizing:
    """Switch and link counts of one scale-out network (totals over all planes).

    Plain frozen dataclass (``vars(sizing)`` lists the fields); ``to_dict()`` adds the derived counts."""

    kind: str  # fat-tree | rail | dual-plane
    endpoints: int  # NIC ports attached to the network (all planes)
    radix: int  # switch ports at the endpoint speed
    tiers: int  # 1, 2 or 3
    planes: int  # 1, or 2 for dual-plane
    rails: int  # leaf groups for rail-optimised (1 otherwise)
    oversubscription: float  # actual leaf down:up ratio after rounding to whole ports
    leaf_down: int  # leaf ports facing endpoints
    leaf_up: int  # leaf ports cabled to the spine (0 for 1 tier); leaf_down + leaf_up <= radix
    leaf: int
    spine: int
    core: int
    max_endpoints: int  # largest E this radix/tiers/oversubscription holds (all planes)

    @property
    def switches_per_tier(self) -> tuple[int, ...]:
        return (self.leaf, self.spine, self.core)[: self.tiers]

    @property
    def switches(self) -> int:
        return self.leaf + self.spine + self.core

    @property
    def links_per_tier(self) -> tuple[int, ...]:
        """Cables per tier: (endpoint-leaf, leaf-spine[, spine-core])."""
        out = [self.endpoints]
        if self.tiers >= 2:
            out.append(self.leaf * self.leaf_up)
        if self.tiers >= 3:
            out.append(self.spine * (self.radix // 2))
        return tuple(out)

    @property
    def links(self) -> int:
        return sum(self.links_per_tier)

    @property
    def endpoints_per_plane(self) -> int:
        return self.endpoints // self.planes

    @property
    def max_switch_hops(self) -> int:
        """Switches crossed between the two farthest endpoints (up to the top tier and down)."""
        return 2 * self.tiers - 1

    @property
    def hops(self) -> dict[str, int]:
        """Switch hops by locality: same leaf, same pod (3 tiers), across the top tier."""
        out = {"same_leaf": 1}
        if self.tiers >= 2:
            out["same_pod" if self.tiers == 3 else "other_leaf"] = 3
        if self.tiers == 3:
            out["other_pod"] = 5
        return out

    @property
    def bisection_ports(self) -> float:
        """Endpoint-speed links crossing the worst balanced cut, per direction.

        Closed form: min(E, leaf uplinks) / 2 (the leaf uplinks carry all traffic that leaves a leaf;
        the tiers above are non-blocking). One tier: E/2.
        """
        if self.tiers == 1:
            return self.endpoints / 2
        return min(self.endpoints, self.leaf * self.leaf_up) / 2

    def bisection_bw(self, port_bw: float) -> float:
        """Bisection bandwidth in bytes/s per direction for a port speed ``port_bw`` (bytes/s)."""
        return self.bisection_ports * port_bw

    def ports_used(self) -> dict[str, int]:
        """Largest number of ports used on one switch of each tier (never above ``radix``)."""
        out = {"leaf": min(self.leaf_down, math.ceil(self.endpoints / max(self.leaf, 1))) + self.leaf_up}
        if self.tiers == 2:
            per_plane = max(self.spine // self.planes, 1)
            out["spine"] = self.leaf // self.planes * math.ceil(self.leaf_up / per_plane)
        if self.tiers == 3:
            half = self.radix // 2
            leaves_per_pod = min(half, self.leaf // self.planes)
            out["spine"] = leaves_per_pod + half
            out["core"] = math.ceil(self.spine * half / max(self.core, 1))
        return out

    @property
    def pods(self) -> int:
        """Pods per plane (3 tiers): groups of k/2 leaves sharing u pod-spines."""
        if self.tiers < 3:
            return 1
        return math.ceil(self.leaf // self.planes / (self.radix // 2))

    @property
    def core_group(self) -> int:
        """Cores per core group (3 tiers): spine i of every pod connects to core group i."""
        if self.tiers < 3:
            return 0
        return self.core // self.planes // self.leaf_up

    def to_dict(self) -> dict:
        return {
            "kind": self.kind, "endpoints": self.endpoints, "radix": self.radix, "tiers": self.tiers,
            "planes": self.planes, "rails": self.rails, "oversubscription": self.oversubscription,
            "leaf_down": self.leaf_down, "leaf_up": self.leaf_up,
            "switches_per_tier": list(self.switches_per_tier), "links_per_tier": list(self.links_per_tier),
            "switches": self.switches, "links": self.links, "max_endpoints": self.max_endpoints,
            "max_switch_hops": self.max_switch_hops, "hops": self.hops, "bisection_ports": self.bisection_ports,
        }


def _spines_2tier(leaves: int, up: int, radix: int) -> int:
    """Fewest spines for ``leaves`` leaves with ``up`` uplinks each: every leaf spreads its
    uplinks over the S spines in the same pattern (``ceil(up/S)`` or ``floor(up/S)`` parallel
    links per spine), so every spine sees the same count from each leaf and any two leaves reach
    each other over all ``up`` links (full leaf bandwidth through the spine layer); the busiest
    spine needs ``leaves * ceil(up/S)`` ports."""
    s = max(1, math.ceil(leaves * up / radix))
    while leaves * math.ceil(up / s) > radix:
        s += 1
    return s


def _divisor_at_least(n: int, m: int) -> int:
    """Smallest divisor of ``n`` that is >= ``m``: spread every switch's uplinks evenly over the
    switches above it (unequal parallel-link counts would make the bisection lower than the closed form)."""
    for cand in range(max(1, m), n + 1):
        if n % cand == 0:
            return cand
    return n


@functools.lru_cache(maxsize=4096)
def _two_tier(per_rail: int, rails: int, down: int, up: int, oversubscription: float, radix: int) -> tuple[int, int, int, int]:
    """2 tiers: (leaf down ports, uplinks, leaves per rail, spines).

    Starts from the usual split (``down``, ``up``; a single partly filled leaf per rail cables only
    the uplinks it needs) and takes another split with the same number of leaves (fewer down ports
    in use per leaf, as many uplinks as the ratio needs) only when it needs strictly fewer switches:
    every leaf spreads its uplinks evenly over the spines (the spine count divides the uplinks)
    and the spines need ``leaves * uplinks`` ports, so a prime uplink count -- 43 of a 128-port leaf
    at 2:1 -- can only be spread over 43 spines (#19: 1,024 GPUs on RoCE got 43 spines at 2:1 vs
    8 at 1:1). 84 down : 42 up keeps 2:1 with 6 spines. Every candidate keeps the actual
    down:up ratio of the ports in use at or below ``oversubscription``.
    """
    def spines(leaves: int, u: int) -> int:
        return _spines_2tier(leaves, u, radix)

    lpr = math.ceil(per_rail / down)
    if lpr == 1:  # one partly filled leaf per rail: cable only the uplinks it needs
        up = min(up, max(1, math.ceil(per_rail / oversubscription - 1e-9)))
    best = (down, up, lpr, spines(rails * lpr, up))
    best_n = rails * lpr + best[3]
    for d in range(down, max(1, math.ceil(per_rail / lpr)) - 1, -1):  # same leaves, fewer ports per leaf
        used = min(d, per_rail)
        u_min = max(1, math.ceil(used / oversubscription - 1e-9))
        for u in range(u_min, radix - d + 1):
            n = rails * lpr + spines(rails * lpr, u)
            if n < best_n:
                best, best_n = (d, u, lpr, n - rails * lpr), n
    return best


def _split(radix: int, oversubscription: float) -> tuple[int, int]:
    down = int(math.floor(radix * oversubscription / (1.0 + oversubscription) + 1e-9))
    down = max(1, min(down, radix - 1))
    return down, radix - down


def max_endpoints(radix: int, tiers: int, oversubscription: float = 1.0, planes: int = 1) -> int:
    """Largest number of endpoint ports (all planes) a fat tree of this radix and tiers holds."""
    if tiers == 1:
        return radix * planes
    down, _ = _split(radix, oversubscription)
    if tiers == 2:
        return radix * down * planes
    return radix * (radix // 2) * down * planes


def size_fat_tree(
    endpoints: int,
    radix: int,
    tiers: int | str | None = "auto",
    oversubscription: float = 1.0,
    kind: str = "fat-tree",
    rails: int = 1,
) -> FatTreeSizing:
    """Size a scale-out network; raises ``InputError`` (with the limit) for impossible inputs.

    ``endpoints``: NIC ports attached (for ``dual-plane`` the total over both planes, i.e. 2 per NIC);
    ``radix``: switch ports at the endpoint speed; ``tiers``: 1, 2, 3 or ``"auto"`` (the smallest of 2
    and 3 that fits); ``oversubscription``: leaf down:up ratio, >= 1; ``rails``: NICs per host for
    ``rail`` (endpoints must be a multiple of it).
    """
    if kind not in KINDS:
        from ..errors import UnknownNameError

        raise UnknownNameError("scale-out topology", kind, KINDS)
    if int(endpoints) != endpoints or endpoints < 1:
        raise InputError(f"a scale-out network needs at least 1 endpoint, got {endpoints}")
    endpoints = int(endpoints)
    if int(radix) != radix or radix < 4 or radix % 2:
        raise InputError(f"switch radix must be an even number >= 4, got {radix}")
    radix = int(radix)
    oversubscription = check_oversubscription(oversubscription)
    if tiers is None:
        tiers = "auto"
    planes = 2 if kind == "dual-plane" else 1
    if planes == 2 and endpoints % 2:
        raise InputError(
            f"a dual-plane network needs an even number of NIC ports (2 per NIC), got {endpoints}",
            hint="each NIC puts one port on each plane",
        )
    if kind == "rail":
        if rails < 1 or endpoints % rails:
            raise InputError(
                f"rail-optimised: {endpoints} endpoints is not a multiple of {rails} rails (NICs per host)"
            )
    else:
        rails = 1
    per_plane = endpoints // planes

    if tiers == "auto" and per_plane <= radix:
        tiers = 1  # one switch per plane holds every endpoint (all rails on it)
    if tiers == "auto":
        fits = [t for t in (2, 3) if per_plane <= max_endpoints(radix, t, oversubscription)]
        if not fits:
            raise InputError(
                f"{endpoints} endpoints do not fit a 3-tier {kind} of radix-{radix} switches: the limit is "
                f"{max_endpoints(radix, 3, oversubscription, planes)} (k^3/4 x {planes} plane(s) at "
                f"oversubscription {oversubscription:g})",
                hint="use fewer domains, a higher-radix fabric, more oversubscription or the dual-plane topology",
            )
        tiers = fits[0]
    if tiers not in (1, 2, 3):
        raise InputError(f"tiers must be 1, 2, 3 or 'auto', got {tiers!r}")
    limit = max_endpoints(radix, tiers, oversubscription)
    if per_plane > limit:
        raise InputError(
            f"{endpoints} endpoints do not fit a {tiers}-tier {kind} of radix-{radix} switches: the limit is "
            f"{limit * planes} ({'k' if tiers == 1 else 'k^2/2' if tiers == 2 else 'k^3/4'} at oversubscription 1, "
            f"scaled by the leaf down:up split and {planes} plane(s))",
            hint="use more tiers (--tiers 3), fewer domains or a higher-radix fabric",
        )

    if tiers == 1:
        down, up = (radix, 0)
        leaf = 1
        spine = core = 0
        actual = 1.0
    else:
        down, up = _split(radix, oversubscription)
        per_rail = per_plane // rails
        if tiers == 2:
            down, up, leaves_per_rail, spine = _two_tier(per_rail, rails, down, up, float(oversubscription), radix)
            leaf = rails * leaves_per_rail
            core = 0
        else:
            leaves_per_rail = math.ceil(per_rail / down)
            leaf = rails * leaves_per_rail
            if leaves_per_rail == 1:  # one partly filled leaf per rail: cable only the uplinks it needs
                up = min(up, max(1, math.ceil(per_rail / oversubscription - 1e-9)))
            half = radix // 2
            pods = math.ceil(leaf / half)
            spine = pods * up  # spine i of every pod ...
            core = up * _divisor_at_least(half, math.ceil(pods * half / radix))  # ... reaches core group i
        actual = min(down, per_rail) / up
        groups = leaf if tiers == 2 else math.ceil(leaf / (radix // 2))
        if groups > radix:
            raise InputError(
                f"{endpoints} endpoints on {rails} rail(s) need {groups} {'leaves' if tiers == 2 else 'pods'} per plane, "
                f"more than a radix-{radix} {'spine' if tiers == 2 else 'core'} switch can reach (limit {radix})",
                hint="use --tiers 3, fewer domains or a higher-radix fabric",
            )
    return FatTreeSizing(
        kind=kind,
        endpoints=endpoints,
        radix=radix,
        tiers=int(tiers),
        planes=planes,
        rails=rails,
        oversubscription=actual,
        leaf_down=down,
        leaf_up=up,
        leaf=leaf * planes,
        spine=spine * planes,
        core=core * planes,
        max_endpoints=limit * planes,
    )


__all__ = ["KINDS", "FatTreeSizing", "max_endpoints", "size_fat_tree"]

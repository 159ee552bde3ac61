"""Failed and degraded links and switches, slow NICs, stragglers.

A ``Faults`` value is pure data; ``apply_faults`` returns a new ``FabricTopology`` whose link
capacities reflect it (0 = failed). A cable failure takes both directions down. Routing then only
uses the remaining equal-cost paths (ECMP re-hashes, adaptive avoids, spraying spreads over the
rest); a flow with no path left raises ``InputError`` naming its endpoints.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from ..errors import InputError
from .topology import FabricTopology, refresh_bundles


@dataclass(frozen=True, slots=True, kw_only=True)
class Faults:
    """Faults to inject.

    ``links``: physical link ids (their cable: both directions fail). ``switches``: names
    ``leaf:N``, ``spine:P.J`` (virtual spine J of pod P; ``spine:J`` in a 2-tier fabric) or
    ``core:J.T``, optionally prefixed by a plane ``p1:``. ``random_links``: fail that many
    switch-to-switch cables drawn with ``seed``. ``degraded``: link id -> remaining fraction of
    bandwidth. ``slow_nics``: endpoint -> remaining fraction (both directions). ``stragglers``:
    rank -> start delay in seconds (applied to the first repetition of the first phase).
    """

    links: tuple[int, ...] = ()
    switches: tuple[str, ...] = ()
    random_links: int = 0
    seed: int = 0
    degraded: Mapping[int, float] = field(default_factory=dict)
    slow_nics: Mapping[int, float] = field(default_factory=dict)
    stragglers: Mapping[int, float] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not (self.links or self.switches or self.random_links or self.degraded or self.slow_nics
                    or self.stragglers)

    @property
    def changes_links(self) -> bool:
        return bool(self.links or self.switches or self.random_links or self.degraded or self.slow_nics)


def _cable_partner(topo: FabricTopology, link: int) -> int:
    """The opposite direction of the same cable."""
    s = topo.shape
    plane, r = divmod(int(link), topo.plane_links)
    E, NLU = s.n_endpoints, s.n_leaves * s.u1
    NSU = s.n_pods * s.u1 * s.u2 if s.tiers == 3 else 0
    bounds = [E, E, NLU, NLU, NSU, NSU]
    start = 0
    for k, n in enumerate(bounds):
        if r < start + n:
            off = r - start
            partner_start = start + n if k % 2 == 0 else start - bounds[k - 1]
            return plane * topo.plane_links + partner_start + off
        start += n
    raise InputError(f"link id {link} is outside the fabric (0..{topo.n_links - 1})")


def switch_cables(topo: FabricTopology) -> np.ndarray:
    """Ids of the upward direction of every switch-to-switch cable (leaf-up and spine-up links)."""
    ids = np.nonzero(np.isin(topo.tier, (2, 4)))[0]
    return ids


_SW_RE = re.compile(r"^(?:p(\d+):)?(leaf|spine|core):(\d+)(?:\.(\d+))?$")


def _switch_links(topo: FabricTopology, name: str) -> np.ndarray:
    s = topo.shape
    m = _SW_RE.match(name.strip())
    if not m:
        raise InputError(
            f"cannot read switch name {name!r}",
            hint="write leaf:N, spine:P.J (spine:J in 2 tiers) or core:J.T, optionally with a plane prefix p1:",
        )
    plane = int(m.group(1) or 0)
    if plane >= s.planes:
        raise InputError(f"switch {name!r}: plane {plane} does not exist (the fabric has {s.planes})")
    kind, a, b = m.group(2), int(m.group(3)), m.group(4)
    if kind == "leaf":
        if a >= s.n_leaves:
            raise InputError(f"switch {name!r}: the fabric has leaves 0..{s.n_leaves - 1}")
        eps = np.nonzero(topo.endpoint_leaf == a)[0]
        j = np.arange(s.u1)
        return np.concatenate([topo.nic_up(eps, plane), topo.nic_down(eps, plane),
                               topo.leaf_up(a, j, plane), topo.leaf_down(a, j, plane)])
    if kind == "spine":
        pod, j = (a, int(b)) if b is not None else (0, a)
        if pod >= s.n_pods or j >= s.u1:
            raise InputError(f"switch {name!r}: spines are spine:P.J with P < {s.n_pods}, J < {s.u1}")
        leaves = np.arange(pod * s.leaves_per_pod, min(s.n_leaves, (pod + 1) * s.leaves_per_pod))
        out = [topo.leaf_up(leaves, j, plane), topo.leaf_down(leaves, j, plane)]
        if s.tiers == 3:
            t = np.arange(s.u2)
            out += [topo.spine_up(pod, j, t, plane), topo.spine_down(pod, j, t, plane)]
        return np.concatenate(out)
    if s.tiers != 3:
        raise InputError(f"switch {name!r}: a 2-tier fabric has no core switches")
    if b is None or a >= s.u1 or int(b) >= s.u2:
        raise InputError(f"switch {name!r}: cores are core:J.T with J < {s.u1}, T < {s.u2}")
    pods = np.arange(s.n_pods)
    return np.concatenate([topo.spine_up(pods, a, int(b), plane), topo.spine_down(pods, a, int(b), plane)])


def apply_faults(topo: FabricTopology, faults: Faults | None) -> FabricTopology:
    """A copy of ``topo`` with the link-level faults applied (stragglers are handled by traffic)."""
    if faults is None or not faults.changes_links:
        return topo
    cap = topo.capacity.copy()
    notes: list[str] = []
    failed: list[int] = []
    for link in faults.links:
        link = int(link)
        if not 0 <= link < topo.n_links:
            raise InputError(f"link id {link} is outside the fabric (0..{topo.n_links - 1})")
        failed += [link, _cable_partner(topo, link)]
    if faults.random_links:
        cables = switch_cables(topo)
        if faults.random_links > cables.size:
            raise InputError(
                f"cannot fail {faults.random_links} links: the fabric has {cables.size} switch-to-switch cables"
            )
        rng = np.random.default_rng(faults.seed)
        pick = rng.choice(cables, size=faults.random_links, replace=False)
        for link in pick:
            failed += [int(link), _cable_partner(topo, int(link))]
    for link in failed:
        notes.append(f"failed {topo.link_name(link)}")
    if failed:
        cap[np.asarray(failed, dtype=np.int64)] = 0.0
    for name in faults.switches:
        ids = _switch_links(topo, name)
        cap[ids] = 0.0
        notes.append(f"failed switch {name}")
    for link, frac in faults.degraded.items():
        if not 0 <= int(link) < topo.n_links:
            raise InputError(f"degraded link id {link} is outside the fabric (0..{topo.n_links - 1})")
        if not 0 < frac <= 1:
            raise InputError(f"degraded link {link}: remaining fraction must be in (0, 1], got {frac}")
        for lk in (int(link), _cable_partner(topo, int(link))):
            cap[lk] *= frac
        notes.append(f"degraded {topo.link_name(int(link))} to {frac:.0%}")
    for ep, frac in faults.slow_nics.items():
        if not 0 <= int(ep) < topo.shape.n_endpoints:
            raise InputError(f"slow NIC {ep} is not an endpoint (0..{topo.shape.n_endpoints - 1})")
        if not 0 < frac <= 1:
            raise InputError(f"slow NIC {ep}: remaining fraction must be in (0, 1], got {frac}")
        for p in range(topo.shape.planes):
            cap[topo.nic_up(int(ep), p)] *= frac
            cap[topo.nic_down(int(ep), p)] *= frac
        notes.append(f"slow NIC {ep} at {frac:.0%}")
    out = replace(topo, capacity=cap, failed_note=tuple(notes))
    refresh_bundles(out)
    return out

"""One buildability check for every command: can ``n_gpus`` GPUs of a system be wired with this
scale-out fabric (tiers, switch radix, oversubscription, planes)?

``plan``, ``estimate``, ``sweep``, ``compare``, ``fabric``, ``goodput``, ``bom`` and ``report`` all
size the network through :func:`check_buildable` (``build_cluster`` calls it), so a cluster that
cannot be built is refused everywhere the same way: ``InputError`` (exit 2) naming the limit of the
chosen design and the smallest changes that do work -- more tiers, a second plane, more
oversubscription, a larger-radix fabric from the catalog -- and the largest GPU count that fits.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import InputError
from .fattree import check_oversubscription, max_endpoints


def default_topology(system: Any, fabric: Any = None) -> str:
    """``dual-plane`` for a fabric with two planes (``planes: 2`` in the catalog), else ``rail`` (NIC
    r of every host on the rail-r leaf) -- what ``build_cluster`` uses when no topology is given."""
    return "dual-plane" if int(getattr(fabric, "planes", 1) or 1) > 1 else "rail"


KNOBS = ("tiers", "topology", "fabric", "oversubscription")


def check_buildable(system: Any, fabric: Any, n_gpus: int, *, topology: str | None = None,
                    tiers: int | str | None = "auto", oversubscription: float = 1.0, catalog: Any = None,
                    knobs: tuple[str, ...] = KNOBS):
    """Size the compute scale-out network for ``n_gpus`` GPUs (whole domains); returns the
    :class:`~.model.Cluster` (``build_cluster`` also sizes the front-end network).

    Raises ``InputError`` with the limit and the smallest changes that work when it cannot be built;
    ``knobs``: the options the calling command offers (only those are suggested).
    """
    from .model import Cluster

    if catalog is not None:
        system = catalog.system(system) if isinstance(system, str) else system
        fabric = catalog.fabric(fabric) if isinstance(fabric, str) else fabric
    check_oversubscription(oversubscription)
    per = system.devices_per_domain
    domains = max(1, -(-int(n_gpus) // per))
    cluster = Cluster(system=system, domains=domains, fabric=fabric, topology=topology or default_topology(system, fabric),
                      oversubscription=float(oversubscription), tiers=tiers if tiers is not None else "auto",
                      domain_size=0)
    if domains > 1 and system.nics_per_host == 0:
        raise InputError(f"system {system.id} has no scale-out NICs, so it cannot form more than one domain")
    try:
        _ = cluster.scaleout
    except InputError as exc:
        raise unbuildable(cluster, exc, catalog, knobs) from None
    return cluster


def _fits(cluster_cls, system, fabric, domains, topology, tiers, oversubscription) -> bool:
    c = cluster_cls(system=system, domains=domains, fabric=fabric, topology=topology,
                    oversubscription=float(oversubscription), tiers=tiers, domain_size=0)
    try:
        _ = c.scaleout
    except InputError:
        return False
    return True


def unbuildable(cluster: Any, error: InputError, catalog: Any = None, knobs: tuple[str, ...] = KNOBS) -> InputError:
    """The error for a cluster whose scale-out network cannot be sized, with what would work."""
    from .model import Cluster

    sysm, fab = cluster.system, cluster.fabric
    topo, tiers, o = cluster.topology, cluster.tiers, cluster.oversubscription
    n_gpus, doms = cluster.num_devices, cluster.domains
    ports = cluster.num_nics * cluster.ports_per_nic
    radix = cluster.switch_radix
    planes = 2 if topo == "dual-plane" else 1
    t_lim = 3 if tiers in ("auto", None) else int(tiers)
    limit = max_endpoints(radix, t_lim, o, planes)
    ports_per_gpu = cluster.num_nics * cluster.ports_per_nic / max(1, n_gpus)
    fixes: list[str] = []

    def fits(**kw) -> bool:
        args = dict(system=sysm, fabric=fab, domains=doms, topology=topo, tiers=tiers, oversubscription=o)
        args.update(kw)
        return _fits(Cluster, **args)

    tier_opts = [None] + ([3] if "tiers" in knobs and tiers not in ("auto", None) and int(tiers) < 3 else [])
    topo_opts = [None] + (["dual-plane"] if "topology" in knobs and topo != "dual-plane" else [])
    over_opts = [None] + [x for x in (1.5, 2.0, 3.0, 4.0) if x > o and "oversubscription" in knobs]
    fab_opts: list = [None]
    if catalog is not None and "fabric" in knobs:
        alts = [(getattr(f, "kind", None) != getattr(fab, "kind", None), abs(f.port_bw - fab.port_bw), f.switch_radix, fid)
                for fid, f in catalog.scaleout.items()
                if fid != fab.id and (f.switch_radix > fab.switch_radix or f.planes > fab.planes)
                and f.port_bw >= min(fab.port_bw, sysm.nic_bw)]
        fab_opts += [catalog.scaleout[a[3]] for a in sorted(alts)]
    found: list[tuple[int, int, str, bool]] = []  # (changes, preference, words, changes oversubscription)
    for t in tier_opts:
        for tp in topo_opts:
            for fi, f in enumerate(fab_opts):
                for oi, oo in enumerate(over_opts):
                    # preference: more tiers, a second plane, oversubscription, then another fabric
                    order = (tp is not None) * 1 + (oo is not None) * (10 + oi) + (f is not None) * (100 + fi)
                    n = sum(x is not None for x in (t, tp, f, oo))
                    if n == 0 or n > 2:
                        continue
                    kw = {k: v for k, v in (("tiers", t), ("topology", tp), ("fabric", f), ("oversubscription", oo))
                          if v is not None}
                    if f is not None and tp is None and f.planes != (2 if topo == "dual-plane" else 1):
                        kw["topology"] = default_topology(sysm, f)  # a two-plane fabric is wired dual-plane
                    if not fits(**kw):
                        continue
                    words = ([f"--tiers {t}"] if t else []) + ([f"--topology {tp}"] if tp else []) + \
                        ([f"--fabric {f.id} ({f'{f.planes} planes' if f.planes > 1 else f'radix {f.switch_radix}'})"]
                         if f else []) + \
                        ([f"--oversubscription {oo:g}"] if oo else [])
                    found.append((n, order, " + ".join(words), oo is not None))
    if found:
        best_n = min(x[0] for x in found)
        seen_over = False
        for n, _, text, changes_over in sorted(found):
            if n != best_n:
                continue
            if changes_over and n == 1:  # only the smallest ratio that fits
                if seen_over:
                    continue
                seen_over = True
            fixes.append(text)
            if len(fixes) == 4:
                break
    max_gpus = int(limit / ports_per_gpu) // sysm.devices_per_domain * sysm.devices_per_domain if ports_per_gpu else 0
    if max_gpus >= sysm.devices_per_domain:
        fixes.append(f"at most {max_gpus:,} GPUs on this design")
    msg = (f"{n_gpus:,} GPUs of {sysm.id} cannot be built on {fab.id}: they need {ports:,} NIC ports and the "
           f"limit is {limit} for a {t_lim}-tier {topo} of radix-{radix} switches ({planes} "
           f"plane{'s' if planes > 1 else ''}, oversubscription {o:g})")
    hint = ("smallest changes that work: " + "; ".join(fixes)) if fixes else error.hint
    return InputError(msg, hint=hint)


def largest_buildable_gpus(system: Any, fabric: Any, *, topology: str | None = None, oversubscription: float = 1.0,
                           planes: int = 1) -> int:
    """The most GPUs (whole domains) a 3-tier design of this fabric holds (for messages and tables)."""
    from .model import Cluster

    c = Cluster(system=system, domains=1, fabric=fabric, topology=topology or default_topology(system, fabric),
                oversubscription=float(oversubscription), tiers="auto", domain_size=0)
    per_gpu = c.num_nics * c.ports_per_nic / c.num_devices
    lim = max_endpoints(c.switch_radix, 3, oversubscription, 2 if c.topology == "dual-plane" else 1)
    return int(lim / per_gpu) // system.devices_per_domain * system.devices_per_domain if per_gpu else math.inf


__all__ = ["check_buildable", "default_topology", "largest_buildable_gpus", "unbuildable"]

"""Gang placement policies behind one interface.

A policy decides (a) the order in which queued jobs are considered and whether a blocked head of the
queue stops the pass (``order``), and (b) where a job's pods go (``place``). Every placement is a gang:
all pods or none. ``place`` sees ``cap`` = pods of this job each node can take now (free GPUs //
GPUs per pod) and returns one node index per pod, or ``None``.

=================  ==========================================================================
``fifo``           FIFO gang, first fit in node order, ignores topology wishes; a blocked head
                   blocks the queue (the baseline)
``backfill``       EASY backfill (Lifka 1995 / Slurm sched/backfill): FIFO with a reservation for
                   the head; later jobs start now if they end before the reservation or use only
                   GPUs the head will not need; first-fit placement
``priority``       highest priority first; a blocked job preempts lower-priority running jobs
                   (latest started first), which restart from their last checkpoint;
                   topology-aware (TAS) placement
``binpack``        Volcano network-topology-aware binpack over HyperNode tiers: the lowest tier
                   (node, NVLink domain, leaf, spine) with one HyperNode that can hold the gang,
                   the fullest such HyperNode, nodes filled fullest first
``tas``            Kueue Topology-Aware Scheduling: ``required`` level is a hard limit (one unit of
                   that level), ``preferred`` is tried first and widened level by level; BestFit
                   unit choice; without wishes the job goes where it spans the fewest domains
``slurm-block``    Slurm topology/block: blocks = NVLink domains; ``--segment`` S pods per
                   segment, each segment inside one block; without a segment, whole-block chunks;
                   blocks of one leaf first, then the least free block that fits
``dra``            Kubernetes DRA ComputeDomain (NVIDIA IMEX): the job asks for chunks of
                   ``compute_domain`` GPUs (default: up to one NVLink domain), each chunk in one
                   NVLink domain, BestFit domain; no network-tier awareness above the domain
=================  ==========================================================================

The openb GPU-sharing policies (``random``, ``dotprod``, ``clustering``, ``packing``, ``bestfit``,
``fgd``) are registered too; they place fractional-GPU tasks and run under ``schedule openb``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import UnknownNameError
from .inventory import LEVELS, Inventory


@dataclass(frozen=True)
class PolicyInfo:
    name: str
    kind: str  # gang | sharing
    description: str


GANG_POLICIES: dict[str, PolicyInfo] = {
    "fifo": PolicyInfo("fifo", "gang", "FIFO gang, first fit, no topology (baseline)"),
    "backfill": PolicyInfo("backfill", "gang", "EASY backfill, first fit"),
    "priority": PolicyInfo("priority", "gang", "priority with preemption, topology-aware"),
    "binpack": PolicyInfo("binpack", "gang", "Volcano binpack over HyperNode tiers"),
    "tas": PolicyInfo("tas", "gang", "Kueue topology-aware scheduling (required / preferred levels)"),
    "slurm-block": PolicyInfo("slurm-block", "gang", "Slurm topology/block with --segment"),
    "dra": PolicyInfo("dra", "gang", "DRA ComputeDomain inside NVLink domains"),
}
SHARING_POLICIES: dict[str, PolicyInfo] = {
    "random": PolicyInfo("random", "sharing", "Random-fit (openb)"),
    "dotprod": PolicyInfo("dotprod", "sharing", "DotProduct / Tetris (openb)"),
    "clustering": PolicyInfo("clustering", "sharing", "GPU Clustering (openb)"),
    "packing": PolicyInfo("packing", "sharing", "GPU Packing (openb)"),
    "bestfit": PolicyInfo("bestfit", "sharing", "Best-fit (openb)"),
    "fgd": PolicyInfo("fgd", "sharing", "Fragmentation Gradient Descent (Weng et al. ATC'23)"),
}
ALL_POLICIES = {**GANG_POLICIES, **SHARING_POLICIES}


def gang_policy(name: str) -> PolicyInfo:
    if name in GANG_POLICIES:
        return GANG_POLICIES[name]
    if name in SHARING_POLICIES:
        from ..errors import InputError

        raise InputError(f"policy {name!r} places fractional-GPU tasks (openb); it does not apply to gang jobs",
                         hint=f"run it with `clustertwin schedule openb --policy {name}`; gang policies: "
                              f"{', '.join(GANG_POLICIES)}")
    raise UnknownNameError("scheduling policy", name, ALL_POLICIES)


# --------------------------------------------------------------------------------------- primitives
def _take(nodes: np.ndarray, cap: np.ndarray, pods: int) -> np.ndarray:
    """Pods onto ``nodes`` in the given order, each node up to its ``cap``; one entry per pod."""
    c = cap[nodes]
    cum = np.cumsum(c)
    k = int(np.searchsorted(cum, pods))  # first node where the running total reaches pods
    counts = c[:k + 1].copy()
    counts[-1] -= int(cum[k]) - pods
    return np.repeat(nodes[:k + 1], counts)


def first_fit(cap: np.ndarray, pods: int) -> np.ndarray | None:
    if int(cap.sum()) < pods:
        return None
    return _take(np.flatnonzero(cap > 0), cap, pods)


def _pack_order(nodes: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """Fullest nodes first (fewest pods left), then node order: packs partly used nodes."""
    return nodes[np.lexsort((nodes, cap[nodes]))]


def single_unit(inv: Inventory, cap: np.ndarray, pods: int, level: str, units_ok: np.ndarray | None = None
                ) -> np.ndarray | None:
    """The whole gang inside one unit of ``level``: the unit with the least room that fits (BestFit)."""
    unit = inv.unit_of(level)
    room = np.bincount(unit, weights=cap, minlength=int(unit.max()) + 1)
    ok = room >= pods
    if units_ok is not None:
        ok &= units_ok
    if not ok.any():
        return None
    cand = np.flatnonzero(ok)
    u = int(cand[np.argmin(room[cand])])
    nodes = np.flatnonzero((unit == u) & (cap > 0))
    return _take(_pack_order(nodes, cap), cap, pods)


def fewest_domains(inv: Inventory, cap: np.ndarray, pods: int, within: np.ndarray | None = None) -> np.ndarray | None:
    """Spread over NVLink domains, fullest-room domains first (fewest domains), nodes packed."""
    mask = cap > 0 if within is None else (cap > 0) & within
    if int(cap[mask].sum()) < pods:
        return None
    dom = inv.node_domain
    room = np.bincount(dom, weights=np.where(mask, cap, 0), minlength=inv.num_domains)
    order = np.argsort(-room, kind="stable")
    chosen, total = [], 0
    for d in order:
        if room[d] <= 0:
            break
        chosen.append(d)
        total += room[d]
        if total >= pods:
            break
    nodes = np.flatnonzero(mask & np.isin(dom, chosen))
    # keep the chosen domains' order (largest room first), pack nodes inside each
    rank = np.empty(inv.num_domains, np.int64)
    rank[np.array(chosen)] = np.arange(len(chosen))
    nodes = nodes[np.lexsort((nodes, cap[nodes], rank[dom[nodes]]))]
    return _take(nodes, cap, pods)


def topology_place(inv: Inventory, cap: np.ndarray, pods: int, *, required: str | None, preferred: str | None,
                   lowest: str = "domain") -> np.ndarray | None:
    """Try one unit of each level from ``preferred`` (or ``lowest``) up to ``required`` (or the spine);
    a job that no single unit holds is spread over the fewest domains of the roomiest leaf (or of the
    cluster), unless ``required`` forbids it."""
    start = LEVELS.index(preferred or lowest)
    stop = LEVELS.index(required) if required else LEVELS.index("spine")
    if required and start > stop:
        start = stop
    for lvl in LEVELS[start:stop + 1]:
        got = single_unit(inv, cap, pods, lvl)
        if got is not None:
            return got
    if required:
        return None
    leaf = inv.node_leaf
    room = np.bincount(leaf, weights=cap, minlength=inv.num_leaves)
    if room.max() >= pods:  # cannot happen (single_unit would have found it); keep for clarity
        return fewest_domains(inv, cap, pods, within=leaf == int(np.argmax(room)))
    # across leaves: roomiest leaves first, then fewest domains inside
    order = np.argsort(-room, kind="stable")
    take, total = [], 0.0
    for lf in order:
        take.append(lf)
        total += room[lf]
        if total >= pods:
            break
    return fewest_domains(inv, cap, pods, within=np.isin(leaf, take))


def segment_place(inv: Inventory, cap: np.ndarray, pods: int, seg: int) -> np.ndarray | None:
    """Slurm block: ``pods // seg`` segments, each inside one NVLink domain (block). Blocks of the leaf
    with the most room first; inside a leaf, the least free block that holds a segment."""
    dom = inv.node_domain
    room = np.bincount(dom, weights=cap, minlength=inv.num_domains).astype(np.int64)
    segs_per_dom = room // seg
    need = pods // seg
    if int(segs_per_dom.sum()) < need:
        return None
    leaf_of_dom = np.zeros(inv.num_domains, np.int64)
    leaf_of_dom[dom] = inv.node_leaf
    leaf_room = np.bincount(leaf_of_dom, weights=segs_per_dom, minlength=inv.num_leaves)
    # leaf priority: one that holds all segments (least room among those), else roomiest first
    fits = leaf_room >= need
    if fits.any():
        lrank = np.where(fits, leaf_room, np.inf).argsort(kind="stable")
    else:
        lrank = np.argsort(-leaf_room, kind="stable")
    lpos = np.empty(inv.num_leaves, np.int64)
    lpos[lrank] = np.arange(inv.num_leaves)
    cand = np.flatnonzero(segs_per_dom > 0)
    cand = cand[np.lexsort((cand, room[cand], lpos[leaf_of_dom[cand]]))]
    out = []
    left = need
    for d in cand:
        k = min(int(segs_per_dom[d]), left)
        nodes = np.flatnonzero((dom == d) & (cap > 0))
        out.append(_take(_pack_order(nodes, cap), cap, k * seg))
        left -= k
        if left == 0:
            break
    return np.concatenate(out)


def chunk_place(inv: Inventory, cap: np.ndarray, pods: int, chunk_pods: int) -> np.ndarray | None:
    """DRA ComputeDomain: chunks of ``chunk_pods`` pods, each inside one NVLink domain, BestFit domain per
    chunk (least room that holds it); no preference for leaves."""
    dom = inv.node_domain
    room = np.bincount(dom, weights=cap, minlength=inv.num_domains).astype(np.int64)
    out = []
    cap = cap.copy()
    left = pods
    while left > 0:
        want = min(chunk_pods, left)
        ok = np.flatnonzero(room >= want)
        if ok.size == 0:
            return None
        d = int(ok[np.argmin(room[ok])])
        nodes = np.flatnonzero((dom == d) & (cap > 0))
        got = _take(_pack_order(nodes, cap), cap, want)
        np.subtract.at(cap, got, 1)
        room[d] -= want
        out.append(got)
        left -= want
    return np.concatenate(out)


def place(policy: str, inv: Inventory, cap: np.ndarray, job) -> np.ndarray | None:
    """Node index per pod for ``job`` under ``policy`` (None: does not fit now)."""
    pods = job.pods
    if int(cap.sum()) < pods:
        return None
    req, pref = job.required, job.preferred
    if policy in ("fifo", "backfill"):
        if req:
            return single_unit(inv, cap, pods, req)
        return first_fit(cap, pods)
    if policy in ("tas", "priority", "binpack"):
        if job.segment:  # Kueue podset slices / Volcano subgroups: each slice inside one NVLink domain
            got = segment_place(inv, cap, pods, job.segment)
            return got if got is None or not req or _within(inv, got, req) else None
        return topology_place(inv, cap, pods, required=req, preferred="node" if policy == "binpack" else pref)
    if policy == "slurm-block":
        per_dom = inv.max_domain_gpus // inv.gpus_per_node * max(1, inv.gpus_per_node // job.gpus_per_pod)
        seg = job.segment or min(pods, per_dom)
        if pods % seg:
            # whole-block chunks plus a remainder: place the remainder as its own segment
            head = segment_place(inv, cap, pods - pods % seg, seg) if pods >= seg else np.array([], np.int64)
            if head is None:
                return None
            cap2 = cap.copy()
            np.subtract.at(cap2, head, 1)
            tail = segment_place(inv, cap2, pods % seg, pods % seg)
            return None if tail is None else np.concatenate([head, tail])
        got = segment_place(inv, cap, pods, seg)
        if got is None or not req:
            return got
        return got if _within(inv, got, req) else None
    if policy == "dra":
        gpp = job.gpus_per_pod
        chunk_gpus = job.compute_domain or min(job.gpus, inv.max_domain_gpus // gpp * gpp)
        chunk = max(1, chunk_gpus // gpp)
        got = chunk_place(inv, cap, pods, chunk)
        if got is None or not req:
            return got
        return got if _within(inv, got, req) else None
    raise UnknownNameError("scheduling policy", policy, GANG_POLICIES)


def _within(inv: Inventory, nodes: np.ndarray, level: str) -> bool:
    return np.unique(inv.unit_of(level)[nodes]).size == 1

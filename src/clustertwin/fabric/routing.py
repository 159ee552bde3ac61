"""Routing: turn flows (endpoint pairs) into a sparse flows x links incidence matrix.

* ``ecmp``: per-flow hashing -- one equal-cost path drawn with the caller's seeded generator
  (a flow keeps its path in every repetition, like a long-lived RDMA connection). With failed
  links the hash picks among the remaining valid paths.
* ``adaptive``: per-packet adaptive routing (InfiniBand AR, Spectrum-X): every switch sends each
  packet on the least-loaded of its up-ports towards the destination, so the traffic leaving a
  leaf (and a pod) is balanced over the working up-links in proportion to their capacity. In a
  flow model that is a flow split over the up-links of its leaf and pod with equal utilisation on
  every member: each group of up-links (and down-links) is one *bundle* link with the summed
  capacity of its working members. Failed links therefore cost only their share of capacity
  (one failed cable of 32 uplinks: 32/31), and degraded links carry proportionally less. Planes
  (dual-plane) are used equally where both NIC ports of a flow are up.
* ``spray``: oblivious packet spraying -- the flow is split *equally* over every valid equal-cost
  path (fractional link loads), so a degraded link still gets its equal share and is the
  bottleneck. On a fabric whose switch links are all healthy and equal this is the bundle model
  above (every member carries exactly the same load: exact, and six links per flow instead of
  thousands), so spray and adaptive coincide there; with failed or degraded links spraying uses
  explicit per-class weights over the valid paths.

Entry ``A[f, l]`` is the fraction of flow ``f``'s rate that crosses link ``l``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..errors import InputError, UnknownNameError
from ..registry import Registry
from .engine import to_padded
from .topology import FabricTopology


@dataclass(frozen=True, slots=True)
class RoutingPolicy:
    """One routing policy, registered in ``ROUTING_POLICIES``.

    ``paths(topo, src, dst, a, b, offset, n_cols, seed, salt)`` -> dense ``(F, K)`` link ids (``-1`` =
    padding) and weights (``None``: 1 on every link) for flows ``src -> dst`` whose leaves are ``a -> b``
    (``offset``: each flow's block offset into the link ids; see :func:`route_padded`).
    """

    name: str
    description: str
    paths: Callable[..., tuple[np.ndarray, np.ndarray | None]]
    aliases: tuple[str, ...] = ()


ROUTING_POLICIES: Registry[RoutingPolicy] = Registry("routing")


def check_routing(name: str) -> str:
    """The registered policy's name for ``name`` (aliases accepted); unknown names suggest the closest."""
    key = name.strip().lower().replace("_", "-")
    if key in ROUTING_POLICIES:
        return key
    for pol in ROUTING_POLICIES.values():
        if key in pol.aliases:
            return pol.name
    known = ROUTING_POLICIES.names()
    raise UnknownNameError("routing", name, known, hint=f"routing is one of {', '.join(known)}")


def _disconnected(src: int, dst: int) -> InputError:
    return InputError(
        f"the failure set disconnects endpoint {src} from endpoint {dst}: no equal-cost path is left between them",
        hint="fail fewer links/switches, or remove the flows between these endpoints",
    )


def _class_candidates(topo: FabricTopology, a: int, b: int, src: int, dst: int) -> np.ndarray:
    """All candidate paths between two endpoints across planes, valid ones only: (n, 6) link ids."""
    rows = []
    for p in range(topo.shape.planes):
        sw = topo.class_paths(a, b, p)
        full = np.empty((sw.shape[0], 6), dtype=np.int64)
        full[:, 0] = topo.nic_up(src, p)
        full[:, 1:5] = sw
        full[:, 5] = topo.nic_down(dst, p)
        rows.append(full)
    cand = np.concatenate(rows)
    cap = topo.capacity
    ok = np.all((cand < 0) | (cap[np.maximum(cand, 0)] > 0), axis=1)
    return cand[ok]


def _rows_to_csr(links: np.ndarray, weights: np.ndarray | None, n_rows: int, n_cols: int) -> sp.csr_matrix:
    mask = links >= 0
    if weights is not None:
        mask &= weights > 0
    rows = np.repeat(np.arange(n_rows), mask.sum(1))
    cols = links[mask]
    vals = np.ones(cols.size) if weights is None else weights[mask]
    m = sp.csr_matrix((vals, (rows, cols)), shape=(n_rows, n_cols))
    m.sum_duplicates()
    return m


def route(
    topo: FabricTopology,
    src: np.ndarray,
    dst: np.ndarray,
    routing: str,
    seed: int = 0,
    block: np.ndarray | None = None,
    n_blocks: int = 1,
    salt: np.ndarray | None = None,
) -> sp.csr_matrix:
    """Incidence matrix (flows x (n_blocks * n_link_ids)) for flows ``src -> dst`` (endpoint ids).

    ``block[f]`` puts flow ``f`` in an independent copy of the fabric (link ids offset by
    ``block * len(capacity)``): independent phases solved together without interacting.
    ECMP draws come from ``flow_hash(seed, src, dst, salt)``: a seeded per-flow hash, so the same
    connection takes the same path in every phase, results repeat for a seed and differ across seeds.
    """
    F = np.asarray(src).size
    n_cols = topo.capacity.size * n_blocks
    links, w = route_padded(topo, src, dst, routing, seed=seed, block=block, n_blocks=n_blocks, salt=salt)
    return _rows_to_csr(links, w, F, n_cols)


def route_padded(
    topo: FabricTopology,
    src: np.ndarray,
    dst: np.ndarray,
    routing: str,
    seed: int = 0,
    block: np.ndarray | None = None,
    n_blocks: int = 1,
    salt: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """:func:`route` as dense ``(F, K)`` link ids (``-1`` = padding) and weights (``None``: 1 on
    every link), the form the event loop works on (no sparse matrix is built)."""
    routing = check_routing(routing)
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    F = src.size
    NL = topo.capacity.size
    block = np.zeros(F, dtype=np.int64) if block is None else np.asarray(block, dtype=np.int64)
    n_cols = NL * n_blocks
    if F == 0:
        return np.zeros((0, 1), dtype=np.int64), None
    if np.any(src == dst):
        i = int(np.nonzero(src == dst)[0][0])
        raise InputError(f"flow {i} goes from endpoint {src[i]} to itself", hint="drop flows whose source is the destination")
    offset = block * NL
    return ROUTING_POLICIES.get(routing).paths(topo, src, dst, topo.endpoint_leaf[src], topo.endpoint_leaf[dst],
                                               offset, n_cols, seed, salt)


def _route_adaptive(topo: FabricTopology, src, dst, a, b, offset, n_cols, seed, salt):
    return _bundled(topo, src, dst, a, b, offset)


def _route_spray(topo: FabricTopology, src, dst, a, b, offset, n_cols, seed, salt):
    cap = topo.capacity
    if topo.uniform_switch_links and np.all(cap[: topo.n_links] > 0):
        return _bundled(topo, src, dst, a, b, offset)
    # non-uniform fabric: explicit fractional weights per (src, dst) class of valid paths
    F = src.size
    rows, cols, vals = [], [], []
    cache: dict[tuple[int, int, int], tuple] = {}
    for f in range(F):
        s_, d_ = int(src[f]), int(dst[f])
        key = (int(a[f]), int(b[f]), _nic_mask(topo, s_, d_))
        hit = cache.get(key)
        if hit is None:
            cand = _class_candidates(topo, key[0], key[1], s_, d_)
            if cand.shape[0] == 0:
                raise _disconnected(s_, d_)
            # NIC columns are stored relative to the first flow of the class; rebase per flow
            sw = cand[:, 1:5]
            ids, cnt = np.unique(sw[sw >= 0], return_counts=True)
            nic_pl = (cand[:, 0] // topo.plane_links)
            pl_ids, pl_cnt = np.unique(nic_pl, return_counts=True)
            hit = (ids, cnt / cand.shape[0], pl_ids, pl_cnt / cand.shape[0])
            cache[key] = hit
        ids, wts, pl_ids, pl_w = hit
        nic = np.concatenate([topo.nic_up(s_, pl_ids), topo.nic_down(d_, pl_ids)])
        c = np.concatenate([ids, nic]) + offset[f]
        rows.append(np.full(c.size, f))
        cols.append(c)
        vals.append(np.concatenate([wts, pl_w, pl_w]))
    m = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(F, n_cols))
    m.sum_duplicates()
    return to_padded(m, -1)


def _route_ecmp(topo: FabricTopology, src, dst, a, b, offset, n_cols, seed, salt):
    planes = topo.shape.planes
    cap = topo.capacity
    n_plane_paths = topo.n_paths(a, b)
    u = flow_hash(seed, src, dst, salt)
    idx = np.minimum((u * n_plane_paths * planes).astype(np.int64), n_plane_paths * planes - 1)
    plane, path = idx // n_plane_paths, idx % n_plane_paths
    lk = topo.path_links(src, dst, path, plane)
    bad = np.any((lk >= 0) & (cap[np.maximum(lk, 0)] <= 0), axis=1)
    if bad.any():
        cache: dict[tuple[int, ...], np.ndarray] = {}
        for f in np.nonzero(bad)[0]:
            key = (int(a[f]), int(b[f]), int(src[f]), int(dst[f]))
            cand = cache.get(key)
            if cand is None:
                cand = cache[key] = _class_candidates(topo, *key)
            if cand.shape[0] == 0:
                raise _disconnected(int(src[f]), int(dst[f]))
            lk[f] = cand[min(int(u[f] * cand.shape[0]), cand.shape[0] - 1)]
    lk = np.where(lk >= 0, lk + offset[:, None], -1)
    return lk, None


ROUTING_POLICIES.add("ecmp", RoutingPolicy("ecmp", "per-flow hashing onto one equal-cost path", _route_ecmp))
ROUTING_POLICIES.add("adaptive", RoutingPolicy("adaptive", "per-packet adaptive routing (InfiniBand AR, Spectrum-X)",
                                               _route_adaptive, aliases=("ar",)))
ROUTING_POLICIES.add("spray", RoutingPolicy("spray", "oblivious packet spraying over every valid equal-cost path",
                                            _route_spray, aliases=("packet-spraying", "spraying")))
ROUTINGS = tuple(ROUTING_POLICIES.names())  # the shipped policies (a later registration: ROUTING_POLICIES)


def _bundled(topo: FabricTopology, src, dst, a, b, offset) -> tuple[np.ndarray, np.ndarray]:
    """Bundle-link rows: NIC up, leaf-up bundle, pod-up bundle, pod-down bundle, leaf-down bundle,
    NIC down, per plane; a plane is used (equally) where both NIC links and every bundle the flow
    needs have capacity. Bundle capacity = the summed capacity of its working members."""
    F = src.size
    planes = topo.shape.planes
    cap = topo.capacity
    pa, pb = topo.pod_of_leaf(a), topo.pod_of_leaf(b)
    up = a != b
    three = topo.shape.tiers == 3
    ip = (pa != pb) if three else None
    healthy = bool(np.all(cap > 0)) and topo.uniform_switch_links
    cols, ok = [], []
    for p in range(planes):
        lk = np.empty((F, 6), dtype=np.int64)
        lk[:, 0] = topo.nic_up(src, p)
        lk[:, 5] = topo.nic_down(dst, p)
        lk[:, 1] = np.where(up, topo.bundle_leaf_up(a, p), -1)
        lk[:, 4] = np.where(up, topo.bundle_leaf_down(b, p), -1)
        lk[:, 2] = np.where(ip, topo.bundle_pod_up(pa, p), -1) if three else -1
        lk[:, 3] = np.where(ip, topo.bundle_pod_down(pb, p), -1) if three else -1
        cols.append(lk)
        if not healthy:
            good = np.all((lk < 0) | (cap[np.maximum(lk, 0)] > 0), axis=1)
            if not topo.uniform_switch_links:  # a working bundle may still have no path to the destination
                good &= _leaf_pairs_connected(topo, a, b, p)
            ok.append(good)
    lk = cols[0] if planes == 1 else np.concatenate(cols, axis=1)
    if healthy:
        if np.any(offset):
            lk = np.where(lk >= 0, lk + offset[:, None], -1)
        return lk, np.where(lk >= 0, 1.0 / planes, 0.0)
    okm = np.stack(ok, axis=1)
    n_ok = okm.sum(axis=1)
    if np.any(n_ok == 0):
        f = int(np.flatnonzero(n_ok == 0)[0])
        raise _disconnected(int(src[f]), int(dst[f]))
    wt = np.repeat(okm / n_ok[:, None], 6, axis=1)
    lk = np.where((lk >= 0) & (wt > 0), lk + offset[:, None], -1)
    return lk, np.where(lk >= 0, wt, 0.0)


def _leaf_pairs_connected(topo: FabricTopology, a: np.ndarray, b: np.ndarray, plane: int) -> np.ndarray:
    """Per flow: whether some equal-cost path between leaves ``a[f]`` and ``b[f]`` has all its switch
    links up in ``plane`` (checked once per distinct leaf pair)."""
    s = topo.shape
    cap = topo.capacity
    pairs, inv = np.unique(np.stack([a, b], axis=1), axis=0, return_inverse=True)
    out = np.ones(pairs.shape[0], dtype=bool)
    J = np.arange(s.u1)
    for k, (la, lb) in enumerate(pairs.tolist()):
        if la == lb:
            continue
        x = (cap[topo.leaf_up(la, J, plane)] > 0) & (cap[topo.leaf_down(lb, J, plane)] > 0)
        pa, pb = int(topo.pod_of_leaf(la)), int(topo.pod_of_leaf(lb))
        if s.tiers == 3 and pa != pb:
            T = np.arange(s.u2)[None, :]
            y = (cap[topo.spine_up(pa, J[:, None], T, plane)] > 0) & (cap[topo.spine_down(pb, J[:, None], T, plane)] > 0)
            out[k] = bool(np.any(x[:, None] & y))
        else:
            out[k] = bool(x.any())
    return out[inv.ravel()]


_M1 = np.uint64(0x9E3779B97F4A7C15)
_M2 = np.uint64(0xBF58476D1CE4E5B9)
_M3 = np.uint64(0x94D049BB133111EB)
_M4 = np.uint64(0xD6E8FEB86659FD93)


def flow_hash(seed: int, src: np.ndarray, dst: np.ndarray, salt: np.ndarray | None = None) -> np.ndarray:
    """Uniform [0, 1) per flow from a seeded splitmix64 hash of (seed, src, dst, salt) -- a stand-in
    for a switch's 5-tuple hash (Steele et al., OOPSLA 2014, splitmix64 finaliser)."""
    with np.errstate(over="ignore"):
        x = np.uint64(seed & 0xFFFFFFFFFFFFFFFF) * _M1
        x = x ^ (np.asarray(src).astype(np.uint64) * _M4)
        x = x ^ ((np.asarray(dst).astype(np.uint64) + np.uint64(0x632BE59BD9B4E019)) * _M1)
        if salt is not None:
            x = x ^ ((np.asarray(salt).astype(np.uint64) + np.uint64(1)) * _M3)
        for _ in range(2):
            x = (x ^ (x >> np.uint64(30))) * _M2
            x = (x ^ (x >> np.uint64(27))) * _M3
            x = x ^ (x >> np.uint64(31))
    return (x >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)


def _nic_mask(topo: FabricTopology, s: int, d: int) -> int:
    """Bit p set when both NIC links of the pair are up in plane p."""
    cap = topo.capacity
    return sum(1 << p for p in range(topo.shape.planes)
               if cap[topo.nic_up(s, p)] > 0 and cap[topo.nic_down(d, p)] > 0)

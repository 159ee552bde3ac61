"""Routing: turn flows (endpoint pairs) into a sparse flows x links incidence matrix.

* ``ecmp``: per-flow hashing -- one equal-cost path drawn with the caller's seeded generator
  (a flow keeps its path in every repetition, like a long-lived RDMA connection). With failed
  links the hash picks among the remaining valid paths.
* ``adaptive``: at flow start, the path whose most-loaded link (flows per byte/s already
  assigned) is least loaded; ties broken by the seeded generator. Flows starting together are
  placed one after another in flow order.
* ``spray``: the flow is split equally over every valid equal-cost path (fractional link loads).
  On a fabric whose switch links are all healthy and equal, all up-links of a leaf (and of a pod)
  carry exactly the same sprayed load, so they are merged into one *bundle* link with their summed
  capacity -- exact, and six links per flow instead of thousands.

Entry ``A[f, l]`` is the fraction of flow ``f``'s rate that crosses link ``l``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..errors import InputError, UnknownNameError
from .topology import FabricTopology

ROUTINGS = ("ecmp", "adaptive", "spray")


def check_routing(name: str) -> str:
    key = name.strip().lower().replace("_", "-")
    aliases = {"packet-spraying": "spray", "spraying": "spray", "ar": "adaptive"}
    key = aliases.get(key, key)
    if key not in ROUTINGS:
        raise UnknownNameError("routing", name, ROUTINGS, hint="routing is one of ecmp, adaptive, spray")
    return key


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
    routing = check_routing(routing)
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    F = src.size
    NL = topo.capacity.size
    block = np.zeros(F, dtype=np.int64) if block is None else np.asarray(block, dtype=np.int64)
    n_cols = NL * n_blocks
    if F == 0:
        return sp.csr_matrix((0, n_cols))
    if np.any(src == dst):
        i = int(np.nonzero(src == dst)[0][0])
        raise InputError(f"flow {i} goes from endpoint {src[i]} to itself", hint="drop flows whose source is the destination")
    a = topo.endpoint_leaf[src]
    b = topo.endpoint_leaf[dst]
    planes = topo.shape.planes
    cap = topo.capacity
    offset = block * NL

    if routing == "spray":
        if topo.uniform_switch_links and np.all(cap[: topo.n_links] > 0):
            pa, pb = topo.pod_of_leaf(a), topo.pod_of_leaf(b)
            cols, vals = [], []
            w = 1.0 / planes
            for p in range(planes):
                lk = np.full((F, 6), -1, dtype=np.int64)
                lk[:, 0] = topo.nic_up(src, p)
                lk[:, 5] = topo.nic_down(dst, p)
                up = a != b
                lk[up, 1] = topo.bundle_leaf_up(a[up], p)
                lk[up, 4] = topo.bundle_leaf_down(b[up], p)
                if topo.shape.tiers == 3:
                    ip = pa != pb
                    lk[ip, 2] = topo.bundle_pod_up(pa[ip], p)
                    lk[ip, 3] = topo.bundle_pod_down(pb[ip], p)
                cols.append(lk)
                vals.append(np.full(lk.shape, w))
            lk = np.concatenate(cols, axis=1)
            lk = np.where(lk >= 0, lk + offset[:, None], -1)
            return _rows_to_csr(lk, np.concatenate(vals, axis=1), F, n_cols)
        # non-uniform fabric: explicit fractional weights per (src, dst) class of valid paths
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
        return m

    n_plane_paths = topo.n_paths(a, b)
    u = flow_hash(seed, src, dst, salt)
    if routing == "ecmp":
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
        return _rows_to_csr(lk, None, F, n_cols)

    # adaptive: greedy least-loaded path, flow by flow. A path's score is its most loaded link
    # (flows per byte/s, counting this flow); failed links score inf. The links of one leaf, one
    # pod's spines and one pod's core downlinks have contiguous ids, so the scores of all
    # u1 x u2 paths come from slices (views) of the per-block load array, not gathers.
    inv = np.full(NL, np.inf)
    pos = cap > 0
    inv[pos] = 1.0 / cap[pos]
    load = np.zeros((n_blocks, NL))
    out = np.full((F, 6), -1, dtype=np.int64)
    sh = topo.shape
    u1, u2 = sh.u1, max(sh.u2, 1)
    n = u1 * u2
    PL, E = topo.plane_links, sh.n_endpoints
    b_lu, b_ld = 2 * E, 2 * E + sh.n_leaves * u1  # leaf_up / leaf_down bases (see topology.py)
    b_su = b_ld + sh.n_leaves * u1
    b_sd = b_su + (sh.n_pods * u1 * u2 if sh.tiers == 3 else 0)
    three = sh.tiers == 3
    pa_all, pb_all = topo.pod_of_leaf(a), topo.pod_of_leaf(b)
    src_l, dst_l, a_l, b_l = src.tolist(), dst.tolist(), a.tolist(), b.tolist()
    pa_l, pb_l, blk_l, u_l, off_l = pa_all.tolist(), pb_all.tolist(), block.tolist(), u.tolist(), offset.tolist()
    for f in range(F):
        s_, d_, la_, lb_ = src_l[f], dst_l[f], a_l[f], b_l[f]
        pa_, pb_ = pa_l[f], pb_l[f]
        lo = load[blk_l[f]]
        best_score = np.inf
        scores = []
        for p in range(planes):
            nu, nd = p * PL + s_, p * PL + E + d_
            nic = max(lo[nu] + inv[nu], lo[nd] + inv[nd])
            if la_ == lb_:
                sc = np.array([nic])
            else:
                i0, k0 = p * PL + b_lu + la_ * u1, p * PL + b_ld + lb_ * u1
                x = np.maximum(lo[i0:i0 + u1] + inv[i0:i0 + u1], lo[k0:k0 + u1] + inv[k0:k0 + u1])
                if three and pa_ != pb_:
                    s0, d0 = p * PL + b_su + pa_ * n, p * PL + b_sd + pb_ * n
                    y = np.maximum(lo[s0:s0 + n] + inv[s0:s0 + n], lo[d0:d0 + n] + inv[d0:d0 + n])
                    sc = np.maximum(x[:, None], y.reshape(u1, u2)).ravel()  # index j*u2 + t
                else:
                    sc = x
                sc = np.maximum(sc, nic)
            scores.append(sc)
            best_score = min(best_score, float(sc.min()))
        if not np.isfinite(best_score):
            raise _disconnected(s_, d_)
        cands = [np.flatnonzero(sc <= best_score * (1 + 1e-9)) for sc in scores]
        total = sum(c.size for c in cands)
        k = min(int(u_l[f] * total), total - 1)
        sel = 0
        while k >= cands[sel].size:
            k -= cands[sel].size
            sel += 1
        idx = int(cands[sel][k])
        base = sel * PL
        links = [base + s_]
        if la_ != lb_:
            if three and pa_ != pb_:
                j, t = divmod(idx, u2)
                links += [base + b_lu + la_ * u1 + j, base + b_su + pa_ * n + j * u2 + t,
                          base + b_sd + pb_ * n + j * u2 + t, base + b_ld + lb_ * u1 + j]
            else:
                links += [base + b_lu + la_ * u1 + idx, base + b_ld + lb_ * u1 + idx]
        links.append(base + E + d_)
        ids = np.asarray(links)
        lo[ids] += inv[ids]
        out[f, : ids.size] = ids + off_l[f]
    return _rows_to_csr(out, None, F, n_cols)


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

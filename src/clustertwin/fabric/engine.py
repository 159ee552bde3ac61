"""Max-min fair sharing and the flow-level event loop.

Max-min fairness by progressive filling (Bertsekas & Gallager, *Data Networks*, 2nd ed., Sec. 6.5.2):
all unfrozen flows rise together; a link ``l`` saturates at level
``lam_l = (c_l - frozen_load_l) / sum_{f unfrozen} A[f, l]``; the flows crossing the links with the
smallest ``lam`` freeze at it; repeat. ``A[f, l]`` is the fraction of the flow's rate on the link
(1 for a single path, 1/k when sprayed over k paths), so this is weighted max-min fairness.
Each iteration is a few sparse passes; all local-minimum bottlenecks freeze together.

The event loop is incremental: when flows complete, only the flows whose max-min level is at
least the lowest level among the completed ones are re-solved, on the capacity the others leave
(the flows below keep their rates -- see :func:`simulate_padded` for why this is exact); an
arrival re-solves its block. Flows carry a *block* id: blocks are independent copies of the
fabric (their link ids do not overlap), each with its own clock, so independent phases are
advanced together in one vectorised loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..errors import InputError

_REL = 1e-9
_EVENT_REL = 1e-9


def to_padded(A: sp.csr_matrix, dummy: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR incidence -> dense ``(F, K)`` link ids and weights, padded with link ``dummy``, weight 0.

    Every routed flow crosses a handful of links (six in a 3-tier fabric; a few more for sprayed
    flows), so dense padded rows make each solver pass a plain vectorised numpy operation.
    """
    F = A.shape[0]
    lens = np.diff(A.indptr)
    K = max(1, int(lens.max()) if F else 1)
    small = max(dummy, A.shape[1]) < 2**31 - 1
    links = np.full((F, K), dummy, dtype=np.int32 if small else np.int64)
    w = np.zeros((F, K))
    if A.nnz:
        rows = np.repeat(np.arange(F), lens)
        pos = np.arange(A.nnz) - np.repeat(A.indptr[:-1], lens)
        links[rows, pos] = A.indices
        w[rows, pos] = A.data
    return links, w


def max_min_padded(links: np.ndarray, w: np.ndarray, cap: np.ndarray,
                   pcap: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """Weighted max-min fair rates for padded flows (see :func:`max_min_rates`).

    ``cap`` has one entry per link id including the padding id (whose weight is always 0).
    ``pcap[f]``: the flow's own rate limit from links no other flow uses (a private link is a
    bottleneck exactly when the flow's level reaches it, so it needs no shared bookkeeping).
    """
    F = links.shape[0]
    Lp = cap.size
    rates = np.full(F, np.inf)
    has = (w > 0).any(axis=1)
    if pcap is not None:
        has |= np.isfinite(pcap)
    act = np.nonzero(has)[0]
    la, wa = links[act], w[act]
    pa = pcap[act] if pcap is not None else np.full(act.size, np.inf)
    frozen_load = np.zeros(Lp)
    W = np.bincount(la.ravel(), weights=wa.ravel(), minlength=Lp)
    it = 0
    while act.size:
        it += 1
        used = W > 1e-12
        lam = np.full(Lp, np.inf)  # the padding id is never used, so its level stays inf
        lam[used] = np.maximum(cap[used] - frozen_load[used], 0.0) / W[used]
        lam_nnz = lam[la]
        fm = np.minimum(lam_nnz.min(axis=1), pa)
        bad = fm[:, None] * (1 + _REL) < lam_nnz
        link_bad = np.bincount(la[bad], minlength=Lp) > 0
        local = used & ~link_bad
        hit = local[la].any(axis=1) | (pa <= fm * (1 + _REL))
        if not hit.any():  # numerical corner: freeze the global minimum
            hit = fm <= fm.min() * (1 + _REL)
        r = fm[hit]
        rates[act[hit]] = r
        lh, wh = la[hit].ravel(), wa[hit]
        frozen_load += np.bincount(lh, weights=(wh * r[:, None]).ravel(), minlength=Lp)
        W -= np.bincount(lh, weights=wh.ravel(), minlength=Lp)
        keep = ~hit
        act, la, wa, pa = act[keep], la[keep], wa[keep], pa[keep]
    return rates, it


def max_min_rates(A: sp.csr_matrix, cap: np.ndarray) -> tuple[np.ndarray, int]:
    """Weighted max-min fair rates (bytes/s) for the rows of ``A`` given link capacities ``cap``.

    Returns ``(rates, iterations)``. Rows without links get ``inf``.

    Parallel progressive filling: a link whose saturation level ``lam_l`` is no higher than the
    lowest level of every unfrozen flow crossing it is a bottleneck *now* -- levels only rise as
    other flows freeze below them, so nothing can freeze its flows earlier -- and all such
    local-minimum links freeze their flows in the same iteration. The allocation is the same as
    freezing one global minimum at a time, in far fewer iterations.
    """
    links, w = to_padded(A, A.shape[1])
    return max_min_padded(links, w, np.append(np.asarray(cap, dtype=float), np.inf))


def alone_rates_padded(links: np.ndarray, w: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """:func:`alone_rates` for padded flows (link id -1 or weight 0 = padding)."""
    ok = (links >= 0) & (w > 0)
    per = np.full(links.shape, np.inf)
    per[ok] = cap[links[ok]] / w[ok]
    return per.min(axis=1) if links.shape[1] else np.full(links.shape[0], np.inf)


def alone_rates(A: sp.csr_matrix, cap: np.ndarray) -> np.ndarray:
    """Rate of each flow alone on the network: min over its links of ``c_l / A[f, l]``."""
    F = A.shape[0]
    out = np.full(F, np.inf)
    if A.nnz == 0:
        return out
    per = cap[A.indices] / A.data
    nz = np.diff(A.indptr) > 0
    out[nz] = np.minimum.reduceat(per, A.indptr[:-1][nz])
    return out


@dataclass(frozen=True, slots=True)
class EventResult:
    block_time: np.ndarray  # (n_blocks,) time from the block's start to its last completion
    finish: np.ndarray  # (F,) completion time of each flow (block clock)
    link_bytes: np.ndarray  # (n_cols,) bytes carried per link id (block-offset ids)
    events: int
    iterations: int
    alone: np.ndarray | None = None  # (F,) rate of each flow alone on the network


def simulate_flows(
    A: sp.csr_matrix,
    cap: np.ndarray,
    size: np.ndarray,
    start: np.ndarray,
    block: np.ndarray,
    n_blocks: int,
) -> EventResult:
    """Run flows to completion under max-min sharing (see :func:`simulate_padded`).

    ``cap`` has one entry per column of ``A`` (block copies already tiled).
    """
    links, w = to_padded(A, -1)
    return simulate_padded(links, w, cap, size, start, block, n_blocks)


def _shared_layout(links: np.ndarray, w: np.ndarray, cap: np.ndarray):
    """Split each flow's links into private ones (used by no other flow: a per-flow rate cap) and
    shared ones, relabelled ``0..n_shared-1`` (padding = ``n_shared``), rows left-packed."""
    F, K = links.shape
    n_cols = cap.size
    valid = (links >= 0) & (w > 0)
    flat = np.where(valid, links, n_cols)
    uses = np.bincount(flat.ravel(), minlength=n_cols + 1)
    uses[n_cols] = 0
    ue = uses[flat]
    priv = ue == 1
    shared = ue >= 2
    cap_ext = np.append(np.asarray(cap, dtype=float), np.inf)
    with np.errstate(divide="ignore"):
        pc = np.where(priv, cap_ext[flat] / np.where(priv, w, 1.0), np.inf)
    pcap = pc.min(axis=1) if K else np.full(F, np.inf)
    is_sh = uses >= 2
    new_id = np.cumsum(is_sh) - 1
    n_sh = int(is_sh.sum())
    keep = shared.any(axis=0) if F else np.zeros(K, dtype=bool)
    if not keep.any():
        keep[0] = True  # one (padding) column
    if not keep.all():  # drop the columns no flow shares (e.g. the NIC links of a permutation)
        shared, flat, w = shared[:, keep], flat[:, keep], w[:, keep]
    ks = int(shared.sum(axis=1).max()) if F else 0
    if 0 < ks < shared.shape[1] and ks * 2 <= shared.shape[1]:  # left-pack when it halves the width
        order = np.argsort(~shared, axis=1, kind="stable")[:, :ks]
        shared = np.take_along_axis(shared, order, axis=1)
        flat = np.take_along_axis(flat, order, axis=1)
        w = np.take_along_axis(w, order, axis=1)
    dt = np.int32 if n_sh < 2**31 - 1 else np.int64
    ls = np.where(shared, new_id[np.minimum(flat, n_cols)], n_sh).astype(dt)
    ws = np.where(shared, w, 0.0)
    capc = np.append(cap_ext[:n_cols][is_sh[:n_cols]], np.inf)
    return ls, ws, capc, pcap


def simulate_padded(
    links: np.ndarray,
    w: np.ndarray,
    cap: np.ndarray,
    size: np.ndarray,
    start: np.ndarray,
    block: np.ndarray,
    n_blocks: int,
) -> EventResult:
    """Run flows to completion under max-min sharing; flows given as padded ``(F, K)`` link ids
    (``-1`` = padding) and weights, ``cap`` one entry per link id.

    Incremental re-solving. When flows whose lowest level (rate) is ``lam`` complete, every flow
    with a level below ``lam`` keeps its rate: in progressive filling up to ``lam`` nothing
    changes for them -- a link that saturated below ``lam`` carries none of the completed flows
    (they would have frozen there), and the links of the completed flows only lose load. So only
    the flows at levels ``>= lam`` are re-solved, from zero, on the capacity the others leave;
    that is exact because the flows kept are exactly those whose new level is below ``lam`` and
    the others all end at or above it (the residual filling cannot saturate a link below ``lam``,
    since the full filling did not). An arrival re-solves every flow of its block. Blocks are
    independent, each on its own clock. Each solve works on the links its flows use only.
    """
    links = np.asarray(links)
    w = np.asarray(w, dtype=np.float64)
    size = np.asarray(size, dtype=np.float64)
    start = np.asarray(start, dtype=np.float64)
    block = np.asarray(block, dtype=np.int64)
    cap = np.asarray(cap, dtype=np.float64)
    F = links.shape[0]
    if not (np.all(np.isfinite(size)) and np.all(np.isfinite(start))):
        raise InputError("flow sizes and start times must be finite numbers",
                         hint="check the traffic for NaN or infinite sizes, start times or straggler delays")
    if F and (size.min() < 0 or start.min() < 0):
        raise InputError("flow sizes and start times must be >= 0")
    perm = None
    if F > 1 and np.any(block[1:] < block[:-1]):  # the loop needs flows grouped by block
        perm = np.argsort(block, kind="stable")
        links, w, size, start, block = links[perm], w[perm], size[perm], start[perm], block[perm]
    ls, ws, capc, pcap = _shared_layout(links, w, cap)
    Lp = capc.size
    with np.errstate(divide="ignore"):
        alone = np.minimum(pcap, np.where(ws > 0, capc[ls] / np.where(ws > 0, ws, 1.0), np.inf).min(axis=1))
    rate = np.zeros(F)
    remaining = size.copy()
    finish = np.full(F, np.nan)
    t = np.zeros(n_blocks)
    done = remaining <= 0
    finish[done] = start[done]
    started = start <= 0
    act = np.flatnonzero(started & ~done)
    pend = np.flatnonzero(~started & ~done)
    if pend.size:  # pending flows by (block, start)
        pend = pend[np.lexsort((start[pend], block[pend]))]
    load = np.zeros(Lp)  # shared-link load of the active flows at their current rates
    thr = np.full(n_blocks, -np.inf)  # re-solve flows at levels >= thr[block]; -inf: all
    events = iters = 0
    while act.size or pend.size:
        if act.size:
            tb = thr[block[act]]
            need = np.isneginf(tb) | (rate[act] >= tb * (1 - 1e-7))
            S = act if need.all() else act[need]
            if S.size:
                iters += _resolve(S, ls, ws, capc, pcap, rate, load, full=S.size * 4 >= act.size)
        dt = np.full(n_blocks, np.inf)
        if pend.size:
            first = np.r_[True, block[pend][1:] != block[pend][:-1]]
            dt[block[pend][first]] = start[pend][first] - t[block[pend][first]]
        if act.size:
            bi = block[act]
            r_a = rate[act]
            with np.errstate(divide="ignore"):
                comp = np.where(np.isinf(r_a), 0.0, remaining[act] / r_a)
            seg = np.flatnonzero(np.r_[True, bi[1:] != bi[:-1]])
            np.minimum.at(dt, bi[seg], np.minimum.reduceat(comp, seg))
            if not np.all(np.isfinite(dt[bi[seg]])):
                raise RuntimeError("fabric engine: active flows with zero rate and nothing pending (no progress)")
        dt = np.where(np.isfinite(dt), np.maximum(dt, 0.0), 0.0)
        thr = np.full(n_blocks, np.inf)
        if act.size:
            dta = dt[bi]
            moved = np.where(np.isinf(r_a), remaining[act], r_a * dta)
            remaining[act] -= moved
            fin = (remaining[act] <= _REL * size[act]) | (comp <= dta * (1 + _EVENT_REL))
        t = t + dt
        if act.size and fin.any():
            f_idx = act[fin]
            remaining[f_idx] = 0.0
            finish[f_idx] = t[block[f_idx]]
            rf = rate[f_idx]
            fr = np.isfinite(rf)
            if fr.any():
                np.subtract.at(load, ls[f_idx[fr]].ravel(), (ws[f_idx[fr]] * rf[fr, None]).ravel())
            np.minimum.at(thr, block[f_idx], rf)
            rate[f_idx] = 0.0
            act = act[~fin]
        if pend.size:
            arr = start[pend] <= t[block[pend]] * (1 + 1e-12) + 1e-18
            if arr.any():
                new = pend[arr]
                pend = pend[~arr]
                thr[np.unique(block[new])] = -np.inf
                act = np.union1d(act, new)
        events += 1
    # every flow ran to completion on fixed paths: link bytes = sum of size x weight
    n_cols = cap.size
    ok = (links >= 0) & (w > 0)
    link_bytes = np.bincount(np.where(ok, links, n_cols).ravel(), weights=(np.where(ok, w, 0.0) * size[:, None]).ravel(),
                             minlength=n_cols + 1)[:n_cols]
    if perm is not None:
        out, out2 = np.empty_like(finish), np.empty_like(alone)
        out[perm], out2[perm] = finish, alone
        finish, alone = out, out2
    return EventResult(block_time=t, finish=finish, link_bytes=link_bytes, events=events, iterations=iters,
                       alone=alone)


def _resolve(S, ls, ws, capc, pcap, rate, load, full: bool) -> int:
    """Re-solve flows ``S`` on the capacity the other active flows leave; updates ``rate`` and
    ``load`` in place. ``full``: work on all link ids (cheaper than compacting for big sets)."""
    lS, wS = ls[S], ws[S]
    old = rate[S]
    old = np.where(np.isfinite(old), old, 0.0)
    if full:
        inv, u = lS, None
        n = capc.size
    else:
        u, inv = np.unique(lS, return_inverse=True)
        inv = inv.reshape(lS.shape)
        n = u.size
    if old.any():
        d = np.bincount(inv.ravel(), weights=(wS * old[:, None]).ravel(), minlength=n)
        if u is None:
            load -= d
        else:
            load[u] -= d
    c = capc if u is None else capc[u]
    ld = load if u is None else load[u]
    res = np.maximum(c - ld, 0.0)
    r, it = max_min_padded(inv, wS, res, pcap[S])
    rate[S] = r
    add = np.where(np.isfinite(r), r, 0.0)
    d = np.bincount(inv.ravel(), weights=(wS * add[:, None]).ravel(), minlength=n)
    if u is None:
        load += d
    else:
        load[u] += d
    return it

"""Max-min fair sharing and the flow-level event loop.

Max-min fairness by progressive filling (Bertsekas & Gallager, *Data Networks*, 2nd ed., Sec. 6.5.2):
all unfrozen flows rise together; a link ``l`` saturates at level
``lam_l = (c_l - frozen_load_l) / sum_{f unfrozen} A[f, l]``; the flows crossing the links with the
smallest ``lam`` freeze at it; repeat. ``A[f, l]`` is the fraction of the flow's rate on the link
(1 for a single path, 1/k when sprayed over k paths), so this is weighted max-min fairness.
Each iteration is a few sparse passes; all local-minimum bottlenecks freeze together.

The event loop re-solves at every flow arrival and completion. Flows carry a *block* id: blocks
are independent copies of the fabric (their link ids do not overlap), each with its own clock, so
independent phases are advanced together in one vectorised loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

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
    links = np.full((F, K), dummy, dtype=np.int32 if dummy < 2**31 - 1 else np.int64)
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


def simulate_flows(
    A: sp.csr_matrix,
    cap: np.ndarray,
    size: np.ndarray,
    start: np.ndarray,
    block: np.ndarray,
    n_blocks: int,
) -> EventResult:
    """Run flows to completion under max-min sharing, re-solving at every arrival and completion.

    ``cap`` has one entry per column of ``A`` (block copies already tiled).
    """
    F = A.shape[0]
    size = np.asarray(size, dtype=np.float64)
    start = np.asarray(start, dtype=np.float64)
    block = np.asarray(block, dtype=np.int64)
    # compact the columns to the links actually used, then pad rows (padding id = last)
    cols, inv = np.unique(A.indices, return_inverse=True)
    Ac = sp.csr_matrix((A.data, inv.astype(np.int64), A.indptr), shape=(F, cols.size))
    # links that only one flow ever uses become that flow's private rate limit
    uses = np.bincount(Ac.indices, minlength=cols.size)
    capc_all = cap[cols]
    private = uses[Ac.indices] == 1
    row_of = np.repeat(np.arange(F), np.diff(Ac.indptr))
    pcap = np.full(F, np.inf)
    if private.any():
        np.minimum.at(pcap, row_of[private], capc_all[Ac.indices[private]] / Ac.data[private])
    shared_cols, sinv = np.unique(Ac.indices[~private], return_inverse=True)
    keep_rows = row_of[~private]
    As = sp.csr_matrix((Ac.data[~private], (keep_rows, sinv)), shape=(F, shared_cols.size))
    links, w = to_padded(As, shared_cols.size)
    capc = np.append(capc_all[shared_cols], np.inf)
    Lp = capc.size
    priv_bytes_rows = row_of[private]
    priv_cols = Ac.indices[private]
    priv_w = Ac.data[private]
    moved_total = np.zeros(F)
    remaining = size.copy()
    finish = np.full(F, np.nan)
    t = np.zeros(n_blocks)
    done = size <= 0
    finish[done] = start[done]
    started = start <= 0
    events = iters = 0
    while True:
        active = started & ~done
        pending = ~started
        if not active.any() and not pending.any():
            break
        idx = np.nonzero(active)[0]
        dt = np.full(n_blocks, np.inf)
        if pending.any():
            np.minimum.at(dt, block[pending], start[pending])
            dt -= t
        if idx.size:
            la, wa = links[idx], w[idx]
            r, it = max_min_padded(la, wa, capc, pcap[idx])
            iters += it
            with np.errstate(divide="ignore"):
                comp = np.where(np.isinf(r), 0.0, remaining[idx] / r)
            bi = block[idx]
            if n_blocks == 1:
                dt[0] = min(dt[0], comp.min())
            else:  # flows are grouped by block: segment minima
                seg = np.concatenate(([0], np.flatnonzero(np.diff(bi)) + 1))
                np.minimum.at(dt, bi[seg], np.minimum.reduceat(comp, seg))
        dt = np.where(np.isfinite(dt), np.maximum(dt, 0.0), 0.0)
        if idx.size:
            dtf = dt[bi]
            moved = np.where(np.isinf(r), remaining[idx], r * dtf)
            remaining[idx] -= moved
            moved_total[idx] += moved
            fin = (remaining[idx] <= _REL * size[idx]) | (comp <= dtf * (1 + _EVENT_REL))
            f_idx = idx[fin]
            done[f_idx] = True
            remaining[f_idx] = 0.0
        t = t + dt
        if idx.size:
            finish[f_idx] = t[block[f_idx]]
        if pending.any():
            started |= start <= t[block] * (1 + 1e-12) + 1e-18
        events += 1
    # every flow ran to completion on fixed paths: link bytes = sum of size x weight
    link_bytes_c = np.bincount(links.ravel(), weights=(w * moved_total[:, None]).ravel(), minlength=Lp)
    by_col = np.zeros(cols.size)
    by_col[shared_cols] = link_bytes_c[:-1]
    np.add.at(by_col, priv_cols, priv_w * moved_total[priv_bytes_rows])
    link_bytes = np.zeros(A.shape[1])
    link_bytes[cols] = by_col
    return EventResult(block_time=t, finish=finish, link_bytes=link_bytes, events=events, iterations=iters)

"""Pareto front over design points (vectorised dominance test)."""

from __future__ import annotations

import numpy as np


def pareto_mask(objectives: np.ndarray, maximize: np.ndarray | list[bool]) -> np.ndarray:
    """Boolean mask of the non-dominated rows of ``objectives`` (n points x m objectives).

    A point dominates another when it is at least as good in every objective and strictly
    better in one. Columns that are NaN for every point are ignored; a NaN in a used column
    makes that point dominated-by-default unless nothing else is comparable (it is kept out of
    the front). Duplicate points are all kept.

    >>> pareto_mask(np.array([[1.0, 5.0], [2.0, 6.0], [0.5, 4.0]]), [True, False]).tolist()
    [True, True, True]
    >>> pareto_mask(np.array([[1.0, 5.0], [2.0, 4.0]]), [True, False]).tolist()
    [False, True]
    """
    x = np.asarray(objectives, dtype=float)
    if x.ndim != 2 or x.shape[0] == 0:
        return np.zeros(x.shape[0] if x.ndim else 0, dtype=bool)
    used = ~np.isnan(x).all(axis=0)
    x = x[:, used]
    sign = np.where(np.asarray(maximize, dtype=bool)[used], 1.0, -1.0)
    y = x * sign  # larger is better everywhere
    valid = ~np.isnan(y).any(axis=1)
    out = np.zeros(x.shape[0], dtype=bool)
    idx = np.flatnonzero(valid)
    if idx.size == 0 or y.shape[1] == 0:
        out[idx] = True
        return out
    yv = y[idx]
    # Lexicographic order, best first: a point's dominators all come before it, and a dominated
    # dominator is itself dominated by a front point (transitivity), so each point needs checking
    # only against the front found so far and its own block. Memory: O(n + block x front), never n^2.
    order = np.lexsort(tuple(-yv[:, k] for k in range(yv.shape[1] - 1, -1, -1)))
    ys = yv[order]
    front = np.empty((0, ys.shape[1]))
    keep = np.zeros(len(ys), dtype=bool)
    start = 0
    while start < len(ys):
        block = max(1, min(4096, _CELLS // max(1, len(front) + 4096)))
        b = ys[start:start + block]
        dom = np.zeros(len(b), dtype=bool)
        if len(front):
            dom |= _dominated_by(front, b)
        dom |= _dominated_by(b, b)
        keep[start:start + len(b)] = ~dom
        front = np.concatenate([front, b[~dom]])
        start += len(b)
    out[idx[order[keep]]] = True
    return out


_CELLS = 1 << 22  # pairwise comparisons per pass (x objectives x 1 byte): ~4-12 MB of scratch


def _dominated_by(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """For each row of ``b``: is some row of ``a`` at least as good everywhere and better somewhere?"""
    ge = (a[:, None, :] >= b[None, :, :]).all(axis=2)
    gt = (a[:, None, :] > b[None, :, :]).any(axis=2)
    return (ge & gt).any(axis=0)

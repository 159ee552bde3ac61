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
    y = np.where(np.isnan(y), -np.inf, y)
    ge = (y[:, None, :] >= y[None, :, :]).all(axis=2)  # ge[i, j]: i at least as good as j
    gt = (y[:, None, :] > y[None, :, :]).any(axis=2)
    dominated = ((ge & gt) & valid[:, None]).any(axis=0)
    return valid & ~dominated

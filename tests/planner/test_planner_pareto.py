from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from clustertwin.planner.pareto import pareto_mask


def brute(x, maximize):
    s = np.where(maximize, 1.0, -1.0)
    y = x * s
    keep = []
    for i in range(len(y)):
        dom = any((y[j] >= y[i]).all() and (y[j] > y[i]).any() for j in range(len(y)) if j != i)
        keep.append(not dom)
    return np.array(keep)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(0, 5)), min_size=1, max_size=25))
def test_pareto_matches_brute_force(points):
    x = np.array(points, dtype=float)
    mx = np.array([True, False, False])
    assert pareto_mask(x, mx).tolist() == brute(x, mx).tolist()


def test_all_nan_column_is_ignored():
    x = np.array([[1.0, np.nan], [2.0, np.nan], [2.0, np.nan]])
    assert pareto_mask(x, [True, False]).tolist() == [False, True, True]

"""Max-min solver and event loop against first principles."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from clustertwin.fabric import max_min_rates, simulate_flows


def _reference_max_min(A: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """Textbook progressive filling: freeze one global bottleneck level at a time."""
    F, L = A.shape
    rate = np.zeros(F)
    frozen = ~(A > 0).any(1)
    rate[frozen] = np.inf
    while not frozen.all():
        W = A[~frozen].sum(0)
        load = (A[frozen & np.isfinite(rate)] * rate[frozen & np.isfinite(rate), None]).sum(0)
        lam = np.where(W > 0, (cap - load) / np.where(W > 0, W, 1), np.inf)
        m = lam.min()
        sat = lam <= m * (1 + 1e-12)
        hit = ~frozen & (A[:, sat] > 0).any(1)
        rate[hit] = m
        frozen |= hit
    return rate


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 12), st.integers(1, 8), st.integers(0, 10_000))
def test_parallel_filling_equals_textbook(F, L, seed):
    rng = np.random.default_rng(seed)
    A = (rng.random((F, L)) < 0.4) * rng.choice([1.0, 0.5, 0.25], size=(F, L))
    cap = rng.choice([1.0, 2.0, 3.0, 0.5], size=L)
    got, _ = max_min_rates(sp.csr_matrix(A), cap)
    ref = _reference_max_min(A, cap)
    assert np.allclose(got, ref, rtol=1e-9)


def test_two_flows_share_then_speed_up():
    # two flows on one link of 1 B/s: sizes 1 and 3 -> the first ends at 2 s, the second at 4 s
    A = sp.csr_matrix(np.array([[1.0], [1.0]]))
    res = simulate_flows(A, np.array([1.0]), np.array([1.0, 3.0]), np.zeros(2), np.zeros(2, dtype=int), 1)
    assert np.allclose(res.finish, [2.0, 4.0])
    assert np.isclose(res.link_bytes[0], 4.0)


def test_late_arrival_and_blocks():
    # block 1 is an independent copy: same flows, second flow arrives at t=1
    A = sp.csr_matrix(np.array([[1.0, 0], [1.0, 0], [0, 1.0], [0, 1.0]]))
    res = simulate_flows(A, np.array([1.0, 1.0]), np.array([2.0, 2.0, 2.0, 2.0]),
                         np.array([0, 0, 0, 1.0]), np.array([0, 0, 1, 1]), 2)
    assert np.allclose(res.block_time, [4.0, 4.0])
    # block 1: flow 2 alone for 1 s (1 B), then shared: 1 B left at 0.5 B/s -> 3 s; flow 3 then alone
    assert np.allclose(res.finish[2:], [3.0, 4.0])

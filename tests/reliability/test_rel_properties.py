"""Laws of the goodput model (hypothesis) and the Monte-Carlo check of the Young/Daly interval."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from clustertwin.reliability.checkpoint import daly_ettr, daly_interval
from clustertwin.reliability.montecarlo import simulate

pos = st.floats(min_value=1e-3, max_value=1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=100, deadline=None)
@given(tau=pos, delta=st.floats(0, 1e5), restart=st.floats(0, 1e5), mtbf=pos)
def test_ettr_between_zero_and_one(tau, delta, restart, mtbf):
    e = daly_ettr(tau, delta, restart, mtbf)
    assert 0.0 <= e <= 1.0


@settings(max_examples=100, deadline=None)
@given(tau=pos, delta=st.floats(0, 1e4), restart=st.floats(0, 1e4), mtbf=pos,
       factor=st.floats(min_value=1.0, max_value=100.0))
def test_higher_failure_rate_never_raises_goodput(tau, delta, restart, mtbf, factor):
    # fixed interval, and each at its own optimum interval
    assert daly_ettr(tau, delta, restart, mtbf / factor) <= daly_ettr(tau, delta, restart, mtbf) + 1e-12
    if delta > 0:
        lo = daly_ettr(daly_interval(delta, mtbf / factor), delta, restart, mtbf / factor)
        hi = daly_ettr(daly_interval(delta, mtbf), delta, restart, mtbf)
        assert lo <= hi + 1e-9


@settings(max_examples=30, deadline=None)
@given(scale=st.floats(0.0, 20.0), seed=st.integers(0, 2**31 - 1))
def test_goodput_model_with_design_is_monotone(fm, llama_design, llama_ckpt, scale, seed):
    from clustertwin.reliability.goodput import goodput

    base = goodput(fm.scaled(scale), llama_design.counts, llama_ckpt, days=10)
    worse = goodput(fm.scaled(scale * 1.5 + 0.01), llama_design.counts, llama_ckpt, days=10)
    assert 0 <= worse.ettr <= base.ettr <= 1


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), runs=st.integers(1, 40), lam=st.floats(1e-6, 1e-3))
def test_monte_carlo_runs_within_bounds(seed, runs, lam):
    r = simulate(class_rates=[lam, lam / 3], block_prob=[0.2, 0.0], block_wait=[3600.0, 0.0], planned_rate=lam / 10,
                 tau=600.0, delta=20.0, restart=300.0, horizon_s=5 * 86400.0, runs=runs, seed=seed)
    assert ((r.ettr >= 0) & (r.ettr <= 1)).all()
    assert (r.unplanned >= 0).all()


def test_young_daly_interval_minimises_monte_carlo_loss():
    """Common random numbers (same seed) across intervals: the Daly interval's simulated loss is the
    smallest of the grid within 3 standard errors of the paired difference."""
    lam = [1 / 11000.0, 1 / 40000.0]
    delta, restart, horizon, runs = 60.0, 450.0, 60 * 86400.0, 3000
    tau_opt = daly_interval(delta, 1 / sum(lam))
    res = {}
    for f in (0.25, 0.5, 1.0, 2.0, 4.0):
        r = simulate(class_rates=lam, block_prob=0.0, block_wait=0.0, planned_rate=0.0, tau=tau_opt * f, delta=delta,
                     restart=restart, horizon_s=horizon, runs=runs, seed=12345)
        res[f] = 1.0 - r.ettr
    for f in (0.25, 0.5, 2.0, 4.0):
        diff = res[f] - res[1.0]
        se = diff.std(ddof=1) / np.sqrt(runs)
        assert diff.mean() > -3 * se, (f, diff.mean(), se)
    # and the simulated ETTR agrees with Daly's expression
    assert abs((1 - res[1.0]).mean() - daly_ettr(tau_opt, delta, restart, 1 / sum(lam))) < 2e-3

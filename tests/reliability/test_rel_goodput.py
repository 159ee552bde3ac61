"""Checkpoint sizes and times, Young/Daly intervals, ETTR vs Meta's '>90 %' and the Monte-Carlo."""

from __future__ import annotations

import numpy as np
import pytest

from clustertwin.errors import InputError
from clustertwin.reliability.checkpoint import (
    checkpoint_bytes,
    daly_ettr,
    daly_interval,
    numeric_optimal_interval,
    young_interval,
)
from clustertwin.reliability.goodput import checkpoint_setup, ettr_grid, goodput


def test_bloom_checkpoint_size_and_time(params):
    # BLOOM-176B: 2.3 TB checkpoint (fp32 optimizer + weights), ~40 s to save (bigscience README)
    size = checkpoint_bytes(176e9, params.checkpoint["bytes_per_param"].value)
    assert size / 1024**4 == pytest.approx(2.3, rel=0.05)  # 2.24 TiB, as the README counts
    ck = checkpoint_setup(params, 176e9, write_bw=2.3e12 / 40)
    assert ck.write_s == pytest.approx(40 * size / 2.3e12)


def test_young_and_daly_formulas():
    assert young_interval(60.0, 3600.0 * 4) == pytest.approx(np.sqrt(2 * 60 * 14400))
    for delta, m, r in ((3.0, 11000.0, 450.0), (60.0, 3600.0, 600.0), (600.0, 20000.0, 100.0)):
        exact = numeric_optimal_interval(delta, r, m)
        # Daly's higher-order estimate is within 1 % of the exact optimum of his own cost model
        assert daly_interval(delta, m) == pytest.approx(exact, rel=0.01)
        assert daly_ettr(daly_interval(delta, m), delta, r, m) >= daly_ettr(young_interval(delta, m), delta, r, m) - 1e-9
    assert daly_interval(10.0, 4.0) == 4.0  # delta >= 2M: checkpoint every M


def test_llama3_ettr_above_90_percent(fm, llama_design, llama_ckpt):
    r = goodput(fm, llama_design.counts, llama_ckpt, days=54)
    assert r.unexpected_interruptions == pytest.approx(419, rel=0.05)
    assert r.planned_interruptions == pytest.approx(47)
    # Meta: 'higher than 90 % effective training time' (arXiv:2407.21783 Sec. 3.3.4)
    assert 0.90 < r.ettr < 0.97
    assert r.checkpoint.size_bytes == pytest.approx(405.85e9 * 14, rel=0.01)
    assert r.checkpoint.write_s == pytest.approx(r.checkpoint.size_bytes / 2e12)
    assert sum(r.loss_breakdown.values()) == pytest.approx(1 - r.ettr, abs=0.01)


def test_worse_restart_lowers_ettr(fm, llama_design, params):
    fast = checkpoint_setup(params, 405e9, restart_s=120)
    slow = checkpoint_setup(params, 405e9, restart_s=3600)
    assert goodput(fm, llama_design.counts, fast, days=54).ettr > goodput(fm, llama_design.counts, slow, days=54).ettr
    with pytest.raises(InputError):
        checkpoint_setup(params, 405e9, restart_s=-1)
    with pytest.raises(InputError):
        checkpoint_setup(params, 405e9, blocking_fraction=1.5)
    with pytest.raises(InputError):
        goodput(fm, llama_design.counts, fast, days=0)
    with pytest.raises(InputError):
        goodput(fm, llama_design.counts, fast, days=1, interval_s=-5)


def test_monte_carlo_matches_analytic_and_is_seeded(fm, llama_design, llama_ckpt):
    a = goodput(fm, llama_design.counts, llama_ckpt, days=54, monte_carlo_runs=400, seed=7)
    b = goodput(fm, llama_design.counts, llama_ckpt, days=54, monte_carlo_runs=400, seed=7)
    assert a.monte_carlo == b.monte_carlo
    mc = a.monte_carlo
    assert mc["unexpected_interruptions_mean"] == pytest.approx(419, rel=0.02)
    assert mc["ettr_mean"] == pytest.approx(a.ettr, abs=0.002)
    assert mc["ettr"]["p5"] <= mc["ettr"]["p50"] <= mc["ettr"]["p95"] <= 1


def test_ettr_grid_peaks_at_daly(fm, llama_design, llama_ckpt):
    r = goodput(fm, llama_design.counts, llama_ckpt, days=54)
    taus = r.daly_interval_s * np.array([0.25, 0.5, 0.8, 1.0, 1.25, 2.0, 4.0])
    g = ettr_grid(fm, llama_design.counts, llama_ckpt, taus)
    assert int(np.argmax(g)) == 3
    assert g[3] == pytest.approx(r.ettr)

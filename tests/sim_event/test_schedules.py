"""The engine reproduces the closed-form pipeline bubbles (MODELLING.md section 4) on a uniform
pipeline with zero communication, and every schedule runs each (micro-batch, chunk) exactly once."""

from __future__ import annotations

import pytest

from clustertwin.errors import InputError
from clustertwin.sim.event.schedules import stage_order, zb_h1_all

from ._synth import run, uniform_stages


@pytest.mark.parametrize("p,m", [(1, 1), (2, 2), (4, 8), (8, 8), (8, 32), (16, 16), (4, 1), (4, 3)])
def test_1f1b_bubble_is_p_minus_1_over_m(p, m):
    tf, tb = 1.0, 2.0
    r = run(uniform_stages(p, tf=tf, tb=tb), "1f1b", m)
    ideal = m * (tf + tb)
    # step = (m + p - 1)(tF + tB): bubble fraction of the ideal time = (p-1)/m
    assert r.step_time_s == pytest.approx((m + p - 1) * (tf + tb), rel=1e-9)
    assert (r.step_time_s - ideal) / ideal == pytest.approx((p - 1) / m, rel=1e-9)


@pytest.mark.parametrize("p,m,v", [(2, 2, 2), (4, 8, 2), (4, 8, 4), (8, 16, 2), (4, 12, 3), (8, 8, 4)])
def test_interleaved_bubble_is_p_minus_1_over_vm(p, m, v):
    tf, tb = 1.0, 2.0
    r = run(uniform_stages(p, layers_per_chunk=1, v=v, tf=tf, tb=tb), "interleaved", m)
    ideal = m * (tf + tb)
    assert (r.step_time_s - ideal) / ideal == pytest.approx((p - 1) / (v * m), rel=1e-9)


@pytest.mark.parametrize("p,m", [(2, 4), (4, 4), (4, 8), (8, 16), (4, 12)])
def test_zb_h1_bubble(p, m):
    # ZB-H1: bubble (p-1)(T_F + T_B - T_W) with B the input-gradient part; F = B = W = 1 -> (p-1)/3m.
    tf, tb_in, tw = 1.0, 1.0, 1.0
    r = run(uniform_stages(p, tf=tf, tb=tb_in + tw, tw=tw), "zb-h1", m)
    ideal = m * (tf + tb_in + tw)
    assert r.step_time_s == pytest.approx(ideal + (p - 1) * (tf + tb_in - tw), rel=1e-9)
    assert (r.step_time_s - ideal) / ideal == pytest.approx((p - 1) / (3 * m), rel=1e-9)


def test_gpipe_bubble_matches_1f1b():
    a = run(uniform_stages(4), "gpipe", 8).step_time_s
    b = run(uniform_stages(4), "1f1b", 8).step_time_s
    assert a == pytest.approx(b)


@pytest.mark.parametrize("schedule,v", [("1f1b", 1), ("interleaved", 2), ("interleaved", 4), ("gpipe", 1)])
@pytest.mark.parametrize("p,m", [(4, 8), (8, 16), (2, 6)])
def test_every_microbatch_once(schedule, v, p, m):
    if schedule == "interleaved" and m < p:
        pytest.skip("interleaving needs m >= p")
    for i in range(p):
        order = stage_order(schedule, p, m, v, i)
        for kind in "FB":
            got = sorted((mb, c) for k, mb, c in order if k == kind)
            assert got == sorted((mb, c) for mb in range(m) for c in range(v))
        pos = {(k, mb, c): n for n, (k, mb, c) in enumerate(order)}
        assert all(pos[("F", mb, c)] < pos[("B", mb, c)] for mb in range(m) for c in range(v))


def test_zb_h1_holds_at_most_p_microbatches():
    p, m = 4, 12
    for order in zb_h1_all(p, m):
        held = peak = 0
        for k, _mb, _c in order:
            held += {"F": 1, "W": -1}.get(k, 0)
            peak = max(peak, held)
        assert peak <= p
        assert sum(k == "W" for k, _, _ in order) == m


def test_bad_schedule_names_suggest():
    with pytest.raises(InputError, match="did you mean"):
        stage_order("1f1bb", 4, 8, 1, 0)
    with pytest.raises(InputError):
        stage_order("1f1b", 4, 8, 2, 0)

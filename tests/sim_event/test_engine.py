"""The discrete-event core: interference and bandwidth sharing arithmetic, bounds, determinism."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustertwin.sim.event import EventOptions, InterferenceModel, LayerWork, StageWork, simulate_work
from clustertwin.sim.event.engine import (
    LINK_NONE,
    LINK_SCALEOUT,
    LINK_SCALEUP,
    Engine,
    OpGraph,
    longest_chain,
)
from clustertwin.sim.event.graph import build_step


def _pair(comp, comm, link, sigma_up=0.15, sigma_out=0.02):
    g = OpGraph()
    a = g.stream(0, "compute")
    b = g.stream(0, "tp")
    g.add("gemm", a, comp, "forward", LINK_NONE)
    g.add("coll", b, comm, "tp", link)
    m = InterferenceModel(compute_slowdown_scaleup=sigma_up, compute_slowdown_scaleout=sigma_out)
    return Engine(g, m).run()


def test_overlapped_compute_slows_by_sigma_while_comm_runs():
    s = _pair(10.0, 3.0, LINK_SCALEUP)
    # compute progresses 3/1.15 during the collective, then runs alone
    assert s.end[1] == pytest.approx(3.0)
    assert s.end[0] == pytest.approx(3.0 + (10.0 - 3.0 / 1.15))
    s = _pair(10.0, 3.0, LINK_SCALEOUT)
    assert s.end[0] == pytest.approx(3.0 + (10.0 - 3.0 / 1.02))


def test_comm_longer_than_compute():
    s = _pair(2.0, 5.0, LINK_SCALEUP)
    assert s.end[0] == pytest.approx(2.3)
    assert s.makespan == pytest.approx(5.0)


def test_links_are_shared_fairly():
    g = OpGraph()
    s1, s2 = g.stream(0, "dp-grad"), g.stream(0, "pp-send-fwd")
    g.add("rs", s1, 4.0, "dp-grad", LINK_SCALEOUT)
    g.add("send", s2, 1.0, "pp", LINK_SCALEOUT)
    s = Engine(g).run()
    assert s.end[1] == pytest.approx(2.0)  # half bandwidth while both run
    assert s.end[0] == pytest.approx(5.0)  # work conserving
    # different ranks do not share
    g2 = OpGraph()
    a, b = g2.stream(0, "dp-grad"), g2.stream(1, "dp-grad")
    g2.add("rs0", a, 4.0, "dp-grad", LINK_SCALEOUT)
    g2.add("rs1", b, 4.0, "dp-grad", LINK_SCALEOUT)
    assert Engine(g2).run().makespan == pytest.approx(4.0)


def test_stream_order_and_dependencies():
    g = OpGraph()
    c, t = g.stream(0, "compute"), g.stream(0, "tp")
    x = g.add("a", c, 1.0, "forward")
    y = g.add("b", t, 2.0, "tp", LINK_SCALEUP, (x,))
    g.add("c", c, 1.0, "forward", LINK_NONE, (y,))
    s = Engine(g, InterferenceModel.none()).run()
    assert list(s.start) == [0.0, 1.0, 3.0]
    assert s.makespan == 4.0


def test_cycle_is_rejected():
    g = OpGraph()
    c = g.stream(0, "compute")
    g.add("a", c, 1.0, "forward")
    g.op_deps[0] = (1,)
    g.add("b", c, 1.0, "forward")
    with pytest.raises(ValueError):
        Engine(g).run()


def test_negative_work_is_rejected():
    g = OpGraph()
    c = g.stream(0, "compute")
    with pytest.raises(ValueError):
        g.add("a", c, -1.0, "forward")


layer = st.builds(
    LayerWork,
    fwd=st.floats(0.01, 2.0), bwd_input=st.floats(0.01, 3.0), bwd_weight=st.floats(0.0, 1.0),
    recompute=st.floats(0.0, 1.0), attn_fraction=st.floats(0.1, 0.9),
    tp_fwd=st.floats(0.0, 1.0), tp_bwd=st.floats(0.0, 1.0), cp_fwd=st.floats(0.0, 1.0),
    cp_bwd=st.floats(0.0, 1.0), ep_fwd=st.floats(0.0, 1.0), ep_bwd=st.floats(0.0, 1.0),
    dp_grad=st.floats(0.0, 1.0), dp_param=st.floats(0.0, 1.0), params=st.floats(1e6, 1e8),
)


@st.composite
def scenarios(draw):
    p = draw(st.integers(1, 4))
    v = draw(st.sampled_from([1, 1, 2])) if p > 1 else 1
    m = draw(st.integers(p if v > 1 else 1, 6))
    nl = draw(st.integers(1, 3))
    lw = draw(layer)
    stages = tuple(StageWork(chunks=tuple(tuple(lw for _ in range(nl)) for _ in range(v)),
                             p2p_fwd=draw(st.floats(0, 0.5)), p2p_bwd=draw(st.floats(0, 0.5)),
                             optimizer=draw(st.floats(0, 1))) for _ in range(p))
    sched = "interleaved" if v > 1 else draw(st.sampled_from(["1f1b", "zb-h1", "gpipe"]))
    opts = dict(schedule=sched, num_microbatches=m, zero_stage=draw(st.sampled_from([0, 1, 3])),
                tp_overlap=draw(st.booleans()), ep_overlap=draw(st.booleans()),
                overlap_grad_reduce=draw(st.booleans()), overlap_param_gather=draw(st.booleans()),
                bucket_params=draw(st.sampled_from([1e6, 4e7, 1e9])))
    return stages, opts


@settings(max_examples=40, deadline=None)
@given(scenarios())
def test_overlap_between_critical_path_and_sum_of_parts(sc):
    stages, kw = sc
    for model in (InterferenceModel(), InterferenceModel(compute_slowdown_scaleup=0.4,
                                                         compute_slowdown_scaleout=0.1)):
        opts = EventOptions(interference=model, **kw)
        g = build_step(stages, opts).graph
        s = Engine(g, model).run()
        total = sum(g.op_work)
        lower = longest_chain(g)
        # never faster than the longest dependency chain at full rate ...
        assert s.makespan >= lower * (1 - 1e-9) - 1e-12
        # ... never slower than running every op one after another
        assert s.makespan <= total * (1 + 1e-9) + 1e-12
        # and with a single stage, never slower than the sum of that rank's parts
        if len(stages) == 1:
            r = simulate_work(stages, opts)
            assert r.step_time_s <= total * (1 + 1e-9) + 1e-12


@settings(max_examples=25, deadline=None)
@given(scenarios())
def test_ideal_overlap_is_the_critical_path(sc):
    stages, kw = sc
    opts = EventOptions(interference=InterferenceModel.none(), **kw)
    g = build_step(stages, opts).graph
    s = Engine(g, opts.interference).run()
    assert s.makespan == pytest.approx(longest_chain(g), rel=1e-9, abs=1e-12)


@settings(max_examples=25, deadline=None)
@given(scenarios())
def test_breakdown_sums_to_step(sc):
    stages, kw = sc
    r = simulate_work(stages, EventOptions(**kw))
    assert sum(r.breakdown.values()) == pytest.approx(r.step_time_s, rel=1e-6, abs=1e-9)
    assert r.step_time_s > 0
    assert 0.0 <= r.bubble_fraction < 1.0


def test_more_steps_reach_steady_state():
    from ._synth import uniform_stages

    stages = uniform_stages(4, tp=0.2, dp=3.0, optimizer=0.3)
    one = simulate_work(stages, EventOptions(num_microbatches=8))
    three = simulate_work(stages, EventOptions(num_microbatches=8, steps=3))
    assert three.step_time_s == pytest.approx(one.step_time_s, rel=0.05)
    assert three.step_time_s > 0

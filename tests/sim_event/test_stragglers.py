"""Stragglers and imbalance: the slowdown the engine reports matches what can be derived by hand.

Derivation (uniform 1F1B, zero communication, per-stage per-micro-batch times t_F, t_B, m >= p):
the unperturbed step is (m + p - 1)(t_F + t_B). If the *last* stage runs k times slower, it receives
F(0) at (p-1) t_F and is never starved afterwards (upstream stages are faster and run ahead), so it
works m k (t_F + t_B) without a gap; then B(m-1) travels back through p-1 stages: step =
(p-1)(t_F + t_B) + m k (t_F + t_B), i.e. the step grows by m (k-1)(t_F + t_B). For any slowed stage
that is a lower bound: the slow stage alone must do m k (t_F + t_B) of work, and its first forward
cannot start before i t_F nor its last backward's gradient reach stage 0 before i t_B later.
"""

from __future__ import annotations

import pytest

from clustertwin.sim.event import EventOptions, InterferenceModel, Straggler, simulate_work

from ._synth import run, uniform_stages


@pytest.mark.parametrize("p,m,k", [(4, 8, 1.5), (8, 16, 1.2), (4, 4, 2.0), (2, 6, 1.1)])
def test_last_stage_straggler_exact(p, m, k):
    tf, tb = 1.0, 2.0
    stages = uniform_stages(p, tf=tf, tb=tb)
    base = run(stages, "1f1b", m).step_time_s
    opts = EventOptions(num_microbatches=m, interference=InterferenceModel.none())
    slow = simulate_work(stages, opts, stragglers=(Straggler(stage=p - 1, compute=k),)).step_time_s
    assert slow - base == pytest.approx(m * (k - 1) * (tf + tb), rel=1e-9)


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
@pytest.mark.parametrize("k", [1.1, 1.5, 3.0])
def test_any_stage_straggler_bounds(stage, k):
    p, m, tf, tb = 4, 8, 1.0, 2.0
    stages = uniform_stages(p, tf=tf, tb=tb)
    base = run(stages, "1f1b", m).step_time_s
    opts = EventOptions(num_microbatches=m, interference=InterferenceModel.none())
    slow = simulate_work(stages, opts, stragglers=(Straggler(stage=stage, compute=k),)).step_time_s
    lower = stage * tf + m * k * (tf + tb) + stage * tb
    assert slow >= lower - 1e-9
    assert slow >= base
    # never worse than every stage being that slow
    assert slow <= base * k + 1e-9


def test_degraded_link_slows_only_through_comm():
    p, m = 4, 8
    stages = uniform_stages(p, p2p=0.2, tp=0.3)
    base = run(stages, "1f1b", m).step_time_s
    opts = EventOptions(num_microbatches=m, interference=InterferenceModel.none())
    slow = simulate_work(stages, opts, stragglers=(Straggler(stage=1, comm=3.0),)).step_time_s
    assert slow > base
    # the degraded stage's comm triples: at most all of its comm, m micro-batches, adds up
    comm_per_mb = 0.3 * 2 + 0.2 * 2
    assert slow - base <= m * 2.0 * comm_per_mb * (3.0 - 1.0) + 1e-9


def test_uneven_stage_extra_layers():
    p, m = 4, 8
    stages = uniform_stages(p, layers_per_chunk=4, tf=1.0, tb=2.0)
    base = run(stages, "1f1b", m).step_time_s
    opts = EventOptions(num_microbatches=m, interference=InterferenceModel.none())
    slow = simulate_work(stages, opts, stragglers=(Straggler(stage=p - 1, extra_layers=1),))
    # one more layer of 4 on the last stage = a 1.25x straggler there
    assert slow.step_time_s - base == pytest.approx(m * 0.25 * 3.0, rel=1e-9)
    assert "stragglers" in slow.notes[0]


def test_bad_straggler_is_input_error():
    from clustertwin.errors import InputError

    with pytest.raises(InputError):
        simulate_work(uniform_stages(2), EventOptions(num_microbatches=2), stragglers=(Straggler(stage=5),))
    with pytest.raises(InputError):
        simulate_work(uniform_stages(2), EventOptions(num_microbatches=2),
                      stragglers=(Straggler(stage=0, compute=0.0),))


def test_degraded_scaleout_link_spares_scaleup_collectives():
    from clustertwin.errors import InputError
    from clustertwin.sim.event.engine import LINK_SCALEOUT, LINK_SCALEUP

    p, m = 4, 8
    stages = uniform_stages(p, p2p=0.2, tp=0.3)
    kw = dict(num_microbatches=m, interference=InterferenceModel.none(), tp_link=LINK_SCALEUP,
              pp_link=LINK_SCALEOUT)
    base = simulate_work(stages, EventOptions(**kw)).step_time_s
    nic = simulate_work(stages, EventOptions(**kw), stragglers=(Straggler(stage=1, comm=3.0, link="scale-out"),))
    nvl = simulate_work(stages, EventOptions(**kw), stragglers=(Straggler(stage=1, comm=3.0, link="scale-up"),))
    both = simulate_work(stages, EventOptions(**kw), stragglers=(Straggler(stage=1, comm=3.0),))
    assert base < nic.step_time_s <= both.step_time_s
    assert base < nvl.step_time_s <= both.step_time_s
    with pytest.raises(InputError):
        simulate_work(stages, EventOptions(**kw), stragglers=(Straggler(stage=1, comm=2.0, link="pcie"),))

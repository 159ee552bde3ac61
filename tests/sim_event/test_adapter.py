"""The event engine on the shared cost model: same per-op costs as the analytical engine, Megatron's
layer layout, schedules and stragglers on real models."""

from __future__ import annotations

import pytest

from clustertwin.sim.event import Straggler
from clustertwin.sim.event.adapter import estimate, layers_per_virtual_stage, simulate
from clustertwin.workload.model import get_model
from clustertwin.workload.plan import make_plan


@pytest.fixture(scope="module")
def h100(catalog):
    return catalog.system("hgx-h100"), catalog.fabric("ib-ndr-400g")


def test_megatron_layer_layout():
    assert layers_per_virtual_stage(126, 16, 1) == [7] + [8] * 14 + [7]
    assert layers_per_virtual_stage(126, 8, 4) == [3] + [4] * 30 + [3]
    assert layers_per_virtual_stage(96, 8, 3) == [4] * 24
    odd = layers_per_virtual_stage(61, 4, 1)
    assert sum(odd) == 61 and max(odd) - min(odd) <= 1


def test_estimate_has_the_step_result_fields(catalog, h100):
    system, fabric = h100
    model = get_model("llama3-8b")
    plan = make_plan(gpus=8, tp=1, pp=1, micro_batch=1, global_batch=64, seq_len=8192, dtype="bf16")
    r = estimate(model, system, fabric, plan, catalog=catalog)
    for key in ("step_time_s", "tokens_per_s", "mfu", "hfu", "tflops_per_gpu", "memory_gb_per_gpu",
                "fits_memory", "breakdown", "bottleneck", "critical_path", "stream_utilisation",
                "exposed_comm_s", "hidden_comm_s"):
        assert key in r.to_dict()
    assert 0.0 < r.mfu < 1.0 and 0.0 < r.hfu < 1.0
    assert r.tokens_per_s == pytest.approx(64 * 8192 / r.step_time_s, rel=1e-9)
    assert sum(r.breakdown.values()) == pytest.approx(r.step_time_s, rel=1e-6)


@pytest.mark.parametrize("kw", [
    dict(gpus=8, tp=1, pp=1, global_batch=64),          # DP only: the same costs, DP overlap differs
    dict(gpus=16, tp=2, pp=1, global_batch=64),         # + TP with SP overlap
    dict(gpus=32, tp=2, pp=2, global_batch=128),        # + 1F1B pipeline
])
def test_engines_agree_when_scheduling_is_simple(catalog, h100, kw):
    from clustertwin.sim.analytical import estimate as analytical

    system, fabric = h100
    model = get_model("llama3-8b")
    plan = make_plan(micro_batch=1, seq_len=8192, dtype="bf16", **kw)
    a = analytical(model, system, fabric, plan, catalog=catalog).step_time_s
    e = estimate(model, system, fabric, plan, catalog=catalog).step_time_s
    assert e == pytest.approx(a, rel=0.08)


def test_zero_bubble_beats_1f1b(catalog, h100):
    system, fabric = h100
    model = get_model("llama3-8b")
    plan = make_plan(gpus=32, tp=2, pp=4, micro_batch=1, global_batch=64, seq_len=4096)
    one = simulate(model, system, fabric, plan, catalog=catalog, schedule="1f1b")
    zb = simulate(model, system, fabric, plan, catalog=catalog, schedule="zb-h1")
    assert zb.step_time_s < one.step_time_s
    assert zb.breakdown["pp_bubble"] < one.breakdown["pp_bubble"]


def test_straggler_on_a_real_model(catalog, h100):
    system, fabric = h100
    model = get_model("llama3-8b")
    plan = make_plan(gpus=32, tp=2, pp=4, micro_batch=1, global_batch=64, seq_len=4096)
    base = simulate(model, system, fabric, plan, catalog=catalog)
    # The last stage carries the logits (V = 128k: about 2.4 layers' worth), so it sets the pace. A
    # middle stage 10 % slower is still lighter and costs almost nothing ...
    mild = simulate(model, system, fabric, plan, catalog=catalog, stragglers=(Straggler(stage=2, compute=1.1),))
    assert base.step_time_s < mild.step_time_s < 1.02 * base.step_time_s
    # ... one twice as slow becomes the bottleneck: the step is at least its own busy time, and the
    # pipeline runs at its pace (the step grows by most of the extra busy time over the old slowest stage)
    slow = simulate(model, system, fabric, plan, catalog=catalog, stragglers=(Straggler(stage=2, compute=2.0),))
    assert slow.step_time_s >= slow.stage_busy_s[2]
    grow = slow.stage_busy_s[2] - max(base.stage_busy_s)
    assert slow.step_time_s - base.step_time_s >= 0.9 * grow > 0
    # a degraded link on that stage (TP and P2P 3x slower) slows the step, less than the GPU did
    link = simulate(model, system, fabric, plan, catalog=catalog, stragglers=(Straggler(stage=2, comm=3.0),))
    assert base.step_time_s < link.step_time_s < slow.step_time_s


def test_trace_from_a_real_model_is_deterministic(catalog, h100):
    from clustertwin.report.trace import chrome_trace

    system, fabric = h100
    model = get_model("llama3-8b")
    plan = make_plan(gpus=32, tp=2, pp=2, vpp=2, micro_batch=1, global_batch=32, seq_len=4096)
    a = chrome_trace(simulate(model, system, fabric, plan, catalog=catalog, trace=True))
    b = chrome_trace(simulate(model, system, fabric, plan, catalog=catalog, trace=True))
    assert a == b
    assert {e["pid"] for e in a["traceEvents"]} == {0, 1}


def test_parse_straggler_and_slowdown(catalog, h100):
    from clustertwin.errors import InputError
    from clustertwin.sim.event import parse_straggler, straggler_slowdown

    s = parse_straggler("stage=2, compute=2.0,comm=1.5,layers=1")
    assert (s.stage, s.compute, s.comm, s.extra_layers) == (2, 2.0, 1.5, 1)
    for bad in ("compute=2", "stage=x", "stage=1,speed=2", "nonsense"):
        with pytest.raises(InputError):
            parse_straggler(bad)
    system, fabric = h100
    plan = make_plan(gpus=32, tp=2, pp=4, micro_batch=1, global_batch=64, seq_len=4096)
    out = straggler_slowdown(get_model("llama3-8b"), system, fabric, plan, (parse_straggler("stage=1,compute=2"),),
                             catalog=catalog)
    assert out["perturbed_s"] > out["base_s"] and out["slowdown_pct"] > 10.0


def test_moe_leading_dense_layers_are_placed(catalog):
    from clustertwin.sim.event.adapter import layer_work_from_costs  # noqa: F401  (public helper)

    model = get_model("deepseek-v3")
    system, fabric = catalog.system("hgx-h100"), catalog.fabric("ib-ndr-400g")
    plan = make_plan(gpus=256, tp=1, pp=4, ep=64, micro_batch=1, global_batch=256, seq_len=4096,
                     recompute="selective", uneven_pipeline=True)
    r = simulate(model, system, fabric, plan, catalog=catalog, trace=True)
    names0 = [n for n, st, *_ in r.timeline.ops() if st == 0 and n.startswith("F mb0 ")]
    names1 = [n for n, st, *_ in r.timeline.ops() if st == 1 and n.startswith("F mb0 ")]
    assert any(" D0" in n for n in names0)  # dense layers 0-2 on the first stage ...
    assert not any(" D" in n for n in names1)  # ... MoE layers elsewhere, with their all-to-all
    assert any("ep-dispatch" in n for n in names1)
    assert r.step_time_s > 0

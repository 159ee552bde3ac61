"""Pipeline layouts (whole layers per rank) and schedules (ZB-H1, DualPipe) in the rule, memory and engine."""

from __future__ import annotations

import numpy as np
import pytest

from clustertwin.errors import InputError
from clustertwin.workload import get_model
from clustertwin.workload.pipeline import stage_layout
from clustertwin.workload.plan import check_plan, make_plan


def test_deepseek_v3_layout_is_nvidias_recipe():
    # Megatron-Bridge set_deepseek_v3_pipeline_model_parallel_layout: (first, last, most) decoder layers
    m = get_model("deepseek-v3")
    for pp, want in ((16, (4, 1, 4)), (8, (8, 5, 8)), (4, (16, 13, 16))):
        assert tuple(float(x) for x in stage_layout(m, pp, 1)) == want


@pytest.mark.parametrize("name", ["deepseek-v3", "llama3-405b", "llama3-70b", "mixtral-8x7b"])
def test_layout_holds_every_layer_in_whole_layers(name):
    m = get_model(name)
    L = m.num_layers
    for p in range(2, L + 1):
        for v in (1, 2, 4):
            if p * v > L:
                continue
            f, la, most = (float(x) for x in stage_layout(m, p, v))
            assert f == int(f) or L % (p * v) == 0  # whole layers unless the split is even
            assert 0 <= la <= most and 0 <= f <= most
            # the ranks can hold all L layers: first + last + (p - 2) ranks of at most `most`
            assert f + la + (p - 2) * most >= L - 1e-9
            assert most <= np.ceil(L / (p - 1)) + 1


def _est(plan, stack="hai-llm", system="dgx-h800"):
    from clustertwin import api

    sc = api.build_scenario(model="deepseek-v3", system=system, gpus=plan["gpus"], stack=stack,
                            **{k: v for k, v in plan.items() if k != "gpus"})
    return api.simulate(sc)


def test_dualpipe_hides_the_ep_all_to_all_and_holds_two_stages():
    base = dict(gpus=2048, tp=1, pp=16, ep=64, micro_batch=1, global_batch=15360, seq_len=4096, dtype="fp8",
                zero=1, recompute="selective", uneven_pipeline=True)
    one = _est({**base, "pipeline_schedule": "1f1b"})
    dual = _est({**base, "pipeline_schedule": "dualpipe"})
    assert one.breakdown["ep_comm"] > 1.0 and dual.breakdown["ep_comm"] < 0.1 * one.breakdown["ep_comm"]
    # the SMs DualPipe gives the all-to-all slow the overlapped compute down
    assert dual.breakdown["overlap_slowdown"] > one.breakdown["overlap_slowdown"]
    assert dual.step_time_s < one.step_time_s
    # two stages per rank: twice the weights (DeepSeek-V3 Table 2: "2x" parameters). The binding DualPipe rank
    # is a middle one (two 4-layer stages); 1F1B's binding rank is the first (4 layers + the embedding)
    emb_gb = 2 * get_model("deepseek-v3").vocab_size * get_model("deepseek-v3").hidden_size / 1e9
    assert dual.memory_breakdown_gb["weights"] == pytest.approx(2 * (one.memory_breakdown_gb["weights"] - emb_gb),
                                                                rel=0.01)


def test_zero_bubble_shrinks_the_bubble_only():
    base = dict(gpus=1024, tp=8, pp=8, micro_batch=1, global_batch=256, seq_len=4096, zero=1)
    from clustertwin import api

    r = {s: api.simulate(api.build_scenario(model="llama3-70b", system="hgx-h100", pipeline_schedule=s,
                                            stack="megatron-zero-bubble", **base))
         for s in ("1f1b", "zb-h1")}
    assert r["zb-h1"].breakdown["pp_bubble"] < 0.6 * r["1f1b"].breakdown["pp_bubble"]
    assert r["zb-h1"].memory_gb_per_gpu == pytest.approx(r["1f1b"].memory_gb_per_gpu)
    for k in ("gemm", "attention", "dp_comm"):
        assert r["zb-h1"].breakdown[k] == pytest.approx(r["1f1b"].breakdown[k])


def test_schedule_rules_and_stack_limits():
    m = get_model("deepseek-v3")
    ok = dict(gpus=2048, tp=1, pp=16, ep=64, global_batch=15360, seq_len=4096, uneven_pipeline=True)
    check_plan(m, make_plan(**ok, pipeline_schedule="dualpipe", stack="hai-llm"))
    with pytest.raises(InputError, match="offers the pipeline schedule"):
        check_plan(m, make_plan(**ok, pipeline_schedule="dualpipe"))  # megatron-core has no DualPipe
    with pytest.raises(InputError, match="at least 2\\*pp"):  # 128 DP ranks x 8 = 1024: 1 micro-batch each
        check_plan(m, make_plan(**{**ok, "global_batch": 128}, pipeline_schedule="dualpipe", stack="hai-llm"))
    with pytest.raises(InputError, match="vpp 1"):
        check_plan(m, make_plan(**ok, vpp=2, pipeline_schedule="dualpipe", stack="hai-llm"))
    with pytest.raises(InputError, match="unknown pipeline schedule"):
        make_plan(**ok, pipeline_schedule="dual")


def test_event_engine_refuses_dualpipe_and_runs_zb_h1():
    from clustertwin import api

    sc = api.build_scenario(model="llama3-8b", system="hgx-h100", gpus=16, tp=2, pp=4, global_batch=64,
                            seq_len=2048, pipeline_schedule="zb-h1", stack="megatron-zero-bubble")
    assert api.simulate(sc, engine="event").step_time_s > 0
    with pytest.raises(InputError, match="no DualPipe"):
        sc2 = api.build_scenario(model="llama3-8b", system="hgx-h100", gpus=16, tp=2, pp=4, global_batch=64,
                                 seq_len=2048, pipeline_schedule="dualpipe", stack="hai-llm")
        api.simulate(sc2, engine="event")

"""Search driver: ranking, pruning, runner-up explanation, impossible requests (with a fake evaluator)."""

from __future__ import annotations

import numpy as np
import pytest
from planner_fakes import SHAPE, FakeEvaluator

from clustertwin.errors import InputError
from clustertwin.planner.planning import PlanRequest, plan
from clustertwin.planner.search import explain_runner_up, search
from clustertwin.planner.space import AXES, ModelShape, SpaceOptions, structural_space


def test_best_plan_is_the_brute_force_argmax():
    ev = FakeEvaluator(num_gpus=64, global_batch=256, seq_len=4096)
    res = search(SHAPE, ev, num_gpus=64, domain_size=8, global_batch=256, seq_len=4096, top_k=None,
                 distinct_layouts=False)
    space = structural_space(SHAPE, num_gpus=64, domain_size=8, global_batch=256, seq_len=4096)
    full = ev.evaluate(space)
    ok = full.fits_memory
    best = np.max(full.metrics["tokens_per_s"][ok])
    assert res.evaluation.metrics["tokens_per_s"][0] == pytest.approx(best)
    assert len(res) == int(ok.sum())  # everything that fits was ranked
    tps = res.evaluation.metrics["tokens_per_s"]
    assert (np.diff(tps) <= 1e-6 * tps[:-1]).all()  # best first
    assert (res.evaluation.metrics["memory_gb_per_gpu"] <= 80.0 + 1e-9).all()


def test_memory_pruning_happens_before_timing():
    calls = []

    class Spy(FakeEvaluator):
        def evaluate(self, plans):
            calls.append(plans["tp"].size)
            return super().evaluate(plans)

    ev = Spy(num_gpus=8, global_batch=64, seq_len=4096, hbm_bytes=40e9, params=13e9)
    res = search(SHAPE, ev, num_gpus=8, domain_size=8, global_batch=64, seq_len=4096, top_k=3)
    assert sum(calls) == res.stats.num_fit < res.stats.num_structural
    assert res.stats.num_feasible == res.stats.num_fit


def test_distinct_layouts_and_records():
    ev = FakeEvaluator()
    res = search(SHAPE, ev, num_gpus=64, domain_size=8, global_batch=256, seq_len=4096, top_k=8)
    recs = res.records()
    keys = {(r["tp"], r["pp"], r["dp"], r["cp"], r["ep"], r["vpp"]) for r in recs}
    assert len(keys) == len(recs) == 8
    for r in recs:
        assert r["tp"] * r["pp"] * r["dp"] * r["cp"] == 64
        assert r["recompute"] in ("none", "selective", "full")
        assert r["memory_headroom_gb"] == pytest.approx(80.0 - r["memory_gb_per_gpu"])
        assert set(r["breakdown"]) == {"compute", "pp_bubble", "tp_comm", "dp_comm", "cp_comm"}
        assert sum(r["breakdown"].values()) == pytest.approx(r["step_time_s"])
    why = explain_runner_up(recs)
    assert why["runner_up_slower_pct"] >= 0
    diffs = why["deltas_s"]
    assert abs(diffs[why["component"]]) == max(abs(v) for v in diffs.values())
    assert why["component"] in why["text"]


def test_fixed_axes_are_respected():
    ev = FakeEvaluator()
    res = search(SHAPE, ev, num_gpus=64, domain_size=8, global_batch=256, seq_len=4096, top_k=None,
                 options=SpaceOptions(fixed={"tp": (8,), "recompute": (2,)}))
    assert len(res) and set(res.plans["tp"].tolist()) == {8} and set(res.plans["recompute"].tolist()) == {2}
    assert set(res.plans) == set(AXES)


class _Cat:
    """A minimal catalog stand-in with one real system."""

    def __init__(self, catalog):
        self._c = catalog

    def system(self, name):
        return self._c.system(name)

    def fabric(self, name):
        return self._c.fabric(name)


def test_plan_too_big_model_says_how_many_gpus(catalog):
    big = ModelShape(name="fake-175b", num_layers=96, num_attention_heads=96, num_kv_heads=96)

    def make(n):
        return FakeEvaluator(params=175e9, hidden=12288, layers=96, num_gpus=n, global_batch=1536, seq_len=2048)

    req = PlanRequest(model=big, system="hgx-h100", num_gpus=8, global_batch=1536, seq_len=2048)
    with pytest.raises(InputError) as exc:
        plan(req, catalog, evaluator_for=make)
    text = exc.value.render()
    assert "does not fit on 8" in text and "--gpus" in text
    need = int(text.split("use --gpus ")[1].split()[0])
    # the suggested count works, and one domain (8 GPUs) fewer does not
    ok = plan(PlanRequest(model=big, system="hgx-h100", num_gpus=need, global_batch=1536, seq_len=2048), catalog,
              evaluator_for=make)
    assert ok.plans
    with pytest.raises(InputError):
        plan(PlanRequest(model=big, system="hgx-h100", num_gpus=need - 8, global_batch=1536, seq_len=2048),
             catalog, evaluator_for=make)


def test_plan_unusable_gpu_count_suggests_neighbours(catalog):
    # 97 is prime: no TP (heads), no PP (more than the 32 layers), no DP (global batch 256); 7 GPUs
    # would be usable as PP7 with uneven stages
    req = PlanRequest(model=SHAPE, system="hgx-h100", num_gpus=97, global_batch=256, seq_len=4096)
    with pytest.raises(InputError) as exc:
        plan(req, catalog, evaluator_for=lambda n: FakeEvaluator(num_gpus=n))
    text = exc.value.render()
    assert "can use 97 GPUs" in text and "--gpus 96" in text


def test_plan_defaults_and_runner_up(catalog):
    req = PlanRequest(model=SHAPE, system="hgx-h100", num_gpus=64, seq_len=4096, top_k=3)
    rep = plan(req, catalog, evaluator_for=lambda n: FakeEvaluator(num_gpus=n, global_batch=1024))
    assert rep.defaults_used["global_batch"] == (1 << 22) // 4096
    assert rep.defaults_used["fabric"] == catalog.system("hgx-h100").default_scaleout
    assert [p["rank"] for p in rep.plans] == [1, 2, 3]
    assert rep.runner_up and rep.runner_up["component"]
    doc = rep.to_json()
    assert set(doc["plans"][0]) >= {"tp", "pp", "dp", "cp", "ep", "vpp", "zero", "micro_batch", "recompute",
                                     "step_time_s", "tokens_per_s", "mfu", "hfu", "tflops_per_gpu",
                                     "memory_gb_per_gpu", "fits_memory", "breakdown", "bottleneck"}


def test_fixed_axis_that_cannot_work_names_the_values_that_can(catalog):
    req = PlanRequest(model=SHAPE, system="hgx-h100", num_gpus=64, global_batch=256, seq_len=4096,
                      options=SpaceOptions(fixed={"cp": (3,)}))
    with pytest.raises(InputError) as exc:
        plan(req, catalog, evaluator_for=lambda n: FakeEvaluator(num_gpus=n))
    assert "has --cp 3" in exc.value.message and "--cp 1/2/4" in exc.value.hint


def test_explicit_tp_may_span_domains():
    s = structural_space(SHAPE, num_gpus=64, domain_size=8, global_batch=256, seq_len=4096,
                         options=SpaceOptions(fixed={"tp": (16,)}))
    assert s["tp"].size and set(s["tp"].tolist()) == {16}
    bad = structural_space(SHAPE, num_gpus=64, domain_size=8, global_batch=256, seq_len=4096,
                           options=SpaceOptions(fixed={"tp": (64,)}))  # more than the 32 heads
    assert bad["tp"].size == 0

"""Continuous-batching simulation: determinism, load response, agreement with the closed form."""

from __future__ import annotations

import pytest

from clustertwin.errors import InputError
from clustertwin.serving import Deployment, Workload, build_instance, get_engine, offline
from clustertwin.serving.simulate import search_qps, simulate
from clustertwin.workload.model import get_model


@pytest.fixture(scope="module")
def inst(catalog):
    s = catalog.system("hgx-h100")
    return build_instance(get_model("llama3.1-8b"), s, catalog.fabric(s.default_scaleout),
                          Deployment(tp=1, weights_dtype="fp8", kv_dtype="fp8", max_batch=128), get_engine("trtllm"),
                          catalog=catalog)


def test_deterministic_with_seed(inst):
    wl = Workload(input_len=500, output_len=100, scenario="server", input_cv=0.5, output_cv=0.5)
    a = simulate(inst, wl, qps=20, requests=300, seed=3)
    b = simulate(inst, wl, qps=20, requests=300, seed=3)
    c = simulate(inst, wl, qps=20, requests=300, seed=4)
    assert a == b
    assert a.ttft_s != c.ttft_s


def test_load_raises_latency(inst):
    wl = Workload(input_len=500, output_len=100, scenario="server")
    low = simulate(inst, wl, qps=5, requests=300)
    high = simulate(inst, wl, qps=60, requests=300)
    assert high.tpot_s["p50"] > low.tpot_s["p50"]
    assert high.mean_batch > low.mean_batch
    assert low.ttft_s["p99"] >= low.ttft_s["p50"]


def test_offline_sim_agrees_with_closed_form(inst):
    wl = Workload(input_len=1000, output_len=200, scenario="offline")
    sim = simulate(inst, wl, requests=1500)
    est = offline(inst, 1000, 200)
    assert sim.output_tokens_per_s == pytest.approx(est.tokens_per_s_instance, rel=0.2)


def test_prompt_pays_the_lm_head_once(inst):
    # a lone 6,000-token prompt prefilled in one pass: the LM head runs on its last token only (no context
    # logits), so the simulated TTFT is the closed-form prefill pass, not one with 6,000 tokens of logits
    from clustertwin.serving.analytical import prefill_phase
    from clustertwin.serving.phases import step_costs, step_model

    wl = Workload(input_len=6000, output_len=2, scenario="offline")
    sim = simulate(inst, wl, requests=1)
    est = prefill_phase(inst, 6000, 8192)
    assert sim.ttft_s["mean"] == pytest.approx(est.ttft_s, rel=0.02)
    sm = step_model(inst, 8192)
    lm_all = float(step_costs(inst, 6000.0, 0.0, 0.0)["logits_s"])
    assert float(sm(6000.0, 0.0, 0.0) - sm(6000.0, 0.0, 0.0, 1.0)) == pytest.approx(
        lm_all - float(step_costs(inst, 1.0, 0.0, 0.0)["logits_s"]), rel=0.02)


def test_time_scale_stretches_every_pass(inst):
    # all requests at t = 0: the same passes, each time_scale times longer, so every latency scales exactly
    wl = Workload(input_len=500, output_len=100, scenario="offline")
    a = simulate(inst, wl, requests=200)
    b = simulate(inst, wl, requests=200, time_scale=1.5)
    assert b.steps == a.steps and b.duration_s == pytest.approx(1.5 * a.duration_s, rel=1e-9)
    assert b.tpot_s["mean"] == pytest.approx(1.5 * a.tpot_s["mean"], rel=1e-9)
    # at a fixed Poisson load near capacity a slower engine also runs a larger batch: TPOT grows by more
    # than the factor (the latency gap of a speed error at a logged load, benchmarks/check_serving_load.py)
    srv = Workload(input_len=500, output_len=100, scenario="server")
    q = 0.8 * offline(inst, 500, 100).tokens_per_s_instance / 100
    lo, hi = simulate(inst, srv, qps=q, requests=600), simulate(inst, srv, qps=q, requests=600, time_scale=1.2)
    assert hi.tpot_s["mean"] > 1.2 * lo.tpot_s["mean"] and hi.mean_batch > lo.mean_batch
    with pytest.raises(InputError, match="time_scale"):
        simulate(inst, wl, requests=10, time_scale=0.0)


def test_dataset_lengths_truncated_at_the_maximum_keep_their_mean():
    # a dataset's longest sample bounds its lengths: truncated lognormal, the stated mean kept, no pile-up
    # at the maximum (clipping put ~8 % of a 9.4k-mean / CV 0.8 set at a 20k cap and lowered its mean)
    import numpy as np

    from clustertwin.serving.simulate import _lengths

    x = _lengths(np.random.default_rng(0), 9400.0, 0.8, 100_000, hi=20000.0)
    assert x.max() <= 20000.0 and x.mean() == pytest.approx(9400.0, rel=0.01)
    assert (x >= 19900.0).mean() < 0.01
    free = _lengths(np.random.default_rng(0), 9400.0, 0.8, 100_000)
    assert (np.minimum(free, 20000.0) >= 19900.0).mean() > 0.07


def test_slo_search_meets_bounds(inst):
    wl = Workload(input_len=500, output_len=100, scenario="server", ttft_slo_s=0.5, tpot_slo_s=0.03)
    s = search_qps(inst, wl, requests=300, iters=5)
    assert s.qps_per_rank > 0
    assert s.sim.ttft_s["p99"] <= 0.5 and s.sim.tpot_s["p99"] <= 0.03


def test_prefill_only_passes_stall_decodes(catalog):
    # vLLM V0 without chunked prefill runs prompts in their own passes: decodes wait, TPOT rises
    s = catalog.system("hgx-h100")
    wl = Workload(input_len=1500, output_len=100, scenario="server")

    from dataclasses import replace

    def tpot(mixes, steps=1):
        eng = replace(get_engine("vllm"), mixes_whole_prompts=mixes)  # the same engine, one scheduler switch
        i = build_instance(get_model("llama3.1-8b"), s, catalog.fabric(s.default_scaleout),
                           Deployment(tp=1, weights_dtype="fp8", kv_dtype="fp8", max_batch=128, chunked_prefill=False,
                                      scheduler_steps=steps), eng, catalog=catalog)
        r = simulate(i, wl, qps=30, requests=400)
        return r.tpot_s["mean"], r.ttft_s["mean"]

    mixed, _ = tpot(True)
    separate, ttft1 = tpot(False)
    _, ttft8 = tpot(False, steps=8)
    assert separate > mixed
    assert ttft8 > ttft1  # multi-step scheduling admits new requests every 8 passes


def _kv_tight(catalog, policy):
    # a 70B model on one H200 (FP8): ~ 0.3M KV tokens, so 400 requests of 600 + 600 tokens cannot all fit
    s = catalog.system("hgx-h200")
    return build_instance(get_model("llama2-70b"), s, catalog.fabric(s.default_scaleout),
                          Deployment(tp=1, weights_dtype="fp8", kv_dtype="fp8", max_batch=4096, kv_policy=policy),
                          get_engine("trtllm"), catalog=catalog)


def test_on_demand_kv_holds_more_requests_and_pauses_when_full(catalog):
    wl = Workload(input_len=600, output_len=600, scenario="offline")
    res, ond = _kv_tight(catalog, "reserve"), _kv_tight(catalog, "on_demand")
    n = int(1.5 * res.kv_capacity_tokens / 1200)  # more than the cache holds with whole-output reservations
    a, b = simulate(res, wl, requests=n), simulate(ond, wl, requests=n)
    assert a.requests == b.requests == n  # every request completes under both policies
    assert a.pauses == 0
    # prompt + output reserved up front: at most capacity / 1200 sequences; taken as generated: more
    assert a.mean_batch <= res.kv_capacity_tokens / 1200 + 1
    assert b.mean_batch > 1.1 * a.mean_batch
    # the cache fills as the outputs grow: requests are paused and recomputed (never lost), and the
    # recomputed prompts + generated tokens share the passes: a slower TPOT than reserving
    assert b.pauses > 0
    assert b.tpot_s["mean"] > a.tpot_s["mean"]


def test_unknown_kv_policy_is_refused(catalog):
    with pytest.raises(InputError, match="kv_policy"):
        _kv_tight(catalog, "evict-all")


def test_trtllm_captures_its_published_graph_batch_sizes():
    # TensorRT-LLM perf-overview llm_options.yml (the MLPerf v5.1 R1 configs: 128, 256, 384, 512 from 128 up)
    sizes = get_engine("trtllm").adp_graph_batch_sizes
    assert sizes[:8] == (1, 2, 4, 8, 16, 32, 64, 128) and sizes[8:11] == (256, 384, 512) and sizes[-1] == 8192
    assert get_engine("sglang").adp_graph_batch_sizes == ()


def test_adp_decode_passes_run_at_the_padded_graph_batch(catalog):
    # DeepSeek-V3 ADP8 x EP8 on B200 under TensorRT-LLM: a decode-only pass runs at the busiest rank's batch
    # rounded up to a captured CUDA-graph size (~150 -> 256 per rank), so the same load is slower than without
    # the padding; the dummies read no KV. A non-ADP instance of the same engine is never padded.
    from dataclasses import replace

    s = catalog.system("hgx-b200")
    so = catalog.fabric(s.default_scaleout)
    dep = Deployment(tp=8, ep=8, dp_attention=True, weights_dtype="nvfp4", kv_dtype="fp8", max_batch=512)
    m = get_model("deepseek-v3")
    eng = get_engine("trtllm")
    pad = build_instance(m, s, so, dep, eng, catalog=catalog)
    nopad = build_instance(m, s, so, dep, replace(eng, adp_graph_batch_sizes=()), catalog=catalog)
    wl = Workload(input_len=200, output_len=2000, scenario="server")
    a = simulate(pad, wl, qps=3.5, requests=600, seed=1)
    b = simulate(nopad, wl, qps=3.5, requests=600, seed=1)
    assert a.padded_passes > 0 and b.padded_passes == 0
    assert 128 < a.mean_batch < 256  # a batch the 256 graph pads
    assert a.tpot_s["mean"] > 1.03 * b.tpot_s["mean"]
    tp8 = build_instance(m, s, so, replace(dep, dp_attention=False), eng, catalog=catalog)
    assert simulate(tp8, wl, qps=3.5, requests=200, seed=1).padded_passes == 0

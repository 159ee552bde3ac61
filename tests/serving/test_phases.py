"""Serving op model: KV sizes, decode HBM-bound / prefill compute-bound, MoE and DP-attention layouts."""

from __future__ import annotations

import numpy as np
import pytest

from clustertwin.errors import InputError
from clustertwin.serving import (
    Deployment,
    build_instance,
    get_engine,
    kv_bytes_per_token,
    offline,
    prefill_phase,
)
from clustertwin.serving.phases import step_costs, step_model, step_time
from clustertwin.workload.model import get_model


def _inst(catalog, model="llama2-70b", system="hgx-h100", **kw):
    sysm = catalog.system(system)
    engine = get_engine(kw.pop("engine", "trtllm"))
    return build_instance(get_model(model), sysm, catalog.fabric(sysm.default_scaleout), Deployment(**kw), engine,
                          catalog=catalog)


def test_kv_bytes_mla_gqa():
    # DeepSeek-V3 MLA latent (512 + 64) x 61 layers at FP8 = 35,136 B (LMSYS GB300 blog; serving_models.csv)
    assert kv_bytes_per_token(get_model("deepseek-v3"), 1.0) == 35136
    # Llama 2 70B GQA: 2 x 8 KV heads x 128 x 80 layers x 2 B = 327,680 B
    assert kv_bytes_per_token(get_model("llama2-70b"), 2.0) == 327680


def test_decode_is_hbm_bound_at_small_batch(catalog):
    inst = _inst(catalog, tp=1, weights_dtype="fp8", kv_dtype="fp8")
    t1 = float(step_time(inst, 1, 1000, 0))
    t_weights = inst.weight_bytes_gpu / inst.hw.hbm_bw
    # one token per step reads every weight once: within 1x-1.6x of the pure weight-read time
    assert t_weights < t1 < 1.6 * t_weights
    ts = step_time(inst, np.array([1, 16, 64, 256, 1024]), np.array([1, 16, 64, 256, 1024]) * 1000.0, 0)
    assert np.all(np.diff(ts) > 0)
    # batching amortises the weight reads: 64 sequences cost far less than 64 single steps
    assert ts[2] < 3 * ts[0]


def test_prefill_is_compute_bound(catalog):
    inst = _inst(catalog, tp=8, weights_dtype="fp8", kv_dtype="fp8")
    c = step_costs(inst, 8192, 0, 8192 * 1024)
    flops = 2.0 * get_model("llama2-70b").num_params() * 8192 / 8
    gemm_rate = flops / float(c["gemm_s"])
    peak = catalog.accelerator("h100-sxm").peak("fp8")
    assert 0.3 * peak < gemm_rate < peak


def test_moe_dp_attention_layout_and_alltoall(catalog):
    inst = _inst(catalog, model="deepseek-v3", system="gb200-nvl72", tp=1, ep=32, dp_attention=True,
                 weights_dtype="fp8", kv_dtype="fp8")
    assert (inst.gpus, inst.attn_tp, inst.attn_dp, inst.ep) == (32, 1, 32, 32)
    c = step_costs(inst, 128, 128 * 2000, 0)
    assert float(c["ep_comm_s"]) > 0 and float(c["tp_comm_s"]) == 0
    # wider EP: fewer experts per GPU, smaller weight footprint
    wide = _inst(catalog, model="deepseek-v3", system="gb200-nvl72", tp=1, ep=64, dp_attention=True,
                 weights_dtype="fp8", kv_dtype="fp8")
    assert wide.weight_bytes_gpu < inst.weight_bytes_gpu


def test_does_not_fit_is_clear_error(catalog):
    with pytest.raises(InputError, match="does not fit"):
        _inst(catalog, model="llama3.1-405b", tp=1, weights_dtype="bf16")


def test_offline_kv_capacity_decides_batch(catalog):
    bf16 = offline(_inst(catalog, tp=2, weights_dtype="fp8", kv_dtype="bf16", max_batch=4096), 1000, 1000)
    fp8 = offline(_inst(catalog, tp=2, weights_dtype="fp8", kv_dtype="fp8", max_batch=4096), 1000, 1000)
    assert bf16.kv_limited and fp8.kv_limited
    assert fp8.batch_per_rank == pytest.approx(2 * bf16.batch_per_rank, rel=1e-6)
    assert fp8.tokens_per_s_per_gpu > bf16.tokens_per_s_per_gpu


def test_speculative_decoding_raises_throughput(catalog):
    base = offline(_inst(catalog, model="deepseek-v3", system="gb200-nvl72", tp=1, ep=8, dp_attention=True,
                         weights_dtype="fp8", kv_dtype="fp8", max_batch=64), 2000, 1000)
    mtp = offline(_inst(catalog, model="deepseek-v3", system="gb200-nvl72", tp=1, ep=8, dp_attention=True,
                        weights_dtype="fp8", kv_dtype="fp8", max_batch=64, spec_tokens=1, acceptance=0.8), 2000, 1000)
    # 1.8 tokens per step at 0.8 acceptance, less the longer verification pass (2 query tokens per sequence
    # through the hot-expert-loaded MoE and its exchange): ~1.27x per user
    assert mtp.tokens_per_s_per_user > 1.2 * base.tokens_per_s_per_user


def test_prefix_hits_raise_prefill_rate(catalog):
    cold = prefill_phase(_inst(catalog, tp=8, weights_dtype="fp8"), 4000)
    warm = prefill_phase(_inst(catalog, tp=8, weights_dtype="fp8", prefix_hit_rate=0.5), 4000)
    assert warm.tokens_per_s_per_gpu > 1.5 * cold.tokens_per_s_per_gpu


def test_step_model_matches_op_model(catalog):
    inst = _inst(catalog, tp=2, weights_dtype="fp8", kv_dtype="fp8")
    sm = step_model(inst, 8192)
    for tok, kv, pairs in ((37, 37 * 1500, 0.0), (900, 200 * 1500, 700 * 500.0)):
        assert float(sm(tok, kv, pairs)) == pytest.approx(float(step_time(inst, tok, kv, pairs)), rel=0.05)


def test_step_model_keeps_tile_jumps_at_the_budget(catalog):
    # a pass of exactly the budget must not be interpolated across the next M-tile jump
    inst = _inst(catalog, tp=1, weights_dtype="fp8", kv_dtype="fp8", max_num_tokens=256)
    sm = step_model(inst, 257)
    assert float(sm(256, 0.0, 0.0)) == pytest.approx(float(step_time(inst, 256.0, 0.0, 0.0)), rel=1e-6)
    assert float(sm(257, 0.0, 0.0)) > float(sm(256, 0.0, 0.0))


def test_dp_attention_pass_waits_for_busiest_rank(catalog):
    from clustertwin.serving.phases import busiest_rank_prefill

    one = _inst(catalog, model="deepseek-v3", system="hgx-h200", tp=8, ep=8, weights_dtype="fp8", kv_dtype="fp8")
    dp = _inst(catalog, model="deepseek-v3", system="hgx-h200", tp=8, ep=8, dp_attention=True,
               weights_dtype="fp8", kv_dtype="fp8")
    assert float(busiest_rank_prefill(one, 100.0, 1000.0)) == 100.0
    worst = float(busiest_rank_prefill(dp, 100.0, 1000.0))  # p = 0.1 per rank, 8 ranks
    assert worst == pytest.approx(1000.0 * (1 - 0.9 ** 8))
    assert float(busiest_rank_prefill(dp, 1000.0, 1000.0)) == 1000.0  # never below the mean
    # the offline pass of the DP-attention layout is slower than its mean-rank pass
    from clustertwin.serving.analytical import decode_pass

    t, c = decode_pass(dp, 128.0, 1500.0, 1000.0, 1000.0)
    assert float(t) > float(sum(np.asarray(c[k]) for k in c))


def test_serving_uses_the_training_chip_efficiency_table(catalog):
    # the serving instance's kernel constants are the training op model's (sim.machine.make_hardware over
    # workload/data/efficiency.yaml); only the GEMM scale is the serving stack's own: engines.yaml `chips`
    # (Hopper family, and the AMD chips at their measured MAMF) and each engine's `gemm_mamf_scale` (Blackwell
    # family, fitted per engine)
    from dataclasses import replace

    from clustertwin.serving import engines
    from clustertwin.sim.machine import make_hardware, mamf_for

    over = engines._table().get("chips") or {}
    assert set(over) == {"h100-sxm", "h200", "h800", "mi300x", "mi325x", "mi355x"} and all(set(v) == {"gemm_mamf_scale"} for v in over.values())
    for system, wd, eng in (("hgx-h100", "fp8", "trtllm"), ("hgx-b200", "nvfp4", "trtllm"), ("gb200-nvl72", "fp8", "sglang"),
                            ("gb200-nvl72", "nvfp4", "vllm"), ("mi300x-8", "fp8", "vllm")):
        inst = _inst(catalog, system=system, tp=8, weights_dtype=wd, kv_dtype="fp8", engine=eng)
        sysm = catalog.system(system)
        hw = make_hardware(sysm, catalog.fabric(sysm.default_scaleout), wd, catalog=catalog)
        acc = sysm.accelerator.id
        # FP8 / NVFP4 on NVIDIA chips: engines.yaml low_precision_gemm's K overhead, MAMF kept at K = mamf_k
        k0 = engines.low_precision_k_overhead(acc).get(wd)
        assert inst.hw.eff == replace(hw.eff, gemm_k_overhead=k0 or hw.eff.gemm_k_overhead) and inst.hw.peak == hw.peak
        assert (k0 is None) == (acc == "mi300x")
        kr = engines.low_precision_k_reference()
        norm = 1.0 if k0 is None else (kr + k0) / (kr + hw.eff.gemm_k_overhead)
        scale = get_engine(eng).gemm_mamf_scale.get(acc, over.get(acc, {}).get("gemm_mamf_scale"))
        want = hw.mamf if scale is None else mamf_for(hw.eff.mamf_fraction, wd) * scale
        assert inst.hw.mamf == pytest.approx(want * norm)


def test_blackwell_gemm_scale_is_the_engines_own_not_trainings(catalog):
    # the training fit of Blackwell's gemm_mamf_scale (0.675 on b200 / gb200) absorbs training-framework
    # effects; serving takes each engine's own fitted value for the whole Blackwell family
    from clustertwin.serving.calibration import BLACKWELL

    for eng in ("trtllm", "sglang", "vllm", "generic", "deepseek"):
        sc = get_engine(eng).gemm_mamf_scale
        assert set(sc) == set(BLACKWELL) and len(set(sc.values())) == 1 and 0.5 <= sc["b200"] <= 1.0
    trt = _inst(catalog, system="hgx-b200", tp=1, weights_dtype="nvfp4", kv_dtype="fp8", engine="trtllm")
    sgl = _inst(catalog, system="hgx-b200", tp=1, weights_dtype="nvfp4", kv_dtype="fp8", engine="sglang")
    ratio = get_engine("trtllm").gemm_mamf_scale["b200"] / get_engine("sglang").gemm_mamf_scale["b200"]
    assert trt.hw.mamf / sgl.hw.mamf == pytest.approx(ratio)
    # a compute-bound prefill pass costs more GEMM time with the lower scale
    t = {n: float(step_costs(i, 8192.0, 0.0, 0.0)["gemm_s"]) for n, i in (("trt", trt), ("sgl", sgl))}
    assert t["sgl"] > t["trt"] * 1.2


def test_blackwell_fit_per_engine_and_pooled_for_engines_without_rows(catalog, validation_dir):
    # one sweep over BLACKWELL_GRID: an engine with Blackwell throughput rows takes its own argmin, an engine
    # with none the argmin over all of them; the shipped table comes back afterwards
    import csv

    from clustertwin.serving import engines
    from clustertwin.serving.calibration import (
        BLACKWELL_GRID,
        _fit_blackwell,
        _log_err,
        _set,
        predict_rows,
        restored_constants,
    )

    rows = {r["id"]: r for r in csv.DictReader(open(validation_dir / "serving.csv", encoding="utf-8"))}
    trt, sgl = rows["mlperf51-0070-llama2-70b-offline"], rows["lmsys-gb200-p2-decode-lowprec-isl2k"]
    over = {e: float(v["step_overhead_ms"]) for e, v in engines._table()["engines"].items()}
    shipped = engines._table()["engines"]["trtllm"]["gemm_mamf_scale"]
    with restored_constants():
        got = _fit_blackwell({"trtllm": [trt], "sglang": [sgl], "vllm": []}, over, 1.0, catalog)
        errs = {}
        for g in BLACKWELL_GRID:
            _set(over, 1.0, {"trtllm": g, "sglang": g})
            errs[g] = (_log_err([trt], predict_rows([trt], catalog)), _log_err([sgl], predict_rows([sgl], catalog)))
    assert got["trtllm"] == min(BLACKWELL_GRID, key=lambda g: errs[g][0])
    assert got["sglang"] == min(BLACKWELL_GRID, key=lambda g: errs[g][1])
    assert got["vllm"] == min(BLACKWELL_GRID, key=lambda g: errs[g][0] + errs[g][1])
    assert engines._table()["engines"]["trtllm"]["gemm_mamf_scale"] == shipped


def test_lm_head_and_router_run_in_bf16(catalog):
    # quantised checkpoints keep lm_head in BF16 (Model Optimizer exclude_modules): the LM head costs the
    # same whatever the weights dtype, on the chip's BF16 rate
    def logits(wd, model="llama2-70b"):
        inst = _inst(catalog, model=model, system="hgx-b200", tp=8, ep=8 if model != "llama2-70b" else 1,
                     weights_dtype=wd, kv_dtype="fp8")
        return float(step_costs(inst, 4096.0, 0.0, 0.0)["logits_s"])

    assert logits("nvfp4") == pytest.approx(logits("bf16"))
    assert logits("fp8") == pytest.approx(logits("bf16"))


def test_mla_decode_attention_runs_at_bf16_rate_over_fp8_kv(catalog):
    # TensorRT-LLM's FP8 attention speeds up GQA/MHA kernels over an FP8 KV cache, but MLA decode (absorbed
    # latent) stays at the BF16 rate (FlashMLA: FP8 latent dequantised in-kernel, BF16 MMAs)
    from dataclasses import replace

    trt = get_engine("trtllm")
    assert trt.fp8_attention
    sysm = catalog.system("hgx-b200")
    fab = catalog.fabric(sysm.default_scaleout)

    def attn(model, eng, **kw):
        inst = build_instance(get_model(model), sysm, fab, Deployment(weights_dtype="nvfp4", kv_dtype="fp8", **kw),
                              eng, catalog=catalog)
        return inst, float(step_costs(inst, kw.pop("n", 256), 256 * 4096, kw.pop("pairs", 0))["attention_s"])

    off = replace(trt, fp8_attention=False)
    inst, mla_on = attn("deepseek-v3", trt, tp=1, ep=8, dp_attention=True)
    _, mla_off = attn("deepseek-v3", off, tp=1, ep=8, dp_attention=True)
    assert mla_on == pytest.approx(mla_off)
    # and that decode is compute-bound (so the rate matters): FLOPs at the BF16 attention rate exceed the KV read
    m, hw = inst.model, inst.hw
    flops = 2.0 * m.num_attention_heads / inst.attn_tp * 256 * 4096 * (2 * m.kv_lora_rank + m.qk_rope_head_dim)
    kv_read = 256 * 4096 * inst.kv_bytes_token_gpu / inst.layers / (hw.hbm_bw * hw.eff.hbm_efficiency)
    assert flops / (hw.peak_bf16 * hw.eff.attention_efficiency) > kv_read
    # GQA prefill attention does take the FP8 rate
    pre_on = float(step_costs(build_instance(get_model("llama2-70b"), sysm, fab, Deployment(
        tp=8, weights_dtype="fp8", kv_dtype="fp8"), trt, catalog=catalog), 8192, 0, 8192 * 4096)["attention_s"])
    pre_off = float(step_costs(build_instance(get_model("llama2-70b"), sysm, fab, Deployment(
        tp=8, weights_dtype="fp8", kv_dtype="fp8"), off, catalog=catalog), 8192, 0, 8192 * 4096)["attention_s"])
    assert pre_on < 0.7 * pre_off


def test_attention_kernels_are_a_property_of_the_serving_stack(catalog):
    # on Hopper the serving stacks run FlashAttention-3-class kernels (engines.yaml attention_efficiency 0.65)
    # and FlashMLA-class MLA decode (0.67), not training's FA2-class 0.33; a chip the preset does not list
    # (Blackwell) keeps the chip's training value
    from dataclasses import replace

    eng = get_engine("sglang")
    bare = replace(eng, attention_efficiency={}, mla_decode_efficiency={})
    for e in ("trtllm", "vllm", "sglang", "deepseek"):
        assert get_engine(e).attention_efficiency["h100-sxm"] == 0.65
        assert get_engine(e).mla_decode_efficiency["h800"] == 0.67

    def attn(system, preset, model="llama2-70b", n=8192.0, kv=0.0, pairs=8192.0 * 4096, **kw):
        sysm = catalog.system(system)
        dep = Deployment(weights_dtype="fp8", kv_dtype="bf16", **kw)
        inst = build_instance(get_model(model), sysm, catalog.fabric(sysm.default_scaleout), dep, preset, catalog=catalog)
        kern = 2 * inst.hw.eff.kernel_overhead_s * inst.layers
        return float(step_costs(inst, n, kv, pairs)["attention_s"]) - kern, inst

    fa3, inst = attn("hgx-h100", eng, tp=8)
    fa2, _ = attn("hgx-h100", bare, tp=8)
    assert inst.hw.eff.attention_efficiency == 0.33
    assert fa2 / fa3 == pytest.approx(0.65 / 0.33)  # prefill attention is compute-bound: time ~ 1 / efficiency
    b_on, _ = attn("hgx-b200", eng, tp=8)
    b_off, _ = attn("hgx-b200", bare, tp=8)
    assert b_on == pytest.approx(b_off)
    # MLA decode (compute-bound at 256 x 8K) runs at the FlashMLA figure
    mla, _ = attn("hgx-h200", eng, model="deepseek-v3", n=256.0, kv=256.0 * 8192, pairs=0.0, tp=8, ep=8,
                  dp_attention=True)
    mla_fa2, _ = attn("hgx-h200", bare, model="deepseek-v3", n=256.0, kv=256.0 * 8192, pairs=0.0, tp=8, ep=8,
                      dp_attention=True)
    assert mla_fa2 / mla == pytest.approx(0.67 / 0.33)


def test_nvfp4_moe_keeps_bf16_attention_projections(catalog):
    # NVIDIA's NVFP4 MoE checkpoints (ModelOpt exclude_modules "self_attn*") quantize the experts and MLPs
    # only: the attention projections of a MoE model run BF16 GEMMs on BF16 weights; dense NVFP4 models
    # quantize them too; an explicit attn_weights_dtype overrides the rule
    sysm = catalog.system("hgx-b200")
    fab = catalog.fabric(sysm.default_scaleout)
    eng = get_engine("trtllm")
    m = get_model("deepseek-r1")

    def inst(model, **kw):
        return build_instance(model, sysm, fab, Deployment(weights_dtype="nvfp4", kv_dtype="fp8", **kw), eng, catalog=catalog)

    moe = inst(m, tp=8, ep=8, dp_attention=True)
    fp4 = inst(m, tp=8, ep=8, dp_attention=True, attn_weights_dtype="nvfp4")
    assert moe.attn_w_bytes == 2.0 and fp4.attn_w_bytes == pytest.approx(0.5625)
    assert moe.attn_hw.peak == pytest.approx(moe.attn_hw.peak_bf16) and fp4.attn_hw.peak > 2 * fp4.attn_hw.peak_bf16
    # the replicated (DP-attention) BF16 attention weights: 61 layers x attention params x (2 - 0.5625) B more
    extra = m.num_layers * m.attention_params() * (2.0 - 0.5625)
    assert moe.weight_bytes_gpu - fp4.weight_bytes_gpu == pytest.approx(extra, rel=1e-9)
    assert any("attention projections in bf16" in n for n in moe.notes)
    # compute-bound projections (a large decode batch) take the BF16 rate: at least 2x the FP4 GEMM time
    g_moe = float(step_costs(moe, 2048, 0.0, 0.0)["gemm_s"])
    g_fp4 = float(step_costs(fp4, 2048, 0.0, 0.0)["gemm_s"])
    assert g_moe > 2.0 * g_fp4
    # dense NVFP4 (Llama) keeps FP4 attention; experts / MoE costs are untouched by the rule
    dense = inst(get_model("llama3.3-70b"))
    assert dense.attn_w_bytes == pytest.approx(0.5625) and not any("attention projections" in n for n in dense.notes)
    assert float(step_costs(moe, 2048, 0.0, 0.0)["moe_s"]) == pytest.approx(float(step_costs(fp4, 2048, 0.0, 0.0)["moe_s"]))
    with pytest.raises(InputError, match="attention weights dtype"):
        inst(m, tp=8, ep=8, attn_weights_dtype="fp7")


def test_attention_dtype_overrides_the_engine_preset(catalog):
    # a run that names its attention precision (--attention-dtype; serving.csv precision_activations
    # "FP8 attention") overrides the engine preset: MLA prefill over an FP8 KV cache at the FP8 rate
    sysm = catalog.system("gb200-nvl72")
    fab = catalog.fabric(sysm.default_scaleout)
    sgl = get_engine("sglang")
    assert not sgl.fp8_attention
    m = get_model("deepseek-v3")

    def attn(**kw):
        inst = build_instance(m, sysm, fab, Deployment(tp=1, ep=4, dp_attention=True, weights_dtype="fp8", **kw), sgl,
                              catalog=catalog)
        return float(step_costs(inst, 8192, 0.0, 8192 * 16384)["attention_s"])

    preset, fp8, bf16 = attn(kv_dtype="fp8"), attn(kv_dtype="fp8", attention_dtype="fp8"), attn(kv_dtype="fp8", attention_dtype="bf16")
    assert bf16 == pytest.approx(preset) and fp8 < 0.6 * preset
    # over a BF16 KV cache the attention stays at the BF16 rate whatever is asked
    assert attn(kv_dtype="bf16", attention_dtype="fp8") == pytest.approx(attn(kv_dtype="bf16"))
    with pytest.raises(InputError, match="attention dtype"):
        attn(kv_dtype="fp8", attention_dtype="int4")


def test_validation_reads_the_attention_precision_column():
    from clustertwin.serving.validation import _attention_dtype

    assert _attention_dtype({"precision_activations": "fp4/fp8 (CuTe DSL nvfp4 MoE); FP8 attention"}) == "fp8"
    assert _attention_dtype({"precision_activations": "fp8 matmul inputs + fp8 dispatch; BF16 core MLA + BF16 combine"}) == "bf16"
    assert _attention_dtype({"precision_activations": "fp4 (NVFP4 GEMMs; TRT-LLM MLPerf harness)"}) == ""
    assert _attention_dtype({}) == ""


def test_per_projection_attention_weights(catalog):
    # "o=nvfp4,q_b=fp8,bf16": each MLA projection at its own precision (weights and GEMM rate); the
    # validator reads the projections a row's precision_weights names
    from clustertwin.serving.phases import attention_projections, attention_shapes
    from clustertwin.serving.validation import _attn_weights_spec

    sysm = catalog.system("gb200-nvl72")
    fab = catalog.fabric(sysm.default_scaleout)
    m = get_model("deepseek-v3")
    assert attention_projections(m) == ("q_a", "q_b", "kv_a", "kv_b", "o")

    def inst(spec):
        return build_instance(m, sysm, fab, Deployment(tp=1, ep=8, dp_attention=True, weights_dtype="nvfp4",
                                                       kv_dtype="fp8", attn_weights_dtype=spec), get_engine("sglang"),
                              catalog=catalog)

    bf16, mixed = inst("bf16"), inst("o=nvfp4,q_b=fp8,bf16")
    sizes = dict(zip(attention_projections(m), (N * K for N, K in attention_shapes(m)), strict=True))
    want = (sizes["o"] * 0.5625 + sizes["q_b"] * 1.0 + (sum(sizes.values()) - sizes["o"] - sizes["q_b"]) * 2.0) / sum(sizes.values())
    assert mixed.attn_w_bytes == pytest.approx(want) and bf16.attn_w_bytes == 2.0
    assert [b for _, b in mixed.attn_proj] == [2.0, 1.0, 2.0, 2.0, 0.5625]
    # compute-bound projections: the mixed layout is faster than all-BF16, slower than all-NVFP4
    g = {s: float(step_costs(inst(s), 4096, 0.0, 0.0)["gemm_s"]) for s in ("bf16", "o=nvfp4,q_b=fp8,bf16", "nvfp4")}
    assert g["nvfp4"] < g["o=nvfp4,q_b=fp8,bf16"] < g["bf16"]
    # names without a default keep the model's default rule (BF16 for an NVFP4 MoE checkpoint) for the rest
    assert [b for _, b in inst("o=nvfp4").attn_proj] == [2.0, 2.0, 2.0, 2.0, 0.5625]
    with pytest.raises(InputError, match="not one of"):
        inst("qkv=fp8")
    row = {"precision_weights": "nvfp4 MoE experts + nvfp4 attention o_proj; q_b_proj fp8"}
    assert _attn_weights_spec(row, m) == "q_b=fp8,o=nvfp4"
    assert _attn_weights_spec({"precision_weights": "nvfp4 (DeepSeek R1-NVFP4)"}, m) == ""


def test_busiest_rank_prefill_counts_whole_prompts(catalog):
    # prompts shorter than the room arrive as Poisson lumps of one prompt each: the busiest of N ranks
    # carries E[max_i min(K_i lump, unit)], never more prompt tokens than reach all N ranks together
    from types import SimpleNamespace

    from scipy.stats import poisson

    from clustertwin.serving.phases import busiest_rank_prefill

    two = SimpleNamespace(attn_dp=2)
    lam, lump, unit = 0.5, 100.0, 1000.0
    want = sum(lump * (1.0 - poisson.cdf(k - 1, lam) ** 2) for k in range(1, 11))
    assert float(busiest_rank_prefill(two, lam * lump, unit, lump=lump)) == pytest.approx(want, rel=1e-9)
    wide = SimpleNamespace(attn_dp=72)
    for mean in (20.0, 200.0, 1000.0):
        worst = float(busiest_rank_prefill(wide, mean, 8092.0, lump=2000.0))
        assert mean <= worst <= min(8092.0, 72 * mean)
    # EP72 example: 7.2 prompts of 2000 tokens reach the 72 ranks per pass; the room-sized lump would put
    # 6,757 tokens (3.4 prompts) on the busiest rank, whole prompts about 1.3 prompts
    assert float(busiest_rank_prefill(wide, 200.0, 8092.0)) > 6700.0
    assert float(busiest_rank_prefill(wide, 200.0, 8092.0, lump=2000.0)) == pytest.approx(2594.3, rel=1e-3)
    # a prompt longer than the room is a room-sized chunk per pass: the Bernoulli form
    assert float(busiest_rank_prefill(wide, 200.0, 8092.0, lump=9000.0)) == pytest.approx(
        float(busiest_rank_prefill(wide, 200.0, 8092.0)))


def test_mtp_verification_attention_does_the_mmas_of_every_query_token(catalog):
    """A verification pass runs 1 + spec queries per sequence against the same KV: the MLA decode kernel's
    FLOPs double with one draft token, its KV bytes do not (seq_len_q = 2 in FlashMLA)."""
    from dataclasses import replace as _replace

    from clustertwin.serving.engines import get_engine
    from clustertwin.serving.phases import Deployment, build_instance, step_costs
    from clustertwin.workload.model import get_model

    model = get_model("deepseek-v3")
    system = catalog.system("hgx-h200")
    dep = Deployment(tp=1, ep=8, dp_attention=True, weights_dtype="fp8", kv_dtype="bf16")
    one = build_instance(model, system, catalog.fabric(system.default_scaleout), dep, get_engine("sglang"), catalog=catalog)
    mtp = _replace(one, dep=_replace(dep, spec_tokens=1, acceptance=0.8))
    kv = 64 * 8192.0  # 64 sequences of 8K: compute-bound absorbed MLA on H100
    a1 = float(step_costs(one, 64.0, kv, 0.0)["attention_s"])
    a2 = float(step_costs(mtp, 64.0, kv, 0.0)["attention_s"])
    assert a2 > 1.8 * a1
    assert float(step_costs(mtp, 64.0, kv, 0.0, queries_per_read=1.0)["attention_s"]) == a1


def test_low_precision_gemm_k_overhead_keeps_mamf_shape(catalog):
    # FP8 / NVFP4 serving GEMMs take engines.yaml low_precision_gemm's per-tile K overhead (DeepGEMM's H800
    # FP8 sweep): relative to the K = 8192 shape the catalog MAMF was measured at, the rate follows
    # K / (K + k0) exactly; BF16 GEMMs and chips without a sourced sweep (AMD) keep the training value
    from clustertwin.serving.engines import low_precision_k_overhead
    from clustertwin.sim.kernels import gemm_time
    from clustertwin.sim.machine import make_hardware

    fp8 = _inst(catalog, model="llama3.1-8b", system="hgx-h100", tp=1, weights_dtype="fp8").hw
    k0 = low_precision_k_overhead("h100-sxm")["fp8"]
    assert fp8.eff.gemm_k_overhead == k0 > 64
    sysm = catalog.system("hgx-h100")
    train = make_hardware(sysm, catalog.fabric(sysm.default_scaleout), "fp8", catalog=catalog)
    assert train.eff.gemm_k_overhead == 64  # training GEMMs are untouched

    def rate(hw, K):
        return 2.0 * 8192 * 8192 * K / (gemm_time(hw, 8192.0, 8192.0, float(K), in_bytes=1.0) - hw.eff.kernel_overhead_s)

    ref = rate(fp8, 8192)
    for K in (512, 2048, 4096, 16384):
        assert rate(fp8, K) / ref == pytest.approx((K / (K + k0)) / (8192 / (8192 + k0)), rel=1e-9)
    # the MAMF shape itself keeps the rate of the training overhead at the same serving scale
    from dataclasses import replace

    from clustertwin.serving.engines import serving_chip_constants
    from clustertwin.sim.machine import mamf_for

    old = replace(train, mamf=mamf_for(train.eff.mamf_fraction, "fp8") * serving_chip_constants("h100-sxm")["gemm_mamf_scale"])
    assert ref == pytest.approx(rate(old, 8192), rel=1e-9)
    assert rate(fp8, 512) < 0.7 * rate(old, 512) and rate(fp8, 28672) > rate(old, 28672)
    bf16 = _inst(catalog, model="llama3.1-8b", system="hgx-h100", tp=1, weights_dtype="bf16").hw
    assert bf16.eff.gemm_k_overhead == 64
    amd = _inst(catalog, model="llama3.1-8b", system="mi300x-8", tp=1, weights_dtype="fp8").hw
    assert amd.eff.gemm_k_overhead == 64 and not low_precision_k_overhead("mi300x")


def test_unlisted_chip_takes_its_architecture_familys_serving_kernels(catalog):
    # engines.yaml lists its serving kernel constants per chip (H100 SXM / H200 / H800; B200 / GB200 / B300 /
    # GB300); another chip of the same SM architecture (H20, GH200, H100 NVL / PCIe) runs the same FA3 /
    # FlashMLA / DeepGEMM-class kernels, so it takes the value its listed family shares (and says so)
    from dataclasses import replace

    from clustertwin.serving.engines import family_value, low_precision_k_overhead, serving_chip_constants

    assert family_value({"h100-sxm": 0.65, "h200": 0.65}, "h20", "hopper") == 0.65
    assert family_value({"h100-sxm": 0.65, "h200": 0.6}, "h20", "hopper") is None  # a family that disagrees
    assert family_value({"h100-sxm": 0.65}, "b200", "blackwell") is None  # no chip of the family listed
    assert family_value({"h100-sxm": 0.65, "h20": 0.5}, "h20", "hopper") == 0.5  # a chip's own entry wins
    assert low_precision_k_overhead("h20", "hopper") == low_precision_k_overhead("h100-sxm")
    assert not low_precision_k_overhead("mi355x", "cdna4")  # AMD: no sourced sweep, training value kept
    assert serving_chip_constants("gh200", "hopper") == serving_chip_constants("h100-sxm")

    h20 = _inst(catalog, model="llama3.1-8b", system="hgx-h20", tp=1, weights_dtype="fp8")
    assert h20.hw.eff.gemm_k_overhead == low_precision_k_overhead("h100-sxm")["fp8"]
    assert any("hopper family" in n for n in h20.notes)
    assert not any("family" in n for n in _inst(catalog, model="llama3.1-8b", tp=1, weights_dtype="fp8").notes)
    # prefill attention runs at the preset's FA3-class efficiency, not the chip's training default
    eng = get_engine("trtllm")
    sysm = catalog.system("hgx-h20")
    fab = catalog.fabric(sysm.default_scaleout)

    def attn(preset):
        inst = build_instance(get_model("llama3.1-8b"), sysm, fab, Deployment(tp=1, weights_dtype="fp8", kv_dtype="bf16"),
                              preset, catalog=catalog)
        return float(step_costs(inst, 8192.0, 0.0, 8192.0 * 4096)["attention_s"]) - 2 * inst.hw.eff.kernel_overhead_s * inst.layers, inst

    fa3, inst = attn(eng)
    bare, _ = attn(replace(eng, attention_efficiency={}))
    assert bare / fa3 == pytest.approx(eng.attention_efficiency["h100-sxm"] / inst.hw.eff.attention_efficiency)


def test_kv_budget_follows_the_engines_memory_rule(catalog):
    # TensorRT-LLM: free_gpu_memory_fraction of what is left after weights (kvcacheconfig.md); vLLM / SGLang: a
    # share of the whole device, weights included. Both start from the driver-reported total, not training's
    # plan capacity (which keeps a fragmentation reserve back)
    trt, vllm = (_inst(catalog, tp=2, weights_dtype="bf16", engine=e) for e in ("trtllm", "vllm"))
    assert get_engine("trtllm").kv_memory_basis == "free" and get_engine("vllm").kv_memory_basis == "total"
    dev = catalog.accelerator("h100-sxm").memory_capacity_bytes
    assert trt.hw.hbm_bytes < dev  # the training plan capacity is the smaller figure
    kv_trt, kv_vllm = (i.kv_capacity_tokens * i.kv_bytes_token_gpu for i in (trt, vllm))
    m = get_model("llama2-70b")
    act = 8192 * (m.hidden_size * 2.0 * 8 + m.ffn_hidden_size / 2 * 2.0 * 3)
    assert kv_trt == pytest.approx((dev - trt.hw.eff.runtime_overhead_bytes - trt.weight_bytes_gpu - act) * 0.9)
    assert kv_vllm == pytest.approx(dev * 0.9 - vllm.weight_bytes_gpu - act)
    assert kv_vllm < kv_trt  # 70B BF16 on two 80 GB GPUs: 10 % of the whole device is more than 10 % of the free


def test_real_router_hot_experts_load_the_busiest_ep_rank(catalog):
    """DeepSeek's measured expert-load spread (TensorRT-LLM tech blog 4 Table 1) makes the busiest EP rank's
    experts and all-to-all slower than random routing; EPLB removes most of it; a model without a measured
    spread keeps random (binomial) routing."""
    from dataclasses import replace

    from clustertwin.serving.phases import EPLB_RESIDUAL, routing_rank_cv

    ds = get_model("deepseek-r1")
    trt, sgl = get_engine("trtllm"), get_engine("sglang")
    assert not trt.eplb and sgl.eplb
    # 1.28 over the 8 experts of an EP32 rank: 0.45, against the 0.48 per-rank CV the same table measures
    assert routing_rank_cv(ds, 32, trt) == pytest.approx(0.48, abs=0.04)
    assert routing_rank_cv(ds, 32, sgl) == pytest.approx(routing_rank_cv(ds, 32, trt) * EPLB_RESIDUAL)
    assert routing_rank_cv(ds, 8, trt) < routing_rank_cv(ds, 32, trt)  # more experts per rank average out
    assert routing_rank_cv(ds, 1, trt) == 0.0
    assert routing_rank_cv(get_model("mixtral-8x7b"), 8, trt) == 0.0  # no measured spread: random routing

    def costs(model, engine):
        sysm = catalog.system("hgx-b200")
        inst = build_instance(model, sysm, catalog.fabric(sysm.default_scaleout),
                              Deployment(tp=8, ep=8, dp_attention=True, weights_dtype="nvfp4", kv_dtype="fp8"),
                              get_engine(engine), catalog=catalog)
        return step_costs(inst, 512.0, 512.0 * 2000.0, 0.0)

    flat = replace(ds, moe_expert_load_cv=0.0)
    hot, rnd = costs(ds, "trtllm"), costs(flat, "trtllm")
    # the hot rank receives 1 + z cv times the mean tokens: its exchange carries that many more bytes (the
    # time grows less than the bytes: the latency part stays), its experts' time grows too
    u = 1.0 + np.sqrt(2.0 * np.log(8.0)) * routing_rank_cv(ds, 8, trt)
    assert u > 1.3
    assert 1.1 * float(rnd["ep_comm_s"]) < float(hot["ep_comm_s"]) <= u * float(rnd["ep_comm_s"])
    assert float(hot["moe_s"]) > float(rnd["moe_s"])
    # work of each attention rank does not depend on routing
    for k in ("gemm_s", "attention_s", "logits_s"):
        assert float(hot[k]) == pytest.approx(float(rnd[k]))

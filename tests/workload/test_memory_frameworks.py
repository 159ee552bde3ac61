"""Framework-dependent memory: torchtitan's per-op selective AC, what FP8 / MXFP8 / NVFP4 recipes save,
PyTorch FSDP's 16 B per sharded parameter, and what a measured figure counts (memory.csv `memory_basis`)."""

from __future__ import annotations

import csv
from dataclasses import replace

import pytest

from clustertwin.catalog import load_catalog
from clustertwin.validate import _estimate_row, memory_basis, predict_memory_row
from clustertwin.workload import activation_bytes_per_layer, get_model, memory_per_gpu
from clustertwin.workload.memory import hai_llm_bytes_per_layer, nvfp4_layers, op_sac_bytes_per_layer
from clustertwin.workload.stacks import get_stack


def test_op_sac_saves_the_odd_matmuls_sdpa_and_block_input():
    m = get_model("llama3-8b")  # h 4096, 32 heads, 8 KV heads, SwiGLU f 14336
    h, f, tok = 4096, 14336, 8192
    got = float(op_sac_bytes_per_layer(m, tok, 1, 1, 1, False))
    # input x, wq (h) + wv (h/4), w1 (f), w2 (h), SDPA output (h) in BF16 + FP32 log-sum-exp per head
    want = 2 * tok * (h + h + h / 4 + f + h + h) + 4 * 32 * tok
    assert got == pytest.approx(want)
    # a layer whose GEMMs are opaque to the policy (NVFP4) keeps only its input and the SDPA outputs
    assert float(op_sac_bytes_per_layer(m, tok, 1, 1, 1, False, 1.0)) == pytest.approx(2 * tok * 2 * h + 4 * 32 * tok)


def test_nvfp4_recipe_layer_count_matches_torchtitan():
    assert nvfp4_layers(32) == 27  # torchtitan nvfp4.md: Llama 3 8B layers 0-26 NVFP4
    assert nvfp4_layers(36) == 30  # Qwen3 8B layers 0-29


def _mem(model, dtype, stack):
    return memory_per_gpu(model, seq_len=2048, micro_batch=16, num_micro_batches=1, tp=1, pp=1, dp=4, cp=1, ep=1,
                          zero=3, sp=False, recompute_code=1, stack=stack, dtype=dtype)


def test_torchtitan_fp8_saves_like_bf16_and_nvfp4_saves_less():
    m, tt = get_model("llama3-8b"), get_stack("torchtitan")
    bf16, fp8, mx, fp4 = (float(_mem(m, d, tt)["activations"]) for d in ("bf16", "fp8", "mxfp8", "nvfp4"))
    assert bf16 == pytest.approx(fp8) == pytest.approx(mx)
    assert fp4 < 0.5 * bf16
    # Megatron / TE keeps the saved linear inputs in FP8 (its selective recompute stores them)
    mc = get_stack("megatron-core")
    assert float(_mem(m, "fp8", mc)["activations"]) < float(_mem(m, "bf16", mc)["activations"])


def test_pytorch_fsdp_holds_16_bytes_per_sharded_parameter():
    m = get_model("llama3-8b")
    kw = dict(seq_len=2048, micro_batch=1, num_micro_batches=1, tp=1, pp=1, dp=8, cp=1, ep=1, zero=3, sp=False,
              recompute_code=2)
    for sid in ("torchtitan", "pytorch-fsdp"):
        out = memory_per_gpu(m, stack=get_stack(sid), **kw)
        n = float(out["params_per_gpu"])
        assert float(out["optimizer"]) == pytest.approx(8 * n / 8)
        assert float(out["gradients"]) >= 4 * n / 8
    # DeepSpeed / Megatron ZeRO-3: BF16 shard + 12 B optimizer
    out = memory_per_gpu(m, stack=get_stack("megatron-core"), **kw)
    assert float(out["optimizer"]) == pytest.approx(12 * float(out["params_per_gpu"]) / 8)


def test_memory_basis_decides_whether_the_runtime_counts(validation_dir):
    with open(validation_dir / "memory.csv", newline="", encoding="utf-8") as fh:
        row = next(r for r in csv.DictReader(fh) if r["id"] == "mem-tt-b200-mxfp8-1")
    assert memory_basis(row) == ("allocator", "")
    cat = load_catalog()
    est = _estimate_row(row, cat)
    runtime = est.memory_breakdown_gb["runtime"]
    assert runtime > 0
    assert predict_memory_row(row, cat) == pytest.approx(est.memory_gb_per_gpu - runtime)
    smi = dict(row, memory_basis="nvidia-smi memory used")
    assert predict_memory_row(smi, cat) == pytest.approx(est.memory_gb_per_gpu)
    for tool in ("rocm-smi VRAM used", "amd-smi", "npu-smi info HBM usage", "DCGM_FI_DEV_FB_USED"):
        assert memory_basis(dict(row, memory_basis=tool)) == ("device", "")
    basis, note = memory_basis(dict(row, memory_basis=""))
    assert basis == "allocator" and "not recognised" in note


def test_hai_llm_layer_keeps_latents_fp8_caches_and_no_up_projections():
    m = get_model("deepseek-v3")  # h 7168, 128 heads, v 128, latents 1536 + 512 + 64, 256 experts x 2048, top-8
    tok, h, tile = 4096, 7168, 1 + 4 / 128
    moe = (2 * 2 * h + 2 * (1536 + 512 + 64) + 1.5 * 128 * 128 + 4 * 128 + 4 * 256 + 4 * 8
           + tile * (8 * (h + 2 * 2048) + 1 * (h + 2 * 2048)))
    dense = 2 * 2 * h + 2 * (1536 + 512 + 64) + 1.5 * 128 * 128 + 4 * 128 + tile * (h + 2 * 18432)
    want = tok * (58 / 61 * moe + 3 / 61 * dense)
    assert float(hai_llm_bytes_per_layer(m, tok, 1, 1, 1, False)) == pytest.approx(want)
    # about 0.66 GB per layer and 4K-token micro-batch, less than half of storing q/k/v and the SwiGLU outputs
    none, _ = activation_bytes_per_layer(m, tok, 1, 1, 1, False, 0, True, True)
    assert float(hai_llm_bytes_per_layer(m, tok, 1, 1, 1, False)) < 0.5 * float(none)


def test_deepseek_v3_layout_fits_80gb_for_the_reasons_the_report_gives():
    """PP16 EP64 ZeRO-1 DualPipe on 2,048 H800 (DeepSeek-V3 Sec. 3.2): ran on 80 GB."""
    from clustertwin import api

    base = dict(gpus=2048, pp=16, ep=64, global_batch=15360, seq_len=4096, dtype="fp8", uneven_pipeline=True,
                pipeline_schedule="dualpipe")
    r = api.simulate(api.build_scenario(model="deepseek-v3", system="dgx-h800", stack="hai-llm", **base))
    assert r.fits_memory and 60 < r.memory_gb_per_gpu < 80
    b = r.memory_breakdown_gb
    # BF16 AdamW moments: FP32 master + 2 x 2 B, sharded; FP32 gradients and BF16 weights unsharded
    assert b["gradients"] == pytest.approx(2 * b["weights"])
    m, st = get_model("deepseek-v3"), get_stack("hai-llm")
    kw = dict(seq_len=4096, micro_batch=1, num_micro_batches=120, tp=1, pp=16, dp=128, cp=1, ep=64, zero=1,
              sp=False, recompute_code=1, stack=st, schedule=2, dtype="fp8")
    bf16_moments = memory_per_gpu(m, **kw)
    fp32_moments = memory_per_gpu(m, **{**kw, "stack": replace(st, adam_moment_bytes=4.0)})
    assert float(fp32_moments["optimizer"]) == pytest.approx(1.5 * float(bf16_moments["optimizer"]))
    # without DeepSeek's recompute / FP8 caches (Megatron-style stored activations) it would not fit
    no_rc = memory_per_gpu(m, **{**kw, "recompute_code": 0})
    assert float(no_rc["total"]) > 1.3 * float(bf16_moments["total"])


@pytest.mark.parametrize("mb,fits", [(1, True), (2, False)])
def test_torchtitan_llama2_70b_oom_boundary_on_a100_80gb(mb, fits):
    """torchtitan docs/performance.md (64 A100 80GB, FSDP2, seq 4096): Llama 2 70B with selective op AC ran at
    local batch 1 and "with local batch size 2 will cause an OOM error" (footnote 1)."""
    from clustertwin import api

    sc = api.build_scenario(model="llama2-70b", system="dgx-a100", gpus=64, dp=64, zero=3, micro_batch=mb,
                            global_batch=64 * mb, seq_len=4096, recompute="selective", stack="torchtitan")
    assert api.simulate(sc).fits_memory is fits


def test_memory_cv_reports_folds_and_no_fitted_constant(validation_dir):
    from clustertwin import api

    path = validation_dir / "memory.csv"
    cv = api.cross_validate(path, "source")
    assert cv.constants == [] and cv.mape_pct == pytest.approx(cv.in_sample_mape_pct)
    assert sum(f["n"] for f in cv.folds) == len(cv.rows) == 20
    assert cv.mape_pct == pytest.approx(api.validate(path).mape_pct)


def test_megatron_mla_selective_recomputes_the_up_projections():
    from clustertwin.workload.memory import mla_up_proj_bytes_per_layer
    m = get_model("deepseek-v3")  # 128 heads, qk 192, v 128; latents q 1536, kv 512, rope 64
    tok = 4096
    want = 2 * tok * (128 * (2 * 192 + 128) / 2) - 2 * tok * (1536 + 512 + 64)  # TP 2
    assert float(mla_up_proj_bytes_per_layer(m, tok, 1, 2, 1)) == pytest.approx(want)
    kw = dict(seq_len=tok, micro_batch=1, num_micro_batches=8, tp=1, pp=8, dp=32, cp=1, ep=8, zero=1, sp=False,
              stack=get_stack("megatron-bridge"), dtype="bf16")
    sel, none = memory_per_gpu(m, recompute_code=1, **kw), memory_per_gpu(m, recompute_code=0, **kw)
    assert float(none["activations"] - sel["activations"]) > 0.0
    # a non-MLA MoE model: the pre-MLP norm output and the routed experts' activation output are not kept
    from clustertwin.workload.memory import moe_selective_bytes_per_layer
    q = get_model("qwen3-30b-a3b")  # 48 MoE layers, h 2048, top-8 of expert width 768
    assert float(moe_selective_bytes_per_layer(q, tok, 1, 1, 1, False)) == pytest.approx(
        2 * tok * 2048 + 2 * tok * 8 * 768)
    # a dense model under Megatron's selective (core attention, flash) keeps what no recompute keeps
    ll = get_model("llama3-70b")
    kw.update(ep=1)
    assert float(memory_per_gpu(ll, recompute_code=1, **kw)["total"]) == pytest.approx(
        float(memory_per_gpu(ll, recompute_code=0, **kw)["total"]))


# Megatron-Bridge DeepSeek-V3 layouts NVIDIA published (performance-summary archive; recipes
# scripts/performance/configs/deepseek/deepseek_workload_base_configs.py: recompute_modules ["mla_up_proj"]):
# (row, micro_batch, tp, pp, vpp, ep); the last two are later releases of the rows' jobs
# (benchmarks/data/megatron_bridge_best_known.csv: 26.06 DGX-B300, 26.04.01 DGX-B200)
PUBLISHED_MLA = [("mbridge-249", None), ("mbridge-136", (2, 1, 8, 1, 8)), ("mbridge-137", (1, 1, 8, 2, 32))]


@pytest.mark.parametrize("row_id,layout", PUBLISHED_MLA)
def test_published_megatron_bridge_deepseek_layouts_fit(validation_dir, row_id, layout):
    from clustertwin.sim.engines import get_engine
    from clustertwin.validate import _row_hardware, model_from_row, plan_from_row, read_rows
    cat = load_catalog()
    row = next(r for r in read_rows(validation_dir / "training.csv") if r["id"] == row_id)
    assert row["framework"] == "megatron-bridge" and row["recompute"] == "selective"
    if layout is None:
        e = _estimate_row(row, cat)
    else:
        mb, tp, pp, vpp, ep = layout
        p = plan_from_row(row)
        n = int(row["num_gpus"])
        q = replace(p, tp=tp, pp=pp, vpp=vpp, ep=ep, micro_batch=mb, dp=n // (tp * pp * p.cp), sequence_parallel=tp > 1)
        system, fabric = _row_hardware(row, cat)
        e = get_engine("analytical").estimate(model_from_row(row), system, fabric, q, catalog=cat, check=True)
    assert e.fits_memory, (row_id, e.memory_gb_per_gpu, e.memory_capacity_gb)


def test_torch_ring_cp_backward_buffers():
    """PyTorch's context_parallel (torchtitan, cp_attention torch-ring): one layer's ring-attention backward holds
    the c-fold K,V all-gather, FP32 dQ (+ its partial-update copy), three FP32 dK,dV buffers and one step's BF16
    SDPA gradients; it runs after the MLP backward, so the larger of the two transients counts."""
    from clustertwin.workload import ModelSpec
    from clustertwin.workload.memory import backward_transient_bytes, cp_ring_backward_bytes

    m = ModelSpec(id="l8", num_layers=32, hidden_size=4096, num_attention_heads=32, num_kv_heads=8,
                  ffn_hidden_size=14336, vocab_size=128256, swiglu=True)
    tok = 32768.0
    q, kv = tok * 4096, tok * 8 * 128 * 2  # query, K + V elements on the rank
    for c in (2, 8):
        want = c * kv * 2 + 2 * 4 * q + 3 * 4 * kv + 2 * (q + kv)
        assert float(cp_ring_backward_bytes(m, 32768 * c, 1, 1, c)) == pytest.approx(want)
    assert float(cp_ring_backward_bytes(m, 32768, 1, 1, 1)) == 0.0
    tt = get_stack("torchtitan-2024")
    kw = dict(seq_len=262144, micro_batch=1, num_micro_batches=1, tp=1, pp=1, dp=1, cp=8, ep=1, zero=3,
              recompute_code=2, dtype="fp8")
    ring = memory_per_gpu(m, stack=tt, **kw)["total"]
    fused = memory_per_gpu(m, stack=replace(tt, cp_attention="fused"), **kw)["total"]
    # torchtitan repeats the KV heads before SDPA (stack sdpa_repeat_kv): the ring buffers hold K,V per query head
    assert tt.sdpa_repeat_kv
    rep = float(cp_ring_backward_bytes(m, 262144, 1, 1, 8, repeat_kv=True))
    assert rep == pytest.approx(8 * 4 * kv * 2 + 2 * 4 * q + 3 * 4 * 4 * kv + 2 * (q + 4 * kv))  # n_rep 32 / 8
    gap = rep - float(backward_transient_bytes(m, 262144, 1, 1, 8))
    assert gap > 0  # at CP 8 the ring buffers outgrow the MLP backward's gradients
    assert float(ring - fused) == pytest.approx(gap)
    # at CP 2 the MLP backward binds the GQA-sized ring buffers (no change); torchtitan's repeated K,V outgrow it
    kw.update(seq_len=65536, cp=2)
    gqa = replace(tt, sdpa_repeat_kv=False)
    fused_cp2 = float(memory_per_gpu(m, stack=replace(gqa, cp_attention="fused"), **kw)["total"])
    assert float(memory_per_gpu(m, stack=gqa, **kw)["total"]) == pytest.approx(fused_cp2)
    assert float(memory_per_gpu(m, stack=tt, **kw)["total"]) > fused_cp2

"""Framework-dependent memory: torchtitan's per-op selective AC, what FP8 / MXFP8 / NVFP4 recipes save,
PyTorch FSDP's 16 B per sharded parameter, and what a measured figure counts (memory.csv `memory_basis`)."""

from __future__ import annotations

import csv

import pytest

from clustertwin.catalog import load_catalog
from clustertwin.validate import _estimate_row, memory_basis, predict_memory_row
from clustertwin.workload import get_model, memory_per_gpu
from clustertwin.workload.memory import nvfp4_layers, op_sac_bytes_per_layer
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
    basis, note = memory_basis(dict(row, memory_basis=""))
    assert basis == "allocator" and "not recognised" in note

"""The output layer's GEMM precision in FP8 steps follows the framework (stack ``output_layer_low_precision``):
Megatron-Core keeps it in BF16 (a non-TE ColumnParallelLinear outside TE's fp8_autocast); torchtitan keeps it in
BF16 too (its Float8 / MX / NVFP4 converters skip ``output``); llm-foundry's tied unembedding is a plain F.linear
outside TE; a stack that converts every nn.Linear (pytorch-fsdp) runs it at the step dtype's rate."""

from __future__ import annotations

import csv

import pytest

from clustertwin.catalog import load_catalog
from clustertwin.validate import _estimate_row
from clustertwin.workload.stacks import get_stack


@pytest.fixture(scope="module")
def row(validation_dir):
    with open(validation_dir / "training.csv", newline="", encoding="utf-8") as fh:
        return next(r for r in csv.DictReader(fh) if r["id"] == "mbridge-265")  # Llama 3 8B, H100, FP8


def test_megatron_torchtitan_and_llm_foundry_keep_the_output_layer_in_bf16():
    for sid in ("megatron-core", "megatron-bridge", "megatron-zero-bubble", "torchtitan", "torchtitan-2024",
                "torchtitan-2026", "llm-foundry"):
        assert get_stack(sid).output_layer_low_precision is False, sid
    assert get_stack("pytorch-fsdp").output_layer_low_precision is True


@pytest.mark.parametrize("engine", ["analytical", "event"])
def test_fp8_step_runs_megatron_logits_at_the_bf16_rate(row, engine):
    cat = load_catalog()
    assert row["precision"] == "fp8" and row["framework"] == "megatron-bridge"
    fp8 = _estimate_row(row, cat, engine)
    bf16 = _estimate_row(dict(row, precision="bf16"), cat, engine)
    if engine == "analytical":
        assert fp8.breakdown["logits"] == pytest.approx(bf16.breakdown["logits"], rel=1e-9)
        for fw in ("torchtitan", "llm-foundry"):  # BF16 output layer in their FP8 steps as well
            lp = _estimate_row(dict(row, framework=fw), cat, engine)
            hp = _estimate_row(dict(row, framework=fw, precision="bf16"), cat, engine)
            assert lp.breakdown["logits"] == pytest.approx(hp.breakdown["logits"], rel=1e-9), fw
        conv = _estimate_row(dict(row, framework="pytorch-fsdp"), cat, engine)
        conv16 = _estimate_row(dict(row, framework="pytorch-fsdp", precision="bf16"), cat, engine)
        assert conv.breakdown["logits"] < 0.8 * conv16.breakdown["logits"]  # FP8 output layer
    assert fp8.step_time_s < bf16.step_time_s  # the layers still run FP8

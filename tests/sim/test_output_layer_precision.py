"""The output layer's GEMM precision in FP8 steps follows the framework (stack ``output_layer_low_precision``):
Megatron-Core keeps it in BF16 (a non-TE ColumnParallelLinear outside TE's fp8_autocast), torchao Float8Linear
(torchtitan) converts it."""

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


def test_megatron_presets_keep_the_output_layer_in_bf16():
    for sid in ("megatron-core", "megatron-bridge", "megatron-zero-bubble"):
        assert get_stack(sid).output_layer_low_precision is False
    assert get_stack("torchtitan").output_layer_low_precision is True


@pytest.mark.parametrize("engine", ["analytical", "event"])
def test_fp8_step_runs_megatron_logits_at_the_bf16_rate(row, engine):
    cat = load_catalog()
    assert row["precision"] == "fp8" and row["framework"] == "megatron-bridge"
    fp8 = _estimate_row(row, cat, engine)
    bf16 = _estimate_row(dict(row, precision="bf16"), cat, engine)
    if engine == "analytical":
        assert fp8.breakdown["logits"] == pytest.approx(bf16.breakdown["logits"], rel=1e-9)
        titan = _estimate_row(dict(row, framework="torchtitan"), cat, engine)
        titan16 = _estimate_row(dict(row, framework="torchtitan", precision="bf16"), cat, engine)
        assert titan.breakdown["logits"] < 0.8 * titan16.breakdown["logits"]  # FP8 output layer
    assert fp8.step_time_s < bf16.step_time_s  # the layers still run FP8

"""FLOP formulas against hand-computed paper cases (Narayanan et al. SC'21 eq. 3; PaLM / Llama 3 6N + 12LHQT)."""

from __future__ import annotations

import csv

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustertwin.workload import (
    ModelSpec,
    forward_flops_per_token,
    get_model,
    hardware_flops_per_step,
    model_flops_per_step,
    narayanan_flops,
)


def test_gpt3_175b_narayanan_72_form_exact():
    m = get_model("gpt3-175b")
    B, s = 1536, 2048
    got = float(model_flops_per_step(m, s, B))
    want = narayanan_flops(B, s, 96, 12288, 51200, recompute=False)
    assert got == pytest.approx(want, rel=1e-12)
    # hand value: 72*1536*2048*96*12288^2*(1 + 2048/73728 + 51200/(12*96*12288))
    hand = 72 * 1536 * 2048 * 96 * 12288**2 * (1 + 2048 / (6 * 12288) + 51200 / (12 * 96 * 12288))
    assert got == pytest.approx(hand, rel=1e-12)
    assert got == pytest.approx(3.3862e18, rel=1e-3)  # ~6 N per token x 3.1 M tokens


def test_full_recompute_gives_narayanan_eq3(validation_dir):
    """Every SC'21 Table 1 row: our hardware FLOPs (full recompute) == eq. (3), and the row's step time
    times its published TFLOP/s x GPUs reproduces the same number."""
    rows = [r for r in csv.DictReader(open(validation_dir / "training.csv")) if r["id"].startswith("mlm-sc21-t1")]
    assert len(rows) == 10
    for r in rows:
        L, h, a, V, s, B = (int(r[k]) for k in ("num_layers", "hidden_size", "num_attention_heads", "vocab_size", "seq_len", "global_batch"))
        m = ModelSpec(id="x", num_layers=L, hidden_size=h, num_attention_heads=a, vocab_size=V)
        hw = float(hardware_flops_per_step(m, s, B, 2))
        assert hw == pytest.approx(narayanan_flops(B, s, L, h, V, recompute=True), rel=1e-12)
        published = float(r["published_value"]) * 1e12 * int(r["num_gpus"]) * float(r["measured_step_time_s"])
        assert hw == pytest.approx(published, rel=5e-3)


def test_mcore_rows_72_form_matches_published(validation_dir):
    rows = [r for r in csv.DictReader(open(validation_dir / "training.csv")) if r["id"].startswith("mcore-h100-weak")]
    assert len(rows) == 9
    for r in rows:
        L, h, a, V, s, B = (int(r[k]) for k in ("num_layers", "hidden_size", "num_attention_heads", "vocab_size", "seq_len", "global_batch"))
        m = ModelSpec(id="x", num_layers=L, hidden_size=h, num_attention_heads=a, vocab_size=V)
        published = float(r["published_value"]) * 1e12 * int(r["num_gpus"]) * float(r["measured_step_time_s"])
        assert float(model_flops_per_step(m, s, B)) == pytest.approx(published, rel=5e-3)


def test_llama3_405b_palm_form():
    """Llama 3 paper convention: 6N + 12 L H Q T per token, N = non-embedding matmul params + output layer."""
    m = get_model("llama3-405b")
    s = 8192
    per_tok = sum(forward_flops_per_token(m, s).values()) * 3
    N = m.num_params() - m.vocab_size * m.hidden_size  # drop the input embedding (a lookup)
    palm = 6 * N + 12 * m.num_layers * m.num_attention_heads * m.head_dim * s
    assert per_tok == pytest.approx(palm, rel=1e-9)
    assert N / 1e9 == pytest.approx(403.7, abs=0.5)  # validation/README: N = 403.7 B


def test_moe_and_mla_parameter_counts():
    ds = get_model("deepseek-v3")
    assert ds.num_params() / 1e9 == pytest.approx(671, abs=2)
    assert ds.num_active_params() / 1e9 == pytest.approx(37.5, abs=1)
    mx = get_model("mixtral-8x7b")
    assert mx.num_params() / 1e9 == pytest.approx(46.7, abs=0.2)
    assert mx.num_active_params() / 1e9 == pytest.approx(12.9, abs=0.2)
    q = get_model("qwen3-30b-a3b")
    assert q.num_params() / 1e9 == pytest.approx(30.5, abs=0.3)


def test_causal_halves_only_the_core():
    m = get_model("llama3-8b")
    full = forward_flops_per_token(m, 8192)
    causal = forward_flops_per_token(m, 8192, causal=True)
    assert causal["attn_core"] == pytest.approx(full["attn_core"] / 2)
    assert causal["mlp"] == full["mlp"]


def test_selective_adds_core_forward():
    m = get_model("gpt3-175b")
    base = float(hardware_flops_per_step(m, 2048, 8, 0))
    sel = float(hardware_flops_per_step(m, 2048, 8, 1))
    core = forward_flops_per_token(m, 2048)["attn_core"] * 8 * 2048
    assert sel - base == pytest.approx(core)


@settings(max_examples=40, deadline=None)
@given(gb=st.integers(1, 64), scale=st.integers(2, 8), rc=st.sampled_from([0, 1, 2]))
def test_more_gpus_same_per_gpu_work_never_lowers_total_flops(gb, scale, rc):
    """Weak scaling: global batch grows with the GPU count, so total FLOPs never fall."""
    m = get_model("llama3-8b")
    small = float(hardware_flops_per_step(m, 4096, gb, rc))
    big = float(hardware_flops_per_step(m, 4096, gb * scale, rc))
    assert big >= small
    assert np.isclose(big, small * scale)

"""Serving rows that spell their columns as their sources do (catalog/names.py serving tables,
docs/validation.md "Serving rows"): each is modelled and its note names the assumption; what has no model
fails with the reason."""

from __future__ import annotations

import csv

import pytest

from clustertwin.catalog.names import (
    resolve_model_ref,
    resolve_scenario,
    resolve_serving_dtype,
    resolve_target,
)
from clustertwin.errors import InputError, UnknownNameError
from clustertwin.serving.validation import DERIVED_TARGETS, TARGETS, row_inputs
from clustertwin.validate import _validate_serving
from clustertwin.workload.model import builtin_models


@pytest.fixture(scope="module")
def rows(validation_dir):
    with open(validation_dir / "serving.csv", newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def offline(rows):  # MLPerf llama2-70b Offline on one HGX H100
    return next(r for r in rows if r["system_id"] == "hgx-h100" and r["scenario_kind"] == "offline")


def _one(row, catalog, **cols):
    r = _validate_serving([dict(row, id="probe", **cols)], catalog).rows[0]
    assert r.error_pct is not None, r.reason
    return r


@pytest.mark.parametrize(("ref", "zoo"), [
    ("meta-llama/Llama-2-70b-chat-hf", "llama2-70b"), ("Mixtral-8x7B-Instruct-v0.1", "mixtral-8x7b"),
    ("llama2-70b-99.9", "llama2-70b"), ("deepseek-ai/DeepSeek-R1-0528", "deepseek-r1"),
    ("Qwen/Qwen3-235B-A22B-FP8", "qwen3-235b-a22b"), ("Llama-3.1-70B-Instruct", "llama3.3-70b"),
])
def test_model_ref_spellings_resolve_to_the_zoo_with_a_note(ref, zoo):
    mid, note = resolve_model_ref(ref, tuple(builtin_models()))
    assert mid == zoo and ref in note and zoo in note


def test_model_ref_outside_the_zoo_fails_with_suggestions():
    assert resolve_model_ref("llama2-70b", tuple(builtin_models())) == ("llama2-70b", "")
    with pytest.raises(UnknownNameError):
        resolve_model_ref("mistral-7b", tuple(builtin_models()))


@pytest.mark.parametrize(("text", "dtype", "said"), [
    ("fp8-e4m3", "fp8", "E4M3"), ("W4A16", "int4", "weight-only"), ("int4-awq", "int4", "AWQ"),
    ("w4a8", "w4a8", "FP8 GEMMs"), ("w8a8", "int8", "W8A8"), ("mxfp4", "nvfp4", "MXFP4"), ("NVFP4", "nvfp4", None),
])
def test_weights_dtype_spellings(text, dtype, said):
    d, note = resolve_serving_dtype(text, "weights")
    assert d == dtype
    assert (said in note) if said else not note


@pytest.mark.parametrize(("text", "dtype", "said"), [
    ("FP8_E4M3", "fp8", None), ("int8", "fp8", "INT8 KV"), ("auto", "bf16", "activation dtype"), ("fp16", "bf16", None),
])
def test_kv_dtype_spellings(text, dtype, said):
    d, note = resolve_serving_dtype(text, "kv")
    assert d == dtype
    assert (said in note) if said else not note
    assert resolve_serving_dtype("not stated", "kv") is None  # the engine default applies


def test_a_weight_only_int4_row_is_modelled_with_half_byte_weights(offline, catalog):
    int4 = _one(offline, catalog, weights_dtype="int4-awq")
    assert "modelled as int4" in int4.note and "dequantised to BF16" in int4.note
    bf16 = _one(offline, catalog, weights_dtype="bf16")
    assert int4.predicted > bf16.predicted  # a quarter of the weight bytes per decode step, same GEMM rate
    dep = row_inputs(dict(offline, weights_dtype="w4a16"), catalog)[3]
    assert dep.weights_dtype == "int4"


@pytest.mark.parametrize(("kind", "scenario", "want"), [
    ("Server", "", "server"), ("throughput", "", "offline"), ("online", "", "server"), ("Interactive", "", "interactive"),
    ("", "MLPerf Server (Poisson arrivals; p99 TTFT/TPOT bounds)", "server"), ("", "decode-only saturation", "decode"),
])
def test_scenario_spellings(kind, scenario, want):
    k, note = resolve_scenario(kind, scenario)
    assert k == want and note
    assert resolve_scenario("offline") == ("offline", "")


def test_a_capitalised_server_row_is_modelled_as_a_server_row(rows, catalog):
    srv = next(r for r in rows if r["scenario_kind"] == "server" and r["model_ref"] == "llama2-70b")
    same = _one(srv, catalog)
    spelt = _one(srv, catalog, scenario_kind="Server")
    assert spelt.predicted == pytest.approx(same.predicted, rel=1e-12) and "read as server" in spelt.note


def test_total_and_per_sample_targets_are_derived_from_the_per_gpu_prediction(offline, catalog):
    per_gpu = _one(offline, catalog)
    n = int(offline["num_gpus"])
    total = _one(offline, catalog, target_metric="tokens_per_s_total", target_value=offline["tokens_per_s_total"])
    assert total.predicted == pytest.approx(per_gpu.predicted * n, rel=1e-12) and f"x {n} GPUs" in total.note
    out_len = float(offline["output_len"])
    sps = _one(offline, catalog, target_metric="samples_per_s", target_value="10")
    assert sps.predicted == pytest.approx(per_gpu.predicted * n / out_len, rel=1e-12)
    assert resolve_target("Tokens/s/GPU", TARGETS + DERIVED_TARGETS)[0] == "tokens_per_s_per_gpu"
    with pytest.raises(InputError, match="unknown target_metric"):
        resolve_target("tpot_p99_ms", TARGETS + DERIVED_TARGETS)


def test_published_spellings_of_degrees_flags_and_rates(offline, catalog):
    base = row_inputs(offline, catalog)
    tp8 = row_inputs(dict(offline, tp="TP8"), catalog)
    assert tp8[3].tp == 8 and row_inputs(dict(offline, tp="tp=8"), catalog)[3].tp == 8
    assert row_inputs(dict(offline, dp_attention="true"), catalog)[3].dp_attention
    pct = row_inputs(dict(offline, kv_cache_hit_rate="50%"), catalog)
    assert pct[3].prefix_hit_rate == pytest.approx(0.5) and any("read as 0.5 (percent)" in a for a in pct[7])
    assert base[3].prefix_hit_rate == 0.0


def test_a_throughput_row_without_an_output_length_decodes_the_dataset_mean(offline, catalog):
    wl, assumed = (lambda x: (x[4], x[7]))(row_inputs(dict(offline, output_len=""), catalog))
    assert wl.output_len == 285.0 and any("MLPerf dataset mean generated tokens" in a for a in assumed)
    other = row_inputs(dict(offline, output_len="", model_ref="qwen3-235b-a22b", weights_dtype="fp8"), catalog)
    assert other[4].output_len == 1024.0 and any("1024 tokens (assumed)" in a for a in other[7])


def test_a_blank_model_ref_is_read_from_the_model_column(offline, catalog):
    r = _one(offline, catalog, model_ref="", model="Llama-2-70B-Chat")
    assert "model_ref blank: read from the model column" in r.note and "modelled as 'llama2-70b'" in r.note

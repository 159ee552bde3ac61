"""Serving validation (packaged serving.csv) and the serve CLI."""

from __future__ import annotations

import csv
import json

import pytest

from cli_runner import run_cli
from clustertwin.serving.validation import predict_serving_row, row_inputs

QUICK = ("mlperf41-0048-llama2-70b-offline", "trtllm-perf-llama3.1-405b-h100-tp8-fp8-isl5000-osl500",
         "lmsys-h100x32-prefill-ep32-isl4k", "lmsys-gb200-p2-decode-lowprec-isl2k")


def _rows(validation_dir):
    with (validation_dir / "serving.csv").open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _quick_subset(validation_dir, tmp_path):
    """The QUICK rows of the packaged serving.csv, written as a validation file of their own: (path, rows)."""
    rows = [r for r in _rows(validation_dir) if r["id"] in QUICK]
    path = tmp_path / "subset.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path, rows


def test_rows_use_only_normalised_columns(validation_dir, catalog):
    rows = {r["id"]: r for r in _rows(validation_dir)}
    for rid in QUICK:
        row = dict(rows[rid])
        base = predict_serving_row(row, catalog).predicted
        for col in ("source", "source_locator", "source_ref", "source_group", "trust", "inferred_fields",
                    "roundtrip_check", "notes", "tokens_per_s_per_gpu", "tokens_per_s_total",
                    "prefill_tokens_per_s_per_gpu", "decode_tokens_per_s_per_gpu", "target_qps", "samples_per_s"):
            row[col] = "999999"
        row["id"] = "renamed"
        assert predict_serving_row(row, catalog).predicted == base


def test_unknown_inputs_get_stated_defaults(validation_dir, catalog):
    row = next(r for r in _rows(validation_dir) if r["id"] == "mlperf51-0015-llama2-70b-offline")
    *_, assumed = row_inputs(row, catalog)
    assert any("parallelism not stated" in a for a in assumed)
    assert any("mean input length" in a for a in assumed)


def test_cnn_dailymail_prompt_mean_is_its_documented_derivation():
    # validation.py: See et al. 2017 781 word-level tokens/article x 0.88 (assumed whitespace-word share) x 1.308
    # Llama-3.1 tokens per word (TensorRT-LLM llmapi README) + ~26 chat-template tokens (PREPROCESSING.md)
    from clustertwin.serving.validation import MLPERF_MEAN_INPUT

    assert MLPERF_MEAN_INPUT["llama3.1-8b"] == pytest.approx(781 * 0.88 * 1.308 + 26, abs=3)


def test_validate_cli_contract(validation_dir, tmp_path, capsys):
    path, rows = _quick_subset(validation_dir, tmp_path)
    code, out, err = run_cli(capsys, "validate", str(path), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert {r["id"] for r in doc["rows"]} == set(QUICK)
    for r in doc["rows"]:
        assert set(r) >= {"id", "measured", "predicted", "error_pct"}
        assert abs(r["error_pct"]) < 60
    assert doc["mape_pct"] < 40


def test_serve_estimate_json_and_errors(capsys):
    code, out, err = run_cli(capsys, "serve", "estimate", "--model", "llama2-70b", "--system", "hgx-h100", "--tp", "2",
                             "--gpus", "8", "--input-len", "1000", "--output-len", "500", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["replicas"] == 4 and doc["tokens_per_s_per_gpu"] > 0
    assert doc["tokens_per_s"] == doc["tokens_per_s_per_gpu"] * 8
    code, out, err = run_cli(capsys, "serve", "estimate", "--model", "llama2-70c", "--system", "hgx-h100")
    assert code == 2 and "llama2-70b" in err and out == ""
    code, out, err = run_cli(capsys, "serve", "estimate", "--model", "llama3.1-8b", "--system", "hgx-h100", "--gpus", "8",
                             "--qps", "40", "--requests", "400", "--input-len", "500", "--output-len", "100",
                             "--tpot-slo", "50ms", "--json")
    assert code == 0, err
    sdoc = json.loads(out)
    assert sdoc["ttft_s"]["p99"] >= sdoc["ttft_s"]["p50"] and "meets_slo" in sdoc
    # the KV policy flag reaches the simulation (its effect is tested in tests/serving/test_simulate.py)
    code, out, err = run_cli(capsys, "serve", "estimate", "--model", "llama3.1-8b", "--system", "hgx-h100", "--gpus", "8",
                             "--qps", "40", "--requests", "400", "--input-len", "500", "--output-len", "100",
                             "--tpot-slo", "50ms", "--kv-policy", "on-demand", "--json")
    assert code == 0, err
    assert json.loads(out)["tokens_per_s_per_gpu"] > 0


def test_serve_disaggregated_and_bad_flags(capsys):
    code, out, err = run_cli(capsys, "serve", "estimate", "--model", "deepseek-v3", "--system", "gb200-nvl72",
                             "--tp", "8", "--ep", "8", "--dp-attention", "--prefill-tp", "4", "--prefill-ep", "4",
                             "--disaggregate", "16:56", "--input-len", "2000", "--output-len", "1000",
                             "--engine", "sglang", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["prefill_gpus"] == 16 and doc["decode_gpus"] == 56 and doc["prefill_gpus_per_instance"] == 4
    assert "scale-up" in doc["kv_transfer_fabric"]
    assert doc["tokens_per_s_total"] == pytest.approx(doc["tokens_per_s_per_gpu"] * 72, rel=1e-12)
    for bad in (["--max-batch", "-3"], ["--disaggregate", "16-56"], ["--ttft-slo", "fast"], ["--engine", "trtlm"],
                ["--kv-policy", "evict"]):
        code, out, err = run_cli(capsys, "serve", "estimate", "--model", "llama2-70b", "--system", "hgx-h100",
                                 "--tp", "2", "--qps", "1", *bad)
        assert code == 2, (bad, err)
        assert out == "" and "error" in err


def test_serving_cross_validation_refits_per_source(validation_dir, tmp_path, capsys):
    # leave-one-source-group-out on a small subset: every held-out row predicted, constants restored after
    from clustertwin.serving import engines

    before = {e: v["step_overhead_ms"] for e, v in engines._table()["engines"].items()}
    before_bw = {e: dict(v["gemm_mamf_scale"]) for e, v in engines._table()["engines"].items()}
    path, rows = _quick_subset(validation_dir, tmp_path)
    code, out, err = run_cli(capsys, "validate", str(path), "--cv", "source", "--json")
    assert code == 0, err
    cv = json.loads(out)["cv"]
    assert cv["column"] == "source_group"
    assert {r["id"] for r in cv["rows"]} == set(QUICK)
    assert {f["fold"] for f in cv["folds"]} == {r["source_group"] for r in rows}
    assert any(c["key"] == "step_overhead_ms" and c["group"] == "trtllm" for c in cv["constants"])
    assert any(c["key"] == "gemm_mamf_scale" and c["group"] == "blackwell/trtllm" for c in cv["constants"])
    assert {e: v["step_overhead_ms"] for e, v in engines._table()["engines"].items()} == before
    assert {e: v["gemm_mamf_scale"] for e, v in engines._table()["engines"].items()} == before_bw


def test_validate_help_names_every_packaged_set(capsys):
    from clustertwin.validate import PACKAGED_SETS

    code, out, _ = run_cli(capsys, "validate", "--help")
    text = " ".join(out.replace("│", " ").split())  # rich wraps the help text inside a box
    assert code == 0 and all(name in text for name in PACKAGED_SETS), text


def test_mlperf_server_row_without_bounds_takes_the_mlperf_rule(validation_dir, catalog):
    # a server / interactive row run under the MLPerf rule (constraint_percentile says so) that does not
    # state its bounds gets them from loadgen mlperf.conf for its benchmark; other rows stay saturated
    rows = {r["id"]: r for r in _rows(validation_dir)}
    row = dict(rows["mlperf51-0015-llama3.1-405b-server"])
    assert not row.get("ttft_constraint_ms") and "MLPerf" in row["constraint_percentile"]
    wl = row_inputs(row, catalog)[4]
    assert (wl.ttft_slo_s, wl.tpot_slo_s) == (6.0, 0.175)
    inter = dict(row, scenario_kind="interactive")
    assert (row_inputs(inter, catalog)[4].ttft_slo_s, row_inputs(inter, catalog)[4].tpot_slo_s) == (4.5, 0.08)
    # the scenario or workload column naming MLPerf says so as well (a row whose constraint_percentile is
    # blank); a row nothing marks as an MLPerf run stays saturated
    assert "MLPerf" in row["workload"]
    assert row_inputs(dict(row, constraint_percentile=""), catalog)[4].tpot_slo_s == 0.175
    bare = dict(row, constraint_percentile="", workload="synthetic", scenario="server")
    assert row_inputs(bare, catalog)[4].ttft_slo_s == 0.0
    assert row_inputs(dict(bare, scenario="MLPerf Server"), catalog)[4].ttft_slo_s == 6.0
    stated = dict(row, ttft_constraint_ms="3000", tpot_constraint_ms="100")
    assert row_inputs(stated, catalog)[4].ttft_slo_s == 3.0

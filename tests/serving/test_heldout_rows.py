"""Unseen published serving rows (benchmarks/data/heldout_serving.csv, benchmarks/check_heldout_serving.py):
the file loads, every row's columns resolve to a model / system / layout, the analytical rows are modelled,
and the defaults those rows exposed (an MLPerf row without its maximum prompt length, a decode pool run under
a TPOT bound, a benchmark without its batch) say what they assumed. The accuracy figure is the benchmark's,
not a test's."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from clustertwin.serving.validation import (
    MLPERF_MAX_INPUT,
    UNCAPPED_BATCH,
    predict_serving_row,
    row_inputs,
)

HELDOUT = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "heldout_serving.csv"


@pytest.fixture(scope="module")
def heldout():
    with open(HELDOUT, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def public(validation_dir):
    with open(validation_dir / "serving.csv", newline="", encoding="utf-8") as fh:
        return {r["id"]: r for r in csv.DictReader(fh)}


def test_heldout_file_has_the_serving_columns_and_sources(heldout, validation_dir):
    with open(validation_dir / "serving.csv", newline="", encoding="utf-8") as fh:
        header = next(csv.reader(fh))
    assert list(heldout[0]) == header
    assert len(heldout) >= 30
    ids = [r["id"] for r in heldout]
    assert len(set(ids)) == len(ids)
    for r in heldout:
        assert r["source"] and r["source_locator"] and r["source_ref"], r["id"]
        assert float(r["target_value"]) > 0


def test_every_heldout_row_resolves_and_the_analytical_ones_are_modelled(heldout, catalog):
    seen: set[tuple[str, str, str]] = set()
    for r in heldout:
        model, system, _, dep, wl, engine, extras, assumed = row_inputs(r, catalog)  # raises on a bad column
        assert dep.tp >= 1 and wl.input_len > 0 and wl.output_len >= 1, r["id"]
        # one analytical row per source, GPU and scenario is predicted (the whole file is the benchmark's:
        # 147 rows would take minutes on a 2-core CI machine)
        key = (r["source_group"], r["gpu_id"], r["scenario_kind"])
        if r["scenario_kind"] in ("offline", "prefill", "decode") and key not in seen:
            seen.add(key)
            p = predict_serving_row(r, catalog)
            assert p.predicted > 0 and math.isfinite(p.predicted), r["id"]
    assert len(seen) >= 10


def test_mlperf_row_without_its_maximum_prompt_takes_the_datasets(public, catalog):
    row = public["mlperf51-0015-llama3.1-405b-server"]
    stated = row_inputs(row, catalog)[4]
    blank = row_inputs(dict(row, input_len_max=""), catalog)
    assert blank[4].input_max == MLPERF_MAX_INPUT["llama3.1-405b"] == stated.input_max == 20000.0
    assert any("maximum input length not stated" in a for a in blank[7])
    assert not any("maximum input length" in a for a in row_inputs(row, catalog)[7])
    own = row_inputs(dict(row, input_len_max="8000"), catalog)[4]
    assert own.input_max == 8000.0


def test_decode_row_with_a_tpot_bound_runs_the_largest_batch_that_meets_it(public, catalog):
    row = dict(public["lmsys-gb200-p2-decode-lowprec-isl2k"], id="probe")
    free = predict_serving_row(row, catalog)
    assert free.estimate.tpot_s > 0.010
    bound_ms = 1e3 * free.estimate.tpot_s * 0.5
    capped = predict_serving_row(dict(row, tpot_constraint_ms=f"{bound_ms:.3f}"), catalog)
    assert capped.estimate.tpot_s <= bound_ms / 1e3 + 1e-12
    assert 0 < capped.predicted < free.predicted
    assert capped.estimate.batch_per_rank < free.estimate.batch_per_rank
    assert any("largest whose TPOT meets" in a for a in capped.assumed)
    loose = predict_serving_row(dict(row, tpot_constraint_ms=f"{2e3 * free.estimate.tpot_s:.3f}"), catalog)
    assert loose.predicted == pytest.approx(free.predicted)  # a bound the saturated batch meets changes nothing


def test_benchmark_row_without_its_batch_is_kv_limited_not_the_engines_request_cap(public, catalog):
    row = public["mlperf51-0001-mixtral-8x7b-offline"]  # vLLM, max_num_seqs stated (5000)
    assert row_inputs(row, catalog)[3].max_batch == 5000
    dep, assumed = (lambda x: (x[3], x[7]))(row_inputs(dict(row, batch_or_concurrency="", batch_basis=""), catalog))
    assert dep.max_batch == UNCAPPED_BATCH
    assert any("batch not stated" in a for a in assumed)
    blank = predict_serving_row(dict(row, batch_or_concurrency="", batch_basis=""), catalog)
    capped = predict_serving_row(dict(row, batch_or_concurrency="256", batch_basis="vLLM max_num_seqs"), catalog)
    assert blank.predicted > capped.predicted  # vLLM's serving default of 256 sequences is not what a benchmark runs


def test_dense_row_without_parallelism_takes_the_best_of_the_default_layouts(public, catalog):
    row = public["mlperf51-0016-llama2-70b-offline"]  # 32x H100, TP not stated (multi-node MPI harness)
    assert not row["tp"].strip() and not row["pp"].strip()
    extras = row_inputs(row, catalog)[6]
    # 70B FP8 needs 2 H100s: TP2 or TP1 x PP2, or TP 4 / 8 inside the node
    assert extras["tp_choices"] == ((2, 1), (1, 2), (4, 1), (8, 1))
    got = predict_serving_row(row, catalog)
    each = {(tp, pp): predict_serving_row(dict(row, tp=str(tp), pp=str(pp)), catalog).predicted
            for tp, pp in extras["tp_choices"]}
    assert got.predicted == pytest.approx(max(each.values()))
    tp, pp = max(each, key=each.get)
    name = f"TP{tp}" + (f"xPP{pp}" if pp > 1 else "")
    assert any(f"{name} chosen of TP2/TP1xPP2/TP4/TP8" in a for a in got.assumed)
    assert row_inputs(dict(row, tp="4"), catalog)[6]["tp_choices"] == ()  # a stated TP is the row's
    assert row_inputs(dict(row, pp="2"), catalog)[6]["tp_choices"] == ()  # so is a stated PP
    moe = public["mlperf51-0001-mixtral-8x7b-offline"]
    assert row_inputs(dict(moe, tp="", ep=""), catalog)[6]["tp_choices"] == ()  # MoE layouts: the default only
    small = row_inputs(public["mlperf51-0049-llama3.1-8b-offline"] | {"tp": "", "pp": ""}, catalog)[6]
    assert small["tp_choices"] == ((1, 1), (2, 1), (4, 1))  # one GPU holds it: no pipeline split


def test_llama4_scout_rows_are_modelled(public, catalog):
    from clustertwin.workload.model import get_model

    m = get_model("llama4-scout-17b-16e")
    # text backbone 107,769,861,120 parameters (the published checkpoint less its 0.87 B vision encoder)
    assert m.num_params() == pytest.approx(107.77e9, rel=0.002)
    row = dict(public["trtllm-perf-llama3.3-70b-h100-tp2-fp8-isl1000-osl1000"], id="probe",
               model="meta-llama/Llama-4-Scout-17B-16E-Instruct", model_ref="Llama-4-Scout-17B-16E-Instruct-FP8")
    p = predict_serving_row(row, catalog)
    assert p.predicted > 0 and math.isfinite(p.predicted)
    assert any("llama4-scout-17b-16e" in a for a in p.assumed)


def _cm_decode_row(heldout, **kw):
    row = next(r for r in heldout if r["id"] == "heldout-cm384-r1-decode-tpot50")
    return dict(row, id="probe", **kw)


def test_moe_pool_row_without_layout_runs_dp_attention_and_wide_ep(heldout, catalog):
    from clustertwin.serving.validation import POOL_EP, PRODUCTION_INPUT

    row = _cm_decode_row(heldout)  # decode pool, tp / ep / num_gpus / input_len blank
    _, _, _, dep, wl, _, _, assumed = row_inputs(row, catalog)
    assert (dep.tp, dep.ep, dep.dp_attention) == (1, POOL_EP["decode"], True)
    assert wl.input_len == PRODUCTION_INPUT and wl.input_cv == 0.0  # a pool benchmark, not an MLPerf dataset mix
    assert dep.max_batch == UNCAPPED_BATCH  # the TPOT bound decides the batch
    assert any("decode pool of TP1 x EP128 with DP-attention" in a for a in assumed)
    pre = dict(row, scenario_kind="prefill", target_metric="prefill_tokens_per_s_per_gpu", num_gpus="16")
    dep_p = row_inputs(pre, catalog)[3]
    assert (dep_p.tp, dep_p.ep, dep_p.dp_attention) == (1, 16, True)  # EP32 capped at the row's 16 GPUs
    assert not row_inputs(dict(pre, dp_attention="no"), catalog)[3].dp_attention  # a stated "no" is kept
    stated = row_inputs(dict(row, tp="16", ep="16", num_gpus="16"), catalog)[3]
    assert (stated.tp, stated.ep, stated.dp_attention) == (16, 16, False)  # a stated layout is the row's


def test_ascend_degrees_counted_in_dies_are_read_in_packages(heldout, catalog):
    row = _cm_decode_row(heldout, num_gpus="160", tp="1", ep="320", dp_attention="yes")  # EP320 on 160 NPUs
    dep, assumed = (lambda x: (x[3], x[7]))(row_inputs(row, catalog))
    assert dep.ep == 160 and dep.gpus == 160
    assert any("ep 320 on 160 ascend-910c: read in dies" in a for a in assumed)
    assert row_inputs(dict(row, ep="160"), catalog)[3].ep == 160  # already in packages: unchanged


def test_cloudmatrix_infer_runs_its_published_mtp_unless_the_row_says(heldout, catalog):
    row = _cm_decode_row(heldout)
    dep, assumed = (lambda x: (x[3], x[7]))(row_inputs(row, catalog))
    assert (dep.spec_tokens, dep.acceptance) == (1, 0.7)
    assert any("CloudMatrix-Infer's published deployment, MTP 1" in a for a in assumed)
    assert row_inputs(dict(row, speculative_decoding="no"), catalog)[3].spec_tokens == 0
    other = row_inputs(dict(row, framework="SGLang"), catalog)[3]
    assert other.spec_tokens == 0  # only a stack that publishes its MTP default gets one


def test_stated_accelerator_memory_picks_the_catalog_variant(public, catalog):
    row = dict(public["mlperf41-0048-llama2-70b-offline"], id="probe", gpu_id="gh200", system_id="",
               accelerator_mem_gb="144", num_gpus="1", gpus_per_node="1", tp="1")
    system, assumed = (lambda x: (x[1], x[7]))(row_inputs(row, catalog))
    assert system.accelerator.id == "gh200-144gb"  # HBM3e GH200, not the 96 GB HBM3 part
    assert any("accelerator_mem_gb 144: the gh200-144gb variant of gh200" in a for a in assumed)
    assert row_inputs(dict(row, accelerator_mem_gb="96"), catalog)[1].accelerator.id == "gh200"
    assert row_inputs(dict(row, accelerator_mem_gb=""), catalog)[1].accelerator.id == "gh200"
    odd = row_inputs(dict(row, gpu_id="h100-sxm", accelerator_mem_gb="120"), catalog)
    assert odd[1].accelerator.id == "h100-sxm" and any("no catalog variant matches" in a for a in odd[7])

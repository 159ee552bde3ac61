"""Framework-aware modelling from columns only, per-category table and leave-one-source-out CV."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest

from clustertwin.validate import (
    _virtual_stages,
    by_table,
    framework_for_row,
    validate_file,
    validate_rows,
)
from clustertwin.workload.stacks import STACKS, framework_table, stack_for_framework


def _rows(validation_dir, name="training.csv"):
    with open(validation_dir / name, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize("name", ["training.csv", "memory.csv"])
def test_predictions_ignore_source_locator_notes_and_ids(validation_dir, name):
    """Replacing source, source_locator, notes (even with arch:/etp= look-alikes), inferred_fields, the
    measured-basis / published-figure text of a training row and the ids changes no prediction: a row is
    modelled from its columns only."""
    rows = _rows(validation_dir, name)
    base = validate_rows(rows)
    scrambled = []
    for i, r in enumerate(rows):
        s = dict(r)
        s["id"] = f"row-{len(rows) - i}"
        s["source"] = "arXiv:2104.04473 arXiv:2407.21783 someone else's paper"
        s["source_locator"] = "Table 9, virtual_pipeline = 1 is a placeholder; CP uses all-gather"
        s["notes"] = ("virtual_pipeline = 1 is a placeholder | CP uses all-gather | arch: head_dim=80 MTP depth=3 "
                      "sliding window 64 on alternate layers; clamped SwiGLU | etp=4")
        s["inferred_fields"] = "virtual_pipeline=1 is a placeholder"
        for k in ("measured_basis", "published_metric", "published_value"):  # citation text of the training target
            if k in s:
                s[k] = "arXiv:2201.11990 Megatron-DeepSpeed 126 TFLOP/s"
        scrambled.append(s)
    other = validate_rows(scrambled)
    assert len(base.rows) == len(other.rows) == len(rows)
    for a, b in zip(base.rows, other.rows, strict=True):
        assert a.predicted == b.predicted, (a.id, a.predicted, b.predicted)
        assert a.stack == b.stack


def test_every_framework_in_the_data_has_a_preset(validation_dir):
    table = framework_table()
    for r in _rows(validation_dir) + _rows(validation_dir, "memory.csv"):
        fw = framework_for_row(r)
        assert r["framework"] in table["frameworks"], r["framework"]
        assert fw.note == "" and fw.stack.id in STACKS


def test_group_without_fit_rows_takes_its_fallback(validation_dir):
    """A host platform without fit rows takes the value of the group its `fallback` names (x86 HGX Blackwell
    <- x86 HGX Hopper), not the median of the fitted groups; a group without a fallback takes the median."""
    import statistics

    from clustertwin.calibration import _build_tables, _fit_tables, current_values, fitted_constants
    from clustertwin.catalog import load_catalog

    rows = {r["id"]: r for r in _rows(validation_dir)}
    consts = fitted_constants()
    stall = next(c for c in consts if c.key == "moe_host_layer_us")
    assert stall.fallback == {"blackwell-hgx": "hopper-hgx", "hopper-hgx": "blackwell-hgx"}
    hopper = next(r for r in rows.values() if r["gpu"] == "h100-sxm" and (r["num_experts"] or "0") not in ("", "0"))
    grace = next(r for r in rows.values() if r["gpu"] == "gb200" and (r["num_experts"] or "0") not in ("", "0"))
    tables, _ = _build_tables([hopper, grace], load_catalog(), consts)
    how: dict[str, dict[str, str]] = {}
    v = _fit_tables(tables, consts, current_values(), origin=how)["moe_host_layer_us"]
    assert v["hopper-hgx"] != v["grace-blackwell"]  # two fitted values, so fallback and median differ
    assert v["blackwell-hgx"] == v["hopper-hgx"]
    assert how["moe_host_layer_us"] == {"hopper-hgx": "fit", "grace-blackwell": "fit",
                                        "blackwell-hgx": "fallback: hopper-hgx"}
    tables, _ = _build_tables([hopper], load_catalog(), consts)  # grace-blackwell has no fallback: median
    v = _fit_tables(tables, consts, current_values())["moe_host_layer_us"]
    assert v["grace-blackwell"] == statistics.median([v["hopper-hgx"]]) == v["blackwell-hgx"]


@pytest.mark.parametrize(("framework", "version", "stack"), [
    ("megatron-lm", "2021", "megatron-lm-2021"), ("megatron-lm", "2022", "megatron-lm-2022"),
    ("deepspeed", "2021", "deepspeed-zero3-2021"), ("meta-internal", "2024", "pytorch-fsdp"),
    ("llm-foundry", "2023", "llm-foundry"), ("torchtitan", "2024-12 (9dec370)", "torchtitan-2024"),
    ("torchtitan", "2025-06 (820504e)", "torchtitan"), ("torchtitan", "2026-03", "torchtitan"),
    ("torchtitan", "2026-08 (73aed7f)", "torchtitan-2026"),
    ("megatron-bridge", "26.06", "megatron-bridge"), ("megatron-core", "r0.8.0", "megatron-core"),
    ("NeMo", "", "megatron-bridge"),  # alias
    ("torchtune", "", "pytorch-fsdp"), ("gpt-neox", "2022", "megatron-lm-2022"),
])
def test_framework_table(framework, version, stack):
    assert stack_for_framework(framework, version).stack.id == stack


def test_unknown_framework_gets_closest_preset_and_says_so(validation_dir):
    assert stack_for_framework("torch-titan").stack.id == "torchtitan-2026"  # no date: the newest preset
    assert "closest" in stack_for_framework("torch-titan").note
    fs = stack_for_framework("qqq-x", "0.3", sharded=True)
    assert fs.stack.id == "pytorch-fsdp" and "closest preset" in fs.note
    assert stack_for_framework("qqq-x", "0.3").stack.id == "megatron-core"
    # Hugging Face runs: DeepSpeed ZeRO unless the row uses PyTorch FSDP; ColossalAI's ZeRO as DeepSpeed's
    assert stack_for_framework("transformers", "4.46", sharded=False).stack.id == "deepspeed"
    assert stack_for_framework("hf-trainer", "", sharded=True, fsdp=True).stack.id == "hf-fsdp"
    assert stack_for_framework("ColossalAI", "0.4").stack.id == "deepspeed"
    row = dict(_rows(validation_dir)[0], framework="my-own-trainer")
    rep = validate_rows([row])
    assert rep.rows[0].error_pct is not None and "not in the framework table" in rep.rows[0].note


def test_blank_virtual_pipeline_follows_the_framework_rule(validation_dir):
    rows = {r["id"]: r for r in _rows(validation_dir)}
    llama = rows["llama3-405b-t4-1"]  # pp 16, 126 layers: Megatron-style 2 slots per virtual stage
    assert llama["virtual_pipeline"] == "" and _virtual_stages(llama) == 4
    tt = rows["tt-h100-2412-t5-2"]  # torchtitan: 2 virtual stages per rank
    assert tt["virtual_pipeline"] == "" and _virtual_stages(tt) == 2
    assert _virtual_stages(dict(llama, virtual_pipeline="1")) == 1


def test_by_table_counts_and_mape(validation_dir):
    rows = _rows(validation_dir)
    rep = validate_file(validation_dir / "training.csv")
    table = by_table(rep, rows, ["framework", "moe"])
    fw_rows = [g for g in table if g["column"] == "framework"]
    assert sum(g["n"] for g in fw_rows) == len(rows)
    ids = {r["id"]: r["framework"] for r in rows}
    lf = next(g for g in fw_rows if g["value"] == "llm-foundry")
    errs = [abs(r.error_pct) for r in rep.modelled if ids[r.id] == "llm-foundry"]
    assert lf["mape_pct"] == pytest.approx(sum(errs) / len(errs))
    assert {g["value"] for g in table if g["column"] == "moe"} == {"moe", "dense"}
    assert table[-1]["column"] == "all" and table[-1]["mape_pct"] == pytest.approx(rep.mape_pct)


def test_cross_validation_refits_per_fold(validation_dir):
    from clustertwin.calibration import cross_validate, fitted_constants

    rows = _rows(validation_dir)
    pick = [r for r in rows if r["framework"] == "megatron-lm"][:4] + [r for r in rows if r["framework"] == "llm-foundry"][:3]
    cv = cross_validate(pick, "framework")
    assert {f["fold"] for f in cv.folds} == {"megatron-lm", "llm-foundry"}
    assert sum(f["n"] for f in cv.folds) == len(pick) == len(cv.rows)
    # the in-sample figure with the shipped constants is exactly what validate reports
    assert cv.in_sample_mape_pct == pytest.approx(validate_rows(pick).mape_pct, rel=1e-9)
    grids = {c.key: c.grid for c in fitted_constants()}
    n_a100 = sum(1 for r in pick if r["gpu"].startswith("a100"))
    n_h100 = sum(1 for r in pick if r["gpu"] == "h100-sxm")
    assert n_a100 and n_h100
    for f in cv.folds:  # each fold's fitted values are points of the allowed grid
        assert f["values"]["gemm_mamf_scale"]["a100"] in grids["gemm_mamf_scale"]
        assert f["values"]["step_overhead_s"]["all"] in grids["step_overhead_s"]
    a100 = next(c for c in cv.constants if c["key"] == "gemm_mamf_scale" and c["group"] == "a100")
    assert a100["rows"] == n_a100
    # per fold: how each value was set, and the values that differ from the all-row refit
    refit = {(c["key"], c["group"]): c["refit_all_rows"] for c in cv.constants}
    lf = next(f for f in cv.folds if f["fold"] == "llm-foundry")
    assert lf["origin"]["fsdp_overlap"]["llm-foundry"] == "prior"  # no llm-foundry row left to fit it
    assert lf["origin"]["gemm_mamf_scale"]["a100"] == "fit"
    for f in cv.folds:
        for m in f["moved"]:
            assert m["value"] == f["values"][m["key"]][m["group"]] != refit[(m["key"], m["group"])]
            assert m["origin"] == f["origin"][m["key"]][m["group"]]
        assert {(m["key"], m["group"]) for m in f["moved"]} == {
            k for k, v in refit.items() if abs(f["values"][k[0]][k[1]] - v) > 1e-9}


def test_cli_validate_by_and_cv_json(validation_dir, tmp_path):
    rows = _rows(validation_dir)
    pick = [r for r in rows if r["framework"] in ("megatron-lm", "meta-internal")][:5]
    pick += [r for r in rows if r["framework"] == "meta-internal"]
    out = tmp_path / "sub.csv"
    with open(out, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(pick)
    p = subprocess.run([sys.executable, "-m", "clustertwin", "validate", str(out), "--by", "framework,gpu,moe",
                        "--cv", "source", "--json"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert {g["column"] for g in d["by"]} == {"framework", "gpu", "moe", "all"}
    assert len(d["cv"]["folds"]) == len({r["source"] for r in pick})
    assert d["cv"]["mape_pct"] > 0
    bad = subprocess.run([sys.executable, "-m", "clustertwin", "validate", str(out), "--by", "colour"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "colour" in bad.stderr


def test_cross_validation_linear_moe_stall(validation_dir):
    """moe_host_layer_us is fitted per host platform on MoE rows only, through a per-row slope."""
    from clustertwin.calibration import _build_tables, cross_validate, fitted_constants
    from clustertwin.catalog import load_catalog

    rows = _rows(validation_dir)
    moe = [r for r in rows if (r["num_experts"] or "0") not in ("", "0") and r["gpu"] == "b200"][:2]
    dense = [r for r in rows if (r["num_experts"] or "0") in ("", "0") and r["gpu"] == "b200"][:1]
    consts = fitted_constants()
    stall = next(c for c in consts if c.key == "moe_host_layer_us")
    assert stall.linear and stall.rows == "moe"
    tables, _ = _build_tables(moe + dense, load_catalog(), consts)
    by = {t.id: t for t in tables}
    assert by[dense[0]["id"]].group["moe_host_layer_us"] is None  # dense rows do not depend on it
    for r in moe:
        t = by[r["id"]]
        assert t.group["moe_host_layer_us"] == "blackwell-hgx"
        assert all(s["moe_host_layer_us"] > 0 for s in t.slope.values())
        # the slope reproduces a direct prediction at the shipped value
        assert cross_validate([r], "id").in_sample_mape_pct == pytest.approx(validate_rows([r]).mape_pct, rel=1e-6)


@pytest.mark.parametrize(("framework", "version", "stack"), [
    # Megatron-LM from 2023 (and its release tags, which name no date) runs on Megatron-Core, with its own
    # FP32 gradient default (the megatron-lm preset)
    ("megatron-lm", "2023", "megatron-lm"), ("megatron-lm", "core_r0.9.0", "megatron-lm"),
    ("megatron-lm", "2022-11", "megatron-lm-2022"), ("megatron-deepspeed", "2022", "megatron-deepspeed"),
    # DeepSpeed after the SC'21 comparison: FlashAttention models, overlapped prefetching ZeRO-3
    ("deepspeed", "0.14.2", "deepspeed"), ("deepspeed", "2023", "deepspeed"),
    ("megatron-bridge", "25.09", "megatron-bridge"), ("torchtitan", "2024.12", "torchtitan-2024"),
])
def test_framework_versions_compare_as_dates(framework, version, stack):
    assert stack_for_framework(framework, version).stack.id == stack


def test_version_dates():
    from clustertwin.workload.stacks import _version_key

    assert _version_key("2024-12 (9dec370)") == pytest.approx(2024.12)
    assert _version_key("26.06") == pytest.approx(2026.06)  # NGC container yy.mm
    assert _version_key("r0.8.0") is None and _version_key("0.14.2") is None and _version_key("") is None


@pytest.mark.parametrize("version, key, stack", [
    # a release number names no date, but the PyTorch build the row records does (frameworks.yaml
    # pytorch_releases): a pre-release of X.Y was built after X.(Y-1) shipped, a nightly carries its date
    ("0.0.2 (torch 2.7.0a0+gitb98af95)", 2025.01, "torchtitan"),
    ("pytorch 2.9.0.dev20250811+rocm6.4", 2025.08, "torchtitan"),
    ("torch 2.5.1", 2024.10, "torchtitan-2024"),
    ("torch==2.11.0", 2026.03, "torchtitan"),       # released 2026-03-23, before the 2026-04 rule
    ("0.3.0 (PyTorch 2.14.0)", None, "torchtitan-2026"),  # a minor not in the table: no date, newest preset
    ("2024-12 (9dec370, torch 2.6)", 2024.12, "torchtitan-2024"),  # a leading date wins
])
def test_a_recorded_pytorch_build_dates_a_version(version, key, stack):
    from clustertwin.workload.stacks import _version_key

    assert (_version_key(version) is None) if key is None else _version_key(version) == pytest.approx(key)
    assert stack_for_framework("torchtitan", version).stack.id == stack


@pytest.mark.parametrize("name", ["maxtext", "MaxText", "jax", "paxml", "pax", "praxis", "levanter"])
def test_jax_frameworks_map_to_the_sharded_preset_with_their_assumption(name):
    """MaxText / Pax (JAX + XLA SPMD, 'FSDP+DP') are FSDP-style sharded data parallelism: the jax-xla preset (the
    pytorch-fsdp settings with cuDNN attention and jax.checkpoint recompute), a blank ZeRO stage read as 3, and an
    `assumed` note - before, difflib's closest name gave no note of its own."""
    fw = stack_for_framework(name, "")
    assert fw.stack.id == "jax-xla" and fw.blank_zero_stage == 3
    assert fw.stack.attention_backend == "cudnn" and fw.stack.full_recompute == "needed"
    assert "JAX-XLA modelled with the jax-xla preset" in fw.note and "not in the framework table" not in fw.note


@pytest.mark.parametrize("name, framework, stack", [
    ("mindspeed", "mindspeed", "megatron-core"),         # Ascend's Megatron-Core port (difflib: 'deepspeed')
    ("MindSpeed-LLM", "mindspeed", "megatron-core"),
    ("pytorch-lightning", "pytorch-fsdp", "pytorch-fsdp"),  # Lightning's FSDPStrategy (difflib: 'torchtitan')
    ("easylm", "maxtext", "jax-xla"),
    ("metaseq", "metaseq", "metaseq"),                   # OPT's FairScale FSDP + Megatron TP (difflib: meta-internal)
    ("fairscale", "metaseq", "metaseq"),
])
def test_frameworks_difflib_misplaced_have_entries(name, framework, stack):
    fw = stack_for_framework(name, "", sharded=True)
    assert (fw.framework, fw.stack.id) == (framework, stack) and "not in the framework table" not in fw.note


def test_metaseq_is_the_2022_opt_stack_not_the_llama3_one():
    """OPT-175B (metaseq, arXiv:2205.01068 Sec. 2.4) trained before FlashAttention, on Megatron-LM's 2021 TP: unfused
    attention, no sequence parallelism, TP all-reduces between the GEMMs, FP16 reduce-scatter (assumed, said)."""
    fw = stack_for_framework("metaseq", "2022")
    st = fw.stack
    assert fw.blank_zero_stage == 3 and st.fsdp_impl == "fsdp1"
    assert not st.flash_attention and not st.sequence_parallel and not st.tp_overlap and not st.context_parallel
    assert st.grad_reduce_bytes == 2 and "fp32_reduce_scatter" in fw.note
    assert stack_for_framework("meta-internal", "2024").stack.flash_attention


def test_blank_recompute_that_cannot_fit_takes_the_least_mode_that_fits(validation_dir):
    """A published run held its activations: a blank recompute whose default (none) the device could not hold,
    even at the memory model's worst over-prediction, is modelled with the least mode that fits, said in the
    note; a row that fits keeps none (tests/validate/test_row_names.py)."""
    base = dict(model="GPT3-175B", num_layers="96", hidden_size="12288", num_attention_heads="96",
                num_kv_heads="96", ffn_hidden_size="49152", vocab_size="51200", swiglu="no", seq_len="2048",
                global_batch="256", micro_batch="2", tp="1", pp="1", dp="128", cp="1", ep="1", zero_stage="3",
                fsdp="1", virtual_pipeline="1", precision="bf16", framework="pytorch-fsdp", gpu="h100-sxm",
                system="hgx-h100", num_gpus="128", gpus_per_node="8", scale_out="ib-ndr-400g", nics_per_node="8",
                nic_gbps="400", measured_step_time_s="10", source="x", notes="")
    blank, full, none = validate_rows([dict(base, id="b", recompute=""), dict(base, id="f", recompute="full"),
                                       dict(base, id="n", recompute="none")]).rows
    assert "recompute blank: without recompute the modelled peak is" in blank.note
    assert "modelled with recompute full" in blank.note
    assert blank.predicted == pytest.approx(full.predicted, rel=1e-12) and none.predicted < full.predicted


@pytest.mark.parametrize("name, version, stack", [
    ("primus", "v25.9", "megatron-core"),            # no backend named: its Megatron-LM backend, with a note
    ("Primus-Megatron", "25.9", "megatron-core"),    # AMD's ROCm Megatron-LM docker (Primus backend)
    ("rocm-megatron-lm", "", "megatron-core"),
    ("primus-torchtitan", "25.9", "torchtitan-2026"),  # the torchtitan entry and its version rules
])
def test_amd_training_framework_names_map_to_their_backend(name, version, stack):
    """Primus (AMD's ROCm training framework) and the ROCm Megatron-LM names resolve to the preset of the
    backend they run, never to the closest spelling (difflib put 'primus-megatron' on Megatron-Bridge and
    'primus' on PyTorch FSDP); only the bare name, which says no backend, carries an assumption note."""
    fw = stack_for_framework(name.lower(), version)
    assert fw.stack.id == stack
    assert ("names no backend" in fw.note) == (name == "primus")
    assert "closest" not in fw.note


def test_megatron_lm_scripts_keep_fp32_gradients():
    """Megatron-LM's training scripts force FP32 gradient accumulation / reduction with --bf16
    (megatron/training/arguments.py); the Megatron-Bridge recipes reduce in BF16. Otherwise the same engine."""
    import dataclasses

    mlm, mcore = STACKS["megatron-lm"], STACKS["megatron-core"]
    assert mlm.grad_reduce_bytes == 4 and mcore.grad_reduce_bytes == 2
    same = {"id", "description", "source", "grad_reduce_bytes"}
    assert all(getattr(mlm, f.name) == getattr(mcore, f.name) for f in dataclasses.fields(mlm) if f.name not in same)
    row = {"id": "t", "model": "llama2-7b", "num_layers": "32", "hidden_size": "4096", "num_attention_heads": "32",
           "ffn_hidden_size": "11008", "vocab_size": "32000", "swiglu": "yes", "seq_len": "2048",
           "global_batch": "128", "micro_batch": "2", "tp": "1", "pp": "1", "dp": "8", "cp": "1", "zero_stage": "1",
           "recompute": "none", "precision": "bf16", "gpu": "h800", "system": "dgx-h800", "num_gpus": "8",
           "framework": "megatron-lm", "framework_version": "2023-09", "measured_memory_gb_per_gpu": "70"}
    from clustertwin.catalog import load_catalog
    from clustertwin.validate import _estimate_row

    cat = load_catalog()
    g = {fw: _estimate_row(dict(row, framework=fw), cat, "analytical").memory_breakdown_gb["gradients"]
         for fw in ("megatron-lm", "megatron-core")}
    assert g["megatron-lm"] == pytest.approx(2 * g["megatron-core"], rel=1e-6)  # 4 B vs 2 B per parameter


def test_megatron_deepspeed_offers_zero_1_with_its_pipeline_not_zero_2_or_3():
    """DeepSpeed's PipelineEngine refuses ZeRO 2 / 3 (deepspeed/runtime/pipe/engine.py); BLOOM-176B ran ZeRO-1 with
    TP 4 x PP 12 (arXiv:2211.05100 Sec. 3.4): the megatron-deepspeed preset is megatron-lm-2022 with ZeRO 0 / 1."""
    fw = stack_for_framework("megatron-deepspeed", "2022")
    base = stack_for_framework("megatron-lm", "2022").stack
    assert fw.stack.id == "megatron-deepspeed" and fw.stack.zero_stages == (0, 1) and base.zero_stages == (0,)
    assert (fw.stack.flash_attention, fw.stack.overlap, fw.stack.grad_reduce_bytes) == (
        base.flash_attention, base.overlap, base.grad_reduce_bytes)
    assert "megatron-deepspeed preset" in fw.note


def test_megatron_deepspeed_runs_its_compute_at_the_derived_efficiency_and_says_so():
    """megatron-deepspeed's compute_efficiency (0.82, derived from MT-NLG 530B against Megatron-LM's SC'21 run of the
    same model and layout on Selene) stretches every layer kernel by 1/0.82 against the megatron-lm-2022 settings it
    shares, leaves the communication alone, and the estimate prints the factor."""
    from clustertwin.catalog import load_catalog
    from clustertwin.validate import _estimate_row

    row = {"id": "t", "model": "GPT-13B", "num_layers": "40", "hidden_size": "5120", "num_attention_heads": "40",
           "ffn_hidden_size": "20480", "vocab_size": "50304", "swiglu": "no", "seq_len": "2048",
           "global_batch": "256", "micro_batch": "2", "tp": "2", "pp": "2", "dp": "4", "cp": "1", "zero_stage": "1",
           "recompute": "full", "precision": "bf16", "gpu": "a100-80gb", "system": "dgx-a100", "num_gpus": "16",
           "framework_version": "2022", "measured_step_time_s": "10"}
    cat = load_catalog()
    ds = _estimate_row(dict(row, framework="megatron-deepspeed"), cat, "analytical")
    lm = _estimate_row(dict(row, framework="megatron-lm"), cat, "analytical")
    ce = STACKS["megatron-deepspeed"].compute_efficiency
    assert ce == pytest.approx(0.82) and STACKS["megatron-lm-2022"].compute_efficiency == 1.0
    for term in ("gemm", "elementwise", "recompute"):
        assert ds.breakdown[term] == pytest.approx(lm.breakdown[term] / ce, rel=1e-9)
    assert ds.breakdown["tp_comm"] == pytest.approx(lm.breakdown["tp_comm"], rel=1e-9)
    assert any(a.startswith("stack efficiency: megatron-deepspeed") and "0.82" in a for a in ds.assumptions)
    assert not any("compute_efficiency" in a for a in lm.assumptions)

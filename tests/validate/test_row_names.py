"""Rows of published runs that name things outside the catalog (catalog/names.py, docs/validation.md
"Names outside the catalog"): each is modelled, and its note names the assumption; families without a
model fail with a clear reason."""

from __future__ import annotations

import csv
import re

import pytest

from clustertwin.catalog import load_catalog
from clustertwin.catalog.names import resolve_accelerator, resolve_dtype
from clustertwin.errors import InputError
from clustertwin.validate import _validate_collectives, resolve_row, validate_rows
from clustertwin.workload.plan import DTYPES


def _rows(validation_dir, name):
    with open(validation_dir / f"{name}.csv", newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def a100(validation_dir):  # Megatron-LM SC'21, A100 80GB, FP16
    return next(r for r in _rows(validation_dir, "training") if r["id"] == "mlm-sc21-t1-1")


@pytest.fixture(scope="module")
def h100(validation_dir):  # dense Megatron-Core on HGX H100, ZeRO-1
    return next(r for r in _rows(validation_dir, "training") if r["gpu"] == "h100-sxm"
                and r["framework"] == "megatron-core" and r["num_experts"] in ("", "0", "1"))


def _one(row, **cols):
    r = validate_rows([dict(row, id="probe", **cols)]).rows[0]
    assert r.error_pct is not None, r.reason
    return r


@pytest.mark.parametrize(("gpu", "acc", "said"), [
    ("a100-sxm4-80gb", "a100-80gb", "modelled as 'a100-80gb'"),
    ("NVIDIA A100-SXM4-40GB", "a100-40gb", "modelled as 'a100-40gb'"),
    ("v100", "v100-32gb", "32 GB SXM2/SXM3"),
    ("a800", "a800-80gb", "modelled as 'a800-80gb'"),
    ("mi250x", "mi250x", "uncalibrated efficiency (assumed)"),
])
def test_gpu_spellings_and_new_chips_are_modelled_with_a_note(a100, gpu, acc, said):
    r = _one(a100, gpu=gpu)
    assert said in r.note
    assert resolve_row(dict(a100, gpu=gpu), load_catalog())[0]["gpu"] == acc


@pytest.mark.parametrize("gpu", ["h100", "H100 SXM5 80GB", "h100-80gb-hbm3", "gh200", "h20", "h100-pcie"])
def test_hopper_spellings_are_modelled(h100, gpu):
    r = _one(h100, gpu=gpu)
    assert gpu in r.note or "uncalibrated efficiency (assumed)" in r.note


def test_family_rule_picks_memory_size_and_says_when_a_form_factor_is_missing():
    cat = load_catalog()
    assert resolve_accelerator("a100-80g-sxm", cat)[0] == "a100-80gb"
    acc, note = resolve_accelerator("a100-pcie-40gb", cat)
    assert acc == "a100-40gb" and "no PCIE variant" in note


@pytest.mark.parametrize(("gpu", "why"), [("tpu-v5p", "no TPU model"), ("gaudi3", "no Intel Gaudi model"),
                                          ("trainium2", "Trainium"), ("ascend-910b", "910B")])
def test_accelerators_without_a_model_fail_with_the_reason(a100, gpu, why):
    r = validate_rows([dict(a100, id="probe", gpu=gpu)]).rows[0]
    assert r.error_pct is None and why in r.reason


@pytest.mark.parametrize(("system", "said"), [
    ("p4d", "modelled as 'dgx-a100-40gb'"), ("selene", "modelled as 'dgx-a100'"),
    ("no-such-cluster", "the catalog's system for gpu a100-80gb"),
])
def test_published_system_names_are_modelled(a100, system, said):
    assert said in _one(a100, system=system).note


def test_system_alias_fills_the_blank_nic_columns_and_says_so(a100):
    cat = load_catalog()
    row = dict(a100, id="p", gpu="a100-40gb", system="p4d.24xlarge", scale_out="", nics_per_node="", nic_gbps="")
    resolved, notes = resolve_row(row, cat)
    assert (resolved["system"], resolved["scale_out"], resolved["nics_per_node"], resolved["nic_gbps"]) == (
        "dgx-a100-40gb", "aws-efa-p4d", "4", "100")
    assert any("nics_per_node 4" in n for n in notes)
    assert "aws-efa-p4d" in _one(row).note


@pytest.mark.parametrize(("system", "acc"), [("frontier", "mi250x"), ("summit", "v100-16gb"), ("dgx-2", "v100-32gb")])
def test_supercomputer_rows_without_a_gpu_column_take_the_systems_chip(a100, system, acc):
    row = dict(a100, system=system, gpu="", scale_out="", nics_per_node="", nic_gbps="")
    assert resolve_row(row, load_catalog())[0]["gpu"] in (acc, "")  # dgx-2: the system's own chip
    assert "uncalibrated efficiency (assumed)" in _one(row).note


@pytest.mark.parametrize(("fabric", "said"), [("slingshot-11", ""), ("slingshot-200g", "modelled as 'slingshot-11'"),
                                              ("gpudirect-tcpxo", "gcp-tcpxo-200g"), ("myrinet", "generic RDMA")])
def test_scale_out_names(h100, fabric, said):
    assert said in _one(h100, scale_out=fabric).note


@pytest.mark.parametrize(("fabric", "gbps", "entry", "port"), [
    # the InfiniBand generation in a name picks its entry; a port-rate suffix or nic_gbps sets the speed
    ("edr", 0, "ib-edr-100g", 100), ("InfiniBand HDR", 0, "ib-hdr-200g", 200), ("ndr", 0, "ib-ndr-400g", 400),
    ("ib-xdr", 0, "ib-xdr-800g", 800), ("NDR400", 0, "ib-ndr-400g", 400), ("InfiniBand NDR200", 0, "ib-ndr-400g", 200),
    ("quantum-2", 0, "ib-ndr-400g", 400), ("ib-hdr", 400, "ib-hdr-200g", 400), ("infiniband", 400, "ib-ndr-400g", 400),
])
def test_infiniband_generation_names(fabric, gbps, entry, port):
    from clustertwin.catalog.names import resolve_fabric

    f, note = resolve_fabric(fabric, float(gbps), load_catalog())
    assert (f.id, round(f.port_bw * 8 / 1e9)) == (entry, port) and entry in note


def test_no_scale_out_on_a_single_node_run(h100):
    one = dict(h100, num_gpus="8", dp="8", global_batch="32", scale_out="nvlink")
    assert "fits one node" in _one(one).note
    assert "span several nodes" in _one(h100, scale_out="none").note


@pytest.mark.parametrize(("prec", "dtype"), [("bf16-mixed", "bf16"), ("amp", "fp16"), ("fp8-e4m3", "fp8"),
                                             ("fp8-hybrid", "fp8"), ("mxfp4", "nvfp4"),
                                             ("fp8_e4m3fnuz", "fp8"), ("FP8-FNUZ", "fp8"),  # MI300-series FP8
                                             ("fp8 (tensorwise)", "fp8"), ("BF16 (mixed)", "bf16")])
def test_precision_spellings(prec, dtype):
    d, note = resolve_dtype(prec, DTYPES)
    assert d == dtype and prec in note


def test_precision_alias_row_is_modelled_and_unsupported_precisions_say_why(h100):
    assert "modelled as fp8" in _one(h100, precision="fp8-e4m3").note
    for p in ("int8", "int4"):
        with pytest.raises(InputError, match="not modelled"):
            resolve_dtype(p, DTYPES)


@pytest.mark.parametrize(("framework", "said"), [
    ("pytorch-fsdp", "outside the pytorch-fsdp preset"),
    ("nanotron", "nanotron modelled with the megatron-core preset"),
])
def test_a_layout_the_run_used_is_modelled_as_published(h100, framework, said):
    r = _one(h100, framework=framework, framework_version="")  # ZeRO-1: not in the FSDP / 2022 presets
    assert said in r.note


@pytest.mark.parametrize(("cols", "said"), [
    ({"dp": ""}, "dp blank"), ({"num_gpus": ""}, "num_gpus blank"), ({"micro_batch": ""}, "micro_batch blank"),
    ({"global_batch": ""}, "global_batch blank"), ({"recompute": "full-uniform"}, "read as full"),
    ({"dp": "96"}, "dp taken as num_gpus"), ({"num_gpus": "56"}, "num_gpus taken as 48"),
    ({"sequence_parallel": "true", "fsdp": "no", "zero_stage": "zero-1"}, ""),
    ({"virtual_pipeline": "2"}, "with pp 1 read as 1"), ({"recompute": "selective (op)"}, "read as selective"),
    ({"global_batch": "100"}, "global_batch 100 is not a multiple of dp x micro_batch = 48: modelled as 96"),
])
def test_blank_and_odd_columns_are_filled_with_a_note(h100, cols, said):
    assert said in _one(h100, **cols).note


def test_moe_row_with_blank_ep_assumes_ep_inside_the_node(validation_dir):
    moe = next(r for r in _rows(validation_dir, "training") if r["num_experts"] not in ("", "0", "1")
               and int(r["ep"] or 1) > 1)
    assert "ep blank for an MoE run" in _one(moe, ep="").note


def test_blank_shape_columns_come_from_the_zoo_model_the_row_names(validation_dir):
    rows = _rows(validation_dir, "training")
    dense = next(r for r in rows if r["model"] == "Llama3-8B")
    assert "vocab_size 128256 blank: taken from the zoo model 'llama3-8b'" in _one(dense, vocab_size="").note
    moe = next(r for r in rows if r["model"] == "Qwen3-30B-A3B")
    assert "moe_topk 8 blank: taken from the zoo model 'qwen3-30b-a3b'" in _one(moe, moe_topk="").note
    # a blank GQA / FFN / gating column: the zoo model's, not MHA / 4h / GELU (the step is the same as published)
    full = _one(dense)
    blanks = _one(dense, num_kv_heads="", ffn_hidden_size="", swiglu="")
    assert "num_kv_heads 8, ffn_hidden_size 14336, swiglu yes blank" in blanks.note
    assert blanks.predicted == pytest.approx(full.predicted, rel=1e-9)
    r = validate_rows([dict(dense, id="probe", vocab_size="", model="GPT-1.7B")]).rows[0]  # not a zoo model
    assert r.error_pct is None and "vocab_size" in r.reason


def test_public_rows_resolve_unchanged(validation_dir):
    cat = load_catalog()
    for name in ("training", "memory"):
        for row in _rows(validation_dir, name):
            resolved, notes = resolve_row(row, cat)
            zoo = [n for n in notes if n.startswith("architecture details no column gives")]
            assert resolved == row and notes == zoo, row["id"]
            # the details no column holds come from the zoo model the model column names, and say so
            if row["model"].startswith(("GPT-OSS", "DeepSeek", "Qwen3-30B", "Qwen3-235B")):
                assert len(zoo) == 1 and f"(the row's model column {row['model']!r})" in zoo[0], row["id"]
            else:
                assert zoo == [], row["id"]


def test_collective_rows_with_published_names(validation_dir):
    cat = load_catalog()
    base = next(r for r in _rows(validation_dir, "collectives") if r["system"] == "hgx-h100")
    rows = [dict(base, id="a", system="nd-h100-v5"), dict(base, id="b", gpu="H100 SXM5 80GB"),
            dict(base, id="c", system="", gpu="h100"), dict(base, id="d", scale_out="n/a")]
    rep = _validate_collectives(rows, cat)
    assert all(r.error_pct is not None for r in rep.rows), [r.reason for r in rep.rows]
    assert "nd-h100-v5" in rep.rows[0].note and "H100 SXM5 80GB" in rep.rows[1].note
    assert "system blank" in rep.rows[2].note and "'n/a'" in rep.rows[3].note


def test_collective_algorithm_the_row_cannot_run_falls_back_to_auto_with_a_note(validation_dir):
    cat = load_catalog()
    base = next(r for r in _rows(validation_dir, "collectives") if r["system"] == "hgx-h100")
    rows = [dict(base, id="bc", collective="broadcast", algorithm="nvls"),
            dict(base, id="a100", system="dgx-a100", gpu="a100-80gb", algorithm="nvls"),
            dict(base, id="ag", collective="all_gather", algorithm="nvls")]
    rep = _validate_collectives(rows, cat)
    assert all(r.error_pct is not None for r in rep.rows), [r.reason for r in rep.rows]
    assert "not modelled for broadcast" in rep.rows[0].note
    assert "cannot run on dgx-a100" in rep.rows[1].note
    # NVLS all-gather is modelled inside one NVLink-SHARP domain: no fallback note
    assert "nvls" not in rep.rows[2].note


@pytest.mark.parametrize(("framework", "version", "sp", "zero"), [
    ("nemo", "24.09", "1", "1"),  # NeMo / Megatron-Bridge recipes: SP with TP, distributed optimizer
    ("megatron-core", "r0.8.0", "1", "1"),
    ("megatron-lm", "2021", "0", "0"),  # the SC'21 code predates sequence parallelism
    ("megatron-deepspeed", "2022", "0", "0"),
    ("torchtitan", "2025-06", "1", "3"),  # FSDP2 + a TP plan with SequenceParallel norms
])
def test_blank_sp_zero_recompute_take_the_framework_default_with_a_note(validation_dir, framework, version, sp, zero):
    tp4 = next(r for r in _rows(validation_dir, "training") if r["id"] == "mcore-h100-weak-3")  # TP 4, SP, ZeRO-1
    blank = dict(tp4, framework=framework, framework_version=version, sequence_parallel="", zero_stage="",
                 recompute="")
    resolved, notes = resolve_row(blank, load_catalog())
    assert (resolved["sequence_parallel"], resolved["zero_stage"], resolved["recompute"]) == (sp, zero, "none")
    assert any("recipe default (frameworks.yaml)" in n and f"zero_stage {zero}" in n for n in notes)
    got = _one(blank)
    # a blank recompute is the framework's default (none) unless the published run could not have held that:
    # then the least recompute mode that fits, said in the note (validate.BLANK_RECOMPUTE_FIT_SLACK)
    mode = re.search(r"recompute blank: .* modelled with recompute (\w+)", got.note)
    filled = dict(blank, sequence_parallel=sp, zero_stage=zero, recompute=mode.group(1) if mode else "none",
                  fsdp="1" if zero == "3" else tp4["fsdp"])
    assert got.predicted == pytest.approx(_one(filled).predicted, rel=1e-12)
    # the 2021 / 2022 codes run this TP-4 layout without SP or a sharded optimizer: it cannot hold it unrecomputed
    assert bool(mode) == ((sp, zero) == ("0", "0"))


def test_architecture_details_no_column_gives_come_from_the_zoo_model_the_row_names(validation_dir):
    """A row gets the details the columns cannot hold from the zoo model its ``model`` column names, when its
    shape is that model's, whatever its notes say: the MTP layer too, unless the label says "(w/o MTP)"."""
    from clustertwin.validate import model_from_row

    rows = {r["id"]: r for r in _rows(validation_dir, "training")}
    for rid in ("mbridge-249", "mbridge-41", "mbridge-93", "mbridge-50"):  # DeepSeek-V3 (w/o MTP), DeepSeek-V3,
        row = rows[rid]                                                    # GPT-OSS-120B, Qwen3-30B
        bare = dict(row, notes="")
        assert model_from_row(bare) == model_from_row(row), rid
        assert validate_rows([bare]).rows[0].predicted == pytest.approx(validate_rows([row]).rows[0].predicted)
    ds = model_from_row(dict(rows["mbridge-249"], notes=""))
    assert ds.is_mla and ds.kv_lora_rank == 512 and ds.mtp_depth == 0
    assert model_from_row(dict(rows["mbridge-41"], notes="")).mtp_depth == 1
    oss = model_from_row(dict(rows["mbridge-93"], notes=""))
    assert oss.head_dim == 64 and oss.sliding_window == 128 and oss.glu_clamp and oss.linear_bias
    # notes are never read; another shape or an unknown name takes nothing from the zoo
    assert model_from_row(dict(rows["mbridge-93"], notes="arch: head_dim=80")).head_dim == 64
    for cols in ({"num_layers": "24"}, {"model": "my-own-moe"}):
        other = model_from_row(dict(rows["mbridge-93"], notes="", **cols))
        assert not (other.linear_bias or other.glu_clamp or other.sliding_window)


@pytest.fixture(scope="module")
def titan(validation_dir):  # torchtitan FSDP2 + TP 8, Llama 3.1 70B on 256 H100 (FP8, full AC)
    return next(r for r in _rows(validation_dir, "training") if r["id"] == "tt-h100-2412-t4-1")


@pytest.mark.parametrize(("cols", "said", "same"), [
    ({"fsdp": "FULL_SHARD"}, "fsdp 'FULL_SHARD' (PyTorch FSDP sharding strategy) read as fsdp 1", True),
    ({"fsdp": "full_shard", "zero_stage": ""}, "read as fsdp 1, zero_stage 3", True),
    ({"fsdp": "HYBRID_SHARD"}, "HSDP modelled as sharding over all dp ranks", True),
    ({"fsdp": "SHARD_GRAD_OP", "zero_stage": ""}, "read as fsdp 1, zero_stage 2", False),
    ({"recompute": "per-op"}, "read as selective", False),
    ({"recompute": "layer"}, "read as selective", False),
    ({"precision": "amp_fp8"}, "modelled as fp8", True),  # Composer / llm-foundry precision name
    ({"tp": ""}, "tp blank: num_gpus / (dp*pp*cp) = 8", True),
    ({"micro_batch": ""}, "global_batch / dp = 16", True),  # torchtitan: no gradient accumulation by default
])
def test_sharded_dp_spellings_and_blanks_are_modelled_as_published(titan, cols, said, same):
    base, r = _one(titan), _one(titan, **cols)
    assert said in r.note
    assert (r.predicted == pytest.approx(base.predicted, rel=1e-9)) is same


def test_blank_micro_batch_is_one_with_pipeline_parallelism_or_on_megatron(validation_dir, h100):
    pp = next(r for r in _rows(validation_dir, "training") if r["id"] == "tt-h100-2412-t6-3")  # torchtitan, pp 8
    assert "micro_batch blank: 1 assumed" in _one(pp, micro_batch="").note
    assert "micro_batch blank: 1 assumed" in _one(h100, micro_batch="").note  # Megatron-Core

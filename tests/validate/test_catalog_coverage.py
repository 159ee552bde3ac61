"""Catalog entries the published runs need, names the catalog spells differently, uncalibrated chips."""

from __future__ import annotations

import csv

import pytest

from clustertwin.catalog import load_catalog
from clustertwin.validate import validate_rows


@pytest.fixture(scope="module")
def row(validation_dir):
    with open(validation_dir / "training.csv", newline="", encoding="utf-8") as fh:
        return next(r for r in csv.DictReader(fh) if r["id"] == "mlm-sc21-t1-1")


def test_new_systems_and_fabrics_are_sourced():
    cat = load_catalog()
    for sid, acc in (("mi325x-8", "mi325x"), ("mi355x-8", "mi355x"), ("mi300x-8", "mi300x")):
        s = cat.system(sid)
        assert s.accelerator.id == acc and s.devices_per_domain == 8
    assert cat.system("mi355x-8").scaleup_bw_per_device > cat.system("mi325x-8").scaleup_bw_per_device
    assert cat.accelerator("mi325x").hbm_bytes == pytest.approx(256e9)
    efa = cat.fabric("aws-efa-p5")
    assert efa.port_bw * 8 / 1e9 == pytest.approx(100) and efa.assumptions  # 32 x 100G per P5 node
    for fid, gbps in (("omnipath-100g", 100), ("eth-tcp-10g", 10), ("eth-tcp-25g", 25), ("eth-tcp-100g", 100)):
        assert cat.fabric(fid).port_bw * 8 / 1e9 == pytest.approx(gbps)


def test_p5_efa_row_is_modelled(row):
    p5 = dict(row, id="p5", gpu="h100-sxm", system="hgx-h100", scale_out="aws-efa-p5", nics_per_node="32",
              nic_gbps="100", precision="bf16")
    rep = validate_rows([p5])
    assert rep.rows[0].error_pct is not None, rep.rows[0].reason


@pytest.mark.parametrize(("name", "fabric"), [("efa-100g", "aws-efa-p5"), ("opa-100", "omnipath-100g"),
                                              ("10GbE", "eth-tcp-10g"), ("ethernet-25g", "eth-tcp-25g"),
                                              ("infiniband-100g", "ib-edr-100g")])
def test_fabric_names_outside_the_catalog_map_to_the_closest_and_say_so(row, name, fabric):
    rep = validate_rows([dict(row, scale_out=name)])
    r = rep.rows[0]
    assert r.error_pct is not None and f"modelled as {fabric!r}" in r.note


def test_fabric_of_unknown_kind_is_modelled_as_generic_rdma_and_says_so(row):
    rep = validate_rows([dict(row, scale_out="myrinet")])
    r = rep.rows[0]
    assert r.error_pct is not None and "'myrinet'" in r.note and "generic RDMA fabric" in r.note


def test_uncalibrated_chip_is_flagged(row):
    from clustertwin import api

    rep = validate_rows([dict(row, gpu="kunlun-p800", system="kunlun-p800-32", precision="bf16")])
    assert "uncalibrated efficiency (assumed)" in rep.rows[0].note
    calibrated = validate_rows([row])
    assert "uncalibrated" not in calibrated.rows[0].note
    r = api.estimate(model="llama3-8b", system="kunlun-p800-32", gpus=32)
    assert any(a.startswith("uncalibrated efficiency (assumed)") for a in r.assumptions)
    r = api.estimate(model="llama3-8b", system="hgx-h100", gpus=8)
    assert not any(a.startswith("uncalibrated") for a in r.assumptions)


def test_plan_and_compare_flag_an_uncalibrated_chip():
    from clustertwin import api

    doc = api.plan(model="llama3-8b", system="kunlun-p800-32", gpus=32, store=False)
    assert any(a.startswith("uncalibrated efficiency (assumed)") for a in doc["assumptions"])
    assert api.plan(model="llama3-8b", system="hgx-h100", gpus=16, store=False)["assumptions"] == []
    out = api.compare(["kunlun-p800-32", "hgx-h100"], model="llama3-8b", gpus=64)
    flags = {d["name"]: any(a.startswith("uncalibrated efficiency") for a in d["assumptions"]) for d in out["designs"]}
    assert flags == {"kunlun-p800-32": True, "hgx-h100": False}



def test_sweep_flags_an_uncalibrated_chip(tmp_path):
    from clustertwin import api

    spec = {"name": "flag", "designs": [{"system": ["kunlun-p800-32", "hgx-h100"], "gpus": 32}],
            "models": ["llama3-8b"], "global_batch": 64, "seq_len": 4096}
    doc = api.sweep(api.build_sweep(spec), db=tmp_path / "r.db", workers=1)
    flags = [a for a in doc["assumptions"] if a.startswith("uncalibrated efficiency (assumed)")]
    assert len(flags) == 1 and "kunlun-p800" in flags[0]
    one = {**spec, "designs": [{"system": "hgx-h100", "gpus": 16}]}
    assert api.sweep(api.build_sweep(one), db=tmp_path / "r.db", workers=1)["assumptions"] == []


@pytest.mark.parametrize("chip", ["mi300x", "mi325x", "mi355x"])
def test_amd_chips_carry_sourced_efficiencies_not_the_defaults(chip):
    """The AMD Instinct chips have their own efficiency entries, each value either cited (`sources`) or a stated
    transfer (`assumed`), and none of them is the NVIDIA-derived default."""
    from clustertwin.sim.machine import efficiency_table

    table = efficiency_table()
    entry, defaults = table["chips"][chip], table["defaults"]
    for key in ("gemm_mamf_scale", "attention_efficiency", "hbm_efficiency"):
        assert entry[key] != defaults[key], key
        cited = {**entry.get("sources", {}), **entry.get("assumed", {})}
        assert len(cited.get(key, "")) > 40, f"{chip}.{key} has no source / assumption text"
    # not fitted: no AMD chip is in a fitted gemm_mamf_scale group (no training rows)
    assert not any(chip in g for g in table["fitted"]["gemm_mamf_scale"]["groups"].values())


def test_mi300x_estimate_uses_the_amd_efficiencies_and_says_so(row):
    from clustertwin import api
    from clustertwin.catalog import load_catalog
    from clustertwin.sim.machine import make_hardware

    cat = load_catalog()
    hw = make_hardware(cat.system("mi300x-8"), cat.fabric("roce-400g"), "bf16")
    assert (hw.eff.gemm_mamf_scale, hw.eff.attention_efficiency, hw.eff.hbm_efficiency) == (0.825, 0.175, 0.77)
    r = api.estimate(model="llama3-8b", system="mi300x-8", gpus=8)
    flag = [a for a in r.assumptions if a.startswith("sourced efficiency (not fitted)")]
    assert len(flag) == 1 and "mi300x" in flag[0] and "0.175" in flag[0]
    assert not any(a.startswith("uncalibrated") for a in r.assumptions)
    assert any("ROCm" in a for a in r.assumptions)  # the attention library is named as ROCm's, not cuDNN
    rep = validate_rows([dict(row, gpu="mi300x", system="mi300x-8", precision="bf16")])
    assert "sourced efficiency (not fitted): mi300x" in rep.rows[0].note


def test_sourced_amd_efficiencies_slow_the_mi300x_step_against_the_defaults():
    """The sourced MI300X constants (CK FlashAttention-2 at 0.175 of peak instead of the 0.45 default, GEMMs at
    0.825 x MAMF, HBM at 0.77) make an attention-heavy step slower than the borrowed defaults did."""
    from dataclasses import replace

    from clustertwin import api

    cat = load_catalog()
    sourced = api.estimate(model="llama3-8b", system="mi300x-8", gpus=8, catalog=cat).step_time_s
    borrowed = replace(cat, calibration={"step_efficiency": {"mi300x": {
        "attention_efficiency": 0.45, "gemm_mamf_scale": 1.0, "hbm_efficiency": 0.85}}})
    defaults = api.estimate(model="llama3-8b", system="mi300x-8", gpus=8, catalog=borrowed).step_time_s
    assert sourced > 1.1 * defaults

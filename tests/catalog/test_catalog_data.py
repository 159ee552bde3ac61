"""Every shipped catalog number is sourced, in sane units, and the ids other areas rely on exist."""

from __future__ import annotations

import json
from dataclasses import fields

import pytest
from typer.testing import CliRunner

from clustertwin.cli import app

ACCELERATORS = ["a100-80gb", "a100-40gb", "h100-sxm", "h800", "h200", "b200", "gb200", "b300", "gb300", "mi300x",
                "mi325x", "mi355x", "ascend-910c", "kunlun-p800"]
SYSTEMS = ["dgx-a100", "dgx-a100-40gb", "hgx-h100", "dgx-h800", "hgx-h200", "hgx-b200", "hgx-b300", "gb200-nvl72",
           "gb300-nvl72", "gb200-nvl576", "cloudmatrix-384", "kunlun-p800-32", "kunlun-p800-64", "mi300x-8",
           "mi325x-8", "mi355x-8", "pcie-8gpu"]
SCALEUP = ["nvlink3", "nvlink4", "nvlink5", "pcie4", "pcie5", "pcie6", "infinity-fabric", "huawei-ub", "ualink-1.0",
           "oisa", "eth-x", "alink", "xpu-link"]
SCALEOUT = ["ib-hdr-200g", "ib-ndr-400g", "ib-xdr-800g", "roce-200g", "roce-400g", "roce-800g", "spectrum-x-800g",
            "spectrum-x-400g", "eth-tcp-100g", "eth-tcp-10g", "eth-tcp-25g", "aws-efa-p5", "aws-efa-p5en",
            "omnipath-100g"]


def test_shipped_yaml_has_no_duplicate_keys():
    """YAML keeps the last of two equal keys silently: a second `mi325x:` entry would replace the first."""
    from importlib import resources

    from clustertwin.userfiles import parse_yaml_text

    root = resources.files("clustertwin")
    todo, seen = [root], 0
    while todo:
        d = todo.pop()
        for p in d.iterdir():
            if p.is_dir():
                todo.append(p)
            elif p.name.endswith(".yaml"):
                parse_yaml_text(p.read_text(encoding="utf-8"), p.name)  # raises InputError on a duplicate key
                seen += 1
    assert seen >= 5


def test_required_ids_exist(catalog):
    assert set(ACCELERATORS) <= set(catalog.accelerators)
    assert set(SYSTEMS) <= set(catalog.systems)
    assert set(SCALEUP) <= set(catalog.scaleup)
    assert set(SCALEOUT) <= set(catalog.scaleout)


def _numeric_fields(spec):
    for f in fields(spec):
        v = getattr(spec, f.name)
        if isinstance(v, bool) or v is None or f.name in ("sources", "assumptions", "bom"):
            continue
        if isinstance(v, (int, float)) or (isinstance(v, dict) and v):
            yield f.name


@pytest.mark.parametrize("section", ["accelerators", "scaleup", "scaleout", "systems"])
def test_every_numeric_field_has_a_source(catalog, section):
    for key, spec in getattr(catalog, section).items():
        for name in _numeric_fields(spec):
            src = spec.sources.get(name, "")
            assert len(src) >= 3, f"{section}.{key}.{name} has no source"
        for k in getattr(spec, "bom", {}):
            assert len(spec.sources.get(f"bom.{k}", "")) >= 3, f"{section}.{key}.bom.{k} has no source"
        for name in spec.assumptions:
            assert name in {f.name for f in fields(spec)} or name.startswith("bom."), (key, name)


def test_accelerator_units_are_sane(catalog):
    for a in catalog.accelerators.values():
        assert 0.5e12 <= a.hbm_bw <= 30e12, a.id
        assert 16e9 <= a.hbm_bytes <= 512e9, a.id
        assert 100e12 <= a.peak("bf16") <= 10e15, a.id
        if a.peak("fp8"):
            assert a.peak("fp8") >= a.peak("bf16"), a.id
        if a.peak("fp4"):
            assert a.peak("fp4") >= a.peak("fp8"), a.id
        assert a.peak("tf32") <= a.peak("bf16") or not a.peak("tf32")
        assert 10e9 <= a.scaleup_bw <= 2e12, a.id
        assert a.tdp_w is None or 200 <= a.tdp_w <= 2000
        for f in a.mamf_fraction.values():
            assert 0.3 <= f <= 1.0


def test_fabric_units_are_sane(catalog):
    for f in catalog.scaleout.values():
        assert 1e9 <= f.port_bw <= 250e9 and 0.3 <= f.protocol_efficiency <= 1  # 10G Ethernet .. 1.6T
        assert f.switch_radix >= 32 and f.hop_latency_s < 5e-6
    assert catalog.fabric("eth-tcp-100g").protocol_efficiency < catalog.fabric("roce-400g").protocol_efficiency
    for t in catalog.scaleup.values():
        assert 1e9 <= t.bw_per_device <= 3e12 and t.latency_s < 5e-6 and t.max_domain >= 8
    assert catalog.scaleup_tech("nvlink5").in_network_reduction and catalog.scaleup_tech("nvlink4").in_network_reduction


def test_systems_consistent(catalog):
    for s in catalog.systems.values():
        assert s.devices_per_domain % s.devices_per_host == 0 or s.devices_per_host % s.devices_per_domain == 0
        assert s.scaleup_bw_per_device <= s.accelerator.scaleup_bw + 1
    assert catalog.system("dgx-h800").scaleup_bw_per_device == pytest.approx(200e9)
    assert catalog.system("pcie-8gpu").scaleup_bw_per_device == pytest.approx(31.5e9)
    assert catalog.system("dgx-a100-40gb").accelerator.id == "a100-40gb"


def test_assumptions_are_flagged_where_nothing_is_published(catalog):
    assert "peak_flops" in catalog.accelerator("kunlun-p800").assumptions
    assert "switch_price_usd" in catalog.fabric("ib-ndr-400g").assumptions


def test_show_keys_sources_by_displayed_field_names():
    r = CliRunner().invoke(app, ["catalog", "show", "ib-ndr-400g", "--json"])
    assert r.exit_code == 0
    d = json.loads(r.stdout)
    for name in ("port_bw", "hop_latency_s", "switch_radix", "protocol_efficiency"):
        assert name in d and (name in d["sources"] or name in d["assumptions"])
    r = CliRunner().invoke(app, ["catalog", "show", "h100-sxm"])
    assert "989.4" in r.stdout and "TFLOP/s" in r.stdout and "3.35 TB/s" in r.stdout


def test_list_json_sections():
    r = CliRunner().invoke(app, ["catalog", "list", "fabrics", "--json"])
    ids = {row["id"] for row in json.loads(r.stdout)["fabrics"]}
    assert set(SCALEOUT) | set(SCALEUP) <= ids


def test_device_memory_capacity_is_the_driver_reported_total_where_sourced(catalog):
    """NVIDIA's "80 GB" is 80 GiB less a reservation: nvidia-smi shows 81,559 MiB on an H100, 81,920 MiB on
    an A100 80GB. Fit checks use that figure where the catalog has a source for it, the nominal one elsewhere."""
    h100 = catalog.accelerator("h100-sxm")
    assert h100.hbm_bytes == 80e9  # the datasheet figure stays what the datasheet says
    assert h100.memory_capacity_bytes == 81559 * 2**20
    assert "nvidia-smi" in h100.sources["hbm_reported_bytes"]
    assert catalog.accelerator("a100-80gb").memory_capacity_bytes == 80 * 2**30
    assert "hbm_reported_bytes" in catalog.accelerator("h800").assumptions  # same HBM as H100, not sourced apart
    h200 = catalog.accelerator("h200")
    assert h200.hbm_reported_bytes is None and h200.memory_capacity_bytes == h200.hbm_bytes
    for acc in catalog.accelerators.values():  # the driver never reports more than the stacks hold
        assert acc.hbm_bytes <= acc.memory_capacity_bytes <= acc.hbm_bytes * 1.1

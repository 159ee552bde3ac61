"""Power, cost and the GB200 NVL72 vs CloudMatrix 384 figures quoted in the seeds."""

from __future__ import annotations

import pytest

from clustertwin.errors import InputError, UnknownNameError
from clustertwin.reliability.compare import compare_designs, efficiency_ratios
from clustertwin.reliability.cost import cost
from clustertwin.reliability.design import parse_design
from clustertwin.reliability.power import power

# SemiAnalysis (2025-04-16) as quoted in hardware/README B.3: CloudMatrix 384 draws 3.9x the power of
# a GB200 NVL72 and is 2.3x less efficient per FLOP, 1.8x per TB/s of memory bandwidth, 1.1x per TB
# of HBM.
SEEDS = {"power": 3.9, "flops_per_watt": 2.3, "hbm_bw_per_watt": 1.8, "hbm_per_watt": 1.1}


@pytest.fixture(scope="module")
def pair(catalog, params, fm):
    ds = [parse_design(x, catalog, params) for x in ("gb200-nvl72", "cloudmatrix-384")]
    return compare_designs(ds, params, fm)["designs"]


def test_catalog_totals(pair):
    gb, cm = pair
    assert gb["num_accelerators"] == 72 and cm["num_accelerators"] == 384
    assert gb["peak_pflops_bf16"] == pytest.approx(180.0)  # 72 x 2.5 PFLOP/s
    assert cm["peak_pflops_bf16"] == pytest.approx(288.8, rel=1e-3)  # 384 x 752 TFLOP/s (SemiAnalysis: ~300)
    assert gb["hbm_tbps"] == pytest.approx(576.0) and cm["hbm_tbps"] == pytest.approx(1228.8)
    assert gb["hbm_tb"] == pytest.approx(13.4, rel=0.01) and cm["hbm_tb"] == pytest.approx(49.2, rel=0.01)


def test_seed_ratios_with_the_quoted_all_in_power(pair):
    # Same power basis as the seeds (145 kW vs 559 kW all-in): power, bandwidth and HBM ratios match;
    # the FLOP ratio is 2.40 instead of 2.3 because the catalog's 910C is 752 TFLOP/s (SemiAnalysis
    # counts ~300 PFLOP/s = 781 per chip): 2.40 * 288.8 / 300 = 2.31.
    r = efficiency_ratios(*pair, power_key="quoted_power_kw")
    assert r["power"] == pytest.approx(SEEDS["power"], abs=0.06)
    assert r["hbm_bw_per_watt"] == pytest.approx(SEEDS["hbm_bw_per_watt"], abs=0.05)
    assert r["hbm_per_watt"] == pytest.approx(SEEDS["hbm_per_watt"], abs=0.06)
    assert r["flops_per_watt"] == pytest.approx(2.40, abs=0.02)
    assert r["flops_per_watt"] * pair[1]["peak_pflops_bf16"] / 300.0 == pytest.approx(SEEDS["flops_per_watt"], abs=0.03)


def test_bottom_up_and_published_bases_are_further_from_the_seeds(pair):
    # The catalog's published NVL72 power is NVIDIA's ~120 kW (not 145 kW all-in); the bottom-up model
    # adds scale-out switches/optics and uses an assumed 800 W 910C TDP. Both widen the gap, in the
    # same direction as the seeds.
    pub = efficiency_ratios(*pair, power_key="published_power_kw")
    bottom = efficiency_ratios(*pair, power_key="rated_power_kw")
    for r in (pub, bottom):
        assert 3.9 < r["power"] < 5.0
        assert 2.3 < r["flops_per_watt"] < 3.1
        assert 1.8 < r["hbm_bw_per_watt"] < 2.3
        assert 1.0 < r["hbm_per_watt"] < 1.35


def test_power_model_laws(catalog, params):
    d = parse_design("hgx-h100x4", catalog, params)
    lo = power(d.system, d.fabric, d.counts, params, utilization=0.2, pue=1.1)
    hi = power(d.system, d.fabric, d.counts, params, utilization=0.9, pue=1.1)
    assert hi.it_w > lo.it_w
    assert hi.facility_w == pytest.approx(hi.it_w * 1.1)
    acc = hi.by_component_w["accelerators"]
    assert acc == pytest.approx(32 * 700 * (0.15 + 0.85 * 0.9))
    with pytest.raises(InputError):
        power(d.system, d.fabric, d.counts, params, pue=0.9)
    with pytest.raises(InputError):
        power(d.system, d.fabric, d.counts, params, utilization=1.5)


def test_cost_and_energy(catalog, params):
    d = parse_design("hgx-h100x4@roce-400g", catalog, params)
    pw = power(d.system, d.fabric, d.counts, params, utilization=0.8, pue=1.2)
    c = cost(d.system, d.fabric, d.counts, pw, params, price_kwh=0.1)
    assert c.energy_usd_per_hour == pytest.approx(pw.facility_w / 1e3 * 0.1)
    assert c.capex_by_component_usd["systems"] == pytest.approx(32 * 35000)
    assert any("price per accelerator" in a for a in c.assumptions)  # shipped prices are shown as assumptions
    with pytest.raises(InputError):
        cost(d.system, d.fabric, d.counts, pw, params, price_kwh=0)
    with pytest.raises(InputError):
        cost(d.system, d.fabric, d.counts, pw, params, price_kwh=-0.1)


def test_design_parsing_errors(catalog, params):
    d = parse_design("gb200-nvl72x8@ib-ndr-400g", catalog, params)
    assert d.domains == 8 and d.num_accelerators == 576 and d.fabric.id == "ib-ndr-400g"
    assert parse_design("mi300x-8", catalog, params).domains == 1  # an 'x' inside the id is not a count
    assert parse_design("mi300x-8x4", catalog, params).domains == 4
    with pytest.raises(UnknownNameError) as e:
        parse_design("gb200-nvl27x8", catalog, params)
    assert "gb200-nvl72" in e.value.suggestions
    with pytest.raises(UnknownNameError) as e:
        parse_design("gb200-nvl72@ib-ndr-40g", catalog, params)
    assert "ib-ndr-400g" in e.value.suggestions
    with pytest.raises(InputError):
        parse_design("gb200-nvl72x0", catalog, params)
    with pytest.raises(InputError):
        parse_design("gb200-nvl72@", catalog, params)
    with pytest.raises(InputError):
        parse_design("gb200-nvl72@nvlink5", catalog, params)


def test_scenario_file_design(tmp_path, catalog, params):
    f = tmp_path / "mine.yaml"
    f.write_text("name: my-pod\ncluster:\n  system: hgx-h100\n  gpus: 256\n  fabric: roce-400g\n")
    d = parse_design(str(f), catalog, params)
    assert d.name == "my-pod" and d.domains == 32 and d.fabric.id == "roce-400g"
    bad = tmp_path / "bad.yaml"
    bad.write_text("cluster:\n  gpus: 8\n")
    with pytest.raises(InputError, match="system"):
        parse_design(str(bad), catalog, params)

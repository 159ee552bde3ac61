"""Constants resolve per scale-up link technology, then per-system measured facts, then the user overlay."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from clustertwin.collectives import collective_time, resolve_params
from clustertwin.collectives.params import calibration_entry, nccl_constants


def test_systems_on_one_technology_share_its_constants(catalog):
    techs = nccl_constants()["link_technologies"]
    fab = catalog.fabric("ib-ndr-400g")
    for sid in ("hgx-h100", "hgx-h200", "dgx-h800"):
        P = resolve_params(catalog.system(sid), fab)
        assert catalog.system(sid).scaleup.id == "nvlink4"
        assert P.latency_scale == pytest.approx(techs["nvlink4"]["latency_scale"])
        assert P.pipeline_fill_s == pytest.approx(techs["nvlink4"]["pipeline_fill_us"] * 1e-6)
        assert any("link technology nvlink4" in s for s in P.sources)
    assert resolve_params(catalog.system("dgx-a100"), fab).latency_scale == pytest.approx(techs["nvlink3"]["latency_scale"])


def test_technology_without_a_fit_takes_the_default_and_says_so(catalog):
    spec = catalog.system("mi300x-8")
    assert spec.scaleup.id not in nccl_constants()["link_technologies"]
    P = resolve_params(spec, catalog.fabric(spec.default_scaleout))
    assert P.latency_scale == pytest.approx(nccl_constants()["link_technologies"]["default"]["latency_scale"])
    assert any(s.startswith("link technology default: technologies without a public sweep") for s in P.sources)
    assert P.scaleup_fraction == pytest.approx(0.698)  # per-system measured fact still applies


def test_user_overlay_wins_key_by_key(catalog):
    cat = SimpleNamespace(calibration={"collectives": {"hgx-h200": {"latency_scale": 2.0, "launch_overhead_us": 5.0}}})
    e = calibration_entry("hgx-h200", cat, "nvlink4")
    assert e["latency_scale"] == 2.0 and e["pipeline_fill_us"] == nccl_constants()["link_technologies"]["nvlink4"]["pipeline_fill_us"]
    spec, fab = catalog.system("hgx-h200"), catalog.fabric("ib-ndr-400g")
    t0 = collective_time("all_reduce", 1024, 8, 8, spec, fab)
    t1 = collective_time("all_reduce", 1024, 8, 8, spec, fab, catalog=cat)
    # 1 KiB is latency bound: the tuner latency x 2.0 instead of x nvlink4's scale, plus the 5 us launch
    k = nccl_constants()["link_technologies"]["nvlink4"]["latency_scale"]
    assert t1 == pytest.approx(t0 / k * 2.0 + 5e-6, rel=0.02)

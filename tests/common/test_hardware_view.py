"""One resolved hardware view (hardware.resolve_hardware): every consumer prices with the same
bandwidths, the printed assumption is the one the step was priced with, and a NIC slower than the
fabric port caps the scale-out rate."""

from __future__ import annotations

import dataclasses
import re

import pytest

from clustertwin.cluster.model import build_cluster
from clustertwin.collectives import resolve_params
from clustertwin.fabric import make_fabric
from clustertwin.hardware import resolve_hardware
from clustertwin.sim import estimate
from clustertwin.sim.analytical import bandwidth_assumption
from clustertwin.sim.comm import achieved_bandwidths, collective_time
from clustertwin.sim.costs import make_hardware
from clustertwin.workload import get_model, make_plan


def _pairs(catalog):
    return [(s, f) for s in catalog.systems.values() if s.nics_per_host > 0 for f in catalog.scaleout.values()]


def test_every_system_fabric_pair_prints_what_it_prices_with(catalog):
    pairs = _pairs(catalog)
    assert len(pairs) >= 50
    for system, fabric in pairs:
        v = resolve_hardware(system, fabric)
        k = fabric.planes  # NIC ports per NIC (2 on a dual-plane fabric)
        expect = system.nics_per_host * min(system.nic_bw, k * fabric.port_bw) / system.devices_per_host
        assert v.scaleout_bw_per_device == pytest.approx(expect, rel=1e-12), (system.id, fabric.id)
        hw = make_hardware(system, fabric, "bf16")
        P = resolve_params(system, fabric)  # what collectives.collective_time prices with
        assert hw.view == v
        assert P.nic_bw_per_device == v.scaleout_bw_per_device
        assert P.scaleup_link_bw == v.scaleup_bw_per_device
        up, out = achieved_bandwidths(hw)
        assert (up, out) == (P.scaleup_busbw, P.scaleout_busbw_per_device)
        text = bandwidth_assumption(hw)
        m = re.search(r"scale-up bus bandwidth (\d+) GB/s/GPU, scale-out ([\d.]+) GB/s/GPU", text)
        assert m, text
        assert float(m.group(1)) == round(up / 1e9)
        assert float(m.group(2)) == round(out / 1e9, 1)
        cl = build_cluster(system, 2, fabric)
        assert cl.nic_bw_per_device == pytest.approx(v.scaleout_bw_per_device, rel=1e-12)


def test_estimate_prints_the_bandwidth_line(catalog):
    m = get_model("llama3-8b")
    s, f = catalog.system("hgx-h100"), catalog.fabric("ib-xdr-800g")
    r = estimate(m, s, f, make_plan(gpus=16, tp=8, global_batch=16, seq_len=4096), catalog=catalog)
    assert bandwidth_assumption(make_hardware(s, f, "bf16", catalog)) in r.assumptions


def test_nic_slower_than_port_caps_the_scale_out_rate(catalog):
    """HGX H100 has 400G NICs: an 800G fabric must not make its collectives or step faster."""
    s = catalog.system("hgx-h100")
    f400 = catalog.fabric("ib-ndr-400g")
    f800 = dataclasses.replace(f400, id="ndr-800-test", port_bw=2 * f400.port_bw)  # same latencies
    v400, v800 = resolve_hardware(s, f400), resolve_hardware(s, f800)
    assert v800.scaleout_bw_per_device == v400.scaleout_bw_per_device == s.nics_per_host * s.nic_bw / 8
    hw400, hw800 = make_hardware(s, f400, "bf16"), make_hardware(s, f800, "bf16")
    t400 = float(collective_time("all_reduce", 2e9, 64, 8, hw400))
    t800 = float(collective_time("all_reduce", 2e9, 64, 8, hw800))
    assert t800 == pytest.approx(t400, rel=1e-12)
    # and the converse: an 800G NIC on a 400G fabric runs at 400G
    s800 = dataclasses.replace(s, nic_bw=2 * s.nic_bw)
    assert resolve_hardware(s800, f400).scaleout_bw_per_device == v400.scaleout_bw_per_device
    m, p = get_model("llama3-70b"), make_plan(gpus=256, tp=8, global_batch=256, seq_len=4096, zero=1)
    a, b = estimate(m, s, f400, p), estimate(m, s, f800, p)
    assert a.step_time_s == pytest.approx(b.step_time_s, rel=1e-12)
    # the fabric simulator's NIC endpoint and the cluster model read the same view
    assert make_fabric(s, f800, 64).topo.nic_bw == pytest.approx(v800.nic_bw, rel=1e-12)
    assert build_cluster(s, 4, f800).nic_bw == pytest.approx(v800.nic_bw, rel=1e-12)

"""A dual-socket PCIe server: a collective over more GPUs than one socket holds crosses the CPU
inter-socket link (NCCL topo.cc: LINK_SYS at the CPU's QPI/UPI/xGMI bandwidth) and is bounded by it."""

from __future__ import annotations

import dataclasses

import pytest

from clustertwin.collectives import collective_time

S = 1 << 30  # 1 GiB: bandwidth bound


def _busbw(spec, fab, n):
    t = float(collective_time("all_reduce", S, n, n, spec, fab))
    return 2 * (n - 1) / n * S / t


def test_catalog_carries_the_socket_split_with_its_source(catalog):
    spec = catalog.system("pcie-8gpu")
    assert spec.devices_per_socket == 4 and spec.inter_socket_bw == pytest.approx(10e9)
    assert "SKL_QPI_BW" in spec.sources["inter_socket_bw"]
    assert "not known" in spec.assumptions["inter_socket_bw"]
    assert "devices_per_socket" in spec.assumptions


def test_all_reduce_across_sockets_is_bounded_by_the_inter_socket_link(catalog):
    spec = catalog.system("pcie-8gpu")
    fab = catalog.fabric(spec.default_scaleout)
    cross = _busbw(spec, fab, 8)
    assert cross <= spec.inter_socket_bw * 1.0001
    assert cross > 0.7 * spec.inter_socket_bw  # the link, not latency, sets it at 1 GiB
    # within one socket the PCIe link sets it, well above the inter-socket link
    assert _busbw(spec, fab, 4) > 1.5 * spec.inter_socket_bw


def test_without_the_split_the_same_ring_runs_at_pcie_speed(catalog):
    spec = catalog.system("pcie-8gpu")
    fab = catalog.fabric(spec.default_scaleout)
    flat = dataclasses.replace(spec, devices_per_socket=0, inter_socket_bw=None)
    assert _busbw(flat, fab, 8) > 1.5 * _busbw(spec, fab, 8)
    assert _busbw(flat, fab, 4) == pytest.approx(_busbw(spec, fab, 4), rel=1e-9)
    # NVLink systems carry no socket split: unchanged
    hgx = catalog.system("hgx-h100")
    assert hgx.devices_per_socket == 0 and hgx.inter_socket_bw is None

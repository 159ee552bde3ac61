"""EP all-to-all and PP send/recv entry points (collectives.p2p)."""

from __future__ import annotations

import numpy as np

from clustertwin.collectives import collective_time, effective_bandwidth, ep_alltoall_time, pp_p2p_time


def test_ep_alltoall_is_the_collective_model(catalog):
    s, f = catalog.system("hgx-h100"), catalog.fabric("ib-ndr-400g")
    sizes = np.array([1 << 16, 1 << 24, 1 << 30], dtype=float)
    assert np.allclose(ep_alltoall_time(sizes, 32, 8, s, f), collective_time("all_to_all", sizes, 32, 8, s, f))


def test_efficiency_grows_with_message_size_and_nvlink_beats_the_nic(catalog):
    s, f = catalog.system("hgx-h100"), catalog.fabric("ib-ndr-400g")
    sizes = 2.0 ** np.arange(12, 31, 3)
    bw_in = effective_bandwidth("all_to_all", sizes, 8, 8, s, f)
    bw_out = effective_bandwidth("all_to_all", sizes, 64, 8, s, f)
    assert np.all(np.diff(bw_in) > 0) and np.all(np.diff(bw_out) > 0)
    assert bw_in[-1] > 0.5 * s.scaleup_bw_per_device  # large messages approach the link
    assert bw_in[0] < 0.05 * s.scaleup_bw_per_device  # 4 KiB split 8 ways is latency bound
    assert np.all(bw_in > bw_out)
    # across domains a rank's NIC share (400 Gb/s = 50 GB/s) bounds the (n-g)/n inter part
    assert bw_out[-1] < 50e9 * 64 / 56


def test_pp_p2p_crossing_a_domain_is_slower(catalog):
    s, f = catalog.system("hgx-h100"), catalog.fabric("ib-ndr-400g")
    t = pp_p2p_time(np.array([64e6, 64e6]), np.array([False, True]), s, f)
    assert t[1] > 3 * t[0]  # 450 GB/s NVLink vs one 50 GB/s NIC
    assert pp_p2p_time(64e6, True, s, f) == t[1]

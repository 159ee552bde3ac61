"""Host launch floor (single-process nccl-tests -g N vs one process per GPU), NCCL 2.28 protocol caps
across domains, and how a validation row's launch mode is derived from its columns."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from clustertwin.collectives import collective_time, resolve_params
from clustertwin.collectives import model as M
from clustertwin.collectives.params import nccl_constants
from clustertwin.collectives.validation import row_setup


def test_one_thread_driving_g_gpus_floors_small_collectives(catalog):
    spec, fab = catalog.system("hgx-h200"), catalog.fabric("ib-ndr-400g")
    host = nccl_constants()["host"]["launch_us"] * 1e-6
    one = collective_time("all_reduce", 8, 8, 8, spec, fab, algo="ring")
    assert one < 8 * host  # one process per GPU: the GPU's own latency (ring LL)
    for gpp in (2, 4, 8, 16):
        t = collective_time("all_reduce", 8, 8, 8, spec, fab, algo="ring", gpus_per_process=gpp)
        assert t >= gpp * host * (1 - 1e-12)
        assert t >= one
    # large messages are GPU-bound: the launch mode does not matter
    big = [collective_time("all_reduce", 2**30, 8, 8, spec, fab, gpus_per_process=g) for g in (1, 8)]
    assert big[0] == pytest.approx(big[1])
    # arrays broadcast through the keyword
    arr = collective_time("all_reduce", np.array([8.0, 2.0**30]), 8, 8, spec, fab, gpus_per_process=np.array([8, 8]))
    assert arr.shape == (2,) and arr[0] >= 8 * host


def test_ll_across_domains_is_capped_at_nccl_llmaxbw(catalog):
    spec, fab = catalog.system("hgx-h100"), catalog.fabric("ib-ndr-400g")
    P = resolve_params(spec, fab)
    caps = nccl_constants()["tuner"]["ll_max_bw_GBps"]["multi_domain"]
    S = np.array([2.0**20, 2.0**24])
    for n, cap in ((16, caps[0]), (64, caps[1])):
        t = M.ring(P, "ar", S, np.full(2, float(n)), np.full(2, 8.0))
        w_ll = 2 * (n - 1) / n * S / (cap * 1e9)  # bandwidth time alone at the cap
        assert np.all(t[M.LL] >= w_ll)
    # inside one domain LL keeps B/2 (no selection-heuristic cap)
    t1 = M.ring(P, "ar", np.array([2.0**24]), np.array([8.0]), np.array([8.0]))
    assert t1[M.LL][0] < 2 * 7 / 8 * 2**24 / (caps[0] * 1e9)


def test_one_rank_per_node_ring_pays_the_tree_network_latency(catalog):
    spec, fab = catalog.system("hgx-h100"), catalog.fabric("ib-ndr-400g")
    P = resolve_params(spec, fab)
    one = M.ring(P, "ar", np.array([8.0]), np.array([8.0]), np.array([1.0]))  # 8 nodes x 1 GPU
    net = P.hw_net
    assert net["tree"][M.LL] > net["ring"][M.LL]
    # all 2(n-1) = 14 steps cross the network (never more), each at the tree's network latency
    floor = P.base["ring"][M.LL] + 14 * net["tree"][M.LL]
    assert floor - 1e-12 <= one[M.LL][0] < floor + 20e-6


def _row(**kw):
    r = {"id": "t", "system": "hgx-h100", "num_gpus": "8", "num_nodes": "1", "gpus_per_node": "8",
         "collective": "all_reduce", "algorithm": "auto", "size_bytes": "1024"}
    r.update(kw)
    return r


def test_launch_mode_follows_the_nccl_tests_usage_from_columns(catalog):
    assert row_setup(_row(), catalog)["gpus_per_process"] == 8  # one node: -g <ngpus>
    assert row_setup(_row(num_gpus="4", gpus_per_node="4"), catalog)["gpus_per_process"] == 4
    multi = row_setup(_row(num_gpus="16", num_nodes="2", scale_out="ib-ndr-400g"), catalog)
    assert multi["gpus_per_process"] == 1  # several nodes: mpirun, one process per GPU


def test_tree_pays_nccls_medium_size_correction_and_stays_monotone(catalog):
    spec, fab = catalog.system("hgx-h100"), catalog.fabric("ib-ndr-400g")
    P = resolve_params(spec, fab)
    T = nccl_constants()["tuner"]["tree_correction_factor"]
    # mid-size Simple tree bandwidth is the model's x the correction (entry centre: 2^(k + 0.5) x 64 B)
    k = 13  # 512 KiB .. 1 MiB: Simple factor 0.5
    S = np.array([64 * 2 ** (k + 0.5)])
    n, g = np.array([32.0]), np.array([8.0])
    t = M.tree(P, S, n, g)[M.SIMPLE][0]
    P1 = dataclasses.replace(P, tree_correction=np.ones((3, len(T[0]))))
    t1 = M.tree(P1, S, n, g)[M.SIMPLE][0]
    lat = M.tree(P1, np.array([0.0]), n, g)[M.SIMPLE][0]
    assert (t - lat) == pytest.approx((t1 - lat) / T[2][k], rel=1e-6)
    sizes = np.logspace(0, 34, 4000, base=2)
    tt = collective_time("all_reduce", sizes, 32, 8, spec, fab, algo="tree")
    assert np.all(np.diff(tt) >= 0)


def test_send_recv_protocols_follow_ncclp2p_ll_threshold(catalog):
    spec, fab = catalog.system("hgx-h100"), catalog.fabric("ib-ndr-400g")
    P = resolve_params(spec, fab)
    thr = nccl_constants()["tuner"]["p2p_ll_threshold_bytes"]
    n, g = np.array([8.0, 8.0]), np.array([8.0, 8.0])
    t = M.alltoall_direct(P, np.array([8 * thr, 8 * thr * 2]), n, g)  # per peer: thr, 2 thr
    assert np.isfinite(t[M.LL][0]) and np.isinf(t[M.LL][1])
    assert np.all(np.isinf(t[M.LL128]))  # p2p never runs LL128
    s = M.sendrecv(P, np.array([thr, 2 * thr]), np.array([2.0, 2.0]), np.array([2.0, 2.0]))
    assert np.isfinite(s[M.LL][0]) and np.isinf(s[M.LL][1]) and np.all(np.isinf(s[M.LL128]))


def test_nvlstree_two_domain_exchange_and_bus_bandwidth(catalog):
    """NCCL 2.28 tuning.cc: with two domains NVLSTree's inter bandwidth counts twice (each domain sends
    its S once); the NVLS part keeps the single domain's bus bandwidth (busBw -> algbw by n/nsteps)."""
    spec, fab = catalog.system("hgx-h100"), catalog.fabric("ib-ndr-400g")
    P = resolve_params(spec, fab)
    S = np.array([2.0**33])
    one = M.nvls(P, S, np.array([8.0]), np.array([8.0]))[M.SIMPLE][0]
    busbw = lambda t, n: S[0] / t * 2 * (n - 1) / n  # noqa: E731
    # a fast network: NVLSTree is NVLS-bound and reaches the single domain's bus bandwidth
    wide = dataclasses.replace(P, nic_bw_per_device=P.nic_bw_per_device * 100, nic_bw_per_host=P.nic_bw_per_host * 100)
    for d in (2, 4):
        t = M.nvls(wide, S, np.array([8.0 * d]), np.array([8.0]))[M.SIMPLE][0]
        assert busbw(t, 8 * d) == pytest.approx(busbw(one, 8), rel=0.02)
    # the real NIC: two domains move S per direction, three or more a tree's 2S
    W = lambda d: M.nvls(dataclasses.replace(P, pipeline_fill_s=0.0), S, np.array([8.0 * d]), np.array([8.0]))[M.SIMPLE][0]  # noqa: E731
    nic = 8 * P.nic_bw_per_device * P.scaleout_fraction * P.tree_bw_factor
    assert W(4) >= 2 * S[0] / nic
    assert W(2) < 2 * S[0] / nic and W(2) >= S[0] / nic


def test_pipeline_fill_across_domains_is_paced_by_the_network_step(catalog):
    spec = catalog.system("hgx-h100")
    P = resolve_params(spec, catalog.fabric("ib-ndr-400g"))
    S, n, g = np.array([2.0**28]), np.array([32.0]), np.array([8.0])
    nofill = dataclasses.replace(P, pipeline_fill_s=0.0)
    lat_W = M.ring(nofill, "ar", S, n, g)[M.SIMPLE][0]
    fill = M.ring(P, "ar", S, n, g)[M.SIMPLE][0] - lat_W
    W = lat_W - M.ring(nofill, "ar", np.array([0.0]), n, g)[M.SIMPLE][0] - (P.channels - 1) * P.channel_launch_s
    a_net = P.pipeline_fill_s * P.hw_net["ring"][M.SIMPLE] / P.hw_intra["ring"][M.SIMPLE]
    assert fill == pytest.approx(min(2 * np.sqrt(a_net * W), P.pipeline_fill_max_s), rel=1e-6)
    # inside one domain the NVLink step paces it (smaller stage cost, smaller fill per byte)
    one = M.ring(P, "ar", S, g, g)[M.SIMPLE][0] - M.ring(nofill, "ar", S, g, g)[M.SIMPLE][0]
    W1 = M.ring(nofill, "ar", S, g, g)[M.SIMPLE][0] - M.ring(nofill, "ar", np.array([0.0]), g, g)[M.SIMPLE][0]
    W1 -= (P.channels - 1) * P.channel_launch_s
    assert one == pytest.approx(min(2 * np.sqrt(P.pipeline_fill_s * W1), P.pipeline_fill_max_s), rel=1e-6)
    # a fabric with a slower path (RoCE switches) pays a larger network step, so a larger fill
    roce = resolve_params(spec, catalog.fabric("roce-400g"))
    assert roce.hw_net["ring"][M.SIMPLE] > P.hw_net["ring"][M.SIMPLE]

"""Vectorised cost model of NCCL collectives (α-β with NCCL's tuner latencies and protocols).

Every function works on numpy arrays that broadcast: ``S`` (bytes), ``n`` (ranks in the group),
``g`` (ranks of the group inside one scale-up domain). ``d = ceil(n / g)`` domains are spanned.

For each algorithm and protocol p ∈ {LL, LL128, Simple} the time is

    t = lat_p + W_p,     W_p = bytes_on_the_bottleneck_link / (B_bottleneck · f_p)

* ``lat_p`` is NCCL's tuner latency (tuning.cc: base + per-step NVLink/PCIe and network latencies,
  hardware/README.md §D.3), intra-domain parts scaled by the per-system ``latency_scale``.
* ``B_bottleneck`` is the achieved bus bandwidth: inside a domain the scale-up link bandwidth per
  device x ``scaleup_busbw_fraction``; across domains ``min(that, g · NIC_bw_per_device ·
  scaleout_busbw_fraction)`` — every ring crosses each domain boundary once, and the g local ranks
  drive g NICs' worth of bandwidth (MODELLING.md §7, "multi-node ring busbw").
* ``f_p`` is the protocol payload efficiency (LL 0.5, LL128 0.92, Simple 1; NCCL device.h/tuning.cc).
* NCCL trims channels for small messages (enqueue.cc); with ``channel_launch_us`` > 0 a second,
  small-message mode ``lat_p - (C-1)·channel_launch + W_p / small_msg_bw_fraction`` competes.

Bytes per rank (Patarasuk & Yuan 2009; Thakur et al. 2005; nccl-tests PERFORMANCE.md):
ring all-reduce 2(n−1)/n·S, all-gather / reduce-scatter (n−1)/n·S, pipelined chain broadcast /
reduce S; double binary tree all-reduce 2S per node per direction (NCCL: tree algbw = busbw/2,
Sanders et al. 2009); NVLS all-reduce (n+1)/n·S per device link (each device pushes its S once and
receives its reduced shard S/n ... the multicast result; fits validation coll-h100-nvls-{4,6,8}gpu).
"""

from __future__ import annotations

import numpy as np

from .params import CollectiveParams

LL, LL128, SIMPLE = 0, 1, 2
INF = np.inf


def _stack3(a, b, c):
    return np.stack(np.broadcast_arrays(a, b, c))


def _domains(n, g):
    g = np.minimum(np.maximum(g, 1.0), n)
    d = np.ceil(n / g - 1e-9)
    return g, d


def _kscale(P: CollectiveParams, d):
    """Per-system latency scale (nccl.yaml): ``latency_scale`` for collectives inside one domain,
    ``net_latency_scale`` once the network paces the pipeline (default 1 = NCCL tuner values)."""
    return np.where(d > 1, P.net_latency_scale, P.latency_scale)


def _bw_up(P: CollectiveParams, g=None):
    """Achieved scale-up bus bandwidth per device. On a full mesh (Infinity Fabric, no switch) a
    group of g ranks uses only g−1 of the device's D−1 links (STAS: MI300X 2 GPUs 47.7 vs 8 GPUs
    312.9 GB/s busbw)."""
    b = P.scaleup_busbw
    if P.full_mesh and g is not None and P.devices_per_domain > 1:
        return b * np.minimum(1.0, np.maximum(g - 1.0, 1.0) / (P.devices_per_domain - 1.0))
    if P.socket_devices > 0 and g is not None:
        # PCIe host with two sockets: a group larger than one socket's devices crosses the CPU
        # inter-socket link once each way; every channel's ring shares it (NCCL topo.cc
        # ncclTopoConnectCpus / ncclTopoGetInterCpuBw: LINK_SYS at the CPU's QPI/UPI/xGMI bandwidth).
        return np.where(np.asarray(g) > P.socket_devices, min(b, P.inter_socket_bw), b)
    return b


def _bw_nic_rank(P: CollectiveParams) -> float:
    return P.scaleout_busbw_per_device


def _bw_out_domain(P: CollectiveParams, g):
    # NICs the group's local ranks drive; never more than the domain's hosts have.
    return np.minimum(g * P.nic_bw_per_device, np.maximum(g / P.devices_per_host, 1.0) * P.nic_bw_per_host) * P.scaleout_fraction


def _bus_bw(P: CollectiveParams, g, d):
    return np.where(d > 1, np.minimum(_bw_up(P, g), _bw_out_domain(P, g)), _bw_up(P, g))


def _finish(P: CollectiveParams, lat, W, mask, d, net_step=None):
    """Combine latency (tuner values, scaled here) and bandwidth time (shape (3, ...)) with the
    channel modes and the pipeline fill; mask protocols. ``net_step``: the algorithm's per-step
    network latencies (3 protocols, s) — across domains the pipeline's stage is the network step."""
    lat = lat * _kscale(P, d) + P.launch_overhead_s
    C = P.channels
    full = lat + (C - 1) * P.channel_launch_s + W
    if P.pipeline_fill_s > 0:
        # Optimal-chunk pipelining (Traff & Sanders): T = lat + W + 2*sqrt(a*W); NCCL's chunk size
        # stops growing at its maximum, so the fill term saturates at pipeline_fill_max. The stage
        # cost a scales with the slowest hop's per-step latency: the NVLink step inside a domain, the
        # algorithm's network step (tuner NET latency) once the group spans domains.
        shape = (3,) + (1,) * (np.ndim(W) - 1)
        a = P.pipeline_fill_s * np.reshape(P.fill_protocol_factor, shape)
        if net_step is not None:
            a_net = P.pipeline_fill_s * np.reshape(np.asarray(net_step) / P.hw_intra["ring"][SIMPLE], shape)
            a = np.where(d > 1, a_net, a)
        full = full + np.minimum(2.0 * np.sqrt(a * W), P.pipeline_fill_max_s)
    if P.channel_launch_s > 0 and P.small_msg_bw_fraction < 1:
        full = np.minimum(full, lat + W / P.small_msg_bw_fraction)
    return np.where(mask, full, INF)


def _domain_index(d):
    """NCCL's tuner column: 0 one node (domain), 1 two, 2 more (tuning.cc index2)."""
    return np.where(d <= 1, 0, np.where(d <= 2, 1, 2))


def _ll_cap(P: CollectiveParams, d):
    """NCCL 2.28 tuning.cc llMaxBws: the LL protocol's bus bandwidth cap (flag-per-8-byte stores are
    latency bound per channel), by GPU generation inside one domain and by host CPU across domains."""
    return np.choose(_domain_index(d), P.ll_max_bw)


def _ll128_mask(P: CollectiveParams, d):
    ok = P.intra_kind == "nvlink"
    return (d <= 1) | P.ll128_multinode if ok else np.zeros_like(d, dtype=bool)


def _protocol_mask(P, d, simple_only=False):
    if simple_only:
        return np.stack(np.broadcast_arrays(False, False, np.ones_like(d, dtype=bool)))
    return _stack3(np.ones_like(d, dtype=bool), _ll128_mask(P, d), np.ones_like(d, dtype=bool))


def _size_ranged(P: CollectiveParams, op, S, d, t3, at_size):
    """RCCL picks the protocol of a single-node collective by message size, not by its cost model
    (tuning.cc llProtoRanges: LL up to ``ll_max``, LL64/128 up to ``ll128_max``, Simple above).
    ``t3``: times per protocol (3, ...); ``at_size(b)``: the same collective's times at size ``b``.
    Where a switch point makes a larger message faster (RCCL's ranges are tuned so that this is
    small), the time below it is capped at the next protocol's time at the switch point, so time
    stays monotone in size. Returns ``t3`` with only the chosen protocol finite."""
    rng = P.protocol_ranges.get(op) if (P.protocol_ranges and op is not None) else None
    if rng is None:
        return t3
    ll_max, ll128_max = rng
    S = np.broadcast_to(np.asarray(S, dtype=float), t3.shape[1:])
    want = np.where(S <= ll_max, LL, np.where(S <= ll128_max, LL128, SIMPLE))
    forced = np.take_along_axis(t3, want[None], axis=0)[0]
    fallback = ~np.isfinite(forced)  # that protocol cannot run here (e.g. LL128 masked)
    forced = np.where(fallback, t3.min(axis=0), forced)
    t1, t2 = at_size(ll_max), at_size(ll128_max)
    cap_hi = t2[SIMPLE]
    cap_lo = np.minimum(t1[LL128], cap_hi)
    t = np.where(S <= ll_max, np.minimum(forced, cap_lo), np.where(S <= ll128_max, np.minimum(forced, cap_hi), forced))
    proto = np.where(fallback, t3.argmin(axis=0), want)
    out = np.where(np.arange(3).reshape((3,) + (1,) * t.ndim) == proto[None], t[None], INF)
    return np.where(d <= 1, out, t3)


# --------------------------------------------------------------------------------------- ring / chain
def ring(P: CollectiveParams, kind: str, S, n, g, ranged: bool = True):
    """Ring all-reduce (kind 'ar'), all-gather / reduce-scatter ('ag'), chain broadcast / reduce ('bc').

    Latency: NCCL tuning.cc ring model, nsteps = 2(n−1) (ar) or n−1, of which 2d (ar, d > 1; NCCL
    master) / d−1 cross the network; intra steps cost max(intraLat, netOverhead). Bandwidth: bytes 2(n−1)/n·S, (n−1)/n·S or S.
    """
    g, d = _domains(n, g)
    op = {"ar": "all_reduce", "ag": "all_gather", "rs": "reduce_scatter"}.get(kind)
    if kind == "ar":
        # NCCL master tuning.cc: nInterSteps = 2·nNodes for a multi-node all-reduce (was 2·(nNodes−1))
        # (never more network steps than steps: one rank per node -> every step crosses)
        nsteps, fbytes = 2 * (n - 1), 2 * (n - 1) / n
        ninter = np.minimum(np.where(d > 1, 2 * d, 0.0), nsteps)
    elif kind in ("ag", "rs"):
        nsteps, ninter, fbytes = n - 1, d - 1, (n - 1) / n
    else:
        nsteps, ninter, fbytes = n - 1, d - 1, np.ones_like(n)
    lat = []
    for p in range(3):
        intra = P.hw_intra["ring"][p]
        ov = P.net_overhead_s * (P.net_overhead_simple_mult if p == SIMPLE else 1.0)
        step = np.where(d > 1, np.maximum(intra, ov), intra)
        # one rank per node: nothing hides the network latency, NCCL prices it as the tree's (2.28)
        net = np.where(g <= 1, P.hw_net["tree"][p], P.hw_net["ring"][p])
        lat.append(P.base["ring"][p] + (nsteps - ninter) * step + ninter * net)
    lat = np.stack(np.broadcast_arrays(*lat))
    B = _bus_bw(P, g, d)
    # protocol bus bandwidths (tuning.cc 2.28): LL min(llMaxBw, B/2); LL128 min(0.92 B, nCh x per-channel cap)
    Bp = (
        np.minimum(B * P.bw_factor[LL], _ll_cap(P, d)),
        np.minimum(B * P.bw_factor[LL128], P.channels * P.ll128_max_bw_per_channel),
        B * P.bw_factor[SIMPLE],
    )
    W = np.stack(np.broadcast_arrays(*[fbytes * S / Bp[p] for p in range(3)]))
    t3 = _finish(P, lat, W, _protocol_mask(P, d), d, P.hw_net["ring"])
    if not ranged or not P.protocol_ranges:
        return t3
    return _size_ranged(P, op, S, d, t3, lambda b: ring(P, kind, np.full_like(np.asarray(S, dtype=float), b), n, g, False))


# ------------------------------------------------------------------------------------------- tree
def _tree_correction(P: CollectiveParams, S):
    """NCCL's measured correction of tree bandwidth at medium sizes (tuning.cc treeCorrectionFactor,
    "trees are not perfectly sticking to the model for medium sizes"): per protocol, entry k for
    log2(bytes / 64) in [k, k+1), 64 B to 256 MiB, 1 outside. NCCL steps between entries; here the
    factor is interpolated in log2(size) between entry centres, so that time stays monotone in size."""
    T = P.tree_correction
    k = np.log2(np.maximum(S, 1.0) * (1.0 / 64.0))
    xp = np.arange(-1, T.shape[1] + 1) + 0.5
    return [np.interp(k, xp, np.concatenate(([1.0], T[p], [1.0]))) for p in range(3)]


def tree(P: CollectiveParams, S, n, g, ranged: bool = True):
    """NCCL double binary tree all-reduce (Sanders et al. 2009). Latency (tuning.cc):
    base + 2·((g−1)·intraLat + log2(d)·interLat); bytes 2S per node per direction (algbw = busbw/2);
    protocol factors LL 1/3.8, LL128 7/9 (1 node) or 120/128, Simple 0.92."""
    g, d = _domains(n, g)
    lat = np.stack(
        np.broadcast_arrays(
            *[
                P.base["tree"][p]
                + 2 * ((g - 1) * P.hw_intra["tree"][p] + np.log2(d) * P.hw_net["tree"][p])
                for p in range(3)
            ]
        )
    )
    B = _bus_bw(P, g, d)
    # tuning.cc 2.28: tree busBw = min(0.92 B, nCh x perChMaxTreeBw); LL min(that/3.8, llMaxBw);
    # LL128 x 7/9 (one node) or 120/128
    Bs = np.minimum(B * P.tree_bw_factor, P.channels * np.choose(_domain_index(d), P.tree_max_bw_per_channel))
    Bp = (np.minimum(Bs / 3.8, _ll_cap(P, d)), Bs * np.where(d > 1, 120 / 128, 7 / 9), Bs)
    corr = _tree_correction(P, S)
    W = np.stack(np.broadcast_arrays(*[2 * S / (Bp[p] * corr[p]) for p in range(3)]))
    t3 = _finish(P, lat, W, _protocol_mask(P, d), d, P.hw_net["tree"])
    if not ranged or not P.protocol_ranges:
        return t3
    return _size_ranged(P, "all_reduce", S, d, t3, lambda b: tree(P, np.full_like(np.asarray(S, dtype=float), b), n, g, False))


# ---------------------------------------------------------------------------------- in-network
def nvls(P: CollectiveParams, S, n, g):
    """NVLink SHARP all-reduce (NVLS; NVLSTree when d > 1). Simple protocol only.

    Intra: each device moves (g+1)/g·S over its link at B_up·nvls_efficiency (NCCL tuner Hopper 0.85,
    Blackwell 0.74); latency = NVLS NVLink latency (25 µs, tuning.cc). Across domains (NVLSTree) a
    tree moves 2S per domain over the group's NICs at 0.92 efficiency, pipelined with the intra part;
    latency + 2·log2(d)·20.9 µs.
    """
    g, d = _domains(n, g)
    if not P.nvls_ok:
        return np.full((3, *np.broadcast(S, n, g).shape), INF)
    B_nvls = _bw_up(P, g) * P.nvls_efficiency
    intra_t = (g + 1) / g * S / B_nvls
    # NCCL's tuner prices NVLS and NVLSTree by one bus bandwidth (tuning.cc converts busBw to algbw by
    # nRanks / nsteps for both): across domains the NVLS part keeps the single domain's bus bandwidth,
    # so its time grows as 2(n-1)/n over the domain's 2(g-1)/g (1 for n = g)
    intra_t = intra_t * np.where(n > g, ((n - 1) / n) / np.maximum((g - 1) / g, 1e-9), 1.0)
    # NCCL 2.28 tuning.cc "Handle 2 node case of NVLSTree": with two domains each sends its S once
    # (interBw x2); from three on a tree node moves 2S per direction
    inter_t = np.where(d > 2, 2.0, 1.0) * S / (_bw_out_domain(P, g) * P.tree_bw_factor)
    W_s = np.where(d > 1, np.maximum(intra_t, inter_t), intra_t)
    lat_s = np.where(
        d > 1,
        (P.base["nvlstree"][2] + P.hw_intra["nvlstree"][2]) + 2 * np.log2(d) * P.hw_net["nvlstree"][2],
        (P.base["nvls"][2] + P.hw_intra["nvls"][2]),
    )
    lat = np.stack(np.broadcast_arrays(lat_s, lat_s, lat_s))
    W = np.stack(np.broadcast_arrays(W_s, W_s, W_s))
    return _finish(P, lat, W, _protocol_mask(P, d, simple_only=True), d, P.hw_net["nvlstree"])


def nvls_ag_rs(P: CollectiveParams, S, n, g):
    """NVLink SHARP all-gather / reduce-scatter inside one NVLink domain (NCCL >= 2.19). Simple only.

    Bytes: all-gather stores each rank's shard once to the NVSwitch multicast address and every device
    receives the gathered S; reduce-scatter has the switch read (ld_reduce) every device's S once and
    return each its reduced S/g. Either way one direction of each device link carries S, so
    W = S / (B_up·nvls_efficiency), the same link efficiency as the NVLS all-reduce. This is NCCL
    2.28 src/graph/tuning.cc (tuning/nvls.cc) for AG/RS: per-channel bw = bwIntra·nvlsEfficiency·
    (nCh−1)/nCh·(ppn−1)/ppn and busBw -> algBw by nRanks/nsteps = n/(n−1), i.e. algBw =
    nCh·bwIntra·nvlsEfficiency·(nCh−1)/nCh (the (nCh−1)/nCh sync-channel factor is not carried, as
    in :func:`nvls`). Latency: the NVLS NVLink latency (base + hwLat NVLS, 25 µs), as the all-reduce.
    Across domains NCCL runs NVLS AG/RS only through a CollNet plugin that has iallgather /
    ireducescatter (it disables NVLS for nNodes > 1 without CollNet), so d > 1 is infeasible here.
    """
    g, d = _domains(n, g)
    if not P.nvls_ok:
        return np.full((3, *np.broadcast(S, n, g).shape), INF)
    W_s = np.where(d > 1, INF, S / (_bw_up(P, g) * P.nvls_efficiency))
    lat_s = np.broadcast_to(P.base["nvls"][2] + P.hw_intra["nvls"][2], np.shape(W_s))
    lat = np.stack(np.broadcast_arrays(lat_s, lat_s, lat_s))
    W = np.stack(np.broadcast_arrays(W_s, W_s, W_s))
    return _finish(P, lat, W, _protocol_mask(P, d, simple_only=True) & (d <= 1), d)


def collnet(P: CollectiveParams, S, n, g):
    """IB SHARP (CollNetDirect) all-reduce: reduce-scatter/all-gather inside the domain, every domain
    sends and receives S once to the switch tree. Latency (tuning.cc): base + 2·(min(1,g−1)·intraLat +
    (g−1)·0.4 µs) + interLat (31 µs). Simple only."""
    g, d = _domains(n, g)
    intra_t = 2 * (g - 1) / g * S / _bw_up(P, g)
    inter_t = S / _bw_out_domain(P, g)
    W_s = np.maximum(intra_t, np.where(d > 1, inter_t, 0.0))
    lat_s = (
        P.base["collnet"][2]
        + 2 * (np.minimum(1, g - 1) * P.hw_intra["collnet"][2] + (g - 1) * P.collnet_per_local_rank_s)
        + np.where(d > 1, P.hw_net["collnet"][2], 0.0)
    )
    lat = np.stack(np.broadcast_arrays(lat_s, lat_s, lat_s))
    W = np.stack(np.broadcast_arrays(W_s, W_s, W_s))
    return _finish(P, lat, W, _protocol_mask(P, d, simple_only=True), d, P.hw_net["collnet"])


def pat(P: CollectiveParams, S, n, g):
    """NCCL PAT all-gather / reduce-scatter (one rank per node). Latency base + log2(d)·interLat/3.5 +
    n·2.8 µs; bandwidth 0.75 of the NIC (tuning.cc). Simple only."""
    g, d = _domains(n, g)
    lat_s = P.base["pat"][2] + np.log2(d) * P.hw_net["pat"][2] / P.pat_inter_divisor + n * P.pat_per_rank_s
    W_s = (n - 1) / n * S / (_bus_bw(P, g, d) * P.pat_bw_factor)
    lat = np.stack(np.broadcast_arrays(lat_s, lat_s, lat_s))
    W = np.stack(np.broadcast_arrays(W_s, W_s, W_s))
    return _finish(P, lat, W, _protocol_mask(P, d, simple_only=True), d, P.hw_net["pat"])


def hierarchical(P: CollectiveParams, S, n, g):
    """2-D all-reduce: reduce-scatter inside the domain (g ranks, S), all-reduce of S/g across the d
    domains on each rank's own NIC share (g parallel rings), all-gather inside the domain
    (MODELLING.md §7; Jia et al. 2018 "hierarchical all-reduce"). Each stage takes its best protocol."""
    g, d = _domains(n, g)
    rs = np.where(g > 1, ring(P, "rs", S, g, g).min(axis=0), 0.0)
    ag = rs
    inter = ring(P, "ar", S / g, d, np.ones_like(d)).min(axis=0)
    t = rs + ag + np.where(d > 1, inter, 0.0)
    inf = np.full_like(t, INF)
    return np.stack([inf, inf, t])


# --------------------------------------------------------------------------------------- all-to-all
def _p2p_mask(P: CollectiveParams, peer_bytes, d):
    """Protocols of NCCL send/recv (all-to-all, p2p): LL while one peer's message is at most
    NCCL_P2P_LL_THRESHOLD (16 KiB), else Simple; p2p never runs LL128 (enqueue.cc addP2pToPlan)."""
    ll = np.asarray(peer_bytes) <= P.p2p_ll_threshold_bytes
    simple = np.ones_like(ll, dtype=bool)
    return np.stack(np.broadcast_arrays(ll, np.zeros_like(ll), simple)) & np.ones_like(d, dtype=bool)



def _a2a_lat(P, n, g, d, peers_intra, peers_inter):
    """Grouped send/recv latency: one step (network step once the group spans domains) plus a per-peer
    issue cost, ``a2a_per_peer_us`` per NVLink peer (assumed) and NCCL's network overhead per network
    peer (the proxy posts every network send: tuning.cc getNetOverhead, 1 µs Intel host, x3 Simple)."""
    out = []
    for p in range(3):
        step = np.where(d > 1, P.hw_net["ring"][p], P.hw_intra["ring"][p])
        ov = P.net_overhead_s * (P.net_overhead_simple_mult if p == SIMPLE else 1.0)
        out.append(P.base["ring"][p] + step + peers_intra * P.a2a_per_peer_s + peers_inter * ov)
    return np.stack(np.broadcast_arrays(*out))


def alltoall_direct(P: CollectiveParams, S, n, g):
    """All-to-all as concurrent send/recv to every peer: (g−1)/n·S over the scale-up link and (n−g)/n·S
    over the rank's NIC share; the slower tier bounds the time (MODELLING.md §7)."""
    g, d = _domains(n, g)
    intra = (g - 1) / n * S
    inter = (n - g) / n * S
    lat = _a2a_lat(P, n, g, d, g - 1, n - g)
    W = np.stack(
        [np.maximum(intra / (_bw_up(P, g) * P.bw_factor[p]), inter / (_bw_nic_rank(P) * P.bw_factor[p])) for p in range(3)]
    )
    return _finish(P, lat, np.broadcast_to(W, lat.shape), _p2p_mask(P, S / n, d), d, P.hw_net["ring"])


def alltoall_pxn(P: CollectiveParams, S, n, g):
    """PXN all-to-all (NCCL 2.12): inter-domain data first hops over NVLink to the GPU on the
    destination's rail, whose NIC sends it; messages to one remote domain are aggregated
    (d−1 network peers instead of n−g), at the cost of carrying inter bytes over NVLink as well."""
    g, d = _domains(n, g)
    intra = (g - 1) / n * S
    inter = (n - g) / n * S
    lat = _a2a_lat(P, n, g, d, g - 1, d - 1)
    W = np.stack(
        [
            np.maximum((intra + inter) / (_bw_up(P, g) * P.bw_factor[p]), inter / (_bw_nic_rank(P) * P.bw_factor[p]))
            for p in range(3)
        ]
    )
    mask = _p2p_mask(P, S / n, d) & (d > 1)
    return _finish(P, lat, np.broadcast_to(W, lat.shape), mask, d, P.hw_net["ring"])


def alltoall_pairwise(P: CollectiveParams, S, n, g):
    """Pairwise-exchange all-to-all: n−1 sequential rounds of S/n each (Thakur et al. 2005)."""
    g, d = _domains(n, g)
    lat = np.stack(
        np.broadcast_arrays(
            *[P.base["ring"][p] + (g - 1) * P.hw_intra["ring"][p] + (n - g) * P.hw_net["ring"][p] for p in range(3)]
        )
    )
    W = np.stack(
        [
            (g - 1) / n * S / (_bw_up(P, g) * P.bw_factor[p]) + (n - g) / n * S / (_bw_nic_rank(P) * P.bw_factor[p])
            for p in range(3)
        ]
    )
    return _finish(P, lat, np.broadcast_to(W, lat.shape), _p2p_mask(P, S / n, d), d, P.hw_net["ring"])


# --------------------------------------------------------------------------------------- point to point
def sendrecv(P: CollectiveParams, S, n, g):
    """Send/recv of S bytes between neighbours (nccl-tests sendrecv: rank i -> i+1). Over NVLink when
    the whole group sits in one domain, else at least one pair crosses a NIC."""
    g, d = _domains(n, g)
    lat = np.stack(
        np.broadcast_arrays(
            *[P.base["ring"][p] + np.where(d > 1, P.hw_net["ring"][p], P.hw_intra["ring"][p]) for p in range(3)]
        )
    )
    up = _bw_up(P, 2.0)  # one neighbour: on a full mesh a single link
    B = np.where(d > 1, np.minimum(_bw_nic_rank(P), up), up)
    W = np.stack(np.broadcast_arrays(*[S / (B * P.bw_factor[p]) for p in range(3)]))
    return _finish(P, lat, W, _p2p_mask(P, S, d), d, P.hw_net["ring"])

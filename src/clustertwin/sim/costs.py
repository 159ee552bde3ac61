"""Per-stage, per-micro-batch costs of a training step (``StageCosts``), vectorised over plans.

Everything here is a pure function of (model, hardware, plan degrees). Plan degrees may be numpy arrays
of any broadcastable shape (the planner evaluates ~1e5 plans at once); all branches on values are
``np.where``/``np.maximum``. The analytical composer (``sim.analytical``) turns these costs into a step
time in closed form; an event-driven engine can schedule the same granular items.

Units: seconds, bytes, FLOPs. Formulas and sources: docs/modelling.md and MODELLING.md.

Compute model (MODELLING.md §6). Every GEMM of a layer is timed from its own (M, N, K) after the TP split:
    t = max(2MNK / (peak_dtype * eta), bytes / (HBM * eta_hbm)) + t_kernel
    eta = MAMF_fraction(dtype) * mamf_scale * eta_tile * eta_wave * K / (K + k0)
with tile quantisation eta_tile = MN / (ceil(M/tm) tm ceil(N/tn) tn) and wave quantisation
eta_wave = tiles / (ceil(tiles / SMs) SMs) (NVIDIA GEMM performance guide). Fused attention runs at
``attention_efficiency`` of the BF16 peak with a short-sequence roll-off s/(s + s_half); the backward does
2.5x the forward FLOPs (FlashAttention recomputes QK^T, MODELLING.md §1.4). Element-wise kernels (norms,
residual/dropout, activation, RoPE, FP8 casts, softmax when unfused, MoE permutation, cross-entropy,
optimizer) are bytes / (HBM * hbm_efficiency).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np
import yaml

from ..errors import InputError
from ..hardware import ScaleOutTech, SystemSpec
from ..placement import ranks_per_domain
from ..workload.model import ModelSpec

# Collective operation codes (one vocabulary with clustertwin.collectives)
ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL, SEND_RECV = (
    "all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv")

FP8_DTYPES = ("fp8", "mxfp8")
FP4_DTYPES = ("nvfp4", "fp4")


# ---------------------------------------------------------------------------------------------------
# Hardware view used by the cost functions
# ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class ChipEfficiency:
    """Per-chip efficiency constants (workload/data/efficiency.yaml; catalog ``calibration.step_efficiency``)."""

    gemm_tile_m: int
    gemm_tile_n: int
    gemm_k_overhead: float
    gemm_mamf_scale: float
    kernel_overhead_s: float
    hbm_efficiency: float
    attention_efficiency: float
    attention_seq_half: float
    scaleup_efficiency: float
    overlap_slowdown: float
    runtime_overhead_bytes: float
    memory_reserve_fraction: float  # device memory kept free against allocator fragmentation (assumption)
    step_overhead_s: float
    num_sms: int
    mamf_fraction: dict[str, float]
    assumptions: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class Hardware:
    """Everything the cost model needs about the machine, in SI units."""

    system: SystemSpec
    scaleout: ScaleOutTech
    eff: ChipEfficiency
    dtype: str
    peak: float  # dense FLOP/s of the GEMM dtype
    peak_bf16: float
    mamf: float  # MAMF fraction of the GEMM dtype
    hbm_bw: float
    hbm_bytes: float  # what a plan may fill: the driver-reported capacity less the fragmentation reserve
    domain: int  # devices per scale-up domain
    up_bw: float  # achieved ring bus bandwidth per device inside a domain (bytes/s)
    up_lat: float
    nic_bw: float  # achieved scale-out bandwidth per device (bytes/s)
    net_lat: float
    catalog: Any = None
    network: Any = None  # None: analytical collectives; a FlowNetwork adds scale-out contention (--network flow)


@lru_cache(maxsize=1)
def _efficiency_table() -> dict[str, Any]:
    text = (resources.files("clustertwin.workload") / "data" / "efficiency.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def chip_efficiency(acc_id: str, acc_num_sms: int | None, acc_mamf: dict[str, float],
                    overlay: dict[str, Any] | None = None) -> ChipEfficiency:
    table = _efficiency_table()
    cfg = dict(table["defaults"])
    chip = dict(table.get("chips", {}).get(acc_id, {}))
    cfg.update(chip)
    if overlay:
        cfg.update(overlay)
    mamf = dict(cfg.get("mamf_fraction") or {})
    mamf.update({k: float(v) for k, v in acc_mamf.items()})  # catalog measurement wins over fallback
    sms = acc_num_sms or cfg.get("num_sms") or 132
    tile = cfg["gemm_tile"]
    return ChipEfficiency(
        gemm_tile_m=int(tile[0]), gemm_tile_n=int(tile[1]), gemm_k_overhead=float(cfg["gemm_k_overhead"]),
        gemm_mamf_scale=float(cfg["gemm_mamf_scale"]), kernel_overhead_s=float(cfg["kernel_overhead_us"]) * 1e-6,
        hbm_efficiency=float(cfg["hbm_efficiency"]), attention_efficiency=float(cfg["attention_efficiency"]),
        attention_seq_half=float(cfg["attention_seq_half"]), scaleup_efficiency=float(cfg["scaleup_efficiency"]),
        overlap_slowdown=float(cfg["overlap_slowdown"]), runtime_overhead_bytes=float(cfg["runtime_overhead_gb"]) * 1e9,
        memory_reserve_fraction=float(cfg["memory_reserve_fraction"]),
        step_overhead_s=float(cfg["step_overhead_s"]), num_sms=int(sms), mamf_fraction=mamf,
        assumptions=dict(chip.get("assumed", {})),
    )


def mamf_for(mamf: dict[str, float], dtype: str) -> float:
    order = {"mxfp8": ("mxfp8", "fp8"), "fp8": ("fp8",), "nvfp4": ("nvfp4", "fp4", "fp8"),
             "fp16": ("fp16", "bf16"), "bf16": ("bf16", "fp16")}.get(dtype, (dtype,))
    for d in order:
        if d in mamf:
            return float(mamf[d])
    return float(mamf.get("bf16", 0.8))


def make_hardware(system: SystemSpec, scaleout: ScaleOutTech, dtype: str, catalog: Any = None,
                  network: Any = None) -> Hardware:
    acc = system.accelerator
    overlay = None
    if catalog is not None and hasattr(catalog, "calibration_for"):
        overlay = catalog.calibration_for("step_efficiency", acc.id)
    eff = chip_efficiency(acc.id, acc.num_sms, dict(acc.mamf_fraction), overlay)
    peak = acc.peak(dtype)
    if peak <= 0:
        raise InputError(
            f"{acc.name} has no {dtype} tensor-core peak in the catalog",
            hint="pick a precision the chip supports (e.g. bf16 on A100; fp8 needs Hopper or newer)",
        )
    nic_per_dev = system.nics_per_host * min(system.nic_bw, scaleout.port_bw) / system.devices_per_host
    return Hardware(
        system=system, scaleout=scaleout, eff=eff, dtype=dtype, peak=peak, peak_bf16=acc.peak("bf16"),
        mamf=mamf_for(eff.mamf_fraction, dtype) * eff.gemm_mamf_scale, hbm_bw=acc.hbm_bw,
        hbm_bytes=acc.memory_capacity_bytes * (1.0 - eff.memory_reserve_fraction),
        domain=system.devices_per_domain, up_bw=system.scaleup_bw_per_device * eff.scaleup_efficiency,
        up_lat=max(system.scaleup.latency_s, 1e-6), nic_bw=nic_per_dev * scaleout.protocol_efficiency,
        net_lat=scaleout.nic_latency_s + 3 * scaleout.hop_latency_s + 2e-6, catalog=catalog, network=network,
    )


# ---------------------------------------------------------------------------------------------------
# Primitive costs
# ---------------------------------------------------------------------------------------------------
def gemm_time(hw: Hardware, M, N, K, batch=1.0, *, in_bytes: float = 2.0, peak=None, mamf=None):
    """Time of a (batched) GEMM C[M,N] = A[M,K] B[K,N] on one GPU (see module docstring)."""
    e = hw.eff
    M = np.maximum(np.asarray(M, dtype=float), 1.0)
    N = np.maximum(np.asarray(N, dtype=float), 1.0)
    K = np.maximum(np.asarray(K, dtype=float), 1.0)
    tm, tn = float(e.gemm_tile_m), float(e.gemm_tile_n)
    tiles_m, tiles_n = np.ceil(M / tm), np.ceil(N / tn)
    tiles = tiles_m * tiles_n * batch
    waves = np.ceil(tiles / e.num_sms)
    eta_wave = tiles / (waves * e.num_sms)
    eta_tile = (M * N) / (tiles_m * tm * tiles_n * tn)
    eta_k = K / (K + e.gemm_k_overhead)
    eta = (hw.mamf if mamf is None else mamf) * eta_wave * eta_tile * eta_k
    flops = 2.0 * M * N * K * batch
    t_c = flops / ((hw.peak if peak is None else peak) * eta)
    t_m = ((M * K + K * N) * in_bytes + M * N * 2.0) * batch / (hw.hbm_bw * e.hbm_efficiency)
    return np.maximum(t_c, t_m) + e.kernel_overhead_s


def gemm_train_time(hw: Hardware, M, N, K, batch=1.0, *, in_bytes: float = 2.0):
    """(forward, backward) time of a linear layer: fprop (M,N,K), dgrad (M,K,N), wgrad (K,N,M)."""
    f = gemm_time(hw, M, N, K, batch, in_bytes=in_bytes)
    b = gemm_time(hw, M, K, N, batch, in_bytes=in_bytes) + gemm_time(hw, K, N, M, batch, in_bytes=in_bytes)
    return f, b


def mem_time(hw: Hardware, nbytes, kernels=0.0):
    return np.asarray(nbytes, dtype=float) / (hw.hbm_bw * hw.eff.hbm_efficiency) + kernels * hw.eff.kernel_overhead_s


# ---------------------------------------------------------------------------------------------------
# Communication: one call site for every collective the step issues
# ---------------------------------------------------------------------------------------------------
COMM_MODEL = {"name": "auto"}  # "auto": clustertwin.collectives when present, else "builtin"


def builtin_collective_time(op: str, size, n, r, hw: Hardware):
    """Alpha-beta time of one collective (MODELLING.md §7, hardware README §D.1).

    ``n`` ranks, ``r`` of them per scale-up domain. Inside one domain the ring runs at the scale-up bus
    bandwidth; across domains every ring crosses each domain boundary once and the r local ranks drive r
    NICs: busbw = min(up, r * NIC) (checked against the 3-node A100 nccl-tests point). Bytes per rank:
    all-reduce 2(n-1)/n S, all-gather/reduce-scatter (n-1)/n S (S = full size), all-to-all (n-1)/n S
    with the inter-domain share (n-r)/n limited by the NIC, send/recv S.
    """
    S = np.asarray(size, dtype=float)
    n = np.maximum(np.asarray(n, dtype=float), 1.0)
    r = np.clip(np.asarray(r, dtype=float), 1.0, n)
    multi = n > r + 0.5
    busbw = np.where(multi, np.minimum(hw.up_bw, r * hw.nic_bw), hw.up_bw)
    n_dom = np.ceil(n / r)
    if op == ALL_REDUCE:
        factor, steps = 2.0 * (n - 1) / n, 2.0 * (n - 1)
        inter_steps = 2.0 * (n_dom - 1)
    elif op in (ALL_GATHER, REDUCE_SCATTER):
        factor, steps = (n - 1) / n, (n - 1)
        inter_steps = n_dom - 1
    elif op == ALL_TO_ALL:
        t_up = (r - 1) / n * S / hw.up_bw
        t_net = (n - r) / n * S / hw.nic_bw
        t = np.maximum(t_up, t_net) + np.where(multi, hw.net_lat, hw.up_lat) * np.minimum(n - 1, 8.0)
        return np.where(n > 1, t, 0.0)
    elif op == SEND_RECV:
        bw = np.where(multi, hw.nic_bw, hw.up_bw * 1.0)
        return np.where(n > 1, S / bw + np.where(multi, hw.net_lat, hw.up_lat), 0.0)
    else:
        raise ValueError(f"unknown collective {op!r}")
    lat = (steps - inter_steps) * hw.up_lat + inter_steps * hw.net_lat
    t = factor * S / busbw + lat
    return np.where(n > 1, t, 0.0)


def _external_collective_time():
    try:
        mod = importlib.import_module("clustertwin.collectives")
    except ImportError:
        return None
    return getattr(mod, "collective_time", None)


def collective_time(op: str, size, n, r, hw: Hardware):
    """The single call site for collective costs (builtin alpha-beta or clustertwin.collectives), plus
    the scale-out contention penalty of ``hw.network`` (``--network flow``) when one is set."""
    t = _collective_time(op, size, n, r, hw)
    if hw.network is not None:
        t = t + hw.network.penalty(op, size, n, r, hw.system, hw.scaleout)
    return t


def _collective_time(op: str, size, n, r, hw: Hardware):
    choice = COMM_MODEL["name"]
    if choice != "builtin":
        ext = _external_collective_time()
        if ext is not None:
            t = ext(op, size, n, r, hw.system, hw.scaleout, algo="auto", catalog=hw.catalog)
            return np.where(np.asarray(n) > 1, np.asarray(t, dtype=float), 0.0)
        if choice == "collectives":
            raise InputError("clustertwin.collectives.collective_time is not available")
    return builtin_collective_time(op, size, n, r, hw)


# ---------------------------------------------------------------------------------------------------
# StageCosts
# ---------------------------------------------------------------------------------------------------
STAGE_COST_FIELDS = (
    # per layer, per micro-batch, on one GPU (dense layer / MoE layer averaged by their share)
    "layer_fwd_gemm_s", "layer_bwd_gemm_s", "layer_fwd_attn_s", "layer_bwd_attn_s",
    "layer_fwd_mem_s", "layer_bwd_mem_s", "layer_recompute_s",
    "tp_comm_fwd_s", "tp_comm_bwd_s", "tp_comm_recompute_s", "tp_bytes_per_collective",
    "cp_comm_fwd_s", "cp_comm_bwd_s", "cp_overlappable", "ep_comm_fwd_s", "ep_comm_bwd_s", "ep_bytes_per_a2a",
    # per micro-batch, last stage
    "logits_fwd_s", "logits_bwd_s",
    # pipeline
    "pp_p2p_s", "pp_bytes", "layers_per_stage", "num_micro_batches",
    # per step
    "dp_rs_s", "dp_ag_s", "dp_ar_s", "dp_grad_bytes", "dp_bucket_s",
    "edp_rs_s", "edp_ag_s", "edp_ar_s",
    "fsdp_mb_s", "optimizer_s", "step_overhead_s",
)


def stage_costs(model: ModelSpec, hw: Hardware, *, tp, pp, dp, cp, ep, vpp, micro_batch, recompute,
                zero, global_batch, seq_len, sp=True, etp=1, flash: bool = True, overlap: bool = True,
                grad_reduce_bytes: float = 2.0, cp_comm: str = "p2p") -> dict[str, np.ndarray]:
    """Granular costs of one pipeline stage (see STAGE_COST_FIELDS). All inputs broadcast."""
    tp, pp, dp, cp, ep, vpp, mb, rc, zero, gb, sp, etp = np.broadcast_arrays(
        *(np.asarray(x) for x in (tp, pp, dp, cp, ep, vpp, micro_batch, recompute, zero, global_batch, sp, etp)))
    t = tp.astype(float)
    p = pp.astype(float)
    d = dp.astype(float)
    c = cp.astype(float)
    e = ep.astype(float)
    b = mb.astype(float)
    sp = sp.astype(bool) & (t > 1)
    s = float(seq_len)
    h, a, g = float(model.hidden_size), float(model.num_attention_heads), float(model.num_kv_heads)
    dq, dv = float(model.qk_head_dim), float(model.v_dim)
    L, V = float(model.num_layers), float(model.vocab_size)
    dtype = hw.dtype
    fp8 = dtype in FP8_DTYPES or dtype in FP4_DTYPES
    in_bytes = 1.0 if dtype in FP8_DTYPES else (0.5 if dtype in FP4_DTYPES else 2.0)
    tok = b * s / c  # tokens of one micro-batch on this rank (sequence split by CP)
    tok_sp = np.where(sp, tok / t, tok)  # tokens in the SP regions (norms, residuals)
    m = gb.astype(float) / (d * b)
    kern = hw.eff.kernel_overhead_s

    # ---- attention projections ------------------------------------------------------------------
    gf = np.zeros_like(tok)
    gb_ = np.zeros_like(tok)
    if model.is_mla:
        rq, rkv = float(model.q_lora_rank), float(model.kv_lora_rank)
        dn, dr = float(model.qk_nope_head_dim), float(model.qk_rope_head_dim)
        shapes = []
        if rq:
            shapes += [(rq, h, 1.0), (a * (dn + dr), rq, t)]
        else:
            shapes += [(a * (dn + dr), h, t)]
        shapes += [(rkv + dr, h, 1.0), (a * (dn + dv), rkv, t), (h, a * dv, None)]
        for n_out, k_in, split in shapes:
            if split is None:  # row-parallel output projection: K split
                f_, b_ = gemm_train_time(hw, tok, n_out, k_in / t, in_bytes=in_bytes)
            else:
                f_, b_ = gemm_train_time(hw, tok, n_out / split, k_in, in_bytes=in_bytes)
            gf, gb_ = gf + f_, gb_ + b_
        kv_elems = a * (dq + dv) / t  # K and V per token after up-projection (CP exchange)
    else:
        # KV heads are replicated when tp > g (Megatron): each rank computes max(g/t, 1) KV heads
        f_, b_ = gemm_train_time(hw, tok, (a / t + 2.0 * np.maximum(g / t, 1.0)) * dq, h, in_bytes=in_bytes)
        gf, gb_ = gf + f_, gb_ + b_
        f_, b_ = gemm_train_time(hw, tok, h, a * dv / t, in_bytes=in_bytes)
        gf, gb_ = gf + f_, gb_ + b_
        kv_elems = np.maximum(g / t, 1.0) * (dq + dv)
    attn_gemm_f, attn_gemm_b = gf, gb_

    # ---- attention core ---------------------------------------------------------------------------
    heads = a / t
    s_q = s / c
    core_full = 2.0 * b * s_q * s * heads * (dq + dv)  # forward FLOPs, non-causal
    if flash:
        blk = 128.0
        causal_frac = 0.5 * (1.0 + blk / np.maximum(s_q, blk))
        # roll-off with the KV length one kernel call sees: the full sequence, or with a CP ring the local
        # chunk s/c (one call per ring step); the CP all-gather path attends to the gathered K,V
        s_kv = s if cp_comm == "allgather" else s / c
        rate = hw.peak_bf16 * hw.eff.attention_efficiency * s_kv / (s_kv + hw.eff.attention_seq_half)
        attn_f = core_full * causal_frac / rate + 2 * kern
        attn_b = 2.5 * core_full * causal_frac / rate + 4 * kern
        if cp_comm != "allgather":
            # CP ring (TE AttnFuncWithCPAndKVP2P): one attention call per ring step, and the partial
            # results are merged: forward reads each step's BF16 output (+ LSE) and rescales the BF16
            # output accumulator (read + write), backward adds each step's dQ (local) and the travelling
            # dK, dV into their accumulators: 2 + 2 + 2 B per element per step
            steps = c - 1.0
            out_elems = b * s_q * heads * dv
            dq_elems = b * s_q * heads * dq
            kv_e = b * s_q * kv_elems
            attn_f = attn_f + np.where(c > 1, mem_time(hw, c * 6.0 * out_elems, 2.0 * steps + 1.0), 0.0)
            attn_b = attn_b + np.where(c > 1, mem_time(hw, c * 6.0 * (dq_elems + kv_e), 4.0 * steps + 1.0), 0.0)
        attn_f = attn_f * np.ones_like(tok)
        attn_b = attn_b * np.ones_like(tok)
        score_mem_f = np.zeros_like(tok)
        score_mem_b = np.zeros_like(tok)
    else:
        bh = b * heads
        qk_f = gemm_time(hw, s_q, s, dq, bh, in_bytes=2.0, peak=hw.peak_bf16)
        pv_f = gemm_time(hw, s_q, dv, s, bh, in_bytes=2.0, peak=hw.peak_bf16)
        qk_b = gemm_time(hw, s_q, dq, s, bh, peak=hw.peak_bf16) + gemm_time(hw, s, dq, s_q, bh, peak=hw.peak_bf16)
        pv_b = gemm_time(hw, s_q, s, dv, bh, peak=hw.peak_bf16) + gemm_time(hw, s, dv, s_q, bh, peak=hw.peak_bf16)
        attn_f, attn_b = qk_f + pv_f, qk_b + pv_b
        scores = b * heads * s_q * s
        drop = 5.0 if model.dropout else 0.0
        score_mem_f = mem_time(hw, scores * (4.0 + drop), 2)  # scale-mask-softmax r/w, dropout r/w/mask
        score_mem_b = mem_time(hw, scores * (6.0 + drop), 2)

    # ---- MLP / MoE ---------------------------------------------------------------------------------
    mats = 2.0 if model.swiglu else 1.0
    f_dense = float(model.ffn_hidden_size)
    up_f, up_b = gemm_train_time(hw, tok, mats * f_dense / t, h, in_bytes=in_bytes)
    dn_f, dn_b = gemm_train_time(hw, tok, h, f_dense / t, in_bytes=in_bytes)
    dense_mlp_f, dense_mlp_b = up_f + dn_f, up_b + dn_b
    frac_moe = model.num_moe_layers / model.num_layers if model.is_moe else 0.0
    moe_f = moe_b = np.zeros_like(tok)
    moe_mem_f = moe_mem_b = np.zeros_like(tok)
    ep_f = ep_b = ep_bytes = np.zeros_like(tok)
    if model.is_moe:
        E, k, fe = float(model.num_experts), float(model.moe_topk), float(model.moe_ffn_hidden_size)
        etp_f = etp.astype(float)
        tok_rank = tok / t  # tokens entering the MoE layer on this rank (SP / TP-sharded)
        local_experts = E / e
        m_exp = tok_rank * k * e * etp_f / E  # tokens per local expert (balanced routing)
        uf, ub = gemm_train_time(hw, m_exp, mats * fe / etp_f, h, local_experts, in_bytes=in_bytes)
        df, db = gemm_train_time(hw, m_exp, h, fe / etp_f, local_experts, in_bytes=in_bytes)
        moe_f, moe_b = uf + df, ub + db
        if model.num_shared_experts:
            fsh = fe * model.num_shared_experts
            sf, sb = gemm_train_time(hw, tok, mats * fsh / t, h, in_bytes=in_bytes)
            sf2, sb2 = gemm_train_time(hw, tok, h, fsh / t, in_bytes=in_bytes)
            moe_f, moe_b = moe_f + sf + sf2, moe_b + sb + sb2
        rf, rb = gemm_train_time(hw, tok_rank, E, h, in_bytes=2.0)
        moe_f, moe_b = moe_f + rf, moe_b + rb
        # permute + unpermute copies (k copies of h per token), activation of the expert MLP
        perm = 2.0 * 2.0 * 2.0 * k * h * tok_rank
        act = (3.0 if model.swiglu else 2.0) * 2.0 * fe * k * tok_rank
        moe_mem_f = mem_time(hw, perm + act, 8)
        moe_mem_b = mem_time(hw, 2.0 * (perm + act), 12)
        # EP all-to-all: dispatch + combine (forward), mirrored in backward; ep ranks are contiguous
        ep_bytes = tok_rank * k * h * 2.0
        r_ep = ranks_per_domain(e, etp_f, hw.domain)
        a2a = collective_time(ALL_TO_ALL, ep_bytes, e, r_ep, hw)
        ep_f, ep_b = 2.0 * a2a, 2.0 * a2a

    mlp_f = (1 - frac_moe) * dense_mlp_f + frac_moe * moe_f
    mlp_b = (1 - frac_moe) * dense_mlp_b + frac_moe * moe_b
    ep_f, ep_b = frac_moe * ep_f, frac_moe * ep_b

    # ---- element-wise (memory-bound) kernels ------------------------------------------------------
    drop = 1.0 if model.dropout else 0.0
    h_elems = 4.0 + (7.0 if drop else 6.0)  # 2 norms (r/w) + 2 residual (bias-dropout-)adds
    f_eff = (1 - frac_moe) * f_dense
    act_elems = (3.0 if model.swiglu else 2.0) * f_eff / t
    rope = 0.0 if model.dropout else 2.0 * (a + g) * dq
    mem_f_bytes = 2.0 * (h_elems * h * tok_sp + act_elems * tok + rope / t * tok)
    if fp8:  # quantise GEMM inputs (read BF16, write FP8) and keep transposed copies for wgrad
        mem_f_bytes = mem_f_bytes + 3.0 * tok * (2.0 * h + a * dv / t + f_eff / t)
    mem_f = mem_time(hw, mem_f_bytes, 8) + score_mem_f + frac_moe * moe_mem_f
    mem_b = mem_time(hw, 2.0 * mem_f_bytes, 12) + score_mem_b + frac_moe * moe_mem_b

    fwd_gemm = attn_gemm_f + mlp_f
    bwd_gemm = attn_gemm_b + mlp_b
    fwd_total = fwd_gemm + attn_f + mem_f
    recompute_s = np.where(rc == 2, fwd_total, np.where(rc == 1, attn_f + score_mem_f, 0.0))

    # ---- TP collectives (per layer): 2 in fwd, 2 in bwd (+2 for full recompute) ------------------
    tp_bytes = tok * h * 2.0
    r_tp = ranks_per_domain(t, 1.0, hw.domain)
    ar = collective_time(ALL_REDUCE, tp_bytes, t, r_tp, hw)
    ag_rs = collective_time(ALL_GATHER, tp_bytes, t, r_tp, hw) + collective_time(REDUCE_SCATTER, tp_bytes, t, r_tp, hw)
    one = np.where(sp, ag_rs, ar)
    tp_f = 2.0 * one
    tp_b = 2.0 * one
    tp_rc = np.where(rc == 2, tp_f, 0.0)

    # ---- CP: ring exchange of K,V chunks (c-1 hops fwd; K,V + dK,dV bwd), overlapped with the
    # attention core by the composer; or all-gather of K,V (fwd) + reduce-scatter of dK,dV (bwd), exposed
    kv_bytes = b * s_q * kv_elems * 2.0
    r_cp = ranks_per_domain(c, t, hw.domain)
    if cp_comm == "allgather":
        ag_kv = collective_time(ALL_GATHER, kv_bytes * c, c, r_cp, hw)
        rs_kv = collective_time(REDUCE_SCATTER, kv_bytes * c, c, r_cp, hw)
        cp_f = ag_kv
        cp_b = ag_kv + rs_kv
        cp_hidden = np.zeros_like(tok)
    else:
        hop = collective_time(SEND_RECV, kv_bytes, np.where(c > 1, 2.0, 1.0), np.where(r_cp >= c, 2.0, 1.0), hw)
        cp_f = (c - 1) * hop
        cp_b = 2.0 * (c - 1) * hop
        cp_hidden = np.ones_like(tok)

    # ---- logits (last stage): GEMM + cross-entropy in FP32 ----------------------------------------
    lf, lb = gemm_train_time(hw, tok, V / t, h, in_bytes=2.0)
    ce = mem_time(hw, tok * V / t * 16.0, 4)
    logits_f = lf + 0.4 * ce
    logits_b = lb + 0.6 * ce
    if model.mtp_depth:
        logits_f = logits_f * (1 + model.mtp_depth)
        logits_b = logits_b * (1 + model.mtp_depth)

    # ---- pipeline P2P ------------------------------------------------------------------------------
    # each TP rank sends 1/t of the boundary activation (sequence-parallel shard, or Megatron's
    # scatter/gather optimisation without SP: Narayanan et al. SC'21 §4.1) and re-gathers it over NVLink
    pp_bytes = tok * h * 2.0 / t
    r_pp = ranks_per_domain(p, t * c * d, hw.domain)
    pp_p2p = collective_time(SEND_RECV, pp_bytes, np.where(p > 1, 2.0, 1.0), np.where(r_pp >= p, 2.0, 1.0), hw)

    # ---- data parallel: gradient reduce-scatter / all-reduce, parameter all-gather ----------------
    from ..workload.memory import stage_params

    dense_p, expert_p = stage_params(model, t, p, e, etp.astype(float))
    gbytes = float(grad_reduce_bytes)
    n_dp = d * c
    r_dp = ranks_per_domain(n_dp, t, hw.domain)
    dp_rs = collective_time(REDUCE_SCATTER, dense_p * gbytes, n_dp, r_dp, hw)
    dp_ag = collective_time(ALL_GATHER, dense_p * 2.0, n_dp, r_dp, hw)
    dp_ar = collective_time(ALL_REDUCE, dense_p * gbytes, n_dp, r_dp, hw)
    bucket_params = np.minimum(dense_p, np.maximum(40e6, 1e6 * n_dp))
    dp_bucket = collective_time(REDUCE_SCATTER, bucket_params * gbytes, n_dp, r_dp, hw)
    n_edp = np.maximum(1.0, t * d * c / (e * etp))
    r_edp = ranks_per_domain(n_edp, e * etp, hw.domain)
    edp_rs = collective_time(REDUCE_SCATTER, expert_p * gbytes, n_edp, r_edp, hw)
    edp_ag = collective_time(ALL_GATHER, expert_p * 2.0, n_edp, r_edp, hw)
    edp_ar = collective_time(ALL_REDUCE, expert_p * gbytes, n_edp, r_edp, hw)
    # FSDP / ZeRO-3: per micro-batch all-gather of params (fwd and bwd) and reduce-scatter of grads
    fsdp_mb = np.where(zero >= 3, 2.0 * dp_ag + edp_ag * 2.0 + dp_rs + edp_rs, 0.0)

    # ---- optimizer: Adam on the local shard, ~30 B/param read+written (MODELLING.md §6) -----------
    shard = np.where(zero >= 1, dense_p / n_dp + expert_p / n_edp, dense_p + expert_p)
    optimizer = mem_time(hw, 30.0 * shard, 20)

    layers_per_stage = L / p
    out = {
        "layer_fwd_gemm_s": fwd_gemm, "layer_bwd_gemm_s": bwd_gemm,
        "layer_fwd_attn_s": attn_f, "layer_bwd_attn_s": attn_b,
        "layer_fwd_mem_s": mem_f, "layer_bwd_mem_s": mem_b, "layer_recompute_s": recompute_s,
        "tp_comm_fwd_s": tp_f, "tp_comm_bwd_s": tp_b, "tp_comm_recompute_s": tp_rc,
        "tp_bytes_per_collective": tp_bytes,
        "cp_comm_fwd_s": cp_f, "cp_comm_bwd_s": cp_b, "cp_overlappable": cp_hidden, "ep_comm_fwd_s": ep_f, "ep_comm_bwd_s": ep_b,
        "ep_bytes_per_a2a": ep_bytes,
        "logits_fwd_s": logits_f, "logits_bwd_s": logits_b,
        "pp_p2p_s": pp_p2p, "pp_bytes": pp_bytes, "layers_per_stage": layers_per_stage,
        "num_micro_batches": m,
        "dp_rs_s": dp_rs, "dp_ag_s": dp_ag, "dp_ar_s": dp_ar, "dp_grad_bytes": dense_p * gbytes,
        "dp_bucket_s": dp_bucket, "edp_rs_s": edp_rs, "edp_ag_s": edp_ag, "edp_ar_s": edp_ar,
        "fsdp_mb_s": fsdp_mb, "optimizer_s": optimizer,
        "step_overhead_s": np.full_like(tok, hw.eff.step_overhead_s),
    }
    shape = np.broadcast(*out.values()).shape
    return {k: np.broadcast_to(np.asarray(v, dtype=float), shape) for k, v in out.items()}

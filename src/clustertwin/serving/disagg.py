"""Disaggregated prefill/decode serving: separate pools, KV transfer on the fabric crossed, pool ratio.

A request costs ``input / P`` GPU-seconds in the prefill pool (P = saturated input tokens/s per prefill GPU)
and ``output / D`` in the decode pool (D = decode output tokens/s per GPU at the mean KV length
``input + output / 2``). With pools sized in that proportion both saturate together and the deployment
delivers ``output / (input / P + output / D)`` output tokens/s per GPU; a fixed split ``p:d`` GPUs is
limited by the slower pool. The prompt's KV (``input * kv_bytes_per_token``) moves from a prefill GPU
to a decode GPU once: over NVLink / UB when both pools sit in one scale-up domain, else over the RDMA
NICs; the transfer adds to TTFT (layer-wise transfer overlaps all but one layer's share when
``overlap_transfer``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

import numpy as np

from ..errors import InputError
from ..sim.comm import achieved_bandwidths
from .analytical import ServingEstimate, Workload, decode_pass, decode_phase, prefill_phase
from .phases import Deployment, Instance, build_instance, kv_bytes_per_token


@dataclass(frozen=True, slots=True, kw_only=True)
class DisaggEstimate:
    prefill_gpus: int
    decode_gpus: int
    tokens_per_s_per_gpu: float  # output tokens/s per GPU of both pools
    tokens_per_s_total: float
    requests_per_s: float
    prefill_tokens_per_s_per_gpu: float
    decode_tokens_per_s_per_gpu: float
    kv_transfer_s: float
    kv_transfer_fabric: str
    ttft_s: float
    tpot_s: float
    tokens_per_s_per_user: float
    bottleneck: str
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        d = asdict(self)
        d["notes"] = list(self.notes)
        return d


def kv_transfer(inst: Instance, input_len: float, same_domain: bool) -> tuple[float, str]:
    """Seconds to move one prompt's KV cache from a prefill GPU to a decode GPU, and the fabric used."""
    hw = inst.hw
    nbytes = input_len * kv_bytes_per_token(inst.model, inst.kv_elem_bytes)
    up_bw, nic_bw = achieved_bandwidths(hw)  # what the collectives price with (hardware view + NCCL fractions)
    v = hw.view
    if same_domain and hw.domain > 1:
        return nbytes / up_bw + v.scaleup_latency_s, f"{hw.system.scaleup.name} (scale-up)"
    # one prefill rank's KV goes out over its attention-TP group's NICs (end host + leaf-spine-leaf path)
    bw = nic_bw * max(inst.attn_tp, 1)
    return nbytes / bw + v.nic_latency_s + 3 * v.hop_latency_s, f"{hw.scaleout.name} (RDMA)"


def _pools(prefill: Instance, decode: Instance, wl: Workload, tps_per_user: float = 0.0):
    p = prefill_phase(prefill, wl.input_len)
    kv = wl.input_len + wl.output_len / 2.0
    dd = decode_phase(decode, kv)
    if tps_per_user and dd.tokens_per_s_per_user < tps_per_user:
        dd = decode_phase(decode, kv, decode_batch_at_speed(decode, kv, tps_per_user))
    return p, dd.tokens_per_s_per_gpu, dd.tpot_s


def decode_batch_at_speed(decode: Instance, kv_len: float, tps_per_user: float) -> float:
    """Largest decode batch per attention rank whose per-user speed (1/TPOT) is at least ``tps_per_user``."""
    acc, pp = decode.tokens_per_step, decode.dep.pp
    top = max(min(decode.kv_capacity_tokens / max(kv_len, 1.0), float(decode.max_batch)), 1.0)
    ds = np.geomspace(1.0, top, 64)
    t, _ = decode_pass(decode, ds / pp, kv_len, 0.0, 1e30)
    speed = acc / (pp * np.asarray(t, dtype=float))
    ok = speed >= tps_per_user
    if not ok.any():
        raise InputError(f"no decode batch reaches {tps_per_user:g} tokens/s per user on this layout "
                         f"(batch 1: {speed[0]:.1f} tokens/s)",
                         hint="lower the per-user speed target or use more GPUs per decode instance")
    return float(ds[ok].max())


def evaluate(prefill: Instance, decode: Instance, wl: Workload, prefill_gpus: int, decode_gpus: int, *,
             same_domain: bool, tps_per_user: float = 0.0) -> DisaggEstimate:
    if prefill_gpus < prefill.gpus or decode_gpus < decode.gpus:
        raise InputError(f"pools of {prefill_gpus}:{decode_gpus} GPUs are smaller than one instance "
                         f"({prefill.gpus} prefill / {decode.gpus} decode GPUs)",
                         hint="give each pool at least one instance's GPUs, e.g. --disaggregate 8:16")
    p, d_rate, tpot = _pools(prefill, decode, wl, tps_per_user)
    n_p = prefill_gpus // prefill.gpus * prefill.gpus
    n_d = decode_gpus // decode.gpus * decode.gpus
    req_p = n_p * p.tokens_per_s_per_gpu / wl.input_len
    req_d = n_d * d_rate / wl.output_len
    req = min(req_p, req_d)
    t_kv, fabric = kv_transfer(prefill, wl.input_len, same_domain)
    total = req * wl.output_len
    return DisaggEstimate(
        prefill_gpus=n_p, decode_gpus=n_d, tokens_per_s_per_gpu=total / (n_p + n_d), tokens_per_s_total=total,
        requests_per_s=req, prefill_tokens_per_s_per_gpu=p.tokens_per_s_per_gpu, decode_tokens_per_s_per_gpu=d_rate,
        kv_transfer_s=t_kv, kv_transfer_fabric=fabric, ttft_s=p.ttft_s + t_kv, tpot_s=tpot,
        tokens_per_s_per_user=1.0 / tpot if tpot else 0.0, bottleneck="prefill pool" if req_p < req_d else "decode pool",
        notes=p.notes)


def best_ratio(prefill: Instance, decode: Instance, wl: Workload, total_gpus: int, *, same_domain: bool,
               tps_per_user: float = 0.0) -> DisaggEstimate:
    """Pool-size search: every split of ``total_gpus`` into whole prefill and decode instances."""
    best = None
    for k in range(1, total_gpus // prefill.gpus + 1):
        n_p = k * prefill.gpus
        n_d = (total_gpus - n_p) // decode.gpus * decode.gpus
        if n_d < decode.gpus:
            break
        e = evaluate(prefill, decode, wl, n_p, n_d, same_domain=same_domain, tps_per_user=tps_per_user)
        if best is None or e.tokens_per_s_total > best.tokens_per_s_total:
            best = e
    if best is None:
        raise InputError(f"{total_gpus} GPUs cannot hold one prefill ({prefill.gpus}) and one decode ({decode.gpus}) instance",
                         hint="use more GPUs or smaller instances")
    return best


def balanced_pd(model, system, scaleout, dep: Deployment, wl: Workload, engine, *, catalog=None,
                tps_per_user: float = 0.0, prefill_dep: Deployment | None = None) -> ServingEstimate:
    """Output tokens/s per GPU of a P/D deployment with ideally proportioned pools (fluid limit)."""
    pre = build_instance(model, system, scaleout, prefill_dep or replace(dep, spec_tokens=0), engine, catalog=catalog)
    dec = build_instance(model, system, scaleout, dep, engine, catalog=catalog)
    p, d_rate, tpot = _pools(pre, dec, wl, tps_per_user)
    gpu_s = wl.input_len / p.tokens_per_s_per_gpu + wl.output_len / d_rate
    per_gpu = wl.output_len / gpu_s
    share_p = wl.input_len / p.tokens_per_s_per_gpu / gpu_s
    t_kv, fabric = kv_transfer(pre, wl.input_len, system.devices_per_domain > 8)
    return ServingEstimate(
        scenario="disaggregated", tokens_per_s_per_gpu=per_gpu, tokens_per_s_instance=per_gpu * dec.gpus,
        batch_per_rank=0.0, pass_time_s=0.0, tpot_s=tpot, ttft_s=p.ttft_s + t_kv,
        tokens_per_s_per_user=1.0 / tpot if tpot else 0.0, kv_limited=False, budget_limited=False,
        gpus_per_instance=dec.gpus,
        breakdown={"prefill_tokens_per_s_per_gpu": p.tokens_per_s_per_gpu, "decode_tokens_per_s_per_gpu": d_rate,
                   "prefill_gpu_share": share_p, "kv_transfer_s": t_kv},
        notes=(f"balanced pools: {share_p:.0%} of GPUs prefill, {1 - share_p:.0%} decode; KV over {fabric}",
               f"ideal pool ratio {math.ceil(share_p * 100)}:{100 - math.ceil(share_p * 100)}"))

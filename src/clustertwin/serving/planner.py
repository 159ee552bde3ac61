"""Serving planner: layouts, batch limits and P/D splits for a model on a cluster under TTFT/TPOT SLOs.

Search space (numpy over batch sizes, one vectorised closed-form call per layout):
* colocated instances: TP in powers of two inside one scale-up domain; MoE: EP in powers of two (and the
  whole cluster) with and without DP-attention, TP x EP inside the instance; every instance that fits,
  replicated over the GPUs; the in-flight limit per attention rank on a geometric grid up to what the
  KV cache holds;
* disaggregated: every prefill layout x decode layout, pools in the throughput-balancing ratio rounded to
  whole instances of the cluster (``disagg.best_ratio`` semantics), decode batch on the same grid.

Each candidate gives a (tokens/s per user = 1/TPOT, output tokens/s per GPU) point and a TTFT estimate;
the Pareto front over all of them is the throughput-vs-interactivity curve. Under the SLOs the best
candidate is the highest throughput per GPU with TPOT <= bound and TTFT <= bound (closed form); the top
candidates are then simulated under Poisson load (``simulate.search_qps``) for the goodput: the output
tokens/s that meet p99 TTFT and TPOT. Cost and energy come from the bill of materials (``cluster.bom``) and
the reliability defaults (amortisation, energy price, PUE): USD per million output tokens, tokens per joule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..errors import InputError
from ..planner.pareto import pareto_mask
from .analytical import Workload, decode_pass, prefill_phase, ttft_estimate
from .phases import Deployment, Instance, build_instance

MAX_CANDIDATES = 20000


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanRequest:
    gpus: int
    input_len: float
    output_len: float
    ttft_slo_s: float = 2.0
    tpot_slo_s: float = 0.08
    weights_dtype: str = "fp8"
    kv_dtype: str = "fp8"
    disaggregated: bool = True  # also search P/D pools
    simulate_top: int = 3  # candidates verified by simulation (goodput)
    requests: int = 600
    seed: int = 0


def _pow2_upto(n: int) -> list[int]:
    out, k = [], 1
    while k <= n:
        out.append(k)
        k *= 2
    return out


def layouts(model, system, gpus: int) -> list[Deployment]:
    dom = system.devices_per_domain
    out = []
    if not model.is_moe:
        for tp in _pow2_upto(min(dom, gpus, model.num_attention_heads)):
            out.append(Deployment(tp=tp))
        return out
    eps = sorted(set(_pow2_upto(min(gpus, model.num_experts))) | ({gpus} if gpus <= 2 * model.num_experts else set()))
    for ep in eps:
        for tp in _pow2_upto(min(ep, dom)):
            if ep % tp:
                continue
            if tp == ep:
                out.append(Deployment(tp=tp, ep=ep))  # TP attention, EP inside the TP group
            out.append(Deployment(tp=ep, ep=ep, dp_attention=True, attn_tp=tp))  # DP-attention groups of tp
    return out


@dataclass(frozen=True, slots=True)
class Candidate:
    mode: str  # colocated | disaggregated
    layout: str
    prefill_layout: str
    batch_per_rank: float
    tokens_per_s_per_gpu: float
    tokens_per_s_per_user: float
    tpot_s: float
    ttft_s: float
    gpus_used: int
    prefill_gpus: int
    decode_gpus: int
    instance_gpus: int

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}


def _label(inst: Instance) -> str:
    d = inst.dep
    s = f"tp{inst.attn_tp}"
    if inst.model.is_moe:
        s += f"-ep{inst.ep}"
    if inst.attn_dp > 1:
        s += f"-dpattn{inst.attn_dp}"
    if d.pp > 1:
        s += f"-pp{d.pp}"
    return s


def _curve(inst: Instance, wl: Workload, batch_grid: np.ndarray, kv_len: float, input_len: float,
           output_len: float):
    """(batch, tokens/s per GPU, TPOT) along the batch grid, limited by KV capacity and the token budget."""
    acc, pp = inst.tokens_per_step, inst.dep.pp
    b_kv = inst.kv_capacity_tokens / max(kv_len, 1.0)
    b = batch_grid[batch_grid <= max(b_kv, 1.0)]
    if b.size == 0:
        return None
    d = b / pp
    t, _ = decode_pass(inst, d, kv_len, input_len, output_len)
    t = np.asarray(t, dtype=float)
    per_gpu = d * acc / (t * inst.attn_tp * pp)
    tpot = pp * t / acc
    return b, per_gpu, tpot


def plan(model, system, scaleout, engine, req: PlanRequest, *, catalog=None) -> dict[str, Any]:
    if req.gpus <= 0:
        raise InputError(f"--gpus must be positive, got {req.gpus}", hint="pass the GPUs to serve with")
    wl = Workload(input_len=req.input_len, output_len=req.output_len, scenario="server",
                  ttft_slo_s=req.ttft_slo_s, tpot_slo_s=req.tpot_slo_s)
    grid = np.unique(np.round(np.geomspace(1, 8192, 40)))
    kv_len = req.input_len + req.output_len / 2.0
    insts: list[Instance] = []
    skipped = 0
    for dep in layouts(model, system, req.gpus):
        dep = replace(dep, weights_dtype=req.weights_dtype, kv_dtype=req.kv_dtype, max_batch=8192)
        if dep.gpus > req.gpus or req.gpus % dep.gpus and dep.gpus <= system.devices_per_domain:
            continue
        try:
            insts.append(build_instance(model, system, scaleout, dep, engine, catalog=catalog))
        except InputError:
            skipped += 1
    if not insts:
        raise InputError(f"no layout of {model.id} fits {req.gpus} x {system.accelerator.name}",
                         hint="use more GPUs, lower-precision weights (--weights-dtype fp8/nvfp4) or a larger-memory GPU")
    cands: list[Candidate] = []
    curves = {}
    for inst in insts:
        c = _curve(inst, wl, grid, kv_len, req.input_len, req.output_len)
        if c is None:
            continue
        curves[id(inst)] = c
        b, per_gpu, tpot = c
        reps = req.gpus // inst.gpus
        used = reps * inst.gpus
        ttft = np.asarray(ttft_estimate(inst, b / inst.dep.pp, kv_len, req.input_len), dtype=float)
        for i in range(b.size):
            cands.append(Candidate("colocated", _label(inst), "", float(b[i]), float(per_gpu[i]) * used / req.gpus,
                                   float(1.0 / tpot[i]), float(tpot[i]), float(ttft[i]), used, 0, 0, inst.gpus))
    if req.disaggregated and req.gpus >= 2:
        pre_rates = []
        for inst in insts:
            try:
                p = prefill_phase(inst, req.input_len)
            except InputError:
                continue
            pre_rates.append((inst, p.tokens_per_s_per_gpu, p.ttft_s))
        for dec in insts:
            if id(dec) not in curves:
                continue
            b, d_gpu, tpot = curves[id(dec)]
            # decode-only pool: no prefill share in the pass
            t, _ = decode_pass(dec, b / dec.dep.pp, kv_len, 0.0, 1e30)
            t = np.asarray(t, dtype=float)
            d_gpu = b / dec.dep.pp * dec.tokens_per_step / (t * dec.attn_tp * dec.dep.pp)
            tpot = dec.dep.pp * t / dec.tokens_per_step
            for pre, p_gpu, p_ttft in pre_rates:
                if pre.gpus + dec.gpus > req.gpus:
                    continue
                # balanced share of prefill GPUs, rounded to whole instances of each pool
                share = (req.input_len / p_gpu) / (req.input_len / p_gpu + req.output_len / d_gpu)
                n_p = np.maximum(pre.gpus, np.round(share * req.gpus / pre.gpus) * pre.gpus)
                n_d = np.floor((req.gpus - n_p) / dec.gpus) * dec.gpus
                ok = n_d >= dec.gpus
                if not ok.any():
                    continue
                req_s = np.minimum(n_p * p_gpu / req.input_len, n_d * d_gpu / req.output_len)
                per_gpu = req_s * req.output_len / req.gpus
                from .disagg import kv_transfer

                same = req.gpus <= system.devices_per_domain
                t_kv, _ = kv_transfer(pre, req.input_len, same)
                for i in np.nonzero(ok)[0]:
                    cands.append(Candidate("disaggregated", _label(dec), _label(pre), float(b[i]), float(per_gpu[i]),
                                           float(1.0 / tpot[i]), float(tpot[i]), float(p_ttft + t_kv),
                                           int(n_p[i] + n_d[i]), int(n_p[i]), int(n_d[i]), dec.gpus))
                if len(cands) > MAX_CANDIDATES:
                    break
    obj = np.array([[c.tokens_per_s_per_gpu, c.tokens_per_s_per_user] for c in cands])
    front_mask = pareto_mask(obj, [True, True])
    front, seen = [], set()
    for i in sorted(np.nonzero(front_mask)[0], key=lambda i: (cands[i].tokens_per_s_per_user, cands[i].ttft_s)):
        key = (round(cands[i].tokens_per_s_per_gpu, 1), round(cands[i].tokens_per_s_per_user, 2))
        if key not in seen:  # ties (same point from another prefill layout): keep the lowest-TTFT one
            seen.add(key)
            front.append(cands[i])
    feasible = [c for c in cands if c.tpot_s <= req.tpot_slo_s and c.ttft_s <= req.ttft_slo_s]
    feasible.sort(key=lambda c: -c.tokens_per_s_per_gpu)
    econ = economics(system, scaleout, req.gpus, catalog)
    out: dict[str, Any] = {
        "model": model.id, "system": system.id, "gpus": req.gpus, "input_len": req.input_len,
        "output_len": req.output_len, "ttft_slo_s": req.ttft_slo_s, "tpot_slo_s": req.tpot_slo_s,
        "engine": engine.id, "weights_dtype": req.weights_dtype, "kv_dtype": req.kv_dtype,
        "candidates": len(cands), "layouts": len(insts), "layouts_not_fitting": skipped,
        "pareto": [_with_econ(c.to_dict(), econ, req.gpus) for c in front],
        "best": None, "plans": [], "economics": econ,
    }
    top = _distinct(feasible, 10)
    out["plans"] = [_with_econ(c.to_dict(), econ, req.gpus) for c in top]
    if top:
        best = top[0]
        out["best"] = _with_econ(best.to_dict(), econ, req.gpus)
        # the best colocated plans are simulated even when disaggregated plans lead the list
        coloc = _distinct([c for c in feasible if c.mode == "colocated"], req.simulate_top)
        out["goodput"] = _goodput(model, system, scaleout, engine, req, wl, coloc, catalog, econ)
    return out


def _distinct(cands: list[Candidate], n: int) -> list[Candidate]:
    seen, out = set(), []
    for c in cands:
        key = (c.mode, c.layout, c.prefill_layout)
        if key in seen:
            continue
        seen.add(key)
        out.append(c)
        if len(out) >= n:
            break
    return out


def _goodput(model, system, scaleout, engine, req, wl, top, catalog, econ) -> list[dict]:
    """Simulated goodput of the top colocated candidates: output tokens/s per GPU meeting p99 SLOs."""
    from .simulate import search_qps

    out = []
    for c in top:
        if c.mode != "colocated":
            out.append({"layout": c.layout, "mode": c.mode, "goodput_tokens_per_s_per_gpu": None,
                        "note": "disaggregated: closed form only (pools saturate together)"})
            continue
        dep = _dep_from_label(c.layout, req)
        inst = build_instance(model, system, scaleout, replace(dep, max_batch=int(c.batch_per_rank)), engine, catalog=catalog)
        s = search_qps(inst, wl, requests=req.requests, seed=req.seed, iters=6)
        ranks = req.gpus // inst.gpus * inst.attn_dp
        g = s.qps_per_rank * wl.output_len * ranks / req.gpus
        out.append({"layout": c.layout, "mode": c.mode, "max_batch_per_rank": int(c.batch_per_rank),
                    "goodput_tokens_per_s_per_gpu": g, "ttft_p99_s": s.sim.ttft_s["p99"], "tpot_p99_s": s.sim.tpot_s["p99"],
                    **_econ_for(g * req.gpus, econ)})
    return out


def _dep_from_label(label: str, req: PlanRequest) -> Deployment:
    parts = dict((p[:2] if not p.startswith("dpattn") else "dp", p) for p in label.split("-"))
    tp = int(parts["tp"][2:])
    ep = int(parts["ep"][2:]) if "ep" in parts else 1
    dp = int(parts["dp"][6:]) if "dp" in parts else 1
    if dp > 1:
        return Deployment(tp=max(ep, tp * dp), ep=ep, dp_attention=True, attn_tp=tp, weights_dtype=req.weights_dtype,
                          kv_dtype=req.kv_dtype)
    return Deployment(tp=tp, ep=ep, weights_dtype=req.weights_dtype, kv_dtype=req.kv_dtype)


def economics(system, scaleout, gpus: int, catalog) -> dict[str, Any]:
    """Capital cost and power of the serving cluster: the reliability power and cost models on the bill of
    materials, so the figures and assumption lines are those of ``power`` and ``compare`` for the same
    cluster (``reliability.assumptions``), scaled to the GPUs used."""
    from ..reliability.bom_adapter import counts_from_bom
    from ..reliability.cost import cost
    from ..reliability.params import load_params
    from ..reliability.power import power

    params = load_params()
    domains = math.ceil(gpus / system.devices_per_domain)
    counts = counts_from_bom(system, domains, scaleout)
    if counts is None:  # no scale-out fabric to count the network from
        from ..errors import InputError

        raise InputError(f"{system.id}: serving economics need a scale-out fabric", hint="pass --fabric")
    pw = power(system, scaleout, counts, params)
    cst = cost(system, scaleout, counts, pw, params)
    frac = gpus / (domains * system.devices_per_domain)
    return {"capex_usd": cst.capex_usd * frac, "it_power_kw": pw.it_w * frac / 1e3,
            "facility_power_kw": pw.facility_w * frac / 1e3, "usd_per_hour": cst.usd_per_hour * frac,
            "notes": list(dict.fromkeys([*pw.assumptions, *cst.assumptions]))}


def _econ_for(tokens_per_s: float, econ: dict) -> dict[str, Any]:
    if not tokens_per_s or not econ.get("usd_per_hour") or not math.isfinite(econ["usd_per_hour"]):
        return {"usd_per_million_tokens": None, "tokens_per_joule": None}
    return {"usd_per_million_tokens": econ["usd_per_hour"] / (tokens_per_s * 3600.0 / 1e6),
            "tokens_per_joule": tokens_per_s / (econ["facility_power_kw"] * 1e3) if econ["facility_power_kw"] else None}


def _with_econ(d: dict, econ: dict, gpus: int) -> dict:
    d.update(_econ_for(d["tokens_per_s_per_gpu"] * gpus, econ))
    return d

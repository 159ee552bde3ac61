"""The serving facade the CLI calls: resolve names, build the instance, run the requested estimate."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import InputError
from ..workload.model import get_model
from .analytical import Workload, offline
from .engines import get_engine
from .phases import Deployment, build_instance


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeRequest:
    model: str
    system: str
    gpus: int = 0  # 0: one instance
    tp: int = 1
    ep: int = 1
    pp: int = 1
    dp_attention: bool = False
    weights_dtype: str = "fp8"
    attn_weights_dtype: str = ""  # attention projections ("": weights_dtype; BF16 for MoE NVFP4)
    kv_dtype: str = "fp8"
    attention_dtype: str = ""  # attention math over an FP8 KV cache ("": the engine preset)
    engine: str = "generic"
    max_batch: int = 0
    max_num_tokens: int = 0
    spec_tokens: int = 0
    acceptance: float = 0.0
    prefix_hit_rate: float = 0.0
    kv_policy: str = "reserve"  # KV admission in the --qps simulation: reserve | on_demand (phases.KV_POLICIES)
    input_len: float = 1024
    output_len: float = 256
    qps: float = 0.0
    offline: bool = True
    requests: int = 2000
    seed: int = 0
    ttft_slo_s: float = 0.0
    tpot_slo_s: float = 0.0
    disaggregate: str = ""  # "P:D" GPUs of the prefill and decode pools
    prefill_tp: int = 0  # prefill-pool layout (0: as the decode pool)
    prefill_ep: int = 0
    scaleout: str = ""


def parse_pd(text: str) -> tuple[int, int]:
    try:
        p, d = (int(x) for x in text.split(":"))
    except ValueError:
        raise InputError(f"--disaggregate {text!r} is not P:D", hint="give GPU counts of the prefill and decode pools, e.g. --disaggregate 8:24") from None
    if p <= 0 or d <= 0:
        raise InputError(f"--disaggregate {text!r}: both pools need GPUs", hint="e.g. --disaggregate 8:24")
    return p, d


def resolve(req: ServeRequest, catalog=None):
    from ..catalog import load_catalog

    catalog = catalog or load_catalog()
    model = get_model(req.model)
    system = catalog.system(req.system)
    scaleout = catalog.fabric(req.scaleout or system.default_scaleout)
    engine = get_engine(req.engine)
    if req.ep < 1:  # checked as given (a dense model runs ep 1, but a bad value is still an error)
        raise InputError(f"--ep must be >= 1, got {req.ep}", hint="pass --ep 1 or more")
    if req.qps > 0 and req.requests < 1:
        raise InputError(f"--requests must be >= 1 with --qps, got {req.requests}", hint="e.g. --requests 2000")
    dep = Deployment(tp=req.tp, ep=req.ep if model.is_moe else 1, pp=req.pp, dp_attention=req.dp_attention,
                     weights_dtype=req.weights_dtype, attn_weights_dtype=req.attn_weights_dtype,
                     kv_dtype=req.kv_dtype, attention_dtype=req.attention_dtype, max_batch=req.max_batch,
                     max_num_tokens=req.max_num_tokens, spec_tokens=req.spec_tokens, acceptance=req.acceptance,
                     prefix_hit_rate=req.prefix_hit_rate, kv_policy=req.kv_policy.replace("-", "_"))
    for name in ("tp", "ep", "pp"):  # before anything divides by the GPUs of one instance
        if getattr(dep, name) < 1:
            raise InputError(f"--{name} must be >= 1, got {getattr(dep, name)}", hint=f"pass --{name} 1 or more")
    for name in ("max_batch", "max_num_tokens", "spec_tokens", "gpus", "prefill_tp", "prefill_ep"):
        if getattr(req, name) < 0:
            raise InputError(f"--{name.replace('_', '-')} must not be negative, got {getattr(req, name)}",
                             hint="pass 0 for the default or a positive number")
    if req.spec_tokens > 8:
        raise InputError(f"--spec-tokens {req.spec_tokens} is more than 8 draft tokens per step",
                         hint="speculative decoding / MTP verifies 1-8 draft tokens per step")
    if req.qps < 0:
        raise InputError(f"--qps must not be negative, got {req.qps}", hint="omit --qps (or pass --offline) for the offline scenario")
    if not 0.0 <= req.acceptance <= 1.0:
        raise InputError(f"acceptance must be in [0, 1], got {req.acceptance}", hint="pass --acceptance 0.7")
    if not 0.0 <= req.prefix_hit_rate < 1.0:
        raise InputError(f"prefix hit rate must be in [0, 1), got {req.prefix_hit_rate}", hint="pass --prefix-hit 0.5")
    return catalog, model, system, scaleout, engine, dep


def dense_ep_notes(req: ServeRequest, model) -> list[str]:
    """A dense model has no experts to place: say so when --ep / --prefill-ep was given above 1."""
    given = [f"--{n.replace('_', '-')} {getattr(req, n)}" for n in ("ep", "prefill_ep") if getattr(req, n) > 1]
    if model.is_moe or not given:
        return []
    return [f"{' and '.join(given)} ignored: {model.id} is dense (no experts); expert parallelism applies to MoE models only"]


def estimate(req: ServeRequest, catalog=None) -> dict[str, Any]:
    """`clustertwin serve estimate`: offline closed form, or the server simulation with --qps."""
    catalog, model, system, scaleout, engine, dep = resolve(req, catalog)
    extra = dense_ep_notes(req, model)
    scenario = "offline" if req.offline or req.qps <= 0 else "server"
    wl = Workload(input_len=req.input_len, output_len=req.output_len, scenario=scenario, qps=req.qps,
                  ttft_slo_s=req.ttft_slo_s, tpot_slo_s=req.tpot_slo_s)
    gpus = req.gpus or dep.gpus
    if gpus % dep.gpus:
        raise InputError(f"--gpus {gpus} is not a multiple of the {dep.gpus} GPUs of one instance",
                         hint="pass a multiple of max(tp, ep) * pp")
    if req.disaggregate:
        from dataclasses import replace as _replace

        from .disagg import evaluate

        p, d = parse_pd(req.disaggregate)
        pdep = _replace(dep, tp=req.prefill_tp or dep.tp, ep=(req.prefill_ep or dep.ep) if model.is_moe else 1,
                        spec_tokens=0)
        pre = build_instance(model, system, scaleout, pdep, engine, catalog=catalog)
        dec = build_instance(model, system, scaleout, dep, engine, catalog=catalog)
        res = evaluate(pre, dec, wl, p, d, same_domain=p + d <= system.devices_per_domain)
        return {"mode": "disaggregated", "model": model.id, "system": system.id, "gpus": p + d,
                "prefill_gpus_per_instance": pre.gpus, "decode_gpus_per_instance": dec.gpus, **res.to_dict(),
                "notes": extra + list(res.to_dict().get("notes", []))}
    inst = build_instance(model, system, scaleout, dep, engine, catalog=catalog)
    replicas = gpus // inst.gpus
    base = offline(inst, wl.input_len, wl.output_len)
    out: dict[str, Any] = {
        "mode": scenario, "model": model.id, "system": system.id, "gpus": gpus, "replicas": replicas,
        "gpus_per_instance": inst.gpus, "attention_tp": inst.attn_tp, "attention_dp": inst.attn_dp, "ep": inst.ep,
        "engine": engine.id, "input_len": wl.input_len, "output_len": wl.output_len,
    }
    if scenario == "offline":
        out.update({
            "tokens_per_s_per_gpu": base.tokens_per_s_per_gpu, "tokens_per_s": base.tokens_per_s_per_gpu * gpus,
            "tokens_per_s_per_user": base.tokens_per_s_per_user, "tpot_s": base.tpot_s, "ttft_s": base.ttft_s,
            "batch_per_rank": base.batch_per_rank, "pass_time_s": base.pass_time_s, "kv_limited": base.kv_limited,
            "memory": base.memory, "breakdown": base.breakdown, "notes": extra + list(base.notes),
        })
        return out
    from .simulate import simulate

    ranks = replicas * inst.attn_dp
    sim = simulate(inst, wl, qps=req.qps / ranks, requests=req.requests, seed=req.seed)
    g_rank = inst.attn_tp * inst.dep.pp
    out.update({
        "qps": req.qps, "requests_simulated": sim.requests, "tokens_per_s": sim.output_tokens_per_s * ranks,
        "tokens_per_s_per_gpu": sim.output_tokens_per_s / g_rank, "ttft_s": sim.ttft_s, "tpot_s": sim.tpot_s,
        "mean_batch_per_rank": sim.mean_batch, "saturation_tokens_per_s_per_gpu": base.tokens_per_s_per_gpu,
        "memory": base.memory, "notes": extra + list(base.notes) + [f"simulated one of {ranks} attention ranks at {req.qps / ranks:.4g} req/s (seed {req.seed})"],
    })
    if wl.ttft_slo_s or wl.tpot_slo_s:
        from .simulate import meets

        out["meets_slo"] = meets(sim, wl)
    return out


def plan(*, model: str, system: str, gpus: int, input_len: float, output_len: float, ttft_slo_s: float,
         tpot_slo_s: float, weights_dtype: str = "fp8", kv_dtype: str = "fp8", engine: str = "generic",
         disaggregated: bool = True, simulate_top: int = 2, catalog=None) -> dict[str, Any]:
    """`clustertwin serve plan`: layouts / batch limits / P/D splits under SLOs (serving/planner.py)."""
    from ..catalog import load_catalog
    from .planner import PlanRequest
    from .planner import plan as _plan

    catalog = catalog or load_catalog()
    if ttft_slo_s <= 0 or tpot_slo_s <= 0:
        raise InputError("SLO bounds must be positive", hint="e.g. --ttft-slo 2s --tpot-slo 80ms")
    if input_len <= 0 or output_len <= 0:
        raise InputError("input and output lengths must be positive", hint="pass --input-len and --output-len > 0")
    m = get_model(model)
    s = catalog.system(system)
    req = PlanRequest(gpus=gpus, input_len=input_len, output_len=output_len, ttft_slo_s=ttft_slo_s,
                      tpot_slo_s=tpot_slo_s, weights_dtype=weights_dtype, kv_dtype=kv_dtype,
                      disaggregated=disaggregated, simulate_top=max(0, simulate_top))
    return _plan(m, s, catalog.fabric(s.default_scaleout), get_engine(engine), req, catalog=catalog)

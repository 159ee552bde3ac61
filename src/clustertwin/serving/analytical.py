"""Closed-form serving estimates: steady-state continuous batching, prefill-only and decode-only phases.

Offline (all requests at t = 0, MLPerf Offline / trtllm-bench max throughput): every attention rank keeps
``d`` sequences decoding; each pass also prefills the prompts of the sequences that replace the finished
ones (``d * acc / output_len`` per pass, chunked into the pass's token budget). ``d`` is the smallest of
the request limit, what the paged KV cache holds at the mean sequence length ``input + output / 2``, and
what the per-pass token budget can sustain (``d (1 + spec) + prefill per pass <= max_num_tokens``).
Throughput per GPU = ``d * acc / (T_pass * attn_tp * pp)``; TPOT = ``pp * T_pass / acc``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from ..errors import InputError
from .phases import RANK_FIELDS, STEP_FIELDS, Instance, busiest_rank_prefill, step_costs

SCENARIOS = ("offline", "server", "interactive", "prefill", "decode")


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    """Request shape and arrival process. Lengths are means (tokens)."""

    input_len: float
    output_len: float
    scenario: str = "offline"
    qps: float = 0.0  # server/interactive arrival rate per instance group (requests/s); 0 = find the max under SLO
    ttft_slo_s: float = 0.0
    tpot_slo_s: float = 0.0
    kv_len: float = 0.0  # decode-only phase: KV length the decode tokens attend to (0: input + output/2)
    output_cv: float = 0.0  # coefficient of variation of output lengths (simulation)
    input_cv: float = 0.0
    input_max: float = 0.0  # longest prompt (simulation clips sampled lengths; 0: no limit)
    output_max: float = 0.0

    def __post_init__(self) -> None:
        if self.scenario not in SCENARIOS:
            raise InputError(f"unknown scenario {self.scenario!r}", hint="scenarios: " + ", ".join(SCENARIOS))
        if self.input_len <= 0 and self.scenario != "decode":
            raise InputError(f"input length must be positive, got {self.input_len}", hint="pass --input-len > 0")
        if self.output_len <= 0 and self.scenario not in ("prefill",):
            raise InputError(f"output length must be positive, got {self.output_len}", hint="pass --output-len > 0")


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingEstimate:
    scenario: str
    tokens_per_s_per_gpu: float  # output tokens/s per GPU (prefill phase: input tokens/s per GPU)
    tokens_per_s_instance: float
    batch_per_rank: float  # sequences decoding per attention rank (per pipeline micro-batch)
    pass_time_s: float
    tpot_s: float
    ttft_s: float
    tokens_per_s_per_user: float
    kv_limited: bool
    budget_limited: bool
    gpus_per_instance: int
    memory: dict = field(default_factory=dict)
    breakdown: dict = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        d = asdict(self)
        d["notes"] = list(self.notes)
        return d


def _pairs_per_prompt(inst: Instance, input_len: float) -> tuple[float, float]:
    """(prompt tokens computed, causal query-key pairs) of one prompt with the prefix-cache hit rate."""
    hit = min(max(inst.dep.prefix_hit_rate, 0.0), 0.99)
    comp = input_len * (1.0 - hit)
    cached = input_len * hit
    return comp, comp * cached + 0.5 * comp * comp


def _breakdown(c: dict) -> dict:
    return {k: float(np.asarray(c[k]).reshape(-1)[0]) for k in STEP_FIELDS}


def _memory(inst: Instance, seqs: float, seq_len: float) -> dict:
    return {
        "weights_gb_per_gpu": inst.weight_bytes_gpu / 1e9,
        "kv_cache_gb_per_gpu": seqs * seq_len * inst.kv_bytes_token_gpu / 1e9,
        "kv_capacity_tokens_per_rank": inst.kv_capacity_tokens,
        "usable_gb_per_gpu": inst.hw.hbm_bytes / 1e9,
    }


def decode_pass(inst: Instance, d, ctx, input_len: float, output_len: float):
    """Time of one steady-state pass with ``d`` decoding sequences (array ok) and its prefill share."""
    acc = inst.tokens_per_step
    spec = inst.dep.spec_tokens
    comp, pairs_p = _pairs_per_prompt(inst, input_len)
    done = d * acc / max(output_len, 1.0)  # sequences finishing (and prompts entering) per pass
    tokens = d * (1 + spec) + done * comp
    c = step_costs(inst, tokens, d * ctx, done * pairs_p, d * (1 + spec) + done)
    t = sum(c[k] for k in STEP_FIELDS)
    if inst.attn_dp > 1 and comp > 0:
        # DP-attention ranks prefill independently: the pass waits for the busiest rank's own work
        dec = d * (1 + spec)
        room = np.maximum(inst.max_num_tokens - dec, 1.0)
        unit = room if inst.dep.chunked_prefill else np.minimum(comp, np.maximum(room, comp))
        pre = busiest_rank_prefill(inst, done * comp, unit, lump=comp)
        cb = step_costs(inst, dec + pre, d * ctx, pairs_p * pre / comp, dec + pre / comp)
        t = t + np.maximum(sum(cb[k] for k in RANK_FIELDS) - sum(c[k] for k in RANK_FIELDS), 0.0)
    if spec:
        # draft model / MTP module: one extra layer + LM head per draft token on the d sequences
        dc = step_costs(inst, d, d * ctx, 0.0, d, queries_per_read=1.0)  # the draft layer: one query per sequence
        core = sum(dc[k] for k in STEP_FIELDS if k not in ("logits_s", "overhead_s"))
        t = t + spec * (core / inst.layers + dc["logits_s"])
    return t, c


def ttft_estimate(inst: Instance, d, ctx: float, input_len: float):
    """Closed-form TTFT of a new prompt joining ``d`` decoding sequences (no queueing): its chunks fill the
    room the decodes leave in each pass's token budget; each such pass carries decode + chunk."""
    spec, pp = inst.dep.spec_tokens, inst.dep.pp
    comp, pairs = _pairs_per_prompt(inst, input_len)
    d = np.asarray(d, dtype=float)
    room = np.maximum(inst.max_num_tokens - d * (1 + spec), 1.0)
    chunk = np.minimum(room, comp)
    passes = np.ceil(comp / chunk)
    c = step_costs(inst, d * (1 + spec) + chunk, d * ctx, pairs / passes, d * (1 + spec) + 1)
    t = sum(c[k] for k in STEP_FIELDS)
    return passes * pp * t


def offline(inst: Instance, input_len: float, output_len: float) -> ServingEstimate:
    acc = inst.tokens_per_step
    spec = inst.dep.spec_tokens
    pp = inst.dep.pp
    seq_len = input_len + output_len / 2.0
    b_kv = inst.kv_capacity_tokens / max(seq_len, 1.0)
    comp, _ = _pairs_per_prompt(inst, input_len)
    b_budget = inst.max_num_tokens / ((1 + spec) + comp * acc / max(output_len, 1.0))
    b_req = float(inst.max_batch)
    b = min(b_req, b_kv, b_budget * pp)
    if b < 1.0:
        raise InputError(
            f"not even one {input_len:.0f}+{output_len:.0f}-token sequence fits the KV cache of one attention rank "
            f"({inst.kv_capacity_tokens:.0f} tokens)",
            hint="use more GPUs per instance, an FP8 KV cache, or shorter sequences")
    d = b / pp
    t, c = decode_pass(inst, d, seq_len, input_len, output_len)
    t = float(np.asarray(t))
    per_rank = d * acc / t
    g_rank = inst.attn_tp * pp
    tpot = pp * t / acc
    ttft = float(ttft_estimate(inst, d, seq_len, input_len))
    notes = list(inst.notes)
    limit = "request limit" if b == b_req else ("KV-cache capacity" if b == b_kv else "token budget")
    notes.append(f"batch per attention rank {b:.0f} set by the {limit}")
    return ServingEstimate(
        scenario="offline", tokens_per_s_per_gpu=per_rank / g_rank, tokens_per_s_instance=per_rank * inst.attn_dp,
        batch_per_rank=b, pass_time_s=t, tpot_s=tpot, ttft_s=ttft, tokens_per_s_per_user=1.0 / tpot,
        kv_limited=b == b_kv, budget_limited=b == b_budget * pp, gpus_per_instance=inst.gpus,
        memory=_memory(inst, b, seq_len), breakdown=_breakdown(c), notes=tuple(notes))


def prefill_phase(inst: Instance, input_len: float, batch_tokens: float = 0.0) -> ServingEstimate:
    """Saturated prefill (PD-disaggregated prefill pool): input tokens/s per GPU (cache hits included)."""
    budget = batch_tokens or inst.max_num_tokens
    comp, pairs_p = _pairs_per_prompt(inst, input_len)
    prompts = max(1.0, math.floor(budget / max(comp, 1.0)))
    tokens = prompts * comp
    c = step_costs(inst, tokens, 0.0, prompts * pairs_p, prompts)
    t = float(sum(np.asarray(c[k]) for k in STEP_FIELDS))
    pp = inst.dep.pp
    per_rank = prompts * input_len / t
    return ServingEstimate(
        scenario="prefill", tokens_per_s_per_gpu=per_rank / (inst.attn_tp * pp),
        tokens_per_s_instance=per_rank * inst.attn_dp, batch_per_rank=prompts, pass_time_s=t, tpot_s=0.0,
        ttft_s=pp * t, tokens_per_s_per_user=0.0, kv_limited=False, budget_limited=True,
        gpus_per_instance=inst.gpus, memory=_memory(inst, prompts, input_len), breakdown=_breakdown(c),
        notes=inst.notes + (f"{prompts:.0f} prompt(s) of {input_len:.0f} tokens per pass per attention rank",))


def decode_phase(inst: Instance, kv_len: float, batch: float = 0.0) -> ServingEstimate:
    """Saturated decode (PD-disaggregated decode pool): output tokens/s per GPU at KV length ``kv_len``."""
    acc = inst.tokens_per_step
    pp = inst.dep.pp
    b_kv = inst.kv_capacity_tokens / max(kv_len, 1.0)
    b_req = float(batch or inst.max_batch)
    b = min(b_req, b_kv)
    if b < 1.0:
        raise InputError(f"not even one {kv_len:.0f}-token sequence fits the KV cache of one attention rank",
                         hint="use more GPUs per instance or an FP8 KV cache")
    d = b / pp
    t, c = decode_pass(inst, d, kv_len, 0.0, 1e30)
    t = float(np.asarray(t))
    per_rank = d * acc / t
    tpot = pp * t / acc
    return ServingEstimate(
        scenario="decode", tokens_per_s_per_gpu=per_rank / (inst.attn_tp * pp),
        tokens_per_s_instance=per_rank * inst.attn_dp, batch_per_rank=b, pass_time_s=t, tpot_s=tpot, ttft_s=0.0,
        tokens_per_s_per_user=1.0 / tpot, kv_limited=b == b_kv, budget_limited=False, gpus_per_instance=inst.gpus,
        memory=_memory(inst, b, kv_len), breakdown=_breakdown(c),
        notes=inst.notes + (f"decode batch per attention rank {b:.0f} ({'KV-cache capacity' if b == b_kv else 'request limit'})",))


def decode_at_speed(inst: Instance, input_len: float, output_len: float, tps_per_user: float) -> ServingEstimate:
    """Largest steady-state batch whose per-user speed (1/TPOT) is at least ``tps_per_user``."""
    full = offline(inst, input_len, output_len)
    if full.tokens_per_s_per_user >= tps_per_user:
        return full
    acc, pp = inst.tokens_per_step, inst.dep.pp
    seq_len = input_len + output_len / 2.0
    ds = np.geomspace(1.0, max(full.batch_per_rank / pp, 1.0), 64)
    t, _ = decode_pass(inst, ds, seq_len, input_len, output_len)
    speed = acc / (pp * np.asarray(t))
    ok = speed >= tps_per_user
    if not ok.any():
        raise InputError(f"no batch reaches {tps_per_user:g} tokens/s per user on this layout",
                         hint="lower the per-user speed target or use more GPUs per instance")
    d = float(ds[ok].max())
    return offline_with_batch(inst, input_len, output_len, d * pp)


def offline_with_batch(inst: Instance, input_len: float, output_len: float, batch: float) -> ServingEstimate:
    from dataclasses import replace

    capped = replace(inst, max_batch=max(1, int(batch)))
    return offline(capped, input_len, output_len)

"""Discrete-time simulation of one continuous-batching attention rank: TTFT / TPOT distributions.

Each iteration (one forward pass) runs every decoding sequence (``1 + spec`` tokens each) and fills the
rest of the pass's token budget with prompt chunks in arrival order (chunked prefill). Requests are
admitted while the in-flight limit and the paged KV cache allow. KV policy (``Deployment.kv_policy``):
``reserve`` = a request reserves its prompt plus its output length and is never evicted (TensorRT-LLM
GUARANTEED_NO_EVICT, its default); ``on_demand`` = a request takes KV as its tokens are computed (its prompt
on admission, one slot per generated token) and, when the cache is full, the most recently admitted
requests are paused: their KV is freed and on resume (before any new request) their prompt plus the tokens
generated so far are prefilled again (TensorRT-LLM MAX_UTILIZATION: capacity scheduler that pauses requests,
``LlmRequest::pause`` folds the generated tokens into the prompt). The pass time comes from the serving op model
(``phases.step_model``: a token-count grid plus attention terms linear in KV reads and prefill pairs).
Arrivals: ``offline`` = all at t = 0; ``server`` / ``interactive`` = Poisson at ``qps``. Deterministic for
a seed (numpy ``default_rng``). A pipeline of ``pp`` stages is folded into the pass time
(``pp * T_stage(batch / pp)``), which keeps throughput and per-token latency of the pipelined engine.
DP-attention ranks are a mean field (the other ranks' loads drawn from this rank's recent passes): a pass
takes the busiest rank's prefill, and a decode-only pass of an engine that pads CUDA graphs
(``EnginePreset.adp_graph_batch_sizes``) runs at the busiest rank's batch rounded up to a captured size.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

import numpy as np

from ..errors import InputError
from .analytical import ServingEstimate, Workload, offline
from .phases import Instance, step_costs, step_model

MAX_REQUESTS = 1_000_000
# share of the arrivals (by time) whose latencies are reported: skip the first 20 % (warm-up) and the last
# 20 % (arrivals stop, the engine drains). A simulation property, not a fitted constant.
STEADY_WINDOW = (0.2, 0.8)
# SLO search: arrivals spanning this many request lifetimes (TTFT bound + output x TPOT bound), at most
# MAX_SEARCH_REQUESTS requests per simulated load (simulation lengths, not fitted constants)
STABILITY_SPANS = 8.0
MAX_SEARCH_REQUESTS = 12_000
# fewest requests per simulated load when a server-scenario result is predicted: the p99 is then taken over
# >= 2,400 steady-state requests (MLPerf takes it over >= 24,576 llama2-70b samples). With 1,000 (600 in the
# window, the p99 = the 6th-largest) the predicted rate of an interactive row moved by -18..+27 % between
# seeds (mlperf51-0001-llama2-70b-interactive); with 4,000 by -2..+5 %. A simulation length, not fitted.
SLO_MIN_REQUESTS = 4000
# passes of this rank's history the other DP-attention ranks' loads are drawn from (mean field)
ADP_HISTORY = 256


@dataclass(frozen=True, slots=True, kw_only=True)
class SimResult:
    requests: int
    duration_s: float
    output_tokens_per_s: float  # per attention rank
    ttft_s: dict  # mean, p50, p99
    tpot_s: dict
    mean_batch: float
    steps: int
    qps: float
    pauses: int = 0  # on_demand KV policy: requests paused (KV freed, recomputed) because the cache was full
    padded_passes: int = 0  # DP-attention decode passes run at a padded CUDA-graph batch (engines.yaml adp_graph_batch_sizes)

    def to_dict(self) -> dict:
        return asdict(self)


def _stats(x: np.ndarray) -> dict:
    if x.size == 0:
        return {"mean": None, "p50": None, "p99": None}
    return {"mean": float(x.mean()), "p50": float(np.percentile(x, 50)), "p99": float(np.percentile(x, 99))}


def _lengths(rng, mean: float, cv: float, n: int, lo: float = 1.0, hi: float = 0.0) -> np.ndarray:
    """``n`` lengths with the given mean: lognormal with coefficient of variation ``cv``; with a maximum
    ``hi`` the lognormal truncated at ``hi`` (a dataset whose longest sample is ``hi``: no sample above it,
    and no pile-up at it) whose mean is still ``mean``."""
    if cv <= 0:
        return np.full(n, max(round(min(mean, hi) if hi else mean), lo))
    sigma2 = np.log(1.0 + cv * cv)
    if not hi:
        x = rng.lognormal(np.log(mean) - sigma2 / 2.0, np.sqrt(sigma2), n)
        return np.maximum(np.round(x), lo)
    if mean >= hi:
        return np.full(n, float(hi))
    from scipy.special import ndtr, ndtri

    sigma = float(np.sqrt(sigma2))
    mu = _truncated_mu(float(mean), sigma, float(hi))
    u = rng.uniform(0.0, float(ndtr((np.log(hi) - mu) / sigma)), n)
    x = np.exp(mu + sigma * ndtri(u))
    return np.clip(np.round(x), lo, hi)


def _truncated_mu(mean: float, sigma: float, hi: float) -> float:
    """mu of the lognormal(mu, sigma) whose part below ``hi`` has mean ``mean`` (< hi):
    E[X | X <= hi] = exp(mu + sigma^2 / 2) Phi((ln hi - mu - sigma^2) / sigma) / Phi((ln hi - mu) / sigma)."""
    from scipy.optimize import brentq
    from scipy.special import log_ndtr

    lh = np.log(hi)

    def gap(mu: float) -> float:
        return (mu + sigma * sigma / 2.0 + log_ndtr((lh - mu - sigma * sigma) / sigma)
                - log_ndtr((lh - mu) / sigma) - np.log(mean))

    a = np.log(mean) - sigma * sigma / 2.0  # the untruncated mu: the truncated mean is below the target
    b = lh + 10.0 * sigma
    return float(brentq(gap, a, b, xtol=1e-10)) if gap(b) > 0 else b


def simulate(inst: Instance, wl: Workload, *, qps: float = 0.0, requests: int = 2000, seed: int = 0,
             max_steps: int = 2_000_000, time_scale: float = 1.0) -> SimResult:
    """Simulate one attention rank receiving ``qps`` requests/s (0 or offline: all at t = 0).

    ``time_scale`` multiplies every pass time (1 = the op model). A diagnostic: the factor that makes a
    simulated latency at a measured load equal the measured one is the pass-time error that explains it
    (benchmarks/check_serving_load.py)."""
    if not (0 < requests <= MAX_REQUESTS):
        raise InputError(f"requests must be between 1 and {MAX_REQUESTS}, got {requests}", hint="pass --requests N")
    if not (time_scale > 0 and np.isfinite(time_scale)):
        raise InputError(f"time_scale must be a positive number, got {time_scale}", hint="1.0 = the op model")
    rng = np.random.default_rng(seed)
    n = int(requests)
    inp = _lengths(rng, wl.input_len, wl.input_cv, n, hi=wl.input_max)
    out = _lengths(rng, wl.output_len, wl.output_cv, n, hi=wl.output_max)
    if qps > 0 and wl.scenario != "offline":
        arrive = np.cumsum(rng.exponential(1.0 / qps, n))
    else:
        arrive = np.zeros(n)
    pp = inst.dep.pp
    spec = inst.dep.spec_tokens
    acc = inst.tokens_per_step
    hit = min(max(inst.dep.prefix_hit_rate, 0.0), 0.99)
    comp = np.maximum(np.round(inp * (1.0 - hit)), 1.0)
    budget = float(inst.max_num_tokens) * pp
    smodel = step_model(inst, int(budget / pp) + 1)
    draft = 0.0
    if spec:
        dc = step_costs(inst, 64.0, 0.0, 0.0, 64.0)
        draft = spec * float(dc["logits_s"]) / 64.0  # per-sequence LM-head cost of the drafts (per token)
    cap_tokens = inst.kv_capacity_tokens
    max_batch = inst.max_batch
    on_demand = inst.dep.kv_policy == "on_demand"
    # KV slots a request holds: its whole prompt + output up front (reserve), or its prompt and then its
    # generated tokens as they come (on_demand; grown below)
    reserve = inp.copy() if on_demand else inp + out
    held = np.zeros(n)

    # state of admitted requests
    pre_left = comp.copy()  # prompt tokens still to compute
    pre_len = comp.copy()  # tokens of the current (or last) prefill: the prompt, or prompt + generated on resume
    pre_cached = inp * hit  # prompt tokens of the current prefill served from the prefix cache
    gen = np.zeros(n)  # tokens generated
    first = np.full(n, np.nan)
    done_t = np.full(n, np.nan)
    running: list[int] = []
    paused: list[int] = []  # on_demand: requests whose KV was freed, resumed first (admission order)
    pauses = 0
    nxt = 0  # next request not yet admitted (FIFO)
    kv_used = 0.0
    now = 0.0
    steps = 0
    batch_acc = 0.0
    chunked = inst.dep.chunked_prefill
    ndp = inst.attn_dp
    hist = np.zeros(ADP_HISTORY)
    hist_d = np.zeros(ADP_HISTORY)
    mf_rng = np.random.default_rng(seed + 1)
    # DP-attention CUDA-graph padding (engines.yaml adp_graph_batch_sizes): the captured decode batch sizes
    # per rank that do not exceed the in-flight limit (a padded batch above it is not padded)
    graphs = np.asarray([g for g in inst.engine.adp_graph_batch_sizes if g <= max_batch] if ndp > 1 else [], dtype=float)
    padded_passes = 0
    # engines that do not mix whole prompts with decodes (vLLM V0 without chunked prefill) run a
    # prefill-only pass whenever prompts are waiting: the decodes stall for it
    separate = not chunked and not inst.engine.mixes_whole_prompts
    k_sched = max(1, int(inst.dep.scheduler_steps))  # multi-step scheduling: admit every k decode passes
    since = k_sched
    while (nxt < n or running or paused) and steps < max_steps:
        # admit (at scheduling points only)
        if since >= k_sched or not running:
            since = 0
            # on_demand: the running requests' next tokens are provided for first (one slot each), then
            # paused requests resume and new ones start in what is left
            slot = 1.0 if on_demand else 0.0
            while paused and len(running) < max_batch and (
                    kv_used + slot * len(running) + inp[paused[0]] + gen[paused[0]] + slot <= cap_tokens or not running):
                i = paused.pop(0)
                running.append(i)
                held[i] = inp[i] + gen[i]
                kv_used += held[i]
            while (not paused and nxt < n and arrive[nxt] <= now and len(running) < max_batch
                   and kv_used + slot * len(running) + reserve[nxt] + slot <= cap_tokens):
                running.append(nxt)
                held[nxt] = reserve[nxt]
                kv_used += reserve[nxt]
                nxt += 1
        if not running:
            if nxt < n:
                if reserve[nxt] > cap_tokens:
                    raise InputError(f"a {inp[nxt]:.0f}+{out[nxt]:.0f}-token request does not fit the KV cache "
                                     f"of one attention rank ({cap_tokens:.0f} tokens)",
                                     hint="use more GPUs per instance, an FP8 KV cache or shorter requests")
                now = max(now, arrive[nxt])
                continue
            break
        idx = np.fromiter(running, dtype=np.int64, count=len(running))
        decoding = pre_left[idx] <= 0
        dec = idx[decoding]
        if separate and dec.size < idx.size:
            dec = dec[:0]  # a prefill-only pass
        else:
            since += 1
        d = dec.size
        tokens = d * (1 + spec)
        room = max(budget - tokens, 0.0)
        pairs = 0.0
        chunk_idx = idx[~decoding]
        chunks = np.zeros(chunk_idx.size)
        if chunk_idx.size and room > 0:
            need = pre_left[chunk_idx]
            cum = np.cumsum(need)
            chunks = np.clip(room - (cum - need), 0.0, need)
            if not chunked:  # whole prompts only (the first one alone if it exceeds the budget)
                whole = cum <= room
                whole[0] = True
                chunks = np.where(whole, need, 0.0)
            done_before = pre_len[chunk_idx] - need + pre_cached[chunk_idx]
            pairs = float(np.sum(chunks * done_before + 0.5 * chunks * chunks))
            tokens += float(chunks.sum())
        # the LM head runs on the decode tokens and on the last token of each prompt completed in this pass
        # (engines return no context logits by default: TensorRT-LLM gather_context_logits false)
        logit_tokens = d * (1 + spec) + float(np.count_nonzero((chunks > 0) & (chunks >= pre_left[chunk_idx]))) \
            if chunk_idx.size else float(d * (1 + spec))
        kv_read = float(np.sum(inp[dec] + gen[dec]))
        if ndp > 1:
            # DP-attention: the other ranks are statistically this rank (mean field); the pass waits for
            # the busiest rank's own work: its prefill excess is the largest of ndp draws of this rank's
            # recent excesses (over its decode-only work)
            t_dec = float(smodel.rank(d * (1 + spec) / pp, kv_read / pp, 0.0))
            excess = float(smodel.rank(tokens / pp, kv_read / pp, pairs / pp, logit_tokens / pp)) - t_dec
            hist[steps % hist.size] = excess
            hist_d[steps % hist.size] = d
            filled = min(steps + 1, hist.size)
            others = mf_rng.integers(0, filled, ndp - 1)
            worst = max(excess, float(hist[others].max()))
            shared_tokens = tokens
            if graphs.size and d and worst <= 0.0:
                # every rank decode-only: the CUDA graph runs at the busiest rank's batch rounded up to a
                # captured size; the dummy requests add GEMM / MoE / all-to-all tokens, no KV reads
                busiest = max(float(d), float(hist_d[others].max()))
                k = int(np.searchsorted(graphs, busiest))
                if k < graphs.size and graphs[k] > d:
                    shared_tokens = graphs[k] * (1 + spec)
                    t_dec = float(smodel.rank(shared_tokens / pp, kv_read / pp, 0.0))
                    padded_passes += 1
            t = (t_dec + worst + float(smodel.shared(shared_tokens / pp))) * pp + draft * d
        else:
            t = float(smodel(tokens / pp, kv_read / pp, pairs / pp, logit_tokens / pp)) * pp + draft * d
        t *= time_scale
        now += t
        steps += 1
        batch_acc += d
        if d:
            if spec:
                gain = 1.0 + rng.binomial(spec, inst.dep.acceptance, d) if spec == 1 else np.full(d, acc)
            else:
                gain = 1.0
            gen[dec] += gain
        if chunk_idx.size:
            pre_left[chunk_idx] -= chunks
            fin_pre = chunk_idx[pre_left[chunk_idx] <= 0]
            new_first = fin_pre[np.isnan(first[fin_pre])]
            first[new_first] = now
            gen[new_first] = 1.0  # a resumed request's recompute emits no new first token
        fin = idx[gen[idx] >= out[idx]]
        if fin.size:
            done_t[fin] = now
            kv_used -= float(held[fin].sum())
            held[fin] = 0.0
            fset = set(fin.tolist())
            running = [i for i in running if i not in fset]
        if on_demand and running:
            # the tokens this pass computed take their KV slots; when they overflow the cache the most
            # recently admitted requests are paused (KV freed) until the rest fit
            ridx = np.fromiter(running, dtype=np.int64, count=len(running))
            grow = np.where(pre_left[ridx] <= 0, inp[ridx] + gen[ridx], held[ridx]) - held[ridx]
            grow = np.maximum(grow, 0.0)
            held[ridx] += grow
            kv_used += float(grow.sum())
            while kv_used > cap_tokens and len(running) > 1:
                i = max(running)  # the latest arrival
                running.remove(i)
                kv_used -= held[i]
                held[i] = 0.0
                pre_left[i] = pre_len[i] = inp[i] + gen[i]
                pre_cached[i] = 0.0
                paused.append(i)
                pauses += 1
            if paused:
                paused.sort()
    ok = ~np.isnan(done_t)
    # latency statistics over the steady-state window: a benchmark's run (MLPerf: >= 10 min, >= 270k
    # queries) is measured at steady load, so requests arriving during the warm-up (an empty engine) or
    # after the last arrivals stop (a draining engine) would bias a short simulation optimistic
    win = ok
    if qps > 0 and wl.scenario != "offline" and n >= 200:
        lo_t, hi_t = np.quantile(arrive, [STEADY_WINDOW[0], STEADY_WINDOW[1]])
        win = ok & (arrive >= lo_t) & (arrive <= hi_t)
    ttft = (first - arrive)[win]
    tpot = ((done_t - first) / np.maximum(out - 1.0, 1.0))[win & (out > 1)]
    start = float(arrive[0]) if qps > 0 else 0.0
    dur = max(float(np.nanmax(done_t)) - start, 1e-12) if ok.any() else 0.0
    return SimResult(requests=int(ok.sum()), duration_s=dur,
                     output_tokens_per_s=float(out[ok].sum()) / dur if dur else 0.0,
                     ttft_s=_stats(ttft), tpot_s=_stats(tpot), mean_batch=batch_acc / max(steps, 1), steps=steps,
                     qps=float(qps), pauses=pauses, padded_passes=padded_passes)


@dataclass(frozen=True, slots=True, kw_only=True)
class SloSearch:
    qps_per_rank: float
    sim: SimResult
    tried: list = field(default_factory=list)


def meets(sim: SimResult, wl: Workload) -> bool:
    ok = sim.requests > 0
    if wl.ttft_slo_s and sim.ttft_s["p99"] is not None:
        ok = ok and sim.ttft_s["p99"] <= wl.ttft_slo_s
    if wl.tpot_slo_s and sim.tpot_s["p99"] is not None:
        ok = ok and sim.tpot_s["p99"] <= wl.tpot_slo_s
    return bool(ok)


def _analytic_rate(inst: Instance, wl: Workload) -> tuple[float, float]:
    """(rate at the TPOT bound, saturation rate) per attention rank from the closed-form steady state."""
    from .analytical import decode_pass

    full = offline(inst, wl.input_len, wl.output_len)
    sat = full.tokens_per_s_instance / inst.attn_dp / wl.output_len
    if not wl.tpot_slo_s:
        return sat, sat
    pp, acc = inst.dep.pp, inst.tokens_per_step
    ds = np.geomspace(1.0, max(full.batch_per_rank / pp, 1.0), 48)
    t, _ = decode_pass(inst, ds, wl.input_len + wl.output_len / 2.0, wl.input_len, wl.output_len)
    tpot = pp * np.asarray(t) / acc
    ok = tpot <= wl.tpot_slo_s
    if not ok.any():
        return 0.0, sat
    d = float(ds[ok].max())
    t_d = float(np.asarray(t)[ok][-1])
    return min(sat, d * acc / t_d / wl.output_len), sat


def search_qps(inst: Instance, wl: Workload, *, requests: int = 1000, seed: int = 0, iters: int = 7) -> SloSearch:
    """Largest Poisson rate per attention rank whose simulated p99 TTFT and TPOT meet the bounds.

    Bisection on the rate, bracketed by the closed-form rate at the TPOT bound (the simulation then
    adds queueing, prefill interference and the p99 tails)."""
    guess, sat = _analytic_rate(inst, wl)
    hi = min(sat * 1.02, max(guess, sat * 0.02) * 1.25)
    lo = 0.0
    best = None
    tried = []
    # a load above capacity only shows once the queue has had time to grow: simulate at least
    # STABILITY_SPANS request lifetimes of arrivals (a benchmark runs for minutes at constant load)
    life = wl.ttft_slo_s + wl.output_len * (wl.tpot_slo_s or 0.05)
    for _ in range(iters):
        q = 0.5 * (lo + hi) if tried else hi * 0.8
        n = int(min(MAX_SEARCH_REQUESTS, max(requests, q * STABILITY_SPANS * life)))
        sim = simulate(inst, wl, qps=q, requests=n, seed=seed)
        good = meets(sim, wl)
        tried.append((q, good))
        if good:
            lo, best = q, sim
        else:
            hi = q
    if best is None:
        q = max(hi * 0.5, 1e-6)
        best = simulate(inst, wl, qps=q, requests=requests, seed=seed)
        lo = q if meets(best, wl) else 0.0
    return SloSearch(qps_per_rank=lo, sim=best, tried=tried)


def max_throughput_under_slo(inst: Instance, wl: Workload, *, seed: int = 0,
                             requests: int = SLO_MIN_REQUESTS) -> ServingEstimate:
    """The server-scenario throughput: the highest Poisson load meeting p99 TTFT/TPOT, per GPU."""
    s = search_qps(inst, wl, requests=requests, seed=seed)
    per_rank = s.qps_per_rank * wl.output_len
    g_rank = inst.attn_tp * inst.dep.pp
    tpot = s.sim.tpot_s["mean"] or 0.0
    return ServingEstimate(
        scenario=wl.scenario, tokens_per_s_per_gpu=per_rank / g_rank, tokens_per_s_instance=per_rank * inst.attn_dp,
        batch_per_rank=s.sim.mean_batch, pass_time_s=0.0, tpot_s=tpot, ttft_s=s.sim.ttft_s["mean"] or 0.0,
        tokens_per_s_per_user=1.0 / tpot if tpot else 0.0, kv_limited=False, budget_limited=False,
        gpus_per_instance=inst.gpus,
        breakdown={"qps_per_rank": s.qps_per_rank, "ttft_p99_s": s.sim.ttft_s["p99"], "tpot_p99_s": s.sim.tpot_s["p99"]},
        notes=inst.notes + (f"max Poisson rate meeting p99 TTFT {wl.ttft_slo_s * 1e3:.0f} ms / TPOT {wl.tpot_slo_s * 1e3:.0f} ms: "
                            f"{s.qps_per_rank:.3g} req/s per attention rank (simulated, {s.sim.requests} requests)",))


def offline_run(inst: Instance, wl: Workload, requests: int, replicas: int = 1, *, seed: int = 0) -> ServingEstimate:
    """A finite offline benchmark: ``requests`` spread over ``replicas`` instances' attention ranks, all
    at t = 0; throughput = output tokens / makespan (the ramp-down tail included)."""
    ranks = max(1, replicas * inst.attn_dp)
    per_rank = max(1, round(requests / ranks))
    sim = simulate(inst, replace(wl, scenario="offline"), qps=0.0, requests=per_rank, seed=seed)
    g_rank = inst.attn_tp * inst.dep.pp
    tpot = sim.tpot_s["mean"] or 0.0
    return ServingEstimate(
        scenario="offline", tokens_per_s_per_gpu=sim.output_tokens_per_s / g_rank,
        tokens_per_s_instance=sim.output_tokens_per_s * inst.attn_dp, batch_per_rank=sim.mean_batch, pass_time_s=0.0,
        tpot_s=tpot, ttft_s=sim.ttft_s["mean"] or 0.0, tokens_per_s_per_user=1.0 / tpot if tpot else 0.0,
        kv_limited=False, budget_limited=False, gpus_per_instance=inst.gpus,
        breakdown={"steps": float(sim.steps), "makespan_s": sim.duration_s},
        notes=inst.notes + (f"simulated {per_rank} requests per attention rank at t = 0 (of {requests} in total)",))

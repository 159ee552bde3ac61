"""Serving validation: predict every row of ``serving.csv`` from its normalised columns.

Reads only the configuration columns (model_ref, system_id, gpu_id, num_gpus, tp/ep/pp, dp_attention,
weights_dtype, precision_kv_cache, the attention precision named in precision_activations, framework, scenario_kind, input/output/KV lengths,
batch_or_concurrency + batch_basis, kv_cache_hit_rate, speculative_decoding, latency bounds, per-user
speed band, disaggregation) — never ``source``, ``notes``, the measured values or the row id. Inputs a
source does not state are filled with the defaults below (each says why); the row is modelled, never
skipped, and the defaults it used are listed in its ``assumed`` field.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

import numpy as np

from ..errors import InputError
from ..workload.model import get_model
from .analytical import ServingEstimate, Workload, decode_at_speed, decode_phase, offline, prefill_phase
from .engines import engine_for_framework
from .phases import Deployment, build_instance

TARGETS = ("tokens_per_s_per_gpu", "prefill_tokens_per_s_per_gpu", "decode_tokens_per_s_per_gpu", "ttft_mean_ms")
# SERVING.md columns a row may name as its target instead: whole-system output tokens/s (= per GPU x num_gpus)
# and samples (requests) per second (= that / the row's output_len, the mean generated tokens per sample)
DERIVED_TARGETS = ("tokens_per_s_total", "samples_per_s")

# Mean prompt lengths of the MLPerf datasets (the harvested sources give only maxima; SERVING.md "Known
# gaps"). ASSUMED values, one per dataset; none is printed by MLCommons or the submitters (re-checked
# 2026-12-02 / -03: the MLCommons reference files give the prompt templates and maxima, never a token mean).
# llama2-70b (OpenOrca) ~294, the mixtral OpenOrca/GSM8K/MBXP mix ~606, the llama3.1-405b long-context mix
# ~9,400 and the DeepSeek-R1 reasoning set ~800: as recalled from the MLCommons reference-implementation
# dataset statistics, not re-derived (llama2-70b: MLPerf's rules give tokens_per_sample = 294.45 for the
# generated OUTPUT, inference_policies pull #304, the same figure as the 294 input here: possibly a mix-up,
# unverified).
# llama3.1-8b (CNN-DailyMail v3.0.0 validation, 13,368 articles in the Llama-3.1 chat template: mlcommons/
# inference language/llama3.1-8b PREPROCESSING.md / download_cnndm.py): 925, DERIVED from two published
# figures and one assumption: See et al. 2017 (arXiv:1704.04368, Sec. 4 "Dataset": CNN/Daily Mail articles
# average 781 word-level tokens, punctuation split off) x 0.88 (ASSUMED: ~12 % of those tokens are
# punctuation attached to a word when the text is split on whitespace) = ~687 words, x 1.308 Llama-3.1 tokens
# per word (ASSUMED to count whitespace words; TensorRT-LLM triton_backend llmapi README, benchmark_core_model.py on
# mini_cnn_eval.json with the Llama-3.1-8B tokenizer: "Tokens per word = 1.308") = ~899 article tokens, + ~26
# template tokens (the system turn "You are a helpful assistant.", "Summarize this article:", the header /
# eot special tokens of PREPROCESSING.md's template) = ~925. Without the punctuation assumption the same
# figures give ~1,047; 778, the value before (recalled, unsourced), is below both. The mean OUTPUT of the
# llama3.1-8b rows (128) matches their own logs: tokens_per_s_total / samples_per_s = 128.0-129.0 on the
# three public rows.
MLPERF_MEAN_INPUT = {"llama2-70b": 294.0, "mixtral-8x7b": 606.0, "llama3.1-8b": 925.0,
                     "llama3.1-405b": 9400.0, "deepseek-r1": 800.0}
# Maximum prompt lengths of the same datasets, for a row whose prompt length is the MLPerf dataset's and that
# does not state the maximum: NVIDIA's MLPerf Inference v5.1 closed/NVIDIA/documentation/bandwidth_requirement.md
# (SERVING.md, column input_len_max). Without it the assumed lognormal spread has no cap and its tail (a 405B
# prompt of 50k+ tokens) decides the p99 TTFT of a server / interactive row.
MLPERF_MAX_INPUT = {"llama2-70b": 1024.0, "mixtral-8x7b": 2048.0, "llama3.1-8b": 2560.0,
                    "llama3.1-405b": 20000.0, "deepseek-r1": 3136.0}
# Mean generated tokens where a row gives none (llama3.1-8b CNN-DM summaries: ~ 128-token summaries;
# assumed); prefill/decode phase rows without an output length decode to input + DEFAULT_DECODE_OUTPUT/2.
MLPERF_MEAN_OUTPUT = {"llama3.1-8b": 128.0}
DEFAULT_DECODE_OUTPUT = 0.0
UNCAPPED_BATCH = 1 << 20  # "no request cap": larger than any KV-cache capacity in sequences
MAX_DEFAULT_TP = 8  # widest TP tried for a dense model whose row states no parallelism (one HGX node / NVL8 group)
# A throughput row (offline / server / interactive, output tokens/s target) that does not state its output
# length: the MLPerf dataset's mean generated tokens per sample where the model is an MLPerf benchmark (the
# TOKENS_PER_SAMPLE of the accuracy runs in the MLPerf Inference v5.1 closed submissions of serving.csv:
# llama2-70b 272-301, mixtral-8x7b 143.5-146.1, llama3.1-405b 627-653, deepseek-r1 3,713), else 1024 tokens
# (assumed). A workload input, not a fitted constant; without it such a row would decode one token.
MLPERF_DATASET_OUTPUT = {"llama2-70b": 285.0, "mixtral-8x7b": 145.0, "llama3.1-405b": 645.0, "deepseek-r1": 3713.0}
DEFAULT_THROUGHPUT_OUTPUT = 1024.0
# Production prompt length where a production row does not state it (DeepSeek Day 6 does not): DeepSeek's
# profile of its online prefill deployment, github.com/deepseek-ai/profile-data README "Prefilling": EP32,
# TP1, "prompt length set to 4K and a batch size of 16K tokens per GPU (in line with DeepSeek V3/R1's
# actual online deployment)"; consistent with Day 6's mean decode KV length 4,989 less a ~1k answer.
PRODUCTION_INPUT = 4096.0
# Layout of a disaggregated MoE pool row (scenario_kind prefill / decode) that states no tp / ep: TP1 with
# DP-attention and wide EP, EP32 for a prefill pool and EP128 for a decode pool, capped at the row's GPUs:
# github.com/deepseek-ai/profile-data README "Inference": prefill "EP32 and TP1 (in line with DeepSeek V3/R1's
# actual online deployment)", decode "EP128, TP1, and a prompt length of 4K (closely matching the actual online
# deployment configuration)". Every published disaggregated DeepSeek pool runs DP-attention + wide EP (DeepSeek
# Day 6: prefill EP32 / decode EP144; LMSYS 96xH100: EP32 / EP72; CloudMatrix-Infer: 32 / 320 dies).
POOL_EP = {"prefill": 32, "decode": 128}
# Dies per package of a multi-die accelerator whose stack addresses every die as a device: Ascend 910C
# (Atlas 800I A3 / CloudMatrix384: 8 cards x 2 dies per node; SGLang Ascend NPU reference: "On A3, each card has
# 2 dies ... Cards: 4 on A3 means --tp-size 8"; CloudMatrix384 paper: EP320 over 160 NPUs = one expert per die).
# A row that counts its GPUs in packages and its tp / ep in dies (ep 320 on 160 NPUs) is read in packages.
DIES_PER_PACKAGE = {"ascend-910c": 2}
# MTP / speculative acceptance when a row says "MTP" without a rate: DeepSeek-V3 report Sec. 5.4.3
# (second-token acceptance 85-90 %).
DEFAULT_ACCEPTANCE = 0.85
# Length spread of dataset-driven runs (MLPerf): the sources give means and maxima only. ASSUMED
# coefficient of variation 0.8 for prompt and output lengths (lognormal; OpenOrca's 1024-token maximum is
# ~3.5x its mean). Synthetic fixed-length runs (trtllm-bench, blogs) use CV 0.
DATASET_LENGTH_CV = 0.8
# MLPerf LLM latency bounds (p99 TTFT, p99 TPOT in ms) per benchmark and scenario: mlcommons/inference
# loadgen/mlperf.conf ("<model>.Server.ttft_latency / tpot_latency", the "-interactive" entries for the
# Interactive scenario). Used for a server / interactive row that runs under the MLPerf rule
# (constraint_percentile names it) but does not state the values.
MLPERF_LATENCY_MS = {
    ("llama2-70b", "server"): (2000.0, 200.0), ("llama2-70b", "interactive"): (450.0, 40.0),
    ("mixtral-8x7b", "server"): (2000.0, 200.0),
    ("llama3.1-405b", "server"): (6000.0, 175.0), ("llama3.1-405b", "interactive"): (4500.0, 80.0),
    ("llama3.1-8b", "server"): (2000.0, 100.0), ("llama3.1-8b", "interactive"): (500.0, 30.0),
    ("deepseek-r1", "server"): (2000.0, 80.0), ("deepseek-r1", "interactive"): (1500.0, 15.0),
}


@dataclass(frozen=True, slots=True)
class RowPrediction:
    predicted: float
    assumed: tuple[str, ...]
    estimate: object = None


def _lead_num(text: str | None) -> float | None:
    m = re.match(r"\s*([0-9]+(?:\.[0-9]+)?)", text or "")
    return float(m.group(1)) if m else None


def _lead_int(text: str | None) -> int | None:
    v = _lead_num(text)
    return int(v) if v is not None else None


def _weights_dtype(row: dict, acc, assumed: list[str]) -> str:
    w = (row.get("weights_dtype") or "").strip().lower()
    if w in ("bf16", "fp8", "nvfp4", "int8", "fp16"):
        return w
    if w:
        from ..catalog.names import resolve_serving_dtype

        hit = resolve_serving_dtype(w, "weights")  # names.yaml serving_weights (fp8-e4m3, w4a16, int4-awq ...)
        if hit is not None:
            assumed.extend([hit[1]] if hit[1] else [])
            return hit[0]
    for d in ("nvfp4", "fp8"):
        if acc.peak(d) > 0:
            what = f"weights dtype {w!r} is not modelled" if w else "weights dtype unknown"
            assumed.append(f"{what}: {d}, the narrowest GEMM precision {acc.name} runs")
            return d
    assumed.append("weights dtype unknown: bf16")
    return "bf16"


def _kv_dtype(row: dict, wdtype: str, engine_id: str, assumed: list[str]) -> str:
    from ..catalog.names import resolve_serving_dtype

    hit = resolve_serving_dtype(row.get("precision_kv_cache") or "", "kv")  # names.yaml serving_kv
    if hit is not None:
        assumed.extend([hit[1]] if hit[1] else [])
        return hit[0]
    if engine_id == "trtllm" and wdtype in ("fp8", "nvfp4"):
        assumed.append("KV dtype not stated: fp8 (TensorRT-LLM quantised checkpoints carry kv_cache_quant_algo FP8)")
        return "fp8"
    assumed.append("KV dtype not stated: bf16 (engine default = activation dtype)")
    return "bf16"


def _serving_model(ref: str, assumed: list[str]):
    """The zoo model of a row's ``model_ref``; another spelling of a zoo id (case, dashes, a Hugging Face
    organisation, -chat / -instruct / -hf / -FP8 / -v0.1 / MLPerf -99 suffixes: "meta-llama/Llama-2-70b-chat-hf"
    -> llama2-70b; catalog/names.py ``resolve_model_ref``) is matched with a note."""
    from ..catalog.names import resolve_model_ref
    from ..errors import UnknownNameError
    from ..workload.model import builtin_models

    try:
        return get_model(ref)
    except UnknownNameError:
        table = builtin_models()
        mid, note = resolve_model_ref(ref, tuple(table))
        assumed.extend([note] if note else [])
        return table[mid]


_PROJ_DT = r"(nvfp4|fp4|fp8|bf16)"


def _attn_weights_spec(row: dict, model) -> str:
    """Per-projection attention weight precision where ``precision_weights`` names projections
    ("nvfp4 attention o_proj; q_b_proj fp8" -> "o=nvfp4,q_b=fp8"); "" otherwise (the default rule)."""
    from .phases import attention_projections

    text = (row.get("precision_weights") or "").lower()
    parts = []
    for name in attention_projections(model):
        m = (re.search(rf"\b{_PROJ_DT}\s+(?:attention\s+)?{name}_proj\b", text)
             or re.search(rf"\b{name}_proj\s+{_PROJ_DT}\b", text))
        if m:
            parts.append(f"{name}={'nvfp4' if m.group(1) == 'fp4' else m.group(1)}")
    return ",".join(parts)


def _attention_dtype(row: dict) -> str:
    """Attention math precision where the row's activation-precision column names it ("FP8 attention",
    "BF16 attention", "BF16 core MLA"); "" leaves it to the engine preset (fp8_attention)."""
    text = (row.get("precision_activations") or "").lower()
    if re.search(r"fp8\s+(?:core\s+)?(?:attention|mla)", text):
        return "fp8"
    if re.search(r"bf16\s+(?:core\s+)?(?:attention|mla)", text):
        return "bf16"
    return ""


def row_inputs(row: dict, catalog):
    """(model, system, scaleout, Deployment, Workload, engine, extras, assumed) from a serving.csv row."""
    assumed: list[str] = []
    ref_txt = (row.get("model_ref") or "").strip()
    if not ref_txt and (row.get("model") or "").strip():  # SERVING.md: model = the name as the source writes it
        ref_txt = row["model"].strip()
        assumed.append(f"model_ref blank: read from the model column {ref_txt!r}")
    model = _serving_model(ref_txt, assumed)
    from ..catalog.names import resolve_accelerator, resolve_system

    gpu = (row.get("gpu_id") or "").strip()
    if gpu:
        gpu, note = resolve_accelerator(gpu, catalog)
        assumed.extend([note] if note else [])
        mem = _lead_num(row.get("accelerator_mem_gb"))
        if mem:
            gpu = _memory_variant(gpu, mem, catalog, assumed)
    sid, defaults, note = resolve_system(row.get("system_id") or "", gpu, _lead_int(row.get("gpus_per_node")) or 0,
                                         catalog)
    assumed.extend([note] if note else [])
    gpu = gpu or str(defaults.get("gpu") or "")
    system = catalog.system(sid)
    if gpu and gpu != system.accelerator.id:
        system = replace(system, accelerator=catalog.accelerator(gpu))
    scaleout = catalog.fabric(system.default_scaleout)
    from ..sim.machine import uncalibrated_note

    flag = uncalibrated_note(system.accelerator.id)  # a chip without fitted efficiencies says so in every row
    assumed.extend([flag] if flag else [])
    engine = engine_for_framework(row.get("framework") or "")
    if engine.id == "generic":
        assumed.append(f"framework {row.get('framework')!r} has no preset: generic engine constants")
    from ..catalog.names import resolve_scenario

    kind, note = resolve_scenario(row.get("scenario_kind") or "", row.get("scenario") or "")  # names.yaml
    assumed.extend([note] if note else [])
    num_gpus = _lead_int(row.get("num_gpus"))
    if num_gpus is None:
        num_gpus = system.devices_per_domain
        assumed.append(f"num_gpus not stated: one {system.id} scale-up domain ({num_gpus} GPUs)")
    tp = _degree(row.get("tp"))
    tp_choices: tuple[tuple[int, int], ...] = ()  # (tp, pp) layouts to choose from (a row without its layout)
    ep = _degree(row.get("ep"))
    dies = DIES_PER_PACKAGE.get(system.accelerator.id, 1)
    if dies > 1 and _lead_int(row.get("num_gpus")) is not None:
        for name, deg in (("tp", tp), ("ep", ep)):
            if deg and num_gpus < deg <= num_gpus * dies and deg % dies == 0:
                assumed.append(f"{name} {deg} on {num_gpus} {system.accelerator.id}: read in dies ({dies} per package), "
                               f"{name} {deg // dies} packages")
                tp, ep = (deg // dies, ep) if name == "tp" else (tp, deg // dies)
    pp = _degree(row.get("pp")) or 1
    dp_attn = _flag(row.get("dp_attention"))
    wdt = _weights_dtype(row, system.accelerator, assumed)
    kvdt = _kv_dtype(row, wdt, engine.id, assumed)
    if tp is None and ep is None and model.is_moe and kind in POOL_EP:
        tp, ep, dp_attn = _pool_layout(row, model, system, wdt, kind, num_gpus, dp_attn, assumed)
    elif tp is None and ep is None:
        tp, ep = _default_layout(model, system, wdt, num_gpus, dp_attn, assumed)
        if not model.is_moe and _degree(row.get("pp")) is None:
            # a dense model's layout is a submitter's tuning choice: the smallest instance that holds the
            # weights, as TP n or, where n >= 2, as TP n/2 x PP2 (NVIDIA's MLPerf v5.1 llama3.1-405b Offline on
            # B200 holds the weights that way: TP2 PP2), and the 2x / 4x wider TP inside one node (<= 8 GPUs, the
            # largest dense instance of the published MLPerf configs in serving.csv); predict_serving_row takes
            # the best under the row's own bounds
            top = min(num_gpus, system.devices_per_domain, MAX_DEFAULT_TP)
            tp_choices = ((tp, 1),) + (((tp // 2, 2),) if tp >= 2 else ()) + tuple(
                (n, 1) for n in (2 * tp, 4 * tp) if n <= top)
    tp = tp or 1
    if model.is_moe:
        if ep is None:
            ep = tp
            assumed.append(f"ep not stated: ep = tp = {tp}")
    else:
        ep = 1
    basis = (row.get("batch_basis") or "").lower()
    batch_txt = row.get("batch_or_concurrency") or ""
    max_batch = 0
    max_tokens = 0
    bval = _lead_int(batch_txt)
    # the basis names what the number counts; "max_num_tokens=..." in it is a separate setting
    basis_kind = re.sub(r"max_num_(?:batched_)?tokens\s*=\s*\d+", "", basis)
    if bval:
        if "token" in basis_kind or "token" in batch_txt.lower():
            max_tokens = bval
        else:
            max_batch = bval
    m = re.search(r"max_num_tokens\s*=\s*(\d+)", basis)
    if m:
        max_tokens = int(m.group(1))
    if not bval and kind == "decode" and _lead_num(row.get("tpot_constraint_ms")):
        # a decode pool measured under a TPOT bound: the largest batch that meets it, the KV cache the limit
        max_batch = UNCAPPED_BATCH
        assumed.append("decode batch not stated: the largest that meets the row's TPOT bound (KV-cache capacity the limit)")
    elif not bval and kind in ("offline", "server", "interactive", "latency-band"):
        # a published throughput benchmark that does not state its batch: the KV-cache capacity (and the token
        # budget) decide it, not a serving engine's request cap. vLLM's max_num_seqs default 256 is raised in
        # every published vLLM benchmark config of serving.csv (MLPerf v5.1 AMD / MangoBoost: 600-5000)
        max_batch = UNCAPPED_BATCH
        assumed.append("batch not stated: set by the KV-cache capacity and token budget (no request cap)")
    chunked = not re.search(r"chunked_(?:context|prefill)\s*=\s*false", basis)
    ms = re.search(r"num_scheduler_steps\s*=\s*(\d+)", basis)
    sched_steps = int(ms.group(1)) if ms else 1
    hit = _lead_num(row.get("kv_cache_hit_rate")) or 0.0
    if hit > 1.0 or "%" in (row.get("kv_cache_hit_rate") or ""):  # a percentage ("50%", "50")
        assumed.append(f"kv_cache_hit_rate {row.get('kv_cache_hit_rate', '').strip()!r} read as {hit / 100.0:g} (percent)")
        hit /= 100.0
    spec_txt = (row.get("speculative_decoding") or "").strip().lower()
    spec, accept = 0, 0.0
    if spec_txt and not spec_txt.startswith("no") and ("mtp" in spec_txt or "eagle" in spec_txt or "spec" in spec_txt):
        spec = max(1, model.mtp_depth or 1)
        nt = re.search(r"(\d+)\s*(?:draft\s+|speculative\s+|mtp\s+)?tokens?\b", spec_txt)  # "MTP 3 tokens"
        if nt and int(nt.group(1)) >= 1:
            spec = int(nt.group(1))
        pm = re.search(r"(\d+(?:\.\d+)?)\s*%\s*acceptance", spec_txt)
        if pm:
            accept = float(pm.group(1)) / 100.0
        else:
            accept = DEFAULT_ACCEPTANCE
            assumed.append(f"speculative acceptance not stated: {DEFAULT_ACCEPTANCE} (DeepSeek-V3 report Sec. 5.4.3)")
    if not spec_txt and engine.default_spec_tokens and model.mtp_depth and kind != "prefill":
        spec, accept = engine.default_spec_tokens, engine.default_acceptance
        assumed.append(f"speculative decoding not stated: {engine.name.split(' (')[0]}'s published deployment, MTP "
                       f"{spec} draft token(s) at {accept:g} acceptance (engines.yaml)")
    dep = Deployment(tp=tp, ep=ep, pp=pp, dp_attention=dp_attn, weights_dtype=wdt, kv_dtype=kvdt,
                     attention_dtype=_attention_dtype(row), attn_weights_dtype=_attn_weights_spec(row, model),
                     max_batch=max_batch, max_num_tokens=max_tokens, spec_tokens=spec, acceptance=accept,
                     prefix_hit_rate=hit, chunked_prefill=chunked, scheduler_steps=sched_steps)
    ref = model.id  # the zoo id (a row may spell it differently)
    inp = _lead_num(row.get("input_len"))
    inp_max = _lead_num(row.get("input_len_max")) or 0.0
    cv = 0.0
    # the row runs under the MLPerf rule where its constraint, scenario or workload column names MLPerf
    mlperf_run = any("mlperf" in (row.get(k) or "").lower() for k in ("constraint_percentile", "scenario", "workload"))
    if inp is None and kind in ("prefill", "decode") and not mlperf_run:
        # a disaggregated prefill / decode pool benchmark without its prompt length: the fixed 4K prompt of
        # DeepSeek's published prefill and decode profiles (the production default below), not a dataset mix
        inp = PRODUCTION_INPUT
        assumed.append(f"{kind} pool prompt length not stated: {PRODUCTION_INPUT:.0f} tokens (DeepSeek profile-data "
                       f"{kind} configuration)")
    if inp is None and kind not in ("production",):
        cv = DATASET_LENGTH_CV
        assumed.append(f"dataset lengths: lognormal with CV {cv} (assumed)")
    if inp is None:
        if kind == "production":
            inp = PRODUCTION_INPUT
            assumed.append(f"production prompt length not stated: {PRODUCTION_INPUT:.0f} tokens (DeepSeek profile-data "
                           "prefill configuration)")
        elif ref in MLPERF_MEAN_INPUT:
            inp = MLPERF_MEAN_INPUT[ref]
            assumed.append(f"MLPerf {ref} dataset mean input length {inp:.0f} tokens (assumed, see validation.py)")
            if not inp_max:
                inp_max = MLPERF_MAX_INPUT[ref]
                assumed.append(f"maximum input length not stated: {inp_max:.0f} tokens, the MLPerf {ref} dataset's "
                               "(NVIDIA MLPerf v5.1 bandwidth_requirement.md)")
        else:
            inp = 1024.0
            assumed.append("input length not stated: 1024")
    out = _lead_num(row.get("output_len"))
    if out is None:
        if ref in MLPERF_MEAN_OUTPUT and kind not in ("prefill", "decode", "production"):
            out = MLPERF_MEAN_OUTPUT[ref]
            assumed.append(f"mean output length not stated: {out:.0f} tokens")
        elif kind in ("offline", "server", "interactive", "latency-band", "") and _throughput_target(row):
            out = MLPERF_DATASET_OUTPUT.get(ref, DEFAULT_THROUGHPUT_OUTPUT)
            assumed.append(f"output length not stated: {out:.0f} tokens ("
                           + ("MLPerf dataset mean generated tokens per sample, see validation.py" if ref in
                              MLPERF_DATASET_OUTPUT else "assumed") + ")")
        else:
            out = DEFAULT_DECODE_OUTPUT
    kv_len = _lead_num(row.get("kv_cache_len")) or 0.0
    wl_kind = {"production": "prefill", "latency-band": "offline"}.get(kind, kind)
    if wl_kind not in ("offline", "server", "interactive", "prefill", "decode"):
        assumed.append(f"scenario_kind {kind!r} is not one of offline / server / interactive / prefill / decode / "
                       "production / latency-band: modelled as offline (throughput)")
        wl_kind = "offline"
    ttft_ms = _lead_num(row.get("ttft_constraint_ms")) or 0.0
    tpot_ms = _lead_num(row.get("tpot_constraint_ms")) or 0.0
    rule = MLPERF_LATENCY_MS.get((ref, wl_kind))
    if rule and not (ttft_ms or tpot_ms) and wl_kind in ("server", "interactive") and mlperf_run:
        ttft_ms, tpot_ms = rule
        assumed.append(f"latency bounds not stated: MLPerf rule for {ref} {wl_kind}, p99 TTFT {ttft_ms:.0f} ms / "
                       f"TPOT {tpot_ms:.0f} ms (loadgen mlperf.conf)")
    wl = Workload(input_len=inp, output_len=max(out, 1.0), scenario=wl_kind,
                  ttft_slo_s=ttft_ms / 1e3, tpot_slo_s=tpot_ms / 1e3, kv_len=kv_len,
                  input_cv=cv, output_cv=cv, input_max=inp_max)
    nreq = re.search(r"(\d+)\s+requests\s+total", batch_txt)
    extras = {"kind": kind, "num_gpus": num_gpus, "tps_band": _band(row.get("tps_per_user") or ""),
              "tp_choices": tp_choices if len(tp_choices) > 1 else (),
              "disaggregated": _flag(row.get("disaggregated")),
              "output_known": out > 0, "requests": int(nreq.group(1)) if nreq else 0}
    return model, system, scaleout, dep, wl, engine, extras, assumed


def _decode_under_tpot(inst, kv_len: float, tpot_s: float, top: float, assumed: list[str]):
    """Saturated decode at the largest batch (per attention rank, up to ``top``) whose TPOT meets the row's
    ``tpot_constraint_ms``: a decode pool run under a latency bound ("1,943 tok/s per NPU at < 50 ms TPOT")."""
    best = None
    for b in sorted({max(1, int(round(x))) for x in np.geomspace(1.0, max(top, 1.0), 48)}):
        est = decode_phase(inst, kv_len, float(b))
        if est.tpot_s <= tpot_s:
            best = est
        else:
            break
    if best is None:
        best = decode_phase(inst, kv_len, 1.0)
        assumed.append(f"no decode batch meets the TPOT bound {tpot_s * 1e3:g} ms on this layout: batch 1")
    else:
        assumed.append(f"decode batch {best.batch_per_rank:.0f} per attention rank: the largest whose TPOT meets the "
                       f"row's {tpot_s * 1e3:g} ms bound")
    return best


def _memory_variant(gpu: str, mem_gb: float, catalog, assumed: list[str]) -> str:
    """The catalog variant of ``gpu`` with the row's stated ``accelerator_mem_gb`` (GH200 96 GB HBM3 vs 144 GB
    HBM3e) where the resolved part's memory differs by more than 5 %; else ``gpu``."""
    from ..catalog.names import resolve_accelerator

    def gb(a: str) -> float:
        return catalog.accelerator(a).hbm_bytes / 1e9

    if abs(gb(gpu) - mem_gb) <= 0.05 * mem_gb:
        return gpu
    try:
        alt, _ = resolve_accelerator(f"{gpu}-{mem_gb:g}gb", catalog)
    except InputError:
        alt = gpu
    if alt != gpu and abs(gb(alt) - mem_gb) < abs(gb(gpu) - mem_gb):
        assumed.append(f"accelerator_mem_gb {mem_gb:g}: the {alt} variant of {gpu} ({gb(alt):.0f} GB)")
        return alt
    assumed.append(f"accelerator_mem_gb {mem_gb:g} but {gpu} has {gb(gpu):.0f} GB and no catalog variant matches: "
                   f"modelled with {gpu}'s")
    return gpu


def _degree(text: str | None) -> int | None:
    """A parallel degree as published: "8", "8 (routed experts)", "TP8", "tp=8", "EP 32"; None if not stated."""
    t = re.sub(r"^\s*(?:[a-z]{2,3}\s*=?\s*)(?=\d)", "", (text or "").lower())
    return _lead_int(t)


def _flag(text: str | None) -> bool:
    """yes / true / on / 1 (any case, with a parenthetical: "yes (DP32)") is set; anything else is not."""
    return bool(re.match(r"\s*(yes|true|on|1|y|enabled)\b", (text or "").lower()))


def _throughput_target(row: dict) -> bool:
    try:
        return serving_target(row)[0] in ("tokens_per_s_per_gpu",) + DERIVED_TARGETS
    except InputError:
        return False


def _band(text: str) -> float:
    m = re.match(r"\s*([0-9.]+)\s*-\s*([0-9.]+)", text)
    if m:
        return 0.5 * (float(m.group(1)) + float(m.group(2)))
    return _lead_num(text) or 0.0


def _pool_layout(row, model, system, wdt, kind, num_gpus, dp_attn, assumed) -> tuple[int, int, bool]:
    """(tp, ep, dp_attention) of a disaggregated MoE pool row that states no tp / ep: TP1, DP-attention (unless
    the row says no) and EP ``POOL_EP[kind]`` capped at the row's GPUs, at least the smallest instance that fits."""
    fit, _ = _default_layout(model, system, wdt, num_gpus, dp_attn, [])
    ep = max(fit, min(POOL_EP[kind], num_gpus))
    says_no = (row.get("dp_attention") or "").strip().lower().startswith("no")
    assumed.append(f"parallelism not stated: {kind} pool of TP1 x EP{ep}" + ("" if says_no else " with DP-attention")
                   + " (DeepSeek profile-data / Day 6 disaggregated deployment)")
    return 1, ep, dp_attn or not says_no


def _default_layout(model, system, wdt, num_gpus, dp_attn, assumed) -> tuple[int, int]:
    """Smallest power-of-two instance (within one scale-up domain) whose weights fit with room for KV."""
    from .phases import DTYPE_BYTES

    need = model.num_params() * DTYPE_BYTES.get(wdt, 2.0) * 1.6  # weights + >= 60 % of them for KV cache
    cap = system.accelerator.memory_capacity_bytes * 0.9
    n = 1
    while n * cap < need and n < min(num_gpus, system.devices_per_domain):
        n *= 2
    assumed.append(f"parallelism not stated: {n}-GPU instances ({'EP' if model.is_moe else 'TP'} {n}), data-parallel replicas")
    return (n, n) if model.is_moe else (n, 1)


def serving_target(row: dict) -> tuple[str, str]:
    """(target, note): the row's ``target_metric`` as a SERVING.md target or derived target (its spellings:
    catalog/names.yaml ``serving_targets``)."""
    from ..catalog.names import resolve_target

    try:
        return resolve_target(row.get("target_metric") or "", TARGETS + DERIVED_TARGETS)
    except InputError as exc:
        raise InputError(f"row {row.get('id', '?')}: {exc.message}", hint=exc.hint) from None


def predict_serving_row(row: dict, catalog) -> RowPrediction:
    target, tnote = serving_target(row)
    if target in DERIVED_TARGETS:
        per_gpu = predict_serving_row(dict(row, target_metric="tokens_per_s_per_gpu"), catalog)
        _, _, _, _, wl, _, extras, _ = row_inputs(row, catalog)
        value = per_gpu.predicted * extras["num_gpus"]
        what = f"{target} = predicted tokens_per_s_per_gpu x {extras['num_gpus']} GPUs"
        if target == "samples_per_s":
            if not extras["output_known"]:
                raise InputError(f"row {row.get('id', '?')}: samples_per_s needs the mean output length per sample",
                                 hint="fill output_len (MLPerf: TOKENS_PER_SAMPLE of the accuracy run)")
            value /= wl.output_len
            what += f" / output_len {wl.output_len:g}"
        return RowPrediction(value, tuple(x for x in (tnote, *per_gpu.assumed, what) if x), per_gpu.estimate)
    model, system, scaleout, dep, wl, engine, extras, assumed = row_inputs(row, catalog)
    if tnote:
        assumed.insert(0, tnote)
    kind = extras["kind"]
    if target == "prefill_tokens_per_s_per_gpu":
        inst = build_instance(model, system, scaleout, dep, engine, catalog=catalog)
        est = prefill_phase(inst, wl.input_len, dep.max_num_tokens or 0)
        return RowPrediction(est.tokens_per_s_per_gpu, tuple(assumed), est)
    if target == "decode_tokens_per_s_per_gpu":
        inst = build_instance(model, system, scaleout, dep, engine, catalog=catalog)
        kv = wl.kv_len or (wl.input_len + (wl.output_len / 2.0 if extras["output_known"] else 0.0))
        est = decode_phase(inst, kv, dep.max_batch)
        if wl.tpot_slo_s and est.tpot_s > wl.tpot_slo_s:  # a stated TPOT bound caps the decode batch
            est = _decode_under_tpot(inst, kv, wl.tpot_slo_s, est.batch_per_rank, assumed)
        return RowPrediction(est.tokens_per_s_per_gpu, tuple(assumed), est)
    if target == "ttft_mean_ms":
        inst = build_instance(model, system, scaleout, dep, engine, catalog=catalog)
        est = prefill_phase(inst, wl.input_len, wl.input_len)
        return RowPrediction(est.ttft_s * 1e3, tuple(assumed), est)
    if extras["disaggregated"]:
        from .disagg import balanced_pd

        est = balanced_pd(model, system, scaleout, dep, wl, engine, catalog=catalog, tps_per_user=extras["tps_band"])
        assumed.append("P/D layouts not stated: both pools use the row's layout; pool ratio balanced by the twin")
        return RowPrediction(est.tokens_per_s_per_gpu, tuple(assumed), est)
    if (extras["tp_choices"] and kind in ("offline", "server", "interactive")
            and wl.scenario in ("offline", "server", "interactive") and not extras["requests"]):
        return _best_default_tp(model, system, scaleout, dep, wl, engine, extras, assumed, catalog)
    inst = build_instance(model, system, scaleout, dep, engine, catalog=catalog)
    if kind == "latency-band" and extras["tps_band"]:
        est = decode_at_speed(inst, wl.input_len, wl.output_len, extras["tps_band"])
        return RowPrediction(est.tokens_per_s_per_gpu, tuple(assumed), est)
    _note_unbounded(wl, assumed)
    if extras["requests"] and not _latency_bound(wl):
        # a finite benchmark run (trtllm-bench: N requests at t = 0): simulate it, ramp-down included
        from .simulate import offline_run

        replicas = max(1, extras["num_gpus"] // inst.gpus)
        est = offline_run(inst, wl, extras["requests"], replicas)
        return RowPrediction(est.tokens_per_s_per_gpu, tuple(assumed), est)
    est = _throughput(inst, wl)
    return RowPrediction(est.tokens_per_s_per_gpu, tuple(assumed), est)


def _latency_bound(wl) -> bool:
    """A server / interactive row with a stated (or MLPerf-rule) TTFT or TPOT bound."""
    return wl.scenario in ("server", "interactive") and bool(wl.ttft_slo_s or wl.tpot_slo_s)


def _note_unbounded(wl, notes: list[str]) -> None:
    if wl.scenario in ("server", "interactive") and not _latency_bound(wl):
        notes.append("latency bounds not stated: modelled as offline (saturated) throughput")


def _throughput(inst, wl) -> ServingEstimate:
    """The row's throughput on one layout: the most load that meets its latency bounds, else saturated."""
    if _latency_bound(wl):
        from .simulate import max_throughput_under_slo

        return max_throughput_under_slo(inst, wl, seed=0)
    return offline(inst, wl.input_len, wl.output_len)


def _best_default_tp(model, system, scaleout, dep, wl, engine, extras, assumed, catalog) -> RowPrediction:
    """A row that states no parallelism: the TP (of ``extras["tp_choices"]``) with the most output tokens/s per
    GPU under the row's own latency bounds, as the submitter would have tuned it."""
    best = None
    for tp, pp in extras["tp_choices"]:
        try:
            inst = build_instance(model, system, scaleout, replace(dep, tp=tp, pp=pp), engine, catalog=catalog)
            est = _throughput(inst, wl)
        except InputError:
            continue  # this layout cannot run the row (nothing fits / meets the bounds): the others can
        if best is None or est.tokens_per_s_per_gpu > best[2].tokens_per_s_per_gpu:
            best = (tp, pp, est)
    names = "/".join(f"TP{t}" + (f"xPP{p}" if p > 1 else "") for t, p in extras["tp_choices"])
    if best is None:
        raise InputError(f"none of the layouts {names} can run this row", hint="state the row's tp / pp / num_gpus")
    tp, pp, est = best
    notes = list(assumed)
    notes.append(f"TP{tp}" + (f"xPP{pp}" if pp > 1 else "") + f" chosen of {names}: the most tokens/s per GPU "
                 + ("under the row's latency bounds" if wl.scenario != "offline" else "offline"))
    _note_unbounded(wl, notes)
    return RowPrediction(est.tokens_per_s_per_gpu, tuple(notes), est)


def validate_serving_rows(rows: list[dict], catalog):
    """``ValidationReport`` for serving rows (same contract as training validation)."""
    from ..validate import RowResult, ValidationReport, measured_value

    out = []
    for row in rows:
        rid = (row.get("id") or "?").strip()
        measured, why = measured_value(row, "target_value")
        try:
            tgt = serving_target(row)[0]
        except InputError:
            tgt = ""
        unit = {"ttft_mean_ms": "ms", "tokens_per_s_total": "tok/s", "samples_per_s": "samples/s"}.get(tgt, "tok/s/GPU")
        if measured is None:
            out.append(RowResult(rid, None, None, None, reason=why, unit=unit))
            continue
        try:
            res = predict_serving_row(row, catalog)
            pred = res.predicted
        except InputError as exc:
            out.append(RowResult(rid, measured, None, None, reason=exc.message, unit=unit))
            continue
        except (ArithmeticError, ValueError, KeyError, TypeError) as exc:
            out.append(RowResult(rid, measured, None, None, reason=f"cannot model this row: {type(exc).__name__}: {exc}", unit=unit))
            continue
        if not (pred > 0 and math.isfinite(pred)):
            out.append(RowResult(rid, measured, None, None, reason="model produced no finite prediction", unit=unit))
            continue
        out.append(RowResult(rid, measured, pred, 100.0 * (pred - measured) / measured, unit=unit,
                             note="; ".join(res.assumed)))
    return ValidationReport("serving", out)

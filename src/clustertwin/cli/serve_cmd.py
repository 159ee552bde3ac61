"""``clustertwin serve estimate|plan``: LLM inference serving on a system (clustertwin.serving)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from .. import api
from ..units import parse_duration
from ._common import CatalogOpt, JsonOpt, app, catalog_from, console, emit_json

serve_app = typer.Typer(help="LLM inference serving: throughput, TTFT/TPOT, disaggregation, SLO planning.",
                        no_args_is_help=True)
app.add_typer(serve_app, name="serve")

ModelOpt = Annotated[str, typer.Option("--model", help="Model id from the zoo (clustertwin catalog models).")]
SystemOpt = Annotated[str, typer.Option("--system", help="System id, e.g. hgx-h100, gb200-nvl72, mi325x-8.")]
GpusOpt = Annotated[int, typer.Option("--gpus", help="GPUs serving (default: one instance).")]
InOpt = Annotated[float, typer.Option("--input-len", help="Mean prompt length (tokens).")]
OutOpt = Annotated[float, typer.Option("--output-len", help="Mean generated tokens per request.")]
WdOpt = Annotated[str, typer.Option("--weights-dtype", help="GEMM weights: bf16 | fp8 | int8 | nvfp4 | int4 (W4A16, BF16 GEMMs) | w4a8 | w8a16.")]
KvOpt = Annotated[str, typer.Option("--kv-dtype", help="KV cache: bf16 | fp8.")]
EngineOpt = Annotated[str, typer.Option("--engine", help="Serving engine preset: generic | trtllm | vllm | sglang | deepseek.")]
DpAttnOpt = Annotated[bool, typer.Option("--dp-attention", help="Data-parallel attention (each GPU its own batch).")]
SpecOpt = Annotated[int, typer.Option("--spec-tokens", help="Speculative / MTP draft tokens per step.")]
AccOpt = Annotated[float, typer.Option("--acceptance", help="Per-draft-token acceptance probability.")]
HitOpt = Annotated[float, typer.Option("--prefix-hit", help="Prefix-cache hit rate of prompt tokens (0-1).")]
BatchOpt = Annotated[int, typer.Option("--max-batch", help="In-flight request limit per attention rank (0: engine default).")]
TokOpt = Annotated[int, typer.Option("--max-num-tokens", help="Token budget of one forward pass per attention rank (0: engine default).")]


@serve_app.command("estimate")
def estimate_cmd(
    model: ModelOpt, system: SystemOpt, gpus: GpusOpt = 0,
    tp: Annotated[int, typer.Option("--tp", help="Tensor parallel GPUs per instance.")] = 1,
    ep: Annotated[int, typer.Option("--ep", help="Expert parallel GPUs per instance (MoE).")] = 1,
    pp: Annotated[int, typer.Option("--pp", help="Pipeline stages per instance.")] = 1,
    dp_attention: DpAttnOpt = False, input_len: InOpt = 1024, output_len: OutOpt = 256,
    qps: Annotated[float, typer.Option("--qps", help="Server scenario: Poisson arrivals at this rate (req/s, all GPUs).")] = 0.0,
    offline: Annotated[bool, typer.Option("--offline", help="Offline scenario: all requests at t = 0 (default without --qps).")] = False,
    disaggregate: Annotated[str, typer.Option("--disaggregate", help="P:D GPUs of separate prefill and decode pools.")] = "",
    prefill_tp: Annotated[int, typer.Option("--prefill-tp", help="With --disaggregate: prefill-instance TP (default: --tp).")] = 0,
    prefill_ep: Annotated[int, typer.Option("--prefill-ep", help="With --disaggregate: prefill-instance EP (default: --ep).")] = 0,
    weights_dtype: WdOpt = "fp8",
    attn_weights_dtype: Annotated[str, typer.Option(
        "--attn-weights-dtype",
        help="Attention projections: bf16 | fp8 | int8 | nvfp4 (default: --weights-dtype; bf16 for MoE models "
             "with nvfp4 weights, as NVIDIA's NVFP4 MoE checkpoints ship).")] = "",
    kv_dtype: KvOpt = "fp8",
    attention_dtype: Annotated[str, typer.Option(
        "--attention-dtype",
        help="Attention math over an FP8 KV cache: fp8 | bf16 (default: the engine preset; MLA decode stays bf16).")] = "",
    engine: EngineOpt = "generic",
    max_batch: BatchOpt = 0, max_num_tokens: TokOpt = 0, spec_tokens: SpecOpt = 0, acceptance: AccOpt = 0.0,
    prefix_hit: HitOpt = 0.0,
    kv_policy: Annotated[str, typer.Option(
        "--kv-policy",
        help="KV cache in the --qps simulation: reserve (prompt + whole output on admission, TensorRT-LLM "
             "GUARANTEED_NO_EVICT) | on-demand (as generated, newest requests paused when full: MAX_UTILIZATION).")] = "reserve",
    requests: Annotated[int, typer.Option("--requests", help="Requests to simulate with --qps.")] = 2000,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the arrival simulation.")] = 0,
    ttft_slo: Annotated[str, typer.Option("--ttft-slo", help="With --qps: p99 TTFT bound to check, e.g. 2s.")] = "",
    tpot_slo: Annotated[str, typer.Option("--tpot-slo", help="With --qps: p99 TPOT bound to check, e.g. 80ms.")] = "",
    json_: JsonOpt = False, catalog: CatalogOpt = None,
) -> None:
    """Throughput, TTFT and TPOT of one serving layout (offline closed form, or a simulated --qps load)."""
    res = api.serve_estimate(model=model, system=system, gpus=gpus, tp=tp, ep=ep, pp=pp, dp_attention=dp_attention,
               weights_dtype=weights_dtype, attn_weights_dtype=attn_weights_dtype, kv_dtype=kv_dtype,
               attention_dtype=attention_dtype,
               engine=engine, max_batch=max_batch,
               max_num_tokens=max_num_tokens, spec_tokens=spec_tokens, acceptance=acceptance,
               prefix_hit_rate=prefix_hit, kv_policy=kv_policy, input_len=input_len, output_len=output_len, qps=qps,
               offline=offline or qps <= 0, requests=requests, seed=seed,
               ttft_slo_s=parse_duration(ttft_slo) if ttft_slo else 0.0,
               tpot_slo_s=parse_duration(tpot_slo) if tpot_slo else 0.0, disaggregate=disaggregate,
               prefill_tp=prefill_tp, prefill_ep=prefill_ep, catalog=catalog_from(catalog))
    if json_:
        emit_json(res)
        return
    t = Table(title=f"serve estimate: {res['model']} on {res['gpus']} x {res['system']} ({res['mode']})")
    t.add_column("metric")
    t.add_column("value", justify="right")
    for key, val in res.items():
        if key in ("memory", "breakdown", "notes", "model", "system", "mode"):
            continue
        if isinstance(val, dict):
            val = "  ".join(f"{k} {v * 1e3:.1f} ms" if isinstance(v, float) else f"{k} -" for k, v in val.items())
        elif isinstance(val, float):
            val = f"{val:.4g}"
        t.add_row(key, str(val))
    console.print(t)
    if res.get("breakdown"):
        console.print("pass time by component: " + ", ".join(f"{k[:-2]} {v * 1e3:.2f} ms" for k, v in res["breakdown"].items()))
    for n in res.get("notes", []):
        console.print(f"note: {n}")


@serve_app.command("plan")
def plan_cmd(
    model: ModelOpt, system: SystemOpt,
    gpus: Annotated[int, typer.Option("--gpus", help="GPUs to serve with.")],
    input_len: InOpt = 1024, output_len: OutOpt = 256,
    ttft_slo: Annotated[str, typer.Option("--ttft-slo", help="p99 time-to-first-token bound, e.g. 2s.")] = "2s",
    tpot_slo: Annotated[str, typer.Option("--tpot-slo", help="p99 time-per-output-token bound, e.g. 80ms.")] = "80ms",
    weights_dtype: WdOpt = "fp8", kv_dtype: KvOpt = "fp8", engine: EngineOpt = "generic",
    colocated_only: Annotated[bool, typer.Option("--colocated-only", help="Do not search disaggregated P/D pools.")] = False,
    simulate_top: Annotated[int, typer.Option("--simulate-top", help="Best candidates verified by simulation (goodput).")] = 2,
    json_: JsonOpt = False, catalog: CatalogOpt = None,
) -> None:
    """Search TP/EP/DP-attention, batch limits and P/D splits under TTFT/TPOT SLOs: Pareto front, goodput, $/Mtok."""
    res = api.serve_plan(model=model, system=system, gpus=gpus, input_len=input_len, output_len=output_len,
               ttft_slo_s=parse_duration(ttft_slo), tpot_slo_s=parse_duration(tpot_slo), weights_dtype=weights_dtype,
               kv_dtype=kv_dtype, engine=engine, disaggregated=not colocated_only, simulate_top=simulate_top,
               catalog=catalog_from(catalog))
    if json_:
        emit_json(res)
        return
    t = Table(title=f"serve plan: {res['model']} on {res['gpus']} x {res['system']} "
                    f"(ISL {res['input_len']:.0f}, OSL {res['output_len']:.0f}): Pareto front")
    for col in ("mode", "decode layout", "prefill layout", "P:D GPUs", "batch/rank", "tok/s/GPU", "tok/s/user",
                "TTFT s", "$/Mtok", "tok/J"):
        t.add_column(col, justify="right" if col not in ("mode", "decode layout", "prefill layout") else "left")
    for p in res["pareto"]:
        pd = f"{p['prefill_gpus']}:{p['decode_gpus']}" if p["mode"] == "disaggregated" else "-"
        t.add_row(p["mode"], p["layout"], p["prefill_layout"] or "-", pd, f"{p['batch_per_rank']:.0f}",
                  f"{p['tokens_per_s_per_gpu']:.0f}", f"{p['tokens_per_s_per_user']:.1f}", f"{p['ttft_s']:.2f}",
                  _fmt(p.get("usd_per_million_tokens"), 3), _fmt(p.get("tokens_per_joule"), 2))
    console.print(t)
    b = res.get("best")
    if b is None:
        console.print(f"no candidate meets TTFT <= {res['ttft_slo_s']:g} s and TPOT <= {res['tpot_slo_s'] * 1e3:g} ms")
        return
    console.print(f"best under SLO (TTFT <= {res['ttft_slo_s']:g} s, TPOT <= {res['tpot_slo_s'] * 1e3:g} ms): "
                  f"{b['mode']} {b['layout']}" + (f" + prefill {b['prefill_layout']} ({b['prefill_gpus']}:{b['decode_gpus']})" if b["prefill_layout"] else "")
                  + f", batch {b['batch_per_rank']:.0f}/rank: {b['tokens_per_s_per_gpu']:.0f} tok/s/GPU at {b['tokens_per_s_per_user']:.1f} tok/s/user, "
                  f"{_fmt(b.get('usd_per_million_tokens'), 3)} USD/Mtok")
    for g in res.get("goodput", []):
        if g.get("goodput_tokens_per_s_per_gpu") is not None:
            console.print(f"goodput (simulated Poisson load, p99 SLOs): {g['layout']}: {g['goodput_tokens_per_s_per_gpu']:.0f} tok/s/GPU "
                          f"(p99 TTFT {g['ttft_p99_s']:.2f} s, p99 TPOT {g['tpot_p99_s'] * 1e3:.0f} ms)")
    for n in res["economics"]["notes"]:
        console.print(f"note: {n}")


def _fmt(v, digits: int) -> str:
    return "-" if v is None else f"{v:.{digits}f}"

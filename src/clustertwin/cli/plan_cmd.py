"""``clustertwin plan``, ``clustertwin sweep`` and ``clustertwin results list|show|export``."""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from .. import api
from ..errors import InputError, UnknownNameError
from ..userfiles import write_atomic
from ._common import (
    CatalogOpt,
    ExpertFfnOpt,
    ExpertsOpt,
    FfnOpt,
    HeadsOpt,
    HiddenOpt,
    JsonOpt,
    KvHeadsOpt,
    LayersOpt,
    MemoryMarginOpt,
    MoeImbalanceOpt,
    OversubOpt,
    StackOpt,
    SwigluOpt,
    TopkOpt,
    VocabOpt,
    app,
    catalog_from,
    console,
    console_err,
    emit_json,
    model_with_shape,
    styled,
)
from .render import progress_bar


def _opt_int(name: str, help_: str):
    return Annotated[int | None, typer.Option(name, help=help_)]


@app.command("plan")
def plan_cmd(
    model: Annotated[str | None, typer.Option("--model", help="Model id from the zoo or a model YAML file (default llama3-70b).")] = None,
    system: Annotated[str | None, typer.Option("--system", help="System id (default hgx-h100).")] = None,
    gpus: _opt_int("--gpus", "Number of GPUs (default 1024).") = None,
    domains: _opt_int("--domains", "Number of scale-up domains (instead of --gpus).") = None,
    global_batch: _opt_int("--global-batch", "Sequences per step (default: 4 Mi tokens / seq-len).") = None,
    seq_len: _opt_int("--seq-len", "Sequence length (default: the model's).") = None,
    fabric: Annotated[str | None, typer.Option("--fabric", help="Scale-out fabric id (default: the system's).")] = None,
    dtype: Annotated[str, typer.Option("--dtype", help="GEMM precision.")] = "bf16",
    oversubscription: OversubOpt = 1.0,
    top: Annotated[int, typer.Option("--top", help="How many plans to show.")] = 5,
    engine: Annotated[str, typer.Option("--engine", help="analytical | event (re-ranks the top plans).")] = "analytical",
    tp: _opt_int("--tp", "Fix tensor parallelism.") = None,
    pp: _opt_int("--pp", "Fix pipeline parallelism.") = None,
    dp: _opt_int("--dp", "Fix data parallelism.") = None,
    cp: _opt_int("--cp", "Fix context parallelism.") = None,
    ep: _opt_int("--ep", "Fix expert parallelism.") = None,
    vpp: _opt_int("--vpp", "Fix interleaved virtual stages.") = None,
    zero: _opt_int("--zero", "Fix the ZeRO stage.") = None,
    micro_batch: _opt_int("--micro-batch", "Fix the micro-batch.") = None,
    recompute: Annotated[str | None, typer.Option("--recompute", help="Fix recompute: none|selective|full.")] = None,
    etp: Annotated[int | None, typer.Option("--etp", help="Fix expert tensor parallelism (MoE; the search tries 1 and tp).")] = None,
    pipeline_schedule: Annotated[str | None, typer.Option("--pipeline-schedule", help="Fix the pipeline schedule: 1f1b | zb-h1 | dualpipe (the search tries those the stack runs; clustertwin stacks).")] = None,
    cross_domain: Annotated[bool, typer.Option("--cross-domain", help="Allow TP groups to span scale-up domains (EP groups may by default: their all-to-all is priced on the scale-out fabric).")] = False,
    all_variants: Annotated[bool, typer.Option("--all-variants", help="Show every variant, not only the best per layout.")] = False,
    workers: Annotated[int, typer.Option("--workers", help="Processes for the evaluation.")] = 1,
    stack: StackOpt = None,
    db: Annotated[Path | None, typer.Option("--db", help="Results database the plans are stored in (default: the per-user one, $CLUSTERTWIN_RESULTS_DB or ~/.local/share/clustertwin/results.db).")] = None,
    store: Annotated[bool, typer.Option("--store/--no-store", help="Store the plans in --db (default on).")] = True,
    max_idle_gpus: _opt_int("--max-idle-gpus", "GPUs the plan may leave idle when that gives a clearly better layout (>= 2 % more tokens/s); default 2 % of the cluster, 0 = use every GPU.") = None,
    memory_margin: MemoryMarginOpt = None,
    layers: LayersOpt = None,
    hidden: HiddenOpt = None,
    heads: HeadsOpt = None,
    kv_heads: KvHeadsOpt = None,
    ffn: FfnOpt = None,
    vocab: VocabOpt = None,
    swiglu: SwigluOpt = None,
    experts: ExpertsOpt = None,
    topk: TopkOpt = None,
    expert_ffn: ExpertFfnOpt = None,
    moe_load_imbalance: MoeImbalanceOpt = None,
    from_row: Annotated[str | None, typer.Option("--from-row", help="Plan the job of a validation row, FILE.csv:ID (or training:ID for the packaged set): model shape, system, GPUs, global batch, seq len, precision and framework from the row; compares with the row's layout and measured tokens/s (not stored).")] = None,
    json_: JsonOpt = False,
    catalog: CatalogOpt = None,
) -> None:
    """Best parallel layouts (TP/PP/DP/CP/EP, micro-batch, ZeRO, recompute) for a model on a cluster.

    Models: a zoo id (--model llama3-70b), a model YAML file, or the shape flags estimate takes
    (--layers --hidden --heads ... alone, or on top of --model to change a zoo model).
    """
    shaped = model_with_shape(model, layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads, ffn=ffn,
                              vocab=vocab, swiglu=swiglu, experts=experts, topk=topk, expert_ffn=expert_ffn,
                              moe_load_imbalance=moe_load_imbalance)
    if from_row is not None and shaped is not model:
        raise InputError("--from-row takes the model shape from the row; do not also pass shape flags",
                         hint="drop --layers/--hidden/... or plan without --from-row")
    model_arg = api.resolve_model(shaped) if isinstance(shaped, dict) or (
        isinstance(shaped, str) and shaped.endswith((".yaml", ".yml"))) else shaped
    # the checks, the request and the store live in the facade, so the web app gets the same errors
    doc = api.plan(store_db=db, store=store, from_row=from_row, catalog=catalog_from(catalog), model=model_arg,
                   system=system, gpus=gpus, domains=domains, global_batch=global_batch, seq_len=seq_len,
                   fabric=fabric, dtype=dtype, oversubscription=oversubscription, top=top, engine=engine, tp=tp,
                   pp=pp, dp=dp, cp=cp, ep=ep, vpp=vpp, zero=zero, micro_batch=micro_batch, recompute=recompute,
                   cross_domain=cross_domain, all_variants=all_variants, workers=workers, stack=stack,
                   max_idle_gpus=max_idle_gpus, memory_margin=memory_margin, etp=etp,
                   pipeline_schedule=pipeline_schedule)
    if doc.get("store_warning"):
        console_err.print(f"warning: plans not stored: {doc.pop('store_warning')} (pass --db PATH or --no-store)")
    if json_:
        emit_json(doc)
        return
    defaults, stored, row_info = doc["defaults_used"], doc.get("stored"), doc.get("from_row")
    if defaults:
        console.print("defaults used: " + ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in defaults.items()))
    for a in doc.get("assumptions") or ():
        console.print(f"[warning] {a}", markup=False)
    _render_plans(doc)
    if doc["request"].get("idle_note"):
        console.print(doc["request"]["idle_note"])
    if row_info is not None:
        lay = row_info["layout"]
        pub = row_info["published_tokens_per_s"]
        rank = row_info["published_layout_rank"]
        console.print(f"row {row_info['id']}: ran {_layout(lay)} {_knobs(lay)}"
                      + (f", measured {pub:,.0f} tokens/s; best plan / measured = {row_info['best_over_published']:.3f}"
                         if pub else "")
                      + (f"; the row's layout is #{rank} here" if rank else "; the row's layout is not in this list"))
        own = row_info.get("row_estimate")
        if own:
            ratio = own.get("measured_over_predicted")
            fit = "" if own["fits_memory"] else (f"; the memory model refuses it ({own['memory_gb_per_gpu']:.1f} GB > "
                                                 f"{own['memory_capacity_gb']:.1f})")
            console.print(f"model at the row's layout: step {own['step_time_s']:.3f} s, {own['tokens_per_s']:,.0f} tokens/s"
                          + (f" (measured / predicted step time {ratio:.3f})" if ratio else "") + fit)
        delta = row_info.get("best_minus_row_s") or {}
        big = [(k, v) for k, v in delta.items() if own and abs(v) >= 0.02 * own["step_time_s"]]
        if big:
            console.print("best plan - row layout, per term (>= 2 % of the row's step): "
                          + ", ".join(f"{k} {v:+.3f} s" for k, v in big))
    if stored:
        db_s = stored["db"]
        console.print(f"stored in {db_s} as {stored['id']} (`clustertwin results show {stored['id']} --db {db_s}`)")


def _layout(p: dict[str, Any], show_ep: bool = False) -> str:
    """TP PP(v) DP [CP] [EP] [ETP]; ``show_ep``: EP even at 1 (MoE lists where other layouts have EP > 1)."""
    parts = [f"TP{p['tp']}", f"PP{p['pp']}" + (f"v{p['vpp']}" if p["vpp"] > 1 else ""), f"DP{p['dp']}"]
    parts += [f"CP{p['cp']}"] if p["cp"] > 1 else []
    parts += [f"EP{p['ep']}"] if p["ep"] > 1 or show_ep else []
    parts += [f"ETP{p['etp']}"] if p.get("etp", 1) > 1 else []
    return "·".join(parts)


def _knobs(p: dict[str, Any]) -> str:
    rc = {"none": "", "selective": " sel-rc", "full": " full-rc"}[p["recompute"]]
    sched = "" if p.get("schedule", "1f1b") == "1f1b" else f" {p['schedule']}"
    return f"mb{p['micro_batch']} Z{p['zero']}{rc}{sched}"


def _render_plans(doc: dict[str, Any]) -> None:
    r = doc["request"]
    st = doc["stats"]
    t = Table(title=f"{r['model']} on {r['gpus']:,} x {r['system']} ({r['fabric']}), global batch {r['global_batch']} "
                    f"x {r['seq_len']} tokens, {r.get('stack', 'megatron-core')} stack, {doc['engine']} engine")
    cols = ("#", "layout", "mb ZeRO rc", "tokens/s", "step s", "MFU", "HFU", "mem GB", "left GB", "bottleneck")
    for c in cols:
        t.add_column(c, justify="left" if c in ("layout", "mb ZeRO rc", "bottleneck") else "right",
                     no_wrap=c in ("layout", "mb ZeRO rc", "tokens/s"))
    row_ep = int(((doc.get("from_row") or {}).get("layout") or {}).get("ep", 1))
    show_ep = row_ep > 1 or any(int(p["ep"]) > 1 for p in doc["plans"])
    for p in doc["plans"]:
        t.add_row(str(p["rank"]), _layout(p, show_ep), _knobs(p), f"{p['tokens_per_s']:,.0f}", f"{p['step_time_s']:.3f}",
                  f"{100 * p['mfu']:.1f}%", f"{100 * p['hfu']:.1f}%", f"{p['memory_gb_per_gpu']:.1f}",
                  f"{p['memory_left_gb']:.1f}", str(p["bottleneck"]) + (" (event: failed)" if p.get("event_error") else ""))
    console.print(t)
    if doc["runner_up"]:
        console.print("why the runner-up lost: " + doc["runner_up"]["text"])
    best = doc["plans"][0]
    if best.get("breakdown"):
        parts = sorted(best["breakdown"].items(), key=lambda kv: -kv[1])
        console.print("best plan's step time: " + ", ".join(f"{k} {v:.3f} s" for k, v in parts if v > 0))
    console.print(f"memory: best plan {api.memory_fit_text(best['memory_gb_per_gpu'], st['memory_capacity_gb'], st['memory_margin_gb'])}"
                  "; 'left GB' is what each plan leaves after the margin (--memory-margin)")
    console.print(f"searched {st['candidates']:,} layouts ({st['fit_memory']:,} fit in {st['memory_capacity_gb']:.1f} GB "
                  f"less a {st['memory_margin_gb']:g} GB margin, {st['feasible']:,} feasible) in {st['search_s']:.2f} s")


# --------------------------------------------------------------------------------------- sweep


# Sweep cost and power (accelerators priced from the catalog or the reliability defaults) live in the
# facade; re-exported here for callers of the old location.
from ..api import design_cost_power, device_price_usd  # noqa: E402,F401


@app.command("stacks")
def stacks_cmd(json_: JsonOpt = False) -> None:
    """Software stack presets: what each framework generation can do (used by plan, estimate, sweep, validate)."""
    doc = api.stacks()
    if json_:
        emit_json(doc)
        return
    default = doc["default"]
    t = Table(title="software stacks (--stack)")
    for c in ("id", "flash attn", "overlap", "grad reduce", "ZeRO", "recompute", "SP", "CP", "PP schedules"):
        t.add_column(c, no_wrap=c == "id")
    yes = {True: "yes", False: "no"}
    for s in doc["stacks"]:
        t.add_row(s["id"] + (" (default)" if s["id"] == default else ""), yes[s["flash_attention"]], yes[s["overlap"]],
                  {2: "BF16", 4: "FP32"}.get(s["grad_reduce_bytes"], f"{s['grad_reduce_bytes']} B"),
                  ",".join(map(str, s["zero_stages"])), ",".join(s["recompute"]), yes[s["sequence_parallel"]],
                  s["cp_comm"] if s["context_parallel"] else "no", ",".join(s["pipeline_schedules"]))
    console.print(t)
    for s in doc["stacks"]:
        console.print(styled(s["id"], "bold", f": {s['description']}. Source: {s['source']}"))


@app.command("sweep")
def sweep_cmd(
    sweep_file: Annotated[Path, typer.Argument(help="Sweep YAML (see scenarios/sweeps/).")],
    executor: Annotated[str, typer.Option("--executor", help="local | ray")] = "local",
    address: Annotated[str | None, typer.Option("--address", help="Ray cluster address (with --executor ray).")] = None,
    db: Annotated[Path | None, typer.Option("--db", help="SQLite results database (resumes a sweep found in it; default: the per-user one).")] = None,
    workers: Annotated[int | None, typer.Option("--workers", help="Local processes / Ray CPUs (default: all cores).")] = None,
    memory_margin: MemoryMarginOpt = None,
    json_: JsonOpt = False,
    catalog: CatalogOpt = None,
) -> None:
    """Best plan per cluster design over a grid, and the Pareto front of throughput, cost and power.

    --memory-margin overrides the file's `memory_margin_gb` (part of the sweep's identity: another
    margin is another sweep)."""
    sw = api.build_sweep(sweep_file, catalog=catalog_from(catalog), label=str(sweep_file),
                         catalog_paths=[str(p) for p in catalog or ()], memory_margin=memory_margin)
    with progress_bar(f"sweep {sw.name} [{executor}]", unit="chunks", enabled=not json_) as bar:
        doc = api.sweep(sw, db=db, executor=executor, address=address, workers=workers, progress=bar)
    if json_:
        emit_json(doc)
        return
    rows, db_s = doc["rows"], doc["db"]
    if doc["skipped_chunks"]:
        console.print(f"resumed: {doc['skipped_chunks']} of {doc['num_chunks']} chunks were already in {db_s}")
    _render_rows(rows, title=f"sweep {sw.name} ({sw.sweep_id}) - best plan per design, * = Pareto front")
    console.print(f"memory: each best plan fits with at least a {doc['memory_margin_gb']:g} GB margin left "
                  "(memory_margin_gb / --memory-margin)")
    for a in doc["assumptions"]:
        console.print(f"[warning] {a}", markup=False)
    console.print(f"stored in {db_s} as sweep {sw.sweep_id}; `clustertwin results show {sw.sweep_id} --db {db_s}`")


def _fmt(v: Any, spec: str = "") -> str:
    if v is None:
        return "-"
    return format(v, spec) if spec else str(v)


def _render_rows(rows: list[dict[str, Any]], title: str) -> None:
    t = Table(title=title)
    for c in ("", "job", "system", "GPUs", "fabric", "over", "model", "batch", "layout", "mb ZeRO rc", "tokens/s",
              "MFU", "cost M$", "power MW", "bottleneck / reason"):
        t.add_column(c, no_wrap=c in ("layout", "mb ZeRO rc", "tokens/s", "system", "fabric", "model"))
    for r in rows:
        cost = _fmt(None if r.get("cost_usd") is None else r["cost_usd"] / 1e6, ".1f")
        power = _fmt(None if r.get("power_w") is None else r["power_w"] / 1e6, ".2f")
        head = ["*" if r.get("pareto") else "", str(r["job_index"]), r["system"], str(r["num_gpus"]), r["fabric"],
                f"{r['oversubscription']:g}", r["model"], str(r["global_batch"])]
        if r.get("feasible"):
            t.add_row(*head, _layout(r), _knobs(r), f"{r['tokens_per_s']:,.0f}", f"{100 * r['mfu']:.1f}%", cost, power,
                      str(r.get("bottleneck", "")).split(";")[0].replace(" of the step", ""))
        else:
            t.add_row(*head, "-", "-", "-", "-", cost, power, str(r.get("reason")))
    console.print(t)


# --------------------------------------------------------------------------------------- results

results_app = typer.Typer(help="Query stored sweep and plan results.", no_args_is_help=True)
app.add_typer(results_app, name="results")
DbOpt = Annotated[Path | None, typer.Option("--db", help="SQLite results database (default: the per-user one).")]


@results_app.command("list")
def results_list(db: DbOpt = None, json_: JsonOpt = False) -> None:
    """List the sweeps in a results database."""
    sweeps = api.results(db)["sweeps"]  # opened read-only; says so if it does not exist
    if json_:
        emit_json({"sweeps": sweeps})
        return
    t = Table(title=f"sweeps and plans in {api.results_db_path(db)}")
    for c in ("id", "name", "jobs", "chunks done", "rows", "created", "finished", "catalog", "tool"):
        t.add_column(c, no_wrap=c in ("id", "name"))
    for s in sweeps:
        t.add_row(s["id"], s["name"], str(s["num_jobs"]), f"{s['chunks_done']}/{s['num_chunks']}", str(s["rows"]),
                  s["created_at"], s["finished_at"] or "(unfinished)", s["catalog_version"], s["tool_version"])
    console.print(t)


@results_app.command("show")
def results_show(
    sweep_id: Annotated[str, typer.Argument(help="Sweep id (or a unique prefix, or the sweep's name).")],
    db: DbOpt = None,
    json_: JsonOpt = False,
) -> None:
    """Show a sweep's best plan per design and its Pareto front."""

    got = api.results(db, sweep_id)
    meta, rows = got["sweep"], got["rows"]
    if json_:
        emit_json({"sweep": meta, "rows": rows, "pareto": [r["job_index"] for r in rows if r.get("pareto")]})
        return
    if (meta.get("spec") or {}).get("kind") == "schedule":  # clustertwin schedule replay | compare
        t = Table(title=f"{meta['name']} ({meta['id']}), tool {meta['tool_version']}")
        keys = ("jct_mean_h", "jct_p95_h", "queue_mean_h", "utilisation", "goodput", "stranded_domain_gpus",
                "fgd_frag_ratio", "mean_step_penalty", "lost_gpu_h")
        for c in ("policy", *keys):
            t.add_column(c)
        for pol, m in meta["spec"].get("metrics", {}).items():
            t.add_row(pol, *[f"{m.get(k, float('nan')):.3g}" for k in keys])
        console.print(t)
        return
    plan_kind = _is_plan(meta)
    _render_rows(rows, title=("" if plan_kind else "sweep ") + f"{meta['name']} ({meta['id']}), catalog "
                 f"{meta['catalog_version']}, tool {meta['tool_version']}" + ("" if plan_kind else " - * = Pareto front"))


def _is_plan(meta: dict[str, Any]) -> bool:
    return (meta.get("spec") or {}).get("kind") in ("plan", "schedule")


@results_app.command("export")
def results_export(
    sweep_id: Annotated[str, typer.Argument(help="Sweep id (or a unique prefix, or the sweep's name).")],
    format: Annotated[str, typer.Option("--format", help="csv | json | parquet")] = "csv",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="File to write (default: stdout; parquet needs a file).")] = None,
    db: DbOpt = None,
) -> None:
    """Export a sweep's rows as CSV, JSON or Parquet (Parquet needs pyarrow)."""

    if format not in ("csv", "json", "parquet"):
        raise UnknownNameError("export format", format, ("csv", "json", "parquet"))
    if format == "parquet":
        try:
            import pyarrow  # noqa: F401
            import pyarrow.parquet as pq
        except ImportError:
            raise InputError("--format parquet needs the optional package 'pyarrow', which is not installed",
                             hint="install it with `pip install pyarrow`, or use --format csv or json") from None
        if output is None:
            raise InputError("--format parquet writes a binary file", hint="pass --output FILE.parquet")
    got = api.results(db, sweep_id)  # a plan's ranked plans as stored; a sweep's best plan per design
    meta, rows = got["sweep"], got["rows"]
    flat = [{**{k: v for k, v in r.items() if k != "breakdown"}, "breakdown": json.dumps(r.get("breakdown") or {})}
            for r in rows]
    if format == "parquet":
        import pyarrow as pa

        write_atomic(output, writer=lambda tmp: pq.write_table(pa.Table.from_pylist(flat), str(tmp)))
        console_err.print(f"wrote {len(flat)} rows to {output}")
        return
    if format == "json":
        text = json.dumps({"sweep": meta, "rows": rows}, indent=2, default=str)
    else:
        buf = io.StringIO()
        fields = list(flat[0].keys()) if flat else []
        w = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
        w.writeheader()
        w.writerows(flat)
        text = buf.getvalue()
    if output is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    else:
        write_atomic(output, text)
        console_err.print(f"wrote {len(flat)} rows to {output}")

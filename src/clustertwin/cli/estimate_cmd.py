"""``clustertwin estimate`` (one training step) and ``clustertwin validate`` (published measurements)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from .. import api
from ..errors import InputError
from ._common import (
    CatalogOpt,
    ExpertFfnOpt,
    ExpertsOpt,
    FailLinksOpt,
    FfnOpt,
    HeadsOpt,
    HiddenOpt,
    JsonOpt,
    KvHeadsOpt,
    LayersOpt,
    MemoryMarginOpt,
    MoeImbalanceOpt,
    NetOversubOpt,
    NetTopologyOpt,
    NetworkOpt,
    RoutingOpt,
    SeedOpt,
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
)


def _int_opt(flag: str, help_: str):
    return Annotated[int | None, typer.Option(flag, help=help_)]


EngineOpt = Annotated[str, typer.Option("--engine", help="analytical | event")]


def _result_json(r) -> dict:
    d = r.to_dict()
    d["tflops_per_gpu_model"] = r.tflops_per_gpu
    return d


def _render_estimate(r) -> None:
    stack = r.plan.get("stack")
    t = Table(title=f"{r.model} on {r.num_gpus} x {r.system} ({r.fabric})" + (f", {stack} stack" if stack else ""),
              show_header=False)
    t.add_column("metric")
    t.add_column("value", justify="right")
    t.add_row("step time", f"{r.step_time_s:.3f} s")
    t.add_row("tokens/s", f"{r.tokens_per_s:,.0f}")
    t.add_row("MFU / HFU", f"{100 * r.mfu:.1f}% / {100 * r.hfu:.1f}%")
    t.add_row("TFLOP/s per GPU (model / hw)", f"{r.tflops_per_gpu:.1f} / {r.tflops_per_gpu_hw:.1f}")
    t.add_row("memory per GPU", f"{r.memory_gb_per_gpu:.1f} GB: "
              + api.memory_fit_text(r.memory_gb_per_gpu, r.memory_capacity_gb, r.memory_margin_gb))
    console.print(t)
    b = Table(title="step breakdown")
    b.add_column("component")
    b.add_column("seconds", justify="right")
    b.add_column("share", justify="right")
    for k, v in sorted(r.breakdown.items(), key=lambda kv: -kv[1]):
        if v > 0:
            b.add_row(k, f"{v:.4f}", f"{100 * v / r.step_time_s:.1f}%")
    console.print(b)
    mem = ", ".join(f"{k} {v:.1f}" for k, v in r.memory_breakdown_gb.items() if v > 0)
    console.print(f"memory (GB): {mem}")
    console.print(f"bottleneck: {r.bottleneck}")
    for a in getattr(r, "assumptions", None) or ():
        if a.startswith(("uncalibrated efficiency", "sourced efficiency", "stack efficiency", "pipeline:",
                         *api.CAVEAT_PREFIXES)):
            console.print(f"[warning] {a}", markup=False)
    _render_event_extras(r)


def _render_event_extras(r) -> None:
    """Event engine only: exposed vs hidden communication, stream utilisation, critical path."""
    exposed = getattr(r, "exposed_comm_s", None)
    if exposed is None:
        return
    hidden = getattr(r, "hidden_comm_s", {}) or {}
    comm = ", ".join(f"{k} {v:.3f}/{hidden.get(k, 0.0):.3f}" for k, v in exposed.items())
    console.print(f"communication exposed/hidden (s): {comm}")
    util = ", ".join(f"{k} {100 * v:.0f}%" for k, v in (getattr(r, "stream_utilisation", {}) or {}).items())
    console.print(f"stream utilisation (critical stage {getattr(r, 'critical_stage', '?')}): {util}")
    path = getattr(r, "critical_path", []) or []
    if path:
        by_cat: dict[str, float] = {}
        for seg in path:
            by_cat[seg["category"]] = by_cat.get(seg["category"], 0.0) + seg["end_s"] - seg["start_s"]
        top = ", ".join(f"{k} {v:.3f} s" for k, v in sorted(by_cat.items(), key=lambda kv: -kv[1]))
        console.print(f"critical path ({len(path)} segments): {top}")


@app.command("estimate")
def estimate_cmd(
    scenario: Annotated[Path | None, typer.Argument(help="Scenario YAML (see scenarios/); flags override it.")] = None,
    model: Annotated[str | None, typer.Option("--model", help="Model id from the zoo, or a model YAML file.")] = None,  # type: ignore[assignment]
    system: Annotated[str | None, typer.Option("--system", help="System id, e.g. dgx-a100, hgx-h100, gb200-nvl72.")] = None,
    gpus: _int_opt("--gpus", "Number of GPUs.") = None,
    fabric: Annotated[str | None, typer.Option("--fabric", help="Scale-out fabric id (default: the system's).")] = None,
    tp: _int_opt("--tp", "Tensor parallel degree.") = None,
    pp: _int_opt("--pp", "Pipeline parallel degree.") = None,
    dp: _int_opt("--dp", "Data parallel degree (default: gpus / (tp*pp*cp)).") = None,
    cp: _int_opt("--cp", "Context parallel degree.") = None,
    ep: _int_opt("--ep", "Expert parallel degree (inside tp*dp*cp).") = None,
    vpp: _int_opt("--vpp", "Interleaved virtual stages per pipeline rank.") = None,
    microbatch_group: _int_opt("--microbatch-group", "Interleaved schedule: consecutive micro-batches per virtual "
                               "stage (Megatron --microbatch-group-size-per-virtual-pipeline-stage; default pp).") = None,
    etp: Annotated[int | None, typer.Option("--etp", help="Expert tensor parallel degree (Megatron "
                                            "--expert-tensor-parallel-size; default 1).")] = None,
    pipeline_schedule: Annotated[str | None, typer.Option(
        "--pipeline-schedule", help="1f1b (interleaved with --vpp) | zb-h1 | dualpipe: the schedule both engines "
        "price (dualpipe: analytical only; the stack must offer it, e.g. --stack hai-llm).")] = None,
    uneven_pipeline: Annotated[bool | None, typer.Option(
        "--uneven-pipeline/--even-pipeline", help="Allow layers not divisible into the pipeline stages (whole "
        "layers per rank, the last rank fewer beside the loss; Megatron --pipeline-model-parallel-layout).")] = None,
    zero: _int_opt("--zero", "ZeRO stage 0-3 (1 = distributed optimizer).") = None,
    offload: Annotated[str | None, typer.Option(
        "--offload", help="Model states in host memory: none | optimizer (stepped on the CPU: Adam moments; "
        "DeepSpeed ZeRO-Offload also moves the FP32 master, Megatron --optimizer-cpu-offload keeps it on the GPU) | params (also the parameter shards and "
        "gradients: ZeRO-3 offload_param, FSDP CPUOffload; needs ZeRO-3). The stack must offer it.")] = None,
    activation_offload_layers: Annotated[int | None, typer.Option(
        "--activation-offload-layers", help="Layers whose activations go to host memory between forward and "
        "backward (Megatron --cpu-offloading-num-layers; pp 1, no recompute; default 0).")] = None,
    fsdp: Annotated[bool | None, typer.Option("--fsdp/--no-fsdp", help="Fully sharded data parallel (ZeRO-3).")] = None,
    micro_batch: _int_opt("--micro-batch", "Sequences per micro-batch.") = None,
    global_batch: _int_opt("--global-batch", "Sequences per step.") = None,
    seq_len: _int_opt("--seq-len", "Sequence length (default: the model's).") = None,
    recompute: Annotated[str | None, typer.Option("--recompute", help="none | selective | full")] = None,
    dtype: Annotated[str | None, typer.Option("--dtype", help="bf16 | fp16 | fp8 | mxfp8 | nvfp4 | tf32 | fp32")] = None,
    sequence_parallel: Annotated[bool | None, typer.Option("--sp/--no-sp", help="Sequence parallelism (default on when tp > 1).")] = None,
    overlap: Annotated[bool | None, typer.Option("--overlap/--no-overlap", help="Communication overlap (Megatron-Core/TE).")] = None,
    stack: StackOpt = None,
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
    engine: EngineOpt = "analytical",
    trace: Annotated[Path | None, typer.Option("--trace", help="Write a Chrome trace-event JSON (Perfetto); needs --engine event.")] = None,
    schedule: Annotated[str | None, typer.Option("--schedule", help="Pipeline schedule for --engine event: 1f1b | interleaved | zb-h1 | gpipe.")] = None,
    straggler: Annotated[list[str] | None, typer.Option("--straggler", help="Event engine straggler, e.g. 'stage=3,compute=1.2' (repeatable).")] = None,
    network: NetworkOpt = "analytical",
    routing: RoutingOpt = None,
    topology: NetTopologyOpt = None,
    oversubscription: NetOversubOpt = 1.0,
    fail_links: FailLinksOpt = 0,
    seed: SeedOpt = 0,
    memory_margin: MemoryMarginOpt = None,
    json_: JsonOpt = False,
    catalog: CatalogOpt = None,
) -> None:
    """Step time, MFU, memory and bottleneck of one training configuration.

    Models: a zoo id (--model llama3-70b), a model YAML file (--model my.yaml), or shape flags
    (--layers --hidden --heads ... alone, or on top of --model to change a zoo model).
    """
    from .. import api

    model = model_with_shape(model, layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads, ffn=ffn,  # type: ignore[assignment]
                             vocab=vocab, swiglu=swiglu, experts=experts, topk=topk, expert_ffn=expert_ffn,
                             moe_load_imbalance=moe_load_imbalance)

    cat = catalog_from(catalog)
    plan_kw = {"tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": ep, "vpp": vpp, "zero": zero, "fsdp": fsdp,
               "micro_batch": micro_batch, "global_batch": global_batch, "seq_len": seq_len, "recompute": recompute,
               "dtype": dtype, "sequence_parallel": sequence_parallel, "overlap": overlap,
               "microbatch_group": microbatch_group, "stack": stack, "etp": etp,
               "pipeline_schedule": pipeline_schedule, "uneven_pipeline": uneven_pipeline, "offload": offload,
               "activation_offload_layers": activation_offload_layers}
    for k, v in {**plan_kw, "gpus": gpus}.items():
        if isinstance(v, int) and not isinstance(v, bool) and v < (0 if k in ("zero", "activation_offload_layers") else 1):
            raise InputError(f"--{k.replace('_', '-')} must be positive, got {v}", hint="pass a positive integer")
    from ..limits import check_limit

    for k in ("global_batch", "seq_len"):
        if plan_kw[k] is not None:
            check_limit(k, plan_kw[k], flag=f"--{k.replace('_', '-')}")
    if scenario is not None:
        sc = api.load_scenario(scenario, catalog=cat, overrides={**plan_kw, "model": model, "system": system,
                                                                 "gpus": gpus, "fabric": fabric})
    else:
        missing = [f for f, v in (("--model", model), ("--system", system), ("--gpus", gpus)) if v is None]
        if missing:
            raise InputError(f"estimate needs {', '.join(missing)} (or a scenario YAML)",
                             hint="e.g. clustertwin estimate --model gpt3-175b --system dgx-a100 --gpus 1024 --tp 8 --pp 8 --global-batch 1536")
        kw = {k: v for k, v in plan_kw.items() if v is not None}
        if "tp" not in kw:
            kw["tp"] = 1
        sc = api.build_scenario(model=model, system=system, gpus=gpus, fabric=fabric, catalog=cat, **kw)
    net = api.network_model(network, routing=routing, seed=seed, topology=topology, oversubscription=oversubscription,
                            fail_links=fail_links)
    if net is None:
        sc = api.oversubscribed_scenario(sc, oversubscription)
    r = api.simulate(sc, engine=engine, trace=trace is not None, schedule=schedule, stragglers=tuple(straggler or ()),
                     network=net, memory_margin_gb=memory_margin)
    if trace is not None:
        written = api.write_trace(r, trace)
        console_err.print(f"trace written to {written} (open it in ui.perfetto.dev or chrome://tracing)")
    if json_:
        emit_json({**_result_json(r), "memory_basis": api.memory_basis(sc)})
    else:
        _render_estimate(r)


@app.command("validate")
def validate_cmd(
    file: Annotated[Path, typer.Argument(help="Validation CSV (training, memory, collectives or serving format), or a "
                                              "packaged set name: training, memory, collectives, serving.")],
    engine: EngineOpt = "analytical",
    json_: JsonOpt = False,
    catalog: CatalogOpt = None,
    by: Annotated[str | None, typer.Option("--by", help="Per-category table: comma-separated columns of the file "
                                                       "and/or moe, sharding, family, size-band (e.g. framework,gpu,moe); two "
                                                       "columns also print the two-way table (system,size-band).")] = None,
    cv: Annotated[str | None, typer.Option("--cv", help="Leave-one-group-out cross-validation: refit every fitted "
                                                       "constant without each value of this column (e.g. source) "
                                                       "and predict the held-out rows.")] = None,
) -> None:
    """Predict every row of a published-measurement CSV: error per row and MAPE (and per category / CV)."""
    from .. import api

    cat = catalog_from(catalog)
    from .render import progress_bar

    with progress_bar(f"validate {file.name}", unit="rows", enabled=not json_) as bar:
        rep = api.validate(file, engine=engine, catalog=cat, progress=bar)
    cols = [c.strip() for c in by.split(",") if c.strip()] if by else []
    table = api.validate_by(file, cols, report=rep) if cols else None
    # two columns: also the two-way table (first column's values as rows, second's as columns)
    cross = api.validate_cross(file, cols[0], cols[1], report=rep) if len(cols) == 2 else None
    cvr = api.cross_validate(file, cv, catalog=cat) if cv else None
    if json_:
        d = rep.to_dict()
        if table is not None:
            d["by"] = table
        if cross is not None:
            d["by_cross"] = cross
        if cvr is not None:
            d["cv"] = cvr.to_dict()
        emit_json(d)
        return
    unit = rep.rows[0].unit if rep.rows else ""
    t = Table(title=f"{file.name}: {rep.kind}")
    t.add_column("id")
    t.add_column(f"measured ({unit})", justify="right")
    t.add_column(f"predicted ({unit})", justify="right")
    t.add_column("error %", justify="right")
    t.add_column("note")
    for row in rep.rows:
        if row.error_pct is None:
            t.add_row(row.id, f"{row.measured:.4g}" if row.measured else "-", "-", "-", f"not modelled: {row.reason}")
        else:
            t.add_row(row.id, f"{row.measured:.4g}", f"{row.predicted:.4g}", f"{row.error_pct:+.1f}", row.note)
    console.print(t)
    mape = rep.mape_pct
    console.print(
        f"MAPE {mape:.2f}% over {len(rep.modelled)} rows" if mape is not None else "MAPE n/a (no row modelled)",
        f"(max |error| {rep.max_abs_error_pct:.1f}%)" if rep.max_abs_error_pct is not None else "",
        f"; {len(rep.failures)} row(s) not modelled (failures)" if rep.failures else "",
    )
    if table is not None:
        bt = Table(title=f"{file.name}: by {', '.join(cols)}")
        for c, j in (("column", "left"), ("value", "left"), ("n", "right"), ("MAPE %", "right"), ("bias %", "right"),
                     ("max |err| %", "right"), ("worst row", "left")):
            bt.add_column(c, justify=j)
        for g in table:
            def f(x):
                return "-" if x is None else f"{x:.1f}"
            bt.add_row(g["column"], g["value"], str(g["n"]), f(g["mape_pct"]), f(g["bias_pct"]),
                       f(g["max_abs_error_pct"]), g["worst"] or "-")
        console.print(bt)
    if cross is not None:
        xt = Table(title=f"{file.name}: MAPE % (max |err| %, rows) by {cross['rows']} x {cross['columns']}")
        xt.add_column(cross["rows"])
        for cv in cross["column_values"]:
            xt.add_column(cv, justify="right")
        for tr in cross["table"]:
            cells = [tr["cells"].get(cv) for cv in cross["column_values"]]
            xt.add_row(tr["value"], *("-" if c is None else f"{c['mape_pct']:.1f} ({c['max_abs_error_pct']:.0f}, {c['n']})"
                                      for c in cells))
        console.print(xt)
    if cvr is not None:
        refit = "constants refit per fold" if cvr.constants else "no fitted constants: each fold as in-sample"
        ct = Table(title=f"leave-one-{cvr.column}-out cross-validation ({refit})")
        for c, j in (("held-out " + cvr.column, "left"), ("n", "right"), ("MAPE %", "right"), ("bias %", "right"),
                     ("max |err| %", "right")):
            ct.add_column(c, justify=j)
        for fo in cvr.folds:
            ct.add_row(fo["fold"][:70], str(fo["n"]), f"{fo['mape_pct']:.1f}", f"{fo['bias_pct']:+.1f}",
                       f"{fo['max_abs_error_pct']:.1f}")
        console.print(ct)
        kt = Table(title="fitted constants")
        for c in ("constant", "chips", "value", "unit", "refit on all rows", "fold range", "rows"):
            kt.add_column(c)
        for k in cvr.constants:
            kt.add_row(k["key"], ",".join(k["chips"]), f"{k['value']:g}", k["unit"], f"{k['refit_all_rows']:g}",
                       f"{k['fold_min']:g}-{k['fold_max']:g}" if k["fold_min"] is not None else "-", str(k["rows"]))
        if cvr.constants:
            console.print(kt)
            mt = Table(title="per-fold constants that differ from the all-row refit (a value far from it in one "
                             "fold is fitted on few rows there, or set without rows)")
            for c in ("held-out " + cvr.column, "constant", "group", "fold value", "all rows", "set by"):
                mt.add_column(c)
            for fo in cvr.folds:
                for m in fo.get("moved", []):
                    mt.add_row(fo["fold"][:50], m["key"], m["group"], f"{m['value']:g}", f"{m['refit_all_rows']:g}",
                               m["origin"])
            console.print(mt)
        console.print(f"cross-validated MAPE {cvr.mape_pct:.2f}% over {len(cvr.rows)} rows "
                      f"(in-sample with the shipped constants {cvr.in_sample_mape_pct:.2f}%)"
                      + (f"; not modelled: {', '.join(cvr.skipped)}" if cvr.skipped else ""))

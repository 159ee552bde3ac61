"""``clustertwin goodput | power | compare``: reliability, power, cost and design comparison."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from .. import api
from ..errors import InputError
from ._common import CatalogOpt, JsonOpt, MemoryMarginOpt, app, catalog_from, console, emit_json, styled

DefaultsOpt = Annotated[
    list[Path] | None,
    typer.Option("--defaults", help="Overlay YAML for failure rates, checkpoint, power and cost defaults (repeatable)."),
]


def _parse_rates(items: list[str] | None) -> dict[str, float]:
    out: dict[str, float] = {}
    for it in items or ():
        name, eq, val = it.partition("=")
        if not eq:
            raise InputError(f"--rate {it!r}: write CLASS=VALUE", hint="e.g. --rate accelerator=0.25 (per 1000 component-days)")
        try:
            v = float(val)
        except ValueError:
            raise InputError(f"--rate {it!r}: {val!r} is not a number") from None
        if not v > 0:
            raise InputError(f"--rate {it!r}: a failure rate must be positive, got {v}",
                             hint="rates are interruptions per 1000 component-days")
        out[name.strip()] = v
    return out


def _interval(text: str) -> float | None:
    if text.strip().lower() == "auto":
        return None
    try:
        minutes = float(text)
    except ValueError:
        raise InputError(f"--checkpoint-interval {text!r} is neither 'auto' nor a number of minutes") from None
    if not minutes > 0:
        raise InputError(f"--checkpoint-interval must be positive, got {minutes} min", hint="use auto or minutes above zero")
    return minutes * 60.0


def _assumption_list(items) -> None:
    items = list(dict.fromkeys(items))
    if items:
        console.print(styled("Assumptions", "bold", f" ({len(items)}; not from a published source — override with --defaults):"))
        for a in items:
            console.print(f"  - {a}", highlight=False)


@app.command("goodput")
def goodput_cmd(
    system: Annotated[str, typer.Option("--system", help="System id (catalog).")] = "hgx-h100",
    gpus: Annotated[int | None, typer.Option("--gpus", help="Accelerators in the job.")] = None,
    domains: Annotated[int | None, typer.Option("--domains", help="Scale-up domains in the job (instead of --gpus).")] = None,
    fabric: Annotated[str | None, typer.Option("--fabric", help="Scale-out fabric id (default: the system's).")] = None,
    model: Annotated[str | None, typer.Option("--model", help="Model id (sets the checkpoint size).")] = None,
    params_b: Annotated[float | None, typer.Option("--params", help="Parameters in billions (instead of --model).")] = None,
    days: Annotated[float, typer.Option("--days", help="Wall-clock length of the run.")] = 30.0,
    checkpoint_interval: Annotated[str, typer.Option("--checkpoint-interval", help="'auto' (Daly optimum) or minutes.")] = "auto",
    monte_carlo: Annotated[int, typer.Option("--monte-carlo", help="Also simulate N runs (vectorised).")] = 0,
    seed: Annotated[int | None, typer.Option("--seed", help="Seed of the Monte-Carlo generator.")] = None,
    spares: Annotated[int | None, typer.Option("--spares", help="Spare replacement units (default: enough for <1% waits).")] = None,
    rate: Annotated[list[str] | None, typer.Option("--rate", help="CLASS=VALUE override, interruptions per 1000 component-days (repeatable).")] = None,
    write_tbps: Annotated[float | None, typer.Option("--write-tbps", help="Checkpoint write bandwidth, TB/s.")] = None,
    read_tbps: Annotated[float | None, typer.Option("--read-tbps", help="Checkpoint read bandwidth, TB/s.")] = None,
    restart: Annotated[float | None, typer.Option("--restart", help="Total restart time in seconds (replaces the default parts).")] = None,
    blocking: Annotated[float | None, typer.Option("--checkpoint-blocking", help="Fraction of the write that stalls training (async < 1).")] = None,
    tokens_per_s: Annotated[float | None, typer.Option("--tokens-per-s", help="Job throughput without failures.")] = None,
    mfu: Annotated[float | None, typer.Option("--mfu", help="Assumed MFU for tokens/day when no estimate is used.")] = None,
    no_plan: Annotated[bool, typer.Option("--no-plan", help="Do not ask the planner for the step time.")] = False,
    defaults: DefaultsOpt = None,
    json_: JsonOpt = False,
    catalog: CatalogOpt = None,
) -> None:
    """Expected interruptions, optimal checkpoint interval, ETTR and tokens/day of one training job."""
    out = api.goodput(system=system, gpus=gpus, domains=domains, fabric=fabric, model=model, params_b=params_b,
                      days=days, interval_s=_interval(checkpoint_interval), monte_carlo=monte_carlo, seed=seed,
                      spares=spares, rates=_parse_rates(rate), write_tbps=write_tbps, read_tbps=read_tbps,
                      restart_s=restart, blocking=blocking, tokens_per_s=tokens_per_s, mfu=mfu, no_plan=no_plan,
                      defaults=tuple(defaults or ()), catalog=catalog_from(catalog))
    if json_:
        emit_json(out)
        return
    _render_goodput(out)


def _render_goodput(o: dict) -> None:
    console.print(styled("Goodput", "bold", f" {o['model'] or ''} on {o['num_accelerators']:g} x {o['system']} ({o['fabric']}), "
                         f"{o['days']:g} days"))
    t = Table(title="Unexpected interruptions by component class")
    for c in ("class", "components", "per 1000 unit-days", "per day", f"in {o['days']:g} d", "share", "effect"):
        t.add_column(c)
    for r in o["by_class"]:
        t.add_row(r["class"], f"{r['components']:,.0f} {r['exposure']}", f"{r['rate_per_1000_unit_days']:.4g}",
                  f"{r['per_day']:.3g}", f"{r['expected']:.1f}", f"{100 * r['share']:.1f}%", r["effect"])
    t.add_row("total", "", "", f"{o['unexpected_per_day']:.3g}", f"{o['unexpected_interruptions']:.1f}", "100%", "")
    console.print(t)
    s = o["spares"]
    lines = [
        ("mean time between interruptions", f"{o['mtbi_h']:.2f} h  (+ {o['planned_interruptions']:.1f} planned in {o['days']:g} d)"),
        ("checkpoint size", f"{o['checkpoint_gb']:,.0f} GB; write {o['checkpoint_write_s']:.1f} s (blocking {o['checkpoint_blocking_s']:.1f} s)"),
        ("restart", f"{o['restart_s']:.0f} s " + ", ".join(f"{k} {v:.0f}" for k, v in o["restart_parts_s"].items())
         + f"; with spare waits {o['effective_restart_s']:.0f} s"),
        ("checkpoint interval", f"{o['checkpoint_interval_s'] / 60:.1f} min ({o['checkpoint_interval_policy']}); "
         f"Young {o['young_interval_s'] / 60:.1f}, Daly {o['daly_interval_s'] / 60:.1f}, exact optimum {o['numeric_optimal_interval_s'] / 60:.1f} min"),
        ("spares", f"{s['spares']} spare {s['replacement_unit']}s of {s['devices_per_unit']} accelerators"
         f"{' (auto)' if s['spares_auto'] else ''}; {s['unit_failures_per_day']:.2f} unit failures/day, "
         f"{s['mean_units_in_repair']:.2f} in repair on average, P(no spare) = {s['block_probability']:.3f}"),
        ("ETTR (effective training time ratio)", f"{o['ettr']:.4f}"),
        ("losses", ", ".join(f"{k} {100 * v:.2f}%" for k, v in o["loss_breakdown"].items())),
    ]
    if o.get("tokens_per_day"):
        lines.append(("tokens per day", f"{o['tokens_per_day']:.4g} ({o['tokens_per_s']:.4g} tokens/s x ETTR; {o['throughput_basis']})"))
    if o.get("throughput_note"):
        lines.append(("throughput note", o["throughput_note"]))
    mc = o.get("monte_carlo")
    if mc:
        e, i = mc["ettr"], mc["unexpected_interruptions"]
        lines.append((f"Monte-Carlo ({mc['runs']} runs, seed {mc['seed']})",
                      f"ETTR p5/p50/p95 {e['p5']:.4f}/{e['p50']:.4f}/{e['p95']:.4f} (mean {mc['ettr_mean']:.4f} "
                      f"± {mc['ettr_stderr']:.4f}); interruptions p5/p50/p95 {i['p5']:.0f}/{i['p50']:.0f}/{i['p95']:.0f}"))
    t2 = Table(show_header=False)
    t2.add_column()
    t2.add_column()
    for k, v in lines:
        t2.add_row(k, v)
    console.print(t2)
    console.print(f"counts: {o['counts_source']}")
    _assumption_list(o["assumptions"])


@app.command("power")
def power_cmd(
    design: Annotated[str, typer.Argument(help="SYSTEM[xDOMAINS][@FABRIC] or a scenario YAML file.")],
    utilization: Annotated[float | None, typer.Option("--utilization", help="Accelerator load, 0..1 of the TDP range.")] = None,
    pue: Annotated[float | None, typer.Option("--pue", help="Power usage effectiveness (>= 1).")] = None,
    price_kwh: Annotated[float | None, typer.Option("--price-kwh", help="Energy price, USD per kWh.")] = None,
    defaults: DefaultsOpt = None,
    json_: JsonOpt = False,
    catalog: CatalogOpt = None,
) -> None:
    """Power by component, facility power, energy and capital cost of one design."""
    out = api.power(design, utilization=utilization, pue=pue, price_kwh=price_kwh, defaults=tuple(defaults or ()),
                    catalog=catalog_from(catalog))
    if json_:
        emit_json(out)
        return
    t = Table(title=f"Power of {out['design']} ({out['num_accelerators']:g} accelerators) at utilisation "
                    f"{out['utilization']:g}, PUE {out['pue']:g}")
    t.add_column("component")
    t.add_column("kW", justify="right")
    t.add_column("count", justify="right")
    cnt = out["counts"]
    counts_for = {"accelerators": cnt["accelerators"], "hosts": cnt["hosts"], "scaleup_fabric": cnt["scaleup_switches"],
                  "scaleout_switches": cnt["scaleout_switches"], "transceivers": cnt["transceivers"]}
    for k, v in out["by_component_kw"].items():
        t.add_row(k, f"{v:,.1f}", f"{counts_for[k]:,.0f}" if k in counts_for else "")
    t.add_row("IT total", f"{out['it_power_kw']:,.1f}", "")
    t.add_row("facility total", f"{out['facility_power_kw']:,.1f}", "")
    console.print(t)
    c = out["cost"]
    console.print(f"peak {out['peak_pflops_bf16']:,.1f} PFLOP/s BF16 -> {out['peak_gflops_per_watt_it']:.0f} GFLOP/s per IT watt")
    console.print(f"energy {c['energy_usd_per_hour']:,.0f} USD/h ({out['energy_usd_per_year']:,.0f} USD/year at "
                  f"{c['energy_usd_per_kwh']:g} USD/kWh); capex {c['capex_usd']:,.0f} USD "
                  f"({', '.join(f'{k} {v:,.0f}' for k, v in c['capex_by_component_usd'].items())}); "
                  f"{c['usd_per_hour']:,.0f} USD/h with {c['amortization_years']:g}-year amortisation")
    console.print(f"counts: {out['counts_source']}")
    _assumption_list(out["assumptions"])


@app.command("compare")
def compare_cmd(
    designs: Annotated[list[str], typer.Argument(help="Designs: SYSTEM[xDOMAINS][@FABRIC] or scenario YAML files.")],
    model: Annotated[str | None, typer.Option("--model", help="Model for goodput, step time and tokens per dollar.")] = None,
    gpus: Annotated[int | None, typer.Option("--gpus", help="Accelerators per design when a design gives no xDOMAINS.")] = None,
    mfu: Annotated[float | None, typer.Option("--mfu", help="Assumed MFU instead of the planner's step time.")] = None,
    global_batch: Annotated[int | None, typer.Option("--global-batch", help="Sequences per step for the planner (as in a sweep); default: the planner's, adjusted per design.")] = None,
    utilization: Annotated[float | None, typer.Option("--utilization", help="Accelerator load, 0..1.")] = None,
    pue: Annotated[float | None, typer.Option("--pue", help="Power usage effectiveness (>= 1).")] = None,
    price_kwh: Annotated[float | None, typer.Option("--price-kwh", help="Energy price, USD per kWh.")] = None,
    spares: Annotated[int | None, typer.Option("--spares", help="Spare replacement units per design (default: auto).")] = None,
    no_plan: Annotated[bool, typer.Option("--no-plan", help="Do not ask the planner for step times.")] = False,
    memory_margin: MemoryMarginOpt = None,
    defaults: DefaultsOpt = None,
    json_: JsonOpt = False,
    catalog: CatalogOpt = None,
) -> None:
    """Side-by-side comparison of cluster designs: compute, memory, bandwidth, power, cost, goodput."""
    # the checks and the comparison live in the facade, so the web app gets the same errors
    out = api.compare(designs, model=model, gpus=gpus, mfu=mfu, global_batch=global_batch, utilization=utilization, pue=pue, price_kwh=price_kwh,
                      spares=spares, no_plan=no_plan, defaults=tuple(defaults or ()), catalog=catalog_from(catalog),
                      memory_margin=memory_margin)
    if json_:
        emit_json(out)
        return
    _render_compare(out)


def _fmt(v: Any, spec: str = ".3g") -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return format(v, spec)
    return str(v)


def _render_compare(out: dict) -> None:
    rows = out["designs"]
    t = Table(title="Design comparison")
    t.add_column("metric")
    for r in rows:
        t.add_column(r["name"], justify="right")
    spec = [
        ("accelerators", "num_accelerators", ",.0f"), ("accelerator", "accelerator", ""),
        ("scale-out fabric", "fabric", ""),
        ("peak BF16 PFLOP/s", "peak_pflops_bf16", ",.1f"), ("HBM TB", "hbm_tb", ",.1f"),
        ("HBM TB/s", "hbm_tbps", ",.0f"), ("scale-up GB/s per GPU (uni)", "scaleup_gbytes_per_s_per_gpu", ".0f"),
        ("scale-out Gb/s per GPU", "scaleout_gbits_per_s_per_gpu", ".0f"),
        ("IT power kW (at utilisation)", "power_kw", ",.1f"), ("IT power kW (rated)", "rated_power_kw", ",.1f"),
        ("facility power kW", "facility_power_kw", ",.1f"), ("published power kW", "published_power_kw", ",.0f"),
        ("peak GFLOP/s per W (rated)", "peak_gflops_per_watt", ".0f"), ("capex USD", "cost_usd", ",.0f"),
        ("USD per hour", "usd_per_hour", ",.0f"), ("interruptions/day", "interruptions_per_day", ".3g"),
        ("MTBI h", "mtbi_h", ".3g"), ("model", "model", ""), ("step time s", "step_time_s", ".3g"),
        ("MFU", "mfu", ".3f"), ("ETTR (goodput)", "ettr", ".4f"), ("tokens/s", "tokens_per_s", ".4g"),
        ("tokens/day (x ETTR)", "tokens_per_day", ".4g"), ("tokens per USD", "tokens_per_usd", ",.0f"),
        ("USD per M tokens", "usd_per_million_tokens", ".3f"), ("tokens per MWh", "tokens_per_mwh", ".4g"),
        ("throughput basis", "performance_basis", ""),
    ]
    for label, key, f in spec:
        t.add_row(label, *[_fmt(r.get(key), f) if f else _fmt(r.get(key)) for r in rows])
    console.print(t)
    for rr in out.get("ratios_vs_first", []):
        if rr.get("power"):
            console.print(f"{rr['name']} vs {rows[0]['name']} (rated IT power): power x{rr['power']:.2f}; "
                          f"{rows[0]['name']} is x{rr['flops_per_watt']:.2f} per FLOP/W, x{rr['hbm_bw_per_watt']:.2f} "
                          f"per HBM TB/s/W, x{rr['hbm_per_watt']:.2f} per HBM TB/W")
    for r in rows:
        if r.get("performance_error"):
            console.print(f"{r['name']}: {r['performance_error']}")
    if out.get("omitted"):
        console.print(str(out["omitted"]), style="yellow")
    console.print("counts: " + "; ".join(f"{r['name']}: {r['counts']['source']}" for r in rows))
    _assumption_list([a for r in rows for a in r.get("assumptions", [])])

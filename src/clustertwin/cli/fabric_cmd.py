"""``clustertwin fabric COLLECTIVE|step|matrix|jobs``: the flow-level scale-out simulator."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from .. import api
from ..errors import InputError
from ..units import format_bytes, format_seconds, parse_size
from ._common import CatalogOpt, JsonOpt, OversubOpt, app, catalog_from, console, emit_json

_BUS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")

def _pairs(items: list[str] | None, flag: str) -> dict:
    import math

    out: dict = {}
    for it in items or ():
        key, sep, val = it.partition(":")
        try:
            out[int(key)] = float(val)
        except ValueError:
            raise InputError(f"{flag} {it!r}: expected INDEX:VALUE, e.g. 3:0.5") from None
        if not sep:
            raise InputError(f"{flag} {it!r}: expected INDEX:VALUE, e.g. 3:0.5")
        if not math.isfinite(out[int(key)]) or out[int(key)] < 0:
            raise InputError(f"{flag} {it!r}: the value must be a finite number >= 0, got {val.strip()!r}",
                             hint="e.g. 3:0.5 (a fraction for --slow-nic/--degrade-link, seconds for --straggler)")
    return out


def _print_run(d: dict, title: str) -> None:
    console.print(title, style="bold")
    console.print(f"completion time  {format_seconds(d['time_s'])}   ideal (NIC line rate, no contention) "
                  f"{format_seconds(d['ideal_time_s'])}   efficiency {d['efficiency']:.1%}")
    if "nic_gbs" in d:
        console.print(f"achieved per-NIC bandwidth {d['nic_gbs']:.1f} GB/s of line rate {d['nic_line_gbs']:.1f} GB/s"
                      + (f"   algbw (size / scale-out time) {d['algbw_gbs']:.1f} GB/s" if "algbw_gbs" in d else ""))
    if d.get("slowdown") is not None:
        console.print(f"slowdown vs healthy fabric  {d['slowdown']:.3f}x (healthy {format_seconds(d['healthy_time_s'])})")
    console.print(f"flows {d['flows_simulated']:,} simulated ({d['flows_total']:,.0f} with repeats; "
                  f"{d['scaleup_flows']:,} inside scale-up domains), {d['events']} events, "
                  f"{d['solver_iterations']} solver iterations, {d['wall_s']:.2f} s")
    t = Table(title="utilisation per tier (over the completion time)")
    for c in ("tier", "links", "used", "mean util", "max util", "failed", "bytes"):
        t.add_column(c)
    for r in d["tier_utilisation"]:
        t.add_row(r["tier"], str(r["links"]), str(r["used"]), f"{r['mean_util']:.1%}", f"{r['max_util']:.1%}",
                  str(r["failed"]), format_bytes(r["bytes"]))
    console.print(t)
    if d["hottest_links"]:
        h = Table(title="hottest links")
        for c in ("link", "util", "bytes"):
            h.add_column(c)
        for r in d["hottest_links"]:
            h.add_row(r["link"], f"{r['util']:.1%}", format_bytes(r["bytes"]))
        console.print(h)


@app.command("fabric")
def fabric_cmd(
    what: Annotated[str, typer.Argument(help="all_reduce | all_gather | reduce_scatter | all_to_all | step | matrix | jobs")],
    system: Annotated[str, typer.Option("--system", help="system id (the repeated scale-up unit)")] = "hgx-h100",
    domains: Annotated[int, typer.Option("--domains", help="number of scale-up domains")] = 16,
    fabric: Annotated[str | None, typer.Option("--fabric", help="scale-out fabric id (default: the system's)")] = None,
    topology: Annotated[str | None, typer.Option("--topology", help="fat-tree | rail | dual-plane (default: rail when one NIC per GPU)")] = None,
    oversubscription: OversubOpt = 1.0,
    tiers: Annotated[int | None, typer.Option("--tiers", help="2 or 3 (default: fewest that fit)")] = None,
    routing: Annotated[str, typer.Option("--routing", help="ecmp | adaptive | spray")] = "ecmp",
    pxn: Annotated[bool, typer.Option("--pxn/--no-pxn", help="rail-optimised PXN (move to the destination rail over NVLink first)")] = True,
    fail_links: Annotated[int, typer.Option("--fail-links", help="fail this many random switch-to-switch cables")] = 0,
    fail_switch: Annotated[list[str] | None, typer.Option("--fail-switch", help="fail a switch: leaf:N, spine:P.J, core:J.T (repeatable)")] = None,
    slow_nic: Annotated[list[str] | None, typer.Option("--slow-nic", help="NIC:FRACTION, e.g. 12:0.5 (repeatable)")] = None,
    degrade_link: Annotated[list[str] | None, typer.Option("--degrade-link", help="LINK_ID:FRACTION (repeatable)")] = None,
    straggler: Annotated[list[str] | None, typer.Option("--straggler", help="RANK:DELAY_S, e.g. 0:0.001 (repeatable; collectives)")] = None,
    seed: Annotated[int, typer.Option("--seed", help="seed for ECMP hashing and random failures")] = 0,
    size: Annotated[str, typer.Option("--size", help="collective size per rank (nccl-tests semantics), e.g. 1G")] = "1G",
    jobs: Annotated[Path | None, typer.Option("--jobs", help="jobs YAML for multi-tenancy")] = None,
    matrix: Annotated[Path | None, typer.Option("--matrix", help="traffic matrix CSV/YAML: src,dst,bytes[,start_s]")] = None,
    tp: Annotated[int, typer.Option("--tp", help="step: tensor-parallel degree")] = 8,
    pp: Annotated[int, typer.Option("--pp", help="step: pipeline-parallel degree")] = 1,
    dp: Annotated[int | None, typer.Option("--dp", help="step: data-parallel degree (default: fill the GPUs)")] = None,
    act_size: Annotated[str, typer.Option("--act-size", help="step: activation bytes per micro-batch per PP send")] = "64M",
    microbatches: Annotated[int, typer.Option("--microbatches", help="step: micro-batches per step")] = 8,
    max_phases: Annotated[int, typer.Option("--max-phases", help="all-to-all: most shift phases simulated (sampled above)")] = 32,
    window: Annotated[int, typer.Option("--window", help="all-to-all: domain shifts in flight at once")] = 1,
    channels: Annotated[int, typer.Option("--channels", help="sub-flows (QPs) per connection, each routed on its own")] = 1,
    top: Annotated[int, typer.Option("--top", help="hottest links to list")] = 5,
    json_: JsonOpt = False,
    catalog: CatalogOpt = None,
) -> None:
    """Flow-level simulation of scale-out traffic: completion time, bandwidth vs ideal, link utilisation.

    Example: clustertwin fabric all_reduce --system hgx-h100 --domains 1024 --routing spray
    """
    from .render import progress_bar

    out = api.simulate_fabric(
        what, system=system, domains=domains, fabric=fabric, topology=topology, oversubscription=oversubscription,
        tiers=tiers, routing=routing, pxn=pxn, fail_links=fail_links, fail_switch=tuple(fail_switch or ()),
        slow_nics=_pairs(slow_nic, "--slow-nic"), degraded_links=_pairs(degrade_link, "--degrade-link"),
        stragglers=_pairs(straggler, "--straggler"), seed=seed, size_bytes=float(parse_size(size)), jobs=jobs,
        matrix=matrix, tp=tp, pp=pp, dp=dp, act_bytes=float(parse_size(act_size)), microbatches=microbatches,
        max_phases=max_phases, window=window, channels=channels, top=top,
        progress=lambda label: progress_bar(label, unit="phases", enabled=not json_), catalog=catalog_from(catalog))
    what_k, routing_k, n_gpus = out["what"], out["routing"], out["gpus"]
    if "jobs" in out:
        if json_:
            emit_json(out)
            return
        rows = out["jobs"]
        t = Table(title=f"{len(rows)} jobs on {n_gpus} GPUs ({out['topology']}, {routing_k})")
        for c in ("job", "gpus", "placement", "traffic", "alone", "shared", "slowdown"):
            t.add_column(c)
        for r in rows:
            t.add_row(r["name"], str(r["gpus"]), r["placement"], r["traffic"], format_seconds(r["alone_s"]),
                      format_seconds(r["shared_s"]), f"{r['slowdown']:.3f}x")
        console.print(t)
        return
    if json_:
        emit_json(out)
        return
    size_text = format_bytes(float(parse_size(size))) if what_k in _BUS else ""
    title = (f"{what_k} {size_text} over {domains} x {out['system']} ({n_gpus} GPUs) on "
             f"{out['fabric']}, {out['tiers']}-tier {out['topology']}, {routing_k}")
    _print_run(out, title)
    if out["faults"]:
        console.print("faults: " + "; ".join(out["faults"][:10]) + (" ..." if len(out["faults"]) > 10 else ""))

"""``clustertwin fabric COLLECTIVE|step|matrix|jobs``: the flow-level scale-out simulator."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from ..errors import InputError, UnknownNameError
from ..units import format_bytes, format_seconds, parse_size
from ._common import CatalogOpt, JsonOpt, app, catalog_from, console, emit_json

WHATS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "step", "matrix", "jobs")
_BUS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")


def _what(name: str) -> str:
    key = name.strip().lower().replace("-", "_")
    key = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
           "alltoall": "all_to_all", "a2a": "all_to_all"}.get(key, key)
    if key not in WHATS:
        raise UnknownNameError("fabric workload", name, WHATS,
                               hint="one of all_reduce, all_gather, reduce_scatter, all_to_all, step, matrix, jobs")
    return key


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


def _run_summary(run, size_bytes: float | None, op: str | None, n_ranks: int | None, top: int) -> dict:
    out = {
        "time_s": run.time_s,
        "ideal_time_s": run.ideal_time_s,
        "efficiency": run.efficiency,
        "routing": run.routing,
        "phases": [{"name": n, "time_s": float(t), "repeat": float(r)}
                   for n, t, r in zip(run.phase_names, run.phase_times_s, run.phase_repeats, strict=True)],
        "flows_simulated": run.n_flows,
        "flows_total": run.n_flows_total,
        "scaleup_flows": run.n_scaleup_flows,
        "scaleout_bytes": run.scaleout_bytes,
        "events": run.events,
        "solver_iterations": run.iterations,
        "wall_s": run.wall_s,
        "tier_utilisation": run.tier_summary(),
        "hottest_links": run.hottest(top),
    }
    nic = [r for r in out["tier_utilisation"] if r["tier"] == "nic-up"]
    if nic and nic[0]["used"] and run.time_s > 0:
        nics = max(1.0, nic[0]["used"] / run.topo.shape.planes)  # a NIC has one port per plane
        out["nic_gbs"] = nic[0]["bytes"] / nics / run.time_s / 1e9
        out["nic_line_gbs"] = run.topo.nic_bw / 1e9
    if op in _BUS and size_bytes and run.time_s > 0 and n_ranks:
        out["algbw_gbs"] = size_bytes / run.time_s / 1e9
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
    oversubscription: Annotated[float, typer.Option("--oversubscription", help="leaf down:up ratio (1 = full bisection)")] = 1.0,
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
    from ..limits import check_limit

    check_limit("channels", channels)
    from ..fabric import (
        Faults,
        check_routing,
        make_fabric,
        read_jobs,
        read_matrix,
        simulate_collective,
        simulate_jobs,
        simulate_phases,
        step_phases,
    )

    what_k = _what(what)
    routing_k = check_routing(routing)
    if domains < 1:
        raise InputError(f"--domains must be positive, got {domains}")
    if oversubscription < 1:
        raise InputError(f"--oversubscription must be >= 1, got {oversubscription}", hint="1 = full bisection, 2 = 2:1")
    if channels < 1:
        raise InputError(f"--channels must be >= 1, got {channels}")
    if fail_links < 0:
        raise InputError(f"--fail-links must be >= 0, got {fail_links}")
    cat = catalog_from(catalog)
    sysm = cat.system(system)
    so = cat.fabric(fabric or sysm.default_scaleout)
    n_gpus = domains * sysm.devices_per_domain
    faults = Faults(random_links=fail_links, switches=tuple(fail_switch or ()), seed=seed,
                    slow_nics=_pairs(slow_nic, "--slow-nic"), degraded=_pairs(degrade_link, "--degrade-link"),
                    stragglers=_pairs(straggler, "--straggler"))
    kw = dict(topology=topology, tiers=tiers, oversubscription=oversubscription)
    fab = make_fabric(sysm, so, n_gpus, faults=faults, catalog=cat, **kw)
    size_b = float(parse_size(size))
    header = {
        "what": what_k, "system": sysm.id, "fabric": so.id, "domains": domains, "gpus": n_gpus,
        "topology": fab.topo.shape.kind, "tiers": fab.topo.shape.tiers, "oversubscription": fab.topo.shape.oversubscription,
        "switches": fab.topo.switch_counts, "routing": routing_k, "seed": seed,
        "link_gbps": fab.topo.link_bw * 8 / 1e9, "nic_gbps": fab.topo.nic_bw * 8 / 1e9,
        "faults": list(fab.topo.failed_note),
    }

    if what_k == "jobs" or jobs is not None:
        if jobs is None:
            raise InputError("`fabric jobs` needs --jobs FILE", hint="a YAML with jobs: [{name, gpus, placement, traffic, size}]")
        specs = read_jobs(jobs)
        res = simulate_jobs(fab, specs, routing=routing_k, seed=seed, pxn=pxn)
        rows = [{"name": r.name, "gpus": r.gpus, "placement": r.placement, "traffic": r.traffic,
                 "domains": list(r.domains), "alone_s": r.alone_s, "shared_s": r.shared_s, "slowdown": r.slowdown}
                for r in res]
        if json_:
            emit_json({**header, "jobs": rows})
            return
        t = Table(title=f"{len(rows)} jobs on {n_gpus} GPUs ({fab.topo.shape.kind}, {routing_k})")
        for c in ("job", "gpus", "placement", "traffic", "alone", "shared", "slowdown"):
            t.add_column(c)
        for r in rows:
            t.add_row(r["name"], str(r["gpus"]), r["placement"], r["traffic"], format_seconds(r["alone_s"]),
                      format_seconds(r["shared_s"]), f"{r['slowdown']:.3f}x")
        console.print(t)
        return

    from .render import progress_bar

    def run_once(f, stragglers=None):
        with progress_bar(f"fabric {what_k} ({routing_k})", unit="phases", enabled=not json_) as bar:
            return _run_once(f, stragglers, bar)

    def _run_once(f, stragglers, bar):
        if what_k == "matrix":
            if matrix is None:
                raise InputError("`fabric matrix` needs --matrix FILE", hint="CSV with header src,dst,bytes[,start_s]")
            return simulate_phases(f, [read_matrix(matrix, n_gpus)], routing=routing_k, seed=seed, pxn=pxn,
                                   channels=channels, progress=bar)
        if what_k == "step":
            d = dp or n_gpus // (tp * pp)
            if d < 1 or tp * pp * d > n_gpus:
                raise InputError(f"tp*pp*dp = {tp * pp * (dp or 0)} does not fit {n_gpus} GPUs")
            phases = step_phases(tp=tp, pp=pp, dp=d, ranks_per_domain=sysm.devices_per_domain, grad_bytes=size_b,
                                 act_bytes=float(parse_size(act_size)), microbatches=microbatches)
            return simulate_phases(f, phases, routing=routing_k, seed=seed, pxn=pxn, channels=channels, progress=bar)
        return simulate_collective(f, what_k, size_b, routing=routing_k, seed=seed, pxn=pxn, max_phases=max_phases,
                                   window=window, channels=channels, stragglers=stragglers, progress=bar)

    run = run_once(fab, dict(faults.stragglers) or None)
    out = {**header, **_run_summary(run, size_b if what_k in _BUS else None, what_k, n_gpus, top)}
    if not faults.empty:
        healthy = run_once(make_fabric(sysm, so, n_gpus, **kw))
        out["healthy_time_s"] = healthy.time_s
        out["slowdown"] = run.time_s / healthy.time_s if healthy.time_s > 0 else 1.0
    if json_:
        emit_json(out)
        return
    title = (f"{what_k} {format_bytes(size_b) if what_k in _BUS else ''} over {domains} x {sysm.id} ({n_gpus} GPUs) on "
             f"{so.id}, {fab.topo.shape.tiers}-tier {fab.topo.shape.kind}, {routing_k}")
    _print_run(out, title)
    if header["faults"]:
        console.print("faults: " + "; ".join(header["faults"][:10]) + (" ..." if len(header["faults"]) > 10 else ""))

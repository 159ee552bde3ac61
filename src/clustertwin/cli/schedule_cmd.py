"""``clustertwin schedule ...``: the scheduler twin (openb GPU-sharing experiment, LLM-cluster replay,
policy comparison, topology export for Kueue / Volcano / Slurm)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from ..errors import InputError
from ._common import JsonOpt, app, console, emit_json

schedule_app = typer.Typer(help="Scheduler twin: gang / topology-aware placement, fragmentation, trace replay.",
                           no_args_is_help=True)
app.add_typer(schedule_app, name="schedule")

_LEVELS = (10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 100, 110, 120, 130)


def _seeds(text: str | None, seed: int) -> list[int]:
    if not text:
        return [seed]
    out: list[int] = []
    for part in text.split(","):
        a, dash, b = part.strip().partition("-")
        try:
            lo = int(a)
            hi = int(b) if dash else lo
        except ValueError:
            raise InputError(f"--seeds {text!r}: write seeds as 42-51 or 42,43,44") from None
        if hi < lo:
            raise InputError(f"--seeds {text!r}: range {part!r} runs backwards")
        out.extend(range(lo, hi + 1))
    if len(out) > 1000:
        raise InputError(f"--seeds {text!r} asks for {len(out)} runs; at most 1000")
    return out


@schedule_app.command("openb")
def openb_cmd(
    nodes: Annotated[str, typer.Option("--nodes", help="node CSV (openb_node_list format) or a vendored list name")] = "gpu_node",
    pods: Annotated[str, typer.Option("--pods", help="pod CSV (openb_pod_list format) or a vendored list: default, "
                                      "multigpu20..50, gpushare40..100, gpuspec10..33")] = "default",
    policy: Annotated[str, typer.Option("--policy", help="random | dotprod | clustering | packing | bestfit | fgd")] = "fgd",
    seed: Annotated[int, typer.Option("--seed", help="seed for the arrival order, tuning and tie-break node order")] = 42,
    seeds: Annotated[str | None, typer.Option("--seeds", help="several seeds (42-51): prints their mean curve")] = None,
    json_: JsonOpt = False,
) -> None:
    """The openb experiment of Weng et al. (ATC'23, FGD): tasks arrive in a seeded random order and never
    leave; after each 1 % of the cluster's GPU capacity has arrived, the allocated share is recorded.

    Example: clustertwin schedule openb --pods default --policy fgd --seed 42 --json
    """
    from ..errors import UnknownNameError
    from ..scheduler.openb import POLICIES, POLICY_LABELS, load_nodes, load_pods, mean_curve, run_openb

    if policy not in POLICIES:
        raise UnknownNameError("openb policy", policy, POLICIES)
    seed_list = _seeds(seeds, seed)
    nd = load_nodes(nodes)
    pd_ = load_pods(pods)
    t0 = time.perf_counter()
    runs = [run_openb(nd, pd_, policy, s) for s in seed_list]
    wall = time.perf_counter() - t0
    if len(runs) == 1:
        out = runs[0].to_json()
    else:
        out = {"policy": policy, "seeds": seed_list, "total_gpus": nd.total_gpus, "curve": mean_curve(runs),
               "workload": pd_.source, "nodes": nd.source, "num_failed_mean": sum(r.num_failed for r in runs) / len(runs)}
    out["wall_s"] = round(wall, 3)
    if json_:
        emit_json(out)
        return
    cv = {p["arrived_pct"]: p["allocated_pct"] for p in out["curve"]}
    seeds_txt = f"seed {seed_list[0]}" if len(seed_list) == 1 else f"mean of {len(seed_list)} seeds"
    console.print(f"{POLICY_LABELS[policy]} on {pd_.source} / {nd.source}: {nd.total_gpus:,} GPUs, "
                  f"{len(pd_):,} tasks in the list, {seeds_txt}, {wall:.2f} s")
    t = Table(title="GPU capacity arrived vs allocated (% of milli-GPU)")
    t.add_column("arrived %", justify="right")
    t.add_column("allocated %", justify="right")
    for k in _LEVELS:
        if k in cv:
            t.add_row(str(k), f"{cv[k]:.2f}")
    console.print(t)
    if len(runs) == 1:
        console.print(f"{runs[0].num_pods:,} tasks arrived (tuned to 130 % of capacity), {runs[0].num_failed:,} could not be placed")


# ------------------------------------------------------------------------------------ LLM clusters
ClusterOpt = Annotated[str, typer.Option("--cluster", "--system", help="catalog system id (the repeated scale-up unit), e.g. gb200-nvl72, hgx-h100")]
DomainsOpt = Annotated[int, typer.Option("--domains", help="number of scale-up (NVLink) domains")]
FabricOpt = Annotated[str | None, typer.Option("--fabric", help="scale-out fabric id (default: the system's)")]
TopoOpt = Annotated[str, typer.Option("--topology", help="scale-out topology: rail | fat-tree | dual-plane")]
OversubOpt = Annotated[float, typer.Option("--oversubscription", help="leaf down:up ratio (1 = full bisection)")]
UnhealthyOpt = Annotated[int, typer.Option("--unhealthy-per-domain", help="nodes (trays) per NVLink domain that are not schedulable (GB200 field report: 2 of 18)")]
# Options shared by `replay` and `compare` (one declaration, one meaning).
QueueingOpt = Annotated[str, typer.Option("--queueing", help="strict (a blocked head blocks the queue) | besteffort")]
FaultsOpt = Annotated[float, typer.Option("--faults", help="node failures at this multiple of the reliability model's rate (0 = none)")]
ReplaySeedOpt = Annotated[int, typer.Option("--seed", help="seed for generated jobs, unhealthy trays and failures")]
LoadOpt = Annotated[float, typer.Option("--load", help="llm:N only: offered load (fraction of the cluster's GPU-seconds)")]
JobsCsvOpt = Annotated[Path | None, typer.Option("--jobs-csv", help="write the per-job results (placement, times, penalty; every policy) to this CSV")]
DbOpt = Annotated[Path | None, typer.Option("--db", help="results database (default: the per-user one)")]
StoreOpt = Annotated[bool, typer.Option("--store/--no-store", help="store the run(s) in --db (default on)")]


def _inventory(cluster: str, domains: int, fabric: str | None, topology: str, oversubscription: float,
               unhealthy: int, seed: int):
    from ..scheduler.inventory import build_inventory

    return build_inventory(cluster, domains, fabric, topology=topology, oversubscription=oversubscription,
                           unhealthy_per_domain=unhealthy, seed=seed)


def _jobs(ref: str, inv, seed: int, load: float):
    """A job file, or ``llm:N`` for N generated LLM-cluster jobs."""
    from ..scheduler.jobs import generate_llm_trace, read_jobs

    if ref.startswith("llm:"):
        try:
            n = int(ref[4:])
        except ValueError:
            raise InputError(f"JOBS {ref!r}: write llm:N with N a whole number of jobs, e.g. llm:10000") from None
        if not 1 <= n <= 1_000_000:
            raise InputError(f"JOBS {ref!r}: N must be 1 .. 1,000,000")
        from ..scheduler.replay import StepModel

        sm = StepModel(inv)
        return generate_llm_trace(n, cluster_gpus=inv.schedulable_gpus, gpus_per_node=inv.gpus_per_node,
                                  gpus_per_domain=inv.max_domain_gpus, seed=seed, load=load, step_time=sm.ideal)
    return read_jobs(ref)


_METRIC_COLS = (("jct_mean_h", "JCT h", "{:.2f}"), ("jct_p95_h", "p95", "{:.1f}"),
                ("queue_mean_h", "wait h", "{:.2f}"), ("queue_p95_h", "p95", "{:.1f}"),
                ("utilisation", "util", "{:.0%}"), ("goodput", "goodput", "{:.0%}"),
                ("stranded_domain_gpus", "strand", "{:.0f}"), ("fgd_frag_ratio", "frag", "{:.0%}"),
                ("mean_step_penalty", "penalty", "{:+.1%}"), ("lost_gpu_h", "lost GPUh", "{:,.0f}"))


def _store(results, inv, jobs_src: str, db: Path | None) -> dict | None:
    from ..scheduler.record import store_schedule

    try:
        return store_schedule(results, inv, jobs_src, db)
    except InputError as exc:
        from ._common import console_err

        console_err.print(f"warning: results not stored: {exc.message} (pass --db PATH or --no-store)")
        return None


def _replay(jt, inv, policy: str, *, seed: int, faults: float, queueing: str, bar: bool):
    """One policy's replay, with a progress bar on stderr (none for --json or when stderr is no terminal)."""
    from ..scheduler.replay import replay
    from .render import progress_bar

    with progress_bar(f"replay {policy}", unit="jobs", enabled=bar) as progress:
        return replay(jt, inv, policy, seed=seed, fault_scale=faults, queueing=queueing, progress=progress)


@schedule_app.command("replay")
def replay_cmd(
    jobs: Annotated[str, typer.Argument(help="job file (YAML or CSV, see docs/scheduler.md) or llm:N to generate N LLM-cluster jobs")],
    cluster: ClusterOpt = "gb200-nvl72",
    domains: DomainsOpt = 8,
    fabric: FabricOpt = None,
    topology: TopoOpt = "rail",
    oversubscription: OversubOpt = 1.0,
    unhealthy_per_domain: UnhealthyOpt = 0,
    policy: Annotated[str, typer.Option("--policy", help="fifo | backfill | priority | binpack | tas | slurm-block | dra")] = "tas",
    queueing: QueueingOpt = "strict",
    faults: FaultsOpt = 0.0,
    seed: ReplaySeedOpt = 0,
    load: LoadOpt = 0.9,
    jobs_csv: JobsCsvOpt = None,
    db: DbOpt = None,
    store: StoreOpt = True,
    per_job: Annotated[bool, typer.Option("--per-job/--no-per-job", help="--json: include the per-job records")] = False,
    json_: JsonOpt = False,
) -> None:
    """Replay a job trace on a catalog cluster under one policy: queueing delay, JCT, utilisation,
    fragmentation, placement and its step-time penalty, goodput, lost GPU-hours.

    Example: clustertwin schedule replay llm:10000 --cluster gb200-nvl72 --domains 256 --unhealthy-per-domain 2 --policy tas
    """
    inv = _inventory(cluster, domains, fabric, topology, oversubscription, unhealthy_per_domain, seed)
    jt = _jobs(jobs, inv, seed, load)
    res = _replay(jt, inv, policy, seed=seed, faults=faults, queueing=queueing, bar=not json_)
    if jobs_csv is not None:
        _write_jobs_csv(jobs_csv, [res])
    stored = _store([res], inv, jt.source, db) if store else None
    if json_:
        out = res.to_json(per_job=per_job)
        out["jobs_source"] = jt.source
        if stored:
            out["stored"] = stored
        emit_json(out)
        return
    _print_inventory(inv)
    console.print(f"{len(jt):,} jobs from {jt.source}; policy {policy} ({queueing} queueing); "
                  f"replayed in {res.wall_s:.1f} s ({res.step_model_evaluations} step-model evaluations)")
    _print_metrics([res])
    for n in res.notes:
        console.print(f"note: {n}")
    if stored:
        console.print(f"stored in {stored['db']} as {stored['id']}")


@schedule_app.command("compare")
def compare_cmd(
    jobs: Annotated[str, typer.Argument(help="job file (YAML or CSV) or llm:N")],
    cluster: ClusterOpt = "gb200-nvl72",
    domains: DomainsOpt = 8,
    fabric: FabricOpt = None,
    topology: TopoOpt = "rail",
    oversubscription: OversubOpt = 1.0,
    unhealthy_per_domain: UnhealthyOpt = 0,
    policies: Annotated[str, typer.Option("--policies", help="comma-separated gang policies")] = "fifo,backfill,priority,binpack,tas,slurm-block,dra",
    queueing: QueueingOpt = "strict",
    faults: FaultsOpt = 0.0,
    seed: ReplaySeedOpt = 0,
    load: LoadOpt = 0.9,
    jobs_csv: JobsCsvOpt = None,
    db: DbOpt = None,
    store: StoreOpt = True,
    json_: JsonOpt = False,
) -> None:
    """Several policies on one trace and one cluster, side by side.

    Example: clustertwin schedule compare llm:2000 --cluster gb200-nvl72 --domains 64 --policies fifo,tas,dra
    """
    from ..scheduler.policies import gang_policy

    names = [p.strip() for p in policies.split(",") if p.strip()]
    if not names:
        raise InputError("--policies is empty", hint="e.g. --policies fifo,tas,dra")
    for p in names:
        gang_policy(p)
    inv = _inventory(cluster, domains, fabric, topology, oversubscription, unhealthy_per_domain, seed)
    jt = _jobs(jobs, inv, seed, load)
    results = [_replay(jt, inv, p, seed=seed, faults=faults, queueing=queueing, bar=not json_) for p in names]
    if jobs_csv is not None:
        _write_jobs_csv(jobs_csv, results)
    stored = _store(results, inv, jt.source, db) if store else None
    if json_:
        out = {"inventory": inv.summary(), "jobs_source": jt.source, "jobs": len(jt), "queueing": queueing,
               "policies": [{"policy": r.policy, "metrics": r.metrics, "wall_s": r.wall_s} for r in results]}
        if stored:
            out["stored"] = stored
        emit_json(out)
        return
    _print_inventory(inv)
    console.print(f"{len(jt):,} jobs from {jt.source}; {queueing} queueing")
    _print_metrics(results)
    if stored:
        console.print(f"stored in {stored['db']} as {stored['id']}")


def _print_inventory(inv) -> None:
    s = inv.summary()
    console.print(f"{s['system']} x {s['nvlink_domains']} NVLink domains ({s['gpus_per_domain']} GPUs), "
                  f"{s['nodes']:,} nodes, {s['schedulable_gpus']:,} of {s['gpus']:,} GPUs schedulable, "
                  f"{s['leaf_blocks']} leaf blocks, {s['spine_blocks']} spine blocks ({s['fabric']} {s['topology']}, "
                  f"{s['tiers']}-tier, {s['oversubscription']:g}:1)")


def _print_metrics(results) -> None:
    t = Table(title="JCT / wait: hours (mean, p95); util while jobs arrive; strand: free GPUs in partly used "
                "domains; frag: FGD measure; penalty: mean step-time penalty of training jobs")
    t.add_column("policy")
    for _, head, _ in _METRIC_COLS:
        t.add_column(head, justify="right")
    for r in results:
        t.add_row(r.policy, *[fmt.format(r.metrics[k]) for k, _, fmt in _METRIC_COLS])
    console.print(t)


def _write_jobs_csv(path: Path, results) -> None:
    import csv
    import io

    from ..userfiles import write_atomic

    buf = io.StringIO()
    rows = [dict(policy=r.policy, **j.to_dict()) for r in results for j in r.jobs]
    w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    write_atomic(path, buf.getvalue())


@schedule_app.command("gen-trace")
def gen_trace_cmd(
    out: Annotated[Path, typer.Argument(help="output job file: .yaml or .csv")],
    jobs: Annotated[int, typer.Option("--jobs", help="number of jobs")] = 10000,
    cluster: ClusterOpt = "gb200-nvl72",
    domains: DomainsOpt = 256,
    fabric: FabricOpt = None,
    unhealthy_per_domain: UnhealthyOpt = 2,
    load: Annotated[float, typer.Option("--load", help="offered load (fraction of the cluster's GPU-seconds)")] = 0.9,
    seed: Annotated[int, typer.Option("--seed", help="seed")] = 0,
    json_: JsonOpt = False,
) -> None:
    """Generate an LLM-cluster job mix (8 .. 8,192 GPUs, heavy-tailed run times, a few huge gangs,
    pre-training jobs with a model + plan) sized for a catalog cluster.

    Example: clustertwin schedule gen-trace jobs.csv --jobs 10000 --cluster gb200-nvl72 --domains 256
    """
    import yaml

    from ..scheduler.jobs import write_jobs_csv
    from ..userfiles import write_atomic

    if not 0 < load <= 10:
        raise InputError(f"--load must be in (0, 10], got {load}")
    inv = _inventory(cluster, domains, fabric, "rail", 1.0, unhealthy_per_domain, seed)
    jt = _jobs(f"llm:{jobs}", inv, seed, load)
    if out.suffix.lower() == ".csv":
        write_atomic(out, write_jobs_csv(jt))
    elif out.suffix.lower() in (".yaml", ".yml"):
        write_atomic(out, yaml.safe_dump({"jobs": [j.model_dump(exclude_none=True) for j in jt.specs]}, sort_keys=False))
    else:
        raise InputError(f"{str(out)!r}: write .csv or .yaml", hint="the suffix picks the format")
    gpus = [j.gpus for j in jt.specs]
    summary = {"file": str(out), "jobs": len(jt), "max_gpus": max(gpus), "min_gpus": min(gpus),
               "training_jobs": sum(1 for j in jt.specs if j.model), "last_submit_h": jt.specs[-1].submit_s / 3600}
    if json_:
        emit_json(summary)
        return
    console.print(f"wrote {len(jt):,} jobs to {out} ({summary['min_gpus']}..{summary['max_gpus']} GPUs, "
                  f"{summary['training_jobs']} training jobs, arrivals over {summary['last_submit_h']:.1f} h)")


@schedule_app.command("export")
def export_cmd(
    format: Annotated[str, typer.Option("--format", help="kueue | volcano | slurm")],
    cluster: ClusterOpt = "gb200-nvl72",
    domains: DomainsOpt = 8,
    fabric: FabricOpt = None,
    topology: TopoOpt = "rail",
    unhealthy_per_domain: UnhealthyOpt = 0,
    seed: Annotated[int, typer.Option("--seed", help="seed for the unhealthy trays")] = 0,
    name: Annotated[str, typer.Option("--name", help="topology / flavor name")] = "clustertwin",
    node_prefix: Annotated[str, typer.Option("--node-prefix", help="node name prefix (node-00000 ...)")] = "node-",
    out: Annotated[Path | None, typer.Option("--out", help="write to this file instead of stdout")] = None,
) -> None:
    """Write the cluster's topology for a real scheduler: Kueue Topology + ResourceFlavor + node labels,
    Volcano HyperNodes, or Slurm topology.yaml (topology/block).

    Example: clustertwin schedule export --format slurm --cluster gb200-nvl72 --domains 16 --unhealthy-per-domain 2
    """
    import sys

    from ..scheduler.export import export_topology
    from ..userfiles import write_atomic

    inv = _inventory(cluster, domains, fabric, topology, 1.0, unhealthy_per_domain, seed)
    text = export_topology(inv, format, name=name, node_prefix=node_prefix)
    if out is not None:
        write_atomic(out, text)
        console.print(f"wrote {format} topology for {inv.num_nodes:,} nodes to {out}")
        return
    sys.stdout.write(text)

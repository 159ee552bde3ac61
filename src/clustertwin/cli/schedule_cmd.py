"""``clustertwin schedule ...``: the scheduler twin (openb GPU-sharing experiment, LLM-cluster replay,
policy comparison, topology export for Kueue / Volcano / Slurm)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from .. import api
from ..errors import InputError
from ._common import JsonOpt, OversubOpt, app, console, emit_json

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
    seed_list = _seeds(seeds, seed)
    out = api.schedule_openb(nodes=nodes, pods=pods, policy=policy, seeds=tuple(seed_list))
    if json_:
        emit_json(out)
        return
    cv = {p["arrived_pct"]: p["allocated_pct"] for p in out["curve"]}
    seeds_txt = f"seed {seed_list[0]}" if len(seed_list) == 1 else f"mean of {len(seed_list)} seeds"
    console.print(f"{out['policy_label']} on {out['workload']} / {out['nodes']}: {out['total_gpus']:,} GPUs, "
                  f"{out['tasks_in_list']:,} tasks in the list, {seeds_txt}, {out['wall_s']:.2f} s")
    t = Table(title="GPU capacity arrived vs allocated (% of milli-GPU)")
    t.add_column("arrived %", justify="right")
    t.add_column("allocated %", justify="right")
    for k in _LEVELS:
        if k in cv:
            t.add_row(str(k), f"{cv[k]:.2f}")
    console.print(t)
    if len(seed_list) == 1:
        console.print(f"{out['num_pods']:,} tasks arrived (tuned to 130 % of capacity), {out['num_failed']:,} could not be placed")


# ------------------------------------------------------------------------------------ LLM clusters
ClusterOpt = Annotated[str, typer.Option("--cluster", "--system", help="catalog system id (the repeated scale-up unit), e.g. gb200-nvl72, hgx-h100")]
DomainsOpt = Annotated[int, typer.Option("--domains", help="number of scale-up (NVLink) domains")]
FabricOpt = Annotated[str | None, typer.Option("--fabric", help="scale-out fabric id (default: the system's)")]
TopoOpt = Annotated[str, typer.Option("--topology", help="scale-out topology: rail | fat-tree | dual-plane")]
UnhealthyOpt = Annotated[int, typer.Option("--unhealthy-per-domain", help="nodes (trays) per NVLink domain that are not schedulable (GB200 field report: 2 of 18)")]
# Options shared by `replay` and `compare` (one declaration, one meaning).
QueueingOpt = Annotated[str, typer.Option("--queueing", help="strict (a blocked head blocks the queue) | besteffort")]
FaultsOpt = Annotated[float, typer.Option("--faults", help="node failures at this multiple of the reliability model's rate (0 = none)")]
ReplaySeedOpt = Annotated[int, typer.Option("--seed", help="seed for generated jobs, unhealthy trays and failures")]
LoadOpt = Annotated[float, typer.Option("--load", help="llm:N only: offered load (fraction of the cluster's GPU-seconds)")]
JobsCsvOpt = Annotated[Path | None, typer.Option("--jobs-csv", help="write the per-job results (placement, times, penalty; every policy) to this CSV")]
DbOpt = Annotated[Path | None, typer.Option("--db", help="results database (default: the per-user one)")]
StoreOpt = Annotated[bool, typer.Option("--store/--no-store", help="store the run(s) in --db (default on)")]


_METRIC_COLS = (("jct_mean_h", "JCT h", "{:.2f}"), ("jct_p95_h", "p95", "{:.1f}"),
                ("queue_mean_h", "wait h", "{:.2f}"), ("queue_p95_h", "p95", "{:.1f}"),
                ("utilisation", "util", "{:.0%}"), ("goodput", "goodput", "{:.0%}"),
                ("stranded_domain_gpus", "strand", "{:.0f}"), ("fgd_frag_ratio", "frag", "{:.0%}"),
                ("mean_step_penalty", "penalty", "{:+.1%}"), ("lost_gpu_h", "lost GPUh", "{:,.0f}"))


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
    doc = _replay(jobs, cluster=cluster, domains=domains, fabric=fabric, topology=topology,
                  oversubscription=oversubscription, unhealthy_per_domain=unhealthy_per_domain, policies=(policy,),
                  queueing=queueing, faults=faults, seed=seed, load=load, jobs_csv=jobs_csv, db=db, store=store,
                  per_job=per_job, json_=json_)
    res, stored = doc["results"][0], doc.get("stored")
    if json_:
        out = {**res, "jobs_source": doc["jobs_source"]}
        if stored:
            out["stored"] = stored
        emit_json(out)
        return
    _print_inventory(doc["inventory"])
    console.print(f"{doc['jobs']:,} jobs from {doc['jobs_source']}; policy {policy} ({queueing} queueing); "
                  f"replayed in {res['wall_s']:.1f} s ({res['step_model_evaluations']} step-model evaluations)")
    _print_metrics(doc["results"])
    for n in res["notes"]:
        console.print(f"note: {n}")
    if stored:
        console.print(f"stored in {stored['db']} as {stored['id']}")


def _replay(jobs: str, *, json_: bool, **kw):
    """The replay through the facade, with a progress bar per policy on stderr (none for --json or when stderr
    is no terminal) and the store warning printed."""
    from ._common import console_err
    from .render import progress_bar

    doc = api.schedule_replay(jobs, progress=lambda label: progress_bar(label, unit="jobs", enabled=not json_), **kw)
    if doc.get("store_warning"):
        console_err.print(f"warning: results not stored: {doc['store_warning']} (pass --db PATH or --no-store)")
    return doc


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
    doc = _replay(jobs, cluster=cluster, domains=domains, fabric=fabric, topology=topology,
                  oversubscription=oversubscription, unhealthy_per_domain=unhealthy_per_domain,
                  policies=tuple(policies.split(",")), queueing=queueing, faults=faults, seed=seed, load=load,
                  jobs_csv=jobs_csv, db=db, store=store, json_=json_)
    stored = doc.get("stored")
    if json_:
        out = {k: doc[k] for k in ("inventory", "jobs_source", "jobs", "queueing")}
        out["policies"] = [{"policy": r["policy"], "metrics": r["metrics"], "wall_s": r["wall_s"]}
                           for r in doc["results"]]
        if stored:
            out["stored"] = stored
        emit_json(out)
        return
    _print_inventory(doc["inventory"])
    console.print(f"{doc['jobs']:,} jobs from {doc['jobs_source']}; {queueing} queueing")
    _print_metrics(doc["results"])
    if stored:
        console.print(f"stored in {stored['db']} as {stored['id']}")


def _print_inventory(s: dict) -> None:
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
        t.add_row(r["policy"], *[fmt.format(r["metrics"][k]) for k, _, fmt in _METRIC_COLS])
    console.print(t)


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
    summary = api.schedule_trace(out, jobs=jobs, cluster=cluster, domains=domains, fabric=fabric,
                                 unhealthy_per_domain=unhealthy_per_domain, load=load, seed=seed)
    if json_:
        emit_json(summary)
        return
    console.print(f"wrote {summary['jobs']:,} jobs to {out} ({summary['min_gpus']}..{summary['max_gpus']} GPUs, "
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

    from ..userfiles import write_atomic

    doc = api.schedule_export(format, cluster=cluster, domains=domains, fabric=fabric, topology=topology,
                              unhealthy_per_domain=unhealthy_per_domain, seed=seed, name=name, node_prefix=node_prefix)
    text = doc["text"]
    if out is not None:
        write_atomic(out, text)
        console.print(f"wrote {format} topology for {doc['nodes']:,} nodes to {out}")
        return
    sys.stdout.write(text)

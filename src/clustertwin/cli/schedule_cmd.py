"""``clustertwin schedule ...``: the scheduler twin (openb GPU-sharing experiment, LLM-cluster replay,
policy comparison, topology export for Kueue / Volcano / Slurm)."""

from __future__ import annotations

import time
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
    console.print(f"[bold]{POLICY_LABELS[policy]}[/] on {pd_.source} / {nd.source}: {nd.total_gpus:,} GPUs, "
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

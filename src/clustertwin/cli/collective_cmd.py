"""``clustertwin collective`` (nccl-tests-style prediction) and ``clustertwin calibrate``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .. import api
from ._common import (
    CatalogOpt,
    FailLinksOpt,
    JsonOpt,
    NetOversubOpt,
    NetTopologyOpt,
    NetworkOpt,
    RoutingOpt,
    SeedOpt,
    app,
    catalog_from,
    console,
    emit_json,
)


@app.command("collective")
def collective_cmd(
    op: Annotated[str, typer.Argument(help="all_reduce | all_gather | reduce_scatter | all_to_all | broadcast | reduce | send_recv")],
    system: Annotated[str, typer.Option("--system", help="System id, e.g. hgx-h100 (see `clustertwin catalog list systems`).")] = "hgx-h100",
    domains: Annotated[int | None, typer.Option("--domains", help="Scale-up domains the group spans (default: from --gpus, else 1).")] = None,
    gpus: Annotated[int | None, typer.Option("--gpus", help="Ranks in the group (default: every device of the domains).")] = None,
    fabric: Annotated[str | None, typer.Option("--fabric", help="Scale-out fabric id (default: the system's).")] = None,
    sizes: Annotated[str, typer.Option("--sizes", help="nccl-tests sizes: MIN:MAX[:FACTOR] (powers of 2 by default), a list 1M,64M, or one size.")] = "8:8G",
    algo: Annotated[str, typer.Option("--algo", help="auto (NCCL's choice) | ring | tree | nvls | collnet | hier | pat | direct | pxn | pairwise")] = "auto",
    dtype: Annotated[str, typer.Option("--dtype", help="Element type for the count column (nccl-tests -d): float, half, bfloat16 ...")] = "float",
    network: NetworkOpt = "analytical",
    routing: RoutingOpt = None,
    topology: NetTopologyOpt = None,
    oversubscription: NetOversubOpt = 1.0,
    fail_links: FailLinksOpt = 0,
    seed: SeedOpt = 0,
    json_: JsonOpt = False,
    catalog: CatalogOpt = None,
) -> None:
    """Predict an nccl-tests run: size, count, type, time(us), algbw, busbw per message size.

    Example: clustertwin collective all_reduce --system hgx-h100 --domains 4 --sizes 1M:1G
    """
    doc = api.collective(op, system=system, domains=domains, gpus=gpus, fabric=fabric, sizes=sizes, algo=algo,
                         dtype=dtype, network=network, routing=routing, topology=topology,
                         oversubscription=oversubscription, fail_links=fail_links, seed=seed,
                         catalog=catalog_from(catalog))
    if json_:
        emit_json(doc)
        return
    op, rows, tname = doc["collective"], doc["rows"], doc["dtype"]
    gpus, domains, g = doc["n_ranks"], doc["domains"], doc["ranks_per_domain"]
    redop = "sum" if op in ("all_reduce", "reduce_scatter", "reduce") else "none"
    root = 0 if op in ("broadcast", "reduce") else -1
    out = [
        f"# ClusterTwin prediction: {op} on {gpus} ranks ({domains} x {g} per domain) of {doc['system']}, "
        f"fabric {doc['fabric']}, algo {doc['algo']}",
        "#       size         count      type   redop    root     time   algbw   busbw  algorithm  proto",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)",
    ]
    for d in rows:
        out.append(
            f"{int(d['size_bytes']):12d}  {d['count']:12d}  {tname:>8s}  {redop:>6s}  {root:6d}  "
            f"{d['time_us']:8.2f} {d['algbw_GBps']:7.2f} {d['busbw_GBps']:7.2f}  {d['algorithm']:>9s}  {d['protocol']:>5s}"
        )
    busbw = [d["busbw_GBps"] for d in rows]
    out.append(f"# Avg bus bandwidth    : {sum(busbw) / len(busbw):.4g}")
    console.print("\n".join(out), markup=False, highlight=False, soft_wrap=True)


@app.command("calibrate")
def calibrate_cmd(
    logs: Annotated[list[Path], typer.Argument(help="nccl-tests stdout logs (e.g. all_reduce_perf -b 8 -e 8G -f 2 -g 8 > ar.log).")],
    system: Annotated[str | None, typer.Option("--system", help="System id (default: guessed from the GPU name in the log).")] = None,
    fabric: Annotated[str | None, typer.Option("--fabric", help="Scale-out fabric id (default: the system's).")] = None,
    collective: Annotated[str | None, typer.Option("--collective", help="Which collective the logs ran (default: from the log).")] = None,
    out: Annotated[Path, typer.Option("--out", help="Catalog overlay YAML to write (merged if it exists).")] = Path("calibration.yaml"),
    json_: JsonOpt = False,
    catalog: CatalogOpt = None,
) -> None:
    """Fit the collective model to nccl-tests logs and write a catalog overlay (`calibration:` section).

    Use the result with any command: clustertwin estimate ... --catalog calibration.yaml
    """
    res = api.calibrate([str(p) for p in logs], out=out, system=system, fabric=fabric, collective=collective,
                        catalog=catalog_from(catalog))
    path = res["out"]
    if json_:
        emit_json(res)
        return
    for rep in res["systems"]:
        vals = ", ".join(f"{k} = {v:.4g}" for k, v in rep["values"].items())
        console.print(
            f"{rep['system']}: {vals}  ({rep['points']} points, rms error {rep['rms_rel_err'] * 100:.1f}%, "
            f"max {rep['max_rel_err'] * 100:.1f}%)",
            markup=False,
            soft_wrap=True,
        )
        for ab in rep["alpha_beta_fits"]:
            console.print(
                f"  {ab['file']}: {ab['collective']} n={ab['n_ranks']}  alpha {ab['alpha_us']:.2f} us, "
                f"busbw {ab['busbw_GBps']:.1f} GB/s (alpha-beta fit, rms {ab['rms_rel_err_pct']:.1f}%)",
                markup=False,
                soft_wrap=True,
            )
        for note in rep["notes"]:
            console.print(f"  note: {note}", markup=False, soft_wrap=True)
    console.print(f"wrote {path}  (use it with --catalog {path})", markup=False, soft_wrap=True)


@app.command("calibrate-gpu")
def calibrate_gpu_cmd(
    out: Annotated[Path, typer.Option("--out", help="Catalog overlay YAML to write (replaced atomically).")] = Path("gpu-profile.yaml"),
    system: Annotated[str | None, typer.Option("--system", help="Catalog system id (default: guessed from the GPU name).")] = None,
    quick: Annotated[bool, typer.Option("--quick", help="Fewer shapes, sizes and repetitions (about a minute).")] = False,
    collectives: Annotated[bool, typer.Option("--collectives/--no-collectives", help="NCCL sweep when more than one GPU is visible.")] = True,
    device: Annotated[str, typer.Option("--device", hidden=True, help="cuda (default) or cpu: the same code path with tiny sizes, for tests.")] = "cuda",
    world: Annotated[int | None, typer.Option("--world", hidden=True, help="Ranks of the collective sweep (default: every visible GPU).")] = None,
    json_: JsonOpt = False,
    catalog: CatalogOpt = None,
) -> None:
    """Measure this machine's GPUs with PyTorch (GEMM, attention, HBM copy, NCCL) and write a catalog overlay.

    Needs the optional extra: pip install "clustertwin[gpu]". Use the result with any command:
    clustertwin estimate ... --catalog gpu-profile.yaml
    """
    res = api.calibrate_gpu(out=out, device=device, system=system, quick=quick, collectives=collectives, world=world,
                            catalog=catalog_from(catalog))
    path, m = res["out"], res["measured"]
    if json_:
        emit_json(res)
        return
    env = m["environment"]
    console.print(f"{env['gpu_name']} x{env['gpu_count']}  driver {env['driver']}  CUDA {env['cuda']}  torch {env['torch']}  "
                  f"(catalog system {res['system']})", markup=False, soft_wrap=True)
    for dt in sorted({g["dtype"] for g in m["gemm"]}):
        best = max((g for g in m["gemm"] if g["dtype"] == dt), key=lambda g: g["tflops"])
        console.print(f"  GEMM {dt}: best {best['tflops']:.1f} TFLOP/s at {best['m']}x{best['n']}x{best['k']}", markup=False)
    for a in m["attention"]:
        console.print(f"  SDPA causal s={a['seq_len']}: {a['tflops']:.1f} TFLOP/s", markup=False)
    console.print(f"  HBM copy: {m['copy']['GBps']:.0f} GB/s", markup=False)
    for r in m["collectives"]:
        console.print(f"  {r['op']} {r['size_bytes']} B x{r['n_ranks']}: busbw {r['busbw_GBps']:.2f} GB/s", markup=False)
    for prof in res["overlay"]["calibration"]["gpu_profile"].values():
        for k, v in prof["derived"].items():
            console.print(f"  {k}: {v}", markup=False, soft_wrap=True)
    console.print(f"wrote {path}  (use it with --catalog {path})", markup=False, soft_wrap=True)

"""Report sections for serving (``clustertwin.serving``) and scheduling (``clustertwin.scheduler``).

Both are plugged in with :func:`register_section`; each appears only when the report's data has
its part: ``collect_serving`` (the scenario's model served on its system: throughput per GPU vs
interactivity over batch sizes and TP degrees, with SLO lines and $/M tokens) and
``collect_scheduling`` (the openb GPU-sharing experiment: allocated vs arrived GPU capacity per
placement policy, Weng et al., ATC'23).
"""

from __future__ import annotations

from typing import Any

from ..errors import InputError
from . import svg
from .html import Section, _e, _skipped, figure, register_section, table

BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
TPOT_SLOS_S = (0.05, 0.02)  # 20 and 50 tokens/s per user: common interactivity targets (InferenceX plots)
SCHED_POLICIES = ("random", "bestfit", "fgd")


def collect_serving(sc: Any, *, input_len: int = 1024, output_len: int = 256,
                    usd_per_gpu_hour: float | None = None) -> dict[str, Any]:
    """Offline serving of the scenario's model on one instance of its system, per TP degree and batch."""
    from ..serving.service import ServeRequest, estimate
    from ..workload.model import builtin_models

    if sc.model.id not in builtin_models():
        raise InputError(f"serving needs a model from the zoo; the scenario's model {sc.model.id!r} is defined in the "
                         "scenario", hint="clustertwin serve estimate --model ID shows a zoo model")
    dpd = sc.system.devices_per_domain
    tps = [t for t in (1, 2, 4, 8, 16, 32, 64, 72) if t <= dpd and dpd % t == 0 or t == dpd]
    pts: list[dict[str, Any]] = []
    errors: dict[str, str] = {}
    for tp in sorted(set(tps)):
        for b in BATCHES:
            try:
                r = estimate(ServeRequest(model=sc.model.id, system=sc.system.id, gpus=tp, tp=tp, max_batch=b,
                                          offline=True, input_len=input_len, output_len=output_len), catalog=sc.catalog)
            except InputError as exc:
                errors[f"TP{tp}"] = exc.message
                break
            if r.get("kv_limited") and b > 1 and pts and pts[-1]["tp"] == tp and pts[-1]["batch"] == r.get("batch_per_rank"):
                break
            pts.append({"tp": tp, "batch": b, "per_gpu": float(r["tokens_per_s_per_gpu"]),
                        "per_user": float(r["tokens_per_s_per_user"]), "tpot_s": float(r["tpot_s"]),
                        "ttft_s": float(r["ttft_s"]), "kv_limited": bool(r.get("kv_limited"))})
    if not pts:
        raise InputError("serving: no layout of this model fits one instance of the system: "
                         + "; ".join(f"{k}: {v}" for k, v in errors.items()))
    front = _front(pts)
    for p in pts:
        p["front"] = (p["tp"], p["batch"]) in front
        if usd_per_gpu_hour:
            p["usd_per_mtok"] = usd_per_gpu_hour / (p["per_gpu"] * 3600.0) * 1e6
    return {"model": sc.model.id, "system": sc.system.id, "input_len": input_len, "output_len": output_len,
            "points": pts, "errors": errors, "usd_per_gpu_hour": usd_per_gpu_hour}


def _front(pts: list[dict[str, Any]]) -> set[tuple[int, int]]:
    """Points no other point beats on both tokens/s per GPU and tokens/s per user."""
    out = set()
    for p in pts:
        if not any(q["per_gpu"] >= p["per_gpu"] and q["per_user"] >= p["per_user"] and
                   (q["per_gpu"] > p["per_gpu"] or q["per_user"] > p["per_user"]) for q in pts):
            out.add((p["tp"], p["batch"]))
    return out


def collect_scheduling(policies: tuple[str, ...] = SCHED_POLICIES, seed: int = 42, nodes: str = "gpu_node",
                       pods: str = "default") -> dict[str, Any]:
    from ..scheduler.openb import POLICY_LABELS, load_nodes, load_pods, run_openb

    nd, pd_ = load_nodes(nodes), load_pods(pods)
    runs = []
    for p in policies:
        r = run_openb(nd, pd_, p, seed)
        runs.append({"policy": p, "label": POLICY_LABELS.get(p, p), "curve": r.curve, "num_pods": r.num_pods,
                     "num_failed": r.num_failed})
    return {"nodes": nd.source, "pods": pd_.source, "total_gpus": nd.total_gpus, "seed": seed, "runs": runs}


def _serving(data: dict[str, Any]) -> str | None:
    s = data.get("serving")
    if not s:
        return _skipped(data, "serving")
    pts = s["points"]
    lines = [(1.0 / t, f"TPOT {1e3 * t:.0f} ms ({1 / t:.0f} tok/s/user)") for t in TPOT_SLOS_S]
    chart = svg.scatter("serving-pareto", f"Serving {s['model']} on {s['system']}: throughput vs interactivity",
                        [{"x": p["per_user"], "y": p["per_gpu"], "front": p["front"],
                          "label": f"TP{p['tp']} batch {p['batch']}"} for p in pts],
                        x_label="interactivity (tokens/s per user)", y_label="throughput (tokens/s per GPU)",
                        vlines=lines, front_label="Pareto front")
    out = [figure(chart, f"Offline closed form, {s['input_len']} input / {s['output_len']} output tokens, one instance per "
                  "TP degree, batch 1 to 512; dashed lines: per-user speed SLOs.")]
    front = sorted((p for p in pts if p["front"]), key=lambda p: -p["per_user"])
    usd = s.get("usd_per_gpu_hour")
    rows = [[f"TP{p['tp']}", p["batch"], f"{p['per_user']:.1f}", f"{p['per_gpu']:.0f}", f"{1e3 * p['tpot_s']:.1f}",
             f"{p['usd_per_mtok']:.3f}" if usd else "–"] for p in front]
    out.append("<h3>Pareto front</h3>" + table(["layout", "batch per rank", "tokens/s per user", "tokens/s per GPU",
                                                 "TPOT (ms)", "USD per M tokens"], rows, numeric=(1, 2, 3, 4, 5)))
    if usd:
        out.append(f'<p class="note">USD per M tokens at {usd:.2f} USD per GPU-hour (the cluster\'s capital and '
                   "energy cost per hour from the Cluster section, divided by its GPUs).</p>")
    for k, v in (s.get("errors") or {}).items():
        out.append(f'<p class="skipped">{_e(k)}: {_e(v)}</p>')
    return "".join(out)


def _scheduling(data: dict[str, Any]) -> str | None:
    s = data.get("scheduling")
    if not s:
        return _skipped(data, "scheduling")
    series = [(r["label"], [c["arrived_pct"] for c in r["curve"]], [c["allocated_pct"] for c in r["curve"]])
              for r in s["runs"]]
    chart = svg.line_chart("sched-allocation", "GPU allocation as tasks arrive (openb)", series,
                           x_label="GPU capacity requested so far (% of the cluster)",
                           y_label="GPU capacity allocated (% of the cluster)", y_max=100.0)
    rows = [[r["label"], f"{r['curve'][-1]['allocated_pct']:.1f}" if r["curve"] else "–", f"{r['num_pods']:,}",
             f"{r['num_failed']:,}"] for r in s["runs"]]
    return (figure(chart, f"{s['pods']} on {s['nodes']} ({s['total_gpus']:,} GPUs), seed {s['seed']}: tasks arrive and never "
                   "leave; the gap between requested and allocated is fragmentation and failed placements.")
            + table(["policy", "allocated at the end (%)", "tasks", "not placed"], rows, numeric=(1, 2, 3)))


register_section(Section("serving", "Serving", _serving), before="accuracy")
register_section(Section("scheduling", "Scheduling", _scheduling), before="accuracy")

__all__ = ["collect_scheduling", "collect_serving"]

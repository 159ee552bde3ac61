"""Is the planner's best plan realistic? For every Megatron-Bridge row of the packaged training set
(layouts tuned by NVIDIA on real clusters) plan the same job (`plan --from-row`: model shape, system,
GPUs, global batch, sequence length, precision, framework preset from the row) and print the ratio
of the best plan's predicted tokens/s to the published tokens/s, and whether the published layout
(tp, pp, dp, cp, ep) is among the planner's top 5. A ratio far above 1 is a modelling error to find.
The `own/pub` column is the model at the row's own layout over the published tokens/s (the validator's
prediction): when best/pub is much higher than own/pub the search found a region of the space (micro-
batch, EP, ZeRO, recompute) where the model is more optimistic than at the layout the experts ran. The
summary's `best/own` (= best/pub over own/pub) is that search claim alone, both sides modelled: the part of
best/pub that is not the model's error at the row's own layout.
`@rowEP/pub` (MoE rows): the best plan with expert parallelism fixed to the row's, which separates the
EP choice from the rest of the search gap; `@rowMB/pub` the same with the micro-batch fixed to the row's
(the dropless dispatcher's host stall is per micro-batch, so larger micro-batches amortise it); `@Z01/pub` the
best plan with ZeRO limited to 0/1 (no Megatron-FSDP, which the framework has not benchmark-validated with MoE:
`workload.stacks.layout_caveats`). After the
table, each row above 1.30 lists where its best plan gains or pays against the row's own layout, per
step-time term (best - row, seconds; `planner.fromrow.breakdown_delta`, as `plan --from-row` prints), then the walk from the row's layout to the best plan one knob at a time (`knob_walk`: micro-batch, recompute, ZeRO, EP, then the rest), with the step time after each, so the choice that carries the search's gain is named. `best/known` compares with the fastest published run of the
same job (model, system, GPUs, precision, global batch, sequence length) over the Megatron-Bridge
releases (benchmarks/data/megatron_bridge_best_known.csv, sourced): where a later release ran the job
faster than the row, the row's layout or software was not the best the experts found, and the later
rate is the fairer reference; for those jobs the summary also prints the model's speed-up from the row's layout to the later run's against the published one (the micro-batch / layout lever, both sides modelled). A row above 1.30 whose best plan shards parameters (ZeRO 3) gets its per-layer gather against the compute it hides behind (`fsdp_exposure`). Each row above 1.30 then gets a `reason` from those figures alone:
`later-run` (a later release's run of the job is within 1.30 of the best plan: a shown reason the row was
not the best the experts found), `own-layout` (the model is > 1.15x at the row's own layout: a step-model
error there) or `open` (neither: the search's gain has no published support). A `*` after own/pub: the memory model refuses the row's own layout (NVIDIA
ran it), so the search cannot pick it.

    python benchmarks/bench_planner_realism.py [--framework megatron-bridge] [--top 5] [--engine event]

`--engine event` re-times the analytical top 10 of every search (and the row's own layout) with the
discrete-event engine before ranking (`plan --engine event`); slower (minutes on 2 cores).

Targets (issue #15): median ratio <= 1.10, none above 1.30.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import statistics
import time
from pathlib import Path

from clustertwin import load_catalog
from clustertwin.errors import InputError
from clustertwin.planner.fromrow import breakdown_delta, published_tokens_per_s, request_from_row, row_layout
from clustertwin.planner.planning import plan
from clustertwin.planner.space import SpaceOptions
from clustertwin.sim.engines import get_engine
from clustertwin.validate import (
    _estimate_row,
    _row_hardware,
    model_from_row,
    packaged_path,
    plan_from_row,
    read_rows,
    resolve_row,
)

KNOWN_KEYS = ("model", "system", "num_gpus", "precision", "global_batch", "seq_len")
KNOWN_FILE = Path(__file__).parent / "data" / "megatron_bridge_best_known.csv"


def best_known_per_gpu(path: Path = KNOWN_FILE) -> dict[tuple[str, ...], dict[str, str]]:
    """job key (the row columns KNOWN_KEYS) -> the fastest later-published run of that job."""
    with path.open(newline="", encoding="utf-8") as fh:
        return {tuple(r[k].strip() for k in KNOWN_KEYS): r for r in csv.DictReader(fh)}


def job_key(row: dict[str, str]) -> tuple[str, ...]:
    return tuple((row.get(k) or "").strip() for k in KNOWN_KEYS)


def later_plan(row: dict[str, str], known_run: dict[str, str]):
    """The row's plan with the layout of the later published run of its job (the rest as the row)."""
    p = plan_from_row(row)
    tp, pp, vpp, ep, mb = (int(known_run[c]) for c in ("tp", "pp", "vpp", "ep", "micro_batch"))
    return dataclasses.replace(p, tp=tp, pp=pp, vpp=vpp, ep=ep, micro_batch=mb, dp=int(row["num_gpus"]) // (tp * pp * p.cp),
                               sequence_parallel=tp > 1)


# the best plan's knobs, applied to the row's own layout one group at a time in this order (knob_walk)
KNOB_STEPS = (("mb", ("micro_batch",)), ("recompute", ("recompute",)), ("zero", ("zero",)), ("ep", ("ep", "etp")),
              ("rest", ("tp", "pp", "dp", "cp", "vpp", "schedule")))


def knob_walk(row: dict[str, str], best: dict, catalog, engine: str = "analytical") -> list[tuple]:
    """From the row's own layout to the planner's best plan one knob group of ``KNOB_STEPS`` at a time: which
    choice carries the search's gain. Returns ``(step, label, step_time_s, fits_memory, memory_gb, terms)`` per
    step, the first the row's own layout ("row") and the last the best plan itself; ``terms`` are the per-term
    changes of that step (``breakdown_delta``, largest first). Intermediate layouts are estimated without the
    plan rules (``check=False``): a step may give a layout the memory model refuses (``fits_memory`` False)
    that a later step (recompute, ZeRO) makes fit."""
    row = resolve_row(row, catalog)[0]
    model = model_from_row(row)
    system, fabric = _row_hardware(row, catalog)
    eng = get_engine(engine)
    cur = plan_from_row(row)
    prev = eng.estimate(model, system, fabric, cur, catalog=catalog, check=False)
    out = [("row", "", prev.step_time_s, prev.fits_memory, prev.memory_gb_per_gpu, [])]
    for step, keys in KNOB_STEPS:
        kw: dict = {}
        for k in keys:
            if k == "schedule":
                kw["pipeline_schedule"] = str(best["schedule"])
            elif k == "recompute":
                kw["recompute"] = str(best["recompute"])
            else:
                kw[k] = int(best[k])
        if "zero" in kw:
            kw["fsdp"] = kw["zero"] >= 3
        if "tp" in kw:
            kw["sequence_parallel"] = kw["tp"] > 1
        cur = dataclasses.replace(cur, **kw)
        e = eng.estimate(model, system, fabric, cur, catalog=catalog, check=False)
        label = {"mb": f"mb{cur.micro_batch}", "recompute": cur.recompute, "zero": f"Z{cur.zero}",
                 "ep": f"EP{cur.ep}" + (f" ETP{cur.etp}" if cur.etp > 1 else ""),
                 "rest": f"TP{cur.tp} PP{cur.pp} DP{cur.dp} CP{cur.cp} V{cur.vpp}"}[step]
        out.append((step, label, e.step_time_s, e.fits_memory, e.memory_gb_per_gpu,
                    breakdown_delta(e.breakdown, prev.breakdown)))
        prev = e
    return out


def format_walk(walk: list[tuple]) -> str:
    """One line of ``knob_walk``: each step's layout change, step time and its largest term change."""
    parts = [f"row {walk[0][2]:.2f} s" + ("" if walk[0][3] else f" (memory {walk[0][4]:.0f} GB: refused)")]
    for _step, label, t, fits, mem, terms in walk[1:]:
        top = f" [{terms[0][0]} {terms[0][1]:+.2f}]" if terms else ""
        parts.append(f"{label} {t:.2f} s" + ("" if fits else f" (memory {mem:.0f} GB: no fit)") + top)
    return " -> ".join(parts)


def fsdp_exposure(row: dict[str, str], best: dict, catalog) -> dict[str, float] | None:
    """How the sharded-DP (ZeRO-3 / Megatron-FSDP) traffic of a best plan meets its compute, per layer and
    micro-batch (the inputs of ``sim.analytical._compose``'s FSDP rule): ``gather_ms`` one parameter
    all-gather of an average layer, ``fwd_ms`` that layer's forward compute (the window the next layer's
    prefetched gather hides behind), ``bwd_comm_ms`` the backward's gather + gradient reduce-scatter and
    ``bwd_ms`` its backward + recompute compute, ``exposed_s`` the step's fsdp_comm term and ``overlap`` the
    stack's ``fsdp_overlap`` share. None below ZeRO 3."""
    if int(best["zero"]) < 3:
        return None
    from clustertwin.sim.costs import make_hardware, stage_costs
    from clustertwin.workload.plan import RECOMPUTE_CODE
    from clustertwin.workload.stacks import resolve_stack

    row = resolve_row(row, catalog)[0]
    model = model_from_row(row)
    system, fabric = _row_hardware(row, catalog)
    p = plan_from_row(row)
    hw = make_hardware(system, fabric, p.dtype, catalog)
    st = resolve_stack(p.stack, catalog)
    tp, pp, dp, cp, ep, vpp, mb = (int(best[k]) for k in ("tp", "pp", "dp", "cp", "ep", "vpp", "micro_batch"))
    c = stage_costs(model, hw, tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, vpp=vpp, micro_batch=mb,
                    recompute=RECOMPUTE_CODE[str(best["recompute"])], zero=int(best["zero"]), global_batch=p.global_batch,
                    seq_len=p.seq_len, sp=tp > 1, etp=int(best.get("etp", 1) or 1), flash=p.flash_attention,
                    overlap=p.overlap, grad_reduce_bytes=p.grad_reduce_bytes, cp_comm=p.cp_comm, stack=st)
    f = {k: float(v) for k, v in c.items() if k in ("layers_per_stage", "fsdp_ag_s", "fsdp_mb_s", "layer_fwd_gemm_s",
                                                    "layer_fwd_attn_s", "layer_fwd_mem_s", "layer_bwd_gemm_s",
                                                    "layer_bwd_attn_s", "layer_bwd_mem_s", "layer_recompute_s")}
    n = max(f["layers_per_stage"], 1.0)
    fwd = f["layer_fwd_gemm_s"] + f["layer_fwd_attn_s"] + f["layer_fwd_mem_s"]
    bwd = f["layer_bwd_gemm_s"] + f["layer_bwd_attn_s"] + f["layer_bwd_mem_s"] + f["layer_recompute_s"]
    return {"gather_ms": 1e3 * f["fsdp_ag_s"] / n, "fwd_ms": 1e3 * fwd,
            "bwd_comm_ms": 1e3 * (f["fsdp_mb_s"] - f["fsdp_ag_s"]) / n, "bwd_ms": 1e3 * bwd,
            "exposed_s": float(best["breakdown"].get("fsdp_comm", 0.0)), "overlap": float(st.fsdp_overlap)}


def format_fsdp(x: dict[str, float]) -> str:
    """One line of ``fsdp_exposure``."""
    return (f"per layer and micro-batch: gather {x['gather_ms']:.1f} ms vs forward {x['fwd_ms']:.1f} ms "
            f"({x['gather_ms'] / max(x['fwd_ms'], 1e-12):.2f}), backward gather + reduce-scatter {x['bwd_comm_ms']:.1f} ms "
            f"vs backward + recompute {x['bwd_ms']:.1f} ms ({x['bwd_comm_ms'] / max(x['bwd_ms'], 1e-12):.2f}); "
            f"fsdp_comm {x['exposed_s']:.2f} s in the step (fsdp_overlap {x['overlap']:g})")


REASONS = ("later-run", "own-layout", "open")


def reason(best_pub: float, own_pub: float, known_pub: float, best_known: float, *, limit: float = 1.30,
           own_limit: float = 1.15) -> tuple[str, str]:
    """Why a row's best/published ratio is high, from published figures only (a row above ``limit``):
    ``later-run``: a later release ran the same job at ``known_pub`` x the row and the best plan is within
    ``limit`` of that run (the row's layout or software was not the best the experts found: a shown reason);
    ``own-layout``: the model is already ``own_pub`` > ``own_limit`` optimistic at the layout the row ran, so the
    gap is the step model's error there (not the search's choice); ``open``: neither, the search's gain over
    the row (best/own) has no published support and is a modelling question."""
    if known_pub > 1.0 and best_known <= limit:
        return "later-run", (f"a later release ran the job {known_pub:.2f}x faster; best/known {best_known:.2f}"
                             + (f" (the model is also {own_pub:.2f}x at the row's layout)" if own_pub > own_limit else ""))
    if own_pub > own_limit:
        return "own-layout", (f"the model is {own_pub:.2f}x the published rate at the row's own layout; the search "
                              f"adds {best_pub / own_pub:.2f}x")
    return "open", (f"the model is {own_pub:.2f}x at the row's layout, the search adds {best_pub / own_pub:.2f}x"
                    + (f"; best/known {best_known:.2f}" if known_pub > 1.0 else "") + ": unexplained by published runs")


def summary(name: str, xs: list[float]) -> str:
    s = sorted(xs)
    q = statistics.quantiles(s, n=4) if len(s) >= 4 else [s[0], statistics.median(s), s[-1]]
    return (f"{name} over {len(s)} rows: median {statistics.median(s):.3f}, quartiles {q[0]:.3f} / {q[2]:.3f}, "
            f"min {s[0]:.3f}, max {s[-1]:.3f}; above 1.10: {sum(x > 1.10 for x in s)}, above 1.30: "
            f"{sum(x > 1.30 for x in s)}, below 0.90: {sum(x < 0.90 for x in s)}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--framework", default="megatron-bridge")
    ap.add_argument("--top", type=int, default=5)
    ap.add_argument("--engine", default="analytical", choices=("analytical", "event"))
    a = ap.parse_args()
    cat = load_catalog()
    known = best_known_per_gpu()
    rows = [r for r in read_rows(packaged_path("training")) if (r.get("framework") or "").strip() == a.framework]
    keys = ("tp", "pp", "dp", "cp", "ep")
    print(f"{len(rows)} {a.framework} rows of the packaged training.csv; planner top {a.top} per row; {a.engine} engine")
    print(f"{'row':<14} {'model':<24} {'GPUs':>5} {'system':<13} {'prec':<6} {'published layout':<35} "
          f"{'best layout':<35} {'best/pub':>8} {'own/pub':>8} {'pub rank':>8} {'best/known':>10} {'@rowEP/pub':>10} "
          f"{'@rowMB/pub':>10} {'@Z01/pub':>8} {'s':>5}")
    ratios, in_top, failed, moe, vs_known, later, later_rows, refused = [], 0, [], [], [], [], [], []
    vs_own = []  # best plan over the model at the row's own layout: the search's claim alone (no model error at the row)
    gains, why, walks, fsdp_lines = [], [], [], []
    own_tps = {}
    t_all = time.perf_counter()
    for r in rows:
        t0 = time.perf_counter()
        lay = row_layout(r)
        pub = published_tokens_per_s(r)
        try:
            req, _ = request_from_row(r, cat, top_k=a.top, engine=a.engine)
            rep = plan(req, cat)
        except InputError as exc:
            failed.append((r["id"], exc.message))
            print(f"{r['id']:<14} {r['model'][:24]:<24} {r['num_gpus']:>5} {r['system']:<13} no plan: {exc.message[:80]}")
            continue
        best = rep.plans[0]
        rank = next((p["rank"] for p in rep.plans if all(int(p[k]) == int(lay[k]) for k in keys)), None)
        ratio = best["tokens_per_s"] / pub if pub else float("nan")
        own_est = _estimate_row(r, cat, a.engine)
        own_tps[r["id"]] = own_est.tokens_per_s
        own = float(r["measured_step_time_s"]) / own_est.step_time_s if pub else float("nan")
        if not own_est.fits_memory:  # the memory model refuses a layout NVIDIA ran: the search cannot pick it
            refused.append(f"{r['id']} ({own_est.memory_gb_per_gpu:.0f} GB > {own_est.memory_capacity_gb:.0f})")
        is_moe = int(float(r.get("num_experts") or 0)) > 1
        at_ep = float("nan")
        if is_moe:  # the best plan with EP fixed to the row's: how much of the gap is the EP choice
            req_ep, _ = request_from_row(r, cat, top_k=1, engine=a.engine,
                                         options=SpaceOptions(fixed={"ep": (int(lay["ep"]),)}))
            at_ep = plan(req_ep, cat).plans[0]["tokens_per_s"] / pub
            req_mb, _ = request_from_row(r, cat, top_k=1, engine=a.engine,
                                         options=SpaceOptions(fixed={"micro_batch": (int(lay["micro_batch"]),)}))
            at_mb = plan(req_mb, cat).plans[0]["tokens_per_s"] / pub
            req_z, _ = request_from_row(r, cat, top_k=1, engine=a.engine, options=SpaceOptions(zero_stages=(0, 1)))
            at_z = plan(req_z, cat).plans[0]["tokens_per_s"] / pub
        else:
            at_mb = at_z = float("nan")
        ratios.append(ratio)
        vs_own.append(ratio / own)
        k = known.get(job_key(r))
        ref = max(pub, float(k["tokens_per_s_per_gpu"]) * float(r["num_gpus"])) if k else pub
        vs_known.append(best["tokens_per_s"] / ref)
        if k and ref > pub:
            later_rows.append((r, k))
            later.append(f"{r['id']}: {k['release']} mb{k['micro_batch']} TP{k['tp']} PP{k['pp']} V{k['vpp']} "
                         f"EP{k['ep']} {float(k['tokens_per_s_per_gpu']):,.0f} tok/s/GPU = {ref / pub:.2f}x the row")
        moe.append(is_moe)
        in_top += rank is not None

        def fmt(p):
            return "TP{tp} PP{pp} DP{dp} CP{cp} EP{ep}".format(**{k: int(p[k]) for k in keys})

        def knobs(p):
            rc = {"none": "", "selective": " sel", "full": " full"}[str(p["recompute"])]
            return f"V{int(p['vpp'])} mb{int(p['micro_batch'])} Z{int(p['zero'])}{rc}"

        def full(p):
            return f"{fmt(p)} {knobs(p)}".replace(" CP1", "")

        fx = fsdp_exposure(r, best, cat) if ratio > 1.30 else None
        if fx is not None:
            fsdp_lines.append(f"{r['id']} ({ratio:.2f}, {full(best)}): {format_fsdp(fx)}")
        if ratio > 1.30:
            why.append((r["id"], ratio, reason(ratio, own, ref / pub, vs_known[-1])))
            walks.append((r["id"], ratio, format_walk(knob_walk(r, best, cat, a.engine))))
            d = breakdown_delta(best["breakdown"], own_est.breakdown)
            gains.append(f"{r['id']} ({ratio:.2f}): row {fmt(lay)} {knobs(lay)}, model {own_est.step_time_s:.2f} s -> best "
                         f"{fmt(best)} {knobs(best)}, {best['step_time_s']:.2f} s: "
                         + ", ".join(f"{k} {v:+.2f}" for k, v in d[:5])
                         + "".join(f"; caveat: {': '.join(c[len('best plan: '):].split(': ')[:2])}"
                                   for c in rep.assumptions if c.startswith("best plan: ")))

        print(f"{r['id']:<14} {r['model'][:24]:<24} {r['num_gpus']:>5} {r['system']:<13} {r['precision']:<6} "
              f"{full(lay):<35} {full(best):<35} {ratio:8.3f} {own:7.3f}{'*' if not own_est.fits_memory else ' '} {str(rank or '-'):>8} {vs_known[-1]:10.3f} "
              f"{at_ep:10.3f} {at_mb:10.3f} {at_z:8.3f} {time.perf_counter() - t0:5.1f}",
              flush=True)
    if ratios:
        print("\n" + summary("best/published", ratios))
        for name, sel in (("dense", [x for x, m in zip(ratios, moe, strict=True) if not m]),
                          ("MoE", [x for x, m in zip(ratios, moe, strict=True) if m])):
            if sel:
                print(f"  {name} rows ({len(sel)}): median {statistics.median(sel):.3f}, min {min(sel):.3f}, "
                      f"max {max(sel):.3f}, above 1.30: {sum(x > 1.30 for x in sel)}")
        print(summary("best/own (best plan over the model at the row's own layout: the search's claim alone)", vs_own))
        print(f"  MoE rows: median {statistics.median([x for x, m in zip(vs_own, moe, strict=True) if m] or [float('nan')]):.3f}, "
              f"above 1.30: {sum(x > 1.30 for x, m in zip(vs_own, moe, strict=True) if m)}")
        print(summary("best/known (fastest published run of the same job)", vs_known))
        print(f"  MoE rows: above 1.30: {sum(x > 1.30 for x, m in zip(vs_known, moe, strict=True) if m)}; "
              f"rows whose job a later release ran faster ({len(later)}):")
        for line in later:
            print("    " + line)
        if later_rows:
            print("  the model at those later layouts (out of sample: no fit saw them), predicted / published:")
            eng = get_engine(a.engine)
            for r, k in later_rows:
                q = later_plan(r, k)
                system, fabric = _row_hardware(r, cat)
                e = eng.estimate(model_from_row(r), system, fabric, q, catalog=cat, check=True)
                per_gpu = e.tokens_per_s / float(r["num_gpus"])
                fit = "" if e.fits_memory else f" (model memory {e.memory_gb_per_gpu:.0f} GB > {e.memory_capacity_gb:.0f}: refused)"
                print(f"    {r['id']}: {per_gpu / float(k['tokens_per_s_per_gpu']):.2f}{fit}")
            print("  the micro-batch / layout lever: the model's speed-up from the row's layout to the later run's "
                  "(both modelled) against the published speed-up (later / row):")
            for r, k in later_rows:
                q = later_plan(r, k)
                system, fabric = _row_hardware(r, cat)
                e = eng.estimate(model_from_row(r), system, fabric, q, catalog=cat, check=False)
                pub_up = float(k["tokens_per_s_per_gpu"]) * float(r["num_gpus"]) / published_tokens_per_s(r)
                print(f"    {r['id']}: mb{q.micro_batch} EP{q.ep} PP{q.pp}: model {e.tokens_per_s / own_tps[r['id']]:.2f}x, "
                      f"published {pub_up:.2f}x")
        if gains:
            print("rows above 1.30 (best/pub): the row's layout and the best plan, and the five largest per-term "
                  "differences best - row (s):")
            for line in gains:
                print("    " + line)
        if fsdp_lines:
            print("rows above 1.30 whose best plan shards parameters (ZeRO 3 / Megatron-FSDP): its gathers against the "
                  "compute they hide behind (`fsdp_exposure`; one layer ahead, all but the first unit hidden up to "
                  "fsdp_overlap x min(comm, compute)):")
            for line in fsdp_lines:
                print("    " + line)
        if walks:
            print("rows above 1.30: from the row's layout to the best plan one knob at a time (micro-batch, recompute, "
                  "ZeRO, EP, then the rest; `knob_walk`), step time after each and its largest term change (s):")
            for rid, x, line in walks:
                print(f"    {rid} ({x:.2f}): {line}")
        if why:
            print("why each row above 1.30 is there (`reason`: a later release's faster run of the job, the model's error "
                  "at the row's own layout, or neither):")
            for rid, x, (cat_, text) in why:
                print(f"    {rid} ({x:.2f}): {cat_}: {text}")
            n = {c: sum(w[2][0] == c for w in why) for c in REASONS}
            print("  rows above 1.30 by reason: " + ", ".join(f"{c} {k}" for c, k in n.items()))
        print(f"* published layouts the memory model refuses (NVIDIA ran them; the search cannot pick them): "
              f"{len(refused)}: {', '.join(refused) or '-'}")
        print(f"published layout in the top {a.top}: {in_top} of {len(ratios)}; no plan: {len(failed)}; "
              f"{time.perf_counter() - t_all:.0f} s")

if __name__ == "__main__":
    main()

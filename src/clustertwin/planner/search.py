"""Vectorised search: generate the space, prune by memory, time what fits, rank by throughput.

The driver never loops over candidates in Python: it hands numpy arrays to an
:class:`~clustertwin.planner.evaluator.Evaluator` in chunks, and ranks with ``np.lexsort``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..workload.rules import memory_fits
from .evaluator import Evaluation, Evaluator, memory_margin_of
from .space import AXES, RECOMPUTE, SCHEDULES, Plans, SpaceOptions, space_size, structural_space, take

LAYOUT_AXES = ("tp", "pp", "dp", "cp", "ep", "vpp")
DEFAULT_CHUNK = 1 << 16


@dataclass(frozen=True, slots=True)
class SearchStats:
    num_structural: int
    num_fit: int
    num_evaluated: int
    num_feasible: int
    elapsed_s: float
    min_memory_gb: float  # smallest peak memory per GPU over the whole space (nan if empty)
    capacity_gb: float  # usable memory per GPU
    margin_gb: float = 0.0  # what the fit check keeps free of it (workload.rules.memory_fits)


@dataclass(frozen=True, slots=True)
class SearchResult:
    """Ranked plans (best first) as columns, plus the statistics of the search."""

    plans: Plans
    evaluation: Evaluation
    stats: SearchStats
    space: Plans = field(repr=False)

    def __len__(self) -> int:
        return space_size(self.plans)

    def records(self, k: int | None = None) -> list[dict[str, Any]]:
        """Best-first list of JSON-ready plan dicts (degrees + metrics + breakdown + bottleneck)."""
        n = len(self) if k is None else min(k, len(self))
        cap, margin = self.stats.capacity_gb, self.stats.margin_gb
        out = []
        for i in range(n):  # at most k rows: presentation, not search
            rec: dict[str, Any] = {a: int(self.plans[a][i]) for a in AXES}
            rec["recompute"] = RECOMPUTE[rec["recompute"]]
            rec["schedule"] = SCHEDULES[rec["schedule"]]
            rec["rank"] = i + 1
            for m, v in self.evaluation.metrics.items():
                rec[m] = float(v[i])
            rec["fits_memory"] = bool(self.evaluation.fits_memory[i])
            rec["memory_headroom_gb"] = float(cap - rec["memory_gb_per_gpu"])  # before the margin
            rec["memory_margin_gb"] = margin
            rec["memory_left_gb"] = rec["memory_headroom_gb"] - margin  # after it (>= 0 for every ranked plan)
            rec["breakdown"] = {k: float(v[i]) for k, v in self.evaluation.breakdown.items()}
            rec["bottleneck"] = describe_bottleneck(str(self.evaluation.bottleneck[i]), rec["breakdown"],
                                                    rec["step_time_s"])
            out.append(rec)
        return out


COMPUTE_PARTS = ("gemm", "attention", "compute")


def describe_bottleneck(label: str, breakdown: Mapping[str, float], step: float) -> str:
    """Turn a bare breakdown key (what a vectorised engine returns) into a sentence with shares."""
    if label not in breakdown or not step:
        return label
    text = f"{label} {100 * breakdown[label] / step:.0f}% of the step"
    if label in COMPUTE_PARTS:
        over = sorted(((k, v) for k, v in breakdown.items() if k not in COMPUTE_PARTS and v > 0), key=lambda kv: -kv[1])
        if over:
            text += f"; largest overhead {over[0][0]} {100 * over[0][1] / step:.0f}%"
    return text


def _evaluate_chunked(evaluator: Evaluator, plans: Plans, chunk: int, workers: int) -> Evaluation:
    n = space_size(plans)
    bounds = [(s, min(n, s + chunk)) for s in range(0, n, chunk)]
    parts = [take(plans, slice(a, b)) for a, b in bounds]
    if workers > 1 and len(parts) > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            evs = list(pool.map(evaluator.evaluate, parts))
    else:
        evs = [evaluator.evaluate(p) for p in parts]
    return Evaluation.concat(evs)


def _memory_chunked(evaluator: Evaluator, plans: Plans, chunk: int) -> np.ndarray:
    n = space_size(plans)
    return np.concatenate(
        [np.asarray(evaluator.memory_bytes(take(plans, slice(s, min(n, s + chunk)))), dtype=float)
         for s in range(0, n, chunk)]
    ) if n else np.zeros(0)


def rank_order(ev: Evaluation, plans: Plans) -> np.ndarray:
    """Best first: highest throughput, then most memory headroom, then the simplest layout.

    Ties (equal throughput) go to less memory, then fewer model-parallel ranks (tp*pp*cp), then
    lower ZeRO stage and less recompute, so the order is deterministic.
    """
    tps = np.nan_to_num(ev.metrics["tokens_per_s"], nan=-np.inf)
    mem = np.nan_to_num(ev.metrics["memory_gb_per_gpu"], nan=np.inf)
    mp = plans["tp"] * plans["pp"] * plans["cp"]
    keys = (plans["micro_batch"], plans["vpp"], plans["ep"], plans["recompute"], plans["zero"], mp, mem,
            -np.round(tps, 6))
    return np.lexsort(keys)


def unique_layouts(plans: Plans, order: np.ndarray) -> np.ndarray:
    """Keep, in ``order``, the first (best) row of each (tp, pp, dp, cp, ep, vpp) layout."""
    if order.size == 0:
        return order
    cols = [np.asarray(plans[a])[order].astype(np.int64) for a in LAYOUT_AXES]
    # one integer code per layout (mixed radix over the axes' value ranges): a 1-D unique, exact
    code = np.zeros(order.size, dtype=np.int64)
    room = 1
    for c in cols:
        lo = int(c.min())
        span = int(c.max()) - lo + 1
        room *= span
        if room >= 1 << 62:  # too many combinations for one int64: compare the rows themselves
            _, first = np.unique(np.stack(cols, axis=1), axis=0, return_index=True)
            return order[np.sort(first)]
        code = code * span + (c - lo)
    _, first = np.unique(code, return_index=True)
    return order[np.sort(first)]


def search(
    model: Any,
    evaluator: Evaluator,
    *,
    num_gpus: int,
    domain_size: int,
    global_batch: int,
    seq_len: int,
    options: SpaceOptions | None = None,
    top_k: int | None = 10,
    distinct_layouts: bool = True,
    chunk: int = DEFAULT_CHUNK,
    workers: int = 1,
) -> SearchResult:
    """Search every valid layout and return the ``top_k`` best (all feasible ones if ``None``).

    A layout fits when the one memory rule (``workload.rules.memory_fits``) says so for the evaluator's
    capacity and margin (``memory_margin_of``): the same check prunes before timing and filters after.
    """
    t0 = time.perf_counter()
    space = structural_space(
        model, num_gpus=num_gpus, domain_size=domain_size, global_batch=global_batch, seq_len=seq_len,
        options=options,
    )
    n = space_size(space)
    cap = float(evaluator.memory_capacity_bytes)
    margin = memory_margin_of(evaluator)
    if n:
        mem = _memory_chunked(evaluator, space, chunk)
        fit = memory_fits(mem, cap, margin)
        min_mem = float(np.nanmin(mem)) / 1e9
    else:
        fit = np.zeros(0, dtype=bool)
        min_mem = float("nan")
    cand = take(space, fit)
    ev = _evaluate_chunked(evaluator, cand, chunk, workers) if space_size(cand) else None
    if ev is None:
        return _empty(space, n, fit, min_mem, cap, margin, t0)
    return _finish(cand, ev, space, n, fit, min_mem, cap, margin, top_k, distinct_layouts, t0)


def _finish(cand: Plans, ev: Evaluation, space: Plans, n: int, fit: np.ndarray, min_mem: float, cap: float,
            margin: float, top_k: int | None, distinct_layouts: bool, t0: float) -> SearchResult:
    """Rank the evaluated candidates of one search (``search`` and ``search_many``)."""
    ok = np.asarray(ev.fits_memory, dtype=bool) & np.isfinite(ev.metrics["tokens_per_s"])
    ok &= memory_fits(ev.metrics["memory_gb_per_gpu"] * 1e9, cap, margin)
    idx = np.flatnonzero(ok)
    feas, ev_f = take(cand, idx), ev.take(idx)
    order = rank_order(ev_f, feas)
    if distinct_layouts:
        order = unique_layouts(feas, order)
    if top_k is not None:
        order = order[:top_k]
    stats = SearchStats(
        num_structural=n,
        num_fit=int(fit.sum()),
        num_evaluated=space_size(cand),
        num_feasible=int(idx.size),
        elapsed_s=time.perf_counter() - t0,
        min_memory_gb=min_mem,
        capacity_gb=cap / 1e9,
        margin_gb=margin,
    )
    return SearchResult(plans=take(feas, order), evaluation=ev_f.take(order), stats=stats, space=space)


def _empty(space: Plans, n: int, fit: np.ndarray, min_mem: float, cap: float, margin: float, t0: float) -> SearchResult:
    empty = {a: np.zeros(0, dtype=np.int64) for a in AXES}
    ev0 = Evaluation(metrics={}, fits_memory=np.zeros(0, dtype=bool))
    stats = SearchStats(n, int(fit.sum()), 0, 0, time.perf_counter() - t0, min_mem, cap / 1e9, margin)
    return SearchResult(plans=empty, evaluation=ev0, stats=stats, space=space)


def search_many(
    model: Any,
    evaluator: Evaluator,
    requests: Sequence[tuple[int, int, int]],
    *,
    seq_len: int,
    options: SpaceOptions | None = None,
    top_k: int | None = 10,
    distinct_layouts: bool = True,
    chunk: int = DEFAULT_CHUNK,
) -> list[SearchResult]:
    """``search`` for several ``(num_gpus, domain_size, global_batch)`` requests of one model on one
    machine (one evaluator: system, fabric, precision, engine options), in one vectorised pass: the
    layouts of all requests are pruned by memory and timed together, with each row's own global batch
    (the evaluator must read a ``global_batch`` column; ``AnalyticalEvaluator`` does), then ranked per
    request. Each result equals what ``search`` gives for that request alone (the engine is elementwise;
    tests/planner/test_planner_sweep.py compares them) but for its ``elapsed_s``, the pass's time shared
    evenly. A sweep's batched chunks use it (``planner.sweep.run_chunks``)."""
    t0 = time.perf_counter()
    spaces = [structural_space(model, num_gpus=n, domain_size=d, global_batch=gb, seq_len=seq_len, options=options)
              for n, d, gb in requests]
    sizes = np.asarray([space_size(s) for s in spaces], dtype=np.int64)
    total = int(sizes.sum())
    cap = float(evaluator.memory_capacity_bytes)
    margin = memory_margin_of(evaluator)
    mem, fit = np.zeros(0), np.zeros(0, dtype=bool)
    cand: Plans = {}
    ev: Evaluation | None = None
    if total:
        allsp = {a: np.concatenate([np.asarray(s[a]) for s in spaces]) for a in spaces[0]}
        gb = np.repeat(np.asarray([r[2] for r in requests], dtype=np.int64), sizes)
        mem = _memory_chunked(evaluator, {**allsp, "global_batch": gb}, chunk)
        fit = memory_fits(mem, cap, margin)
        cand = take(allsp, fit)
        ev = _evaluate_chunked(evaluator, {**cand, "global_batch": gb[fit]}, chunk, 1) if fit.any() else None
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    fit_bounds = np.concatenate([[0], np.cumsum([int(fit[a:b].sum()) for a, b in zip(bounds[:-1], bounds[1:],
                                                                                    strict=True)])])
    share = (time.perf_counter() - t0) / max(len(requests), 1)
    out = []
    for i, space in enumerate(spaces):
        t_i = time.perf_counter() - share
        n = int(sizes[i])
        if not n:
            out.append(_empty(space, 0, np.zeros(0, dtype=bool), float("nan"), cap, margin, t_i))
            continue
        a, b = int(bounds[i]), int(bounds[i + 1])
        fit_i = fit[a:b]
        min_mem = float(np.nanmin(mem[a:b])) / 1e9
        if ev is None or not fit_i.any():
            out.append(_empty(space, n, fit_i, min_mem, cap, margin, t_i))
            continue
        sl = slice(int(fit_bounds[i]), int(fit_bounds[i + 1]))
        out.append(_finish(take(cand, sl), ev.take(np.arange(sl.start, sl.stop)), space, n, fit_i, min_mem, cap,
                           margin, top_k, distinct_layouts, t_i))
    return out


def explain_runner_up(records: list[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Why plan #2 lost to plan #1: the breakdown component whose time differs most."""
    if len(records) < 2:
        return None
    a, b = records[0], records[1]
    comps = sorted(set(a.get("breakdown", {})) | set(b.get("breakdown", {})))
    diffs = {c: float(b.get("breakdown", {}).get(c, 0.0)) - float(a.get("breakdown", {}).get(c, 0.0)) for c in comps}
    slower = (b["step_time_s"] / a["step_time_s"] - 1.0) if a["step_time_s"] else float("nan")
    out: dict[str, Any] = {
        "winner": layout_label(a),
        "runner_up": layout_label(b),
        "runner_up_slower_pct": 100.0 * slower,
        "throughput_gap_pct": 100.0 * (1.0 - b["tokens_per_s"] / a["tokens_per_s"]) if a["tokens_per_s"] else None,
    }
    if diffs:
        comp = max(diffs, key=lambda c: abs(diffs[c]))
        out.update(component=comp, delta_s=diffs[comp], deltas_s=diffs)
        verb = "more" if diffs[comp] > 0 else "less"
        out["text"] = (
            f"runner-up {out['runner_up']} is {100 * slower:.1f}% slower per step; the largest difference is "
            f"{comp}: {abs(diffs[comp]) * 1e3:.0f} ms {verb} than {out['winner']}"
        )
    else:
        out["text"] = f"runner-up {out['runner_up']} is {100 * slower:.1f}% slower per step"
    return out


def layout_label(rec: Mapping[str, Any]) -> str:
    parts = [f"TP{rec['tp']}", f"PP{rec['pp']}"]
    if rec.get("vpp", 1) > 1:
        parts.append(f"V{rec['vpp']}")
    parts += [f"DP{rec['dp']}"]
    if rec.get("cp", 1) > 1:
        parts.append(f"CP{rec['cp']}")
    if rec.get("ep", 1) > 1:
        parts.append(f"EP{rec['ep']}")
    if rec.get("etp", 1) > 1:
        parts.append(f"ETP{rec['etp']}")
    if rec.get("schedule", "1f1b") != "1f1b":
        parts.append(str(rec["schedule"]))
    parts.append(f"mb{rec['micro_batch']}")
    parts.append(f"ZeRO{rec['zero']}")
    rc = rec.get("recompute", "none")
    if rc != "none":
        parts.append(f"rc-{rc}")
    return " ".join(parts)


def minimum_gpus(
    model: Any,
    evaluator_for: Callable[[int], Evaluator],
    *,
    start: int,
    domain_size: int,
    global_batch: int,
    seq_len: int,
    options: SpaceOptions | None = None,
    limit: int = 1 << 20,
) -> int | None:
    """Smallest multiple of the domain size >= ``start`` at which some layout fits in memory
    (doubling to find one that fits, then scanning down), or ``None`` up to ``limit``.

    Only memory is evaluated (cheap), a handful of times: this is for the error message of an
    impossible request.
    """

    def fits(n: int) -> bool:
        sp = structural_space(model, num_gpus=n, domain_size=domain_size, global_batch=global_batch,
                              seq_len=seq_len, options=options)
        if not space_size(sp):
            return False
        ev = evaluator_for(n)
        return bool(memory_fits(ev.memory_bytes(sp), ev.memory_capacity_bytes, memory_margin_of(ev)).any())

    step = max(1, domain_size)
    n = max(step, -(-start // step) * step)
    lo = n - step
    while n <= limit:
        if fits(n):
            break
        lo, n = n, n * 2
    else:
        return None
    # Feasibility is not monotone in the GPU count (divisibility), so scan the multiples of the
    # domain between the last miss and the first hit, at most ~256 memory-only checks.
    stride = step * max(1, -(-(n - lo) // (step * 256)))
    for m in range(lo + stride, n, stride):
        if fits(m):
            return m
    return n


def usable_gpu_counts(
    model: Any, *, near: int, domain_size: int, global_batch: int, seq_len: int,
    options: SpaceOptions | None = None, radius: int = 64,
) -> list[int]:
    """GPU counts near ``near`` for which at least one layout is structurally valid: whole scale-up
    domains first, then the closest."""
    found = []
    cands = sorted(range(max(1, near - radius), near + radius + 1),
                   key=lambda x: (x % max(1, domain_size) != 0, abs(x - near), x))
    for n in cands:  # <= 2 * radius + 1 cheap structural checks, for an error message
        if n != near and space_size(structural_space(model, num_gpus=n, domain_size=domain_size,
                                                     global_batch=global_batch, seq_len=seq_len, options=options)):
            found.append(n)
        if len(found) >= 3:
            break
    return found

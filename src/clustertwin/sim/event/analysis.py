"""Reads a finished :class:`Schedule`: critical path, per-stream utilisation, per-stage time breakdown
(compute / exposed communication / bubble) and exposed vs hidden communication. Pure functions."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .engine import OpGraph, Schedule, critical_path

COMPUTE_CATS = ("forward", "backward", "wgrad", "recompute", "logits", "optimizer", "overhead")
COMM_CATS = ("pp", "tp", "cp", "ep", "dp-grad", "dp-param")  # exposed-time priority order


@dataclass(frozen=True, slots=True, kw_only=True)
class Segment:
    """A run of consecutive critical-path ops of one kind on one stage."""

    stage: int
    stream: str
    category: str
    name: str  # first op's name
    ops: int
    start_s: float
    end_s: float

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True, slots=True, kw_only=True)
class StageTimes:
    """Where one stage's step time goes. ``compute`` + ``exposed`` + ``bubble`` = step time."""

    stage: int
    compute_s: dict[str, float]
    compute_work_s: float  # work of the compute ops at full rate (compute_s minus interference)
    exposed_comm_s: dict[str, float]
    hidden_comm_s: dict[str, float]
    bubble_s: float


def critical_segments(g: OpGraph, sched: Schedule) -> list[Segment]:
    path = critical_path(g, sched)
    segs: list[Segment] = []
    cur = None
    for o in path:
        st = g.op_stream[o]
        key = (g.stream_stage[st], g.op_cat[o])
        if g.cat_names[g.op_cat[o]] == "sync" and sched.end[o] == sched.start[o]:
            continue  # zero-time joins carry no time
        if cur is not None and cur[0] == key and abs(cur[3] - sched.start[o]) < 1e-12:
            cur[2] += 1
            cur[3] = float(sched.end[o])
        else:
            if cur is not None:
                segs.append(_seg(g, cur))
            cur = [key, o, 1, float(sched.end[o]), float(sched.start[o]), st]
    if cur is not None:
        segs.append(_seg(g, cur))
    return segs


def _seg(g: OpGraph, cur) -> Segment:
    (stage, cat), first, n, end, start, st = cur
    return Segment(stage=stage, stream=g.stream_name[st], category=g.cat_names[cat], name=g.op_name[first],
                   ops=n, start_s=start, end_s=end)


def stream_utilisation(g: OpGraph, sched: Schedule, step: float) -> dict[str, float]:
    """Busy fraction of each stream kind, averaged over stages ("compute", "tp", ...)."""
    busy = np.zeros(len(g.stream_name))
    np.add.at(busy, np.asarray(g.op_stream, dtype=np.int64), sched.end - sched.start)
    out: dict[str, list[float]] = {}
    for s, name in enumerate(g.stream_name):
        out.setdefault(name, []).append(busy[s])
    p = max(g.num_stages, 1)
    return {k: float(sum(v) / (p * step)) if step > 0 else 0.0 for k, v in out.items() if sum(v) > 0}


def stage_times(g: OpGraph, sched: Schedule, step: float, t0: float = 0.0) -> list[StageTimes]:
    """Sweep each stage's timeline: an instant counts as compute if any compute op runs, else as the
    highest-priority exposed communication that runs, else as bubble (idle)."""
    cats = g.cat_names
    stage_of = np.asarray(g.stream_stage, dtype=np.int64)[np.asarray(g.op_stream, dtype=np.int64)]
    cat_arr = np.asarray(g.op_cat, dtype=np.int64)
    work_arr = np.asarray(g.op_work, dtype=float)
    ncat = len(cats)
    comp_ids = [cats.index(n) for n in COMPUTE_CATS if n in cats]
    live = (sched.end > sched.start) & (sched.end > t0) & (sched.start < t0 + step)
    order = np.argsort(stage_of, kind="stable")
    bounds_idx = np.searchsorted(stage_of[order], np.arange(g.num_stages + 1))
    out = []
    t1 = t0 + step
    for stg in range(g.num_stages):
        sel = order[bounds_idx[stg]:bounds_idx[stg + 1]]
        sel = sel[live[sel]]
        s = np.clip(sched.start[sel], t0, t1)
        e = np.clip(sched.end[sel], t0, t1)
        cs = cat_arr[sel]
        bounds = np.unique(np.concatenate([s, e, [t0, t1]]))
        widths = np.diff(bounds)
        k = len(widths)
        i0 = np.searchsorted(bounds, s)
        i1 = np.searchsorted(bounds, e)
        diff = np.zeros((ncat, k + 1))
        np.add.at(diff, (cs, i0), 1.0)
        np.add.at(diff, (cs, i1), -1.0)
        act = np.cumsum(diff, axis=1)[:, :k] > 0.5
        compute_any = np.zeros(k, dtype=bool)
        comp: dict[str, float] = {}
        for name in COMPUTE_CATS:
            if name in cats:
                a = act[cats.index(name)]
                # attribute overlapping compute (rare: one compute stream) to the first category
                own = a & ~compute_any
                compute_any |= a
                if own.any():
                    comp[name] = float(widths[own].sum())
        covered = compute_any.copy()
        exposed: dict[str, float] = {}
        hidden: dict[str, float] = {}
        for name in COMM_CATS:
            if name in cats:
                a = act[cats.index(name)]
                if not a.any():
                    continue
                ex = a & ~covered
                exposed[name] = float(widths[ex].sum())
                hidden[name] = float(widths[a].sum()) - exposed[name]
                covered |= a
        bubble = float(widths[~covered].sum())
        is_comp = np.isin(cs, comp_ids)
        frac = (e - s) / (sched.end[sel] - sched.start[sel])
        work = float((work_arr[sel] * frac)[is_comp].sum())
        out.append(StageTimes(stage=stg, compute_s=comp, compute_work_s=work, exposed_comm_s=exposed,
                              hidden_comm_s=hidden, bubble_s=bubble))
    return out

"""A small, pure, deterministic discrete-event core for one training step.

Model (SimPy-like, P5 in STYLE.md): *ops* run on in-order *streams* (like CUDA streams); an op starts
when the previous op of its stream and all of its dependencies have finished. Every op carries an
amount of *work* (seconds at full rate). While it runs it progresses at a *rate* that depends on what
else runs on the same rank (one representative rank per pipeline stage):

* a compute op runs at ``1 / (1 + sigma)`` while a communication op is active on the same rank,
  ``sigma`` = the compute slowdown that overlapped collectives cause (they steal SMs and HBM
  bandwidth; MODELLING.md section 5: Calculon charges 15 % of the processor for NVLink collectives
  and 2 % for InfiniBand; arXiv 2507.03114 measured 18.9 % on average);
* communication ops that share a link class on the same rank (scale-up or scale-out) share its
  bandwidth equally (each runs at ``1 / n``).

Both effects are work-conserving, so overlap never makes a step slower than running its parts one
after another, and never faster than the longest dependency chain (tests/sim_event check both).

The queue holds ``(t, prio, seq, op, version)``: ``seq`` is a per-engine counter, never a global, so
the same graph always gives the same schedule. A rate change bumps the op's version and pushes a new
finish event; stale events are skipped when popped.
"""

from __future__ import annotations

import heapq
import itertools
import math
from dataclasses import dataclass

import numpy as np

# Link classes of an op: what it competes for.
LINK_NONE = 0  # compute (SMs)
LINK_SCALEUP = 1  # NVLink / scale-up fabric
LINK_SCALEOUT = 2  # NICs / scale-out fabric


@dataclass(frozen=True, slots=True, kw_only=True)
class InterferenceModel:
    """How concurrent ops on one rank slow each other (MODELLING.md section 5).

    ``compute_slowdown_scaleup``: fractional compute slowdown while a scale-up (NVLink) collective is
    active on the rank. Default 0.15 = Calculon's processor share for NVLink collectives
    (calculon ``systems/h100_80g_nvl8.json``; DeepSeek-V3 gives 20 of 132 SMs = 15 % to communication).
    ``compute_slowdown_scaleout``: the same for a scale-out (InfiniBand/RoCE) transfer; default 0.02
    (Calculon's IB processor share). The two add when both are active.
    ``share_links``: concurrent comm ops of one link class on one rank share its bandwidth.
    """

    compute_slowdown_scaleup: float = 0.15
    compute_slowdown_scaleout: float = 0.02
    share_links: bool = True

    @classmethod
    def none(cls) -> InterferenceModel:
        """Ideal overlap: no slowdown, no sharing (the lower bound used in tests)."""
        return cls(compute_slowdown_scaleup=0.0, compute_slowdown_scaleout=0.0, share_links=False)


class OpGraph:
    """Ops, streams and dependencies of one simulated step (built once, then read by the engine).

    Plain lists rather than objects per op: a 16k-GPU step has tens of thousands of ops.
    """

    __slots__ = (
        "op_name",
        "op_stream",
        "op_work",
        "op_cat",
        "op_link",
        "op_deps",
        "stream_name",
        "stream_stage",
        "stream_last",
        "cat_names",
        "_cat_index",
    )

    def __init__(self) -> None:
        self.op_name: list[str] = []
        self.op_stream: list[int] = []
        self.op_work: list[float] = []
        self.op_cat: list[int] = []
        self.op_link: list[int] = []
        self.op_deps: list[tuple[int, ...]] = []
        self.stream_name: list[str] = []
        self.stream_stage: list[int] = []
        self.stream_last: list[int] = []
        self.cat_names: list[str] = []
        self._cat_index: dict[str, int] = {}

    # -- building ---------------------------------------------------------------------------------
    def stream(self, stage: int, name: str) -> int:
        """Add an in-order stream on ``stage`` (a representative rank); returns its id."""
        self.stream_name.append(name)
        self.stream_stage.append(stage)
        self.stream_last.append(-1)
        return len(self.stream_name) - 1

    def category(self, name: str) -> int:
        idx = self._cat_index.get(name)
        if idx is None:
            idx = len(self.cat_names)
            self.cat_names.append(name)
            self._cat_index[name] = idx
        return idx

    def add(self, name: str, stream: int, work: float, cat: str, link: int = LINK_NONE, deps=()) -> int:
        """Append an op to ``stream`` (after the stream's previous op) that also waits for ``deps``."""
        if not 0.0 <= work < math.inf:
            raise ValueError(f"op {name!r}: work must be finite and >= 0, got {work}")
        op = len(self.op_name)
        prev = self.stream_last[stream]
        d = tuple(deps)
        if d and min(d) < 0:
            d = tuple(x for x in d if x >= 0)
        if prev >= 0:
            d = (prev, *d)
        self.op_name.append(name)
        self.op_stream.append(stream)
        self.op_work.append(float(work))
        ci = self._cat_index.get(cat)
        self.op_cat.append(ci if ci is not None else self.category(cat))
        self.op_link.append(link)
        self.op_deps.append(d)
        self.stream_last[stream] = op
        return op

    @property
    def num_ops(self) -> int:
        return len(self.op_name)

    @property
    def num_stages(self) -> int:
        return max(self.stream_stage) + 1 if self.stream_stage else 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Schedule:
    """When every op ran. Arrays are indexed by op id."""

    start: np.ndarray
    end: np.ndarray
    binding: np.ndarray  # the dependency that finished last before the op started (-1: none)
    makespan: float
    events: int  # events popped from the queue (incl. stale ones)


class Engine:
    """Runs an :class:`OpGraph` to completion. All state lives on the instance (no globals)."""

    def __init__(self, graph: OpGraph, interference: InterferenceModel | None = None):
        self.graph = graph
        self.model = interference if interference is not None else InterferenceModel()
        self._seq = itertools.count()
        self._queue: list[tuple[float, int, int, int, int]] = []
        self.now = 0.0

    def run(self) -> Schedule:
        g = self.graph
        n = g.num_ops
        op_stage = [g.stream_stage[s] for s in g.op_stream]
        link = g.op_link
        work = g.op_work
        succ: list[list[int]] = [[] for _ in range(n)]
        waiting = [0] * n
        for i, deps in enumerate(g.op_deps):
            waiting[i] = len(deps)
            for d in deps:
                if d >= i:
                    raise ValueError(f"op {g.op_name[i]!r} depends on a later op; build ops in order")
                succ[d].append(i)
        start = [math.nan] * n
        end = [math.nan] * n
        binding = [-1] * n
        rem = [0.0] * n
        rate = [0.0] * n
        last = [0.0] * n
        version = [0] * n
        active: list[list[int]] = [[] for _ in range(max(g.num_stages, 1))]
        s_up = self.model.compute_slowdown_scaleup
        s_out = self.model.compute_slowdown_scaleout
        share = self.model.share_links
        queue = self._queue
        seq = self._seq
        push = heapq.heappush
        pop = heapq.heappop

        def rerate(stage: int, t: float) -> None:
            act = active[stage]
            n_up = n_out = 0
            for o in act:
                lk = link[o]
                if lk == LINK_SCALEUP:
                    n_up += 1
                elif lk == LINK_SCALEOUT:
                    n_out += 1
            slow = 1.0 + (s_up if n_up else 0.0) + (s_out if n_out else 0.0)
            for o in act:
                lk = link[o]
                if lk == LINK_NONE:
                    r = 1.0 / slow
                elif share:
                    r = 1.0 / (n_up if lk == LINK_SCALEUP else n_out)
                else:
                    r = 1.0
                old = rate[o]
                if r != old:
                    if old > 0.0:
                        rem[o] -= old * (t - last[o])
                        if rem[o] < 0.0:
                            rem[o] = 0.0
                    last[o] = t
                    rate[o] = r
                    version[o] += 1
                    push(queue, (t + rem[o] / r, lk, next(seq), o, version[o]))

        def begin(o: int, t: float) -> None:
            start[o] = t
            rem[o] = work[o]
            last[o] = t
            rate[o] = 0.0
            active[op_stage[o]].append(o)

        touched: set[int] = set()
        for i in range(n):
            if waiting[i] == 0:
                begin(i, 0.0)
                touched.add(op_stage[i])
        for st in sorted(touched):
            rerate(st, 0.0)
        events = 0
        done = 0
        while queue:
            t, _prio, _s, o, ver = pop(queue)
            events += 1
            if ver != version[o]:
                continue
            self.now = t
            end[o] = t
            done += 1
            st = op_stage[o]
            active[st].remove(o)
            rate[o] = 0.0
            other: list[int] = []
            for s2 in succ[o]:
                binding[s2] = o  # events pop in time order: the last dependency to finish binds
                waiting[s2] -= 1
                if waiting[s2] == 0:
                    begin(s2, t)
                    st2 = op_stage[s2]
                    if st2 != st and st2 not in other:
                        other.append(st2)
            rerate(st, t)
            if other:
                other.sort()
                for st2 in other:
                    rerate(st2, t)
        if done != n:
            raise RuntimeError(f"deadlock: {n - done} of {n} ops never ran (dependency cycle?)")
        e = np.asarray(end, dtype=float)
        return Schedule(
            start=np.asarray(start, dtype=float),
            end=e,
            binding=np.asarray(binding, dtype=np.int64),
            makespan=float(e.max()) if n else 0.0,
            events=events,
        )


def critical_path(graph: OpGraph, sched: Schedule) -> list[int]:
    """Op ids on the critical path, first to last: walk back from the op that ends last along the
    dependency that finished last before each op started."""
    if graph.num_ops == 0:
        return []
    o = int(np.argmax(sched.end))
    path = []
    while o >= 0:
        path.append(o)
        o = int(sched.binding[o])
    path.reverse()
    return path


def longest_chain(graph: OpGraph) -> float:
    """Length of the longest dependency chain at full rate (the critical-path lower bound)."""
    n = graph.num_ops
    fin = [0.0] * n
    for i in range(n):
        s = 0.0
        for d in graph.op_deps[i]:
            if fin[d] > s:
                s = fin[d]
        fin[i] = s + graph.op_work[i]
    return max(fin) if n else 0.0

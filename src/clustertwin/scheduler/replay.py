"""Event-driven replay of a job trace on a cluster inventory under one gang policy.

Events: job arrival, job end, node failure, node repair. After each batch of events at one instant the
policy runs a scheduling pass over the queue. Jobs are gangs (all pods start together); a running job
hit by a node failure or preempted restarts from its last checkpoint (lost work = time since then,
plus the restart overhead) and goes back to the queue.

Run time at a placement
-----------------------
* ``duration_s`` jobs run ``duration_s`` wherever they land (no model of their communication).
* training jobs (``model`` + ``plan`` + ``steps``) run ``steps x step_time(placement)``, with the
  step time from the analytical step model (``sim.analytical.estimate_batch``) on the hardware the
  placement gives them: the scale-up domain seen by the plan is the fewest GPUs the job holds in any
  NVLink domain it touches (a TP/EP group that no longer fits in NVLink goes over the scale-out NICs,
  as the step model prices it), and a job spread over more than one leaf block gets the per-GPU
  scale-out bandwidth divided by the leaf oversubscription (its DP/PP rings cross the leaf uplinks,
  the steady-state bound of the fabric model for an oversubscribed leaf) plus two more switch hops of
  latency. Step times are cached per (model, plan, GPUs per domain, spread).

Faults
------
Node (host / compute-tray) failures arrive as a Poisson process with the per-node rate of the
reliability model's device- and host-unit classes (Llama 3 Table 5 rates, ``reliability/failures``),
times ``fault_scale``; the node is out for the model's host repair time. Lost GPU-hours = GPUs x work
since the last checkpoint, plus GPUs x restart overhead (detection + communicator init, reliability
defaults).
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..errors import InputError
from .inventory import Inventory
from .jobs import JobSpec, JobTable
from .policies import gang_policy, place

ARRIVE, END, FAIL, REPAIR = 0, 1, 2, 3


# ------------------------------------------------------------------------------------ step model
class StepModel:
    """Placement-aware step time of training jobs (cached)."""

    def __init__(self, inv: Inventory, catalog=None):
        self.inv = inv
        self.catalog = catalog
        self._cache: dict[tuple, float] = {}
        self._models: dict[str, Any] = {}
        self._hw = None
        self.evaluations = 0

    def _hardware(self):
        if self._hw is None:
            from ..sim.machine import make_hardware

            c = self.inv.cluster
            self._hw = make_hardware(c.system, c.fabric, "bf16", self.catalog)
        return self._hw

    def plan_of(self, job: JobSpec) -> dict[str, int]:
        p = job.plan
        assert p is not None
        gpus = job.gpus
        per = p.tp * p.pp * p.cp
        if gpus % per:
            raise InputError(f"job {job.id}: field 'plan': tp x pp x cp = {per} does not divide the job's {gpus} GPUs",
                             hint="pick degrees whose product divides pods x gpus_per_pod")
        dp = p.dp or gpus // per
        if dp * per != gpus:
            raise InputError(f"job {job.id}: field 'plan': tp x pp x cp x dp = {dp * per} but the job has {gpus} GPUs")
        gb = p.global_batch or dp * p.micro_batch * max(1, 2 * p.pp)
        if gb % (dp * p.micro_batch):
            raise InputError(f"job {job.id}: field 'plan': global_batch {gb} is not a multiple of dp x micro_batch "
                             f"= {dp * p.micro_batch}")
        return {"tp": p.tp, "pp": p.pp, "cp": p.cp, "ep": p.ep, "dp": dp, "vpp": p.vpp, "micro_batch": p.micro_batch,
                "global_batch": gb, "seq_len": p.seq_len, "recompute": p.recompute, "zero": p.zero}

    def step_time(self, job: JobSpec, per_domain: int, spread: bool) -> float:
        plan = self.plan_of(job)
        key = (job.model, tuple(sorted(plan.items())), int(per_domain), bool(spread))
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        from ..sim.analytical import estimate_batch
        from ..workload.model import get_model

        if job.model not in self._models:
            self._models[job.model] = get_model(job.model)
        model = self._models[job.model]
        hw = self._hardware()
        dom = max(1, min(int(per_domain), hw.domain))
        hw2 = replace(hw, domain=dom)
        if spread:
            # a job spread over leaves: its NICs share the leaf uplinks (worst case, as plan
            # --oversubscription) and every network path has two more switch hops
            from ..hardware import resolve_hardware
            from ..planner.evaluator import oversubscribed

            fab = oversubscribed(hw.scaleout, self.inv.oversubscription, hw.system)
            fab = replace(fab, nic_latency_s=fab.nic_latency_s + 2 * fab.hop_latency_s)
            hw2 = replace(hw2, scaleout=fab, view=resolve_hardware(hw.system, fab))
        c = self.inv.cluster
        seq = plan.pop("seq_len")
        out = estimate_batch(model, c.system, c.fabric, plan, seq_len=seq, hardware=hw2, catalog=self.catalog)
        self.evaluations += 1
        if not bool(np.asarray(out["valid"]).reshape(-1)[0]):
            raise InputError(f"job {job.id}: field 'plan': the step model cannot run {plan} on {job.model}",
                             hint="check that tp divides the heads, pp the layers, and the batch the dp degree")
        st = float(np.asarray(out["step_time_s"]).reshape(-1)[0])
        self._cache[key] = st
        return st

    def ideal(self, job: JobSpec) -> float:
        return self.step_time(job, min(job.gpus, self.inv.max_domain_gpus), False)


# ------------------------------------------------------------------------------------ results
@dataclass
class JobResult:
    id: str
    gpus: int
    priority: int
    submit_s: float
    start_s: float = math.nan  # first start
    end_s: float = math.nan
    restarts: int = 0
    preemptions: int = 0
    domains: int = 0  # spanned by the last placement
    leaves: int = 0
    spines: int = 0
    step_time_s: float | None = None
    ideal_step_time_s: float | None = None
    lost_gpu_h: float = 0.0

    @property
    def queue_s(self) -> float:
        return self.start_s - self.submit_s

    @property
    def jct_s(self) -> float:
        return self.end_s - self.submit_s

    @property
    def penalty(self) -> float:
        if self.step_time_s is None or not self.ideal_step_time_s:
            return 0.0
        return self.step_time_s / self.ideal_step_time_s - 1.0

    def to_dict(self) -> dict:
        return {"id": self.id, "gpus": self.gpus, "priority": self.priority, "submit_s": self.submit_s,
                "start_s": self.start_s, "end_s": self.end_s, "queue_s": self.queue_s, "jct_s": self.jct_s,
                "restarts": self.restarts, "preemptions": self.preemptions, "domains": self.domains,
                "leaves": self.leaves, "spines": self.spines, "step_time_s": self.step_time_s,
                "ideal_step_time_s": self.ideal_step_time_s, "step_penalty": self.penalty,
                "lost_gpu_h": self.lost_gpu_h}


@dataclass
class ReplayResult:
    policy: str
    seed: int
    inventory: dict
    jobs: list[JobResult]
    makespan_s: float
    series: dict[str, list[float]]
    metrics: dict[str, float]
    wall_s: float
    step_model_evaluations: int = 0
    failures: int = 0
    notes: list[str] = field(default_factory=list)

    def to_json(self, *, per_job: bool = True) -> dict:
        out = {"policy": self.policy, "seed": self.seed, "inventory": self.inventory, "makespan_s": self.makespan_s,
               "metrics": self.metrics, "series": self.series, "wall_s": self.wall_s,
               "step_model_evaluations": self.step_model_evaluations, "node_failures": self.failures,
               "notes": self.notes}
        if per_job:
            out["jobs"] = [j.to_dict() for j in self.jobs]
        return out


def _pct(x: np.ndarray, q: float) -> float:
    return float(np.percentile(x, q)) if x.size else math.nan


# ------------------------------------------------------------------------------------ validation
def check_jobs(jobs: JobTable, inv: Inventory) -> None:
    """Reject jobs no placement can ever satisfy, naming the job, the field and the reason."""
    g_node = inv.gpus_per_node
    total = inv.schedulable_gpus
    for j in jobs.specs:
        if j.gpus_per_pod > g_node:
            raise InputError(f"job {j.id}: field 'gpus_per_pod': {j.gpus_per_pod} GPUs per pod, but a node of "
                             f"{inv.system} has {g_node}", hint="a pod sits on one node; use more, smaller pods")
        if j.gpus > total:
            raise InputError(f"job {j.id}: field 'pods': the gang needs {j.gpus:,} GPUs, the cluster has {total:,} "
                             "schedulable", hint="shrink the job or add --domains")
        if j.required:
            cap = inv.level_gpus(j.required)
            pods_fit = cap // g_node * (g_node // j.gpus_per_pod)
            if j.pods > pods_fit:
                raise InputError(f"job {j.id}: field 'required': no {j.required} of this cluster holds {j.pods} pods "
                                 f"of {j.gpus_per_pod} GPUs (the largest {j.required} has {cap:,} schedulable GPUs)",
                                 hint="relax the constraint to a wider level or make it 'preferred'")
        if j.segment:
            seg_gpus = j.segment * j.gpus_per_pod
            dom_cap = inv.level_gpus("domain") // g_node * (g_node // j.gpus_per_pod)
            if j.segment > dom_cap:
                raise InputError(f"job {j.id}: field 'segment': a segment of {j.segment} pods ({seg_gpus} GPUs) does "
                                 f"not fit one NVLink domain (at most {dom_cap} pods)", hint="use a smaller segment")
        if j.compute_domain and j.compute_domain > inv.level_gpus("domain"):
            raise InputError(f"job {j.id}: field 'compute_domain': {j.compute_domain} GPUs in one NVLink domain, but "
                             f"the largest domain has {inv.level_gpus('domain')} schedulable GPUs")
        if j.compute_domain and j.compute_domain % j.gpus_per_pod:
            raise InputError(f"job {j.id}: field 'compute_domain': {j.compute_domain} is not a multiple of "
                             f"gpus_per_pod {j.gpus_per_pod}")


def node_failure_rate(inv: Inventory, params_paths=()) -> tuple[float, float, float]:
    """(failures per node-second, repair seconds, restart overhead seconds) from the reliability model."""
    from ..reliability.failures import build_failure_model
    from ..reliability.params import load_params

    params = load_params(params_paths)
    fm = build_failure_model(params)
    c = inv.cluster
    per_node = {"accelerator": inv.gpus_per_node, "host": 1.0,
                "nic": (c.system.nics_per_host if c is not None else 0)}
    rate = sum(cl.rate_per_unit_s * per_node.get(cl.exposure, 0.0) for cl in fm.classes if cl.unit in ("device", "host"))
    repair = float(fm.repair_s.get("host", 24 * 3600.0))
    r = params.restart
    overhead = float(sum(r[k].value for k in ("detect_s", "init_s") if k in r))
    return rate, repair, overhead


# ------------------------------------------------------------------------------------ the engine
def replay(jobs: JobTable, inv: Inventory, policy: str, *, seed: int = 0, fault_scale: float = 0.0,
           catalog=None, series_points: int = 200, backfill_depth: int = 200, queueing: str = "strict",
           progress=None) -> ReplayResult:
    """Replay ``jobs`` under ``policy``. ``queueing``: ``strict`` (a blocked head blocks the queue, FIFO
    order; the default for every policy so that placement is compared at equal queueing) or
    ``besteffort`` (every pending gang is retried each pass, bounded by ``backfill_depth``; Kueue's
    BestEffortFIFO). ``backfill`` always runs EASY. ``progress(done, total)``, if given, is called as
    jobs arrive (about every 1 % of them)."""
    gang_policy(policy)
    if queueing not in ("strict", "besteffort"):
        raise InputError(f"unknown queueing {queueing!r}", hint="strict | besteffort")
    check_jobs(jobs, inv)
    t_wall = time.perf_counter()
    rng = np.random.default_rng(seed)
    specs = jobs.specs
    J = len(specs)
    G = inv.gpus_per_node
    N = inv.num_nodes
    up = inv.healthy.copy()
    free = np.where(up, G, 0).astype(np.int64)
    step_model = StepModel(inv, catalog)

    gpus = np.array([j.gpus for j in specs], np.int64)
    # work left, in the job's own unit: seconds for duration jobs, steps for training jobs
    training = np.array([j.model is not None for j in specs])
    work = np.array([j.steps if j.model is not None else j.duration_s for j in specs], float)
    ideal_runtime = np.zeros(J)
    results = [JobResult(j.id, j.gpus, j.priority, j.submit_s) for j in specs]
    for i, j in enumerate(specs):
        if training[i]:
            ist = step_model.ideal(j)
            results[i].ideal_step_time_s = ist
            ideal_runtime[i] = j.steps * ist
        else:
            ideal_runtime[i] = j.duration_s

    # running state
    run_nodes: dict[int, np.ndarray] = {}
    run_start = np.full(J, np.nan)
    run_rate = np.zeros(J)      # work units per second at the current placement
    run_end = np.full(J, np.inf)
    epoch = np.zeros(J, np.int64)  # invalidates END events of interrupted runs
    node_jobs: list[set[int]] = [set() for _ in range(N)]
    queue: list[int] = []
    done = np.zeros(J, bool)
    lost_gpu_s = 0.0
    useful_gpu_s = 0.0
    alloc = [0]  # GPUs held by running jobs
    pending = [J, 0]  # arrivals not yet seen, repairs not yet done
    step_report = max(1, J // 100)

    events: list[tuple[float, int, int, int, int]] = []
    seq = 0
    for i, j in enumerate(specs):
        heapq.heappush(events, (j.submit_s, ARRIVE, seq, i, 0))
        seq += 1
    fail_rate = repair_s = overhead_s = 0.0
    n_fail = 0
    if fault_scale > 0:
        fail_rate, repair_s, overhead_s = node_failure_rate(inv)
        fail_rate *= fault_scale
        lam = fail_rate * N
        heapq.heappush(events, (float(rng.exponential(1 / lam)), FAIL, seq, -1, 0))
        seq += 1

    # metrics accumulators (time-weighted)
    t_prev = 0.0
    acc = {"alloc_gpu_s": 0.0, "up_gpu_s": 0.0, "stranded_domain_gpu_s": 0.0, "stranded_leaf_gpu_s": 0.0,
           "fgd_frag_gpu_s": 0.0, "wait_s": 0.0, "free_wait_gpu_s": 0.0, "alloc_win_gpu_s": 0.0, "up_win_gpu_s": 0.0}
    last_submit = max(j.submit_s for j in specs)
    series_t: list[float] = []
    series_alloc: list[float] = []
    # FGD-style typical requests at domain granularity: the trace's job sizes capped at one domain
    dsz = inv.gpus_per_domain
    req_sizes, req_counts = np.unique(np.minimum(gpus, dsz), return_counts=True)
    req_freq = req_counts / req_counts.sum()
    dom = inv.node_domain
    leaf = inv.node_leaf

    def frag_now():
        up_g = np.bincount(dom, weights=np.where(up, G, 0), minlength=inv.num_domains)
        fr = np.bincount(dom, weights=free, minlength=inv.num_domains)
        partial = (fr > 0) & (fr < up_g)
        stranded_d = float(fr[partial].sum())
        up_l = np.bincount(leaf, weights=np.where(up, G, 0), minlength=inv.num_leaves)
        fl = np.bincount(leaf, weights=free, minlength=inv.num_leaves)
        stranded_l = float(fl[(fl > 0) & (fl < up_l)].sum())
        # sum_s f_s * (free GPUs in domains with fewer free GPUs than s)
        fgd = float((req_freq[None, :] * (fr[:, None] * (fr[:, None] < req_sizes[None, :]))).sum())
        return stranded_d, stranded_l, fgd, float(fr.sum())

    frag_state = frag_now()

    def advance(t: float) -> None:
        nonlocal t_prev
        dt = t - t_prev
        if dt <= 0:
            return
        allocated = float(alloc[0])
        upg = float(up.sum() * G)
        acc["alloc_gpu_s"] += allocated * dt
        acc["up_gpu_s"] += upg * dt
        win = max(0.0, min(t, last_submit) - t_prev)  # the part of dt inside the arrival window
        acc["alloc_win_gpu_s"] += allocated * win
        acc["up_win_gpu_s"] += upg * win
        if queue:
            sd, sl, fg, fr = frag_state
            acc["wait_s"] += dt
            acc["stranded_domain_gpu_s"] += sd * dt
            acc["stranded_leaf_gpu_s"] += sl * dt
            acc["fgd_frag_gpu_s"] += fg * dt
            acc["free_wait_gpu_s"] += fr * dt
        t_prev = t

    def runtime_at(i: int, nodes: np.ndarray) -> tuple[float, float | None, int, int, int]:
        doms, per = np.unique(dom[nodes], return_counts=True)
        leaves = np.unique(leaf[nodes]).size
        spines = np.unique(inv.node_spine[nodes]).size
        if training[i]:
            # the largest rank block that tiles every domain's share: TP/CP groups of that size (or
            # smaller divisors) stay inside NVLink, larger ones straddle a domain boundary
            share = per * specs[i].gpus_per_pod
            st = step_model.step_time(specs[i], int(np.gcd.reduce(share)), leaves > 1)
            return 1.0 / st, st, doms.size, leaves, spines
        return 1.0, None, doms.size, leaves, spines

    def start(i: int, nodes: np.ndarray, t: float) -> None:
        nonlocal seq
        rate, st, nd, nl, ns = runtime_at(i, nodes)
        np.subtract.at(free, nodes, specs[i].gpus_per_pod)
        if free[nodes].min() < 0 or not up[nodes].all():  # a policy bug, never the user's input
            raise RuntimeError(f"policy {policy} over-committed a node placing job {specs[i].id}")
        alloc[0] += int(gpus[i])
        run_nodes[i] = nodes
        for n in np.unique(nodes):
            node_jobs[n].add(i)
        run_start[i] = t
        run_rate[i] = rate
        run_end[i] = t + work[i] / rate
        r = results[i]
        if math.isnan(r.start_s):
            r.start_s = t
        r.domains, r.leaves, r.spines = nd, nl, ns
        if st is not None:
            r.step_time_s = st
        epoch[i] += 1
        heapq.heappush(events, (run_end[i], END, seq, i, int(epoch[i])))
        seq += 1

    def stop(i: int, t: float, *, interrupted: bool) -> None:
        nodes = run_nodes.pop(i)
        alloc[0] -= int(gpus[i])
        np.add.at(free, nodes, specs[i].gpus_per_pod)
        free[~up] = 0
        for n in np.unique(nodes):
            node_jobs[n].discard(i)
        elapsed = t - run_start[i]
        if interrupted:
            nonlocal lost_gpu_s
            ck = specs[i].checkpoint_s
            kept = (elapsed // ck) * ck if ck else 0.0
            lost = elapsed - kept
            work[i] = max(work[i] - kept * run_rate[i], 0.0)
            lost_gpu_s += gpus[i] * (lost + overhead_s)
            results[i].lost_gpu_h += gpus[i] * (lost + overhead_s) / 3600.0
            epoch[i] += 1
        run_rate[i] = 0.0

    def fits_any(i: int) -> np.ndarray | None:
        cap = free // specs[i].gpus_per_pod
        return place(policy, inv, cap, specs[i])

    def schedule(t: float) -> None:
        """One pass over the queue (policy order; strict or best-effort queueing; EASY for backfill)."""
        if not queue:
            return
        if policy == "priority":
            queue.sort(key=lambda i: (-specs[i].priority, specs[i].submit_s, i))
        pos = 0
        scanned = 0
        blocked = False
        shadow_t, extra = math.inf, 0
        while pos < len(queue):
            i = queue[pos]
            got = fits_any(i) if gpus[i] <= int(free.sum()) else None
            if got is None and policy == "priority" and not blocked and preempt_for(i, t):
                got = fits_any(i)
            if not blocked:
                if got is not None:
                    start(i, got, t)
                    queue.pop(pos)
                    continue
                blocked = True
                if policy == "backfill":
                    shadow_t, extra = _reservation(i, t)
                elif queueing == "strict":
                    return  # a blocked head blocks the queue (FIFO order)
                pos += 1
                continue
            # behind a blocked head: EASY backfill, or best-effort retry of every pending gang
            if got is not None:
                if policy != "backfill":
                    start(i, got, t)
                    queue.pop(pos)
                    continue
                if t + work[i] / _rate_guess(i) <= shadow_t:
                    start(i, got, t)
                    queue.pop(pos)
                    continue
                if gpus[i] <= extra:
                    extra -= int(gpus[i])
                    start(i, got, t)
                    queue.pop(pos)
                    continue
            pos += 1
            scanned += 1
            if scanned >= backfill_depth:
                return

    def _rate_guess(i: int) -> float:
        # a job's expected speed before it is placed: its ideal placement
        return 1.0 / results[i].ideal_step_time_s if training[i] else 1.0

    def _reservation(i: int, t: float) -> tuple[float, int]:
        """EASY: the earliest time the head's GPUs are free (running jobs' expected ends) and the GPUs
        beyond its need at that time."""
        need = int(gpus[i])
        have = int(free.sum())
        if have >= need:
            return t, have - need
        ends = sorted((run_end[k], int(gpus[k])) for k in run_nodes)
        for e, g in ends:
            have += g
            if have >= need:
                return e, have - need
        return math.inf, 0

    def preempt_for(i: int, t: float) -> bool:
        pr = specs[i].priority
        victims = sorted((k for k in run_nodes if specs[k].priority < pr),
                         key=lambda k: (specs[k].priority, -run_start[k]))
        if not victims:
            return False
        cap_free = free.copy()
        chosen = []
        for k in victims:
            np.add.at(cap_free, run_nodes[k], specs[k].gpus_per_pod)
            chosen.append(k)
            if place(policy, inv, cap_free // specs[i].gpus_per_pod, specs[i]) is not None:
                for v in chosen:
                    stop(v, t, interrupted=True)
                    results[v].preemptions += 1
                    queue.append(v)
                return True
        return False

    t = 0.0
    while events:
        t = events[0][0]
        advance(t)
        changed = False
        while events and events[0][0] == t:
            _, kind, _, i, ep = heapq.heappop(events)
            if kind == ARRIVE:
                pending[0] -= 1
                if progress is not None and (pending[0] % step_report == 0 or not pending[0]):
                    progress(J - pending[0], J)
                queue.append(i)
                changed = True
            elif kind == END:
                if ep != epoch[i] or i not in run_nodes:
                    continue
                stop(i, t, interrupted=False)
                done[i] = True
                results[i].end_s = t
                useful_gpu_s += gpus[i] * ideal_runtime[i]
                changed = True
            elif kind == FAIL:
                if done.all() or (not run_nodes and not pending[0] and not pending[1]):
                    continue  # nothing left that a failure could change
                n = int(rng.integers(N))
                lam = fail_rate * N
                heapq.heappush(events, (t + float(rng.exponential(1 / lam)), FAIL, seq, -1, 0))
                seq += 1
                if not up[n]:
                    continue
                n_fail += 1
                up[n] = False
                for k in list(node_jobs[n]):
                    stop(k, t, interrupted=True)
                    results[k].restarts += 1
                    queue.insert(0, k)
                free[n] = 0
                heapq.heappush(events, (t + repair_s, REPAIR, seq, n, 0))
                pending[1] += 1
                seq += 1
                changed = True
            elif kind == REPAIR:
                pending[1] -= 1
                up[i] = True
                free[i] = G  # nothing runs on a node while it is down
                changed = True
        if changed:
            schedule(t)
            frag_state = frag_now()
            series_t.append(t)
            series_alloc.append(float(alloc[0]) / max(1.0, float(up.sum() * G)))
        if done.all():
            break
    makespan = t
    if not done.all():
        stuck = [specs[i].id for i in np.flatnonzero(~done)[:5]]
        raise InputError(f"replay ended with {int((~done).sum())} job(s) never placed ({', '.join(stuck)} ...)",
                         hint="their constraints cannot be met on this cluster under this policy")

    jct = np.array([r.jct_s for r in results])
    qd = np.array([r.queue_s for r in results])
    pen = np.array([r.penalty for r in results if r.step_time_s is not None])
    total_up = acc["up_gpu_s"] or 1.0
    wait = acc["wait_s"] or 1.0
    metrics = {
        "jobs": J, "makespan_h": makespan / 3600.0,
        "jct_mean_h": float(jct.mean()) / 3600.0, "jct_p50_h": _pct(jct, 50) / 3600.0,
        "jct_p95_h": _pct(jct, 95) / 3600.0, "jct_p99_h": _pct(jct, 99) / 3600.0,
        "queue_mean_h": float(qd.mean()) / 3600.0, "queue_p50_h": _pct(qd, 50) / 3600.0,
        "queue_p95_h": _pct(qd, 95) / 3600.0,
        "utilisation": acc["alloc_win_gpu_s"] / (acc["up_win_gpu_s"] or 1.0),
        "utilisation_makespan": acc["alloc_gpu_s"] / total_up,
        "goodput": useful_gpu_s / total_up,
        "stranded_domain_gpus": acc["stranded_domain_gpu_s"] / wait,
        "stranded_leaf_gpus": acc["stranded_leaf_gpu_s"] / wait,
        "fgd_frag_gpus": acc["fgd_frag_gpu_s"] / wait,
        "fgd_frag_ratio": acc["fgd_frag_gpu_s"] / (acc["free_wait_gpu_s"] or 1.0),
        "time_with_queue_frac": acc["wait_s"] / max(makespan, 1e-9),
        "mean_domains_per_job": float(np.mean([r.domains for r in results])),
        "multi_leaf_jobs": int(sum(1 for r in results if r.leaves > 1)),
        "training_jobs": int(training.sum()),
        "mean_step_penalty": float(pen.mean()) if pen.size else 0.0,
        "p95_step_penalty": _pct(pen, 95) if pen.size else 0.0,
        "lost_gpu_h": lost_gpu_s / 3600.0,
        "restarts": int(sum(r.restarts for r in results)),
        "preemptions": int(sum(r.preemptions for r in results)),
    }
    # allocation ratio over time, resampled to at most series_points (time-weighted step function)
    st = np.array(series_t)
    sa = np.array(series_alloc)
    if st.size > series_points:
        grid = np.linspace(0, makespan, series_points)
        idx = np.clip(np.searchsorted(st, grid, side="right") - 1, 0, st.size - 1)
        st, sa = grid, sa[idx]
    notes = ["utilisation: allocated / schedulable GPU-seconds while jobs still arrive (0 .. last submit); "
             "goodput: ideal GPU-seconds of finished work / schedulable GPU-seconds over the makespan",
             "stranded / FGD fragmentation averaged over the time some job waits in the queue",
             "duration_s jobs run their duration anywhere; training jobs pay the step model's placement penalty"]
    if fault_scale > 0:
        notes.append(f"node failures at {fault_scale} x the reliability model's per-node rate "
                     f"({fail_rate / max(fault_scale, 1e-30) * 86400 * 1000:.3g} per 1000 node-days), "
                     f"repair {repair_s / 3600:.0f} h, restart overhead {overhead_s:.0f} s")
    return ReplayResult(policy=policy, seed=seed, inventory=inv.summary(), jobs=results, makespan_s=makespan,
                        series={"t_s": [float(x) for x in st], "allocation": [float(x) for x in sa]},
                        metrics=metrics, wall_s=time.perf_counter() - t_wall,
                        step_model_evaluations=step_model.evaluations, failures=n_fail, notes=notes)

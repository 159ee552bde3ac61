"""Monte-Carlo goodput: many long runs simulated at once (vectorised over runs).

Each run alternates compute segments of length ``tau`` and blocking checkpoints of length ``delta``.
Interruptions arrive as a Poisson process (unplanned classes + planned maintenance). An unplanned
interruption loses the work since the last completed checkpoint and costs a restart ``R`` plus, when
the failed unit finds no spare (probability ``block_prob[class]``), an exponential wait with mean
``block_wait[class]`` (during that wait the job is down and no interruption can strike it; the restart
follows). A planned interruption checkpoints first (no lost work) and costs ``delta + R``.
Interruptions may strike during restarts (the restart starts over), as in Daly (2006).

All runs advance in lock-step, one interruption per iteration, so the Python loop runs about
``rate * horizon`` times whatever the number of runs. Randomness comes only from the
``numpy.random.Generator`` passed in (or built from ``seed``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError


@dataclass(frozen=True, slots=True, kw_only=True)
class MonteCarloResult:
    ettr: np.ndarray  # per run, useful time / horizon
    unplanned: np.ndarray  # interruptions per run
    planned: np.ndarray
    waited_s: np.ndarray  # time spent waiting for spares, per run
    horizon_s: float
    runs: int
    seed: int | None

    def percentiles(self, q=(5, 50, 95)) -> dict:
        return {
            "ettr": {f"p{p}": float(v) for p, v in zip(q, np.percentile(self.ettr, q), strict=True)},
            "unexpected_interruptions": {f"p{p}": float(v) for p, v in zip(q, np.percentile(self.unplanned, q), strict=True)},
            "ettr_mean": float(self.ettr.mean()),
            "ettr_stderr": float(self.ettr.std(ddof=1) / np.sqrt(self.runs)) if self.runs > 1 else 0.0,
            "unexpected_interruptions_mean": float(self.unplanned.mean()),
        }


def simulate(*, class_rates, block_prob, block_wait, planned_rate: float, tau: float, delta: float,
             restart: float, horizon_s: float, runs: int, rng: np.random.Generator | None = None,
             seed: int | None = None) -> MonteCarloResult:
    """Simulate ``runs`` independent jobs of wall length ``horizon_s`` (see module docstring)."""
    class_rates = np.asarray(class_rates, dtype=float)
    block_prob = np.broadcast_to(np.asarray(block_prob, dtype=float), class_rates.shape)
    block_wait = np.broadcast_to(np.asarray(block_wait, dtype=float), class_rates.shape)
    if runs < 1:
        raise InputError(f"--monte-carlo needs at least 1 run, got {runs}")
    if tau <= 0 or delta < 0 or restart < 0 or horizon_s <= 0:
        raise InputError("Monte-Carlo needs a positive interval and horizon and non-negative checkpoint/restart times")
    if rng is None:
        rng = np.random.default_rng(seed)
    lam_u = float(class_rates.sum())
    lam = lam_u + float(planned_rate)
    cycle = tau + delta
    t = np.zeros(runs)
    useful = np.zeros(runs)
    down = np.zeros(runs)  # downtime still to serve before computing again
    n_u = np.zeros(runs, dtype=np.int64)
    n_p = np.zeros(runs, dtype=np.int64)
    waited = np.zeros(runs)
    active = np.ones(runs, dtype=bool)
    if lam <= 0:
        k = np.floor(horizon_s / cycle)
        useful[:] = k * tau + np.minimum(horizon_s - k * cycle, tau)
        return MonteCarloResult(ettr=useful / horizon_s, unplanned=n_u, planned=n_p, waited_s=waited,
                                horizon_s=horizon_s, runs=runs, seed=seed)
    cum = np.cumsum(class_rates) / lam_u if lam_u > 0 else np.ones_like(class_rates)
    p_planned = float(planned_rate) / lam
    wait = np.zeros(runs)  # waiting for a spare: the job is down, its clock of failures is stopped
    while active.any():
        idx = np.flatnonzero(active)
        if wait[idx].any():
            t[idx] += wait[idx]
            wait[idx] = 0.0
            done = idx[t[idx] >= horizon_s]
            if done.size:
                t[done] = horizon_s
                active[done] = False
                idx = np.flatnonzero(active)
                if idx.size == 0:
                    break
        n = idx.size
        gap = rng.exponential(1.0 / lam, n)
        t0, d0 = t[idx], down[idx]
        ends = t0 + gap >= horizon_s
        # Runs whose next interruption falls after the horizon: finish and stop.
        if ends.any():
            e = idx[ends]
            work = np.maximum(horizon_s - t0[ends] - d0[ends], 0.0)
            k = np.floor(work / cycle)
            useful[e] += k * tau + np.minimum(work - k * cycle, tau)
            t[e] = horizon_s
            active[e] = False
        go = ~ends
        if not go.any():
            break
        i = idx[go]
        g, d = gap[go], d0[go]
        work = np.maximum(g - d, 0.0)  # zero when the interruption strikes during the downtime
        k = np.floor(work / cycle)
        partial = work - k * cycle
        planned = rng.random(i.size) < p_planned
        useful[i] += k * tau + np.where(planned, np.minimum(partial, tau), 0.0)
        t[i] += g
        cls = np.minimum(np.searchsorted(cum, rng.random(i.size), side="right"), class_rates.size - 1)
        blocked = (rng.random(i.size) < block_prob[cls]) & ~planned
        w = np.where(blocked, rng.exponential(1.0, i.size) * block_wait[cls], 0.0)
        waited[i] += w
        wait[i] = w
        down[i] = np.where(planned, delta + restart, restart)
        n_p[i] += planned
        n_u[i] += ~planned
    return MonteCarloResult(ettr=useful / horizon_s, unplanned=n_u, planned=n_p, waited_s=waited,
                            horizon_s=horizon_s, runs=runs, seed=seed)

"""Goodput of one training job: interruptions, checkpoint interval, effective training time ratio
(ETTR) and tokens per day.

ETTR (useful compute time / wall time) comes from Daly (2006) eq. (20) for the unplanned failures
(exponential inter-arrival, failures also during checkpoints and restarts; see ``checkpoint.py``),
divided by the stretch from waiting for spare units (the job is down, so no failure strikes it while it
waits), times the share of wall time left after planned interruptions (each costs one checkpoint and
one restart, Llama 3 Sec. 3.3.4 lists 47 in 54 days):

    ETTR = (1 - lambda_p (delta + R)) * tau / (M e^{R/M} (e^{(tau+delta)/M} - 1)) / (1 + Lambda W),
    M = 1 / Lambda,  Lambda = sum_c lambda_c,  W = sum_c (lambda_c / Lambda) P_block,c wait_c.

The loss breakdown uses the first-order terms (Young 1974): checkpointing delta/(tau+delta), lost
work (tau+delta)/(2M), restarts R/M, spare waits, planned interruptions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError
from .checkpoint import (
    checkpoint_bytes,
    daly_ettr,
    daly_interval,
    numeric_optimal_interval,
    transfer_time,
    young_interval,
)
from .counts import ComponentCounts
from .failures import DAY, FailureModel, SpareAnalysis, spare_analysis
from .montecarlo import MonteCarloResult, simulate
from .params import Param, Params


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointSetup:
    size_bytes: float
    write_s: float  # full write
    blocking_s: float  # training stalls this long per checkpoint (delta)
    load_s: float
    restart_s: float  # R: detect + reschedule + init + load
    parts_s: dict[str, float]
    assumptions: tuple[str, ...] = ()


def _note(name: str, p: Param, unit: str = "") -> list[str]:
    return [f"{name} = {p.value:g}{unit}: {p.assumed}"] if p.assumed else []


def checkpoint_setup(params: Params, num_params: float, *, write_bw: float | None = None, read_bw: float | None = None,
                     blocking_fraction: float | None = None, bytes_per_param: float | None = None,
                     restart_s: float | None = None) -> CheckpointSetup:
    """Checkpoint size and times from the model's parameter count and the storage bandwidths
    (bytes/s; defaults: Meta Tectonic 2 TB/s write, 7 TB/s read)."""
    c, r = params.checkpoint, params.restart
    notes: list[str] = []
    bpp = bytes_per_param if bytes_per_param is not None else c["bytes_per_param"].value
    size = checkpoint_bytes(num_params, bpp)
    if write_bw is None:
        write_bw = c["write_tbps"].value * 1e12
        notes += _note("checkpoint write bandwidth", c["write_tbps"], " TB/s")
    if read_bw is None:
        read_bw = c["read_tbps"].value * 1e12
        notes += _note("checkpoint read bandwidth", c["read_tbps"], " TB/s")
    if blocking_fraction is None:
        blocking_fraction = c["blocking_fraction"].value
        notes += _note("checkpoint blocking fraction", c["blocking_fraction"])
    if not 0 < blocking_fraction <= 1:
        raise InputError(f"checkpoint blocking fraction must be in (0, 1], got {blocking_fraction}")
    write = transfer_time(size, write_bw)
    load = transfer_time(size, read_bw)
    if restart_s is not None:
        if restart_s <= 0:
            raise InputError(f"restart time must be positive, got {restart_s}", hint="pass seconds above zero to --restart")
        parts = {"total_given": float(restart_s)}
        total = float(restart_s)
    else:
        parts = {"detect": r["detect_s"].value, "reschedule": r["reschedule_s"].value, "init": r["init_s"].value, "load_checkpoint": load}
        total = float(sum(parts.values()))
        for k in ("detect_s", "reschedule_s", "init_s"):
            notes += _note(f"restart {k}", r[k], " s")
    return CheckpointSetup(size_bytes=size, write_s=write, blocking_s=write * blocking_fraction, load_s=load,
                           restart_s=total, parts_s=parts, assumptions=tuple(notes))


@dataclass(frozen=True, slots=True, kw_only=True)
class GoodputResult:
    num_accelerators: float
    days: float
    unexpected_per_day: float
    unexpected_interruptions: float  # expected over ``days``
    planned_interruptions: float
    mtbi_s: float  # mean time between unexpected interruptions of the job
    by_class: list[dict]
    checkpoint: CheckpointSetup
    interval_s: float
    interval_policy: str
    young_interval_s: float
    daly_interval_s: float
    numeric_optimum_s: float
    effective_restart_s: float
    ettr: float
    ettr_unplanned: float
    loss_breakdown: dict[str, float]
    spares: SpareAnalysis
    tokens_per_s: float | None = None
    tokens_per_day: float | None = None
    throughput_basis: str | None = None
    monte_carlo: dict | None = None
    assumptions: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict:
        s = self.spares
        return {
            "num_accelerators": self.num_accelerators,
            "days": self.days,
            "unexpected_interruptions": self.unexpected_interruptions,
            "unexpected_per_day": self.unexpected_per_day,
            "planned_interruptions": self.planned_interruptions,
            "mtbi_h": self.mtbi_s / 3600.0,
            "by_class": self.by_class,
            "checkpoint_gb": self.checkpoint.size_bytes / 1e9,
            "checkpoint_write_s": self.checkpoint.write_s,
            "checkpoint_blocking_s": self.checkpoint.blocking_s,
            "restart_s": self.checkpoint.restart_s,
            "restart_parts_s": self.checkpoint.parts_s,
            "effective_restart_s": self.effective_restart_s,
            "checkpoint_interval_s": self.interval_s,
            "checkpoint_interval_policy": self.interval_policy,
            "young_interval_s": self.young_interval_s,
            "daly_interval_s": self.daly_interval_s,
            "numeric_optimal_interval_s": self.numeric_optimum_s,
            "ettr": self.ettr,
            "ettr_unplanned_only": self.ettr_unplanned,
            "loss_breakdown": self.loss_breakdown,
            "spares": {"replacement_unit": s.replacement_unit, "devices_per_unit": s.devices_per_unit,
                       "spares": s.spares, "spares_auto": s.spares_auto, "mean_units_in_repair": s.mean_in_repair,
                       "block_probability": s.block_probability, "wait_if_blocked_h": s.wait_if_blocked_s / 3600.0,
                       "unit_failures_per_day": s.unit_failure_rate_s * DAY},
            "tokens_per_s": self.tokens_per_s,
            "tokens_per_day": self.tokens_per_day,
            "throughput_basis": self.throughput_basis,
            "monte_carlo": self.monte_carlo,
            "assumptions": list(self.assumptions),
        }


def goodput(model: FailureModel, counts: ComponentCounts, ckpt: CheckpointSetup, *, days: float,
            interval_s: float | None = None, spares: int | None = None, target_block_probability: float = 0.01,
            tokens_per_s: float | None = None, throughput_basis: str | None = None,
            monte_carlo_runs: int = 0, seed: int | None = None) -> GoodputResult:
    """Expected interruptions, optimal checkpoint interval and ETTR for one job on ``counts``."""
    if days <= 0:
        raise InputError(f"--days must be positive, got {days}")
    if interval_s is not None and interval_s <= 0:
        raise InputError(f"checkpoint interval must be positive, got {interval_s} s", hint="use --checkpoint-interval auto or minutes above zero")
    rates = model.class_rates(counts.exposure())
    lam = float(rates.sum())
    mtbi = 1.0 / lam if lam > 0 else float("inf")
    # rates so small that 1/rate overflows, or that the job expects < 1e-12 failures: none (the optimal
    # interval ~ sqrt(2 delta M) would overflow the ETTR formula)
    if not np.isfinite(mtbi) or lam * days * DAY < 1e-12:
        lam, mtbi, rates = 0.0, float("inf"), np.zeros_like(rates)
    sa, block, waits = spare_analysis(model, counts, spares, target_block_probability)
    mean_wait = float((rates * block * waits).sum() / lam) if lam > 0 else 0.0
    r_eff = ckpt.restart_s + mean_wait
    delta = ckpt.blocking_s
    young = young_interval(delta, mtbi) if lam > 0 else float("inf")
    daly = daly_interval(delta, mtbi) if lam > 0 else float("inf")
    numeric = numeric_optimal_interval(delta, ckpt.restart_s, mtbi) if lam > 0 else float("inf")
    if interval_s is None:
        tau, policy = (daly, "auto (Daly 2006 higher-order optimum)") if lam > 0 else (days * DAY, "auto (no failures)")
    else:
        tau, policy = float(interval_s), "given"
    # spare waits: the job is down and immune to further failures, so they stretch wall time by
    # lambda * E[wait] per unit of failure-exposed time (T_w' = T_w (1 + lambda E[wait]))
    ettr_u = float(daly_ettr(tau, delta, ckpt.restart_s, mtbi)) / (1.0 + lam * mean_wait)
    planned_frac = model.planned_rate_s * (delta + ckpt.restart_s)
    if planned_frac >= 1:
        per_event = delta + ckpt.restart_s
        raise InputError(
            f"planned interruptions take all the wall time: each costs a blocking checkpoint of {delta:.3g} s "
            f"({ckpt.size_bytes / 1e9:.3g} GB of checkpoint) plus a restart of {ckpt.restart_s:.3g} s = {per_event:.3g} s, "
            f"at {model.planned_rate_s * DAY:.3g} planned interruptions per day",
            hint="check the model size (--params) and the checkpoint bandwidth, or lower the planned rate or the restart time")
    ettr = (1.0 - planned_frac) * ettr_u
    loss = {
        "checkpointing": delta / (tau + delta),
        "lost_work": lam * (tau + delta) / 2.0,
        "restart": lam * ckpt.restart_s,
        "waiting_for_spares": lam * mean_wait,
        "planned": planned_frac,
    }
    horizon = days * DAY
    by_class = []
    exp = counts.exposure()
    for c, rate, b, _w in zip(model.classes, rates, block, waits, strict=True):
        by_class.append({
            "class": c.id, "unit": c.unit, "exposure": c.exposure, "components": exp.get(c.exposure, 0.0),
            "rate_per_1000_unit_days": c.rate_per_1000_unit_days, "per_day": rate * DAY,
            "expected": rate * horizon, "share": rate / lam if lam > 0 else 0.0,
            "block_probability": float(b), "basis": c.basis,
            "effect": _effect(c.unit, counts),
        })
    mc = None
    if monte_carlo_runs:
        res: MonteCarloResult = simulate(class_rates=rates, block_prob=block, block_wait=waits,
                                         planned_rate=model.planned_rate_s, tau=tau, delta=delta,
                                         restart=ckpt.restart_s, horizon_s=horizon, runs=monte_carlo_runs, seed=seed)
        mc = {"runs": monte_carlo_runs, "seed": seed, **res.percentiles(),
              # the ETTR distribution every 5th percentile (p0..p100), for CDF plots
              "ettr_quantiles": [float(v) for v in np.percentile(res.ettr, np.arange(0, 101, 5))]}
    tpd = tokens_per_s * ettr * DAY if tokens_per_s else None
    return GoodputResult(
        num_accelerators=counts.accelerators, days=days, unexpected_per_day=lam * DAY,
        unexpected_interruptions=lam * horizon, planned_interruptions=model.planned_rate_s * horizon,
        mtbi_s=mtbi, by_class=by_class, checkpoint=ckpt, interval_s=tau, interval_policy=policy,
        young_interval_s=young, daly_interval_s=daly, numeric_optimum_s=numeric, effective_restart_s=r_eff,
        ettr=ettr, ettr_unplanned=ettr_u, loss_breakdown=loss, spares=sa, tokens_per_s=tokens_per_s,
        tokens_per_day=tpd, throughput_basis=throughput_basis, monte_carlo=mc,
        assumptions=tuple(model.assumptions) + tuple(ckpt.assumptions),
    )


def _effect(unit: str, counts: ComponentCounts) -> str:
    if unit in ("device", "host"):
        return f"restart + swap {counts.replacement_unit} ({counts.replacement_unit_devices} acc.)"
    if unit in ("link", "switch"):
        return f"restart, route around {unit}"
    return "restart in place"


def ettr_grid(model: FailureModel, counts: ComponentCounts, ckpt: CheckpointSetup, intervals_s) -> np.ndarray:
    """ETTR for many checkpoint intervals at once (vectorised), spares as in :func:`goodput`."""
    rates = model.class_rates(counts.exposure())
    lam = float(rates.sum())
    mtbi = 1.0 / lam if lam > 0 else float("inf")
    _, block, waits = spare_analysis(model, counts)
    mean_wait = float((rates * block * waits).sum() / lam) if lam > 0 else 0.0
    planned_frac = model.planned_rate_s * (ckpt.blocking_s + ckpt.restart_s)
    e = np.asarray(daly_ettr(np.asarray(intervals_s, float), ckpt.blocking_s, ckpt.restart_s, mtbi))
    return (1.0 - planned_frac) * e / (1.0 + lam * mean_wait)

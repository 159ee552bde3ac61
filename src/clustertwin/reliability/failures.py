"""Failure model per component class, with rates derived from published interruption counts.

Derivation (default data: Llama 3 paper, arXiv:2407.21783, Table 5 — 419 unexpected interruptions of
one job in a 54-day snapshot on 16,384 H100):

    rate_c [per component-second] = sum_{rows r in class c} count_r / (exposure_c * days * 86400)

where ``exposure_c`` is the number of components of the class's exposure kind in the reference job
(16,384 accelerators, 2,048 hosts, 16,384 NICs, switch / transceiver / cable counts of a proxy
fabric). A job on another design sees ``Lambda = sum_c rate_c * N_c(design)`` interruptions per
second (superposition of independent Poisson processes; every unexpected failure of any rank stops a
synchronous job). Applied to the reference job this returns sum_c count_c = 419 exactly.

Effect on the job, by the class's ``unit``:
- ``device`` / ``host``: the job restarts from the last checkpoint and must swap the failed
  *replacement unit* — the host, or the whole scale-up domain when the domain spans hosts (a GPU fault
  in an NVL72 rack idles 72 GPUs until a spare rack, or a repaired one, takes over).
- ``link`` / ``switch``: the job restarts; the fabric routes around the failed part (no spare needed;
  bandwidth is lower until repair — not modelled).
- ``none`` (software, unknown): restart in place.

Spares: units in repair form an M/G/inf queue, so their number is Poisson with mean
``m = lambda_units * repair_s``. A failure finds no spare with probability P(K >= s) (PASTA) and then
waits for the first of the s+1 units in repair, on average ``repair_s / (s + 1)`` (exponential repair).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import poisson

from ..errors import InputError, UnknownNameError
from .counts import ComponentCounts
from .params import Params

DAY = 86400.0
HOUR = 3600.0


@dataclass(frozen=True, slots=True, kw_only=True)
class FailureClass:
    id: str
    description: str
    exposure: str
    unit: str  # device | host | link | switch | none
    rate_per_unit_s: float
    reference_count: float  # interruptions attributed to the class in the reference job
    basis: str  # how the rate was obtained, in words
    assumed: tuple[str, ...] = ()

    @property
    def rate_per_1000_unit_days(self) -> float:
        return self.rate_per_unit_s * DAY * 1000.0


@dataclass(frozen=True, slots=True, kw_only=True)
class FailureModel:
    classes: tuple[FailureClass, ...]
    planned_rate_s: float  # planned interruptions per second, per job
    repair_s: Mapping[str, float]  # unit -> mean repair time
    reference_exposure: Mapping[str, float]
    reference_days: float
    reference_unexpected: float
    assumptions: tuple[str, ...] = field(default=())

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(c.id for c in self.classes)

    def class_rates(self, exposure: Mapping[str, float]) -> np.ndarray:
        """Interruptions per second of one job, per class (order of ``classes``)."""
        return np.array([c.rate_per_unit_s * float(exposure.get(c.exposure, 0.0)) for c in self.classes])

    def job_rate(self, exposure: Mapping[str, float]) -> float:
        return float(self.class_rates(exposure).sum())

    def scaled(self, factor: float) -> FailureModel:
        """Every rate multiplied by ``factor`` (what-if studies, property tests)."""
        from dataclasses import replace

        if factor < 0:
            raise InputError(f"rate factor must not be negative, got {factor}")
        return replace(self, classes=tuple(replace(c, rate_per_unit_s=c.rate_per_unit_s * factor) for c in self.classes))


def build_failure_model(params: Params, overrides: Mapping[str, float] | None = None) -> FailureModel:
    """Derive per-class rates from ``params`` (see module docstring). ``overrides`` maps a class id to
    a rate in interruptions per 1000 component-days and replaces the derived one."""
    overrides = dict(overrides or {})
    for cid, v in overrides.items():
        if cid not in params.classes:
            raise UnknownNameError("failure class", cid, params.classes, hint=f"classes: {', '.join(params.classes)}")
        if not (v > 0) or not np.isfinite(v):
            raise InputError(f"failure rate for {cid!r} must be a positive number, got {v}",
                             hint="rates are interruptions per 1000 component-days, e.g. --rate accelerator=0.25")
    days = params.reference_days
    assumptions: list[str] = []
    for k, p in params.exposure.items():
        if p.assumed:
            assumptions.append(f"reference exposure {k} = {p.value:g}: {p.assumed}")
    classes = []
    for cid, c in params.classes.items():
        n_ref = params.exposure[c.exposure].value
        ref_count = float(sum(r.count for r in c.counts))
        notes = [r.assumed for r in c.counts if r.assumed] + ([c.assumed] if c.assumed else [])
        if cid in overrides:
            rate = overrides[cid] / 1000.0 / DAY
            basis = f"user override: {overrides[cid]:g} per 1000 {c.exposure}-days"
        elif c.rate_per_1000_unit_days is not None:
            rate = c.rate_per_1000_unit_days / 1000.0 / DAY
            basis = f"{c.rate_per_1000_unit_days:g} per 1000 {c.exposure}-days ({c.rate_source or 'user file'})"
        else:
            rate = ref_count / (n_ref * days * DAY)
            terms = " + ".join(f"{r.count:g}" for r in c.counts)
            basis = f"({terms}) = {ref_count:g} interruptions / ({n_ref:g} {c.exposure} x {days:g} d) [{', '.join(r.row for r in c.counts)}]"
        classes.append(FailureClass(id=cid, description=c.description, exposure=c.exposure, unit=c.unit,
                                    rate_per_unit_s=rate, reference_count=ref_count, basis=basis, assumed=tuple(notes)))
        assumptions += [f"{cid}: {n}" for n in notes]
    if params.planned_per_day.assumed:
        assumptions.append(f"planned interruptions: {params.planned_per_day.assumed}")
    for u, p in params.repair_hours.items():
        if p.assumed:
            assumptions.append(f"repair time {u} = {p.value:g} h: {p.assumed}")
    return FailureModel(
        classes=tuple(classes),
        planned_rate_s=params.planned_per_day.value / DAY,
        repair_s={u: p.value * HOUR for u, p in params.repair_hours.items()},
        reference_exposure={k: p.value for k, p in params.exposure.items()},
        reference_days=days,
        reference_unexpected=params.reference_unexpected,
        assumptions=tuple(assumptions),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class SpareAnalysis:
    replacement_unit: str  # host | domain
    devices_per_unit: int
    unit_failure_rate_s: float  # failures per second that need a replacement unit
    repair_s: float  # mean repair time of a replacement unit
    mean_in_repair: float
    spares: int
    spares_auto: bool
    block_probability: float  # a failure finds no spare
    wait_if_blocked_s: float


def spare_analysis(model: FailureModel, counts: ComponentCounts, spares: int | None = None,
                   target_block_probability: float = 0.01) -> tuple[SpareAnalysis, np.ndarray, np.ndarray]:
    """Spare-pool analysis and, per class, the probability that a failure must wait for a spare and
    the mean wait when it does (see module docstring)."""
    if spares is not None and spares < 0:
        raise InputError(f"spares must not be negative, got {spares}")
    rates = model.class_rates(counts.exposure())
    needs = np.array([c.unit in ("device", "host") for c in model.classes])
    lam_units = float(rates[needs].sum())
    if lam_units > 0:
        rep = np.array([model.repair_s.get(c.unit, 0.0) for c in model.classes])
        repair_s = float((rates[needs] * rep[needs]).sum() / lam_units)
    else:
        repair_s = model.repair_s.get("host", 0.0)
    m = lam_units * repair_s
    auto = spares is None
    if auto:
        s = 0
        if lam_units > 0:
            while poisson.sf(s - 1, m) > target_block_probability:
                s += 1
    else:
        s = int(spares)
    p_block = float(poisson.sf(s - 1, m)) if s > 0 else (1.0 if lam_units > 0 else 0.0)
    wait = repair_s / (s + 1)
    block = np.where(needs, p_block, 0.0)
    waits = np.where(needs, wait, 0.0)
    sa = SpareAnalysis(replacement_unit=counts.replacement_unit, devices_per_unit=counts.replacement_unit_devices,
                       unit_failure_rate_s=lam_units, repair_s=repair_s, mean_in_repair=m, spares=s, spares_auto=auto,
                       block_probability=p_block, wait_if_blocked_s=wait)
    return sa, block, waits

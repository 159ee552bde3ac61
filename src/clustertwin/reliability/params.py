"""Shipped reliability / power / cost defaults and user overlays (pydantic at the edge only).

``load_params(paths)`` reads ``data/failure_rates.yaml`` and ``data/defaults.yaml``, deep-merges user
overlay files on top (later wins), validates them and returns a frozen :class:`Params` of
:class:`Param` values (SI-free numbers exactly as written, with their ``source`` / ``assumed`` notes;
modules convert units where they use them). Every number must say where it comes from: a ``source``,
or ``assumed`` with the reason. Assumptions are listed in command output.
"""

from __future__ import annotations

import copy
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, ValidationError, model_validator

from ..errors import InputError
from ..userfiles import read_yaml

_FILES = ("failure_rates.yaml", "defaults.yaml")


@dataclass(frozen=True, slots=True)
class Param:
    """One number with its provenance."""

    value: float
    source: str | None = None
    assumed: str | None = None

    @property
    def is_assumption(self) -> bool:
        return self.assumed is not None


class _ParamIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    value: float
    source: str | None = None
    assumed: str | None = None

    @model_validator(mode="after")
    def _check(self) -> _ParamIn:
        if not (self.source or self.assumed):
            raise ValueError("every number needs `source` (where it comes from) or `assumed` (why it is assumed)")
        if not (math.isfinite(self.value) and self.value > 0):
            raise ValueError(f"value must be a finite positive number, got {self.value}")
        return self

    def to(self) -> Param:
        return Param(float(self.value), self.source, self.assumed)


class _CountIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    row: str
    component: str
    count: float = Field(ge=0)
    note: str | None = None
    assumed: str | None = None


class _ClassIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    description: str = ""
    exposure: str
    unit: str
    counts: list[_CountIn] = Field(default_factory=list)
    assumed: str | None = None
    rate_per_1000_unit_days: PositiveFloat | None = None
    rate_source: str | None = None

    @model_validator(mode="after")
    def _check(self) -> _ClassIn:
        if self.unit not in ("device", "host", "link", "switch", "none"):
            raise ValueError(f"unit {self.unit!r} is not one of device, host, link, switch, none")
        if not self.counts and self.rate_per_1000_unit_days is None:
            raise ValueError("a failure class needs `counts` (to derive its rate) or `rate_per_1000_unit_days`")
        return self


class _ReferenceIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    source: str
    days: PositiveFloat
    unexpected_interruptions: float = Field(ge=0)
    planned_interruptions: float = Field(ge=0)
    effective_training_time_min: float = Field(gt=0, le=1)
    exposure: dict[str, _ParamIn]


class _SystemPowerIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    quoted_kw: PositiveFloat
    source: str


class _FileIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    version: str | None = None
    reference: _ReferenceIn
    classes: dict[str, _ClassIn]
    planned: dict[str, _ParamIn]
    repair_hours: dict[str, _ParamIn]
    checkpoint: dict[str, _ParamIn]
    restart: dict[str, _ParamIn]
    spares: dict[str, _ParamIn]
    power: dict[str, Any]
    cost: dict[str, Any]

    @model_validator(mode="after")
    def _check(self) -> _FileIn:
        for cid, c in self.classes.items():
            if c.exposure not in self.reference.exposure:
                raise ValueError(
                    f"class {cid!r}: exposure {c.exposure!r} is not one of {', '.join(self.reference.exposure)}"
                )
        for unit in ("device", "host", "link", "switch"):
            if unit not in self.repair_hours:
                raise ValueError(f"repair_hours needs an entry for {unit!r}")
        return self


@dataclass(frozen=True, slots=True, kw_only=True)
class CountRow:
    row: str
    component: str
    count: float
    note: str | None = None
    assumed: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassParams:
    id: str
    description: str
    exposure: str
    unit: str
    counts: tuple[CountRow, ...]
    assumed: str | None
    rate_per_1000_unit_days: float | None
    rate_source: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Params:
    reference_name: str
    reference_source: str
    reference_days: float
    reference_unexpected: float
    reference_planned: float
    reference_ettr_min: float
    exposure: Mapping[str, Param]
    classes: Mapping[str, ClassParams]
    planned_per_day: Param
    repair_hours: Mapping[str, Param]
    checkpoint: Mapping[str, Param]
    restart: Mapping[str, Param]
    spares: Mapping[str, Param]
    power: Mapping[str, Param]
    quoted_power_kw: Mapping[str, tuple[float, str]]
    cost: Mapping[str, Param]
    price_by_system: Mapping[str, Param]
    tdp_by_accelerator: Mapping[str, Param]
    files: tuple[str, ...] = field(default=())


def _deep_merge(base: dict, over: Mapping) -> dict:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _mark_user(data: Any, label: str) -> Any:
    """A user number without ``source``/``assumed`` is sourced to the user's file (and loses the
    shipped note, which described the shipped number)."""
    if isinstance(data, dict):
        out = {k: _mark_user(v, label) for k, v in data.items()}
        if "value" in out and not out.get("source") and not out.get("assumed"):
            out["source"] = f"user file {label}"
            out["assumed"] = None
        return out
    return data


def _read_user(path: Path) -> dict:
    return read_yaml(path, "reliability defaults file", hint="check the path given to --defaults",
                     shape="sections: classes, checkpoint, restart, power, cost ...")


def _params_map(section: Mapping[str, Any], label: str, where: str) -> dict[str, Param]:
    out = {}
    for k, v in section.items():
        if k in ("by_system", "by_system_usd_per_device", "tdp_w_by_accelerator"):
            continue
        try:
            out[k] = _ParamIn.model_validate(v).to()
        except ValidationError as exc:
            err = exc.errors()[0]
            raise InputError(f"{label}: {where}.{k}: {err['msg']}", hint="write `{value: NUMBER, source: ...}` or `{value: NUMBER, assumed: ...}` with a positive value") from None
    return out


def load_params(paths: Sequence[str | os.PathLike] = ()) -> Params:
    """Shipped defaults plus user overlay files (later wins)."""
    return _load(tuple(str(p) for p in paths))


@lru_cache(maxsize=8)
def _load(paths: tuple[str, ...]) -> Params:
    data: dict = {}
    pkg = resources.files("clustertwin.reliability") / "data"
    for name in _FILES:
        data = _deep_merge(data, yaml.safe_load((pkg / name).read_text(encoding="utf-8")) or {})
    label = "<builtin reliability defaults>"
    for p in paths:
        data = _deep_merge(data, _mark_user(_read_user(Path(p)), p))
        label = f"reliability defaults (with {p!r})"
    try:
        parsed = _FileIn.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        raise InputError(
            f"{label}: {loc}: {err['msg']}",
            hint="see docs/reliability.md for the overlay format; numbers must be positive and say `source` or `assumed`",
        ) from None
    power = _params_map(parsed.power, label, "power")
    quoted = {}
    for sid, v in (parsed.power.get("by_system") or {}).items():
        try:
            q = _SystemPowerIn.model_validate(v)
        except ValidationError as exc:
            raise InputError(f"{label}: power.by_system.{sid}: {exc.errors()[0]['msg']}") from None
        quoted[sid] = (q.quoted_kw, q.source)
    cost = _params_map(parsed.cost, label, "cost")
    prices = _params_map(parsed.cost.get("by_system_usd_per_device") or {}, label, "cost.by_system_usd_per_device")
    tdps = _params_map(parsed.power.get("tdp_w_by_accelerator") or {}, label, "power.tdp_w_by_accelerator")
    if "pue" in power and power["pue"].value < 1:
        raise InputError(f"{label}: power.pue must be at least 1, got {power['pue'].value}")
    classes = {
        cid: ClassParams(
            id=cid,
            description=c.description,
            exposure=c.exposure,
            unit=c.unit,
            counts=tuple(CountRow(row=r.row, component=r.component, count=r.count, note=r.note, assumed=r.assumed) for r in c.counts),
            assumed=c.assumed,
            rate_per_1000_unit_days=c.rate_per_1000_unit_days,
            rate_source=c.rate_source,
        )
        for cid, c in parsed.classes.items()
    }
    planned = {k: v.to() for k, v in parsed.planned.items()}
    return Params(
        reference_name=parsed.reference.name,
        reference_source=parsed.reference.source,
        reference_days=parsed.reference.days,
        reference_unexpected=parsed.reference.unexpected_interruptions,
        reference_planned=parsed.reference.planned_interruptions,
        reference_ettr_min=parsed.reference.effective_training_time_min,
        exposure={k: v.to() for k, v in parsed.reference.exposure.items()},
        classes=classes,
        planned_per_day=planned["per_day"],
        repair_hours={k: v.to() for k, v in parsed.repair_hours.items()},
        checkpoint={k: v.to() for k, v in parsed.checkpoint.items()},
        restart={k: v.to() for k, v in parsed.restart.items()},
        spares={k: v.to() for k, v in parsed.spares.items()},
        power=power,
        quoted_power_kw=quoted,
        cost=cost,
        price_by_system=prices,
        tdp_by_accelerator=tdps,
        files=tuple(paths),
    )

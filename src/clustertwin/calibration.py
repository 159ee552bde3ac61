"""Fitted constants of the step-time model: the list, the fit, and leave-one-group-out cross-validation.

The constants that are fitted (and nothing else) are listed under ``fitted`` in
``workload/data/efficiency.yaml``: each has a unit, a grid of allowed values inside its published range,
and groups of chips that share one value (same silicon). ``fit`` chooses, with every other constant
fixed, the grid value of each group that minimises the mean |error| over the fit rows on that group's
chips, in two coordinate-descent sweeps; a group with no fit rows takes the value of the group its
``fallback`` names (the physically closest one) when that group has fit rows, else the median of the
other groups' values. ``cross_validate`` holds out one value of a column (``source``: one publication) at
a time, refits on the rest and predicts the held-out rows, so the reported error is on runs the constants never
saw.

Speed: a row's prediction depends only on the constants of its own chip and software stack, and
constants marked ``additive`` (a per-step overhead) shift the step time by their value, so a row is
evaluated once per grid point of its non-additive constants that the coordinate descent visits (a
per-row cache shared by every fold), never for the full grid product. Constants marked ``linear`` (a
stall per MoE layer and micro-batch: the step time is linear in it with a slope that depends on the row's
layer and micro-batch counts) cost one more prediction per visited point, at the constant's shipped value
(the grid's largest value when it is 0), which gives the row's slope, and one at the grid's largest value
for the slope above the shipped value: the step is piecewise linear in such a stall where it enters the
max() of the last pipeline stage's pace, so a row is exact at 0, the shipped value and the grid's top;
``rows: moe`` constants apply to MoE rows only.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .errors import InputError
from .validate import CVReport


@dataclass(frozen=True, slots=True)
class FittedConstant:
    key: str
    unit: str
    meaning: str
    grid: tuple[float, ...]
    groups: dict[str, tuple[str, ...]]  # group name -> chip ids ("*" = every chip), or stack ids (scope stack)
    additive: bool = False
    scope: str = "chip"  # "chip": per accelerator (step_efficiency overlay); "stack": per software-stack preset
    linear: bool = False  # step time linear in it with a row-dependent slope (e.g. a per-MoE-layer stall)
    rows: str = "all"  # "all", or "moe": only rows of MoE models depend on it
    # group -> the group whose fitted value it takes when it has no fit rows (the physically closest one,
    # e.g. the other x86 HGX host platform for a host stall); a group not named here takes the median
    fallback: dict[str, str] = field(default_factory=dict)

    def group_of(self, chip: str, stack: str = "") -> str | None:
        key = stack if self.scope == "stack" else chip
        for g, members in self.groups.items():
            if key in members or "*" in members:
                return g
        return None


def fitted_constants() -> list[FittedConstant]:
    from .sim.machine import efficiency_table as _efficiency_table

    out = []
    for key, spec in (_efficiency_table().get("fitted") or {}).items():
        lo, hi, step = (float(x) for x in spec["grid"])
        n = int(round((hi - lo) / step))
        grid = tuple(round(lo + i * step, 6) for i in range(n + 1))
        out.append(FittedConstant(key=key, unit=str(spec.get("unit", "")), meaning=str(spec.get("meaning", "")),
                                  grid=grid, groups={g: tuple(c) for g, c in spec["groups"].items()},
                                  additive=bool(spec.get("additive", False)), scope=str(spec.get("scope", "chip")),
                                  linear=bool(spec.get("linear", False)), rows=str(spec.get("rows", "all")),
                                  fallback={str(g): str(f) for g, f in (spec.get("fallback") or {}).items()}))
    return out


def current_values() -> dict[str, dict[str, float]]:
    """Value of every fitted constant per group, as efficiency.yaml has it now."""
    from .sim.machine import efficiency_table as _efficiency_table

    table = _efficiency_table()
    out: dict[str, dict[str, float]] = {}
    from .workload.stacks import get_stack

    for c in fitted_constants():
        out[c.key] = {}
        if c.scope == "stack":
            for g, members in c.groups.items():
                out[c.key][g] = float(getattr(get_stack(members[0]), c.key))
            continue
        for g, chips in c.groups.items():
            chip = next((x for x in chips if x != "*"), None)
            cfg = dict(table["defaults"])
            if chip:
                cfg.update(table.get("chips", {}).get(chip, {}))
            out[c.key][g] = float(cfg[c.key])
    return out


@dataclass
class _RowTable:
    """Predictions of one row at the grid points of its non-additive fitted constants, computed on demand."""

    id: str
    measured: float
    chip: str
    stack: str
    group: dict[str, str | None]  # constant key -> group of this row's chip / stack
    keys: tuple[str, ...] = ()  # the non-additive constants that apply to this row (order of `base` keys)
    base: dict[tuple, float] = field(default_factory=dict)  # grid point -> prediction with additive constants = 0
    slope: dict[tuple, dict[str, float]] = field(default_factory=dict)  # grid point -> d(step)/d(linear constant)
    row: dict[str, str] = field(default_factory=dict, repr=False)
    catalog: Any = field(default=None, repr=False)
    consts: tuple = field(default=(), repr=False)  # the FittedConstant of each of `keys`
    lin: tuple = field(default=(), repr=False)  # the linear FittedConstants that apply to this row
    zero_add: dict[str, float] = field(default_factory=dict, repr=False)  # chip-scope additive/linear at 0
    # linear constant -> its shipped value for this row's group: the step is piecewise linear in a stall that
    # enters max() terms (the last pipeline stage's pace: layers vs layers + output layer), so the slope is
    # measured on both sides of it and a prediction at the shipped value is exact
    knee_at: dict[str, float] = field(default_factory=dict, repr=False)
    knee: dict[tuple, dict[str, tuple[float, float]]] = field(default_factory=dict)  # point -> key -> (v0, slope above)

    def at(self, point: tuple) -> tuple[float, dict[str, float]]:
        """(prediction, slopes of the linear constants) with the non-additive constants at ``point``
        (snapped to their grids) and the additive / linear ones at 0."""
        from .validate import predict_training_row

        point = tuple(_snap(c.grid, x) for c, x in zip(self.consts, point, strict=True))
        if point not in self.base:
            chip_vals = dict(self.zero_add)
            stack_vals: dict[str, float] = {}
            for c, v in zip(self.consts, point, strict=True):
                (stack_vals if c.scope == "stack" else chip_vals)[c.key] = v
            cat = _overlay_catalog(self.catalog, self.chip, chip_vals, self.stack, stack_vals)
            self.base[point] = predict_training_row(self.row, cat)
            self.slope[point] = {}
            self.knee[point] = {}
            for c in self.lin:  # one more prediction at the grid's largest value gives the slope
                top = max(c.grid) or 1.0
                v0 = self.knee_at.get(c.key, 0.0)
                probe = v0 if 0.0 < v0 < top else top
                cat1 = _overlay_catalog(self.catalog, self.chip, {**chip_vals, c.key: probe}, self.stack, stack_vals)
                p1 = predict_training_row(self.row, cat1)
                self.slope[point][c.key] = (p1 - self.base[point]) / probe
                if probe < top:  # and one at the grid's top the slope above the shipped value
                    cat2 = _overlay_catalog(self.catalog, self.chip, {**chip_vals, c.key: top}, self.stack, stack_vals)
                    self.knee[point][c.key] = (probe, (predict_training_row(self.row, cat2) - p1) / (top - probe))
        return self.base[point], self.slope[point]

    def linear_part(self, point: tuple, key: str, value: float) -> float:
        """The step time a linear constant at ``value`` adds at ``point`` (after ``at(point)``)."""
        point = tuple(_snap(c.grid, x) for c, x in zip(self.consts, point, strict=True))
        sl = self.slope[point][key]
        kn = self.knee.get(point, {}).get(key)
        if kn is None or value <= kn[0]:
            return sl * value
        return sl * kn[0] + kn[1] * (value - kn[0])


def _snap(grid: tuple[float, ...], x: float) -> float:
    """The grid point nearest ``x``."""
    return min(grid, key=lambda g: abs(g - x))


def _row_chip(row: dict[str, str], catalog) -> str:
    from .validate import _row_hardware

    system, _ = _row_hardware(row, catalog)
    return system.accelerator.id


def _overlay_catalog(catalog, chip: str, values: dict[str, float], stack: str = "",
                     stack_values: dict[str, float] | None = None):
    cal = {k: dict(v) for k, v in (catalog.calibration or {}).items()}
    sec = cal.setdefault("step_efficiency", {})
    sec[chip] = {**sec.get(chip, {}), **values}
    if stack_values:
        ssec = cal.setdefault("stack_efficiency", {})
        ssec[stack] = {**ssec.get(stack, {}), **stack_values}
    return replace(catalog, calibration=cal)


def _build_tables(rows: list[dict[str, str]], catalog, consts: list[FittedConstant]) -> tuple[list[_RowTable], list[str]]:
    from .validate import stack_for_row

    zero_add = {c.key: 0.0 for c in consts if (c.additive or c.linear) and c.scope == "chip"}
    start = current_values()
    tables, skipped = [], []
    for row in rows:
        rid = (row.get("id") or "?").strip()
        meas = (row.get("measured_step_time_s") or "").strip()
        try:
            chip = _row_chip(row, catalog)
            stack = stack_for_row(row).id
            is_moe = int(float((row.get("num_experts") or "0").strip() or 0)) > 0
            groups = {c.key: (c.group_of(chip, stack) if c.rows != "moe" or is_moe else None) for c in consts}
            mine = [c for c in consts if not c.additive and not c.linear and groups[c.key] is not None]
            lin = [c for c in consts if c.linear and groups[c.key] is not None]
            rt = _RowTable(rid, float(meas) if meas else 0.0, chip, stack, groups, tuple(c.key for c in mine),
                           row=row, catalog=catalog, consts=tuple(mine), lin=tuple(lin), zero_add=zero_add,
                           knee_at={c.key: float(start[c.key][str(groups[c.key])]) for c in lin})
            rt.at(tuple(start[c.key][str(groups[c.key])] for c in mine))  # the row models (else: skipped)
        except (InputError, ArithmeticError, ValueError, KeyError, TypeError):
            skipped.append(rid)
            continue
        if rt.measured > 0:
            tables.append(rt)
        else:
            skipped.append(rid)
    return tables, skipped


def _predict(rt: _RowTable, values: dict[str, dict[str, float]], consts: list[FittedConstant]) -> float:
    add = sum(values[c.key][rt.group[c.key]] for c in consts if c.additive and rt.group[c.key] is not None)
    # a value off the grid (median fill) is snapped to the nearest grid point
    point = tuple(values[k][str(rt.group[k])] for k in rt.keys)
    base, slope = rt.at(point)
    lin = 0.0
    for k in slope:
        g = rt.group[k]
        if g is not None:
            lin += rt.linear_part(point, k, values[k][g])
    return base + add + lin


def _mape(tables: list[_RowTable], values, consts) -> float:
    if not tables:
        return float("nan")
    return float(np.mean([abs(_predict(t, values, consts) - t.measured) / t.measured for t in tables]) * 100.0)


def _fit_tables(tables: list[_RowTable], consts: list[FittedConstant], start: dict[str, dict[str, float]],
                sweeps: int = 2, origin: dict[str, dict[str, str]] | None = None) -> dict[str, dict[str, float]]:
    """Coordinate-descent fit (module docstring). ``origin``, when given, is filled with how each group's value
    was set: ``fit`` (grid minimum over its rows), or without fit rows ``fallback: <group>`` (the value of the
    group its ``fallback`` names), ``median of other chips`` or ``prior``."""
    values = {k: dict(v) for k, v in start.items()}
    for _ in range(sweeps):
        for c in consts:
            for g in c.groups:
                mine = [t for t in tables if t.group[c.key] == g]
                if not mine:
                    continue
                best = min(c.grid, key=lambda x: (_mape(mine, {**values, c.key: {**values[c.key], g: x}}, consts),
                                                  abs(x - values[c.key][g])))
                values[c.key][g] = best
    # groups without fit rows: chip scope, the value of the group named by `fallback` when that one has
    # fit rows, else the median of the fitted groups (other silicon), else the unfitted prior; stack scope,
    # the prior (a framework never seen runs like the Megatron-Core reference stack)
    for c in consts:
        has_rows = {g: any(t.group[c.key] == g for t in tables) for g in c.groups}
        fitted = [values[c.key][g] for g in c.groups if has_rows[g]]
        for g in c.groups:
            how = "fit"
            if not has_rows[g]:
                fb = c.fallback.get(g)
                if c.scope == "chip" and fb is not None and has_rows.get(fb):
                    values[c.key][g], how = values[c.key][fb], f"fallback: {fb}"
                elif fitted and c.scope == "chip":
                    values[c.key][g], how = float(statistics.median(fitted)), "median of other chips"
                else:
                    values[c.key][g], how = prior_value(c), "prior"
            if origin is not None:
                origin.setdefault(c.key, {})[g] = how
    return values


def prior_value(c: FittedConstant) -> float:
    """The value a constant takes with no fit rows at all: efficiency.yaml ``defaults`` (chip scope) or the
    SoftwareStack field default (stack scope: e.g. fsdp_overlap 1 = full overlap)."""
    import dataclasses

    from .sim.machine import efficiency_table
    from .workload.stacks import SoftwareStack

    if c.scope == "stack":
        return float(next(f.default for f in dataclasses.fields(SoftwareStack) if f.name == c.key))
    return float(efficiency_table()["defaults"][c.key])


@dataclass(frozen=True, slots=True)
class FitResult:
    values: dict[str, dict[str, float]]
    rows: int
    mape_pct: float

    def to_dict(self) -> dict[str, Any]:
        return {"values": self.values, "rows": self.rows, "mape_pct": self.mape_pct}


def fit(rows: list[dict[str, str]], *, catalog=None) -> FitResult:
    """Refit every fitted constant on ``rows`` (training format) from the current values."""
    from .catalog import load_catalog

    catalog = catalog or load_catalog()
    consts = fitted_constants()
    tables, _ = _build_tables(rows, catalog, consts)
    values = _fit_tables(tables, consts, current_values())
    return FitResult(values, len(tables), _mape(tables, values, consts))


def cross_validate(rows: list[dict[str, str]], column: str = "source", *, catalog=None) -> CVReport:
    """Leave-one-``column``-value-out: refit all fitted constants without the fold, predict the fold."""
    from .catalog import load_catalog

    if rows and column not in rows[0]:
        raise InputError(f"--cv {column}: the file has no column {column!r}",
                         hint="group by a column of the file, e.g. --cv source")
    catalog = catalog or load_catalog()
    consts = fitted_constants()
    tables, skipped = _build_tables(rows, catalog, consts)
    by_id = {(r.get("id") or "?").strip(): (r.get(column) or "").strip() for r in rows}
    groups: dict[str, list[_RowTable]] = {}
    for t in tables:
        groups.setdefault(by_id[t.id], []).append(t)
    start = current_values()
    all_fit = _fit_tables(tables, consts, start)
    folds, out_rows = [], []
    fold_values: list[dict[str, dict[str, float]]] = []
    for name, held in groups.items():
        train = [t for t in tables if by_id[t.id] != name]
        how: dict[str, dict[str, str]] = {}
        vals = _fit_tables(train, consts, start, origin=how)
        fold_values.append(vals)
        errs = []
        for t in held:
            pred = _predict(t, vals, consts)
            e = 100.0 * (pred - t.measured) / t.measured
            errs.append(e)
            out_rows.append({"id": t.id, "fold": name, "measured": t.measured, "predicted": pred, "error_pct": e})
        moved = [{"key": c.key, "group": g, "value": vals[c.key][g], "refit_all_rows": all_fit[c.key][g],
                  "origin": how[c.key][g]}
                 for c in consts for g in c.groups if abs(vals[c.key][g] - all_fit[c.key][g]) > 1e-9]
        folds.append({"fold": name, "n": len(held), "mape_pct": float(np.mean(np.abs(errs))),
                      "bias_pct": float(np.mean(errs)), "max_abs_error_pct": float(np.max(np.abs(errs))),
                      "values": vals, "origin": how, "moved": moved})
    cv_mape = float(np.mean([abs(r["error_pct"]) for r in out_rows])) if out_rows else float("nan")
    constants = []
    for c in consts:
        for g in c.groups:
            spread = [fv[c.key][g] for fv in fold_values]
            constants.append({"key": c.key, "group": g, "chips": list(c.groups[g]), "unit": c.unit,
                              "value": start[c.key][g], "refit_all_rows": all_fit[c.key][g],
                              "fold_min": min(spread) if spread else None, "fold_max": max(spread) if spread else None,
                              "rows": sum(1 for t in tables if t.group[c.key] == g)})
    return CVReport(column, folds, out_rows, cv_mape, _mape(tables, start, consts), constants, skipped)

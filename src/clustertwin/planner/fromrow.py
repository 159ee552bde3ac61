"""``clustertwin plan --from-row FILE.csv:ID``: plan for exactly the job a validation row measured.

The request is built from the row's columns only (as the validator reads them): the model from its
shape columns, the system and scale-out (with the row's NICs per node and NIC speed), the GPU count,
global batch, sequence length, precision and the framework's software-stack preset. The row's own
layout is returned beside it, so the planner's choice can be compared with what experts ran.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import InputError, UnknownNameError
from ..userfiles import is_file
from .planning import PlanRequest


def split_row_spec(spec: str) -> tuple[str, str]:
    """``FILE.csv:ID`` (or a packaged set name, ``training:mbridge-39``) -> (path, id)."""
    path, sep, rid = str(spec).rpartition(":")
    if not sep or not path or not rid:
        raise InputError(f"--from-row {spec!r}: expected FILE.csv:ID", hint="e.g. --from-row training:mbridge-39")
    return path, rid.strip()


def read_row(spec: str) -> dict[str, str]:
    from ..validate import read_rows, resolve_validation_path

    path, rid = split_row_spec(spec)
    p = Path(path) if is_file(path) else resolve_validation_path(path)
    rows = read_rows(p)
    by_id = {(r.get("id") or "").strip(): r for r in rows}
    if rid not in by_id:
        raise UnknownNameError(f"row of {p.name}", rid, tuple(by_id), hint="ids are the `id` column of the CSV")
    return by_id[rid]


def row_layout(row: dict[str, str]) -> dict[str, Any]:
    """The layout the row ran: tp pp dp cp ep vpp micro_batch zero recompute."""
    from ..validate import plan_from_row

    p = plan_from_row(row)
    return {"tp": p.tp, "pp": p.pp, "dp": p.dp, "cp": p.cp, "ep": p.ep, "vpp": p.vpp,
            "micro_batch": p.micro_batch, "zero": p.zero, "recompute": p.recompute}


def request_from_row(spec: str | dict[str, str], catalog: Any, **overrides: Any) -> tuple[PlanRequest, dict[str, str]]:
    """The plan request for the job of a validation row, and the row."""
    from ..validate import (
        _row_hardware,
        check_row_inputs,
        model_from_row,
        plan_from_row,
        resolve_row,
        stack_for_row,
    )

    row = read_row(spec) if isinstance(spec, str) else spec
    row = resolve_row(row, catalog)[0]  # names outside the catalog, blank columns (docs/validation.md)
    check_row_inputs(row)
    model = model_from_row(row)
    system, fabric = _row_hardware(row, catalog)
    p = plan_from_row(row)
    kw: dict[str, Any] = dict(model=model, system=system, fabric=fabric, num_gpus=p.num_gpus,
                              global_batch=p.global_batch, seq_len=p.seq_len, dtype=p.dtype,
                              stack=stack_for_row(row))
    kw.update({k: v for k, v in overrides.items() if v is not None})
    return PlanRequest(**kw), row


def row_estimate(row: dict[str, str], catalog: Any, engine: str = "analytical") -> dict[str, Any]:
    """The model at the row's own layout (the validator's prediction): step time, tokens/s, memory and
    the per-term breakdown, in the shape of a plan entry, for the side-by-side with the best plan."""
    from ..validate import _estimate_row, measured_value

    e = _estimate_row(row, catalog, engine)
    t, _ = measured_value(row, "measured_step_time_s")
    return {"step_time_s": e.step_time_s, "tokens_per_s": e.tokens_per_s, "memory_gb_per_gpu": e.memory_gb_per_gpu,
            "memory_capacity_gb": e.memory_capacity_gb, "fits_memory": bool(e.fits_memory),
            "measured_over_predicted": (float(t) / e.step_time_s) if t else None,
            "breakdown": {k: float(v) for k, v in e.breakdown.items()}}


def breakdown_delta(best: dict[str, float], row: dict[str, float], *, min_s: float = 1e-9) -> list[tuple[str, float]]:
    """Per-term step-time difference best plan - row layout (seconds), largest magnitude first: where
    the planner's choice gains (negative) and pays (positive) against the layout the row ran."""
    d = [(k, float(best.get(k, 0.0)) - float(row.get(k, 0.0))) for k in dict.fromkeys([*row, *best])]
    return sorted((x for x in d if abs(x[1]) > min_s), key=lambda x: -abs(x[1]))


def published_tokens_per_s(row: dict[str, str]) -> float | None:
    """Tokens/s the row measured: global batch x sequence length / measured step time."""
    from ..validate import measured_value

    t, _ = measured_value(row, "measured_step_time_s")
    if not t:
        return None
    return float(row["global_batch"]) * float(row["seq_len"]) / t


__all__ = ["breakdown_delta", "published_tokens_per_s", "read_row", "request_from_row", "row_estimate", "row_layout",
           "split_row_spec"]

"""Adapter to the event-driven engine (``clustertwin.sim.event``) for re-ranking the top plans."""

from __future__ import annotations

from typing import Any

from ..errors import InputError


def event_estimate(rec: dict[str, Any], *, model: Any, system: Any, fabric: Any, gpus: int, global_batch: int,
                   seq_len: int, dtype: str, catalog: Any = None,
                   engine_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Time one plan (a planner record) with the event engine; returns estimate-style metrics."""
    try:
        from ..sim import event  # noqa: F401
        from ..sim.event import simulate  # type: ignore[attr-defined]
    except ImportError as exc:
        raise InputError(
            "the event-driven engine (clustertwin.sim.event) is not available in this build",
            hint="use --engine analytical",
        ) from exc
    from ..workload.plan import make_plan

    p = make_plan(gpus=gpus, tp=rec["tp"], pp=rec["pp"], cp=rec["cp"], ep=rec["ep"], vpp=rec["vpp"],
                  micro_batch=rec["micro_batch"], global_batch=global_batch, seq_len=seq_len, zero=rec["zero"],
                  recompute=rec["recompute"], dtype=dtype, etp=int(rec.get("etp", 1)),
                  pipeline_schedule=str(rec.get("schedule", "1f1b")), uneven_pipeline=True,
                  **_plan_options(engine_options))
    out = simulate(model, system, fabric, p, catalog=catalog)
    return out if isinstance(out, dict) else _as_dict(out)


def _plan_options(engine_options: dict[str, Any] | None) -> dict[str, Any]:
    """The engine options a ParallelPlan carries (flash, overlap, gradient bytes, CP style, SP)."""
    from ..workload.stacks import ENGINE_OPTION_KEYS

    return {k: v for k, v in (engine_options or {}).items() if k in ENGINE_OPTION_KEYS}


def _as_dict(o: Any) -> dict[str, Any]:
    if hasattr(o, "to_dict"):
        return o.to_dict()
    from dataclasses import asdict, is_dataclass

    if is_dataclass(o):
        return asdict(o)
    return dict(o)

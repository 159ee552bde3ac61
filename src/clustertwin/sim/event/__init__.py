"""Event-driven training-step simulator (issue 5).

``estimate(model, system, fabric, plan, *, catalog=None, check=True, schedule=None, stragglers=(),
steps=1, trace=False)`` mirrors ``clustertwin.sim.analytical.estimate`` and returns an
:class:`EventResult` (the ``StepResult`` fields plus critical path, stream utilisation, exposed vs
hidden communication and, with ``trace=True``, a timeline for ``clustertwin.report.trace``).

``simulate(model, system, fabric, plan, ...)`` builds per-op costs with the shared cost model, lays
them out as ops on per-rank streams (one representative rank per pipeline stage), runs a pipeline
schedule (1F1B, interleaved 1F1B, ZB-H1, GPipe) through a deterministic discrete-event core and
returns an :class:`EventResult`. ``simulate_work`` runs hand-made per-stage work (tests, studies).
"""

from __future__ import annotations

from .core import simulate_work
from .engine import Engine, InterferenceModel, OpGraph
from .result import EventResult, StepMeta, Timeline
from .schedules import SCHEDULES
from .work import EventOptions, LayerWork, StageWork, Straggler

__all__ = [
    "SCHEDULES",
    "Engine",
    "EventOptions",
    "EventResult",
    "InterferenceModel",
    "LayerWork",
    "OpGraph",
    "StageWork",
    "StepMeta",
    "Straggler",
    "Timeline",
    "simulate_work",
]


def __getattr__(name: str):
    # The cost-model adapter imports the analytical helper's modules; load it only when asked for.
    if name in ("simulate", "estimate", "estimate_event", "event_options_for", "stage_work_from_costs",
                "parse_straggler", "straggler_slowdown"):
        from . import adapter

        return getattr(adapter, name)
    raise AttributeError(name)

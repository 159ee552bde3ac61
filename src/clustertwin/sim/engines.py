"""The training-step engines, registered by name (``ENGINES``): ``analytical`` (closed form,
``sim.analytical``) and ``event`` (discrete-event, ``sim.event``). Both read the same per-stage costs
(``sim.costs.stage_costs``). A missing engine is an import error here, at start-up; an unknown name
is an ``UnknownNameError`` with the closest match. The event engine's module loads on first use (it
is the slower import).

To add an engine: write ``estimate(model, system, fabric, plan, *, catalog=None, check=True, network=None,
**options) -> StepResult-like`` and register it below.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..registry import Registry


@dataclass(frozen=True, slots=True)
class Engine:
    name: str
    module: str  # the module that provides estimate()
    description: str
    options: tuple[str, ...] = ()  # engine-only keywords (schedule, stragglers, trace)

    @property
    def estimate(self) -> Callable[..., Any]:
        return importlib.import_module(self.module).estimate


ENGINES: Registry[Engine] = Registry("engine")
ENGINES.add("analytical", Engine("analytical", "clustertwin.sim.analytical", "closed-form step model (default)"))
ENGINES.add("event", Engine("event", "clustertwin.sim.event", "discrete-event step simulator (pipeline schedules, "
                            "stragglers, traces)", options=("schedule", "stragglers", "trace")))


def get_engine(name: str) -> Engine:
    return ENGINES.get(name)

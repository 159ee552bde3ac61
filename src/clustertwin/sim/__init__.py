"""Training-step simulator: analytical fast path (``sim.analytical``) over granular per-stage costs
(``sim.costs``); the event-driven engine lives in ``sim.event`` (imported lazily by the API)."""

from __future__ import annotations

from .analytical import BREAKDOWN, estimate, estimate_batch
from .costs import Hardware, make_hardware, stage_costs
from .result import StepResult

__all__ = ["BREAKDOWN", "Hardware", "StepResult", "estimate", "estimate_batch", "make_hardware", "stage_costs"]

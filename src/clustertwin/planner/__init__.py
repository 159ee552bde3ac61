"""The planner: which parallel layout to run, and on which cluster design.

* :mod:`.space`      every valid layout as numpy arrays (placement and divisibility rules)
* :mod:`.evaluator`  the injectable :class:`Evaluator` seam and the analytical-engine adapter
* :mod:`.search`     vectorised search: prune by memory, time, rank, explain the runner-up
* :mod:`.planning`   ``plan()``: the facade behind ``clustertwin plan`` (defaults, clear errors)
* :mod:`.sweep`      design-space sweeps (YAML grid), chunks keyed by input hashes, Pareto front
* :mod:`.executors`  local processes or Ray tasks, same code path
* :mod:`.store`      SQLite results store (one transaction per chunk, resumable)
"""

from __future__ import annotations

from .evaluator import AnalyticalEvaluator, Evaluation, Evaluator
from .executors import LocalExecutor, RayExecutor, make_executor
from .pareto import pareto_mask
from .planning import PlanReport, PlanRequest, plan
from .search import SearchResult, explain_runner_up, search
from .space import AXES, RECOMPUTE, ModelShape, SpaceOptions, structural_space
from .store import ResultsStore
from .sweep import Job, Sweep, build_sweep, run_sweep

__all__ = [
    "AXES",
    "RECOMPUTE",
    "AnalyticalEvaluator",
    "Evaluation",
    "Evaluator",
    "Job",
    "LocalExecutor",
    "ModelShape",
    "PlanReport",
    "PlanRequest",
    "RayExecutor",
    "ResultsStore",
    "SearchResult",
    "SpaceOptions",
    "Sweep",
    "build_sweep",
    "explain_runner_up",
    "make_executor",
    "pareto_mask",
    "plan",
    "run_sweep",
    "search",
    "structural_space",
]

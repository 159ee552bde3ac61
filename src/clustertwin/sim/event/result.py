"""Results of the event engine: pure data (P5). Traces are written by ``clustertwin.report.trace``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..result import StepResult
from .engine import OpGraph, Schedule


@dataclass(frozen=True, slots=True, kw_only=True)
class StepMeta:
    """What turns a step time into throughput and utilisation (from the shared cost model)."""

    tokens_per_step: float = 0.0
    num_gpus: int = 1
    model_flops: float = 0.0  # per step, all GPUs (MODELLING.md 1.2)
    hardware_flops: float = 0.0  # incl. recompute
    peak_flops: float = 0.0  # dense peak per GPU for the plan's dtype
    memory_bytes_per_gpu: float = 0.0
    hbm_bytes: float = 0.0
    memory_detail: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Timeline:
    """Every op's start and end (seconds): what the Chrome trace is drawn from."""

    graph: OpGraph
    schedule: Schedule
    stage_labels: tuple[str, ...] = ()

    def ops(self):
        """Yield (name, stage, stream, category, start_s, end_s) per op, in op order."""
        g, s = self.graph, self.schedule
        for o in range(g.num_ops):
            st = g.op_stream[o]
            yield (g.op_name[o], g.stream_stage[st], g.stream_name[st], g.cat_names[g.op_cat[o]],
                   float(s.start[o]), float(s.end[o]))


@dataclass(frozen=True, slots=True, kw_only=True)
class EventResult(StepResult):
    """One simulated training step: every field of the analytical ``StepResult`` plus the critical
    path, per-stream utilisation, exposed vs hidden communication and (optionally) the timeline for a
    Chrome trace."""

    tflops_per_gpu_hw: float = 0.0
    engine: str = "event"
    critical_path: list[dict[str, Any]] = field(default_factory=list)
    critical_path_s: dict[str, float] = field(default_factory=dict)
    stream_utilisation: dict[str, float] = field(default_factory=dict)
    exposed_comm_s: dict[str, float] = field(default_factory=dict)
    hidden_comm_s: dict[str, float] = field(default_factory=dict)
    stage_busy_s: list[float] = field(default_factory=list)
    bubble_fraction: float = 0.0
    critical_stage: int = 0
    num_stages: int = 1
    num_ops: int = 0
    events: int = 0
    schedule: str = "1f1b"
    notes: list[str] = field(default_factory=list)
    timeline: Timeline | None = None

    def with_(self, **kw: Any) -> EventResult:
        from dataclasses import replace

        return replace(self, **kw)

    def to_dict(self) -> dict[str, Any]:
        out = {}
        for k in self.__dataclass_fields__:
            if k == "timeline":
                continue
            v = getattr(self, k)
            if isinstance(v, np.generic):
                v = v.item()
            out[k] = v
        out["memory_left_gb"] = self.memory_left_gb
        return out

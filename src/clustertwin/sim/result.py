"""Results of a step-time estimate: pure data, no I/O."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True, kw_only=True)
class StepResult:
    """One training-step estimate. Times in seconds, fractions in 0..1, memory in GB (1e9 B).

    ``breakdown`` splits ``step_time_s`` into components that add up to it (seconds per step on the
    critical GPU); ``memory_breakdown_gb`` does the same for ``memory_gb_per_gpu``.
    """

    step_time_s: float
    tokens_per_s: float
    mfu: float
    hfu: float
    tflops_per_gpu: float  # model TFLOP/s per GPU (the MFU numerator)
    tflops_per_gpu_hw: float  # hardware TFLOP/s per GPU (incl. recompute; the HFU numerator)
    memory_gb_per_gpu: float
    fits_memory: bool  # workload.rules.memory_fits: usable HBM less memory_margin_gb
    breakdown: dict[str, float]
    bottleneck: str
    memory_breakdown_gb: dict[str, float] = field(default_factory=dict)
    memory_capacity_gb: float = 0.0  # usable HBM per GPU (driver-reported less the fragmentation reserve)
    memory_margin_gb: float = 0.0  # headroom the fit check keeps (--memory-margin)
    num_gpus: int = 0
    model: str = ""
    system: str = ""
    fabric: str = ""
    plan: dict[str, Any] = field(default_factory=dict)
    assumptions: list[str] = field(default_factory=list)
    engine: str = "analytical"
    details: dict[str, float] = field(default_factory=dict)

    @property
    def memory_left_gb(self) -> float:
        """GB free after the margin (negative: does not fit; the one memory rule's figure)."""
        from ..workload.rules import memory_left_gb

        return float(memory_left_gb(self.memory_gb_per_gpu * 1e9, self.memory_capacity_gb * 1e9, self.memory_margin_gb))

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "memory_left_gb": self.memory_left_gb}

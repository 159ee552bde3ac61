"""The seam between the planner and the performance model (STYLE.md P8: an injectable evaluator).

The planner never models performance itself. It drives an :class:`Evaluator`, which maps a batch
of layouts (one numpy array per axis, see :mod:`.space`) to arrays of metrics. The production
evaluator, :class:`AnalyticalEvaluator`, wraps ``clustertwin.sim.analytical.estimate_batch``;
tests pass a small fake.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..errors import InputError
from ..sim.analytical import estimate_batch
from ..sim.machine import make_hardware
from ..workload.rules import DEFAULT_MEMORY_MARGIN_GB
from .space import Plans

METRICS = ("step_time_s", "tokens_per_s", "mfu", "hfu", "tflops_per_gpu", "memory_gb_per_gpu")


@dataclass(frozen=True, slots=True)
class Evaluation:
    """Metrics for ``n`` layouts: each array has length ``n``.

    ``metrics`` holds at least :data:`METRICS` (floats); ``fits_memory`` booleans; ``breakdown``
    seconds per step-time component; ``bottleneck`` one label per layout.
    """

    metrics: Mapping[str, np.ndarray]
    fits_memory: np.ndarray
    breakdown: Mapping[str, np.ndarray] = field(default_factory=dict)
    bottleneck: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))

    def __len__(self) -> int:
        return int(self.fits_memory.size)

    def take(self, idx: np.ndarray) -> Evaluation:
        return Evaluation(
            metrics={k: np.asarray(v)[idx] for k, v in self.metrics.items()},
            fits_memory=np.asarray(self.fits_memory)[idx],
            breakdown={k: np.asarray(v)[idx] for k, v in self.breakdown.items()},
            bottleneck=np.asarray(self.bottleneck)[idx],
        )

    @staticmethod
    def concat(parts: list[Evaluation]) -> Evaluation:
        if len(parts) == 1:
            return parts[0]
        keys = parts[0].metrics.keys()
        bkeys = set().union(*(p.breakdown.keys() for p in parts))
        n = [len(p) for p in parts]
        return Evaluation(
            metrics={k: np.concatenate([np.asarray(p.metrics[k]) for p in parts]) for k in keys},
            fits_memory=np.concatenate([np.asarray(p.fits_memory, dtype=bool) for p in parts]),
            breakdown={
                k: np.concatenate([np.asarray(p.breakdown.get(k, np.zeros(m))) for p, m in zip(parts, n, strict=True)])
                for k in sorted(bkeys)
            },
            bottleneck=np.concatenate([np.asarray(p.bottleneck, dtype=object) for p in parts]),
        )


@runtime_checkable
class Evaluator(Protocol):
    """What the planner needs from a performance model."""

    @property
    def memory_capacity_bytes(self) -> float:
        """Usable memory per GPU (bytes)."""
        ...

    def memory_bytes(self, plans: Plans) -> np.ndarray:
        """Peak memory per GPU (bytes) for each layout; used to prune before timing."""
        ...

    def evaluate(self, plans: Plans) -> Evaluation:
        """Step time, throughput, MFU/HFU, memory, breakdown and bottleneck for each layout."""
        ...


def memory_margin_of(evaluator: Any) -> float:
    """GB the fit check keeps free for ``evaluator``: its ``memory_margin_gb`` (the default margin of
    ``workload.rules`` when it has none), so pruning, ranking and the engine's flag use one figure."""
    return float(getattr(evaluator, "memory_margin_gb", DEFAULT_MEMORY_MARGIN_GB))


# ----------------------------------------------------------------------------------------------
# The production evaluator: an adapter over clustertwin.sim.analytical.estimate_batch.
# ----------------------------------------------------------------------------------------------


def resolve_model(name_or_spec: Any) -> Any:
    """A ModelSpec from the workload zoo (or the object itself if it already is one)."""
    if not isinstance(name_or_spec, str):
        return name_or_spec
    import importlib

    for mod_name in ("clustertwin.workload", "clustertwin.workload.model"):
        try:
            mod = importlib.import_module(mod_name)
        except ImportError:
            continue
        fn = getattr(mod, "get_model", None)
        if callable(fn):
            return fn(name_or_spec)
    raise InputError(
        "the workload model zoo (clustertwin.workload) is not available in this build",
        hint="install a ClusterTwin build that includes clustertwin.workload",
    )


def normalise(raw: Mapping[str, Any], n: int) -> Evaluation:
    """Turn the engine's dict of arrays into an :class:`Evaluation` (accepts a few spellings)."""

    def arr(*names: str, default: float = np.nan) -> np.ndarray:
        for k in names:
            if k in raw and raw[k] is not None:
                return np.broadcast_to(np.asarray(raw[k], dtype=float), (n,)).copy()
        return np.full(n, default)

    step = arr("step_time_s", "step_time")
    metrics = {
        "step_time_s": step,
        "tokens_per_s": arr("tokens_per_s", "throughput_tokens_per_s"),
        "mfu": arr("mfu"),
        "hfu": arr("hfu"),
        "tflops_per_gpu": arr("tflops_per_gpu"),
        "memory_gb_per_gpu": arr("memory_gb_per_gpu"),
    }
    if np.isnan(metrics["memory_gb_per_gpu"]).all():
        mb = arr("memory_bytes_per_gpu", "memory_bytes")
        metrics["memory_gb_per_gpu"] = mb / 1e9
    fits = raw.get("fits_memory")
    fits = np.ones(n, dtype=bool) if fits is None else np.broadcast_to(np.asarray(fits, dtype=bool), (n,)).copy()
    if raw.get("valid") is not None:  # the engine's own validity check: never rank what it rejects
        fits &= np.broadcast_to(np.asarray(raw["valid"], dtype=bool), (n,))
    breakdown: dict[str, np.ndarray] = {}
    bd = raw.get("breakdown")
    if isinstance(bd, Mapping):
        breakdown = {str(k): np.broadcast_to(np.asarray(v, dtype=float), (n,)).copy() for k, v in bd.items()}
    else:
        for k, v in raw.items():
            if isinstance(k, str) and k.startswith(("breakdown.", "breakdown_")):
                breakdown[k.split(".", 1)[-1] if "." in k else k[len("breakdown_"):]] = np.broadcast_to(
                    np.asarray(v, dtype=float), (n,)
                ).copy()
    bn = raw.get("bottleneck")
    if bn is None:
        if breakdown:
            names = np.asarray(sorted(breakdown), dtype=object)
            stack = np.stack([breakdown[k] for k in sorted(breakdown)])
            bottleneck = names[np.argmax(stack, axis=0)]
        else:
            bottleneck = np.full(n, "", dtype=object)
    else:
        b = np.asarray(bn)
        labels = raw.get("bottleneck_labels")
        if labels is not None and np.issubdtype(b.dtype, np.integer):
            bottleneck = np.asarray(list(labels), dtype=object)[b]
        else:
            bottleneck = np.broadcast_to(b.astype(object), (n,)).copy()
    return Evaluation(metrics=metrics, fits_memory=fits, breakdown=breakdown, bottleneck=bottleneck)


_HW_CACHE: dict[tuple, Any] = {}


def _hardware(system: Any, fabric: Any, dtype: str, catalog: Any) -> Any:
    """The engine's ``Hardware`` for (system, fabric, dtype, catalog), built once per process."""
    key = (system.id, fabric.id, float(fabric.port_bw), dtype, getattr(catalog, "version", None))
    hw = _HW_CACHE.get(key)
    if hw is None:
        hw = _HW_CACHE[key] = make_hardware(system, fabric, dtype, catalog)
    return hw


def oversubscribed(fabric: Any, oversubscription: float, system: Any) -> Any:
    """The scale-out fabric as one GPU of ``system`` sees it through an ``oversubscription``:1 leaf.

    Approximation (documented in docs/planner.md): the engine has no oversubscription input, so the
    worst case is taken, in which all scale-out traffic of a step crosses the leaf uplinks at the same
    time and each NIC gets ``1/oversubscription`` of the rate it runs at on this fabric
    (``HardwareView.nic_bw`` = min(NIC, port); leaf down:up port ratio, as in
    ``clustertwin.cluster.fattree``). 1 leaves the fabric unchanged.
    """
    if oversubscription is None or oversubscription <= 1.0:
        return fabric
    import dataclasses

    from ..hardware import resolve_hardware

    nic = resolve_hardware(system, fabric).nic_bw
    return dataclasses.replace(fabric, port_bw=float(nic) / float(oversubscription))


@dataclass(frozen=True, slots=True)
class AnalyticalEvaluator:
    """Adapter over ``clustertwin.sim.analytical.estimate_batch`` for one (model, system, fabric, batch).

    Picklable (frozen dataclass of specs), so the local and Ray executors can ship it to workers.
    """

    model: Any
    system: Any
    fabric: Any
    num_gpus: int
    global_batch: int
    seq_len: int
    dtype: str = "bf16"
    oversubscription: float = 1.0
    catalog: Any = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    memory_margin_gb: float = DEFAULT_MEMORY_MARGIN_GB  # GB the fit check keeps free (--memory-margin)

    @property
    def memory_capacity_bytes(self) -> float:
        """What a plan may fill: the engine's figure (driver-reported HBM less the fragmentation reserve)."""
        return float(self._hw().hbm_bytes)

    def _fabric(self) -> Any:
        return oversubscribed(self.fabric, self.oversubscription, self.system)

    def _hw(self) -> Any:
        return _hardware(self.system, self._fabric(), self.dtype, self.catalog)

    def _call(self, plans: Plans) -> Mapping[str, Any]:
        # every engine option (the stack's flash/overlap/grad-reduce/CP/SP settings) goes to the engine;
        # one it does not take is a TypeError, never silently dropped
        # the search space only holds layouts the stack can split (uneven stages where it has them)
        return estimate_batch(self.model, self.system, self._fabric(), {"uneven_pipeline": True, **plans},
                              seq_len=self.seq_len,
                              global_batch=self.global_batch, dtype=self.dtype, catalog=self.catalog,
                              hardware=self._hw(), memory_margin_gb=self.memory_margin_gb, **self.extra)

    def memory_bytes(self, plans: Plans) -> np.ndarray:
        """Peak memory per GPU for pruning before timing: the workload memory model
        (``clustertwin.workload.memory.memory_per_gpu``, Korthikanti et al. 2022 Table 2 and the Megatron
        distributed-optimizer table) with the engine's runtime overhead, i.e. the same number the engine
        reports, without timing anything. The engine's ``fits_memory`` stays the final word. A
        ``global_batch`` column in ``plans`` (``search.search_many``) overrides the evaluator's batch per row.
        """
        from ..workload.memory import plan_memory
        from ..workload.stacks import resolve_stack

        n = int(np.asarray(plans["tp"]).size)
        hw = self._hw()
        tp = np.asarray(plans["tp"])
        out = plan_memory(
            self.model, {"global_batch": self.global_batch, **plans, "mb_group": plans.get("microbatch_group"),
                         "sp": (tp > 1) & bool(self.extra.get("sequence_parallel", True))},
            seq_len=self.seq_len, dtype=self.dtype, flash=bool(self.extra.get("flash_attention", True)),
            grad_bytes=float(self.extra.get("grad_reduce_bytes", 2.0)),
            runtime_overhead_bytes=float(hw.eff.runtime_overhead_bytes),
            stack=resolve_stack(self.extra.get("stack"), self.catalog),
        )
        return np.broadcast_to(np.asarray(out["total"], dtype=float), (n,)).copy()

    def evaluate(self, plans: Plans) -> Evaluation:
        n = int(np.asarray(plans["tp"]).size)
        return normalise(self._call(plans), n)

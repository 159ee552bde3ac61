"""Collective communication engine: NCCL-style algorithms, protocols and nccl-tests semantics.

Core, array-friendly entry point (stable signature, used by the step estimator and the planner)::

    from clustertwin.collectives import collective_time
    t = collective_time("all_reduce", size_bytes, n_ranks, ranks_per_domain, system, scaleout)

EP / PP components: ``ep_alltoall_time`` (MoE dispatch / combine) and ``pp_p2p_time`` (stage hand-off),
same model, message-size effects included (:mod:`clustertwin.collectives.p2p`).

``size_bytes``, ``n_ranks`` and ``ranks_per_domain`` broadcast as numpy arrays; ``algo="auto"`` is
NCCL's own choice (elementwise minimum over the algorithms NCCL considers). The scalar API
``estimate_collective`` returns a :class:`CollectiveResult` with time, algbw, busbw (nccl-tests
definitions), algorithm and protocol. See docs/collectives.md for the model and its sources.
"""

from __future__ import annotations

from .core import (
    ALGORITHMS,
    AUTO,
    OPS,
    Algorithm,
    CollectiveResult,
    auto_algorithms,
    busbw_factor,
    collective_time,
    estimate_collective,
    normalize_op,
    register_algorithm,
    sweep,
)
from .p2p import effective_bandwidth, ep_alltoall_time, pp_p2p_time
from .params import CollectiveParams, resolve_params


def __getattr__(name: str):
    # lazy, so that ``python -m clustertwin.collectives.validation`` does not import itself twice
    if name == "predict_busbw_row":
        from .validation import predict_busbw_row

        return predict_busbw_row
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ALGORITHMS",
    "AUTO",
    "OPS",
    "Algorithm",
    "CollectiveParams",
    "CollectiveResult",
    "auto_algorithms",
    "busbw_factor",
    "collective_time",
    "effective_bandwidth",
    "ep_alltoall_time",
    "estimate_collective",
    "normalize_op",
    "pp_p2p_time",
    "predict_busbw_row",
    "register_algorithm",
    "resolve_params",
    "sweep",
]

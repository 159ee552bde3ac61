"""Synthetic per-stage work for engine tests (no cost model)."""

from __future__ import annotations

from clustertwin.sim.event import EventOptions, InterferenceModel, LayerWork, StageWork, simulate_work  # noqa: F401


def uniform_stages(p: int, layers_per_chunk: int = 2, v: int = 1, *, tf: float = 1.0, tb: float = 2.0,
                   tw: float = 0.0, p2p: float = 0.0, tp: float = 0.0, dp: float = 0.0,
                   optimizer: float = 0.0) -> tuple[StageWork, ...]:
    """p stages, each with v chunks of ``layers_per_chunk`` layers; one micro-batch of one *stage*
    takes tf forward and tb backward (tw of it weight gradient), spread evenly over its layers."""
    n = layers_per_chunk * v
    lw = LayerWork(fwd=tf / n, bwd_input=(tb - tw) / n, bwd_weight=tw / n, tp_fwd=tp / n, tp_bwd=tp / n,
                   dp_grad=dp / n, dp_param=dp / (2 * n), params=1e6)
    chunk = tuple(lw for _ in range(layers_per_chunk))
    return tuple(StageWork(chunks=tuple(chunk for _ in range(v)), p2p_fwd=p2p, p2p_bwd=p2p, optimizer=optimizer)
                 for _ in range(p))


def run(stages, schedule="1f1b", m=4, ideal=True, **kw):
    opts = EventOptions(schedule=schedule, num_microbatches=m,
                        interference=InterferenceModel.none() if ideal else InterferenceModel(), **kw)
    return simulate_work(stages, opts, trace=kw.pop("trace", False))

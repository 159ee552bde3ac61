"""Balanced pipeline layout when the layers do not split evenly over the pipeline stages.

Megatron splits ``L`` layers evenly over ``p*v`` virtual stages when that divides ``L``, or ``L + 2`` with
the embedding and the loss counted as one layer slot each (``account_for_embedding/loss_in_pipeline_split``).
Any other split needs an explicit ``--pipeline-model-parallel-layout``; NVIDIA's DeepSeek-V3 recipes
(61 layers + MTP) use ``"Et*4|(t*4|)*14tmL"`` on 16 virtual stages and ``"Et|(tt|)*30mL"`` on 32
(Megatron-Bridge ``scripts/performance/configs/deepseek/deepseek_workload_base_configs.py``): whole layers
per stage, the last stage trading layers for the output head, the loss and the MTP block. We assume such
a balanced layout: the last rank holds ``k`` layers besides its ``head`` work (output layer(s) + loss +
MTP layers, in seconds), the other ``p - 1`` ranks share ``L - k`` (at most ``ceil((L - k)/(p - 1))``
each), and ``k`` minimises the slowest rank. The continuous optimum is k* = (L - (p-1) head/t) / p; the
best whole ``k`` is one of its two neighbours (the two terms are monotone in ``k``).
"""

from __future__ import annotations

import math

from .. import xp as np  # numpy, or plain numbers for one plan (clustertwin/xp.py)


def _rank_time(L, p, t_layer, head, k):
    k = np.clip(k, 0.0, L)
    return np.maximum(np.ceil((L - k) / np.maximum(p - 1.0, 1.0) - 1e-9) * t_layer, k * t_layer + head)


def balanced_last_stage_layers(L, p, t_layer, head):
    """Layers ``k`` on the last pipeline rank of the balanced layout (arrays broadcast)."""
    L = np.asarray(L, dtype=float)
    t = np.maximum(np.asarray(t_layer, dtype=float), 1e-30)
    kstar = (L - (np.asarray(p, dtype=float) - 1.0) * np.asarray(head, dtype=float) / t) / np.asarray(p, dtype=float)
    lo = np.clip(np.floor(kstar), 0.0, L)
    hi = np.clip(lo + 1.0, 0.0, L)
    return np.where(_rank_time(L, p, t, head, lo) <= _rank_time(L, p, t, head, hi), lo, hi)


def balanced_last_stage_time(L, p, t_layer, head):
    """Time of the slowest pipeline rank of one micro-batch under the balanced layout."""
    p = np.asarray(p, dtype=float)
    k = balanced_last_stage_layers(L, p, t_layer, head)
    return _rank_time(np.asarray(L, dtype=float), p, t_layer, head, k)


def balanced_virtual_stage_counts(num_layers: int, p: int, v: int, head_over_layer: float) -> list[int]:
    """Layers of each virtual stage 0..p*v-1 (stage ``c*p + i`` is chunk ``c`` of rank ``i``) for the
    balanced layout: the last rank's ``k`` layers over its ``v`` chunks (fewest on the last chunk, which
    carries the head), the other layers evenly over the other ranks' chunks."""
    k = int(balanced_last_stage_layers(float(num_layers), float(p), 1.0, head_over_layer))
    rest = num_layers - k
    counts = [0] * (p * v)
    base, extra = divmod(rest, (p - 1) * v) if p > 1 else (0, 0)
    others = [c * p + i for c in range(v) for i in range(p - 1)]
    for j, vs in enumerate(others):
        counts[vs] = base + (1 if j < extra else 0)
    last = [c * p + p - 1 for c in range(v)]
    kb, ke = divmod(k, v)
    for j, vs in enumerate(last):
        counts[vs] = kb + (1 if j < ke else 0)
    assert sum(counts) == num_layers and math.isfinite(head_over_layer)
    return counts

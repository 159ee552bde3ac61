"""Pipeline layouts and schedules: how many decoder layers each pipeline rank holds, and which schedule
runs them. Array-friendly (plan degrees may be numpy arrays; the model is scalar).

Stage layout (layers per pipeline *rank*, summed over its ``vpp`` chunks), three cases:

* ``L`` divisible by ``p*v``: every rank holds ``L/p`` layers; the last adds the output layer + loss
  (and the multi-token-prediction module).
* ``L + 2`` divisible by ``p*v`` (``p > 1``): the embedding and the loss take one layer slot each
  (Megatron ``account_for_embedding/loss_in_pipeline_split``; Llama 3 405B on PP16, arXiv:2407.21783
  Sec. 3.3.2): the first and the last rank hold ``(L+2)/p - 1`` layers, the others ``(L+2)/p``.
* otherwise (an uneven layout, Megatron ``--decoder-first/last-pipeline-num-layers`` or
  ``--pipeline-model-parallel-layout``; DeepSeek-V3 runs 61 layers on PP16, arXiv:2412.19437 Sec. 3.2):
  whole layers only. The last rank takes ``n`` layers plus the output layer, loss and MTP module, the
  other ``p - 1`` ranks share ``L - n`` (at most ``ceil((L-n)/(p-1))`` each; the first rank, which holds
  the most activations in flight, gets the smaller share ``floor``). ``n`` balances the last rank
  against the others in FLOPs: the output layer + MTP count as ``x`` layer-equivalents
  (``logit_layer_equivalents``), and ``n`` minimises ``max(ceil((L-n)/(p-1)), n + x)``. For
  DeepSeek-V3 (61 layers + MTP) this gives NVIDIA's recipe layouts (NVIDIA-NeMo/Megatron-Bridge
  src/megatron/bridge/recipes/deepseek/deepseek_v3.py ``set_deepseek_v3_pipeline_model_parallel_layout``):
  PP16 embedding + 4 | 4 x 14 | 1 + MTP + loss; PP8 8 | 8 x 6 | 5 + MTP + loss; PP4 16 | 16 | 16 | 13 + MTP
  + loss (tests/workload/test_pipeline.py).

Schedules (``PIPELINE_SCHEDULES``; per-stage F = forward, B = input gradient, W = weight gradient):

* ``1f1b``: PipeDream-Flush / Megatron 1F1B, interleaved when ``vpp > 1`` (Narayanan et al. SC'21):
  bubble ``(p-1)(F+B+W)/v``; stage i holds ``min(p-i, m)`` micro-batches.
* ``zb-h1``: zero-bubble ZB-H1 (Qi et al. ICLR'24, Table 1 / DeepSeek-V3 Table 2): bubble
  ``(p-1)(F+B-2W)``, activations as 1F1B; ``vpp = 1``.
* ``dualpipe``: DeepSeek's bidirectional DualPipe (arXiv:2412.19437 Sec. 3.2.1, Table 2): micro-batches
  enter from both ends, each rank holds stage ``i`` and stage ``p-1-i`` (two copies of the parameters:
  "2x" in Table 2), activations of ``p+1`` micro-batch stages (1F1B: ``p``), bubble
  ``(p/2-1)(F&B + B - 3W)``, and the forward chunk of one micro-batch runs beside the backward chunk of
  another so the EP all-to-all and the PP transfers hide behind computation. Rank ``i`` runs half of
  the micro-batches through each of its two stages, so its load per micro-batch is the mean of the two
  (the first rank pairs the embedding stage with the loss stage). Needs an even ``p``, an even number
  of micro-batches and at least ``2p`` of them (deepseek-ai/DualPipe ``dualpipe.py`` ``step``:
  ``num_ranks % 2 == 0``, ``num_chunks % 2 == 0 and num_chunks >= num_ranks * 2``), and ``vpp = 1``.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from .. import xp as np  # numpy, or plain numbers for one plan (clustertwin/xp.py)
from .flops import forward_flops_per_token
from .model import ModelSpec

PIPELINE_SCHEDULES = ("1f1b", "zb-h1", "dualpipe")
SCHEDULE_CODE = {name: i for i, name in enumerate(PIPELINE_SCHEDULES)}


def mixed_interleaved_chunks(num_layers, pp, vpp):
    """True where an uneven layout (neither L nor L + 2 divisible into the pp*vpp virtual stages)
    interleaves (vpp > 1) with virtual stages of mixed sizes inside: c = ceil(L / (pp*vpp)) layers cannot
    fill every virtual stage but the first and the last (deficit c*pp*vpp - L > 2c - 1). NVIDIA's uneven
    interleaved layouts keep the interior uniform (DeepSeek-V3: ``"Et*4|(t*4|)*14tmL"`` on 16 virtual
    stages, ``"Et|(tt|)*30mL"`` on 32); mixed sizes stall Megatron's interleaved order beyond the
    analytical closed form (docs/planner.md). Scalars or integer arrays."""
    L = num_layers
    st = pp * vpp
    c = -(-L // st)
    return (vpp > 1) & (L % st != 0) & ((L + 2) % st != 0) & (c * st - L > 2 * c - 1)


def schedule_code(value) -> Any:
    """Schedule names or codes -> int64 codes (array; a plain int for one plan in ``xp.scalar_mode``)."""
    if np.in_scalar_mode() and np.ndim(value) == 0:  # one plan: a plain int
        return SCHEDULE_CODE[str(value)] if isinstance(value, str) else int(value)
    arr = np.asarray(value)
    if arr.dtype.kind in "US":
        return np.vectorize(lambda x: SCHEDULE_CODE[str(x)])(arr).astype(np.int64)
    return arr.astype(np.int64)


def logit_layer_equivalents(model: ModelSpec, seq_len: int | None = None) -> float:
    """FLOPs of the output layer (and the MTP modules: their output layers and transformer layers) in
    units of one average decoder layer: what the last pipeline rank carries beside its layers."""
    f = forward_flops_per_token(model, int(seq_len or getattr(model, "seq_len", 0) or 4096))
    layers = sum(v for k, v in f.items() if k != "logits")
    per_layer = layers / max(model.num_layers, 1)
    return float(f["logits"] / per_layer + getattr(model, "mtp_depth", 0)) if per_layer > 0 else 0.0


def stage_layout(model: ModelSpec, pp, vpp):
    """Decoder layers per pipeline rank: ``(first, last, most)`` arrays (see the module docstring).

    ``first``: the first rank, ``last``: the last rank (beside the output layer / loss / MTP),
    ``most``: the most any rank holds. The balance uses the model's own sequence length (one layout per
    model and pipeline shape, whatever the run's sequence length), so memory and time see the same layout.
    """
    if np.ndim(pp) == 0 and np.ndim(vpp) == 0:  # one plan: computed once per (model, pp, vpp)
        return np.memo(_LAYOUTS, (id(model), float(pp), float(vpp)), model, _stage_layout, model, pp, vpp)
    # many plans: computed once per distinct (pp, vpp) among them (xp.per_distinct)
    return np.per_distinct(partial(_stage_layout, model), (pp, vpp))


# scalar layouts already computed: (id(model), pp, vpp) -> (model, None, (first, last, most)) (xp.memo)
_LAYOUTS: dict[tuple, tuple] = {}


def _stage_layout(model: ModelSpec, pp, vpp):
    p = np.asarray(pp, dtype=float)
    v = np.asarray(vpp, dtype=float)
    L = float(model.num_layers)
    stages = p * v
    even = np.isclose(np.mod(L, stages), 0.0)
    plus2 = np.logical_not(even) & np.isclose(np.mod(L + 2.0, stages), 0.0) & (p > 1)
    per = L / p
    slots = (L + 2.0) / p
    x = logit_layer_equivalents(model)
    q = np.maximum(p - 1.0, 1.0)
    n_star = (L - (p - 1.0) * x) / p
    hi = np.maximum(L - (p - 1.0), 0.0)  # every other rank keeps at least one layer
    best_n = np.zeros_like(p * v)
    best_c = np.full_like(best_n, np.inf)
    for off in (-1.0, 0.0, 1.0, 2.0):  # the integer optimum is next to the continuous one
        n = np.clip(np.floor(n_star) + off, 0.0, hi)
        cost = np.maximum(np.ceil((L - n) / q), n + x)
        better = cost <= best_c  # ties: the larger n (fewer layers, less memory on the other ranks)
        best_n = np.where(better, n, best_n)
        best_c = np.where(better, cost, best_c)
    gen_first = np.floor((L - best_n) / q)
    gen_most = np.maximum(np.ceil((L - best_n) / q), best_n)
    first = np.where(p <= 1, L, np.where(even, per, np.where(plus2, slots - 1.0, gen_first)))
    last = np.where(p <= 1, L, np.where(even, per, np.where(plus2, slots - 1.0, best_n)))
    most = np.where(p <= 1, L, np.where(even, per, np.where(plus2, np.where(p > 2, slots, slots - 1.0), gen_most)))
    return first, last, most

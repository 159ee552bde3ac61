"""Tensor-parallel collectives of one layer, one micro-batch: 2 in the forward, 2 in the backward, 2 more
in a full-recompute forward. Each is an all-reduce of the layer activation, or with sequence parallelism
an all-gather + reduce-scatter. TP ranks are the innermost (contiguous) group. Stack options (workload/stacks.py):
``tp_fp8_gather`` (FP8 tensorwise steps all-gather in FP8, torchao's Float8 TP styles; the reduce-scatters
stay 16-bit) and ``tp_gather_copy`` (DTensor's sequence-dimension collectives re-lay the gathered output /
the unscattered input with one chunk + cat copy each: read + write of the whole tensor in HBM, 2 kernels per
all-gather + reduce-scatter pair).

Interface: ``tp_comm(st) -> TPComm(fwd_s, bwd_s, recompute_s, bytes_per_collective)``. How much of it
hides behind GEMMs is decided by the engine (``sim.analytical._compose``, the event engine's overlap).
"""

from __future__ import annotations

from typing import NamedTuple

from ... import xp as np  # numpy, or plain numbers for one plan (clustertwin/xp.py)
from ...placement import ranks_per_domain
from ..comm import ALL_GATHER, ALL_REDUCE, REDUCE_SCATTER, collective_time
from ..kernels import mem_time
from .stage import Stage


class TPComm(NamedTuple):
    fwd_s: np.ndarray
    bwd_s: np.ndarray
    recompute_s: np.ndarray
    bytes_per_collective: np.ndarray


def tp_comm(st: Stage) -> TPComm:
    hw, t = st.hw, st.t
    tp_bytes = st.tok * float(st.model.hidden_size) * st.act_bytes
    r_tp = ranks_per_domain(t, 1.0, hw.domain)
    # (np.needed: one plan prices only the collectives its sequence-parallel setting uses; xp.py)
    ar = collective_time(ALL_REDUCE, tp_bytes, t, r_tp, hw) if np.needed(np.logical_not(st.sp)) else 0.0
    # FP8 tensorwise TP plan (torchtitan): the gathered activations / output gradients travel as FP8
    ag_bytes = tp_bytes * (1.0 / st.act_bytes if st.tp_fp8_gather and st.hw.dtype == "fp8" else 1.0)
    ag_rs = (collective_time(ALL_GATHER, ag_bytes, t, r_tp, hw) + collective_time(REDUCE_SCATTER, tp_bytes, t, r_tp, hw)
             if np.needed(st.sp) else 0.0)
    if st.tp_gather_copy:
        # DTensor gathers / scatters the sequence dimension (Shard(1)) through funcol's chunk + cat: one read and
        # one write of the whole gathered output (all-gather) / unscattered input (reduce-scatter)
        ag_rs = ag_rs + np.where(t > 1, mem_time(hw, 2.0 * (ag_bytes + tp_bytes), 2.0), 0.0)
    one = np.where(st.sp, ag_rs, ar)
    tp_f = 2.0 * one
    return TPComm(tp_f, 2.0 * one, np.where(st.rc == 2, tp_f, 0.0), tp_bytes)

"""Tensor-parallel collectives of one layer, one micro-batch: 2 in the forward, 2 in the backward, 2 more
in a full-recompute forward. Each is an all-reduce of the layer activation, or with sequence parallelism
an all-gather + reduce-scatter. TP ranks are the innermost (contiguous) group.

Interface: ``tp_comm(st) -> TPComm(fwd_s, bwd_s, recompute_s, bytes_per_collective)``. How much of it
hides behind GEMMs is decided by the engine (``sim.analytical._compose``, the event engine's overlap).
"""

from __future__ import annotations

from typing import NamedTuple

from ... import xp as np  # numpy, or plain numbers for one plan (clustertwin/xp.py)
from ...placement import ranks_per_domain
from ..comm import ALL_GATHER, ALL_REDUCE, REDUCE_SCATTER, collective_time
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
    ag_rs = (collective_time(ALL_GATHER, tp_bytes, t, r_tp, hw) + collective_time(REDUCE_SCATTER, tp_bytes, t, r_tp, hw)
             if np.needed(st.sp) else 0.0)
    one = np.where(st.sp, ag_rs, ar)
    tp_f = 2.0 * one
    return TPComm(tp_f, 2.0 * one, np.where(st.rc == 2, tp_f, 0.0), tp_bytes)

"""Communication: the one call site for every collective the training step issues.

``collective_time(op, size, n, r, hw)``: time of one collective of ``size`` bytes over ``n`` ranks, ``r``
of them per scale-up domain, on the machine ``hw``; array-friendly. Priced by
``clustertwin.collectives.collective_time`` (NCCL algorithms and tuner constants, bandwidths from the
resolved ``hardware.HardwareView``), plus the scale-out contention penalty of ``hw.network`` with
``--network flow``. There is no second (fallback) collective model.
"""

from __future__ import annotations

import numpy as np

from ..collectives import collective_time as _nccl_collective_time
from ..collectives import resolve_params
from .machine import Hardware

# Collective operation codes (one vocabulary with clustertwin.collectives)
ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL, SEND_RECV = (
    "all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv")


def collective_time(op: str, size, n, r, hw: Hardware):
    """Seconds of one collective (0 for a group of one rank), plus ``hw.network``'s contention penalty."""
    t = _nccl_collective_time(op, size, n, r, hw.system, hw.scaleout, algo="auto", catalog=hw.catalog)
    t = np.where(np.asarray(n) > 1, np.asarray(t, dtype=float), 0.0)
    if hw.network is not None:
        t = t + hw.network.penalty(op, size, n, r, hw.system, hw.scaleout)
    return t


def achieved_bandwidths(hw: Hardware) -> tuple[float, float]:
    """(scale-up, scale-out) achieved bandwidth per device (bytes/s) the collectives price with: what
    ``estimate`` prints as its bandwidth assumption."""
    P = resolve_params(hw.system, hw.scaleout, hw.catalog)
    return P.scaleup_busbw, P.scaleout_busbw_per_device

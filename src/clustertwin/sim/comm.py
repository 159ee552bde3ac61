"""Communication: the one call site for every collective the training step issues.

``collective_time(op, size, n, r, hw)``: time of one collective of ``size`` bytes over ``n`` ranks, ``r``
of them per scale-up domain, on the machine ``hw``; array-friendly. Priced by
``clustertwin.collectives.collective_time`` (NCCL algorithms), plus the scale-out contention penalty of
``hw.network`` with ``--network flow``.
"""

from __future__ import annotations

import importlib

import numpy as np

from ..errors import InputError
from .machine import Hardware

# Collective operation codes (one vocabulary with clustertwin.collectives)
ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL, SEND_RECV = (
    "all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv")


COMM_MODEL = {"name": "auto"}  # "auto": clustertwin.collectives when present, else "builtin"


def builtin_collective_time(op: str, size, n, r, hw: Hardware):
    """Alpha-beta time of one collective (MODELLING.md §7, hardware README §D.1).

    ``n`` ranks, ``r`` of them per scale-up domain. Inside one domain the ring runs at the scale-up bus
    bandwidth; across domains every ring crosses each domain boundary once and the r local ranks drive r
    NICs: busbw = min(up, r * NIC) (checked against the 3-node A100 nccl-tests point). Bytes per rank:
    all-reduce 2(n-1)/n S, all-gather/reduce-scatter (n-1)/n S (S = full size), all-to-all (n-1)/n S
    with the inter-domain share (n-r)/n limited by the NIC, send/recv S.
    """
    S = np.asarray(size, dtype=float)
    n = np.maximum(np.asarray(n, dtype=float), 1.0)
    r = np.clip(np.asarray(r, dtype=float), 1.0, n)
    multi = n > r + 0.5
    busbw = np.where(multi, np.minimum(hw.up_bw, r * hw.nic_bw), hw.up_bw)
    n_dom = np.ceil(n / r)
    if op == ALL_REDUCE:
        factor, steps = 2.0 * (n - 1) / n, 2.0 * (n - 1)
        inter_steps = 2.0 * (n_dom - 1)
    elif op in (ALL_GATHER, REDUCE_SCATTER):
        factor, steps = (n - 1) / n, (n - 1)
        inter_steps = n_dom - 1
    elif op == ALL_TO_ALL:
        t_up = (r - 1) / n * S / hw.up_bw
        t_net = (n - r) / n * S / hw.nic_bw
        t = np.maximum(t_up, t_net) + np.where(multi, hw.net_lat, hw.up_lat) * np.minimum(n - 1, 8.0)
        return np.where(n > 1, t, 0.0)
    elif op == SEND_RECV:
        bw = np.where(multi, hw.nic_bw, hw.up_bw * 1.0)
        return np.where(n > 1, S / bw + np.where(multi, hw.net_lat, hw.up_lat), 0.0)
    else:
        raise ValueError(f"unknown collective {op!r}")
    lat = (steps - inter_steps) * hw.up_lat + inter_steps * hw.net_lat
    t = factor * S / busbw + lat
    return np.where(n > 1, t, 0.0)


def _external_collective_time():
    try:
        mod = importlib.import_module("clustertwin.collectives")
    except ImportError:
        return None
    return getattr(mod, "collective_time", None)


def collective_time(op: str, size, n, r, hw: Hardware):
    """The single call site for collective costs (builtin alpha-beta or clustertwin.collectives), plus
    the scale-out contention penalty of ``hw.network`` (``--network flow``) when one is set."""
    t = _collective_time(op, size, n, r, hw)
    if hw.network is not None:
        t = t + hw.network.penalty(op, size, n, r, hw.system, hw.scaleout)
    return t


def _collective_time(op: str, size, n, r, hw: Hardware):
    choice = COMM_MODEL["name"]
    if choice != "builtin":
        ext = _external_collective_time()
        if ext is not None:
            t = ext(op, size, n, r, hw.system, hw.scaleout, algo="auto", catalog=hw.catalog)
            return np.where(np.asarray(n) > 1, np.asarray(t, dtype=float), 0.0)
        if choice == "collectives":
            raise InputError("clustertwin.collectives.collective_time is not available")
    return builtin_collective_time(op, size, n, r, hw)

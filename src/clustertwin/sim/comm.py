"""Communication: the one call site for every collective the training step issues.

``collective_time(op, size, n, r, hw)``: time of one collective of ``size`` bytes over ``n`` ranks, ``r``
of them per scale-up domain, on the machine ``hw``; array-friendly. Priced by
``clustertwin.collectives.collective_time`` (NCCL algorithms and tuner constants, bandwidths from the
resolved ``hardware.HardwareView``), plus the scale-out contention penalty of ``hw.network`` with
``--network flow``. There is no second (fallback) collective model.

Speed without a second model. A step issues about a dozen collectives, and a planner batch of many
thousand layouts has only a few dozen distinct (size, ranks, ranks-per-domain) triples per collective
(the DP all-reduce does not depend on the micro-batch, the TP all-reduce not on the pipeline depth).
So the real function is called only on the distinct triples:

* arrays: exact de-duplication (``np.unique`` per column, then over the combined codes), one call of
  ``clustertwin.collectives.collective_time`` on the distinct triples, scattered back;
* scalars (``estimate``): a per-machine table (system, fabric, catalog) of the times already priced,
  filled by the same function on first use and bounded in size.

Every number still comes from ``clustertwin.collectives``; a change there is picked up without any
edit here (``tests/sim/test_fast_paths.py`` pins both paths to a direct call).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import xp
from ..collectives import collective_time as _nccl_collective_time
from ..collectives import resolve_params
from .machine import Hardware

# Collective operation codes (one vocabulary with clustertwin.collectives)
ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL, SEND_RECV = (
    "all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv")

FAST = True  # False: price every element directly (the reference the tests compare the fast paths with)
_DEDUP_MIN = 64  # below this many elements de-duplication costs more than it saves
_TABLE_MAX = 1 << 16  # priced scalar collectives kept per machine
_MACHINES_MAX = 64
# (id(system), id(scaleout), id(catalog)) -> (system, scaleout, catalog, {(op, size, n, r): seconds}).
# Specs hold dicts (unhashable), so the key is their identity; the entry keeps them alive, so an id is
# never reused while its table exists. Specs and catalogs are frozen.
_TABLES: dict[tuple[int, int, int], tuple[object, object, object, dict]] = {}
_BANDWIDTHS = ("achieved_bandwidths",)  # a key no collective uses
_PLAIN = xp._S
_scalar_mode = xp.in_scalar_mode
# id(hw) -> (hw, its machine's table): one lookup per collective (several Hardware objects, one per
# dtype / network, share their machine's table); the entry keeps hw alive, so its id is not reused
_BY_HW: dict[int, tuple[Hardware, dict]] = {}


def _table(hw: Hardware) -> dict:
    hit = _BY_HW.get(id(hw))
    if hit is not None and hit[0] is hw:
        return hit[1]
    table = _machine_table(hw)
    if len(_BY_HW) >= _MACHINES_MAX:
        _BY_HW.clear()
    _BY_HW[id(hw)] = (hw, table)
    return table


def _machine_table(hw: Hardware) -> dict:
    key = (id(hw.system), id(hw.scaleout), id(hw.catalog))
    hit = _TABLES.get(key)
    if hit is None:
        if len(_TABLES) >= _MACHINES_MAX:
            _TABLES.clear()
        hit = _TABLES[key] = (hw.system, hw.scaleout, hw.catalog, {})
    return hit[3]


def clear_tables() -> None:
    """Forget every priced collective (benchmarks use it to time cold calls)."""
    _TABLES.clear()
    _BY_HW.clear()


def _nccl(op: str, size, n, r, hw: Hardware):
    return _nccl_collective_time(op, size, n, r, hw.system, hw.scaleout, algo="auto", catalog=hw.catalog)


def _scalar(op: str, size, n, r, hw: Hardware) -> float:
    s, nn, rr = float(size), float(n), float(r)
    hit = _BY_HW.get(id(hw))
    table = hit[1] if hit is not None and hit[0] is hw else _table(hw)
    key = (op, s, nn, rr)
    t = table.get(key)
    if t is None:
        t = float(_nccl(op, s, nn, rr, hw))  # validates the inputs (bad ones raise, nothing is stored)
        t = t if nn > 1.0 else 0.0
        if len(table) >= _TABLE_MAX:
            table.clear()
        table[key] = t
    return t


def _dedup(op: str, size, n, r, hw: Hardware) -> np.ndarray:
    """Each distinct (size, n, r) among the elements priced once (xp.distinct_rows) and gathered back."""
    S, N, R = np.broadcast_arrays(np.asarray(size, dtype=float), np.asarray(n, dtype=float),
                                  np.asarray(r, dtype=float))
    shape = S.shape
    s, nn, rr = S.ravel(), N.ravel(), R.ravel()
    found = xp.distinct_rows(s, nn, rr)
    if found is None:  # the combined code would overflow: price every element
        return np.where(N > 1, np.asarray(_nccl(op, S, N, R, hw), dtype=float), 0.0)
    rep, inv = found
    s, nn, rr = s[rep], nn[rep], rr[rep]
    t = np.asarray(_nccl(op, s, nn, rr, hw), dtype=float)
    t = np.where(nn > 1, t, 0.0)
    return t[inv].reshape(shape)


def collective_time(op: str, size, n, r, hw: Hardware):
    """Seconds of one collective (0 for a group of one rank), plus ``hw.network``'s contention penalty."""
    t: Any
    if not FAST:
        t = np.where(np.asarray(n) > 1, np.asarray(_nccl(op, size, n, r, hw), dtype=float), 0.0)
    elif type(size) in _PLAIN and type(n) in _PLAIN and type(r) in _PLAIN and _scalar_mode():
        t = _scalar(op, size, n, r, hw)  # one plan on plain numbers (xp.scalar_mode)
    elif np.ndim(size) == 0 and np.ndim(n) == 0 and np.ndim(r) == 0:
        t = np.float64(_scalar(op, size, n, r, hw))
    elif np.broadcast(size, n, r).size >= _DEDUP_MIN:
        t = _dedup(op, size, n, r, hw)
    else:
        t = _nccl(op, size, n, r, hw)
        t = np.where(np.asarray(n) > 1, np.asarray(t, dtype=float), 0.0)
    if hw.network is not None:
        t = t + hw.network.penalty(op, size, n, r, hw.system, hw.scaleout)
    return t


def achieved_bandwidths(hw: Hardware) -> tuple[float, float]:
    """(scale-up, scale-out) achieved bandwidth per device (bytes/s) the collectives price with: what
    ``estimate`` prints as its bandwidth assumption (resolved once per machine)."""
    table = _table(hw)
    bw = table.get(_BANDWIDTHS)
    if bw is None:
        P = resolve_params(hw.system, hw.scaleout, hw.catalog)
        bw = table[_BANDWIDTHS] = (P.scaleup_busbw, P.scaleout_busbw_per_device)
    return bw

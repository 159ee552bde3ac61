"""The array namespace of the step model: numpy, or plain Python numbers for one plan.

The step model (``sim/analytical.py``, ``sim/costs.py``, ``sim/components/*``, ``sim/kernels.py``,
``sim/pp_layout.py``, ``workload/memory.py``, ``workload/pipeline.py``, ``workload/rules.py``,
``placement.py``) is written once, vectorised over plans, and imports this module as ``np``. Every
function here is numpy's: outside ``scalar_mode()`` it calls numpy with the same arguments. Inside
``scalar_mode()`` (``sim.analytical.estimate``, one plan) a call whose arguments are all plain numbers
(``float``, ``int``, ``bool`` or numpy scalars) is answered by the same operation on Python numbers
(``math``, comparisons), which costs ~50 ns where a numpy call on 0-d values costs ~1 us: the same
formulas, the same IEEE-754 double arithmetic (only + - * /, comparisons, floor/ceil/round and
``%`` are used, all exact or correctly rounded in both), so the same numbers
(``tests/sim/test_fast_paths.py`` checks that for random plans). Anything else (an array argument, a
name this module does not define) goes to numpy.

Differences from numpy a caller in scalar mode must handle: a division by zero or an overflow raises
(``ZeroDivisionError``, ``OverflowError``) instead of giving inf/nan with a warning, and results are
Python numbers (no ``.shape``, ``.astype``; use ``np.shape``, ``np.astype``, ``np.item``). ``estimate``
reruns such a plan through numpy. Python's ``~`` on a bool is not a logical not (``~True == -2``): the
step model uses ``np.logical_not``.

The mode is a ``contextvars.ContextVar``: per thread (web jobs) and per asyncio task.
"""

from __future__ import annotations

import builtins
import math
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as _np

_SCALAR: ContextVar[bool] = ContextVar("clustertwin_scalar_mode", default=False)
_get = _SCALAR.get
# plain numbers (type(x) in _S; a set: one hash probe, where a tuple compares up to six types)
_S = frozenset((float, int, bool, _np.float64, _np.int64, _np.bool_))

ndarray = _np.ndarray
inf = _np.inf
nan = _np.nan
int64 = _np.int64
float64 = _np.float64
bool_ = _np.bool_


def __getattr__(name: str):  # everything not defined here is numpy's
    return getattr(_np, name)


@contextmanager
def scalar_mode():
    """Answer calls on plain numbers with plain numbers (see the module docstring)."""
    token = _SCALAR.set(True)
    try:
        yield
    finally:
        _SCALAR.reset(token)


in_scalar_mode = _SCALAR.get  # () -> bool: whether scalar_mode() is on (the C method: no Python frame)


def _cast(x, dtype):
    if dtype is None:
        return x
    if dtype is float or dtype is _np.float64:
        return float(x)
    if dtype is int or dtype is _np.int64:
        return int(x)
    if dtype is bool or dtype is _np.bool_:
        return bool(x)
    raise TypeError  # another dtype: numpy


def asarray(x, dtype=None):
    if type(x) in _S and _get():
        if dtype is None:
            return x
        if dtype is float:
            return float(x)
        try:
            return _cast(x, dtype)
        except TypeError:
            pass
    return _np.asarray(x, dtype=dtype)


def astype(x, dtype):
    """``np.asarray(x).astype(dtype)`` (a copy), or the plain number converted."""
    if type(x) in _S and _get():
        try:
            return _cast(x, dtype)
        except TypeError:
            pass
    return _np.asarray(x).astype(dtype)


def item(x):
    """The Python number of a 0-d array or numpy scalar (``x.item()``); a plain number as it is."""
    if type(x) in (float, int, bool):
        return x
    return _np.asarray(x).item()


def where(c, a, b):
    if type(c) in _S and type(a) in _S and type(b) in _S and _get():
        return a if c else b
    return _np.where(c, a, b)


def maximum(a, b):
    if type(a) in _S and type(b) in _S and _get():
        if a >= b:
            return a
        if b > a:
            return b
        return a if a != a else b  # a NaN wins, as in numpy
    return _np.maximum(a, b)


def minimum(a, b):
    if type(a) in _S and type(b) in _S and _get():
        if a <= b:
            return a
        if b < a:
            return b
        return a if a != a else b
    return _np.minimum(a, b)


def clip(x, lo, hi):
    if type(x) in _S and type(lo) in _S and type(hi) in _S and _get():
        return clip_plain(x, lo, hi)
    return _np.clip(x, lo, hi)


def clip_plain(x, lo, hi):
    """numpy's clip on plain numbers, with no type or mode check (a caller that has made both)."""
    v = x if x >= lo else (lo if lo > x else (x if x != x else lo))  # maximum(x, lo): a NaN wins, as in numpy
    return v if v <= hi else (hi if hi < v else (v if v != v else hi))  # minimum(v, hi)


def logical_not(x):
    if type(x) in _S and _get():
        return not x
    return _np.logical_not(x)


def ceil(x):
    if type(x) in _S and _get():
        return float(math.ceil(x))  # inf/nan raise: the caller reruns with numpy
    return _np.ceil(x)


def floor(x):
    if type(x) in _S and _get():
        return float(math.floor(x))
    return _np.floor(x)


def round(x):  # noqa: A001  (numpy's name)
    if type(x) in _S and _get():
        return float(builtins.round(x))  # half to even, as numpy
    return _np.round(x)


def mod(a, b):
    if type(a) in _S and type(b) in _S and _get():
        return a % b
    return _np.mod(a, b)


def floor_divide(a, b):
    if type(a) in _S and type(b) in _S and _get():
        return a // b
    return _np.floor_divide(a, b)


def isclose(a, b, rtol=1e-05, atol=1e-08):
    if type(a) in _S and type(b) in _S and _get() and math.isfinite(a) and math.isfinite(b):
        return abs(a - b) <= atol + rtol * abs(b)  # numpy's (asymmetric) test
    return _np.isclose(a, b, rtol=rtol, atol=atol)


def isfinite(x):
    if type(x) in _S and _get():
        return math.isfinite(x)
    return _np.isfinite(x)


def isin(x, values):
    if type(x) in _S and _get():
        return x in (values.tolist() if isinstance(values, _np.ndarray) else values)
    return _np.isin(x, values)


def ndim(x) -> int:
    if type(x) in _S or type(x) is str:
        return 0
    return _np.ndim(x)


def shape(x) -> tuple:
    if type(x) in _S or type(x) is str:
        return ()
    return _np.shape(x)


def any(x):  # noqa: A001  (numpy's name)
    if type(x) in _S and _get():
        return bool(x)
    return _np.any(x)


def all(x):  # noqa: A001  (numpy's name)
    if type(x) in _S and _get():
        return bool(x)
    return _np.all(x)


def needed(mask) -> bool:
    """Whether the first branch of ``np.where(mask, a, b)`` must be computed: False only in scalar mode
    for a plain false ``mask`` (then the result is ``b`` whatever ``a`` is, so one plan skips work the
    vectorised formula does for the rows that need it)."""
    if type(mask) in _S and _get():
        return bool(mask)
    return True


def _all_plain(xs) -> bool:
    for x in xs:
        if type(x) not in _S:
            return False
    return True


def broadcast_shape(*xs) -> tuple:
    """Shape the arguments broadcast to (``np.broadcast(*xs).shape``)."""
    if _get() and _all_plain(xs):
        return ()
    return _np.broadcast(*xs).shape


def broadcast_to(x, shape):
    if shape == () and type(x) in _S and _get():
        return x
    return _np.broadcast_to(x, shape)


def broadcast_arrays(*xs):
    if _get() and _all_plain(xs):
        return list(xs)
    return _np.broadcast_arrays(*xs)


def zeros_like(x, dtype=None):
    if type(x) in _S and _get():
        return _cast(0, dtype) if dtype is not None else type(x)(0)
    return _np.zeros_like(x, dtype=dtype)


def ones_like(x, dtype=None):
    if type(x) in _S and _get():
        return _cast(1, dtype) if dtype is not None else type(x)(1)
    return _np.ones_like(x, dtype=dtype)


def full_like(x, value):
    if type(x) in _S and type(value) in _S and _get():
        return type(x)(value)
    return _np.full_like(x, value)


def zeros(shape, dtype=float):
    if shape == () and _get():
        return _cast(0, dtype)
    return _np.zeros(shape, dtype=dtype)


def ones(shape, dtype=float):
    if shape == () and _get():
        return _cast(1, dtype)
    return _np.ones(shape, dtype=dtype)


# ---- one-plan memo tables: a pure function of objects (model, machine, stack) and numbers, kept per key


def memo(table: dict, key: tuple, owner, compute, *args, also=None, limit: int = 4096):
    """``compute(*args)``, kept in ``table`` under ``key``, which holds the ``id`` of ``owner`` (and of ``also``
    if given: the model, machine or stack the result depends on): the entry keeps them alive, so their ids are
    not reused while cached, and an entry held for other objects is recomputed; a full table (``limit``
    entries) is emptied."""
    hit = table.get(key)
    if hit is None or hit[0] is not owner or hit[1] is not also:
        if len(table) >= limit:
            table.clear()
        hit = table[key] = (owner, also, compute(*args))
    return hit[2]


# ---- distinct rows (array path): a pure element-wise function of a few plan columns, computed once per
# distinct tuple of their values and gathered back. The planner evaluates ~1e5 layouts at once, but a term
# that reads only (pp, vpp) or (tp, cp, micro-batch) sees a few dozen distinct values among them. The
# functions it is used on are element-wise (+ - * /, comparisons, floor/ceil, where), so every element is
# the same double as when computed over all rows (tests/sim/test_fast_paths.py compares the two bit for bit).

DISTINCT_MIN = 64  # below this many rows finding the distinct ones costs more than it saves
DISTINCT = True  # False: compute every row (the reference tests/sim/test_fast_paths.py compares with)


def _column_codes(x):
    """(codes int64, count) for a 1-D column: x - min without sorting when it holds integers in a small
    range (rank counts, micro-batches), else the ranks of its sorted distinct values."""
    if x.dtype.kind == "b":
        return x.astype(_np.int64), 2
    if x.dtype.kind in "iuf":
        lo, hi = x.min(), x.max()
        if math.isfinite(float(lo)) and math.isfinite(float(hi)) and float(hi) - float(lo) < (1 << 20):
            d = x - lo
            ci = d.astype(_np.int64)
            if x.dtype.kind != "f" or _np.array_equal(ci, d):
                span = int(float(hi) - float(lo)) + 1
                if span <= 64:
                    return ci, span
                # a wide range with few values (DP degrees 1 ... 16,384): renumber the values present
                return _renumber(ci, span)
    vals, inv = _np.unique(x, return_inverse=True)
    return inv.reshape(-1).astype(_np.int64, copy=False), int(vals.size)


def _renumber(codes, size: int):
    """(dense codes, count): ``codes`` (int64 in [0, size)) renumbered 0 .. count-1 in order of value,
    through a table of every possible code (no sort)."""
    present = _np.zeros(size, dtype=bool)
    present[codes] = True
    slot = _np.cumsum(present) - 1
    return slot[codes], int(slot[-1]) + 1


def distinct_rows(*cols):
    """``(rep, inv)`` for 1-D columns of one length n: ``rep`` indexes one row of each distinct tuple of
    values (in order of the tuples' codes), ``inv`` (n,) the position in ``rep`` of every row's tuple."""
    n = cols[0].shape[0]
    code, size = None, 1
    for x in cols:
        c, k = _column_codes(x)
        if size * k >= (1 << 62):
            return None
        code, size = (c if code is None else code * k + c), size * k
    if size <= 4 * n + 1024:  # a table of every possible code: no sort
        inv, k = _renumber(code, size)
    else:
        _, inv = _np.unique(code, return_inverse=True)
        inv = inv.reshape(-1)
        k = int(inv.max()) + 1 if n else 0
    rep = _np.empty(k, dtype=_np.int64)
    rep[inv] = _np.arange(n)  # any row of a tuple: they hold the same values
    return rep, inv


def _gather(out, inv, k):
    if isinstance(out, tuple):
        parts = [_gather(o, inv, k) for o in out]
        return out._make(parts) if hasattr(out, "_make") else tuple(parts)
    if _np.ndim(out) == 0:
        return out
    a = _np.asarray(out)
    if a.shape != (k,):
        raise ValueError(f"per_distinct: an output of shape {a.shape} from {k} distinct rows")
    return a[inv]


def per_distinct(fn, cols, *args):
    """``fn(*cols, *args)`` computed on the distinct rows of ``cols`` only and gathered back. ``cols``: plan
    columns (1-D arrays of the rows; other entries, such as scalars, None or 0-d arrays, are passed as they
    are); ``fn`` must be element-wise in them; ``args`` are passed as they are. Outputs: arrays of the rows,
    scalars or nested tuples of them. In scalar mode, or without a column of at least ``DISTINCT_MIN`` rows,
    ``fn`` is called directly."""
    pos = [i for i, c in enumerate(cols) if isinstance(c, _np.ndarray) and c.ndim >= 1]
    if _get() or not pos or not DISTINCT:
        return fn(*cols, *args)
    try:
        arrs = _np.broadcast_arrays(*(cols[i] for i in pos))
    except ValueError:
        return fn(*cols, *args)
    if arrs[0].ndim != 1 or arrs[0].shape[0] < DISTINCT_MIN:
        return fn(*cols, *args)
    found = distinct_rows(*arrs)
    if found is None or 2 * found[0].size > arrs[0].shape[0]:
        return fn(*cols, *args)
    rep, inv = found
    sub = list(cols)
    for i, a in zip(pos, arrs, strict=True):
        sub[i] = a[rep]
    return _gather(fn(*sub, *args), inv, rep.size)

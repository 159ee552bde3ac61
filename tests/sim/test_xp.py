"""``clustertwin.xp`` in scalar mode answers every function it defines on plain numbers exactly as numpy
does on the same values (the step model's one-plan path relies on it), and leaves arrays to numpy."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from clustertwin import xp

NUM = st.one_of(st.floats(-1e12, 1e12, allow_nan=False), st.integers(-10**6, 10**6),
                st.sampled_from([0.0, -0.0, 0.5, 1.5, 2.5, -2.5, 1e-30, 8.0, 128.0]))
POS = st.one_of(st.floats(1e-6, 1e12), st.integers(1, 10**6))


def _same(a, b):
    b = np.asarray(b).item()
    assert type(a) in (float, int, bool), type(a)
    if isinstance(b, float) and math.isnan(b):
        assert math.isnan(a)
    else:
        assert a == b


@settings(max_examples=150, deadline=None)
@given(a=NUM, b=NUM, c=st.booleans(), d=POS)
def test_scalar_mode_equals_numpy(a, b, c, d):
    ref = {
        "where": np.where(c, a, b), "maximum": np.maximum(a, b), "minimum": np.minimum(a, b),
        "clip": np.clip(a, min(b, d), max(b, d)), "logical_not": np.logical_not(c), "ceil": np.ceil(a),
        "floor": np.floor(a), "round": np.round(a), "mod": np.mod(a, d), "floor_divide": np.floor_divide(a, d),
        "isclose": np.isclose(a, b), "isclose_near": np.isclose(a, a * (1 + 1e-7)), "isfinite": np.isfinite(a),
        "asarray": np.asarray(a, dtype=float), "astype": np.asarray(a).astype(np.int64),
        "zeros_like": np.zeros_like(float(a)), "ones_like": np.ones_like(float(a)), "full_like": np.full_like(float(a), d),
        "isin": np.isin(int(d) % 4, [0, 2]), "any": np.any(a), "all": np.all(c),
    }
    with xp.scalar_mode():
        got = {
            "where": xp.where(c, a, b), "maximum": xp.maximum(a, b), "minimum": xp.minimum(a, b),
            "clip": xp.clip(a, min(b, d), max(b, d)), "logical_not": xp.logical_not(c), "ceil": xp.ceil(a),
            "floor": xp.floor(a), "round": xp.round(a), "mod": xp.mod(a, d), "floor_divide": xp.floor_divide(a, d),
            "isclose": xp.isclose(a, b), "isclose_near": xp.isclose(a, a * (1 + 1e-7)), "isfinite": xp.isfinite(a),
            "asarray": xp.asarray(a, dtype=float), "astype": xp.astype(a, np.int64),
            "zeros_like": xp.zeros_like(float(a)), "ones_like": xp.ones_like(float(a)),
            "full_like": xp.full_like(float(a), d), "isin": xp.isin(int(d) % 4, np.asarray([0, 2])),
            "any": xp.any(a), "all": xp.all(c),
        }
        assert xp.ndim(a) == 0 and xp.shape(a) == () and xp.broadcast_shape(a, b, c) == ()
        assert xp.ndim("1f1b") == np.ndim("1f1b") and xp.shape("1f1b") == np.shape("1f1b")
        assert xp.broadcast_to(a, ()) == a and xp.broadcast_arrays(a, b) == [a, b]
    for k, v in ref.items():
        _same(got[k], v)
    # NaN propagates through maximum / minimum as in numpy
    with xp.scalar_mode():
        assert math.isnan(xp.maximum(math.nan, a)) and math.isnan(xp.minimum(a, math.nan))


def test_outside_scalar_mode_and_for_arrays_it_is_numpy():
    assert isinstance(xp.maximum(1.0, 2.0), np.floating)  # plain numbers outside scalar mode: numpy
    assert isinstance(xp.asarray(3, dtype=float), np.ndarray)
    with xp.scalar_mode():
        out = xp.where(np.array([True, False]), 1.0, 2.0)  # an array argument: numpy
        assert out.tolist() == [1.0, 2.0]
        assert xp.ndarray is np.ndarray and xp.unique is np.unique  # names it does not define: numpy's
        assert xp.in_scalar_mode()
        assert xp.needed(True) and not xp.needed(False) and xp.needed(np.array([False]))
    assert not xp.in_scalar_mode()
    assert xp.needed(False)  # outside scalar mode every branch is computed, as numpy does

"""Placement of the parallel groups on devices (Megatron-LM rank order).

Ranks are numbered with TP innermost, then CP, then DP, then PP outermost (Megatron ``order="tp-cp-ep-dp-pp"``);
expert layers regroup the ``tp*dp*cp`` ranks of a stage as ETP innermost then EP (contiguous when etp = 1).
Consecutive ranks fill a scale-up domain first, so the innermost groups stay on the scale-up fabric.

For a group of ``size`` ranks spaced ``stride`` apart, ``floor(domain / stride)`` of them (at least 1, at
most ``size``) share one scale-up domain; the group spans ``ceil(size / that)`` domains. All functions are
numpy-vectorised over plan degrees.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from . import xp as np  # numpy, or plain numbers for one plan (clustertwin/xp.py)

_PLAIN = np._S  # plain numbers (clustertwin/xp.py)


def ranks_per_domain(size, stride, domain: int):
    """Members of a group (``size`` ranks ``stride`` apart) that share one scale-up domain."""
    if type(size) in _PLAIN and type(stride) in _PLAIN and type(domain) in _PLAIN and np.in_scalar_mode():
        # one plan: the xp calls below without their per-call type checks (floor, then xp's clip)
        return np.clip_plain(float(math.floor(domain / float(stride))), 1.0, float(size))
    size = np.asarray(size, dtype=float)
    stride = np.asarray(stride, dtype=float)
    return np.clip(np.floor(domain / stride), 1.0, size)


def domains_spanned(size, stride, domain: int):
    return np.ceil(np.asarray(size, dtype=float) / ranks_per_domain(size, stride, domain))


@dataclass(frozen=True, slots=True)
class GroupLayout:
    """Size, stride and ranks per scale-up domain of every parallel group (arrays or scalars)."""

    tp: tuple
    cp: tuple
    dp: tuple  # dense gradient group: dp*cp ranks, stride tp
    ep: tuple
    edp: tuple
    pp: tuple

    def as_dict(self) -> dict[str, dict[str, float]]:
        out = {}
        for name in ("tp", "cp", "dp", "ep", "edp", "pp"):
            size, stride, r = getattr(self, name)
            out[name] = {"size": size, "stride": stride, "ranks_per_domain": r,
                         "domains": np.ceil(np.asarray(size, dtype=float) / r)}
        return out


def group_layout(*, tp, pp, dp, cp=1, ep=1, etp=1, domain: int) -> GroupLayout:
    t, p, d, c, e, et = (np.asarray(x, dtype=float) for x in (tp, pp, dp, cp, ep, etp))

    def g(size, stride):
        return (size, stride, ranks_per_domain(size, stride, domain))

    edp = np.maximum(1.0, t * d * c / (e * et))
    return GroupLayout(tp=g(t, 1.0), cp=g(c, t), dp=g(d * c, t), ep=g(e, et), edp=g(edp, e * et), pp=g(p, t * c * d))

"""EP all-to-all of one MoE layer, one micro-batch: dispatch + combine in the forward, mirrored in the
backward.

Interface: ``ep_comm(st, a2a_bytes) -> (fwd_s, bwd_s)`` for one MoE layer (``a2a_bytes`` from
``moe.moe_layer``); zero for a dense model. EP ranks are contiguous after expert-TP (``etp``), so
``ranks_per_domain(ep, etp, domain)`` of them share a scale-up domain. No overlap with compute is
modelled here (the composer exposes it whole).
"""

from __future__ import annotations

import numpy as np

from ...placement import ranks_per_domain
from ..comm import ALL_TO_ALL, collective_time
from .stage import Stage


def ep_comm(st: Stage, a2a_bytes):
    if not st.model.is_moe:
        z = np.zeros_like(st.tok)
        return z, z
    r_ep = ranks_per_domain(st.e, st.etp, st.hw.domain)
    a2a = collective_time(ALL_TO_ALL, a2a_bytes, st.e, r_ep, st.hw)
    return 2.0 * a2a, 2.0 * a2a

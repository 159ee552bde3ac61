"""Pipeline point-to-point transfer of one micro-batch's boundary activation between adjacent stages.

Each TP rank sends 1/t of the activation (the sequence-parallel shard, or Megatron's scatter/gather
optimisation without SP: Narayanan et al. SC'21 §4.1) and re-gathers it over the scale-up domain. PP is
the outermost group (stride t*c*d), so adjacent stages share a domain only when it is that large.

Interface: ``pp_p2p(st) -> (time_s, bytes)`` of one transfer; how many are exposed is the engine's.
"""

from __future__ import annotations

from ... import xp as np  # numpy, or plain numbers for one plan (clustertwin/xp.py)
from ...placement import ranks_per_domain
from ..comm import SEND_RECV, collective_time
from .stage import Stage


def pp_p2p(st: Stage):
    hw, t, p = st.hw, st.t, st.p
    pp_bytes = st.tok * float(st.model.hidden_size) * st.act_bytes / t
    r_pp = ranks_per_domain(p, t * st.c * st.d, hw.domain)
    return collective_time(SEND_RECV, pp_bytes, np.where(p > 1, 2.0, 1.0), np.where(r_pp >= p, 2.0, 1.0), hw), pp_bytes

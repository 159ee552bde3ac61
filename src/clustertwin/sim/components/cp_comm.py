"""Context-parallel K,V exchange of one layer, one micro-batch.

``cp_comm="p2p"`` (TE ring): c-1 send/recv hops of the local K,V chunk in the forward, K,V + dK,dV in
the backward, overlappable with the attention core; ``"allgather"``: all-gather of K,V (forward) and
reduce-scatter of dK,dV (backward), exposed. CP ranks sit outside TP (stride t).

PyTorch's context_parallel (``st.cp_torch_ring``, torchtitan; torch.distributed.tensor.experimental
_attention.py) runs its ring loop whatever the rotate method: with "allgather" (torchtitan's default
context_parallel_rotate_method) the forward all-gathers K,V once, asynchronously, and waits for it only after
the first chunk's SDPA; the backward all-gathers K,V again and passes the FP32 dK,dV accumulators one hop
per step (``_AllToAllRotater``, waited for a step later). Both are priced overlappable with the attention core,
as the TE ring.

Interface: ``cp_comm(st) -> (fwd_s, bwd_s, overlappable)`` (``overlappable`` 1.0 for the ring).
"""

from __future__ import annotations

from ... import xp as np  # numpy, or plain numbers for one plan (clustertwin/xp.py)
from ...placement import ranks_per_domain
from ..comm import ALL_GATHER, REDUCE_SCATTER, SEND_RECV, collective_time
from .attention import kv_elems_per_token
from .stage import Stage


def cp_comm(st: Stage):
    hw, c = st.hw, st.c
    kv_bytes = st.b * (st.s / c) * kv_elems_per_token(st) * st.act_bytes
    r_cp = ranks_per_domain(c, st.t, hw.domain)
    if st.cp_torch_ring:
        ag_kv = collective_time(ALL_GATHER, kv_bytes * c, c, r_cp, hw)
        hop32 = collective_time(SEND_RECV, kv_bytes * 4.0 / st.act_bytes, np.where(c > 1, 2.0, 1.0),
                                np.where(r_cp >= c, 2.0, 1.0), hw)
        if st.cp_comm == "allgather":
            return ag_kv, ag_kv + (c - 1) * hop32, np.ones_like(st.tok)
        hop = collective_time(SEND_RECV, kv_bytes, np.where(c > 1, 2.0, 1.0), np.where(r_cp >= c, 2.0, 1.0), hw)
        return (c - 1) * hop, (c - 1) * (hop + hop32), np.ones_like(st.tok)
    if st.cp_comm == "allgather":
        ag_kv = collective_time(ALL_GATHER, kv_bytes * c, c, r_cp, hw)
        rs_kv = collective_time(REDUCE_SCATTER, kv_bytes * c, c, r_cp, hw)
        return ag_kv, ag_kv + rs_kv, np.zeros_like(st.tok)
    hop = collective_time(SEND_RECV, kv_bytes, np.where(c > 1, 2.0, 1.0), np.where(r_cp >= c, 2.0, 1.0), hw)
    return (c - 1) * hop, 2.0 * (c - 1) * hop, np.ones_like(st.tok)

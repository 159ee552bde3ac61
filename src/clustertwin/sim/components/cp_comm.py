"""Context-parallel K,V exchange of one layer, one micro-batch.

``cp_comm="p2p"`` (TE ring): c-1 send/recv hops of the local K,V chunk in the forward, K,V + dK,dV in
the backward, overlappable with the attention core; ``"allgather"``: all-gather of K,V (forward) and
reduce-scatter of dK,dV (backward), exposed. CP ranks sit outside TP (stride t).

PyTorch's context_parallel (``st.cp_torch_ring``, torchtitan; torch.distributed.tensor.experimental
_attention.py) runs its ring loop whatever the rotate method: with "allgather" (torchtitan's default
context_parallel_rotate_method) the forward all-gathers K,V once, asynchronously, and waits for it only after
the first chunk's SDPA; the backward all-gathers K,V again and passes the FP32 dK,dV accumulators one hop
per step (``_AllToAllRotater``, waited for a step later). Both are priced overlappable with the attention core,
as the TE ring, but the ring loop can only hide each exchange behind the one step whose SDPA runs between
its issue and its wait (``torch_ring_waits``): what a step's exchange takes beyond that step's SDPA is a wait
on the compute stream, inside the attention op.

Interface: ``cp_comm(st) -> (fwd_s, bwd_s, overlappable)`` (``overlappable`` 1.0 for the ring);
``torch_ring_waits(st, attn_fwd_s, attn_bwd_s) -> (fwd_wait_s, bwd_wait_s)`` for PyTorch's ring loop.
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
        kv, hop32 = _torch_ring_exchanges(st)
        if st.cp_comm == "allgather":
            return kv, kv + (c - 1) * hop32, np.ones_like(st.tok)
        return (c - 1) * kv, (c - 1) * (kv + hop32), np.ones_like(st.tok)
    if st.cp_comm == "allgather":
        ag_kv = collective_time(ALL_GATHER, kv_bytes * c, c, r_cp, hw)
        rs_kv = collective_time(REDUCE_SCATTER, kv_bytes * c, c, r_cp, hw)
        return ag_kv, ag_kv + rs_kv, np.zeros_like(st.tok)
    hop = collective_time(SEND_RECV, kv_bytes, np.where(c > 1, 2.0, 1.0), np.where(r_cp >= c, 2.0, 1.0), hw)
    return (c - 1) * hop, 2.0 * (c - 1) * hop, np.ones_like(st.tok)


def torch_ring_waits(st: Stage, attn_fwd, attn_bwd):
    """Compute-stream waits of PyTorch's context_parallel ring loop (``st.cp_torch_ring``) per layer and
    micro-batch, forward and backward, given the attention core's time of each pass (all c steps).

    torch/distributed/tensor/experimental/_attention.py ``_templated_ring_attention(_backward)``: step i's SDPA
    runs on the K,V block that ``rotater.next_buffer()`` waited for at the start of step i, and each step is
    1/c of the pass (causal load balancing: the diagonal step on the whole local chunk, every other step on
    half of Q or half of K,V). ``_AllGatherRotater`` issues the K,V all-gather once, before step 0, and waits
    for it at step 1: only step 0's SDPA hides it (forward; again in the backward). ``_AllToAllRotater``
    (``cp_comm = "p2p"``) sends one block per step, waited for a step later. In the backward the FP32 dK,dV
    accumulators travel one hop per step through ``dkv_rotater`` (all-to-all), each waited for after the
    next step's SDPA, and the last hop is waited for after the loop, with no SDPA left to hide it."""
    c = st.c
    kv, hop32 = _torch_ring_exchanges(st)
    cc = np.maximum(c, 1.0)
    step_f, step_b = attn_fwd / cc, attn_bwd / cc
    dkv = hop32 + np.maximum(cc - 2.0, 0.0) * np.maximum(0.0, hop32 - step_b)
    if st.cp_comm == "allgather":
        wait_f = np.maximum(0.0, kv - step_f)
        wait_b = np.maximum(0.0, kv - step_b) + dkv
    else:
        wait_f = (cc - 1.0) * np.maximum(0.0, kv - step_f)
        wait_b = (cc - 1.0) * np.maximum(0.0, kv - step_b) + dkv
    on = c > 1
    return np.where(on, wait_f, 0.0), np.where(on, wait_b, 0.0)


def _torch_ring_exchanges(st: Stage):
    """(K,V exchange, FP32 dK,dV hop) of PyTorch's ring loop, seconds: the exchange is the one K,V all-gather
    (``cp_comm = "allgather"``, ``_AllGatherRotater``) or one K,V block's hop (``_AllToAllRotater``); the hop
    carries one block's dK,dV accumulators in FP32 (``dkv_rotater``)."""
    hw, c = st.hw, st.c
    kv_bytes = st.b * (st.s / c) * kv_elems_per_token(st) * st.act_bytes
    r_cp = ranks_per_domain(c, st.t, hw.domain)
    two, intra = np.where(c > 1, 2.0, 1.0), np.where(r_cp >= c, 2.0, 1.0)
    hop32 = collective_time(SEND_RECV, kv_bytes * 4.0 / st.act_bytes, two, intra, hw)
    if st.cp_comm == "allgather":
        return collective_time(ALL_GATHER, kv_bytes * c, c, r_cp, hw), hop32
    return collective_time(SEND_RECV, kv_bytes, two, intra, hw), hop32

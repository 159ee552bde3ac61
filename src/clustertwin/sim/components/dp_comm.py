"""Data-parallel communication of one step: gradient reduce-scatter / all-reduce and the parameter
all-gather (distributed optimizer, ZeRO 1/2), for dense parameters over the DP x CP group and for expert
parameters over the expert-data-parallel group (tp*dp*cp/(ep*etp)); ZeRO-3 / FSDP per-micro-batch
gathers and reduce-scatters. Sizes per rank come from ``workload.memory.stage_params`` (parameters of
one pipeline stage after TP/EP sharding).

Interface: ``dp_comm(st) -> DPComm`` with per-step collective times (full size, before overlap):
``dp_rs_s dp_ag_s dp_ar_s`` (dense), ``edp_rs_s edp_ag_s edp_ar_s`` (experts), ``dp_bucket_s`` (one
gradient bucket, the part that can never hide: max(40M, 1M x ranks) parameters), ``fsdp_mb_s`` (ZeRO-3,
per micro-batch), ``dp_grad_bytes`` and the stage's ``dense_params``/``expert_params``. Gradients travel
in ``grad_reduce_bytes`` per element (stack option), parameters in BF16 (``act_bytes``: FP32 in a TF32 /
FP32 step). Which part is exposed (overlap
with the last backward / next forward, ZeRO-2 per-micro-batch reduce-scatters) is decided by the engine
(``sim.analytical._compose``; the event engine schedules them).
"""

from __future__ import annotations

from typing import NamedTuple

from ... import xp as np  # numpy, or plain numbers for one plan (clustertwin/xp.py)
from ...placement import ranks_per_domain
from ...workload.memory import stage_params
from ..comm import ALL_GATHER, ALL_REDUCE, REDUCE_SCATTER, collective_time
from .stage import Stage


class DPComm(NamedTuple):
    dp_rs_s: np.ndarray
    dp_ag_s: np.ndarray
    dp_ar_s: np.ndarray
    dp_bucket_s: np.ndarray
    edp_rs_s: np.ndarray
    edp_ag_s: np.ndarray
    edp_ar_s: np.ndarray
    fsdp_mb_s: np.ndarray
    dp_grad_bytes: np.ndarray
    dense_params: np.ndarray
    expert_params: np.ndarray
    n_dp: np.ndarray  # ranks sharing dense parameters (dp*cp)
    n_edp: np.ndarray  # ranks sharing expert parameters
    fsdp_ag_s: np.ndarray  # ZeRO-3 / FSDP: one parameter all-gather of the stage (dense + experts)
    fsdp_rs_s: np.ndarray  # ZeRO-3 / FSDP: one gradient reduce-scatter of the stage
    fsdp_bwd_gathers: np.ndarray  # gathers in the backward pass: 1, or 2 when the recompute forward re-gathers


def dp_comm(st: Stage) -> DPComm:
    hw, t, d, c, e, etp = st.hw, st.t, st.d, st.c, st.e, st.etp
    dense_p, expert_p = stage_params(st.model, t, st.p, e, etp, st.v, st.sched)
    gbytes = st.grad_reduce_bytes
    wb = st.act_bytes  # parameters travel in BF16 (FP32 in a TF32 / FP32 step)
    n_dp = d * c
    r_dp = ranks_per_domain(n_dp, t, hw.domain)
    # ZeRO-3 2021 (stack fsdp_flat_ring): every ring hop crosses the network, one NIC's rate per GPU
    r_fs = np.minimum(r_dp, 1.0) if st.fsdp_flat else r_dp
    dp_rs = collective_time(REDUCE_SCATTER, dense_p * gbytes, n_dp, r_dp, hw)
    dp_ag = collective_time(ALL_GATHER, dense_p * wb, n_dp, r_dp, hw)
    dp_ar = collective_time(ALL_REDUCE, dense_p * gbytes, n_dp, r_dp, hw)
    bucket_params = np.minimum(dense_p, np.maximum(40e6, 1e6 * n_dp))
    dp_bucket = collective_time(REDUCE_SCATTER, bucket_params * gbytes, n_dp, r_dp, hw)
    n_edp = np.maximum(1.0, t * d * c / (e * etp))
    r_edp = ranks_per_domain(n_edp, e * etp, hw.domain)
    edp_rs = collective_time(REDUCE_SCATTER, expert_p * gbytes, n_edp, r_edp, hw)
    edp_ag = collective_time(ALL_GATHER, expert_p * wb, n_edp, r_edp, hw)
    edp_ar = collective_time(ALL_REDUCE, expert_p * gbytes, n_edp, r_edp, hw)
    # FSDP / ZeRO-3: per micro-batch all-gather of params (fwd and bwd) and reduce-scatter of grads;
    # DeepSpeed ZeRO-3 gathers again for the recompute forward of full activation checkpointing (its
    # hooks fire per submodule forward); PyTorch FSDP checkpoints inside the unit, so backward's gather
    # serves the recompute too
    if st.fsdp_flat:
        fs_rs = collective_time(REDUCE_SCATTER, dense_p * gbytes, n_dp, r_fs, hw)
        fs_ag = collective_time(ALL_GATHER, dense_p * wb, n_dp, r_fs, hw)
    else:
        fs_rs, fs_ag = dp_rs, dp_ag
    gathers = 2.0 + (np.where(st.rc == 2, 1.0, 0.0) if st.fsdp_recompute_gather else 0.0)
    fsdp_mb = np.where(st.zero >= 3, gathers * (fs_ag + edp_ag) + fs_rs + edp_rs, 0.0)
    return DPComm(dp_rs, dp_ag, dp_ar, dp_bucket, edp_rs, edp_ag, edp_ar, fsdp_mb, dense_p * gbytes,
                  dense_p, expert_p, n_dp, n_edp, fs_ag + edp_ag, fs_rs + edp_rs, np.asarray(gathers - 1.0, dtype=float))

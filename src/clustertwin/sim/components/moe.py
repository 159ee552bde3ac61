"""MoE layer compute of one micro-batch on one rank: router, token permutation, expert GEMMs, shared
experts. The EP all-to-all (dispatch + combine) is priced in ``ep_comm.py`` from the bytes given here.

Interface: ``moe_layer(st) -> MoELayer`` with ``fwd_s``/``bwd_s`` (router + routed + shared expert
GEMMs), ``mem_fwd_s``/``mem_bwd_s`` (permute/unpermute copies and the expert activation, element-wise)
and ``a2a_bytes`` (bytes each rank sends in one dispatch all-to-all). All zero for a dense model. The
composer (``sim.costs.stage_costs``) weights these by the share of MoE layers.

Model: balanced routing; tokens entering the layer on a rank are ``tok/t`` (SP/TP-sharded); each of the
``E/ep`` local experts gets ``tok/t * k * ep * etp / E`` tokens and runs its GEMMs as one batched GEMM.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..kernels import gemm_train_time, mem_time
from .stage import Stage


class MoELayer(NamedTuple):
    fwd_s: np.ndarray
    bwd_s: np.ndarray
    mem_fwd_s: np.ndarray
    mem_bwd_s: np.ndarray
    a2a_bytes: np.ndarray


def moe_layer(st: Stage) -> MoELayer:
    model, hw, tok = st.model, st.hw, st.tok
    if not model.is_moe:
        z = np.zeros_like(tok)
        return MoELayer(z, z, z, z, z)
    ib, t, e, etp_f = st.in_bytes, st.t, st.e, st.etp
    h = float(model.hidden_size)
    mats = 2.0 if model.swiglu else 1.0
    E, k, fe = float(model.num_experts), float(model.moe_topk), float(model.moe_ffn_hidden_size)
    tok_rank = tok / t  # tokens entering the MoE layer on this rank (SP / TP-sharded)
    local_experts = E / e
    m_exp = tok_rank * k * e * etp_f / E  # tokens per local expert (balanced routing)
    uf, ub = gemm_train_time(hw, m_exp, mats * fe / etp_f, h, local_experts, in_bytes=ib)
    df, db = gemm_train_time(hw, m_exp, h, fe / etp_f, local_experts, in_bytes=ib)
    moe_f, moe_b = uf + df, ub + db
    if model.num_shared_experts:
        fsh = fe * model.num_shared_experts
        sf, sb = gemm_train_time(hw, tok, mats * fsh / t, h, in_bytes=ib)
        sf2, sb2 = gemm_train_time(hw, tok, h, fsh / t, in_bytes=ib)
        moe_f, moe_b = moe_f + sf + sf2, moe_b + sb + sb2
    rf, rb = gemm_train_time(hw, tok_rank, E, h, in_bytes=2.0)  # router in BF16
    moe_f, moe_b = moe_f + rf, moe_b + rb
    # permute + unpermute copies (k copies of h per token), activation of the expert MLP
    perm = 2.0 * 2.0 * 2.0 * k * h * tok_rank
    act = (3.0 if model.swiglu else 2.0) * 2.0 * fe * k * tok_rank
    return MoELayer(moe_f, moe_b, mem_time(hw, perm + act, 8), mem_time(hw, 2.0 * (perm + act), 12),
                    tok_rank * k * h * 2.0)

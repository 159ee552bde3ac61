"""EP all-to-all of one MoE layer, one micro-batch: dispatch + combine in the forward, mirrored in the
backward (4 all-to-alls of the same size, MODELLING.md §3).

Interface: ``ep_comm(st, a2a_bytes) -> (fwd_s, bwd_s)`` for one MoE layer (``a2a_bytes`` = T*k*h*2,
the rows one rank dispatches, from ``moe.moe_layer``); zero for a dense model. EP ranks are contiguous
after expert-TP (``etp``), so ``r = ranks_per_domain(ep, etp, domain)`` of them share a scale-up domain
and the group spans ``n_dom = ep / r`` domains. No overlap with compute is modelled here (the composer
exposes it whole).

* EP inside one scale-up domain: a direct all-to-all of the dispatched rows over NVLink (each rank keeps
  the 1/ep share routed to its own experts).
* EP across domains: the hierarchical, token-deduplicating dispatch of DeepEP / HybridEP (Megatron-Core's
  ``flex`` dispatcher, the one its MoE guide recommends for cross-node EP; DeepSeek-V3 report §3.2): a
  token crosses the scale-out network once per remote domain that holds at least one of its k experts
  (to the peer GPU on the same rail), and is forwarded to the expert GPUs over the scale-up link. With
  experts spread evenly over the domains and balanced top-k routing, a token hits a given remote domain
  with probability 1 - C(E - E/n_dom, k) / C(E, k), so the scale-out bytes per rank are
  T * h * 2 * (n_dom - 1) * that probability instead of T * k * h * 2 * (ep - r) / ep; the scale-up link
  carries the intra-domain copies and the forwarded ones, T * k * h * 2 * (ep - 1) / ep. The two tiers
  run concurrently (the slower one bounds the time), each priced by ``collective_time`` as an
  all-to-all among the ranks of its tier.
* DeepSpeed-MoE (stack ``moe_experts_impl = "deepspeed-einsum"``): the capacity buffers go as one direct
  all-to-all over the EP group (deepspeed/moe/sharded_moe.py ``_AllToAll``), across domains too.
"""

from __future__ import annotations

from ... import xp as np  # numpy, or plain numbers for one plan (clustertwin/xp.py)
from ...placement import ranks_per_domain
from ..comm import ALL_TO_ALL, collective_time
from .stage import Stage


def remote_domain_hit_probability(num_experts: float, topk: float, n_dom):
    """P(a token's top-k experts include at least one of the E/n_dom experts of a given other domain)
    under uniform routing without replacement: 1 - prod_{i<k} (E - E/n_dom - i) / (E - i)."""
    n_dom = np.maximum(np.asarray(n_dom, dtype=float), 1.0)
    other = num_experts - num_experts / n_dom
    miss = np.ones_like(n_dom)
    for i in range(int(topk)):
        miss = miss * np.clip((other - i) / (num_experts - i), 0.0, 1.0)
    return np.where(n_dom > 1.0, 1.0 - miss, 0.0)


def ep_comm(st: Stage, a2a_bytes):
    model, hw = st.model, st.hw
    if not model.is_moe:
        z = np.zeros_like(st.tok)
        return z, z
    e = st.e
    r_ep = ranks_per_domain(e, st.etp, hw.domain)
    n_dom = np.maximum(np.round(e / r_ep), 1.0)
    direct = collective_time(ALL_TO_ALL, a2a_bytes, e, r_ep, hw)
    # hierarchical dispatch across domains (see module docstring)
    k, E = float(model.moe_topk), float(model.num_experts)
    row_bytes = a2a_bytes / k  # one token's h in BF16
    p_hit = remote_domain_hit_probability(E, k, n_dom)
    net_sent = row_bytes * (n_dom - 1.0) * p_hit  # per rank, over its NIC share
    up_sent = a2a_bytes * (e - 1.0) / np.maximum(e, 1.0)  # intra-domain copies + forwarded arrivals
    # an all-to-all of size S among n ranks sends (n-1)/n S per rank: invert that for each tier
    t_net = collective_time(ALL_TO_ALL, net_sent * n_dom / np.maximum(n_dom - 1.0, 1.0), n_dom, 1.0, hw)
    t_up = collective_time(ALL_TO_ALL, up_sent * r_ep / np.maximum(r_ep - 1.0, 1.0), r_ep, r_ep, hw)
    hier = np.maximum(t_net, t_up)
    # DeepSpeed-MoE sends its [E, C, h] capacity buffers as one plain all-to-all (no deduplication)
    a2a = direct if st.moe_einsum else np.where(n_dom > 1.5, np.minimum(direct, hier), direct)
    return 2.0 * a2a, 2.0 * a2a

"""Expert-parallel all-to-all and pipeline point-to-point from the same model as the other collectives.

The step model's EP (MoE dispatch / combine) and PP (activation / gradient hand-off) components call
these, so a token exchange and an all-reduce of the same size on the same links cost what the
validated collective model says, message-size effects included:

* latency: NCCL's grouped send/recv — one NVLink (or, across domains, network) step plus a per-peer
  issue cost (NVLink peers: ``a2a_per_peer_us``; network peers: NCCL's proxy overhead per send, 1 µs,
  tuning.cc), with the link technology's latency scale inside one domain;
* bandwidth: (g−1)/n of the buffer over the scale-up link and (n−g)/n over the rank's NIC share (PXN
  aggregates the network peers to d−1 and adds the inter bytes to NVLink), at the best protocol's
  payload efficiency (LL 0.5, LL128 0.92, Simple 1) and with the link technology's pipeline fill, so
  small expert messages run at a fraction of the link rate and large ones approach it.
"""

from __future__ import annotations

import numpy as np

from ..hardware import ScaleOutTech, SystemSpec
from .core import collective_time


def ep_alltoall_time(bytes_per_rank, ep, ranks_per_domain, system: SystemSpec, scaleout: ScaleOutTech,
                     catalog=None, algo: str = "auto"):
    """Seconds of one MoE dispatch (or combine): an all-to-all in which every one of the ``ep`` ranks
    sends ``bytes_per_rank`` in total, split evenly over the ep ranks (nccl-tests alltoall ``size``).
    ``ranks_per_domain``: EP ranks inside one scale-up domain. Broadcasts over arrays."""
    return collective_time("all_to_all", bytes_per_rank, ep, ranks_per_domain, system, scaleout, algo, catalog)


def pp_p2p_time(nbytes, crosses_domain, system: SystemSpec, scaleout: ScaleOutTech, catalog=None):
    """Seconds to hand ``nbytes`` from one pipeline stage to the next (send/recv). ``crosses_domain``
    (bool or array): the two stages sit in different scale-up domains, so the transfer takes the NIC."""
    g = np.where(np.asarray(crosses_domain, dtype=bool), 1.0, 2.0)
    return collective_time("send_recv", nbytes, 2.0, g, system, scaleout, "auto", catalog)


def effective_bandwidth(op: str, nbytes, n, ranks_per_domain, system: SystemSpec, scaleout: ScaleOutTech, catalog=None):
    """Bytes/s an ``op`` of ``nbytes`` achieves (``nbytes / time``): the message-size-dependent
    efficiency the model implies, for reports and for components that budget bandwidth."""
    t = collective_time(op, nbytes, n, ranks_per_domain, system, scaleout, "auto", catalog)
    return np.asarray(nbytes, dtype=float) / np.maximum(t, 1e-30)

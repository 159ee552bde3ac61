"""Contention-aware collectives: the scale-out part from the flow-level fabric simulator.

``--network flow`` adds to the NCCL-style time of this package what contention on the real
scale-out network costs on top of it:

    t_flow(S) = t_analytical(S) + max(0, T_fabric(S) - T_uncontended(S))

``T_fabric`` is ``clustertwin.fabric.flow_collective_time``: the inter-domain flows of the collective
(the rail rings of a hierarchical all-reduce / all-gather / reduce-scatter, or the all-to-all domain
shifts) routed over the built topology (ECMP / adaptive / spraying, failed or degraded links,
oversubscription) and sharing links by max-min fairness. ``T_uncontended`` is the same flows limited
only by their NICs (a non-blocking network), with the same protocol efficiency and per-step latency.
So on an uncontended fabric the two network models agree, and contention can only add time
(the property tested in tests/collectives). Under max-min sharing every flow scales with the message,
so both terms are affine in the size: they are simulated at two sizes and interpolated exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from ..hardware import ScaleOutTech, SystemSpec, resolve_hardware
from .core import collective_time, normalize_op

FLOW_OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
NETWORKS = ("analytical", "flow")


def _uncontended_s(op: str, size: float, n: int, g: int, nic_bw: float, eta: float, alpha: float) -> float:
    """The same phases as the fabric simulator, limited only by each rank's NIC (both directions)."""
    from ..fabric import collective_phases

    total = 0.0
    steps = 0.0
    for ph in collective_phases(op, size, n, g, max_phases=10**9):
        out_b = np.bincount(ph.src, weights=ph.size, minlength=n).max()
        in_b = np.bincount(ph.dst, weights=ph.size, minlength=n).max()
        total += ph.repeat * max(out_b, in_b) / nic_bw
        steps += ph.repeat
    return total / eta + steps * alpha


_AFFINE_CACHE: dict[tuple, tuple[float, float, SystemSpec, ScaleOutTech]] = {}


def _penalty_affine(op: str, n: int, g: int, system: SystemSpec, scaleout: ScaleOutTech, routing: str, seed: int,
                    topology: tuple) -> tuple[float, float]:
    """(a, b) with penalty(S) = max(0, a + b*S): the flow model is affine in the message size.

    Cached per process (specs hold dicts, so the key uses their identity and keeps them alive)."""
    key = (op, n, g, id(system), id(scaleout), routing, seed, repr(topology))
    hit = _AFFINE_CACHE.get(key)
    if hit is not None:
        return hit[0], hit[1]
    a, b = _penalty_affine_uncached(op, n, g, system, scaleout, routing, seed, topology)
    if len(_AFFINE_CACHE) > 1024:
        _AFFINE_CACHE.clear()
    _AFFINE_CACHE[key] = (a, b, system, scaleout)
    return a, b


def _penalty_affine_uncached(op: str, n: int, g: int, system: SystemSpec, scaleout: ScaleOutTech, routing: str,
                             seed: int, topology: tuple) -> tuple[float, float]:
    from ..fabric import flow_collective_time, make_fabric

    topo = dict(topology)
    fab = make_fabric(system, scaleout, (n // g) * system.devices_per_domain,
                      **{k: v for k, v in topo.items() if k in ("topology", "tiers", "oversubscription", "radix")})
    hops = 2 * fab.topo.shape.tiers - 1
    alpha = 2 * fab.nic_latency_s + hops * fab.hop_latency_s
    nic_bw = resolve_hardware(system, scaleout).scaleout_bw_per_device
    pen = []
    for s in (float(1 << 30), float(1 << 31)):
        t_fab = flow_collective_time(op, s, n, g, system, scaleout, routing=routing, seed=seed, **dict(topo))
        pen.append(t_fab - _uncontended_s(op, s, n, g, nic_bw, fab.protocol_efficiency, alpha))
    b = (pen[1] - pen[0]) / float(1 << 30)
    return pen[0] - b * float(1 << 30), b


def contention_penalty(op: str, sizes, n_ranks: int, ranks_per_domain: int, system: SystemSpec,
                       scaleout: ScaleOutTech, *, routing: str = "ecmp", seed: int = 0, **topology) -> np.ndarray:
    """Seconds that contention on the scale-out network adds, per size (>= 0; 0 inside one domain)."""
    op = normalize_op(op)
    if op not in FLOW_OPS:
        raise InputError(f"--network flow does not model {op}", hint=f"use one of {', '.join(FLOW_OPS)}, or --network analytical")
    S = np.atleast_1d(np.asarray(sizes, dtype=float))
    n, g = int(n_ranks), int(ranks_per_domain)
    if n <= g:
        return np.zeros_like(S)
    a, b = _penalty_affine(op, n, g, system, scaleout, routing, int(seed), tuple(sorted(topology.items(), key=lambda kv: kv[0])))
    return np.where(S > 0, np.maximum(0.0, a + b * S), 0.0)


@dataclass(frozen=True, slots=True)
class FlowNetwork:
    """The ``--network flow`` model for the step estimators: every collective the step issues gets the
    contention penalty of its group on the scale-out fabric.

    A group with r ranks per domain shares its domains with k = domain/r sibling groups that run the
    same collective at the same time (the DP groups of the other TP ranks, the EP groups of the other
    pipeline ranks ...), so the k replicas are simulated together: n*k ranks, r*k per domain, the same
    bytes per flow. Groups in other domains (other pipeline stages) are not simulated at the same time,
    point-to-point sends and groups inside one domain get no penalty (docs/fabric.md).
    """

    routing: str = "ecmp"
    seed: int = 0
    topology: tuple = ()  # sorted (key, value) items: topology, tiers, oversubscription, faults ...

    def penalty(self, op: str, size, n, r, system: SystemSpec, scaleout: ScaleOutTech) -> np.ndarray:
        op = normalize_op(op)
        S, N, R = np.broadcast_arrays(np.asarray(size, dtype=float), np.asarray(n), np.asarray(r))
        out = np.zeros(S.shape)
        if op not in FLOW_OPS:
            return out
        N = N.astype(np.int64)
        R = np.clip(R.astype(np.int64), 1, None)
        cross = (N > R) & (N % R == 0) & (S > 0)
        dom = system.devices_per_domain
        for n_i, r_i in {(int(a), int(b)) for a, b in zip(N[cross], R[cross], strict=True)}:
            m = cross & (N == n_i) & (R == r_i)
            k = dom // r_i if dom % r_i == 0 else 1
            out[m] = contention_penalty(op, S[m] * k, n_i * k, r_i * k, system, scaleout, routing=self.routing,
                                        seed=self.seed, **dict(self.topology))
        return out


def flow_collective_times(op: str, sizes, n_ranks: int, ranks_per_domain: int, system: SystemSpec,
                          scaleout: ScaleOutTech, *, routing: str = "ecmp", seed: int = 0, algo: str = "auto",
                          catalog=None, **topology) -> np.ndarray:
    """Seconds per size with ``--network flow``: the analytical time plus the contention penalty."""
    S = np.atleast_1d(np.asarray(sizes, dtype=float))
    base = np.asarray(collective_time(op, S, n_ranks, ranks_per_domain, system, scaleout, algo=algo, catalog=catalog),
                      dtype=float)
    return base + contention_penalty(op, S, n_ranks, ranks_per_domain, system, scaleout, routing=routing, seed=seed,
                                     **topology)

"""Public collective-cost API: array-friendly ``collective_time`` and scalar ``estimate_collective``."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InputError, UnknownNameError
from ..hardware import ScaleOutTech, SystemSpec
from ..registry import Registry
from . import model as M
from .params import PROTOCOLS, CollectiveParams, resolve_params

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce", "send_recv")

# Aliases users type (nccl-tests binary names, NCCL enum names, camel case).
_OP_ALIASES = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "reducescatter": "reduce_scatter",
    "alltoall": "all_to_all",
    "a2a": "all_to_all",
    "broadcast": "broadcast",
    "bcast": "broadcast",
    "reduce": "reduce",
    "sendrecv": "send_recv",
    "p2p": "send_recv",
}

@dataclass(frozen=True, slots=True)
class Algorithm:
    """One collective algorithm, registered in ``ALGORITHMS[op]``.

    ``time(P, S, n, g)`` -> seconds of shape ``(3 protocols, ...)`` (bandwidths only from
    ``CollectiveParams``); ``auto``: NCCL considers it by itself (no NCCL_ALGO); ``available(P, n, g,
    forced)`` -> bool mask of the layouts it can run (``None``: every layout), raising ``InputError`` with
    the reason when it is forced where the hardware cannot run it at all; ``aliases``: other names users
    type for it.
    """

    op: str
    name: str
    time: Callable[..., Any]
    auto: bool = True
    available: Callable[..., Any] | None = None
    aliases: tuple[str, ...] = ()


def _unavailable(forced: bool, like, error: InputError):
    """Hardware without the feature: an error when the algorithm is forced, else no layout can run it."""
    if forced:
        raise error
    return np.zeros_like(like, dtype=bool)


def _nvls_available(P: CollectiveParams, n, g, forced: bool):
    g2, d = M._domains(n, g)
    if not P.nvls_ok:
        return _unavailable(forced, d, InputError(
            f"NVLS (NVLink SHARP) is not available on {P.system_id}",
            hint="NVLS needs NVSwitch multicast/reduction (Hopper or newer NVLink switches); use ring or tree"))
    return (g2 >= 2) if forced else (g2 >= P.nvls_min_ranks)


# NCCL 2.2x src/include/device.h: NCCL_MAX_NVLS_ARITY 32 (8 before 2.20); tuning/nvls.cc refuses
# NVLS all-gather / reduce-scatter when localRanks exceeds it (the all-reduce has no such limit).
NVLS_MAX_ARITY_AG_RS = 32


def _nvls_ag_rs_available(P: CollectiveParams, n, g, forced: bool):
    """NVLS all-gather / reduce-scatter: NVLink SHARP on the system, one domain only (NCCL disables
    NVLS for nNodes > 1 unless a CollNet plugin with iallgather / ireducescatter is enabled, which
    ``auto`` does not assume), 2..32 local ranks (NCCL_MAX_NVLS_ARITY). Same rank threshold as the
    NVLS all-reduce for NCCL's own choice."""
    g2, d = M._domains(n, g)
    ok = _nvls_available(P, n, g, forced) & (d <= 1) & (g2 <= NVLS_MAX_ARITY_AG_RS)
    return ok


def _collnet_available(P: CollectiveParams, n, g, forced: bool):
    _, d = M._domains(n, g)
    if not P.sharp_ok:
        return _unavailable(forced, d, InputError(
            f"in-network reduction (SHARP/CollNet) is not available on fabric {P.fabric_id}",
            hint="pick an InfiniBand fabric with SHARP, e.g. --fabric ib-ndr-400g"))
    return d > 1


def _pat_available(P: CollectiveParams, n, g, forced: bool):
    g2, d = M._domains(n, g)
    return (g2 <= 1) & (d > 1)


# op -> registry of its algorithms, in the order NCCL's tuner considers them (ties keep the first).
# What NCCL itself considers by default (auto=True): CollNet needs the SHARP plugin and
# NCCL_COLLNET_ENABLE=1, hierarchical 2-D is not an NCCL algorithm, pairwise is not NCCL's all-to-all.
ALGORITHMS: dict[str, Registry[Algorithm]] = {op: Registry(f"algorithm for {op}") for op in OPS}


def register_algorithm(algorithm: Algorithm) -> Algorithm:
    """Add ``algorithm`` to ``ALGORITHMS[algorithm.op]`` (a name registered twice is an error)."""
    return ALGORITHMS[algorithm.op].add(algorithm.name, algorithm)


def auto_algorithms(op: str) -> tuple[Algorithm, ...]:
    """The algorithms NCCL's own choice (``algo=auto``) takes the minimum over, in registration order."""
    return tuple(a for a in ALGORITHMS[op].values() if a.auto)


for _alg in (
    Algorithm("all_reduce", "ring", lambda P, S, n, g: M.ring(P, "ar", S, n, g)),
    Algorithm("all_reduce", "tree", M.tree),
    Algorithm("all_reduce", "nvls", M.nvls, available=_nvls_available, aliases=("nvlstree", "nvlink-sharp")),
    Algorithm("all_reduce", "collnet", M.collnet, auto=False, available=_collnet_available,
              aliases=("sharp", "collnetdirect")),
    Algorithm("all_reduce", "hier", M.hierarchical, auto=False, aliases=("2d", "hierarchical")),
    Algorithm("all_gather", "ring", lambda P, S, n, g: M.ring(P, "ag", S, n, g)),
    Algorithm("all_gather", "pat", M.pat, available=_pat_available),
    Algorithm("all_gather", "nvls", M.nvls_ag_rs, available=_nvls_ag_rs_available, aliases=("nvlink-sharp",)),
    Algorithm("reduce_scatter", "ring", lambda P, S, n, g: M.ring(P, "rs", S, n, g)),
    Algorithm("reduce_scatter", "pat", M.pat, available=_pat_available),
    Algorithm("reduce_scatter", "nvls", M.nvls_ag_rs, available=_nvls_ag_rs_available, aliases=("nvlink-sharp",)),
    Algorithm("broadcast", "ring", lambda P, S, n, g: M.ring(P, "bc", S, n, g)),
    Algorithm("reduce", "ring", lambda P, S, n, g: M.ring(P, "bc", S, n, g)),
    Algorithm("all_to_all", "direct", M.alltoall_direct),
    Algorithm("all_to_all", "pxn", M.alltoall_pxn),
    Algorithm("all_to_all", "pairwise", M.alltoall_pairwise, auto=False),
    Algorithm("send_recv", "p2p", M.sendrecv, aliases=("ring", "direct")),
):
    register_algorithm(_alg)
del _alg


class _AutoNames(Mapping[str, tuple[str, ...]]):
    """``AUTO[op]``: the names of :func:`auto_algorithms` (read-only view of the registries)."""

    def __getitem__(self, op: str) -> tuple[str, ...]:
        return tuple(a.name for a in auto_algorithms(op))

    def __iter__(self) -> Iterator[str]:
        return iter(OPS)

    def __len__(self) -> int:
        return len(OPS)


AUTO: Mapping[str, tuple[str, ...]] = _AutoNames()

BUSBW_FACTOR_DOC = "nccl-tests doc/PERFORMANCE.md: AR 2(n-1)/n; AG, RS, AlltoAll (n-1)/n; Bcast, Reduce, SendRecv 1"


def normalize_op(op: str) -> str:
    """Canonical collective name (``all_reduce`` ...) or :class:`UnknownNameError` with close names."""
    key = str(op).strip().lower().replace("-", "_")
    if key in OPS:
        return key
    flat = key.replace("_", "")
    if flat.endswith("perf"):  # all_reduce_perf
        flat = flat[:-4]
    if flat in _OP_ALIASES:
        return _OP_ALIASES[flat]
    raise UnknownNameError("collective", str(op), OPS, hint=f"known collectives: {', '.join(OPS)}")


def normalize_algo(op: str, algo: str) -> str:
    """Canonical name of ``algo`` among ``op``'s registered algorithms (or ``auto``); aliases accepted."""
    a = str(algo).strip().lower()
    if a == "auto":
        return a
    known = ALGORITHMS[op]
    if a in known:
        return a
    for alg in known.values():
        if a in alg.aliases:
            return alg.name
    raise UnknownNameError(
        f"algorithm for {op}", str(algo), (*known, "auto"), hint=f"{op} supports: auto, {', '.join(known)}"
    )


def busbw_factor(op: str, n):
    """nccl-tests bus-bandwidth factor: busbw = algbw x factor (PERFORMANCE.md)."""
    op = normalize_op(op)
    n = np.asarray(n, dtype=float)
    if op == "all_reduce":
        f = 2 * (n - 1) / n
    elif op in ("all_gather", "reduce_scatter", "all_to_all"):
        f = (n - 1) / n
    else:
        f = np.ones_like(n)
    return float(f) if f.ndim == 0 else f


def _prepare(size_bytes, n_ranks, ranks_per_domain):
    S = np.asarray(size_bytes, dtype=float)
    n = np.asarray(n_ranks, dtype=float)
    g = np.asarray(ranks_per_domain, dtype=float)
    scalar = S.ndim == 0 and n.ndim == 0 and g.ndim == 0
    S, n, g = np.broadcast_arrays(S, n, g)
    if np.any(S < 0) or np.any(~np.isfinite(S)):
        raise InputError("message size must be a finite number of bytes >= 0")
    if np.any(~np.isfinite(n)) or np.any(n < 0) or np.any(~np.isfinite(g)) or np.any(g < 0):
        raise InputError("n_ranks and ranks_per_domain must be finite and >= 0", hint="a group has at least one rank")
    # groups of <= 1 rank cost nothing (evaluate() zeroes them); keep the arithmetic finite
    n = np.maximum(n, 1.0)
    g = np.clip(g, 1.0, n)
    return S, n, g, scalar


def evaluate(op: str, S, n, g, P: CollectiveParams, algo: str = "auto", gpus_per_process=1):
    """Times of every candidate algorithm, min over protocols.

    ``gpus_per_process``: GPUs whose collectives one host thread enqueues (nccl-tests ``-g N``; 1 for
    one process per GPU, as torchrun / mpirun launch); the host enqueues them one after the other, so
    back-to-back collectives cannot run faster than ``gpus_per_process x host_launch``.

    Returns ``(names, times[len(names), ...], protocol_index[len(names), ...])``; infeasible entries
    are ``inf``.
    """
    op = normalize_op(op)
    algo = normalize_algo(op, algo)
    forced = algo != "auto"
    algs = (ALGORITHMS[op].get(algo),) if forced else auto_algorithms(op)
    names = tuple(a.name for a in algs)
    ts, ps = [], []
    for alg in algs:
        t3 = alg.time(P, S, n, g)
        t3 = np.broadcast_to(t3, (3, *np.shape(S)))
        if alg.available is not None:
            t3 = np.where(alg.available(P, n, g, forced), t3, np.inf)
        ps.append(np.argmin(t3, axis=0))
        ts.append(np.min(t3, axis=0))
    t = np.stack(ts)
    p = np.stack(ps)
    if P.host_launch_s > 0:
        # one process per GPU (G = 1): the enqueue overlaps the previous collective's GPU work
        G = np.asarray(gpus_per_process, dtype=float)
        t = np.where(G > 1, np.maximum(t, G * P.host_launch_s), t)
    single = n <= 1
    t = np.where(single, 0.0, t)
    return names, t, p


def collective_time(
    op: str,
    size_bytes,
    n_ranks,
    ranks_per_domain,
    system: SystemSpec,
    scaleout: ScaleOutTech,
    algo: str = "auto",
    catalog=None,
    *,
    gpus_per_process=1,
):
    """Seconds one NCCL-style collective takes on a group of ranks placed on ``system``.

    Parameters
    ----------
    op : ``all_reduce | all_gather | reduce_scatter | all_to_all | broadcast | reduce | send_recv``
        (aliases such as ``allreduce``, ``alltoall``, ``sendrecv`` are accepted).
    size_bytes : nccl-tests ``size``: the full buffer S in bytes (all-gather: the gathered output,
        reduce-scatter: the input, all-to-all: one rank's send buffer). Scalar or array.
    n_ranks : ranks in the group. Scalar or array; groups of 0 or 1 rank take 0 s.
    ranks_per_domain : how many of the group's ranks sit in one scale-up (NVLink) domain; the group
        spans ``ceil(n_ranks / ranks_per_domain)`` domains. Scalar or array (clipped to n_ranks).
    system, scaleout : hardware (SystemSpec; ScaleOutTech gives the NIC line rate and efficiency).
    algo : ``auto`` (NCCL's own choice = elementwise minimum over the algorithms NCCL considers) or a
        forced algorithm: all_reduce ``ring|tree|nvls|collnet|hier``; all_gather / reduce_scatter
        ``ring|pat|nvls`` (nvls: one NVLink-SHARP domain only); all_to_all ``direct|pxn|pairwise``;
        broadcast / reduce ``ring``; send_recv ``p2p``.
    catalog : optional :class:`~clustertwin.catalog.Catalog`; its ``calibration: collectives:``
        section (written by ``clustertwin calibrate``) overrides the shipped per-system constants.
    gpus_per_process : GPUs one host thread drives (keyword; default 1 = one process per GPU, as
        training launchers and multi-node ``mpirun`` use). nccl-tests ``-g 8`` is 8: the host enqueues
        the 8 GPUs' collectives serially, a floor of 8 x ``host_launch_us`` per collective.

    Returns
    -------
    float when every input is a scalar, else ``np.ndarray`` of the broadcast shape. Elements that no
    forced algorithm can run (e.g. ``pat`` with several ranks per node) are ``inf``; a group of one
    rank takes 0 s. Fully vectorised: no Python loop over elements.

    Model: α-β with NCCL tuner latencies (tuning.cc) and achieved bus bandwidths; see
    :mod:`clustertwin.collectives.model` and docs/collectives.md.
    """
    S, n, g, scalar = _prepare(size_bytes, n_ranks, ranks_per_domain)
    P = resolve_params(system, scaleout, catalog)
    _, t, _ = evaluate(op, S, n, g, P, algo, gpus_per_process)
    out = t.min(axis=0)
    return float(out) if scalar else out


@dataclass(frozen=True)
class CollectiveResult:
    """One collective, nccl-tests style. Bandwidths in bytes/s; ``algbw = S/t``; ``busbw = algbw x
    factor`` (2(n−1)/n all_reduce; (n−1)/n all_gather, reduce_scatter, all_to_all; 1 otherwise)."""

    op: str
    size_bytes: float
    n_ranks: int
    ranks_per_domain: int
    domains: int
    time_s: float
    algbw: float
    busbw: float
    algorithm: str
    protocol: str
    system: str
    fabric: str
    per_algorithm_s: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "size_bytes": self.size_bytes,
            "n_ranks": self.n_ranks,
            "ranks_per_domain": self.ranks_per_domain,
            "domains": self.domains,
            "time_us": self.time_s * 1e6,
            "algbw_GBps": self.algbw / 1e9,
            "busbw_GBps": self.busbw / 1e9,
            "algorithm": self.algorithm,
            "protocol": self.protocol,
            "system": self.system,
            "fabric": self.fabric,
            "per_algorithm_us": {k: (v * 1e6 if np.isfinite(v) else None) for k, v in self.per_algorithm_s.items()},
        }


def sweep(
    op: str,
    sizes,
    n_ranks: int,
    ranks_per_domain: int,
    system: SystemSpec,
    scaleout: ScaleOutTech,
    algo: str = "auto",
    catalog=None,
    *,
    gpus_per_process: int = 1,
) -> list[CollectiveResult]:
    """A result per size (vectorised over sizes), with the chosen algorithm and protocol
    (``gpus_per_process`` as in :func:`collective_time`)."""
    op = normalize_op(op)
    S, n, g, _ = _prepare(np.atleast_1d(np.asarray(sizes, dtype=float)), n_ranks, ranks_per_domain)
    P = resolve_params(system, scaleout, catalog)
    names, t, p = evaluate(op, S, n, g, P, algo, gpus_per_process)
    best = np.argmin(t, axis=0)
    idx = np.arange(S.size)
    tb = t[best, idx]
    pb = p[best, idx]
    if not np.all(np.isfinite(tb)):
        raise InputError(
            f"algorithm {algo!r} cannot run {op} on {int(n_ranks)} ranks with {int(ranks_per_domain)} per domain",
            hint="PAT needs one rank per node; NVLS needs >= 2 ranks in an NVLS-capable domain; try --algo auto",
        )
    factor = busbw_factor(op, n_ranks)
    d = int(np.ceil(n_ranks / min(max(ranks_per_domain, 1), n_ranks)))
    out = []
    for i in range(S.size):
        ti = float(tb[i])
        alg = S[i] / ti if ti > 0 else float("inf")
        out.append(
            CollectiveResult(
                op=op,
                size_bytes=float(S[i]),
                n_ranks=int(n_ranks),
                ranks_per_domain=int(min(ranks_per_domain, n_ranks)),
                domains=d,
                time_s=ti,
                algbw=alg,
                busbw=alg * factor,
                algorithm=names[best[i]],
                protocol=PROTOCOLS[int(pb[i])],
                system=system.id,
                fabric=scaleout.id,
                per_algorithm_s={nm: float(t[j, i]) for j, nm in enumerate(names)},
            )
        )
    return out


def estimate_collective(
    op: str,
    size_bytes: float,
    n_ranks: int,
    ranks_per_domain: int,
    system: SystemSpec,
    scaleout: ScaleOutTech,
    algo: str = "auto",
    catalog=None,
    *,
    gpus_per_process: int = 1,
) -> CollectiveResult:
    """Scalar API: time, algbw, busbw (nccl-tests definitions), chosen algorithm and protocol."""
    return sweep(op, [size_bytes], n_ranks, ranks_per_domain, system, scaleout, algo, catalog,
                 gpus_per_process=gpus_per_process)[0]

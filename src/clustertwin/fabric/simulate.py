"""High-level fabric simulation: a system + scale-out network + traffic -> timing and link loads.

This is what the CLI and other engines call: :func:`simulate_collective`, :func:`simulate_phases`,
:func:`simulate_jobs` and the integration hook :func:`flow_collective_time`.
"""

from __future__ import annotations

import time as _time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ..errors import InputError
from ..hardware import ScaleOutTech, SystemSpec, resolve_hardware
from .engine import max_min_rates, simulate_flows, simulate_padded
from .faults import Faults, apply_faults
from .routing import check_routing, route, route_padded
from .topology import TIER_NAMES, FabricTopology, build_topology
from .traffic import JobSpec, Phase, collective_phases, place_jobs

# ----------------------------------------------------------------------------- layout


@dataclass(frozen=True, slots=True, kw_only=True)
class Layout:
    """Where GPUs sit: domains (scale-up), hosts, and the NIC (endpoint) each GPU uses."""

    n_gpus: int
    devices_per_domain: int
    devices_per_host: int
    nics_per_host: int

    @property
    def n_hosts(self) -> int:
        return -(-self.n_gpus // self.devices_per_host)

    @property
    def n_endpoints(self) -> int:
        return self.n_hosts * self.nics_per_host

    def domain(self, gpu):
        return np.asarray(gpu) // self.devices_per_domain

    def host(self, gpu):
        return np.asarray(gpu) // self.devices_per_host

    def endpoint(self, gpu):
        gpu = np.asarray(gpu)
        local = gpu % self.devices_per_host
        return self.host(gpu) * self.nics_per_host + local * self.nics_per_host // self.devices_per_host


@dataclass(frozen=True, slots=True, kw_only=True)
class Fabric:
    """A built cluster network: topology (with faults applied), layout and the technology."""

    topo: FabricTopology
    layout: Layout
    tech_id: str = ""
    hop_latency_s: float = 0.0
    nic_latency_s: float = 0.0
    protocol_efficiency: float = 1.0


def make_fabric(
    system: SystemSpec,
    scaleout: ScaleOutTech,
    n_gpus: int,
    *,
    topology: str | None = None,
    tiers: int | None = None,
    oversubscription: float = 1.0,
    radix: int | None = None,
    faults: Faults | None = None,
    catalog=None,
) -> Fabric:
    """Build the scale-out fabric for ``n_gpus`` GPUs of ``system`` on ``scaleout``.

    ``topology`` defaults to ``rail`` when the host has one NIC per GPU (DGX SuperPOD style),
    else ``fat-tree``. NIC endpoint bandwidth is ``HardwareView.nic_bw`` = min(NIC, ports x fabric port).
    """
    if system.nics_per_host < 1 or system.nic_bw <= 0:
        raise InputError(f"system {system.id!r} has no scale-out NICs", hint="pick a system with NICs")
    if n_gpus < 1:
        raise InputError(f"need at least one GPU, got {n_gpus}")
    layout = Layout(n_gpus=n_gpus, devices_per_domain=system.devices_per_domain,
                    devices_per_host=system.devices_per_host, nics_per_host=system.nics_per_host)
    kind = topology or ("dual-plane" if getattr(scaleout, "planes", 1) > 1 else
                        "rail" if system.nics_per_host >= system.devices_per_host > 1 else "fat-tree")
    view = resolve_hardware(system, scaleout, ports_per_nic=2 if kind == "dual-plane" else 1)
    link_bw = view.port_bw
    nic_bw = view.nic_bw
    if radix is None:  # the same buildability check and port model as plan/estimate/sweep/compare/bom
        from ..cluster.buildable import check_buildable

        cl = check_buildable(system, scaleout, n_gpus, topology=kind, tiers=tiers, oversubscription=oversubscription,
                             catalog=catalog)
        # a switch port faster than the NIC port is split (breakout): 64 x 400G serves 128 x 200G
        radix, link_bw, nic_bw = cl.switch_radix, cl.port_bw, cl.nic_bw
    topo = build_topology(
        n_endpoints=layout.n_endpoints,
        link_bw=link_bw,
        nic_bw=nic_bw,
        radix=radix,
        kind=kind,
        tiers=tiers,
        oversubscription=oversubscription,
        rails=system.nics_per_host,
    )
    topo = apply_faults(topo, faults)
    return Fabric(topo=topo, layout=layout, tech_id=scaleout.id, hop_latency_s=scaleout.hop_latency_s,
                  nic_latency_s=scaleout.nic_latency_s, protocol_efficiency=scaleout.protocol_efficiency)


# ----------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True, kw_only=True)
class FabricRun:
    """Outcome of a simulation. Times in seconds, bytes, bytes/s."""

    time_s: float  # completion time of the traffic (phases back to back, weighted by repeats)
    ideal_time_s: float  # the same traffic with every flow alone at the NIC line rate (all planes)
    phase_names: tuple[str, ...]
    phase_times_s: np.ndarray  # one repetition of each phase
    phase_repeats: np.ndarray
    n_flows: int  # simulated scale-out flow instances
    n_flows_total: float  # scale-out flows including repetitions
    n_scaleup_flows: int  # flows inside a scale-up domain (not on this fabric)
    scaleout_bytes: float  # bytes on the fabric including repetitions
    events: int
    iterations: int
    wall_s: float
    link_bytes: np.ndarray  # (n_links,) bytes per physical link, repetitions included
    topo: FabricTopology
    routing: str
    flow_time: np.ndarray = field(default_factory=lambda: np.zeros(0))  # per simulated flow: finish - start
    flow_alone: np.ndarray = field(default_factory=lambda: np.zeros(0))  # per flow: time alone
    flow_phase: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))

    @property
    def efficiency(self) -> float:
        return self.ideal_time_s / self.time_s if self.time_s > 0 else 1.0

    def utilisation(self) -> np.ndarray:
        cap = self.topo.capacity[: self.topo.n_links]
        with np.errstate(divide="ignore", invalid="ignore"):
            u = np.where(cap > 0, self.link_bytes / (cap * self.time_s), 0.0) if self.time_s > 0 else np.zeros_like(cap)
        return u

    def tier_summary(self) -> list[dict]:
        """Per link tier: links, links carrying traffic, mean and max utilisation, failed links."""
        u = self.utilisation()
        out = []
        cap = self.topo.capacity[: self.topo.n_links]
        for k, name in enumerate(TIER_NAMES):
            m = self.topo.tier == k
            if not m.any():
                continue
            used = m & (self.link_bytes > 0)
            out.append({
                "tier": name, "links": int(m.sum()), "used": int(used.sum()),
                "mean_util": float(u[used].mean()) if used.any() else 0.0,
                "max_util": float(u[m].max()), "failed": int((cap[m] <= 0).sum()),
                "bytes": float(self.link_bytes[m].sum()),
            })
        return out

    def hottest(self, k: int = 5) -> list[dict]:
        u = self.utilisation()
        order = np.argsort(-u, kind="stable")[:k]
        return [{"link": self.topo.link_name(int(i)), "id": int(i), "util": float(u[i]),
                 "bytes": float(self.link_bytes[i])} for i in order if self.link_bytes[i] > 0]


def _expand_bundles(topo: FabricTopology, by_id: np.ndarray) -> np.ndarray:
    """Physical-link bytes: bundle bytes shared among members in proportion to capacity."""
    out = by_id[: topo.n_links].copy()
    extra = by_id[topo.n_links:]
    if not extra.any():
        return out
    s = topo.shape
    cap = topo.capacity
    groups = []
    for p in range(s.planes):
        L = np.arange(s.n_leaves)[:, None]
        J = np.arange(s.u1)[None, :]
        groups.append((topo.bundle_leaf_up(np.arange(s.n_leaves), p), topo.leaf_up(L, J, p)))
        groups.append((topo.bundle_leaf_down(np.arange(s.n_leaves), p), topo.leaf_down(L, J, p)))
        if s.tiers == 3:
            P = np.arange(s.n_pods)[:, None, None]
            J3 = np.arange(s.u1)[None, :, None]
            T = np.arange(s.u2)[None, None, :]
            groups.append((topo.bundle_pod_up(np.arange(s.n_pods), p), topo.spine_up(P, J3, T, p).reshape(s.n_pods, -1)))
            groups.append((topo.bundle_pod_down(np.arange(s.n_pods), p), topo.spine_down(P, J3, T, p).reshape(s.n_pods, -1)))
    for bid, members in groups:
        b = by_id[bid]
        if not b.any():
            continue
        mc = cap[members]
        tot = mc.sum(1, keepdims=True)
        share = np.divide(mc, tot, out=np.zeros_like(mc), where=tot > 0)
        np.add.at(out, members.ravel(), (share * b[:, None]).ravel())
    return out


# ----------------------------------------------------------------------------- core driver


def _to_endpoints(fab: Fabric, ph: Phase, gpu_of_rank: np.ndarray | None, pxn: bool):
    """Rank flows -> endpoint flows; drops flows inside a scale-up domain; PXN moves the source to
    the NVLink peer on the destination rail (same host) and merges flows that then coincide."""
    lay = fab.layout
    src, dst = np.asarray(ph.src), np.asarray(ph.dst)
    if gpu_of_rank is not None:
        src, dst = gpu_of_rank[src], gpu_of_rank[dst]
    if src.size and (src.max() >= lay.n_gpus or dst.max() >= lay.n_gpus):
        raise InputError(f"traffic names GPU {int(max(src.max(), dst.max()))} but the cluster has {lay.n_gpus} GPUs")
    size = np.asarray(ph.size, dtype=float)
    start = np.zeros(src.size) if ph.start is None else np.asarray(ph.start, dtype=float)
    inter = lay.domain(src) != lay.domain(dst)
    n_up = int((~inter).sum())
    src, dst, size, start = src[inter], dst[inter], size[inter], start[inter]
    es, ed = lay.endpoint(src), lay.endpoint(dst)
    if pxn and fab.topo.shape.kind in ("rail", "dual-plane") and lay.nics_per_host > 1:
        rail_d = ed % lay.nics_per_host
        moved = lay.host(src) != lay.host(dst)
        es = np.where(moved, lay.host(src) * lay.nics_per_host + rail_d, es)
        if ph.merge_pxn and es.size and _has_duplicates(es, ed, start, lay.n_endpoints):
            key = np.stack([es, ed, np.round(start * 1e12).astype(np.int64)], axis=1)
            uniq, inv = np.unique(key, axis=0, return_inverse=True)
            inv = inv.ravel()
            if uniq.shape[0] < es.size:
                size = np.bincount(inv, weights=size, minlength=uniq.shape[0])
                es, ed = uniq[:, 0], uniq[:, 1]
                start = uniq[:, 2] / 1e12
    return es, ed, size, start, n_up


def _has_duplicates(es: np.ndarray, ed: np.ndarray, start: np.ndarray, n_endpoints: int) -> bool:
    """Whether two flows share (source, destination) -- a cheap 1-D check before the merge."""
    key = np.sort(es.astype(np.int64) * n_endpoints + ed)
    return bool(np.any(key[1:] == key[:-1]))


def simulate_phases(
    fab: Fabric,
    phases: Sequence[Phase],
    *,
    routing: str = "ecmp",
    seed: int = 0,
    pxn: bool = True,
    gpu_of_rank: np.ndarray | None = None,
    stragglers: dict[int, float] | None = None,
    channels: int = 1,
    progress=None,
) -> FabricRun:
    """Simulate phases that run back to back (one program alone on the fabric).

    ``progress(done, total)``, if given, is called with the number of phases simulated so far.

    Each phase is simulated once as its own block (all blocks in one vectorised event loop) and
    its time multiplied by ``repeat``. ``stragglers`` (rank -> delay s) delay the flows their rank
    sends in the first repetition of the first phase. ``channels``: sub-flows per connection
    (NCCL channels / RDMA QPs; Llama 3 used 16 per GPU pair, fact-13), each hashed or placed on
    its own path.
    """
    t0 = _time.perf_counter()
    routing = check_routing(routing)
    for r, d in (stragglers or {}).items():
        if not (np.isfinite(d) and d >= 0):
            raise InputError(f"straggler delay of rank {r} must be a finite number of seconds >= 0, got {d!r}")
    topo = fab.topo
    blocks: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    weights, names = [], []
    n_up = 0
    phases = list(phases)
    for b, ph in enumerate(phases):
        es, ed, size, start, nu = _to_endpoints(fab, ph, gpu_of_rank, pxn)
        n_up += nu
        if b == 0 and stragglers:
            ranks = np.asarray(ph.src)
            delay = np.array([stragglers.get(int(r), 0.0) for r in ranks])
            gsrc = ranks if gpu_of_rank is None else gpu_of_rank[ranks]
            gdst = np.asarray(ph.dst) if gpu_of_rank is None else gpu_of_rank[np.asarray(ph.dst)]
            keep = fab.layout.domain(gsrc) != fab.layout.domain(gdst)
            dl = delay[keep]
            if dl.size == es.size and dl.any():
                blocks.append((es, ed, size, start + dl))
                weights.append(1.0)
                names.append(f"{ph.name} (stragglers)")
                if ph.repeat > 1:
                    blocks.append((es, ed, size, start))
                    weights.append(ph.repeat - 1.0)
                    names.append(ph.name)
                continue
            if dl.any():  # PXN merged flows: delay the merged flows by the max of their members
                raise InputError("stragglers with PXN-merged flows are not supported", hint="pass pxn=False")
        blocks.append((es, ed, size, start))
        weights.append(float(ph.repeat))
        names.append(ph.name)
    n_blocks = len(blocks)
    if n_blocks == 0 or sum(b[0].size for b in blocks) == 0:
        return FabricRun(
            time_s=0.0, ideal_time_s=0.0, phase_names=tuple(names), phase_times_s=np.zeros(n_blocks),
            phase_repeats=np.asarray(weights), n_flows=0, n_flows_total=0.0, n_scaleup_flows=n_up,
            scaleout_bytes=0.0, events=0, iterations=0, wall_s=_time.perf_counter() - t0,
            link_bytes=np.zeros(topo.n_links), topo=topo, routing=routing,
        )
    NL = topo.capacity.size
    E = topo.shape.n_endpoints
    w = np.asarray(weights)
    c = max(1, int(channels))
    block_time = np.zeros(n_blocks)
    ideal_block = np.zeros(n_blocks)
    by_id = np.zeros(NL)
    counts = np.zeros(n_blocks)
    sent = np.zeros(n_blocks)
    flow_time, flow_alone, flow_phase = [], [], []
    events = iterations = 0
    # stream the phases in chunks of about `_CHUNK_FLOWS` flows: memory stays bounded at any size,
    # small fabrics still advance many phases in one vectorised loop
    for lo, hi in _chunks([b[0].size * c for b in blocks], _CHUNK_FLOWS):
        if progress is not None:
            progress(lo, n_blocks)
        nb = hi - lo
        src = np.concatenate([blocks[i][0] for i in range(lo, hi)])
        dst = np.concatenate([blocks[i][1] for i in range(lo, hi)])
        size = np.concatenate([blocks[i][2] for i in range(lo, hi)])
        start = np.concatenate([blocks[i][3] for i in range(lo, hi)])
        block = np.concatenate([np.full(blocks[i][0].size, i - lo) for i in range(lo, hi)])
        salt = None
        if c > 1:  # each connection as `channels` sub-flows (QPs) hashed independently
            src, dst, block = np.repeat(src, c), np.repeat(dst, c), np.repeat(block, c)
            size, start = np.repeat(size / c, c), np.repeat(start, c)
            salt = np.tile(np.arange(c), src.size // c)
        if src.size == 0:
            continue
        links, lw = route_padded(topo, src, dst, routing, seed=seed, block=block, n_blocks=nb, salt=salt)
        if lw is None:
            lw = (links >= 0).astype(float)
        cap = np.tile(topo.capacity, nb)
        res = simulate_padded(links, lw, cap, size, start, block, nb)
        events = max(events, res.events)
        iterations += res.iterations
        block_time[lo:hi] = res.block_time
        flow_time.append(res.finish - start)
        flow_alone.append(size / res.alone)
        flow_phase.append(block + lo)
        del links, lw
        # ideal: no contention in the network; each NIC sends and receives its bytes at line rate
        ib = np.zeros(nb)
        np.maximum.at(ib, block, start + size / topo.nic_bw)
        for ep in (src, dst):
            nic_bytes = np.bincount(block * E + ep, weights=size, minlength=nb * E).reshape(nb, E)
            ib = np.maximum(ib, nic_bytes.max(axis=1) / topo.nic_bw)
        ideal_block[lo:hi] = ib
        by_id += (res.link_bytes.reshape(nb, NL) * w[lo:hi, None]).sum(0)
        counts[lo:hi] = np.bincount(block, minlength=nb)
        sent[lo:hi] = np.bincount(block, weights=size, minlength=nb)
    return FabricRun(
        time_s=float((block_time * w).sum()),
        ideal_time_s=float((ideal_block * w).sum()),
        phase_names=tuple(names),
        phase_times_s=block_time,
        phase_repeats=w,
        n_flows=int(counts.sum()),
        n_flows_total=float((counts * w).sum()),
        n_scaleup_flows=n_up,
        scaleout_bytes=float((sent * w).sum()),
        events=events,
        iterations=iterations,
        wall_s=_time.perf_counter() - t0,
        link_bytes=_expand_bundles(topo, by_id),
        topo=topo,
        routing=routing,
        flow_time=np.concatenate(flow_time) if flow_time else np.zeros(0),
        flow_alone=np.concatenate(flow_alone) if flow_alone else np.zeros(0),
        flow_phase=np.concatenate(flow_phase) if flow_phase else np.zeros(0, dtype=int),
    )


_CHUNK_FLOWS = 1 << 19


def _chunks(sizes: list[int], budget: int) -> list[tuple[int, int]]:
    """Consecutive ranges of blocks with at most ``budget`` flows each (a bigger block alone)."""
    out, lo, acc = [], 0, 0
    for i, n in enumerate(sizes):
        if i > lo and acc + n > budget:
            out.append((lo, i))
            lo, acc = i, 0
        acc += n
    if sizes:
        out.append((lo, len(sizes)))
    return out


def simulate_collective(
    fab: Fabric,
    op: str,
    size_bytes: float,
    *,
    n_ranks: int | None = None,
    ranks_per_domain: int | None = None,
    routing: str = "ecmp",
    seed: int = 0,
    pxn: bool = True,
    max_phases: int = 32,
    window: int = 1,
    stragglers: dict[int, float] | None = None,
    gpu_of_rank: np.ndarray | None = None,
    channels: int = 1,
    progress=None,
) -> FabricRun:
    """A collective over ``n_ranks`` (default: every GPU) with ``ranks_per_domain`` ranks per domain."""
    lay = fab.layout
    n = n_ranks or lay.n_gpus
    g = ranks_per_domain or min(lay.devices_per_domain, n)
    phases = collective_phases(op, size_bytes, n, g, max_phases=max_phases, window=window)
    if gpu_of_rank is None and g != lay.devices_per_domain:
        r = np.arange(n)
        gpu_of_rank = (r // g) * lay.devices_per_domain + r % g
    return simulate_phases(fab, phases, routing=routing, seed=seed, pxn=pxn, gpu_of_rank=gpu_of_rank,
                           stragglers=stragglers, channels=channels, progress=progress)


# ----------------------------------------------------------------------------- multi-tenancy


@dataclass(frozen=True, slots=True, kw_only=True)
class JobResult:
    name: str
    gpus: int
    placement: str
    traffic: str
    domains: tuple[int, ...]
    alone_s: float
    shared_s: float

    @property
    def slowdown(self) -> float:
        return self.shared_s / self.alone_s if self.alone_s > 0 else 1.0


def simulate_jobs(
    fab: Fabric,
    jobs: Sequence[JobSpec],
    *,
    routing: str = "ecmp",
    seed: int = 0,
    pxn: bool = True,
    max_phases: int = 16,
    max_events: int = 200_000,
) -> list[JobResult]:
    """Jobs sharing one fabric. Each job runs its collective (hierarchical, one rank per GPU);
    jobs that finish restart so every job sees contention until the last one finishes once.
    Returns each job's time shared vs alone (alone = the same job, same placement, empty fabric).
    """
    routing = check_routing(routing)
    lay = fab.layout
    gpd = lay.devices_per_domain
    n_domains = -(-lay.n_gpus // gpd)
    placed = place_jobs(jobs, n_domains, gpd)
    topo = fab.topo
    programs = []  # per job: list of (A rows, size, repeat)
    for job, gpus in zip(jobs, placed, strict=True):
        g = min(gpd, job.gpus)
        if job.gpus % g:
            raise InputError(f"job {job.name!r}: {job.gpus} GPUs do not fill whole domains of {g}")
        phases = collective_phases(job.traffic, job.size_bytes, job.gpus, g, max_phases=max_phases)
        prog = []
        for ph in phases:
            es, ed, size, start, _ = _to_endpoints(fab, ph, gpus, pxn)
            if es.size:
                prog.append((es, ed, size, int(round(ph.repeat))))
        programs.append(prog)
    # route each phase index of all jobs together (adaptive sees the other jobs' load)
    depth = max((len(p) for p in programs), default=0)
    routed: list[list] = [[None] * len(p) for p in programs]
    for k in range(depth):
        members = [(j, programs[j][k]) for j in range(len(programs)) if k < len(programs[j])]
        src = np.concatenate([m[1][0] for m in members])
        dst = np.concatenate([m[1][1] for m in members])
        A = route(topo, src, dst, routing, seed=seed)
        off = 0
        for j, (es, _ed, size, rep) in members:
            routed[j][k] = (A[off: off + es.size], size, rep)
            off += es.size
    cap = topo.capacity
    # alone times: exact fast path (one phase simulated, times its repeats)
    alone = []
    for prog in routed:
        tot = 0.0
        for A, size, rep in prog:
            r = simulate_flows(A, cap, size, np.zeros(size.size), np.zeros(size.size, dtype=int), 1)
            tot += float(r.block_time[0]) * rep
        alone.append(tot)
    # shared: every job steps through its program; event loop over the union of current flows
    J = len(routed)
    pos = [[0, 0] for _ in range(J)]  # phase index, repetition
    remaining = [prog[0][1].copy() if prog else np.zeros(0) for prog in routed]
    finished_at = [0.0 if not prog else None for prog in routed]
    t = 0.0
    events = 0
    while any(f is None for f in finished_at):
        mats, owners, rems = [], [], []
        for j, prog in enumerate(routed):
            if not prog:
                continue
            A, _size, _rep = prog[pos[j][0]]
            live = remaining[j] > 0
            mats.append(A[np.nonzero(live)[0]])
            owners.append((j, np.nonzero(live)[0]))
            rems.append(remaining[j][live])
        Aall = sp.vstack(mats, format="csr")
        rate, _ = max_min_rates(Aall, cap)
        rem = np.concatenate(rems)
        with np.errstate(divide="ignore"):
            dt = float(np.min(np.where(np.isinf(rate), 0.0, rem / rate)))
        t += dt
        off = 0
        for j, live_idx in owners:
            r = rate[off: off + live_idx.size]
            moved = np.where(np.isinf(r), np.inf, r * dt)
            new = remaining[j][live_idx] - moved
            new[new <= 1e-9 * np.maximum(routed[j][pos[j][0]][1][live_idx], 1.0)] = 0.0
            remaining[j][live_idx] = np.maximum(new, 0.0)
            off += live_idx.size
            if not remaining[j].any():  # this job's phase instance is complete
                ph, rep = pos[j]
                if rep + 1 < routed[j][ph][2]:
                    pos[j] = [ph, rep + 1]
                elif ph + 1 < len(routed[j]):
                    pos[j] = [ph + 1, 0]
                else:
                    if finished_at[j] is None:
                        finished_at[j] = t
                    pos[j] = [0, 0]  # keep contending until every job has finished once
                remaining[j] = routed[j][pos[j][0]][1].copy()
        events += 1
        if events > max_events:
            raise InputError(f"multi-job simulation exceeded {max_events} events",
                             hint="use fewer or smaller jobs, or a smaller collective size")
    out = []
    for job, gpus, a, s in zip(jobs, placed, alone, finished_at, strict=True):
        out.append(JobResult(name=job.name, gpus=job.gpus, placement=job.placement, traffic=job.traffic,
                             domains=tuple(int(d) for d in np.unique(gpus // gpd)), alone_s=a, shared_s=float(s or 0.0)))
    return out


# ----------------------------------------------------------------------------- integration hook


def flow_collective_time(
    op: str,
    size_bytes: float,
    n_ranks: int,
    ranks_per_domain: int,
    system: SystemSpec,
    scaleout: ScaleOutTech,
    routing: str = "ecmp",
    seed: int = 0,
    **topology,
) -> float:
    """Contention-aware time (s) of the scale-out part of a hierarchical collective.

    Builds the fabric for ``n_ranks / ranks_per_domain`` domains of ``system`` on ``scaleout``
    (``topology`` keywords: ``topology``, ``tiers``, ``oversubscription``, ``radix``, ``faults``,
    ``pxn``, ``max_phases``, ``window``, ``channels``), simulates the flows under max-min sharing and returns

        t = T_flow / eta + steps * (2 * nic_latency + hops * hop_latency)

    with ``eta`` the fabric's protocol efficiency (catalog) and ``steps`` the sequential
    communication steps (alpha-beta form, MODELLING.md Sec. 7). The intra-domain parts of the
    collective are not included (the collectives engine owns them).
    """
    pxn = topology.pop("pxn", True)
    max_phases = topology.pop("max_phases", 32)
    window = topology.pop("window", 1)
    channels = topology.pop("channels", 1)
    g = int(ranks_per_domain)
    if g < 1 or n_ranks % g:
        raise InputError(f"{n_ranks} ranks do not fill whole domains of {ranks_per_domain}")
    D = n_ranks // g
    n_gpus = D * system.devices_per_domain
    fab = make_fabric(system, scaleout, n_gpus, **topology)
    run = simulate_collective(fab, op, size_bytes, n_ranks=n_ranks, ranks_per_domain=g, routing=routing,
                              seed=seed, pxn=pxn, max_phases=max_phases, window=window, channels=channels)
    if run.time_s == 0:
        return 0.0
    steps = float(run.phase_repeats.sum())
    hops = 2 * fab.topo.shape.tiers - 1
    alpha = 2 * fab.nic_latency_s + hops * fab.hop_latency_s
    return run.time_s / fab.protocol_efficiency + steps * alpha

"""Traffic: phases of flows between GPUs (collectives, a training step, a user matrix, jobs).

A ``Phase`` is a set of flows that start together (``start`` offsets optional); its ``repeat``
says how many identical copies run back to back (a ring all-reduce is one ring step repeated
2(D-1) times: the flows, sizes and paths of every step are identical, so one step is simulated
and multiplied -- exact because the steps are separated by the ring's data dependency). Phases of
one program run one after another.

Collectives are hierarchical across scale-up domains (the scale-out part is what this package
simulates): inside a domain NVLink-class links do the reduce-scatter / all-gather; across domains
the ``g`` ranks of a domain each drive their own rail:

* all-reduce (nccl-tests size S): ring over the D domains per local rank, 2(D-1) steps of S/n bytes
  (n = D*g; Thakur et al., IJHPCA 2005, ring all-reduce; MODELLING.md Sec. 7).
* all-gather / reduce-scatter (S = the gathered output / scattered input): D-1 steps of S/n.
* all-to-all (S = each rank's send buffer): D-1 shift phases, phase k: domain d -> d+k; with PXN
  the g*g pairs of two domains travel as g rail-aligned flows of g*S/n bytes (NCCL's p2p schedule
  pairs peers by rank offset; PXN aggregates through the NVLink peer on the destination rail).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import InputError, UnknownNameError
from ..userfiles import read_text, read_yaml

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")


def check_collective(op: str) -> str:
    key = op.strip().lower().replace("-", "_")
    aliases = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
               "alltoall": "all_to_all", "a2a": "all_to_all"}
    key = aliases.get(key, key)
    if key not in COLLECTIVES:
        raise UnknownNameError("collective", op, COLLECTIVES)
    return key


@dataclass(frozen=True, slots=True)
class Phase:
    """Flows between ranks that start together. ``repeat``: identical back-to-back copies."""

    src: np.ndarray
    dst: np.ndarray
    size: np.ndarray
    repeat: float = 1.0
    name: str = ""
    start: np.ndarray | None = None
    merge_pxn: bool = True


def _ring_pairs(n_ranks: int, g: int, stride_domains: int = 1) -> tuple[np.ndarray, np.ndarray]:
    D = n_ranks // g
    r = np.arange(n_ranks)
    dom, loc = r // g, r % g
    dst = ((dom + stride_domains) % D) * g + loc
    return r, dst


def collective_phases(op: str, size_bytes: float, n_ranks: int, ranks_per_domain: int,
                      max_phases: int = 32, window: int = 1) -> list[Phase]:
    """Scale-out phases of a collective over ``n_ranks`` ranks, ``ranks_per_domain`` per domain.

    All-to-all runs ``window`` consecutive domain shifts concurrently per phase (1 = one peer
    domain at a time, barrier between shifts; larger = more peers in flight, as NCCL's grouped
    p2p does). With more than ``max_phases`` phases, ``max_phases`` evenly spaced ones are
    simulated and weighted so the bytes add up (exact when nothing is skipped; docs/fabric.md).
    """
    op = check_collective(op)
    g = int(ranks_per_domain)
    if n_ranks < 1 or g < 1:
        raise InputError(f"need at least one rank and one rank per domain, got n={n_ranks}, g={g}")
    if n_ranks % g:
        raise InputError(
            f"{n_ranks} ranks do not fill whole domains of {g}",
            hint="use a rank count that is a multiple of ranks per domain",
        )
    if window < 1 or max_phases < 1:
        raise InputError(f"window and max_phases must be >= 1, got {window}, {max_phases}")
    D = n_ranks // g
    if D < 2 or size_bytes <= 0:
        return []
    chunk = float(size_bytes) / n_ranks
    if op == "all_reduce":
        s, d = _ring_pairs(n_ranks, g)
        return [Phase(s, d, np.full(s.size, chunk), repeat=2 * (D - 1), name="ring step")]
    if op in ("all_gather", "reduce_scatter"):
        s, d = _ring_pairs(n_ranks, g)
        return [Phase(s, d, np.full(s.size, chunk), repeat=D - 1, name="ring step")]
    # all-to-all: windows of consecutive domain shifts
    starts = np.arange(1, D, window)
    if starts.size > max_phases:
        starts = np.unique(starts[np.round(np.linspace(0, starts.size - 1, max_phases)).astype(int)])
    groups = [np.arange(k, min(k + window, D)) for k in starts]
    w = (D - 1) / sum(gr.size for gr in groups)
    out = []
    for gr in groups:
        pairs = [_ring_pairs(n_ranks, g, int(k)) for k in gr]
        s = np.concatenate([p[0] for p in pairs])
        d = np.concatenate([p[1] for p in pairs])
        name = f"shift {gr[0]}" if gr.size == 1 else f"shifts {gr[0]}-{gr[-1]}"
        out.append(Phase(s, d, np.full(s.size, g * chunk), repeat=w, name=name))
    return out


def step_phases(*, tp: int, pp: int, dp: int, ranks_per_domain: int, grad_bytes: float,
                act_bytes: float, microbatches: int = 1) -> list[Phase]:
    """Per-phase traffic of one training step from a TP x PP x DP layout (TP innermost, then PP,
    then DP; rank = (dp_i * pp + pp_i) * tp + tp_i):

    1. forward pipeline sends: every stage s -> s+1, ``act_bytes`` per micro-batch, ``microbatches`` times;
    2. backward pipeline sends: s+1 -> s, the same;
    3. data-parallel ring all-reduce of the gradients: each rank holds ``grad_bytes/(tp*pp)``;
       ring over the DP index, 2(dp-1) steps of that / dp.
    Flows inside one scale-up domain are dropped later (they ride NVLink).
    """
    for name, v in (("tp", tp), ("pp", pp), ("dp", dp), ("microbatches", microbatches)):
        if v < 1:
            raise InputError(f"{name} must be at least 1, got {v}")
    n = tp * pp * dp
    r = np.arange(n)
    t, p, d = r % tp, (r // tp) % pp, r // (tp * pp)
    phases: list[Phase] = []
    if pp > 1 and act_bytes > 0:
        m = p < pp - 1
        s = r[m]
        nxt = (d[m] * pp + p[m] + 1) * tp + t[m]
        phases.append(Phase(s, nxt, np.full(s.size, float(act_bytes)), repeat=microbatches, name="pp forward"))
        phases.append(Phase(nxt, s, np.full(s.size, float(act_bytes)), repeat=microbatches, name="pp backward"))
    if dp > 1 and grad_bytes > 0:
        per_rank = float(grad_bytes) / (tp * pp)
        dst = (((d + 1) % dp) * pp + p) * tp + t
        phases.append(Phase(r, dst, np.full(n, per_rank / dp), repeat=2 * (dp - 1), name="dp all-reduce step"))
    return phases


# ---------------------------------------------------------------- user traffic matrices
def _num(value, what: str, where: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{where}: {what} {value!r} is not a number") from None
    if not np.isfinite(v):
        raise InputError(f"{where}: {what} {value!r} is not finite")
    return v


def _endpoint(value, n_gpus: int, where: str) -> int:
    text = str(value).strip().lower()
    for pfx in ("gpu", "rank"):
        if text.startswith(pfx):
            text = text[len(pfx):].lstrip(":-_ ")
    try:
        i = int(text)
    except ValueError:
        raise InputError(
            f"{where}: unknown endpoint {value!r}", hint=f"endpoints are GPU indices 0..{n_gpus - 1} (or gpuN)"
        ) from None
    if not 0 <= i < n_gpus:
        raise InputError(f"{where}: unknown endpoint {value!r}: the cluster has GPUs 0..{n_gpus - 1}")
    return i


def read_matrix(path: str | Path, n_gpus: int) -> Phase:
    """Read a traffic matrix from CSV (header ``src,dst,bytes[,start_s]``) or YAML (a list of
    mappings with those keys, or ``{flows: [...]}``). Sizes accept K/M/G suffixes."""
    from ..units import parse_size

    p = Path(path)
    rows: list[dict] = []
    if p.suffix.lower() in (".yaml", ".yml"):
        data = read_yaml(p, "traffic matrix", mapping=False)
        if isinstance(data, dict):
            data = data.get("flows")
        if not isinstance(data, list):
            raise InputError(f"traffic matrix {str(p)!r}: expected a list of flows (src, dst, bytes [, start_s])")
        rows = data
    else:
        reader = csv.DictReader(io.StringIO(read_text(p, "traffic matrix")))
        if reader.fieldnames is None or not {"src", "dst", "bytes"} <= {f.strip() for f in reader.fieldnames}:
            raise InputError(
                f"traffic matrix {str(p)!r}: the CSV header must name src, dst, bytes (and optionally start_s)",
                hint="first line: src,dst,bytes,start_s",
            )
        rows = [{k.strip(): v for k, v in row.items() if k is not None} for row in reader]
    if not rows:
        raise InputError(f"traffic matrix {str(p)!r} has no flows")
    src, dst, size, start = [], [], [], []
    for i, row in enumerate(rows):
        where = f"{p.name} flow {i + 1}"
        if not isinstance(row, dict) or not {"src", "dst", "bytes"} <= set(row):
            raise InputError(f"{where}: needs src, dst and bytes")
        s = _endpoint(row["src"], n_gpus, where)
        d = _endpoint(row["dst"], n_gpus, where)
        if s == d:
            raise InputError(f"{where}: source and destination are the same GPU {s}")
        b = row["bytes"]
        if isinstance(b, str) and b.strip() and b.strip()[-1:].isalpha():
            if b.strip().startswith("-"):
                raise InputError(f"{where}: negative size {b!r}", hint="sizes are bytes >= 0")
            from ..errors import in_file

            with in_file(where):
                b = parse_size(b)
        b = _num(b, "bytes", where)
        if b < 0:
            raise InputError(f"{where}: negative size {row['bytes']!r}", hint="sizes are bytes >= 0")
        from ..limits import check_limit

        check_limit("message_bytes", b, flag=f"{where}: bytes")
        t0 = _num(row.get("start_s", 0) or 0, "start_s", where)
        if t0 < 0:
            raise InputError(f"{where}: negative start time {t0}")
        src.append(s)
        dst.append(d)
        size.append(b)
        start.append(t0)
    return Phase(np.array(src), np.array(dst), np.array(size, dtype=float), name=p.name,
                 start=np.array(start, dtype=float), merge_pxn=False)


# ---------------------------------------------------------------- jobs (multi-tenancy)
@dataclass(frozen=True, slots=True)
class JobSpec:
    name: str
    gpus: int
    placement: str = "packed"
    traffic: str = "all_reduce"
    size_bytes: float = float(1 << 30)
    extra: dict = field(default_factory=dict)


def read_jobs(path: str | Path) -> list[JobSpec]:
    """Jobs YAML: ``jobs: [{name, gpus, placement: packed|spread, traffic: all_reduce|..., size: 1G}]``."""

    from ..units import parse_size

    p = Path(path)
    data = read_yaml(p, "jobs file", mapping=False)
    jobs = data.get("jobs") if isinstance(data, dict) else data
    if not isinstance(jobs, list) or not jobs:
        raise InputError(f"jobs file {str(p)!r}: expected `jobs:` with a list of jobs")
    out = []
    for i, j in enumerate(jobs):
        if not isinstance(j, dict) or "gpus" not in j:
            raise InputError(f"jobs file {p.name} job {i + 1}: needs at least `gpus`")
        unknown = set(j) - {"name", "gpus", "placement", "traffic", "size"}
        if unknown:
            raise InputError(f"jobs file {p.name} job {i + 1}: unknown field(s) {', '.join(sorted(unknown))}",
                             hint="fields: name, gpus, placement, traffic, size")
        pl = str(j.get("placement", "packed"))
        if pl not in ("packed", "spread"):
            raise UnknownNameError("placement", pl, ("packed", "spread"))
        from ..schemas import positive_count

        gpus = positive_count(j["gpus"], f"jobs file {p.name} job {i + 1}: gpus")
        size = j.get("size", "1G")
        out.append(JobSpec(name=str(j.get("name", f"job{i + 1}")), gpus=gpus, placement=pl,
                           traffic=check_collective(str(j.get("traffic", "all_reduce"))),
                           size_bytes=float(parse_size(str(size)))))
    return out


def place_jobs(jobs: Sequence[JobSpec], n_domains: int, gpus_per_domain: int) -> list[np.ndarray]:
    """GPU ids of each job. Jobs take whole domains in file order: ``packed`` the first free
    contiguous run (fewest leaves and pods), ``spread`` free domains evenly spaced over the cluster."""
    free = np.ones(n_domains, dtype=bool)
    out = []
    for job in jobs:
        need = -(-job.gpus // gpus_per_domain)
        if need > free.sum():
            raise InputError(
                f"job {job.name!r} needs {need} domains but only {int(free.sum())} are free",
                hint="add --domains or shrink the jobs",
            )
        idx = np.nonzero(free)[0]
        if job.placement == "packed":
            chosen = idx[:need]
        else:
            chosen = idx[np.round(np.linspace(0, idx.size - 1, need)).astype(int)] if need > 1 else idx[:1]
        free[chosen] = False
        gpus = (chosen[:, None] * gpus_per_domain + np.arange(gpus_per_domain)[None, :]).ravel()[: job.gpus]
        out.append(gpus)
    return out

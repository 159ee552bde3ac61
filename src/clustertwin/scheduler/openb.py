"""The openb GPU-sharing experiment (Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing
Workloads with Fragmentation Gradient Descent", USENIX ATC 2023), re-implemented on numpy arrays.

Semantics follow the paper's simulator, github.com/hkust-adsl/kubernetes-scheduler-simulator
(``pkg/simulator``, ``pkg/simulator/plugin``, ``pkg/utils/frag.go``, ``pkg/type/resource.go``,
``scripts/generate_config_and_run.py``, ``experiments/run_scripts/generate_run_scripts.py``,
``experiments/analysis/merge_alloc_discrete_0920.py``). What was read there and what is assumed is
listed in docs/scheduler.md ("openb: what we reproduce").

The experiment
--------------
* The typical-pod distribution (what FGD's fragmentation measure expects to arrive) is taken from the
  whole pod list before tuning: pods are keyed by (CPU milli, GPU milli, GPU count, GPU-type
  constraint), CPU-only pods included, the most frequent keys kept until they cover 95 % of the pods,
  frequencies renormalised (``GetTypicalPods``; threshold 95, step 1, as the run scripts set them).
* Pods are sorted by name and shuffled with the seed; the list is then tuned to 1.3 x the cluster's
  GPU capacity (milli-GPU): pods drawn at random (with replacement) from the original list are
  appended while the total stays under the target, or random pods are removed while it is above
  (``TunePodsByNodeTotalResource``).
* Pods arrive one by one and never depart. Filters: CPU and memory requests fit, the GPU type is in
  the pod's ``gpu_spec`` (empty = any), and enough GPUs have ``gpu_milli`` left (a multi-GPU pod needs
  whole free GPUs). The policy scores the feasible nodes (integer scores 0-100 as in
  kube-scheduler); the highest score wins. Ties go to the node whose name sorts first: the reference
  runs a kube-scheduler fork (github.com/mental2008/kubernetes v1.20.5-minor, ``selectHost``: "for
  reproducibility, choose the smallest lexicographical order") and prefixes every node name with its
  place in a seeded random permutation, so ties follow one random node order per run. The policy's
  GPU-selection rule picks the device(s).
* After every pod the allocated share (milli-GPU in use / total milli-GPU) and the arrived share
  (cumulative requested milli-GPU / total milli-GPU, failed pods included) are recorded; the curve
  averages the allocated share of the events whose arrived share rounds to each whole per cent
  (falling back to +-1 % when a level has no event), 0-130 %.

Our random stream is numpy's PCG64, not Go's ``math/rand``: the seed gives a reproducible run, but
not the same shuffle as the Go simulator's run with that seed. Comparisons are over seed averages.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
from collections import Counter
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np

from ..errors import InputError, UnknownNameError

POLICIES: tuple[str, ...] = ("random", "dotprod", "clustering", "packing", "bestfit", "fgd")
POLICY_LABELS = {"random": "Random-fit", "dotprod": "DotProduct", "clustering": "GPU Clustering",
                 "packing": "GPU Packing", "bestfit": "Best-fit", "fgd": "FGD"}
MILLI = 1000
MAX_GPUS_PER_NODE = 8
MAX_SPEC_CPU = 128000.0  # gpushareutils.MaxSpecCpu (milli-CPU), used by DotProduct/Best-fit normalisation
MAX_SPEC_GPU = 8000.0    # gpushareutils.MaxSpecGpu (milli-GPU)
TUNE_RATIO = 1.3
TYPICAL_POD_THRESHOLD = 0.95
MAX_ARRIVED_PCT = 130

_NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
_POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
_DATA = "data/openb"


# ----------------------------------------------------------------------------------------------- input
@dataclass(frozen=True)
class OpenbNodes:
    """GPU nodes as arrays (one entry per node, in file order)."""

    names: tuple[str, ...]
    cpu: np.ndarray   # milli-CPU allocatable
    mem: np.ndarray   # MiB
    ngpu: np.ndarray  # GPUs on the node (0..8)
    model: tuple[str, ...]
    source: str = ""

    @property
    def total_gpus(self) -> int:
        return int(self.ngpu.sum())


@dataclass(frozen=True)
class OpenbPods:
    """Tasks as arrays (file order)."""

    names: tuple[str, ...]
    cpu: np.ndarray
    mem: np.ndarray
    num_gpu: np.ndarray
    gpu_milli: np.ndarray  # per GPU; 0 for CPU-only tasks
    spec: tuple[str, ...]  # allowed GPU models, '|'-separated; '' = any
    source: str = ""

    def __len__(self) -> int:
        return len(self.names)


def vendored_names() -> list[str]:
    """Names of the openb lists shipped with the package (``openb_pod_list_default``, ...)."""
    root = resources.files("clustertwin.scheduler").joinpath(_DATA)
    return sorted(p.name.removesuffix(".csv.gz") for p in root.iterdir() if p.name.endswith(".csv.gz"))


def _resolve(ref: str | Path, kind: str) -> tuple[str, bytes]:
    """A path, or the name of a vendored list (with or without the ``openb_pod_list_`` prefix)."""
    p = Path(ref)
    if p.exists():
        if p.is_dir():
            raise InputError(f"openb {kind} file {str(p)!r} is a folder, not a file", hint="give the path of a CSV file")
        try:
            raw = p.read_bytes()
        except OSError as exc:
            raise InputError(f"cannot read openb {kind} file {str(p)!r}: {exc.strerror}") from None
        if p.suffix == ".gz":
            try:
                raw = gzip.decompress(raw)
            except (OSError, EOFError):
                raise InputError(f"openb {kind} file {str(p)!r} is not a valid gzip file") from None
        return str(p), raw
    names = vendored_names()
    prefix = "openb_node_list_" if kind == "node" else "openb_pod_list_"
    name = str(ref).removesuffix(".gz").removesuffix(".csv")
    cand = name if name.startswith("openb_") else prefix + name
    if cand in names:
        data = resources.files("clustertwin.scheduler").joinpath(f"{_DATA}/{cand}.csv.gz").read_bytes()
        return f"{cand} (vendored)", gzip.decompress(data)
    short = [n.removeprefix(prefix) for n in names if n.startswith(prefix)]
    raise UnknownNameError(f"openb {kind} list (or file)", name, short + [n for n in names if n.startswith(prefix)],
                           hint=f"give a CSV path or a vendored list: {', '.join(short)}")


def _rows(src: str, raw: bytes, kind: str, required: tuple[str, ...]) -> list[dict[str, str]]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"openb {kind} file {src!r} is not UTF-8 text") from None
    reader = csv.DictReader(io.StringIO(text))
    cols = reader.fieldnames or []
    missing = [c for c in required if c not in cols]
    if missing:
        raise InputError(f"openb {kind} file {src!r} lacks column(s) {', '.join(missing)}",
                         hint=f"an openb {kind} list has the columns {', '.join(required)}")
    rows = list(reader)
    if not rows:
        raise InputError(f"openb {kind} file {src!r} has no rows")
    return rows


def _int(src: str, line: int, ident: str, row: dict[str, str], key: str, lo: int = 0, hi: int | None = None) -> int:
    val = (row.get(key) or "").strip()
    try:
        f = float(val)
        if not math.isfinite(f) or f != int(f):
            raise ValueError
        v = int(f)
    except ValueError:
        raise InputError(f"{src}: line {line} ({ident}): field {key!r} = {val!r} is not a whole number",
                         hint="fix the row; openb resource columns are whole numbers") from None
    if v < lo or (hi is not None and v > hi):
        rng = f"{lo}..{hi}" if hi is not None else f">= {lo}"
        raise InputError(f"{src}: line {line} ({ident}): field {key!r} = {v} is out of range ({rng})")
    return v


def load_nodes(ref: str | Path = "gpu_node") -> OpenbNodes:
    src, raw = _resolve(ref, "node")
    rows = _rows(src, raw, "node", _NODE_COLUMNS)
    names, cpu, mem, ngpu, model = [], [], [], [], []
    for i, r in enumerate(rows, start=2):
        ident = f"node {r.get('sn') or '?'}"
        names.append(r["sn"])
        cpu.append(_int(src, i, ident, r, "cpu_milli"))
        mem.append(_int(src, i, ident, r, "memory_mib"))
        ngpu.append(_int(src, i, ident, r, "gpu", 0, MAX_GPUS_PER_NODE))
        model.append((r.get("model") or "").strip())
    if sum(ngpu) == 0:
        raise InputError(f"openb node file {src!r} has no GPUs", hint="use a GPU node list (openb_node_list_gpu_node)")
    return OpenbNodes(tuple(names), np.array(cpu, np.int64), np.array(mem, np.int64), np.array(ngpu, np.int64),
                      tuple(model), src)


def load_pods(ref: str | Path = "default") -> OpenbPods:
    src, raw = _resolve(ref, "pod")
    rows = _rows(src, raw, "pod", _POD_COLUMNS)
    names, cpu, mem, num, milli, spec = [], [], [], [], [], []
    for i, r in enumerate(rows, start=2):
        ident = f"pod {r.get('name') or '?'}"
        n = _int(src, i, ident, r, "num_gpu", 0, MAX_GPUS_PER_NODE)
        m = _int(src, i, ident, r, "gpu_milli", 0)
        if n == 0 or m == 0:
            n, m = 0, 0  # no GPU annotation: a CPU-only task (pod_csv_to_yaml.py writes none)
        m = min(m, MILLI)  # pod_csv_to_yaml.py clamps gpu_milli > 1000 to 1000
        if n > 1 and m < MILLI:
            raise InputError(f"{src}: line {i} ({ident}): field 'gpu_milli' = {m} with num_gpu = {n}: a task on "
                             "more than one GPU must take whole GPUs", hint="set gpu_milli to 1000 or num_gpu to 1")
        names.append(r["name"])
        cpu.append(_int(src, i, ident, r, "cpu_milli"))
        mem.append(_int(src, i, ident, r, "memory_mib"))
        num.append(n)
        milli.append(m)
        spec.append("|".join(x for x in (r.get("gpu_spec") or "").split("|") if x.strip()))
    return OpenbPods(tuple(names), np.array(cpu, np.int64), np.array(mem, np.int64), np.array(num, np.int64),
                     np.array(milli, np.int64), tuple(spec), src)


# ------------------------------------------------------------------------------------- typical pods
@dataclass(frozen=True)
class TypicalPods:
    """FGD's expected workload: resource keys and their (renormalised) frequencies."""

    cpu: np.ndarray
    milli: np.ndarray
    num: np.ndarray
    spec: tuple[str, ...]
    freq: np.ndarray

    def __len__(self) -> int:
        return len(self.freq)


def typical_pods(pods: OpenbPods, threshold: float = TYPICAL_POD_THRESHOLD) -> TypicalPods:
    """``GetTypicalPods`` with isInvolvedCpuPods=true, podPopularityThreshold=95, podIncreaseStep=1,
    gpuResWeight=0: keys sorted by decreasing count (ties: larger key first, as Go's reverse sort of
    (MilliCpu, MilliGpu, GpuNumber, GpuType)); keep keys until they cover ``threshold`` of the pods."""
    cpu = np.where(pods.cpu > 0, pods.cpu, 100)  # kube-scheduler's non-zero CPU default (100m)
    counts = Counter(zip(cpu.tolist(), pods.gpu_milli.tolist(), pods.num_gpu.tolist(), pods.spec, strict=True))
    keys = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
    total = float(len(pods))
    expected = threshold * total
    chosen, cum = [], 0.0
    for key, cnt in keys:
        if cum >= expected:
            break
        chosen.append((key, cnt))
        cum += cnt
    freq = np.array([c for _, c in chosen], float) / total
    freq = freq / (cum / total)
    return TypicalPods(np.array([k[0] for k, _ in chosen], np.int64), np.array([k[1] for k, _ in chosen], np.int64),
                       np.array([k[2] for k, _ in chosen], np.int64), tuple(k[3] for k, _ in chosen), freq)


def _accessible(spec: str, model: str) -> bool:
    """``IsNodeAccessibleToPodByType``: an empty spec accepts any GPU node."""
    parts = [x for x in spec.split("|") if x]
    return not parts or model in parts


class _FragModel:
    """FGD's node fragmentation (``NodeGpuShareFragAmountScore``) in closed form over arrays.

    For a node with GPU type tau, CPU left c and per-GPU milli left L (total T):
      frag = sum_t f_t * T  -  sum_{t satisfied} f_t * (T - sum(L[L < m_t]))
    where t is satisfied when it asks for GPUs (m_t > 0), may use tau, finds n_t GPUs with
    >= m_t left and c >= cpu_t (the paper's Q3 case; everything else counts the node's whole idle GPU
    as fragment). Typical pods are grouped by (m, n, spec); within a group the satisfied frequency is a
    step function of c, tabulated on the sorted typical CPU values."""

    def __init__(self, tp: TypicalPods, models: tuple[str, ...]):
        self.total_freq = float(tp.freq.sum())
        gpu = tp.milli > 0
        gkeys = sorted({(int(m), int(n), s) for m, n, s in zip(tp.milli[gpu], tp.num[gpu],
                                                              (tp.spec[i] for i in np.flatnonzero(gpu)), strict=True)})
        self.gm = np.array([k[0] for k in gkeys], np.int64)
        self.gn = np.array([k[1] for k in gkeys], np.int64)
        self.cpu_levels = np.unique(tp.cpu)
        G, R = len(gkeys), len(self.cpu_levels) + 1
        table = np.zeros((len(models), R, max(G, 1)))
        gindex = {k: i for i, k in enumerate(gkeys)}
        for t in np.flatnonzero(gpu):
            g = gindex[(int(tp.milli[t]), int(tp.num[t]), tp.spec[t])]
            r0 = int(np.searchsorted(self.cpu_levels, tp.cpu[t], side="left")) + 1  # first rank with c >= cpu_t
            for mi, model in enumerate(models):
                if _accessible(tp.spec[t], model):
                    table[mi, r0:, g] += tp.freq[t]
        self.table = table  # [model, cpu rank, group] -> satisfied frequency
        self.G = G

    def rank(self, cpu_left: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.cpu_levels, cpu_left, side="right")

    def counts(self, gpu_left: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per node and group: GPUs with >= m left, and milli left on GPUs with < m left."""
        ge = gpu_left[:, :, None] >= self.gm[None, None, :]
        cnt = ge.sum(axis=1)
        slt = np.where(ge, 0, gpu_left[:, :, None]).sum(axis=1)
        return cnt, slt

    def frag(self, tot: np.ndarray, cpu_left: np.ndarray, model_idx: np.ndarray, cnt: np.ndarray,
             slt: np.ndarray) -> np.ndarray:
        w = self.table[model_idx, self.rank(cpu_left)]  # (C, G)
        sat = w * (cnt >= self.gn[None, :]) * (tot[:, None] - slt)
        return self.total_freq * tot - sat.sum(axis=1)


# --------------------------------------------------------------------------------------- simulation
@dataclass
class OpenbRun:
    policy: str
    seed: int
    total_gpus: int
    arrived_milli: np.ndarray  # after each pod
    used_milli: np.ndarray
    num_pods: int
    num_failed: int
    workload: str = ""
    nodes_source: str = ""
    curve: list[dict] = field(default_factory=list)

    def to_json(self, events: bool = False) -> dict:
        out = {"policy": self.policy, "seed": self.seed, "total_gpus": self.total_gpus, "curve": self.curve,
               "workload": self.workload, "nodes": self.nodes_source, "num_pods": self.num_pods,
               "num_failed": self.num_failed, "tune_ratio": TUNE_RATIO}
        return out


def discrete_curve(arrived_milli: np.ndarray, used_milli: np.ndarray, total_gpus: int,
                   max_pct: int = MAX_ARRIVED_PCT) -> list[dict]:
    """``merge_alloc_discrete_0920.py``: per whole arrived per cent, the mean allocated per cent of the
    events at that level (both in % of the cluster's milli-GPU; arrived rounded to 0 and allocated to 2
    decimals first), falling back to the events within +-1 % when a level has none."""
    arr = np.array([round(x) for x in (arrived_milli / total_gpus / 10).tolist()], float)
    alloc = np.array([round(x, 2) for x in (used_milli / total_gpus / 10).tolist()])
    out = []
    for k in range(max_pct + 1):
        sel = arr == k
        if not sel.any():
            sel = (arr >= k - 1) & (arr <= k + 1)
            if not sel.any():
                continue
        out.append({"arrived_pct": k, "allocated_pct": round(float(alloc[sel].mean()), 2)})
    return out


def mean_curve(runs: list[OpenbRun]) -> list[dict]:
    """The per-level mean of several runs' curves (levels every run has), as the paper averages seeds."""
    maps = [{p["arrived_pct"]: p["allocated_pct"] for p in r.curve} for r in runs]
    levels = sorted(set.intersection(*(set(m) for m in maps))) if maps else []
    return [{"arrived_pct": k, "allocated_pct": round(sum(m[k] for m in maps) / len(maps), 2)} for k in levels]


def arrival_order(pods: OpenbPods, seed: int, rng: np.random.Generator, total_milli_gpu: int,
                  tune_ratio: float = TUNE_RATIO) -> list[int]:
    """Indices into ``pods`` in arrival order: name-sorted, shuffled, tuned to ``tune_ratio`` x capacity."""
    by_name = sorted(range(len(pods)), key=lambda i: pods.names[i])
    order = [by_name[i] for i in rng.permutation(len(by_name))]
    req = pods.num_gpu * pods.gpu_milli
    total = int(req.sum())
    target = tune_ratio * total_milli_gpu
    if tune_ratio > 0 and total > target:
        while total > target:
            idx = int(rng.integers(len(order)))
            total -= int(req[order.pop(idx)])
    elif tune_ratio > 0 and total < target:
        # tuneUpPods: stops when the next draw's *per-GPU* milli would overshoot (as in the reference)
        while True:
            j = by_name[int(rng.integers(len(by_name)))]
            if total + int(pods.gpu_milli[j]) > target:
                break
            total += int(req[j])
            order.append(j)
    return order


def run_openb(nodes: OpenbNodes, pods: OpenbPods, policy: str, seed: int = 42,
              tune_ratio: float = TUNE_RATIO) -> OpenbRun:
    """Run one policy over the tuned, shuffled pod list; returns the allocation curve."""
    if policy not in POLICIES:
        raise UnknownNameError("openb policy", policy, POLICIES)
    rng = np.random.default_rng(seed)
    N = len(nodes.names)
    total_gpus = nodes.total_gpus
    order = arrival_order(pods, seed, rng, total_gpus * MILLI, tune_ratio)
    rank = rng.permutation(N)  # tie-break order: the "%04d-" name prefix of syncClusterResourceList

    models = tuple(sorted(set(nodes.model)))
    model_idx = np.array([models.index(m) for m in nodes.model], np.int64)
    cpu_left = nodes.cpu.copy()
    mem_left = nodes.mem.copy()
    slot = np.arange(MAX_GPUS_PER_NODE)[None, :]
    present = slot < nodes.ngpu[:, None]
    gpu_left = np.where(present, MILLI, 0).astype(np.int64)  # absent slots hold 0 and are never chosen
    ngpu = nodes.ngpu

    acc_cache: dict[str, np.ndarray] = {}

    def acc(spec: str) -> np.ndarray:
        if spec not in acc_cache:
            ok = np.array([_accessible(spec, m) for m in models])
            acc_cache[spec] = ok[model_idx] & (ngpu > 0)
        return acc_cache[spec]

    fm = cnt = slt = frag = None
    if policy == "fgd":
        fm = _FragModel(typical_pods(pods), models)
        cnt, slt = fm.counts(gpu_left)
        frag = fm.frag(gpu_left.sum(1), cpu_left, model_idx, cnt, slt)
    # GPU Clustering: per node, how many pods of each affinity tag it hosts (share, 1-gpu .. 8-gpu)
    affinity = np.zeros((N, MAX_GPUS_PER_NODE + 1), np.int64)

    arrived = np.zeros(len(order), np.int64)
    used = np.zeros(len(order), np.int64)
    arr_acc = used_acc = 0
    failed = 0
    all_nodes = np.ones(N, bool)

    for e, p in enumerate(order):
        c, mem, n, m, spec = int(pods.cpu[p]), int(pods.mem[p]), int(pods.num_gpu[p]), int(pods.gpu_milli[p]), pods.spec[p]
        arr_acc += n * m
        arrived[e] = arr_acc
        feas = (cpu_left >= c) & (mem_left >= mem)
        if n > 0:
            feas &= acc(spec) & ((gpu_left >= m).sum(1) >= n)
        else:
            feas &= all_nodes
        f = np.flatnonzero(feas)
        if f.size == 0:
            failed += 1
            used[e] = used_acc
            continue
        share = n == 1 and m < MILLI
        gpu_slot: int | None = None  # for share pods chosen by the policy itself

        if policy == "random":
            node = int(f[rng.integers(f.size)])
            if share:
                ok = np.flatnonzero(gpu_left[node] >= m)
                gpu_slot = int(ok[rng.integers(ok.size)])
        elif policy == "fgd":
            node, gpu_slot = _fgd_choose(fm, f, c, n, m, share, gpu_left, cpu_left, model_idx, cnt, slt, frag, rank)
        else:
            if policy == "dotprod":
                tot = gpu_left[f].sum(1)
                dot = (cpu_left[f] / MAX_SPEC_CPU) * (c / MAX_SPEC_CPU) + (tot / MAX_SPEC_GPU) * (n * m / MAX_SPEC_GPU)
                score = (100.0 * (1.0 - dot / 2.0)).astype(np.int64)
            elif policy == "bestfit":
                tot = gpu_left[f].sum(1)
                s = (cpu_left[f] - c) / MAX_SPEC_CPU * 0.5 + (tot - n * m) / MAX_SPEC_GPU * 0.5
                raw = ((1.0 - s) * 100.0).astype(np.int64)
                hi, lo = int(raw.max()), int(raw.min())
                score = np.zeros_like(raw) if hi == lo else (raw - lo) * 100 // (hi - lo)
            elif policy == "clustering":
                if n == 0:
                    score = np.zeros(f.size, np.int64)
                else:
                    tag = 0 if share else n
                    tot = gpu_left[f].sum(1)
                    base = 25 * (8000 - tot) // 8000
                    aff = affinity[f]
                    has = aff[:, tag] > 0
                    distinct = (aff > 0).sum(1)
                    score = base + np.where(has, np.where(distinct == 1, 75, 50), np.where(distinct == 0, 25, 0))
            else:  # packing
                score = _packing_score(gpu_left[f], ngpu[f], n, m)
            best = f[score == score.max()]
            node = int(best[np.argmin(rank[best])])

        # reserve: place the pod
        cpu_left[node] -= c
        mem_left[node] -= mem
        if n > 0:
            row = gpu_left[node]
            if share:
                if gpu_slot is None:  # "best" GPU selection: the tightest GPU that fits (lowest index on ties)
                    cand = np.where(row >= m, row, MILLI + 1)
                    gpu_slot = int(np.argmin(cand))
                row[gpu_slot] -= m
                affinity[node, 0] += 1
            else:  # AllocateExclusiveGpuId: the first fully free GPUs
                free = np.flatnonzero(row == MILLI)[:n]
                row[free] = 0
                affinity[node, n] += 1
            used_acc += n * m
        if fm is not None:
            cn, sl = fm.counts(gpu_left[node:node + 1])
            cnt[node], slt[node] = cn[0], sl[0]
            frag[node] = fm.frag(gpu_left[node:node + 1].sum(1), cpu_left[node:node + 1], model_idx[node:node + 1],
                                 cn, sl)[0]
        used[e] = used_acc

    run = OpenbRun(policy, seed, total_gpus, arrived, used, len(order), failed,
                   workload=pods.source, nodes_source=nodes.source)
    run.curve = discrete_curve(arrived, used, total_gpus)
    return run


def _packing_score(rows: np.ndarray, ngpu: np.ndarray, n: int, m: int) -> np.ndarray:
    """``getPackingScore`` (GPU Packing): shared GPUs first, then free GPUs on used nodes, then free nodes."""
    if n == 0:
        return np.zeros(len(rows), np.int64)
    ff = (rows == MILLI).sum(1)
    all_free = ff == ngpu
    case3 = np.maximum(33 - ff, ff)
    if n == 1:
        cand = np.where(rows >= m, rows, MILLI + 1)
        tight = cand.min(1)  # the least-sufficient GPU (ascending order, as the reference)
        case = np.where(tight == MILLI, np.maximum(50 - 1, 33),
                        np.maximum(100 - (tight * 100 // MILLI) // 10, 50))
    else:  # whole GPUs: only free ones fit, so all n used GPUs are fully free
        case = np.full(len(rows), max(50 - n, 33), np.int64)
    return np.where(all_free, case3, case).astype(np.int64)


def _sigmoid_score(delta: np.ndarray) -> np.ndarray:
    return (100.0 / (1.0 + np.exp(-delta / 1000.0))).astype(np.int64)


def _fgd_choose(fm: _FragModel, f: np.ndarray, c: int, n: int, m: int, share: bool, gpu_left: np.ndarray,
                cpu_left: np.ndarray, model_idx: np.ndarray, cnt: np.ndarray, slt: np.ndarray, frag: np.ndarray,
                rank: np.ndarray) -> tuple[int, int | None]:
    """FGD (``calculateGpuShareFragExtendScore``): the node (and GPU) whose placement reduces the node's
    expected fragmentation most, as int(100 * sigmoid(-delta_frag / 1000))."""
    tot = gpu_left[f].sum(1)
    cpu_after = cpu_left[f] - c
    if not share:
        cnt_a = cnt[f] - n if n > 0 else cnt[f]  # whole GPUs (1000 >= every m) go to 0 (< every m adds 0)
        after = fm.frag(tot - n * m, cpu_after, model_idx[f], cnt_a, slt[f])
        score = _sigmoid_score(frag[f] - after)
        best = f[score == score.max()]
        return int(best[np.argmin(rank[best])]), None
    rows = gpu_left[f]  # (K, 8)
    ok = rows >= m
    # equal values on one node give equal scores: keep the first slot of each value (the reference keeps
    # the lowest index among equal scores)
    dup = (rows[:, :, None] == rows[:, None, :]) & np.tri(MAX_GPUS_PER_NODE, k=-1, dtype=bool).T[None, :, :]
    first = ~dup.any(axis=1)
    ki, sj = np.nonzero(ok & first)  # candidates in (node, slot) order
    a = rows[ki, sj]
    b = a - m
    nk = f[ki]
    gm = fm.gm[None, :]
    cnt_a = cnt[nk] - (a[:, None] >= gm) + (b[:, None] >= gm)
    slt_a = slt[nk] - np.where(a[:, None] < gm, a[:, None], 0) + np.where(b[:, None] < gm, b[:, None], 0)
    after = fm.frag(tot[ki] - m, cpu_after[ki], model_idx[nk], cnt_a, slt_a)
    score = _sigmoid_score(frag[nk] - after)
    # per node: the best GPU (first in index order among equal scores)
    starts = np.flatnonzero(np.r_[True, ki[1:] != ki[:-1]])
    node_best = np.maximum.reduceat(score, starts)
    top = np.flatnonzero(node_best == node_best.max())
    pick = int(top[np.argmin(rank[f[ki[starts[top]]]])])
    s0 = starts[pick]
    s1 = starts[pick + 1] if pick + 1 < starts.size else score.size
    j = s0 + int(np.argmax(score[s0:s1] == node_best[pick]))
    return int(f[ki[j]]), int(sj[j])

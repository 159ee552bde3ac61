"""Design-space sweeps: a YAML grid of cluster designs x models x global batches.

Each job (one design, one model, one global batch) is searched for its best plan; jobs are grouped in
chunks; a chunk's id is a hash of its inputs (jobs, search options, catalog and tool versions), so
a restarted sweep skips the chunks already in the results store. The Pareto front of throughput vs
cost vs power (cost and power from the bill of materials) is computed over the stored rows.

Example sweep file (``scenarios/sweeps/*.yaml``)::

    name: h100-ib-vs-roce
    designs:                 # a grid (or a list of grids); every key takes a value or a list
      system: hgx-h100
      domains: [64, 128]     # scale-up domains (or `gpus:`)
      fabric: [ib-ndr-400g, roce-400g]
      oversubscription: [1, 2]
    models: [llama3-70b]
    global_batch: [512, 1024]
    seq_len: 8192
    stack: megatron-core     # optional software stack preset (clustertwin stacks lists them)
    engine_options: {flash_attention: true}   # optional, overrides the stack's engine settings
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, cast

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    field_validator,
)

from ..errors import InputError
from ..userfiles import read_yaml
from ..workload.rules import DEFAULT_MEMORY_MARGIN_GB
from ..workload.stacks import DEFAULT_STACK, get_stack
from .evaluator import AnalyticalEvaluator, Evaluator, resolve_model
from .pareto import pareto_mask
from .search import search, search_many
from .space import RECOMPUTE, ModelShape, SpaceOptions, with_stack

# ------------------------------------------------------------------ the sweep file (pydantic at the edge)


def _as_list(v: Any) -> list:
    return v if isinstance(v, list) else [v]


class DesignGridIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    system: list[str]
    domains: list[PositiveInt] | None = None
    gpus: list[PositiveInt] | None = None
    fabric: list[str | None] = Field(default_factory=lambda: [None])
    oversubscription: list[PositiveFloat] = Field(default_factory=lambda: [1.0])

    @field_validator("system", "domains", "gpus", "fabric", "oversubscription", mode="before")
    @classmethod
    def _listify(cls, v: Any) -> Any:
        return v if v is None else _as_list(v)


class SearchIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    zero_stages: list[int] = Field(default_factory=lambda: [0, 1, 2, 3])
    recompute: list[str] = Field(default_factory=lambda: list(RECOMPUTE))
    micro_batches: list[PositiveInt] = Field(default_factory=lambda: [1, 2, 4, 8])
    max_vpp: PositiveInt = 8
    max_cp: PositiveInt = 32
    tp_across_domains: bool = False
    ep_across_domains: bool = True
    fixed: dict[str, Any] = Field(default_factory=dict)  # e.g. {tp: [8], recompute: [none]}

    def to_options(self) -> SpaceOptions:
        fixed: dict[str, tuple[int, ...]] = {}
        for axis, vals in self.fixed.items():
            vals = _as_list(vals)
            if axis == "recompute":
                bad = [v for v in vals if v not in RECOMPUTE]
                if bad:
                    raise InputError(f"sweep search.fixed.recompute: unknown setting {bad[0]!r}",
                                     hint=f"use {', '.join(RECOMPUTE)}")
                fixed[axis] = tuple(RECOMPUTE.index(str(v)) for v in vals)
            else:
                if any(not isinstance(v, int) or isinstance(v, bool) for v in vals):
                    raise InputError(f"sweep search.fixed.{axis}: values must be whole numbers, got {vals}")
                fixed[axis] = tuple(int(v) for v in vals)
        return SpaceOptions(
            zero_stages=tuple(self.zero_stages), recompute=tuple(self.recompute),
            micro_batches=tuple(self.micro_batches), max_vpp=self.max_vpp, max_cp=self.max_cp,
            tp_across_domains=self.tp_across_domains, ep_across_domains=self.ep_across_domains, fixed=fixed,
        )


class SweepIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = "sweep"
    designs: list[DesignGridIn]
    models: list[str]
    global_batch: list[PositiveInt]
    seq_len: list[PositiveInt] | None = None
    dtype: str = "bf16"
    search: SearchIn = Field(default_factory=SearchIn)
    chunk_size: PositiveInt = 1
    stack: str = DEFAULT_STACK  # software stack preset (clustertwin.workload.stacks)
    engine_options: dict[str, Any] = Field(default_factory=dict)  # to the engine, e.g. {flash_attention: false}
    extra: dict[str, Any] = Field(default_factory=dict)  # passed to the evaluator factory
    # GB per GPU a plan leaves free beyond its modelled peak (workload.rules; `sweep --memory-margin`)
    memory_margin_gb: float = Field(DEFAULT_MEMORY_MARGIN_GB, ge=0.0, allow_inf_nan=False)

    @field_validator("designs", "models", "global_batch", "seq_len", mode="before")
    @classmethod
    def _listify(cls, v: Any) -> Any:
        return v if v is None else _as_list(v)


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    """One point of the grid: a design, a model, a global batch."""

    index: int
    system: str
    num_gpus: int
    domains: int | None
    fabric: str  # resolved: the system's default scale-out when the file gives none
    oversubscription: float
    model: str
    global_batch: int
    seq_len: int
    dtype: str = "bf16"
    engine_options: Mapping[str, Any] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)
    memory_margin_gb: float = DEFAULT_MEMORY_MARGIN_GB

    def key(self) -> dict[str, Any]:
        d = asdict(self)
        d["extra"] = dict(self.extra)
        d["engine_options"] = dict(self.engine_options)
        return d


@dataclass(frozen=True, slots=True)
class Chunk:
    index: int
    chunk_id: str
    jobs: tuple[Job, ...]


@dataclass(frozen=True, slots=True)
class Sweep:
    """A parsed, expanded sweep: its id (hash of the inputs), jobs and chunks."""

    name: str
    spec: dict[str, Any]
    sweep_id: str
    jobs: tuple[Job, ...]
    chunks: tuple[Chunk, ...]
    options: SpaceOptions
    catalog_version: str
    tool_version: str
    catalog_paths: tuple[str, ...] = ()


def sweep_assumptions(sw: Sweep, catalog: Any) -> list[str]:
    """The assumption lines that hold for a sweep's designs: one "uncalibrated efficiency (assumed)" line
    per chip whose step efficiencies were never fitted (the same line ``estimate`` and ``plan`` print)."""
    from ..sim.machine import uncalibrated_note

    chips = sorted({catalog.system(j.system).accelerator.id for j in sw.jobs})
    return [n for n in (uncalibrated_note(c) for c in chips) if n]


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def load_sweep_file(path: str | Path) -> dict[str, Any]:
    return read_yaml(Path(path), "sweep file", hint="see scenarios/sweeps/ for examples",
                     shape="name, designs, models, global_batch ...")


def build_sweep(data: Mapping[str, Any], catalog: Any, *, label: str = "sweep file",
                catalog_paths: Sequence[str] = (), resolve: Callable[[str], Any] | None = None) -> Sweep:
    """Validate a sweep mapping against the catalog and the model zoo and expand it to chunks."""

    try:
        spec = SweepIn.model_validate(dict(data))
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise InputError(f"{label}: {loc}: {err['msg']}",
                         hint="keys: name, designs (system, domains|gpus, fabric, oversubscription), models, "
                              "global_batch, seq_len, dtype, search, chunk_size") from None
    from ..errors import in_file

    with in_file(label):
        return _expand(spec, catalog, label, catalog_paths, resolve)


def _expand(spec: SweepIn, catalog: Any, label: str, catalog_paths: Sequence[str],
            resolve: Callable[[str], Any] | None) -> Sweep:
    from .. import __version__

    stack = get_stack(spec.stack)
    options = with_stack(spec.search.to_options(), stack)
    engine_options = {**stack.engine_options(), **spec.engine_options}
    from ..limits import check_limit

    jobs: list[Job] = []
    for grid in spec.designs:
        if (grid.domains is None) == (grid.gpus is None):
            raise InputError(f"{label}: each design grid needs exactly one of `domains` or `gpus`",
                             hint="e.g. `domains: [64, 128]` (scale-up domains) or `gpus: [512, 1024]`")
        sizes = grid.domains if grid.domains is not None else grid.gpus
        n_grid = (len(grid.system) * len(sizes) * len(grid.fabric) * len(grid.oversubscription) * len(spec.models)
                  * len(spec.global_batch) * max(1, len(spec.seq_len or [])))
        check_limit("sweep_jobs", len(jobs) + n_grid, flag=f"{label}: jobs in the grid")
        for system_id, size, fabric, over, model, gb in itertools.product(
            grid.system, sizes, grid.fabric, grid.oversubscription, spec.models, spec.global_batch
        ):
            sysspec = catalog.system(system_id)
            fab = fabric or sysspec.default_scaleout
            catalog.fabric(fab)  # unknown names fail before any work
            m = (resolve or resolve_model_cached)(model)  # unknown names fail before any work
            seqs = spec.seq_len or [int(getattr(m, "seq_len", 0) or 2048)]
            for seq in seqs:
                domains = int(size) if grid.domains is not None else None
                gpus = domains * sysspec.devices_per_domain if domains is not None else int(size)
                jobs.append(Job(index=len(jobs), system=system_id, num_gpus=gpus, domains=domains, fabric=fab,
                                oversubscription=float(over), model=model, global_batch=int(gb), seq_len=int(seq),
                                dtype=spec.dtype, engine_options=dict(engine_options),
                                extra=dict(spec.extra), memory_margin_gb=float(spec.memory_margin_gb)))
    if not jobs:
        raise InputError(f"{label}: the grid is empty", hint="give at least one system, size, model and batch")
    spec_dict = spec.model_dump()
    common = {"options": _options_key(options), "catalog": catalog.version, "tool": __version__}
    chunks = []
    for ci, start in enumerate(range(0, len(jobs), spec.chunk_size)):
        cj = tuple(jobs[start:start + spec.chunk_size])
        cid = _digest({"jobs": [j.key() for j in cj], **common})
        chunks.append(Chunk(index=ci, chunk_id=cid, jobs=cj))
    sweep_id = _digest({"jobs": [j.key() for j in jobs], "chunk_size": spec.chunk_size, **common})
    return Sweep(name=spec.name, spec=spec_dict, sweep_id=sweep_id, jobs=tuple(jobs), chunks=tuple(chunks),
                 options=options, catalog_version=catalog.version, tool_version=__version__,
                 catalog_paths=tuple(str(p) for p in catalog_paths))


def _options_key(o: SpaceOptions) -> dict[str, Any]:
    d = {k: getattr(o, k) for k in o.__dataclass_fields__}
    d["fixed"] = {k: list(v) for k, v in dict(o.fixed).items()}
    return d


@lru_cache(maxsize=256)
def resolve_model_cached(name: str) -> Any:
    return resolve_model(name)


# ------------------------------------------------------------------ evaluating a chunk (runs in workers)

EvaluatorFactory = Callable[[Job, Any], tuple[Any, Evaluator]]


def default_factory(job: Job, catalog: Any) -> tuple[Any, Evaluator]:
    """The analytical engine for a job: (model spec, evaluator)."""
    model = resolve_model_cached(job.model)
    system = catalog.system(job.system)
    fabric = catalog.fabric(job.fabric)
    ev = AnalyticalEvaluator(model=model, system=system, fabric=fabric, num_gpus=job.num_gpus,
                             global_batch=job.global_batch, seq_len=job.seq_len, dtype=job.dtype,
                             oversubscription=job.oversubscription, catalog=catalog,
                             extra=dict(job.engine_options), memory_margin_gb=job.memory_margin_gb)
    return model, ev


def design_cost_power(job: Job, catalog: Any, device_price: Callable[[Any], float | None] | None = None
                      ) -> tuple[float | None, float | None]:
    """Capital cost (USD) and IT power (W) of the job's cluster from the bill of materials.

    ``clustertwin.cluster.bom`` counts and prices the parts of ``ceil(gpus / domain)`` scale-up
    domains on the job's fabric and oversubscription (fewer spine switches and optics at 2:1).
    Accelerators the BOM cannot price are priced with ``device_price(system)`` (USD per device, the
    all-in system share) when given; if some still have no price the cost is ``None`` (never a partial
    sum that would make a design look cheap). ``(None, None)`` when this build has no BOM.
    """
    try:
        from ..cluster import bill_of_materials, build_cluster
    except ImportError:
        return None, None
    system = catalog.system(job.system)
    domains = -(-job.num_gpus // system.devices_per_domain)
    cl = build_cluster(system, domains, catalog.fabric(job.fabric), oversubscription=job.oversubscription,
                       catalog=catalog)
    bom = bill_of_materials(cl)
    power = float(bom.power_kw) * 1e3 if bom.power_kw else None
    cost = float(bom.cost_usd or 0.0)
    unpriced = [ln for ln in bom.lines if ln.price_usd is None and ln.category == "compute"
                and ln.item == "accelerators"]
    if unpriced:
        price = device_price(system) if device_price is not None else None
        if price is None:
            return None, power
        cost += sum(ln.count for ln in unpriced) * float(price)
    return cost, power


@lru_cache(maxsize=8)
def _catalog(paths: tuple[str, ...]) -> Any:
    from ..catalog import load_catalog

    return load_catalog(paths)


@dataclass(frozen=True, slots=True)
class ChunkTask:
    """Everything a worker needs to evaluate one chunk (picklable)."""

    chunk: Chunk
    options: SpaceOptions
    catalog_paths: tuple[str, ...]
    factory: EvaluatorFactory = default_factory
    cost_fn: Callable[[Job, Any], tuple[float | None, float | None]] = design_cost_power


def run_chunk(task: ChunkTask) -> tuple[list[dict[str, Any]], float]:
    """Search every job of the chunk; return one result row per job and the elapsed seconds. The jobs of
    the chunk that share a machine and model are searched in one vectorised pass (``run_chunks``)."""
    return run_chunks([task])[0]


def _run_one_by_one(task: ChunkTask) -> tuple[list[dict[str, Any]], float]:
    """A chunk's jobs searched one at a time (an evaluator factory other than the default)."""
    t0 = time.perf_counter()
    catalog = _catalog(task.catalog_paths)
    rows = [evaluate_job(job, catalog, task.options, task.factory, task.cost_fn, task.chunk.chunk_id)
            for job in task.chunk.jobs]
    return rows, time.perf_counter() - t0


def _search_key(job: Job, options: SpaceOptions) -> tuple:
    """Jobs with equal keys share one evaluator but for the GPU count and the global batch (``search_many``)."""
    return (job.model, job.system, job.fabric, job.oversubscription, job.seq_len, job.dtype,
            tuple(sorted((k, repr(v)) for k, v in job.engine_options.items())), job.memory_margin_gb,
            repr(_options_key(options)))


def run_chunks(tasks: Sequence[ChunkTask]) -> list[tuple[list[dict[str, Any]], float]]:
    """``run_chunk`` for several chunks at once (what a Ray task runs): the jobs of all of them that
    differ only in GPU count and global batch (same model, system, fabric, oversubscription, sequence,
    precision, engine options, margin and search options) are searched in one vectorised pass
    (``search.search_many``). The rows are the ones ``run_chunk`` gives; each chunk's elapsed time is
    its share of the pass by jobs. Chunks with another evaluator factory run one by one."""
    t0 = time.perf_counter()
    out: list[tuple[list[dict[str, Any]], float] | None] = [None] * len(tasks)
    rows: dict[tuple[int, int], dict[str, Any]] = {}
    groups: dict[tuple, list[tuple[int, int, Job, dict[str, Any]]]] = {}
    for ti, task in enumerate(tasks):
        if task.factory is not default_factory:
            out[ti] = _run_one_by_one(task)
            continue
        catalog = _catalog(task.catalog_paths)
        for ji, job in enumerate(task.chunk.jobs):
            row = _design_row(job, catalog, task.cost_fn, task.chunk.chunk_id)
            rows[(ti, ji)] = row
            if row.get("feasible") is None:  # buildable: to be searched
                groups.setdefault((task.catalog_paths, _search_key(job, task.options)), []).append((ti, ji, job, row))
    for (paths, _), members in groups.items():
        catalog = _catalog(paths)
        options = tasks[members[0][0]].options
        first = members[0][2]
        try:
            model, ev = default_factory(first, catalog)
            system = catalog.system(first.system)
            results = search_many(ModelShape.of(model), ev,
                                  [(j.num_gpus, system.devices_per_domain, j.global_batch) for _, _, j, _ in members],
                                  seq_len=first.seq_len, options=options, top_k=1)
        except InputError:  # one job's error must not become the others': search them one by one
            for _, _, job, row in members:
                _search_row(row, job, catalog, options, default_factory)
            continue
        for (_, _, _, row), res in zip(members, results, strict=True):
            _result_row(row, res)
    n_jobs = sum(len(t.chunk.jobs) for i, t in enumerate(tasks) if out[i] is None)
    share = (time.perf_counter() - t0) / max(n_jobs, 1)
    for ti, task in enumerate(tasks):
        if out[ti] is None:
            out[ti] = ([rows[(ti, ji)] for ji in range(len(task.chunk.jobs))], share * len(task.chunk.jobs))
    return cast(list[tuple[list[dict[str, Any]], float]], out)


run_chunk.batched = run_chunks  # type: ignore[attr-defined]  # what a batched executor (Ray) calls


# what a results row keeps of a plan record (``search.SearchResult.records``)
PLAN_ROW_KEYS = ("tp", "pp", "dp", "cp", "ep", "vpp", "zero", "micro_batch", "recompute", "step_time_s",
                 "tokens_per_s", "mfu", "hfu", "tflops_per_gpu", "memory_gb_per_gpu", "bottleneck", "breakdown")


def job_row(job: Job, chunk_id: str) -> dict[str, Any]:
    """The design columns of a results row."""
    return {"job_index": job.index, "chunk_id": chunk_id, "system": job.system, "num_gpus": job.num_gpus,
            "domains": job.domains, "fabric": job.fabric, "oversubscription": job.oversubscription,
            "model": job.model, "global_batch": job.global_batch, "seq_len": job.seq_len, "dtype": job.dtype}


def evaluate_job(job: Job, catalog: Any, options: SpaceOptions, factory: EvaluatorFactory,
                 cost_fn: Callable[[Job, Any], tuple[float | None, float | None]], chunk_id: str = "") -> dict[str, Any]:
    """Best plan, cost and power of one design. A design the models cannot handle (an InputError: a
    precision the chip lacks, a fabric too small for the cluster ...) becomes an infeasible row with the
    reason, so one bad corner of a grid never stops the sweep."""
    row = _design_row(job, catalog, cost_fn, chunk_id)
    if row.get("feasible") is None:
        _search_row(row, job, catalog, options, factory)
    return row


def _design_row(job: Job, catalog: Any, cost_fn: Callable[[Job, Any], tuple[float | None, float | None]],
                chunk_id: str) -> dict[str, Any]:
    """A job's row before its search: the design columns, cost and power; for a cluster that cannot be
    wired, the final row (``feasible`` False with the reason)."""
    system = catalog.system(job.system)
    row: dict[str, Any] = job_row(job, chunk_id)
    try:
        from ..cluster.buildable import check_buildable

        check_buildable(system, catalog.fabric(job.fabric), job.num_gpus, oversubscription=job.oversubscription,
                        catalog=catalog, knobs=("fabric", "oversubscription"))
    except InputError as exc:  # a cluster that cannot be wired gets no plan, only the reason
        row.update(cost_usd=None, power_w=None, feasible=False, num_candidates=None, num_feasible=0,
                   reason=f"cannot be built: {exc.message}" + (f" ({exc.hint})" if exc.hint else ""))
        return row
    try:
        cost, power = cost_fn(job, catalog)
    except InputError:
        cost, power = None, None
    row.update(cost_usd=cost, power_w=power)
    return row


def _search_row(row: dict[str, Any], job: Job, catalog: Any, options: SpaceOptions, factory: EvaluatorFactory) -> None:
    """Search one job and complete its row."""
    system = catalog.system(job.system)
    try:
        model, ev = factory(job, catalog)
        res = search(ModelShape.of(model), ev, num_gpus=job.num_gpus, domain_size=system.devices_per_domain,
                     global_batch=job.global_batch, seq_len=job.seq_len, options=options, top_k=1)
    except InputError as exc:
        row.update(feasible=False, reason=exc.message, num_candidates=None, num_feasible=0)
        return
    _result_row(row, res)


def _result_row(row: dict[str, Any], res: Any) -> None:
    """Complete a job's row from its search result."""
    row.update(num_candidates=res.stats.num_structural, num_feasible=res.stats.num_feasible)
    recs = res.records(1)
    if recs:
        best = recs[0]
        row.update({k: best[k] for k in PLAN_ROW_KEYS})
        row.update(feasible=True, reason=None)
    else:
        row.update(feasible=False, reason=_why_infeasible(res.stats))


def _why_infeasible(stats: Any) -> str:
    if stats.num_structural == 0:
        return "no layout can use this GPU count with this global batch"
    return (f"no layout fits in memory (smallest needs {stats.min_memory_gb:.1f} GB per GPU, "
            f"{stats.capacity_gb:.1f} GB usable less a {stats.margin_gb:g} GB margin)")


# ------------------------------------------------------------------ the driver


@dataclass(frozen=True, slots=True)
class SweepOutcome:
    sweep: Sweep
    rows: list[dict[str, Any]]
    computed_chunks: int
    skipped_chunks: int
    elapsed_s: float


def run_sweep(
    sweep: Sweep,
    store: Any,
    executor: Any,
    *,
    factory: EvaluatorFactory = default_factory,
    cost_fn: Callable[[Job, Any], tuple[float | None, float | None]] = design_cost_power,
    progress: Callable[[int, int], None] | None = None,
) -> SweepOutcome:
    """Run (or resume) a sweep: skip chunks already stored, write each new chunk in one transaction."""
    t0 = time.perf_counter()
    store.begin_sweep(sweep_id=sweep.sweep_id, name=sweep.name, spec=sweep.spec,
                      catalog_version=sweep.catalog_version, tool_version=sweep.tool_version,
                      num_jobs=len(sweep.jobs), num_chunks=len(sweep.chunks), executor=executor.name)
    done = store.done_chunks(sweep.sweep_id)
    todo = [c for c in sweep.chunks if c.chunk_id not in done]
    total = len(sweep.chunks)
    finished = total - len(todo)
    if progress:
        progress(finished, total)
    by_index = {c.index: c for c in todo}
    payloads = [(c.index, ChunkTask(chunk=c, options=sweep.options, catalog_paths=sweep.catalog_paths,
                                    factory=factory, cost_fn=cost_fn)) for c in todo]
    # chunks of one machine and model next to each other, so a batched executor's task (Ray: several
    # chunks per task) searches them in one pass (run_chunks); the order chunks finish in changes nothing
    payloads.sort(key=lambda ip: (_search_key(ip[1].chunk.jobs[0], sweep.options), ip[0]) if ip[1].chunk.jobs
                  else ((), ip[0]))

    def on_done(idx: int, result: tuple[list[dict[str, Any]], float]) -> None:
        nonlocal finished
        rows, elapsed = result
        c = by_index[idx]
        store.write_chunk(sweep_id=sweep.sweep_id, chunk_id=c.chunk_id, chunk_index=c.index, rows=rows,
                          elapsed_s=elapsed)
        finished += 1
        if progress:
            progress(finished, total)

    # one write connection for the whole run (a connection per chunk cost ~16 ms: open, commit and the WAL
    # checkpoint of closing the last connection, which bounded every sweep at ~60 chunks/s in the driver)
    with store.keep_open() if hasattr(store, "keep_open") else contextlib.nullcontext():
        executor.run(run_chunk, payloads, on_done)
    store.finish_sweep(sweep.sweep_id)
    return SweepOutcome(sweep=sweep, rows=store.results(sweep.sweep_id), computed_chunks=len(todo),
                        skipped_chunks=total - len(todo), elapsed_s=time.perf_counter() - t0)


def best_per_design(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows with a Pareto flag over (throughput max, cost min, power min) per model and batch.

    Designs are compared only with designs that train the same model on the same global batch and
    sequence length (throughputs of different models are not comparable).
    """
    out = [dict(r) for r in rows]
    for r in out:
        r["pareto"] = False
    groups: dict[tuple, list[int]] = {}
    for i, r in enumerate(out):
        if r.get("feasible"):
            groups.setdefault((r["model"], r["global_batch"], r["seq_len"]), []).append(i)
    for idx in groups.values():
        obj = np.array([[out[i]["tokens_per_s"], _f(out[i].get("cost_usd")), _f(out[i].get("power_w"))]
                        for i in idx], dtype=float)
        mask = pareto_mask(obj, [True, False, False])
        for i, m in zip(idx, mask, strict=True):
            out[i]["pareto"] = bool(m)
    return out


def _f(v: Any) -> float:
    return float("nan") if v is None else float(v)

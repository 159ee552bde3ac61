"""Jobs for the LLM-cluster replay: the documented job format (YAML or CSV), its reader, and a
generator of LLM-cluster job mixes.

One job (YAML mapping, or one CSV row with the same names; CSV leaves nested fields flat)::

    id: pretrain-405b        # unique, lower-case letters, digits, - _ .
    submit_s: 0              # submit time, seconds from the start of the trace
    priority: 0              # higher runs first under the priority policy; may preempt lower
    queue: default           # Kueue LocalQueue / Slurm partition name (reported, not enforced)
    pods: 512                # gang: all pods start together or none does
    gpus_per_pod: 4          # GPUs per pod; a pod sits on one node
    duration_s: 86400        # run time at the ideal placement ... or, for a training job:
    model: llama3-405b       #   model + plan + steps: run time = steps x step time at its placement
    plan: {tp: 8, pp: 16, global_batch: 2048, seq_len: 8192}   # CSV: tp, pp, cp, ep, global_batch, seq_len, micro_batch
    steps: 1000
    required: domain         # Kueue TAS required level: node | domain | leaf | spine
    preferred: leaf          # Kueue TAS preferred level (tried first, then wider)
    segment: 16              # Slurm --segment: pods per segment, each segment inside one block (NVLink domain)
    compute_domain: 64       # DRA ComputeDomain: this many GPUs of the job in one NVLink domain each
    checkpoint_s: 1800       # checkpoint interval (restart point after a failure / preemption)

Bad rows raise ``InputError`` naming the file, the job id, the field and the reason.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..errors import InputError
from ..userfiles import read_text

LEVEL_NAMES = ("node", "domain", "leaf", "spine")
_PLAN_KEYS = ("tp", "pp", "cp", "ep", "dp", "vpp", "micro_batch", "global_batch", "seq_len", "recompute", "zero")


class PlanSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tp: int = Field(1, ge=1)
    pp: int = Field(1, ge=1)
    cp: int = Field(1, ge=1)
    ep: int = Field(1, ge=1)
    dp: int | None = Field(None, ge=1)
    vpp: int = Field(1, ge=1)
    micro_batch: int = Field(1, ge=1)
    global_batch: int | None = Field(None, ge=1)
    seq_len: int = Field(4096, ge=1)
    recompute: str = "none"
    zero: int = Field(1, ge=0, le=3)


class JobSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
    submit_s: float = Field(0.0, ge=0)
    priority: int = 0
    queue: str = "default"
    pods: int = Field(ge=1, le=1_000_000)
    gpus_per_pod: int = Field(ge=1, le=1024)
    duration_s: float | None = Field(None, gt=0)
    model: str | None = None
    plan: PlanSpec | None = None
    steps: int | None = Field(None, ge=1)
    required: str | None = None
    preferred: str | None = None
    segment: int | None = Field(None, ge=1)
    compute_domain: int | None = Field(None, ge=1)
    checkpoint_s: float | None = Field(None, gt=0)

    @field_validator("required", "preferred")
    @classmethod
    def _level(cls, v: str | None) -> str | None:
        if v is None or v == "":
            return None
        if v not in LEVEL_NAMES:
            raise ValueError(f"must be one of {', '.join(LEVEL_NAMES)}")
        return v

    @model_validator(mode="after")
    def _work(self) -> JobSpec:
        training = self.model is not None or self.plan is not None or self.steps is not None
        if training and (self.model is None or self.plan is None or self.steps is None):
            raise ValueError("a training job needs model, plan and steps together")
        if training and self.duration_s is not None:
            raise ValueError("give either duration_s or model + plan + steps, not both")
        if not training and self.duration_s is None:
            raise ValueError("give duration_s (seconds at the ideal placement) or model + plan + steps")
        if self.segment is not None and self.pods % self.segment:
            raise ValueError(f"segment {self.segment} does not divide pods {self.pods}")
        if self.compute_domain is not None and (self.pods * self.gpus_per_pod) % self.compute_domain:
            raise ValueError(f"compute_domain {self.compute_domain} does not divide the job's "
                             f"{self.pods * self.gpus_per_pod} GPUs")
        return self

    @property
    def gpus(self) -> int:
        return self.pods * self.gpus_per_pod


@dataclass(frozen=True)
class JobTable:
    """Jobs as arrays (replay hot path) plus the specs (for training jobs and reporting)."""

    specs: tuple[JobSpec, ...]
    source: str = ""

    def __len__(self) -> int:
        return len(self.specs)

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(j.id for j in self.specs)


def _explain(src: str, ident: str, exc: ValidationError) -> InputError:
    parts = []
    for e in exc.errors()[:5]:
        loc = ".".join(str(x) for x in e.get("loc", ())) or "(job)"
        msg = e.get("msg", "invalid").removeprefix("Value error, ")
        if e.get("type") == "extra_forbidden":
            msg = "is not a job field"
        parts.append(f"field {loc!r}: {msg}")
    return InputError(f"{src}: job {ident}: " + "; ".join(parts),
                      hint="see the job format in docs/scheduler.md (clustertwin schedule replay --help)")


def _coerce_csv_row(row: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    plan: dict[str, Any] = {}
    for k, v in row.items():
        if k is None:
            raise ValueError("the row has more cells than the header")
        v = (v or "").strip()
        if v == "":
            continue
        if k in _PLAN_KEYS:
            plan[k] = v
        else:
            out[k] = v
    if plan:
        out["plan"] = plan
    return out


def read_jobs(path: str | Path, *, max_jobs: int = 1_000_000) -> JobTable:
    """Read a job file: ``.yaml``/``.yml`` (a list, or a mapping with ``jobs:``) or ``.csv``."""
    p = Path(path)
    src = str(p)
    text = read_text(p, "job file")
    raw: list[Any]
    if p.suffix.lower() == ".csv":
        reader = csv.DictReader(io.StringIO(text))
        if not reader.fieldnames or "id" not in reader.fieldnames:
            raise InputError(f"job file {src!r} has no 'id' column", hint="the first line names the job fields")
        raw = []
        for line, row in enumerate(reader, start=2):
            try:
                raw.append(_coerce_csv_row(row))
            except ValueError as exc:
                raise InputError(f"{src}: line {line} (job {row.get('id') or '?'}): {exc}") from None
    else:
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise InputError(f"job file {src!r} is not valid YAML: {exc}") from None
        if isinstance(data, dict):
            data = data.get("jobs")
        if not isinstance(data, list):
            raise InputError(f"job file {src!r} must hold a list of jobs (or a mapping with a 'jobs' list)")
        raw = data
    if not raw:
        raise InputError(f"job file {src!r} has no jobs")
    if len(raw) > max_jobs:
        raise InputError(f"job file {src!r} has {len(raw):,} jobs; at most {max_jobs:,}")
    specs = []
    seen: set[str] = set()
    for i, r in enumerate(raw):
        ident = str(r.get("id")) if isinstance(r, dict) and r.get("id") is not None else f"#{i + 1}"
        if not isinstance(r, dict):
            raise InputError(f"{src}: job {ident}: each job must be a mapping of fields")
        try:
            spec = JobSpec.model_validate(r)
        except ValidationError as exc:
            raise _explain(src, ident, exc) from None
        if spec.id in seen:
            raise InputError(f"{src}: job {spec.id}: field 'id': used twice", hint="job ids must be unique")
        seen.add(spec.id)
        specs.append(spec)
    return JobTable(tuple(specs), src)


def write_jobs_csv(jobs: JobTable) -> str:
    cols = ["id", "submit_s", "priority", "queue", "pods", "gpus_per_pod", "duration_s", "model", "steps",
            *[k for k in _PLAN_KEYS], "required", "preferred", "segment", "compute_domain", "checkpoint_s"]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    w.writeheader()
    for j in jobs.specs:
        row = j.model_dump(exclude_none=True)
        plan = row.pop("plan", None) or {}
        if j.plan is not None:
            plan = j.plan.model_dump(exclude_none=True, exclude_defaults=True)
        row.update(plan)
        w.writerow({k: row.get(k, "") for k in cols})
    return buf.getvalue()


# ----------------------------------------------------------------------------------------- generator
#: Sizes (GPUs) of an LLM-cluster job mix and their weights. Assumed, shaped after published fleet
#: reports: most jobs are small (evaluation, fine-tuning, ablations), a few are huge pre-training gangs
#: (Hu et al., "Characterization of LLM Development in the Datacenter", NSDI'24 (Acme): the majority of
#: jobs use <= 8 GPUs, while a few pre-training jobs take most of the GPU time; Jeon et al. ATC'19
#: (Philly) for the heavy-tailed run times). Not fitted to any trace.
SIZE_CHOICES = (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
SIZE_WEIGHTS = (0.30, 0.16, 0.14, 0.12, 0.09, 0.07, 0.05, 0.035, 0.02, 0.01, 0.005)


def generate_llm_trace(num_jobs: int, *, cluster_gpus: int, gpus_per_node: int = 4, gpus_per_domain: int = 72,
                       seed: int = 0, load: float = 0.9, median_duration_s: float = 3600.0, sigma: float = 1.6,
                       max_duration_s: float = 7 * 86400.0, small_training_fraction: float = 0.2,
                       large_training_gpus: int = 128, max_gpus: int | None = None,
                       step_time=None) -> JobTable:
    """A seeded LLM-cluster job mix.

    * sizes 8 .. 8,192 GPUs with ``SIZE_WEIGHTS`` (capped at ``max_gpus`` / the cluster), so a few
      huge gangs (4k-8k GPUs) among many small jobs;
    * run times log-normal (median ``median_duration_s``, sigma ``sigma``: heavy-tailed), capped at
      ``max_duration_s``;
    * Poisson arrivals at the rate that offers ``load`` x the cluster's GPU-seconds;
    * jobs of ``large_training_gpus`` GPUs or more are pre-training gangs (llama3-70b, TP 8 inside
      NVLink, data parallel across domains) and ``small_training_fraction`` of the smaller ones are
      llama3-8b fine-tuning runs; training jobs carry model + plan + steps, where ``steps`` = drawn
      run time / ideal step time (``step_time(job)`` when given, else a nominal 2 s), so their run
      time then follows from the step model at the placement they get;
    * topology wishes: a job that fits one NVLink domain prefers one; a larger job prefers one leaf
      block and asks for TP-sized segments (Slurm ``--segment`` / Kueue slices) when the domain spans
      several nodes.
    """
    if num_jobs < 1:
        raise InputError(f"--jobs must be >= 1, got {num_jobs}")
    rng = np.random.default_rng(seed)
    cap = min(max_gpus or cluster_gpus // 2, cluster_gpus)  # the largest gangs take half the cluster
    choices = np.array([s for s in SIZE_CHOICES if s <= cap])
    if choices.size == 0:
        raise InputError(f"the cluster has {cluster_gpus} GPUs; the generator's smallest job takes 8")
    w = np.array(SIZE_WEIGHTS[:len(choices)])
    sizes = rng.choice(choices, size=num_jobs, p=w / w.sum())
    dur = np.minimum(median_duration_s * np.exp(sigma * rng.standard_normal(num_jobs)), max_duration_s)
    dur = np.maximum(dur, 60.0)
    offered = float((sizes * dur).sum())
    span = offered / (load * cluster_gpus)
    gaps = rng.exponential(span / num_jobs, num_jobs)
    submit = np.cumsum(gaps) - gaps[0]
    u_train = rng.random(num_jobs)
    u_prio = rng.random(num_jobs)
    specs = []
    g_node = gpus_per_node
    for i in range(num_jobs):
        gpus = int(sizes[i])
        gpp = min(g_node, gpus)
        pods = gpus // gpp
        kw: dict[str, Any] = {"id": f"job-{i:05d}", "submit_s": round(float(submit[i]), 3), "pods": pods,
                              "gpus_per_pod": gpp, "priority": int(u_prio[i] < 0.1), "checkpoint_s": 1800.0}
        kw["preferred"] = "domain" if gpus <= gpus_per_domain else "leaf"
        large = gpus >= large_training_gpus
        if large or u_train[i] < small_training_fraction:
            tp = min(8, gpus)
            dp = gpus // tp
            model = "llama3-70b" if large else "llama3-8b"
            plan = {"tp": tp, "pp": 1, "global_batch": dp * max(1, 1024 // dp), "seq_len": 8192 if large else 4096}
            kw.update(model=model, plan=plan, steps=1)
            if gpus > gpus_per_domain and gpus_per_domain > g_node and tp > g_node:
                kw["segment"] = tp // gpp  # keep every TP group inside one NVLink domain
            st = step_time(JobSpec.model_validate(kw)) if step_time is not None else 2.0
            kw["steps"] = max(1, int(round(float(dur[i]) / st)))
        else:
            kw["duration_s"] = round(float(dur[i]), 1)
        specs.append(JobSpec.model_validate(kw))
    return JobTable(tuple(specs), f"generated(seed={seed}, jobs={num_jobs})")


def job_gpus_array(jobs: JobTable) -> np.ndarray:
    return np.array([j.gpus for j in jobs.specs], np.int64)

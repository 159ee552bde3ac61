"""The search space: every valid parallel layout for a model on a cluster, as numpy arrays.

A layout is one value per axis: ``tp, pp, dp, cp, ep, vpp, zero, micro_batch, recompute, etp, schedule``. The
space is built as the Cartesian product of small per-axis candidate lists (a few divisors each),
then filtered with vectorised masks, so no per-candidate Python object is ever made. Rules
(Megatron-LM conventions, Narayanan et al. SC'21 Sec. 3; Megatron-Core ``parallel_state``):

* ``tp * pp * cp * dp == num_gpus`` (every GPU is used; expert parallelism is folded inside
  ``tp * cp * dp`` of a pipeline stage, as the validation CSV documents);
* ``tp`` divides the attention heads and the FFN width; ``tp`` and the key/value heads (GQA query
  groups) divide one another (KV heads are replicated when ``tp`` exceeds them; not checked for MLA);
  by default ``tp`` sits inside one scale-up domain (``domain % tp == 0``);
* ``pp * vpp <= layers``; without ``uneven_pipeline`` ``pp * vpp`` divides the layers, or the
  layers plus two (the embedding and the loss counted as one layer each on the first and last stage,
  Megatron ``account_for_embedding/loss_in_pipeline_split``; Llama 3 405B runs 126 layers on PP16 with
  one fewer layer on the first and last stage, arXiv:2407.21783 Sec. 3.3.2);
* ``vpp > 1`` only with ``pp > 1`` and a number of micro-batches divisible by ``pp`` (interleaved 1F1B,
  Megatron-LM ``get_forward_backward_func`` requirement);
* the global batch divides by ``micro_batch * dp``;
* ``cp > 1`` splits the sequence in ``2 * cp`` chunks (load-balanced causal ring attention), so
  ``seq_len % (2 * cp) == 0``;
* ``ep`` divides the experts and ``tp * cp * dp``; the EP group may span scale-up domains (its
  all-to-all is priced on the fabric it crosses, ``sim/components/ep_comm.py``) unless
  ``ep_across_domains`` is off (then ``domain % ep == 0``);
* ``zero > 0`` only when there is data parallelism to shard over (``dp * cp > 1``);
* MoE: expert tensor parallelism ``etp`` is 1 or ``tp`` (Megatron ``--expert-tensor-parallel-size``;
  ``ep * etp`` divides ``tp * cp * dp``);
* ``schedule`` (codes of ``SCHEDULES``): 1F1B / interleaved, ZB-H1 and DualPipe where the stack runs
  them (``SoftwareStack.pipeline_schedules``), with their rules (``workload.rules``: pp > 1, vpp 1;
  DualPipe an even pp and at least 2*pp micro-batches, an even number).

With ``uneven_pipeline`` the layers need not divide into the stages at all: the stage cost and memory
then follow the whole-layer layout of ``workload.pipeline.stage_layout``. Such an uneven layout
interleaves (vpp > 1, unless vpp is fixed) only with a power-of-two vpp and uniform interior virtual
stages (every virtual stage but the first and the last holds ceil(L / (pp*vpp)) layers).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InputError
from ..workload.pipeline import PIPELINE_SCHEDULES, mixed_interleaved_chunks
from ..workload.rules import plan_mask, stack_problems

AXES = ("tp", "pp", "dp", "cp", "ep", "vpp", "zero", "micro_batch", "recompute", "etp", "schedule")
RECOMPUTE = ("none", "selective", "full")
SCHEDULES = PIPELINE_SCHEDULES  # the ``schedule`` axis holds codes into this tuple
Plans = dict[str, np.ndarray]


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelShape:
    """What the search space needs to know about a model (read from any ModelSpec-like object)."""

    name: str
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int
    num_experts: int = 0  # 0 or 1: dense
    ffn_hidden_size: int = 0  # 0: not checked
    mla: bool = False  # multi-head latent attention: no KV-head divisibility rule

    @classmethod
    def of(cls, model: Any) -> ModelShape:
        if isinstance(model, ModelShape):
            return model

        def pick(*names: str, default: Any = None) -> Any:
            for n in names:
                v = getattr(model, n, None)
                if v is not None:
                    return v
            return default

        heads = int(pick("num_attention_heads", "num_heads", "heads", "n_heads"))
        return cls(
            name=str(pick("id", "name", default="model")),
            num_layers=int(pick("num_layers", "layers", "n_layers")),
            num_attention_heads=heads,
            num_kv_heads=int(pick("num_kv_heads", "num_query_groups", "kv_heads", default=heads) or heads),
            num_experts=int(pick("num_experts", "experts", default=0) or 0),
            ffn_hidden_size=int(pick("ffn_hidden_size", "ffn", default=0) or 0),
            mla=bool(pick("is_mla", default=False)),
        )

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 1

    @property
    def is_mla(self) -> bool:
        return self.mla

    @property
    def id(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True, kw_only=True)
class SpaceOptions:
    """Knobs of the search space. Defaults cover what production recipes use."""

    zero_stages: tuple[int, ...] = (0, 1, 2, 3)
    recompute: tuple[str, ...] = RECOMPUTE
    micro_batches: tuple[int, ...] = (1, 2, 4, 8)
    max_vpp: int = 8
    max_cp: int = 32
    max_pp: int = 128
    tp_across_domains: bool = False
    ep_across_domains: bool = True  # EP all-to-all across domains is priced on the scale-out fabric (ep_comm)
    uneven_pipeline: bool = True
    expert_tp: bool = True  # MoE: also try expert tensor parallelism etp = tp (Megatron ETP; default etp = 1)
    schedules: tuple[str, ...] = PIPELINE_SCHEDULES  # limited to the stack's (with_stack)
    # fixed values (from --tp/--pp/... on the command line): axis -> allowed values
    fixed: Mapping[str, tuple[int, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, vals in self.fixed.items():
            if name not in AXES:
                raise InputError(f"unknown parallel axis {name!r}", hint=f"axes: {', '.join(AXES)}")
            if not vals:
                raise InputError(f"no value given for {name}")
        bad = [r for r in self.recompute if r not in RECOMPUTE]
        if bad:
            raise InputError(f"unknown recompute setting {bad[0]!r}", hint=f"use one of {', '.join(RECOMPUTE)}")
        bad_s = [x for x in self.schedules if x not in PIPELINE_SCHEDULES]
        if bad_s:
            raise InputError(f"unknown pipeline schedule {bad_s[0]!r}", hint=f"use {', '.join(PIPELINE_SCHEDULES)}")
        bad_z = [z for z in self.zero_stages if z not in (0, 1, 2, 3)]
        if bad_z:
            raise InputError(f"ZeRO stage {bad_z[0]} does not exist", hint="use 0, 1, 2 or 3")


def with_stack(opts: SpaceOptions, stack: Any) -> SpaceOptions:
    """``opts`` limited to the ZeRO stages and recompute modes a software stack offers.

    A value fixed on the command line that the stack cannot run is an error that names both ways out.
    """
    from dataclasses import replace

    problems = stack_problems(stack, zero=opts.fixed.get("zero", ()), recompute=opts.fixed.get("recompute", ()),
                              cp=opts.fixed.get("cp", ()), schedule=opts.fixed.get("schedule", ()))
    if problems:
        raise InputError(problems[0],
                         hint="drop the fixed --zero / --recompute / --cp / --pipeline-schedule value, pick one the "
                              "stack offers, or choose another --stack")
    zero = tuple(z for z in opts.zero_stages if z in stack.zero_stages) or tuple(stack.zero_stages)
    rc = tuple(r for r in opts.recompute if r in stack.recompute) or tuple(stack.recompute)
    sc = tuple(x for x in opts.schedules if x in stack.pipeline_schedules) or tuple(stack.pipeline_schedules)
    return replace(opts, zero_stages=zero, recompute=rc, max_cp=opts.max_cp if stack.context_parallel else 1,
                   uneven_pipeline=opts.uneven_pipeline and stack.uneven_pipeline, schedules=sc)


def divisors(n: int) -> np.ndarray:
    """Sorted positive divisors of ``n`` (vectorised trial division)."""
    if n < 1:
        return np.zeros(0, dtype=np.int64)
    k = np.arange(1, int(np.sqrt(n)) + 1, dtype=np.int64)
    k = k[n % k == 0]
    return np.unique(np.concatenate([k, n // k]))


def _restrict(name: str, cands: np.ndarray, opts: SpaceOptions) -> np.ndarray:
    """Fixed values (``--tp 8``) narrow an axis to those of them that pass the axis' rules."""
    if name in opts.fixed:
        # a value beyond int64 cannot be a candidate (the axes are bounded by the GPU count): drop it before
        # the int64 conversion, which would overflow (an empty axis then reports "no layout" as for any misfit)
        vals = sorted(v for v in set(opts.fixed[name]) if -(2**62) < v < 2**62)
        return np.intersect1d(np.asarray(vals, dtype=np.int64), cands)
    return cands


def structural_space(
    model: Any,
    *,
    num_gpus: int,
    domain_size: int,
    global_batch: int,
    seq_len: int,
    options: SpaceOptions | None = None,
) -> Plans:
    """All structurally valid layouts (before memory pruning), one numpy array per axis.

    >>> s = structural_space(ModelShape(name="m", num_layers=32, num_attention_heads=32, num_kv_heads=8),
    ...                      num_gpus=16, domain_size=8, global_batch=64, seq_len=4096)
    >>> bool(((s["tp"] * s["pp"] * s["cp"] * s["dp"]) == 16).all())
    True
    """
    opts = options or SpaceOptions()
    shape = ModelShape.of(model)
    n, d = int(num_gpus), int(domain_size)
    if n < 1 or global_batch < 1 or seq_len < 1:
        return {a: np.zeros(0, dtype=np.int64) for a in AXES}
    div_n = divisors(n)
    L, A, G = shape.num_layers, shape.num_attention_heads, shape.num_kv_heads

    tp_ok = A % div_n == 0
    if not shape.mla:
        tp_ok &= (G % div_n == 0) | (div_n % G == 0)
    if shape.ffn_hidden_size:
        tp_ok &= shape.ffn_hidden_size % div_n == 0
    tp = div_n[tp_ok]
    # a TP/EP degree the user fixed explicitly may span domains (they asked for it)
    if not opts.tp_across_domains and "tp" not in opts.fixed:
        tp = tp[d % tp == 0]
    pp_max = L if "pp" in opts.fixed else min(L, opts.max_pp)
    pp = div_n[div_n <= pp_max]
    cp_max = n if "cp" in opts.fixed else opts.max_cp
    cp = div_n[(div_n <= cp_max) & ((div_n == 1) | (seq_len % (2 * div_n) == 0))]
    v_max = max([opts.max_vpp, *opts.fixed.get("vpp", ())])
    vpp = np.arange(1, v_max + 1, dtype=np.int64)
    if shape.is_moe:
        ep = div_n[shape.num_experts % div_n == 0]
        if not opts.ep_across_domains and "ep" not in opts.fixed:
            ep = ep[d % ep == 0]
    else:
        ep = np.ones(1, dtype=np.int64)
    mb = np.asarray(sorted(set(opts.micro_batches) | set(opts.fixed.get("micro_batch", ()))), dtype=np.int64)
    zero = np.asarray(sorted(set(opts.zero_stages) | set(opts.fixed.get("zero", ()))), dtype=np.int64)
    rc = np.asarray(sorted({RECOMPUTE.index(r) for r in opts.recompute} | set(opts.fixed.get("recompute", ()))),
                    dtype=np.int64)

    tp, pp, cp, vpp, ep, mb, zero, rc = (
        _restrict(k, v, opts)
        for k, v in zip(
            ("tp", "pp", "cp", "vpp", "ep", "micro_batch", "zero", "recompute"),
            (tp, pp, cp, vpp, ep, mb, zero, rc),
            strict=True,
        )
    )
    # Stage 1: the model-parallel shape (tp, pp, cp, vpp): small product, filter early.
    g = np.meshgrid(tp, pp, cp, vpp, indexing="ij")
    TP, PP, CP, V = (x.ravel() for x in g)
    mp = TP * PP * CP
    ok = n % mp == 0
    # the plan rule on the model-parallel axes alone, prunes early: the axes not chosen yet take values
    # that pass every rule on them (dp = ep = micro-batch = 1, pp micro-batches per step)
    uneven = bool(opts.uneven_pipeline)
    ok &= plan_mask(shape, {"tp": TP, "pp": PP, "cp": CP, "vpp": V, "global_batch": PP, "uneven": uneven}, seq_len)
    if not opts.uneven_pipeline:  # a stack without Megatron's embedding/loss layer slots
        ok &= L % (PP * V) == 0
    elif "vpp" not in opts.fixed:
        # search-space reduction: an uneven layout (neither L nor L + 2 divisible into the stages)
        # interleaves with a power-of-two vpp only (the published uneven recipes use 1, 2, 4, 8)
        st = PP * V
        uneven_only = (L % st != 0) & ((L + 2) % st != 0)
        ok &= ~uneven_only | ((V & (V - 1)) == 0)
        # ... and only with uniform interior virtual stages: c = ceil(L / (pp*vpp)) layers in every virtual
        # stage but the first and the last, which are lighter by the deficit c*pp*vpp - L <= 2c - 1 and
        # carry the embedding and the output layer / loss / MTP (NVIDIA's DeepSeek-V3 layouts
        # "Et*4|(t*4|)*14tmL" on 16 stages, "Et|(tt|)*30mL" on 32). Chunks of mixed sizes inside the
        # interleaved order stall the pipeline beyond what the closed form prices (the event engine, which
        # runs Megatron's interleaved order: 94 layers on PP8 V8, chunks of 1 and 2, +32 %; 36 on PP4 V6 +19 %;
        # 61 on PP8 V4, uniform 2 with light ends, +2.6 %; docs/planner.md), so the search leaves them out
        ok &= ~mixed_interleaved_chunks(L, PP, V)
    TP, PP, CP, V = TP[ok], PP[ok], CP[ok], V[ok]
    DP = n // (TP * PP * CP)
    if "dp" in opts.fixed:
        keep = np.isin(DP, np.asarray(opts.fixed["dp"], dtype=np.int64))
        TP, PP, CP, V, DP = TP[keep], PP[keep], CP[keep], V[keep], DP[keep]

    # Stage 2: cross with ep, micro-batch, zero, recompute, expert-TP, schedule by index arrays (no loop).
    # expert TP: code 0 = etp 1, code 1 = etp tp; values fixed on the command line are taken as they are
    etp_fixed = np.asarray(sorted(set(opts.fixed.get("etp", ()))), dtype=np.int64)
    if etp_fixed.size:
        etp_c = etp_fixed if shape.is_moe else etp_fixed[etp_fixed == 1]
    else:
        etp_c = np.asarray([0, 1] if (shape.is_moe and opts.expert_tp) else [0], dtype=np.int64)
    sc = np.asarray(sorted({PIPELINE_SCHEDULES.index(x) for x in opts.schedules} | set(opts.fixed.get("schedule", ()))),
                    dtype=np.int64)
    sc = _restrict("schedule", sc, opts)
    sizes = (TP.size, ep.size, mb.size, zero.size, rc.size, etp_c.size, sc.size)
    if 0 in sizes:
        return {a: np.zeros(0, dtype=np.int64) for a in AXES}
    i0, i1, i2, i3, i4, i5, i6 = (x.ravel() for x in np.indices(sizes, dtype=np.int64))
    TP, PP, CP, V, DP = TP[i0], PP[i0], CP[i0], V[i0], DP[i0]
    EP, MB, Z, RC, SC = ep[i1], mb[i2], zero[i3], rc[i4], sc[i6]
    ETP = etp_c[i5] if etp_fixed.size else np.where(etp_c[i5] == 1, TP, 1)
    ok = plan_mask(shape, {"tp": TP, "pp": PP, "dp": DP, "cp": CP, "ep": EP, "vpp": V, "micro_batch": MB,
                           "global_batch": global_batch, "zero": Z, "recompute": RC, "etp": ETP, "schedule": SC,
                           "uneven": uneven}, seq_len)
    ok &= (Z == 0) | (DP * CP > 1)  # search-space reduction: ZeRO on one data-parallel rank is ZeRO-0
    if not etp_fixed.size:
        ok &= (etp_c[i5] == 0) | (TP > 1)  # etp = tp = 1 is the etp = 1 row
    out = {
        "tp": TP[ok],
        "pp": PP[ok],
        "dp": DP[ok],
        "cp": CP[ok],
        "ep": EP[ok],
        "vpp": V[ok],
        "zero": Z[ok],
        "micro_batch": MB[ok],
        "recompute": RC[ok],
        "etp": ETP[ok],
        "schedule": SC[ok],
    }
    return {k: np.ascontiguousarray(v, dtype=np.int64) for k, v in out.items()}


def space_size(plans: Plans) -> int:
    return int(next(iter(plans.values())).size) if plans else 0


def take(plans: Mapping[str, np.ndarray], idx: np.ndarray | slice) -> Plans:
    """Select rows of a column dict."""
    return {k: np.asarray(v)[idx] for k, v in plans.items()}


def concat(parts: list[Mapping[str, np.ndarray]]) -> dict[str, np.ndarray]:
    if not parts:
        return {}
    keys = parts[0].keys()
    return {k: np.concatenate([np.asarray(p[k]) for p in parts]) for k in keys}

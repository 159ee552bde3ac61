"""Validation runner: predict every row of a published-measurement CSV and report the error.

Two formats (shared/validation/README.md): training runs (target ``measured_step_time_s``) and NCCL
collective bandwidth (target ``measured_busbw_GBps``, predicted by
``clustertwin.collectives.predict_busbw_row``). Any subset of rows in any order; rows that cannot be
modelled are reported with the reason and count as failures.
"""

from __future__ import annotations

import csv
import importlib
import math
import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from .errors import InputError
from .sim.machine import uncalibrated_note  # noqa: F401  (re-exported)
from .userfiles import is_file
from .workload.model import REAL_ROUTING_LOAD_IMBALANCE, ModelSpec
from .workload.plan import ParallelPlan, make_plan
from .workload.stacks import FrameworkStack, SoftwareStack, stack_for_framework


@dataclass(frozen=True, slots=True)
class CVReport:
    """Leave-one-group-out cross-validation of the fitted constants (training: calibration.py, serving:
    serving/calibration.py): per-fold and per-row results, the cross-validated and in-sample MAPE."""

    column: str
    folds: list[dict[str, Any]]
    rows: list[dict[str, Any]]
    mape_pct: float
    in_sample_mape_pct: float
    constants: list[dict[str, Any]]
    skipped: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"column": self.column, "mape_pct": self.mape_pct, "in_sample_mape_pct": self.in_sample_mape_pct,
                "folds": self.folds, "rows": self.rows, "constants": self.constants, "skipped": self.skipped}


@dataclass(frozen=True, slots=True)
class RowResult:
    id: str
    measured: float | None
    predicted: float | None
    error_pct: float | None
    reason: str = ""
    unit: str = "s"
    stack: str = ""  # software stack preset the row was modelled with (training rows)
    note: str = ""  # how the row was modelled where that is an assumption (unknown framework, uncalibrated chip)

    def to_dict(self) -> dict[str, Any]:
        d = {"id": self.id, "measured": self.measured, "predicted": self.predicted, "error_pct": self.error_pct}
        if self.reason:
            d["reason"] = self.reason
        if self.stack:
            d["stack"] = self.stack
        if self.note:
            d["note"] = self.note
        return d


@dataclass(frozen=True, slots=True)
class ValidationReport:
    kind: str
    rows: list[RowResult] = field(default_factory=list)

    @property
    def modelled(self) -> list[RowResult]:
        return [r for r in self.rows if r.error_pct is not None]

    @property
    def failures(self) -> list[RowResult]:
        return [r for r in self.rows if r.error_pct is None]

    @property
    def mape_pct(self) -> float | None:
        ok = self.modelled
        if not ok:
            return None
        return sum(abs(r.error_pct) for r in ok) / len(ok)

    @property
    def max_abs_error_pct(self) -> float | None:
        ok = self.modelled
        return max(abs(r.error_pct) for r in ok) if ok else None

    def to_dict(self) -> dict[str, Any]:
        return {"rows": [r.to_dict() for r in self.rows], "mape_pct": self.mape_pct,
                "max_abs_error_pct": self.max_abs_error_pct, "failed": len(self.failures), "kind": self.kind}


def _num(row: dict[str, str], key: str, default: float = 0.0) -> float:
    v = (row.get(key) or "").strip()
    if not v:
        return default
    try:
        x = float(v)
    except ValueError:
        raise InputError(f"row {row.get('id', '?')}: column {key!r} is not a number: {v!r}") from None
    if not math.isfinite(x):
        raise InputError(f"row {row.get('id', '?')}: column {key!r} is not finite: {v!r}")
    return x


# Input columns that must be > 0 when present (a zero or negative value is a broken row, not a run).
_POSITIVE_COLUMNS = ("num_layers", "hidden_size", "num_attention_heads", "num_kv_heads", "ffn_hidden_size",
                     "vocab_size", "seq_len", "global_batch", "micro_batch", "tp", "pp", "dp", "cp", "ep",
                     "virtual_pipeline", "num_gpus", "num_nodes", "gpus_per_node", "nics_per_node", "nic_gbps",
                     "size_bytes")
_NON_NEGATIVE_COLUMNS = ("num_experts", "moe_topk", "moe_ffn_hidden_size", "num_shared_experts",
                         "num_dense_layers", "zero_stage")


def check_row_inputs(row: dict[str, str]) -> None:
    """Refuse a row whose numeric inputs are non-finite or out of range (raises ``InputError``)."""
    for key in _POSITIVE_COLUMNS:
        if (row.get(key) or "").strip() and _num(row, key) <= 0:
            raise InputError(f"row {row.get('id', '?')}: column {key!r} must be positive, got {row[key].strip()!r}")
    for key in _NON_NEGATIVE_COLUMNS:
        if (row.get(key) or "").strip() and _num(row, key) < 0:
            raise InputError(f"row {row.get('id', '?')}: column {key!r} must not be negative, got {row[key].strip()!r}")


def measured_value(row: dict[str, str], key: str) -> tuple[float | None, str]:
    """The row's measurement, or ``(None, reason)`` when it is missing, non-positive or non-finite: such a
    row is a failure with that reason, never part of the MAPE."""
    v = (row.get(key) or "").strip()
    if not v:
        return None, f"no measurement ({key} is empty)"
    try:
        x = float(v)
    except ValueError:
        return None, f"measurement {key}={v!r} is not a number"
    if not math.isfinite(x) or x <= 0:
        return None, f"measurement {key}={v!r} must be a positive finite number"
    return x, ""


def _int(row: dict[str, str], key: str, default: int = 0) -> int:
    return int(round(_num(row, key, default)))


# A row is modelled from its columns only: `notes`, `source`, `source_locator`, `inferred_fields` and the id never
# reach a prediction. The id only labels the output (RowResult, ModelSpec.id) and `source` only groups rows into
# the folds of `--cv source`; tests/validate/test_frameworks.py replaces all of them and checks every prediction.
# Architecture details no column holds come from the zoo model the `model` column names (_zoo_arch).
_WITHOUT_MTP = re.compile(r"\b(w/?o|without|no)[\s-]+MTP\b", re.IGNORECASE)
# A model label that says the routing was real, not force-balanced: Megatron-MoE-ModelZoo's "(dropless)" as
# against its "(forced balance)" (the validation README: benchmark MoE rows force balance unless labelled), or
# "real routing" / "unbalanced". A label that also says forced / balanced keeps balanced routing.
_REAL_ROUTING = re.compile(r"\b(dropless|real[\s-]+routing|unbalanced)\b", re.IGNORECASE)
_REAL_ROUTING_EXPLICIT = re.compile(r"\b(real[\s-]+routing|unbalanced)\b", re.IGNORECASE)
# Frameworks whose published benchmark rows force balance whatever the label: the Megatron-Bridge performance
# summary's "(dropless)" is the opposite of its "(tokendrop)", both force-balanced (its footnote; the validation
# README; every performance recipe sets moe_router_force_load_balancing = True), not ModelZoo's real routing.
_FORCED_BALANCE_FRAMEWORKS = frozenset({"megatron-bridge"})
_FORCED_BALANCE = re.compile(r"\b(forced|force[\s-]+balanced?|balanced)\b", re.IGNORECASE)


# A model label that says the run dropped tokens at a capacity factor (Megatron-Bridge's "(tokendrop)" rows, run
# with apply_moe_token_drop: capacity factor 1.0, padded to capacity) rather than the benchmarks' dropless default.
_TOKEN_DROP = re.compile(r"\b(token[\s-]*drop(ping)?|capacity[\s-]+factor)\b", re.IGNORECASE)


def token_drop(label: str) -> bool:
    """True where the ``model`` label says the run dropped tokens to a padded expert capacity."""
    return bool(_TOKEN_DROP.search(label or ""))


def real_routing(label: str, framework: str = "") -> bool:
    """True where the ``model`` label says the run routed tokens with its real router (load imbalance). On a
    framework whose benchmark rows force balance (``_FORCED_BALANCE_FRAMEWORKS``) "dropless" alone does not."""
    text = label or ""
    words = (_REAL_ROUTING_EXPLICIT if (framework or "").strip().lower() in _FORCED_BALANCE_FRAMEWORKS
             else _REAL_ROUTING)
    return bool(words.search(text)) and not _FORCED_BALANCE.search(text)


def model_from_row(row: dict[str, str]) -> ModelSpec:
    """ModelSpec from the CSV columns (+ the details no column holds from the zoo model the ``model`` column
    names: head_dim, MLA ranks, MTP depth, sliding window, clamped GLU, linear biases)."""
    swiglu = (row.get("swiglu") or "").strip().lower() in ("yes", "true", "1")
    kw: dict[str, Any] = dict(
        num_layers=_int(row, "num_layers"), hidden_size=_int(row, "hidden_size"),
        num_attention_heads=_int(row, "num_attention_heads"), num_kv_heads=_int(row, "num_kv_heads"),
        ffn_hidden_size=_int(row, "ffn_hidden_size"), vocab_size=_int(row, "vocab_size"), swiglu=swiglu,
        dropout=not swiglu, tied_embeddings=not swiglu, seq_len=_int(row, "seq_len", 2048),
        num_experts=_int(row, "num_experts"), moe_topk=_int(row, "moe_topk"),
        moe_ffn_hidden_size=_int(row, "moe_ffn_hidden_size"), num_shared_experts=_int(row, "num_shared_experts"),
        num_dense_layers=_int(row, "num_dense_layers"), name=row.get("model") or row["id"],
    )
    kw.update(_zoo_arch(row.get("model") or "", kw)[1])
    if kw.get("num_experts") and real_routing(row.get("model") or "", row.get("framework") or ""):
        kw["moe_load_imbalance"] = REAL_ROUTING_LOAD_IMBALANCE
    if kw.get("num_experts") and token_drop(row.get("model") or ""):
        kw["moe_token_drop"] = True
    if kw.get("kv_lora_rank"):
        kw["num_kv_heads"] = kw["num_attention_heads"]
    return ModelSpec(id=row["id"], **kw)


# Architecture details no column carries, taken from the zoo model the ``model`` column names when the row's
# shape columns are that model's (as blank shape columns are: _fill_shape_from_zoo). The MTP depth too, unless
# the model label says the run has no MTP layer (Megatron-Bridge's "DeepSeek-V3 (w/o MTP)").
_ZOO_FLAGS = ("head_dim", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
              "mtp_depth", "sliding_window", "sliding_window_fraction", "glu_clamp", "linear_bias", "rope_mscale")
_ZOO_MATCH = ("num_layers", "hidden_size", "num_attention_heads", "num_experts", "moe_ffn_hidden_size")
# a detail is taken only where the zoo model differs from ModelSpec's default (0, False; rope_mscale 1 = plain RoPE)
_ZOO_DEFAULTS = {f.name: f.default for f in fields(ModelSpec) if f.name in _ZOO_FLAGS}


def _zoo_arch(name: str, kw: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(zoo id, details): the architecture details (head_dim, MLA ranks, MTP depth, sliding window, clamped
    GLU, linear biases, RoPE mscale) of the zoo model the row's ``model`` column names (catalog/names.py
    ``resolve_model_ref``), when that model has the row's layers, hidden size, heads, experts and expert width;
    ("", {}) otherwise (an unknown name or another architecture keeps the defaults)."""
    if not name.strip():
        return "", {}
    from .catalog.names import resolve_model_ref
    from .errors import UnknownNameError
    from .workload.model import builtin_models

    table = builtin_models()
    try:
        mid, _ = resolve_model_ref(name, tuple(table))
    except UnknownNameError:
        return "", {}
    m = table[mid]
    if any(int(getattr(m, c) or 0) != int(kw.get(c) or 0) for c in _ZOO_MATCH):
        return "", {}
    got = {f: getattr(m, f) for f in _ZOO_FLAGS if getattr(m, f) != _ZOO_DEFAULTS[f]}
    if _WITHOUT_MTP.search(name):
        got.pop("mtp_depth", None)
    mla = kw.get("kv_lora_rank") or got.get("kv_lora_rank")
    if "head_dim" in got and (mla or got["head_dim"] * int(kw.get("num_attention_heads") or 0)
                              == int(kw.get("hidden_size") or 0)):
        del got["head_dim"]  # the default h / a already, or unused (MLA's head dims are its own)
    return (mid, got) if got else ("", {})


def _zoo_arch_note(out: dict[str, str]) -> str:
    """What ``model_from_row`` takes from the zoo model the row's ``model`` column names ("" if nothing)."""
    kw = {c: _int(out, c) for c in _ZOO_MATCH}
    mid, got = _zoo_arch(out.get("model") or "", kw)
    if not got:
        return ""
    return (f"architecture details no column gives taken from the zoo model {mid!r} (the row's model column "
            f"{(out.get('model') or '').strip()!r}): " + ", ".join(f"{k} {v}" for k, v in got.items()))


def _sharded(row: dict[str, str]) -> bool:
    return _int(row, "fsdp") == 1 or _int(row, "zero_stage") >= 3


def framework_for_row(row: dict[str, str]) -> FrameworkStack:
    """The software-stack preset of a run from its ``framework`` / ``framework_version`` columns
    (workload/data/frameworks.yaml); an unknown framework gets the closest preset and a note."""
    return stack_for_framework((row.get("framework") or "").strip(), (row.get("framework_version") or "").strip(),
                               _sharded(row), fsdp=_int(row, "fsdp") == 1)


def stack_for_row(row: dict[str, str]) -> SoftwareStack:
    return framework_for_row(row).stack


def _virtual_stages(row: dict[str, str], fw: FrameworkStack | None = None) -> int:
    """Interleaved virtual stages v. A blank ``virtual_pipeline`` means "interleaved, v not published"
    (validation README): v then follows the framework's own default (frameworks.yaml
    ``blank_virtual_pipeline``): Megatron recipes put 2 layer slots in a virtual stage, counting embedding
    and loss as one slot each (Megatron-Bridge Llama 3.1 405B: pp 8 x vpp 8 and pp 16 x vpp 4 for 126 + 2
    slots), lowered until it divides the slots and the micro-batch count is a multiple of pp; torchtitan
    builds 2 virtual stages per rank."""
    pp = max(1, _int(row, "pp", 1))
    if (row.get("virtual_pipeline") or "").strip():
        return max(1, _int(row, "virtual_pipeline", 1))
    if pp == 1:
        return 1
    fw = fw or framework_for_row(row)
    rule, n = fw.blank_vpp_rule
    slots = _int(row, "num_layers") + 2
    if rule == "stages_per_rank":
        v = max(1, n)
    else:
        v = max(1, slots // (pp * max(1, n)))
    m = _int(row, "global_batch") // max(1, _int(row, "dp", 1) * _int(row, "micro_batch", 1))
    while v > 1 and (m % pp or (slots % (pp * v) and _int(row, "num_layers") % (pp * v))):
        v -= 1
    return v


# Interleaved micro-batch group (Megatron microbatch_group_size_per_vp_stage, default p): no row prints one,
# so every row keeps the default. The Llama 3 runs (framework meta-internal) use the paper's "modified
# interleaved schedule": the paper (Dubey et al. 2024, Sec. 3.3.2) says the schedule "allows setting N
# flexibly" (N consecutive micro-batches per stage) and that "with these optimizations, we could pre-train
# Llama 3 on sequences of 8K tokens without activation checkpointing", but it prints neither N nor V.
# Megatron's warm-up formula is only deadlock-free for N >= p, so N = p is the smallest schedule we can
# model (docs/modelling.md section 2).


def plan_from_row(row: dict[str, str]) -> ParallelPlan:
    fw = framework_for_row(row)
    stack = fw.stack
    zero = _int(row, "zero_stage")
    fsdp = _int(row, "fsdp") == 1
    tp = _int(row, "tp", 1)
    etp = _int(row, "etp", 1)  # an optional column; the published set has none (its README: etp 1)
    return make_plan(
        gpus=_int(row, "num_gpus"), tp=tp, pp=_int(row, "pp", 1), dp=_int(row, "dp", 1), cp=_int(row, "cp", 1),
        ep=_int(row, "ep", 1), etp=etp, vpp=_virtual_stages(row, fw), micro_batch=_int(row, "micro_batch", 1),
        global_batch=_int(row, "global_batch"), seq_len=_int(row, "seq_len", 2048),
        sequence_parallel=_int(row, "sequence_parallel") == 1 and tp > 1, zero=zero if zero else (3 if fsdp else 0),
        fsdp=fsdp and zero >= 3,
        recompute=(row.get("recompute") or "none").strip(), dtype=(row.get("precision") or "bf16").strip(),
        stack=stack.id, uneven_pipeline=True,
    )


def _closest_fabric(name: str, gbps: float, catalog) -> tuple[Any, str]:
    """(fabric, note) for a scale-out name the catalog does not list (catalog/names.py)."""
    from .catalog.names import resolve_fabric

    return resolve_fabric(name, gbps, catalog)


def _wide_dtype_note(out: dict[str, str], gpu: str, catalog) -> str:
    """The note of a TF32 / FP32 row (what a 32-bit step is modelled with); a TF32 row on a chip without TF32
    tensor cores (V100) becomes fp32, as the job ran. "" for other precisions."""
    from .workload.plan import WIDE_DTYPES

    dt = out.get("precision", "")
    if dt not in WIDE_DTYPES:
        return ""
    acc = catalog.accelerators.get(gpu) if gpu else None
    if acc is None and out.get("system") in catalog.systems:
        acc = catalog.systems[out["system"]].accelerator
        gpu = acc.id
    lead = ""
    if dt == "tf32" and acc is not None and not acc.peak_flops.get("tf32"):
        out["precision"] = dt = "fp32"
        lead = f"{gpu} has no TF32 tensor cores: a TF32 job runs its matmuls in FP32 on CUDA cores (modelled as fp32); "
    peak = f"{acc.peak(dt) / 1e12:g} TFLOP/s " if acc is not None else ""
    return (lead + f"{dt} step: GEMMs at the {peak}{dt.upper()} peak with the chip's BF16 MAMF fraction (assumed), "
            "4-byte weights, activations, gradients and collectives, unfused attention (no 32-bit FlashAttention)")


def resolve_row(row: dict[str, str], catalog) -> tuple[dict[str, str], list[str]]:
    """The row with its gpu / system / precision columns as catalog names (catalog/names.py), the blank
    NIC columns filled from a published system's alias entry, and the notes saying what was assumed. A row
    that already uses catalog names comes back equal, with no notes. Raises ``InputError`` with the reason
    for a name no rule places (a TPU, an unknown precision)."""
    from .catalog.names import resolve_accelerator, resolve_dtype, resolve_system

    out = dict(row)
    notes: list[str] = []
    gpu = (row.get("gpu") or "").strip()
    if gpu:
        gpu, note = resolve_accelerator(gpu, catalog)
        out["gpu"] = gpu
        notes.append(note)
    if (row.get("precision") or "").strip():
        from .workload.plan import DTYPES

        out["precision"], note = resolve_dtype(row["precision"], DTYPES)
        notes.append(note)
    sys_name = (row.get("system") or "").strip()
    if sys_name not in catalog.systems:
        sid, defaults, note = resolve_system(sys_name, gpu, _int(row, "gpus_per_node"), catalog)
        out["system"] = sid
        filled = []
        for key, value in defaults.items():
            have = gpu if key == "gpu" else (row.get(key) or "").strip()
            if not have:
                out[key] = str(value)
                filled.append(f"{key} {value}")
        if filled:
            note += "; the row's blank " + ", ".join(filled) + f" taken from {sys_name!r}"
        notes.append(note)
    _fill_columns(out, notes)
    notes.append(_wide_dtype_note(out, gpu, catalog))
    return out, [n for n in notes if n]


# Spellings of the recompute column published runs print -> the plan's modes (validation README: none /
# selective / full). Megatron's --recompute-granularity full (uniform or block method) is `full`;
# "partial" / "block" recompute of some layers is read as `selective`-class (ASSUMED, said in the note).
_RECOMPUTE_SPELLINGS = {
    "none": ("no", "false", "off", "0", "disabled", "no-recompute", "no-ac"),
    "selective": ("selective-attention", "selective-attn", "attention", "sac", "selective-ac", "core-attention",
                  "partial", "block", "op", "selective-op", "per-op", "per-op-sac", "op-sac", "op-level",
                  "selective-per-op", "layer", "per-layer", "selective-layer", "layer-sac"),
    "full": ("yes", "true", "on", "1", "full-uniform", "full-block", "uniform", "activation-checkpointing",
             "checkpointing", "ac", "full-ac", "gradient-checkpointing", "all", "full-recompute"),
}
_FLAG_TRUE = ("1", "yes", "true", "on", "y", "t", "enabled")
_FLAG_FALSE = ("0", "no", "false", "off", "n", "f", "disabled")
# PyTorch FSDP ShardingStrategy names (torch.distributed.fsdp.ShardingStrategy; FSDP2 fully_shard) a published run
# may print in the `fsdp` column -> (fsdp flag, ZeRO stage it implies). HYBRID_SHARD (HSDP) shards inside a
# replica group and all-reduces across groups; it is modelled as full sharding over all dp ranks (said in the note)
_FSDP_STRATEGIES = {
    "full-shard": ("1", 3), "fully-shard": ("1", 3), "shard-grad-op": ("1", 2), "hybrid-shard": ("1", 3),
    "hybrid-shard-zero2": ("1", 2), "no-shard": ("0", 0),
}


def _fill_stack_defaults(out: dict[str, str], notes: list[str]) -> None:
    """A blank ``sequence_parallel`` (on a tp > 1 row), ``zero_stage`` or ``recompute``: what the row's framework
    runs by default (frameworks.yaml blank_sequence_parallel / blank_zero_stage: e.g. Megatron-Core and NeMo
    recipes turn sequence parallelism on with TP and use the distributed optimizer, FSDP stacks shard
    parameters), said in ``notes``. Before, a blank was silently read as off / 0 / none."""
    def text(key: str) -> str:
        return (out.get(key) or "").strip()

    blank_sp = not text("sequence_parallel")
    blank_zero = not text("zero_stage")
    if not (blank_sp or blank_zero or not text("recompute")):
        return
    fw = framework_for_row(out)
    said = []
    try:
        tp = _int(out, "tp", 1)
    except InputError:
        tp = 1
    if blank_sp:
        out["sequence_parallel"] = "1" if (fw.blank_sequence_parallel and tp > 1) else "0"
        if tp > 1:
            said.append(f"sequence_parallel {'on' if fw.blank_sequence_parallel else 'off'}")
    if blank_zero:
        zero = fw.blank_zero_stage
        if zero < 3 and text("fsdp").lower() in _FLAG_TRUE:
            zero = 3
        out["zero_stage"] = str(zero)
        if zero >= 3 and not text("fsdp"):
            out["fsdp"] = "1"
        said.append(f"zero_stage {zero}")
    if not text("recompute"):
        out["recompute"] = "none"
        out[BLANK_RECOMPUTE_KEY] = "1"  # _estimate_row checks that the published run could hold it
        said.append("recompute none")
    if said:
        notes.append(f"blank columns filled with the {fw.framework or 'default'} recipe default (frameworks.yaml): "
                     + ", ".join(said))


def _fill_columns(out: dict[str, str], notes: list[str]) -> None:
    """Spellings and blanks of the layout columns that published runs leave: yes/true flags, "zero-1",
    recompute spellings, blank dp / num_gpus / micro_batch / global_batch / seq_len / ep (MoE), degrees
    that do not multiply to num_gpus. Each filled or corrected value is said in ``notes``; columns a row
    states consistently are left as they are."""
    def text(key: str) -> str:
        return (out.get(key) or "").strip()

    strategy = re.sub(r"[\s_]+", "-", text("fsdp").lower()).strip("-")
    if strategy in _FSDP_STRATEGIES:
        flag, stage = _FSDP_STRATEGIES[strategy]
        said = f"fsdp {text('fsdp')!r} (PyTorch FSDP sharding strategy) read as fsdp {flag}"
        out["fsdp"] = flag
        if not text("zero_stage"):
            out["zero_stage"] = str(stage)
            said += f", zero_stage {stage}"
        if strategy.startswith("hybrid"):
            said += " (HSDP modelled as sharding over all dp ranks: its replica all-reduce is not priced apart)"
        notes.append(said)
    for key in ("sequence_parallel", "fsdp"):
        v = text(key).lower()
        if v in _FLAG_TRUE:
            out[key] = "1"
        elif v in _FLAG_FALSE:
            out[key] = "0"
    m = re.fullmatch(r"(?:zero|stage|zero-stage)?[-_ ]?(\d)", text("zero_stage").lower())
    if m:
        out["zero_stage"] = m.group(1)
    rc = re.sub(r"[\s_]+", "-", text("recompute").lower())
    if rc and rc not in ("none", "selective", "full"):
        mode = next((k for k, names in _RECOMPUTE_SPELLINGS.items() if rc in names), None)
        if mode is None:  # "selective (op)", "full (uniform, 1 layer)": the mode before a parenthetical detail
            head = re.sub(r"-*\(.*$", "", rc).strip("-")
            mode = head if head in _RECOMPUTE_SPELLINGS else next(
                (k for k, names in _RECOMPUTE_SPELLINGS.items() if head in names), None)
        if mode:
            notes.append(f"recompute {text('recompute')!r} read as {mode}")
            out["recompute"] = mode
    _fill_stack_defaults(out, notes)
    if text("virtual_pipeline") == "0":
        out["virtual_pipeline"] = "1"
        notes.append("virtual_pipeline 0 read as 1 (no interleaving)")
    try:
        tp, pp, cp = (max(1, _int(out, k, 1)) for k in ("tp", "pp", "cp"))
        n, dp = _int(out, "num_gpus"), _int(out, "dp")
        mb = _int(out, "micro_batch")
    except InputError:
        return  # a non-numeric column: check_row_inputs / the plan reports it
    if not text("tp") and n and dp and n % (dp * pp * cp) == 0 and n // (dp * pp * cp) > 1:
        tp = n // (dp * pp * cp)
        out["tp"] = str(tp)
        notes.append(f"tp blank: num_gpus / (dp*pp*cp) = {tp}")
    inner = tp * pp * cp
    if pp == 1 and _int(out, "virtual_pipeline") > 1:
        notes.append(f"virtual_pipeline {text('virtual_pipeline')} with pp 1 read as 1 (no pipeline to interleave)")
        out["virtual_pipeline"] = "1"
    if not n and dp:
        out["num_gpus"] = str(inner * dp)
        notes.append(f"num_gpus blank: tp*pp*cp*dp = {inner * dp}")
    elif n and not dp and n % inner == 0:
        out["dp"] = str(n // inner)
        notes.append(f"dp blank: num_gpus / (tp*pp*cp) = {n // inner}")
    elif n and dp and inner * dp != n:
        gb = _int(out, "global_batch")
        if n % inner == 0 and (not gb or gb % ((n // inner) * max(1, mb)) == 0):
            out["dp"] = str(n // inner)
            notes.append(f"tp*pp*cp*dp = {inner * dp} but num_gpus is {n}: dp taken as num_gpus / (tp*pp*cp) = "
                         f"{n // inner}")
        else:
            out["num_gpus"] = str(inner * dp)
            notes.append(f"tp*pp*cp*dp = {inner * dp} but num_gpus is {n}: the degrees are kept, num_gpus "
                         f"taken as {inner * dp}")
    if not mb:
        fw = framework_for_row(out)
        d, gb = max(1, _int(out, "dp", 1)), _int(out, "global_batch")
        if fw.blank_micro_batch == "local" and pp == 1 and gb and gb % d == 0:
            out["micro_batch"] = str(gb // d)
            notes.append(f"micro_batch blank: the {fw.framework} default runs the local batch without gradient "
                         f"accumulation (frameworks.yaml blank_micro_batch): global_batch / dp = {gb // d}")
        else:
            out["micro_batch"] = "1"
            notes.append("micro_batch blank: 1 assumed" + (f" (the {fw.framework} pipeline micro-batch default)"
                                                           if fw.blank_micro_batch == "local" else ""))
    if not text("seq_len"):
        out["seq_len"] = "2048"
        notes.append("seq_len blank: 2048 assumed")
    if not text("global_batch"):
        d, m_, p = max(1, _int(out, "dp", 1)), max(1, _int(out, "micro_batch", 1)), pp
        gb = d * m_ * (4 * p if p > 1 else 1)
        out["global_batch"] = str(gb)
        notes.append(f"global_batch blank: {gb} assumed (dp x micro_batch{' x 4 pp micro-batches' if p > 1 else ''})")
    else:
        d, m_, gb = max(1, _int(out, "dp", 1)), max(1, _int(out, "micro_batch", 1)), _int(out, "global_batch")
        if gb > 0 and gb % (d * m_):
            # a step runs whole micro-batches on every DP rank: the nearest whole number of them
            k = max(1, round(gb / (d * m_)))
            out["global_batch"] = str(k * d * m_)
            notes.append(f"global_batch {gb} is not a multiple of dp x micro_batch = {d * m_}: modelled as {k * d * m_} "
                         f"({k} micro-batch{'es' if k > 1 else ''} per rank); predicted step time is for that batch")
    _fill_shape_from_zoo(out, notes)
    if zoo_note := _zoo_arch_note(out):
        notes.append(zoo_note)
    experts = _int(out, "num_experts")
    if experts > 1:
        if not text("moe_ffn_hidden_size") and text("ffn_hidden_size"):
            out["moe_ffn_hidden_size"] = text("ffn_hidden_size")
            notes.append("moe_ffn_hidden_size blank: experts as wide as ffn_hidden_size (Mixtral-style) assumed")
        if not text("ep"):
            import math

            per_node = _int(out, "gpus_per_node") or 8
            ep = math.gcd(experts, max(1, _int(out, "dp", 1)) * cp)
            while ep > per_node and ep % 2 == 0:
                ep //= 2
            out["ep"] = str(max(1, ep))
            notes.append(f"ep blank for an MoE run: {max(1, ep)} assumed (the largest divisor of the experts and "
                         f"dp*cp that fits one node: expert parallelism inside the NVLink domain)")


# model-shape columns a row may leave blank that the zoo model named in its ``model`` column supplies
_SHAPE_COLUMNS = ("num_layers", "hidden_size", "num_attention_heads", "num_kv_heads", "ffn_hidden_size", "vocab_size")
_MOE_SHAPE_COLUMNS = ("moe_topk", "moe_ffn_hidden_size")


def _fill_shape_from_zoo(out: dict[str, str], notes: list[str]) -> None:
    """Blank shape columns (num_layers .. vocab_size, num_kv_heads, ffn_hidden_size, swiglu; on an MoE row
    moe_topk, moe_ffn_hidden_size) from the zoo model the ``model`` column names (catalog/names.py
    ``resolve_model_ref``: HF ids, -Instruct suffixes ...), each said in ``notes``. MoE columns only when the
    zoo model has the row's expert count. Nothing when no shape column is blank or the name is not a zoo
    model (a blank num_kv_heads is then multi-head attention, a blank swiglu a 2-matrix MLP, as before).
    Before, a blank num_kv_heads / ffn_hidden_size / swiglu was read as MHA / 4h / GELU even for a Llama."""
    experts = _int(out, "num_experts")
    cols = _SHAPE_COLUMNS + (_MOE_SHAPE_COLUMNS if experts > 1 else ()) + ("swiglu",)
    blank = [c for c in cols if not (out.get(c) or "").strip()]
    if not blank or not (out.get("model") or "").strip():
        return
    from .catalog.names import resolve_model_ref
    from .errors import UnknownNameError
    from .workload.model import builtin_models

    table = builtin_models()
    try:
        mid, _ = resolve_model_ref(out["model"], tuple(table))
    except UnknownNameError:
        return
    m = table[mid]
    if (experts > 1) != m.is_moe or (experts > 1 and m.num_experts != experts):
        return  # not the same architecture as the row's
    filled = []
    for c in blank:
        if c == "swiglu":
            out[c] = "yes" if m.swiglu else "no"
            filled.append(f"swiglu {out[c]}")
            continue
        v = int(getattr(m, c) or 0)
        if v > 0:
            out[c] = str(v)
            filled.append(f"{c} {v}")
    if filled:
        notes.append(f"{', '.join(filled)} blank: taken from the zoo model {mid!r} (the row's model column "
                     f"{out['model'].strip()!r})")


def hardware_notes(row: dict[str, str], catalog) -> str:
    """What ``hardware_from_row`` substituted for names the catalog does not list ("" if nothing)."""
    row, notes = resolve_row(row, catalog)
    return "; ".join(notes + [n for n in [_hardware(row, catalog)[2]] if n])


def hardware_from_row(row: dict[str, str], catalog):
    system, fabric, _ = _hardware(resolve_row(row, catalog)[0], catalog)
    return system, fabric


def _fits_one_domain(row: dict[str, str], system) -> bool:
    n = _int(row, "num_gpus")
    per_node = _int(row, "gpus_per_node") or system.devices_per_host
    return 0 < n <= max(per_node, system.devices_per_domain)


def _hardware(row: dict[str, str], catalog):
    """(system, fabric, note) of a row whose names are resolved (``resolve_row``)."""
    from .catalog.names import is_no_scaleout

    notes = []
    sys_name = (row.get("system") or "").strip()
    system = catalog.system(sys_name)
    fabric_id = (row.get("scale_out") or "").strip() or system.default_scaleout
    if fabric_id in catalog.scaleout:
        fabric = catalog.fabric(fabric_id)
    elif is_no_scaleout(fabric_id):
        fabric = catalog.fabric(system.default_scaleout)
        if _fits_one_domain(row, system):
            notes.append(f"scale-out {fabric_id!r}: the run fits one node / scale-up domain, no scale-out "
                         f"traffic (the system's {system.default_scaleout} is carried but unused)")
        else:
            notes.append(f"scale-out {fabric_id!r} but {_int(row, 'num_gpus')} GPUs span several nodes: "
                         f"modelled on the system's default scale-out {system.default_scaleout!r}")
    else:
        fabric, note = _closest_fabric(fabric_id, _num(row, "nic_gbps"), catalog)
        if note:
            notes.append(note)
    nics = _int(row, "nics_per_node")
    gbps = _num(row, "nic_gbps")
    per_node = _int(row, "gpus_per_node") or system.devices_per_host
    if nics and gbps:
        from .units import gbps_to_bytes_per_s

        # NICs per host scaled to the catalog's host size (same NICs per GPU as the row)
        nics_host = nics * system.devices_per_host / per_node
        system = replace(system, nics_per_host=max(1, int(round(nics_host))), nic_bw=gbps_to_bytes_per_s(gbps))
    return system, fabric, "; ".join(notes)


def _row_hardware(row: dict[str, str], catalog):
    row = resolve_row(row, catalog)[0]
    system, fabric, _ = _hardware(row, catalog)
    acc = (row.get("gpu") or "").strip()
    if acc and acc != system.accelerator.id:
        system = replace(system, accelerator=catalog.accelerator(acc))
    return system, fabric


def _stack_notes(row: dict[str, str]) -> str:
    """Where the published layout is outside what the framework's preset lists (a ZeRO stage, recompute
    mode, CP, pipeline schedule): the run used it, so the row is modelled as published and the note says
    the preset was widened."""
    from .workload.rules import plan_problems
    from .workload.stacks import get_stack

    try:
        model, plan = model_from_row(row), plan_from_row(row)
    except (InputError, ValueError, KeyError, TypeError):
        return ""
    st = get_stack(plan.stack)
    extra = [p for p in plan_problems(model, plan, st) if p not in plan_problems(model, plan)]
    if not extra:
        return ""
    return (f"the row's layout is outside the {st.id} preset ({'; '.join(extra)}): the published run used it, so it "
            f"is modelled as published with the preset's other settings")


def row_notes(row: dict[str, str], catalog) -> str:
    """What the model assumed for this row beyond its columns (names outside the catalog, unknown
    framework, a layout outside the preset, uncalibrated chip)."""
    try:
        resolved, notes = resolve_row(row, catalog)
    except InputError:
        resolved, notes = row, []
    notes = notes + [framework_for_row(resolved).note, _stack_notes(resolved), _routing_note(resolved)]
    try:
        notes.append(_hardware(resolved, catalog)[2])
        if resolved.get(BLANK_RECOMPUTE_KEY):
            notes.append(_blank_recompute_choice(resolved, model_from_row(resolved), catalog)[1])
        system, _ = _row_hardware(resolved, catalog)
        notes.append(uncalibrated_note(system.accelerator.id))
    except InputError:
        pass
    return "; ".join(n for n in notes if n)


def _routing_note(row: dict[str, str]) -> str:
    if not (_int(row, "num_experts") and real_routing(row.get("model") or "", row.get("framework") or "")):
        return ""
    return (f"real (not force-balanced) MoE routing, as the model label says: EP-rank load imbalance "
            f"{REAL_ROUTING_LOAD_IMBALANCE:g} (max / mean, derived from Megatron-MoE-ModelZoo's forced / dropless pairs)")


def _check_row_plan(model: ModelSpec, plan: ParallelPlan) -> None:
    """Refuse a row whose layout cannot run the model at all (degrees, divisibility: the model rules);
    a layout the framework's preset does not list is modelled as published (``_stack_notes``)."""
    from .workload.rules import plan_problems

    reasons = plan_problems(model, plan)
    if reasons:
        raise InputError(f"plan cannot run {model.id}: " + reasons[0],
                         hint="; ".join(reasons[1:]) if len(reasons) > 1 else "check the row's parallel degrees")


def predict_training_row(row: dict[str, str], catalog, engine: str = "analytical") -> float:
    return _estimate_row(row, catalog, engine).step_time_s


# A row that leaves `recompute` blank is modelled with its framework's default (none). A published run held its
# activations in the device's memory, so where that default cannot fit - the modelled peak exceeds the usable
# HBM by more than the memory model over-predicts at worst - the run must have recomputed: the least recompute
# mode that fits is modelled instead (selective, else full), and the note says so. The slack is the memory
# model's largest over-prediction on the public memory.csv (+14.6 %, mem-tt-b200-mxfp8-1; `clustertwin validate
# memory.csv`), rounded up: a prediction that much above the device cannot be a run that fit.
BLANK_RECOMPUTE_KEY = "_recompute_blank"
BLANK_RECOMPUTE_FIT_SLACK = 0.15
_RECOMPUTE_ORDER = ("none", "selective", "full")


def _blank_recompute_choice(row: dict[str, str], model: ModelSpec, catalog) -> tuple[dict[str, str], str]:
    """(row, note): a resolved row whose blank `recompute` was filled with ``none``, with the least recompute
    mode whose modelled peak the device could hold (``BLANK_RECOMPUTE_FIT_SLACK``); other rows unchanged.
    ``model``: the row's model (``model_from_row``)."""
    if not row.get(BLANK_RECOMPUTE_KEY) or (row.get("recompute") or "").strip() != "none":
        return row, ""
    from .sim.engines import get_engine
    from .workload.rules import plan_problems

    system, fabric = _row_hardware(row, catalog)
    first_gb = None  # the modelled peak of the first mode the layout can run
    for mode in _RECOMPUTE_ORDER:
        trial = dict(row, recompute=mode)
        plan = plan_from_row(trial)
        if plan_problems(model, plan):
            continue
        est = get_engine("analytical").estimate(model, system, fabric, plan, catalog=catalog, check=False)
        first_gb = est.memory_gb_per_gpu if first_gb is None else first_gb
        cap = est.memory_capacity_gb
        if cap <= 0 or est.memory_gb_per_gpu <= cap * (1.0 + BLANK_RECOMPUTE_FIT_SLACK) or mode == "full":
            if mode == "none":
                return row, ""
            return trial, (f"recompute blank: without recompute the modelled peak is {first_gb:.0f} GB "
                           f"per GPU, more than the {cap:.0f} GB usable could hold (even at the memory model's "
                           f"+{100 * BLANK_RECOMPUTE_FIT_SLACK:.0f} % worst over-prediction), so the published run "
                           f"recomputed: modelled with recompute {mode} "
                           f"({est.memory_gb_per_gpu:.0f} GB), the least mode that fits")
    return row, ""


def _estimate_row(row: dict[str, str], catalog, engine: str = "analytical"):
    row = resolve_row(row, catalog)[0]
    model = model_from_row(row)
    row = _blank_recompute_choice(row, model, catalog)[0]
    plan = plan_from_row(row)
    _check_row_plan(model, plan)
    system, fabric = _row_hardware(row, catalog)
    from .sim.engines import get_engine

    return get_engine(engine).estimate(model, system, fabric, plan, catalog=catalog, check=False)


PACKAGED_SETS = ("training", "collectives", "serving", "memory")


def packaged_path(name: str) -> Path:
    """The packaged copy of a public validation set (``data/validation/NAME.csv``, see PROVENANCE.md)."""
    from importlib import resources

    return Path(str(resources.files("clustertwin") / "data" / "validation" / f"{name}.csv"))


def resolve_validation_path(path: str | Path) -> Path:
    """A CSV path, or the name of a packaged set (``training``, ``collectives``, ``serving``, ``memory``)."""
    text = str(path)
    if text in PACKAGED_SETS and not is_file(text):
        return packaged_path(text)
    return Path(path)


def _read_csv(path: str | Path) -> tuple[list[str], list[dict[str, str]]]:
    p = resolve_validation_path(path)
    try:
        with p.open(newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            rows = list(reader)
            header = list(reader.fieldnames or [])
    except FileNotFoundError:
        raise InputError(f"validation file {str(p)!r} does not exist", hint="pass a CSV in the validation format, or the name of a packaged set: " + ", ".join(PACKAGED_SETS)) from None
    except (OSError, csv.Error, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read validation file {str(p)!r}: {exc}") from None
    return header, rows


class _Progress(list):
    """The rows, reporting ``progress(done, total)`` as a validator walks them (for a progress bar)."""

    def __init__(self, rows, progress):
        super().__init__(rows)
        self._progress = progress

    def __iter__(self):
        n = len(self)
        for i, row in enumerate(list.__iter__(self)):
            yield row
            self._progress(i + 1, n)


def validate_file(path: str | Path, *, catalog=None, engine: str = "analytical", progress=None) -> ValidationReport:
    """Predict every row of a validation CSV; the format is recognised by its target column
    (``VALIDATORS``: first match in order). ``progress(done, total)`` is called after each row."""
    from .catalog import load_catalog

    catalog = catalog or load_catalog()
    header, rows = _read_csv(path)
    if progress is not None:
        rows = _Progress(rows, progress)
    for column, fn in VALIDATORS:
        if column in header:
            return fn(rows, catalog, engine)
    raise InputError(
        f"{path}: unknown validation format (none of the target columns {', '.join(c for c, _ in VALIDATORS)})",
        hint="use the format of shared/validation/README.md",
    )


def validate_rows(rows: list[dict[str, str]], *, catalog=None, engine: str = "analytical") -> ValidationReport:
    """Like ``validate_file`` for rows already read (dicts of the CSV columns); training format."""
    from .catalog import load_catalog

    return _validate_training(rows, catalog or load_catalog(), engine)


def _validate_predicted(rows, catalog, engine, *, target: str, kind: str, unit: str, predict,
                        extra_note=None) -> ValidationReport:
    out = []
    for row in rows:
        rid = (row.get("id") or "?").strip()
        measured, why = measured_value(row, target)
        if measured is None:
            out.append(RowResult(rid, None, None, None, reason=why, unit=unit))
            continue
        try:
            resolved = resolve_row(row, catalog)[0]
            check_row_inputs(resolved)
            pred = predict(resolved)
        except InputError as exc:
            out.append(RowResult(rid, measured, None, None, reason=exc.message, unit=unit))
            continue
        except (ArithmeticError, ValueError, KeyError, TypeError) as exc:  # never lose the other rows
            out.append(RowResult(rid, measured, None, None, unit=unit,
                                 reason=f"cannot model this row: {type(exc).__name__}: {exc}"))
            continue
        if not (pred > 0 and pred < float("inf")):
            out.append(RowResult(rid, measured, None, None, reason=f"model produced no finite {kind} value", unit=unit))
            continue
        note = "; ".join(n for n in (row_notes(row, catalog), extra_note(row) if extra_note else "") if n)
        out.append(RowResult(rid, measured, pred, 100.0 * (pred - measured) / measured, unit=unit,
                             stack=stack_for_row(resolved).id, note=note))
    return ValidationReport(kind, out)


def _validate_training(rows, catalog, engine="analytical") -> ValidationReport:
    return _validate_predicted(rows, catalog, engine, target="measured_step_time_s", kind="training", unit="s",
                               predict=lambda row: predict_training_row(row, catalog, engine))


# what a memory figure counts (memory.csv `memory_basis`, documented in the validation README): words of the
# column -> basis, first match. "allocator": the PyTorch caching allocator's peak (torch.cuda
# max_memory_reserved / max_memory_allocated, what torchtitan and Megatron log), which holds the tensors but
# not the CUDA context, NCCL's own buffers and other driver allocations; "device": the process's whole
# footprint (nvidia-smi / NVML used memory), i.e. those too (efficiency.yaml runtime_overhead_gb).
# The vendor tools that read the device's used memory as nvidia-smi does: AMD rocm-smi / amd-smi (ROCm SMI
# "VRAM used"), Huawei npu-smi (HBM usage), NVIDIA DCGM (DCGM_FI_DEV_FB_USED, framebuffer used).
MEMORY_BASIS_WORDS = (("nvidia-smi", "device"), ("nvml", "device"), ("device memory used", "device"),
                      ("rocm-smi", "device"), ("amd-smi", "device"), ("npu-smi", "device"), ("dcgm", "device"),
                      ("fb_used", "device"), ("fb used", "device"),
                      ("reserved", "allocator"), ("allocated", "allocator"), ("torch.cuda", "allocator"))


def memory_basis(row: dict[str, str]) -> tuple[str, str]:
    """(basis, note) of a memory row: ``allocator`` or ``device``; an unrecognised or blank `memory_basis` is
    read as the allocator's peak (what PyTorch frameworks report) and the note says so."""
    text = (row.get("memory_basis") or "").lower()
    for word, basis in MEMORY_BASIS_WORDS:
        if word in text:
            return basis, ""
    return "allocator", "memory_basis not recognised: read as the PyTorch allocator's peak (no CUDA context / NCCL buffers)"


def predict_memory_row(row: dict[str, str], catalog, engine: str = "analytical") -> float:
    """Predicted peak memory per GPU of a run, in GB (1e9 B), on the row's `memory_basis`: the allocator's
    peak leaves out the runtime memory outside it (CUDA context, NCCL buffers), a device figure includes it."""
    est = _estimate_row(row, catalog, "analytical")
    basis, _ = memory_basis(row)
    if basis == "device":
        return est.memory_gb_per_gpu
    return est.memory_gb_per_gpu - float(est.memory_breakdown_gb.get("runtime", 0.0))


def memory_cross_validate(rows: list[dict[str, str]], column: str = "source", *, catalog=None) -> CVReport:
    """Leave-one-``column``-value-out on a memory file. The memory model has no fitted constant (every
    term is counted from the framework's sources, docs/modelling.md), so a held-out fold is predicted by
    the same model as in-sample: the report gives the per-fold figures, and ``constants`` is empty."""
    from .catalog import load_catalog

    if rows and column not in rows[0]:
        raise InputError(f"--cv {column}: the file has no column {column!r}",
                         hint="group by a column of the file, e.g. --cv source")
    catalog = catalog or load_catalog()
    rep = _validate_memory(rows, catalog)
    group = {(r.get("id") or "?").strip(): (r.get(column) or "").strip() for r in rows}
    folds: dict[str, list[float]] = {}
    out_rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    errors: list[float] = []
    for res in rep.rows:
        if res.error_pct is None:
            skipped.append(res.id)
            continue
        folds.setdefault(group[res.id], []).append(res.error_pct)
        errors.append(abs(res.error_pct))
        out_rows.append({"id": res.id, "fold": group[res.id], "measured": res.measured, "predicted": res.predicted,
                         "error_pct": res.error_pct})
    fold_rows: list[dict[str, Any]] = [
        {"fold": name, "n": len(e), "mape_pct": sum(abs(x) for x in e) / len(e), "bias_pct": sum(e) / len(e),
         "max_abs_error_pct": max(abs(x) for x in e), "values": {}} for name, e in folds.items()]
    mape = sum(errors) / len(errors) if errors else float("nan")
    return CVReport(column, fold_rows, out_rows, mape, mape, [], skipped)


def _validate_memory(rows, catalog, engine="analytical") -> ValidationReport:
    return _validate_predicted(rows, catalog, engine, target="measured_memory_gb_per_gpu", kind="memory", unit="GB",
                               predict=lambda row: predict_memory_row(row, catalog, engine),
                               extra_note=lambda row: memory_basis(row)[1])


def _validate_collectives(rows: list[dict[str, str]], catalog, engine: str = "analytical") -> ValidationReport:
    fn = None
    try:
        mod = importlib.import_module("clustertwin.collectives")
        fn = getattr(mod, "predict_busbw_row", None)
    except ImportError:
        fn = None
    out = []
    for row in rows:
        rid = (row.get("id") or "?").strip()
        measured, why = measured_value(row, "measured_busbw_GBps")
        if measured is None:
            out.append(RowResult(rid, None, None, None, reason=why, unit="GB/s"))
            continue
        if fn is None:
            out.append(RowResult(rid, measured, None, None, unit="GB/s",
                                 reason="collective model not available (clustertwin.collectives.predict_busbw_row missing)"))
            continue
        try:
            check_row_inputs(row)
            pred = float(fn(dict(row), catalog))
        except InputError as exc:
            out.append(RowResult(rid, measured, None, None, reason=exc.message, unit="GB/s"))
            continue
        if not (0 < pred < float("inf")):
            out.append(RowResult(rid, measured, None, None, reason="model produced no finite bandwidth", unit="GB/s"))
            continue
        from .collectives.validation import row_notes as collective_notes

        note = collective_notes(dict(row), catalog)
        out.append(RowResult(rid, measured, pred, 100.0 * (pred - measured) / measured, unit="GB/s", note=note))
    return ValidationReport("collectives", out)


# Validation formats by target column, tried in order (a file with several target columns is read as the
# first). Other modules may append (column, fn(rows, catalog, engine) -> ValidationReport).
def _validate_serving(rows, catalog, engine="analytical") -> ValidationReport:
    from .serving.validation import validate_serving_rows  # serving.csv (SERVING.md)

    return validate_serving_rows(rows, catalog)


VALIDATORS: list[tuple[str, Any]] = [
    ("measured_busbw_GBps", _validate_collectives),
    ("measured_step_time_s", _validate_training),
    ("measured_memory_gb_per_gpu", _validate_memory),
    ("target_metric", _validate_serving),
]


# ---------------------------------------------------------------------------------------------------
# per-category table (--by)
# ---------------------------------------------------------------------------------------------------
# Derived category columns: `moe` (moe / dense, from num_experts), `sharding` (fsdp / zero3 / none, from the
# fsdp and zero_stage columns), `family` (megatron = any megatron-* framework, fsdp = a sharded run of
# another framework, else the framework); `size-band` (collectives: <1MiB / 1-64MiB / >=64MiB from size_bytes).
DERIVED_COLUMNS = ("moe", "sharding", "family", "size-band")


def category_value(row: dict[str, str], column: str) -> str:
    if column == "size-band":
        from .collectives.validation import size_band

        return size_band(_num(row, "size_bytes")) if (row.get("size_bytes") or "").strip() else "?"
    if column == "moe":
        return "moe" if _int(row, "num_experts") > 0 else "dense"
    if column == "sharding":
        if _int(row, "fsdp") == 1:
            return "fsdp"
        return "zero3" if _int(row, "zero_stage") >= 3 else "none"
    if column == "family":
        fw = (row.get("framework") or "").strip().lower()
        if fw.startswith("megatron") or (fw and framework_for_row(row).framework.startswith("megatron")):
            return "megatron"  # any megatron-* framework or an alias of one (nemo, mcore)
        return "fsdp" if _sharded(row) else (fw or "?")
    return (row.get(column) or "").strip() or "?"


def by_table(report: ValidationReport, rows: list[dict[str, str]], columns: list[str]) -> list[dict[str, Any]]:
    """MAPE, bias and worst row per value of each column (separately per column, then an "all" row)."""
    if rows:
        missing = [c for c in columns if c not in rows[0] and c not in DERIVED_COLUMNS]
        if missing:
            raise InputError(f"--by: the file has no column {missing[0]!r}",
                             hint="use columns of the file or " + ", ".join(DERIVED_COLUMNS))
    by_id = {(r.get("id") or "?").strip(): r for r in rows}
    out: list[dict[str, Any]] = []

    def stats(col: str, val: str, res: list[RowResult]) -> dict[str, Any]:
        ok = [r for r in res if r.error_pct is not None]
        errs = [r.error_pct for r in ok]
        worst = max(ok, key=lambda r: abs(r.error_pct), default=None)
        return {"column": col, "value": val, "n": len(res), "modelled": len(ok),
                "mape_pct": sum(abs(e) for e in errs) / len(errs) if errs else None,
                "bias_pct": sum(errs) / len(errs) if errs else None,
                "max_abs_error_pct": abs(worst.error_pct) if worst else None, "worst": worst.id if worst else None}

    for col in columns:
        groups: dict[str, list[RowResult]] = {}
        for r in report.rows:
            src = by_id.get(r.id)
            groups.setdefault(category_value(src, col) if src else "?", []).append(r)
        for val in sorted(groups):
            out.append(stats(col, val, groups[val]))
    out.append(stats("all", "all", report.rows))
    return out


def cross_table(report: ValidationReport, rows: list[dict[str, str]], row_col: str, col_col: str) -> dict[str, Any]:
    """Two-way table: MAPE / max |error| / n per (value of ``row_col``, value of ``col_col``), e.g.
    system x size-band for collectives (``--by system,size-band``)."""
    by_table(report, rows, [row_col, col_col])  # same column checks
    by_id = {(r.get("id") or "?").strip(): r for r in rows}
    cells: dict[str, dict[str, list[float]]] = {}
    for r in report.rows:
        src = by_id.get(r.id)
        if src is None or r.error_pct is None:
            continue
        cells.setdefault(category_value(src, row_col), {}).setdefault(category_value(src, col_col), []).append(r.error_pct)
    order = [v for v in ("<1MiB", "1-64MiB", ">=64MiB") if any(v in c for c in cells.values())]
    columns = order if col_col == "size-band" else sorted({v for c in cells.values() for v in c})
    return {
        "rows": row_col, "columns": col_col, "column_values": columns,
        "table": [{"value": rv, "cells": {cv: {"n": len(e), "mape_pct": sum(map(abs, e)) / len(e),
                                                "max_abs_error_pct": max(map(abs, e)), "bias_pct": sum(e) / len(e)}
                                           for cv, e in cells[rv].items()}}
                  for rv in sorted(cells)],
    }


def read_rows(path: str | Path) -> list[dict[str, str]]:
    """The rows of a validation CSV (path or packaged set name)."""
    return _read_csv(path)[1]

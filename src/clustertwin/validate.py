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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .errors import InputError
from .workload.model import ModelSpec
from .workload.plan import ParallelPlan, check_plan, make_plan
from .workload.stacks import SoftwareStack, get_stack

# Which software stack (clustertwin.workload.stacks) a published run used, from its arXiv id:
# FlashAttention (arXiv 2205.14135) and Transformer-Engine communication overlap postdate the runs
# published before 2206, which used Megatron-LM's unfused attention path and no comm overlap; sequence
# parallelism and selective recompute arrived with Korthikanti et al. (2205.05198). Runs without an
# arXiv id are NVIDIA's current Megatron-Core / Megatron-Bridge recipes.
_FLASH_FIRST_ARXIV = 2206
_SEQUENCE_PARALLEL_ARXIV = 2205


@dataclass(frozen=True, slots=True)
class RowResult:
    id: str
    measured: float | None
    predicted: float | None
    error_pct: float | None
    reason: str = ""
    unit: str = "s"
    stack: str = ""  # software stack preset the row was modelled with (training rows)

    def to_dict(self) -> dict[str, Any]:
        d = {"id": self.id, "measured": self.measured, "predicted": self.predicted, "error_pct": self.error_pct}
        if self.reason:
            d["reason"] = self.reason
        if self.stack:
            d["stack"] = self.stack
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


def _arch_notes(notes: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for key in ("head_dim", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
        m = re.search(rf"\b{key}\s*=\s*(\d+)", notes)
        if m:
            out[key] = int(m.group(1))
    m = re.search(r"MTP depth\s*=\s*(\d+)", notes, re.IGNORECASE)
    if m:
        out["mtp_depth"] = int(m.group(1))
    return out


def model_from_row(row: dict[str, str]) -> ModelSpec:
    """ModelSpec from the CSV columns (+ ``arch:`` details in notes: head_dim, MLA ranks, MTP depth)."""
    swiglu = (row.get("swiglu") or "").strip().lower() in ("yes", "true", "1")
    arch = _arch_notes(row.get("notes") or "")
    kw: dict[str, Any] = dict(
        num_layers=_int(row, "num_layers"), hidden_size=_int(row, "hidden_size"),
        num_attention_heads=_int(row, "num_attention_heads"), num_kv_heads=_int(row, "num_kv_heads"),
        ffn_hidden_size=_int(row, "ffn_hidden_size"), vocab_size=_int(row, "vocab_size"), swiglu=swiglu,
        dropout=not swiglu, tied_embeddings=not swiglu, seq_len=_int(row, "seq_len", 2048),
        num_experts=_int(row, "num_experts"), moe_topk=_int(row, "moe_topk"),
        moe_ffn_hidden_size=_int(row, "moe_ffn_hidden_size"), num_shared_experts=_int(row, "num_shared_experts"),
        num_dense_layers=_int(row, "num_dense_layers"), name=row.get("model") or row["id"],
        source=row.get("source") or "",
    )
    kw.update(arch)
    if kw.get("kv_lora_rank"):
        kw["num_kv_heads"] = kw["num_attention_heads"]
    return ModelSpec(id=row["id"], **kw)


def stack_for_row(row: dict[str, str]) -> SoftwareStack:
    """The software stack preset of a published run (see the comment on ``_FLASH_FIRST_ARXIV``)."""
    text = f"{row.get('source', '')} {row.get('source_locator', '')}"
    if any(f"arXiv:{a}" in text for a in _FSDP_ARXIV):
        return get_stack("pytorch-fsdp")
    ids = [int(a) for a in re.findall(r"arXiv:(\d{4})\.\d{4,5}", text)]
    if ids and min(ids) < _FLASH_FIRST_ARXIV:
        return get_stack("megatron-lm-2021" if min(ids) < _SEQUENCE_PARALLEL_ARXIV else "megatron-lm-2022")
    return get_stack("megatron-core")


# When a row says its virtual-pipeline value is a placeholder (interleaved schedule, V not printed), use the
# layout of NVIDIA's published interleaved recipes for the same model class: 2 layer slots per virtual
# stage, counting embedding and loss as one slot each (Megatron-Bridge Llama 3.1 405B: pp 8 x vpp 8 and
# pp 16 x vpp 4 for 126 + 2 slots).
_LAYERS_PER_VIRTUAL_STAGE = 2


def _virtual_stages(row: dict[str, str]) -> int:
    v = max(1, _int(row, "virtual_pipeline", 1))
    pp = max(1, _int(row, "pp", 1))
    text = (row.get("inferred_fields") or "") + " " + (row.get("notes") or "")
    if v == 1 and pp > 1 and re.search(r"virtual_pipeline\s*=\s*1 is a placeholder", text):
        slots = _int(row, "num_layers") + 2
        v = max(1, slots // (pp * _LAYERS_PER_VIRTUAL_STAGE))
        m = _int(row, "global_batch") // max(1, _int(row, "dp", 1) * _int(row, "micro_batch", 1))
        while v > 1 and (m % pp or slots % (pp * v)):
            v -= 1
    return v


# Interleaved micro-batch group (Megatron microbatch_group_size_per_vp_stage, default p): no row prints one,
# so every row keeps the default. The Llama 3 rows run the paper's "modified interleaved schedule": the
# paper (arXiv:2407.21783 Sec. 3.3.2) says the schedule "allows setting N flexibly" (N consecutive
# micro-batches per stage) and that "with these optimizations, we could pre-train Llama 3 on sequences of
# 8K tokens without activation checkpointing" - hence recompute=none - but it prints neither N nor V.
# Megatron's warm-up formula is only deadlock-free for N >= p, so N = p is the smallest schedule we can
# model; with the exact per-chunk warm-up count and one layer fewer on the first/last stage (also stated
# there) those rows fit in 80 GB (docs/modelling.md section 2).


# Llama 3 (arXiv:2407.21783 Sec. 3.3.2) trained with PyTorch FSDP: "we use FP32 gradient accumulation
# during backward computation over multiple micro-batches and also reduce-scatter gradients in FP32 across
# data parallel workers in FSDP", all-gather-based CP - the pytorch-fsdp stack (stated settings, not fits).
_FSDP_ARXIV = ("2407.21783",)


def plan_from_row(row: dict[str, str]) -> ParallelPlan:
    stack = stack_for_row(row)
    zero = _int(row, "zero_stage")
    fsdp = _int(row, "fsdp") == 1
    tp = _int(row, "tp", 1)
    etp_m = re.search(r"\betp\s*=\s*(\d+)", row.get("notes") or "")
    etp = int(etp_m.group(1)) if etp_m else 1
    return make_plan(
        gpus=_int(row, "num_gpus"), tp=tp, pp=_int(row, "pp", 1), dp=_int(row, "dp", 1), cp=_int(row, "cp", 1),
        ep=_int(row, "ep", 1), etp=etp, vpp=_virtual_stages(row), micro_batch=_int(row, "micro_batch", 1),
        global_batch=_int(row, "global_batch"), seq_len=_int(row, "seq_len", 2048),
        sequence_parallel=_int(row, "sequence_parallel") == 1 and tp > 1, zero=zero if zero else (3 if fsdp else 0),
        fsdp=fsdp and zero >= 3,
        recompute=(row.get("recompute") or "none").strip(), dtype=(row.get("precision") or "bf16").strip(),
        stack=stack.id, uneven_pipeline=True,
        cp_comm="allgather" if re.search(r"CP uses all-gather", row.get("notes") or "", re.IGNORECASE) else None,
    )


def hardware_from_row(row: dict[str, str], catalog):
    system = catalog.system((row.get("system") or "").strip())
    fabric_id = (row.get("scale_out") or "").strip() or system.default_scaleout
    fabric = catalog.fabric(fabric_id)
    nics = _int(row, "nics_per_node")
    gbps = _num(row, "nic_gbps")
    per_node = _int(row, "gpus_per_node") or system.devices_per_host
    if nics and gbps:
        from .units import gbps_to_bytes_per_s

        # NICs per host scaled to the catalog's host size (same NICs per GPU as the row)
        nics_host = nics * system.devices_per_host / per_node
        system = replace(system, nics_per_host=max(1, int(round(nics_host))), nic_bw=gbps_to_bytes_per_s(gbps))
    return system, fabric


def predict_training_row(row: dict[str, str], catalog, engine: str = "analytical") -> float:
    model = model_from_row(row)
    plan = plan_from_row(row)
    check_plan(model, plan)
    system, fabric = hardware_from_row(row, catalog)
    acc = (row.get("gpu") or "").strip()
    if acc and acc != system.accelerator.id:
        system = replace(system, accelerator=catalog.accelerator(acc))
    if engine == "analytical":
        from .sim.analytical import estimate

        return estimate(model, system, fabric, plan, catalog=catalog, check=False).step_time_s
    from .api import _event_engine

    return _event_engine().estimate(model, system, fabric, plan, catalog=catalog).step_time_s


PACKAGED_SETS = ("training", "collectives", "serving", "memory")


def packaged_path(name: str) -> Path:
    """The packaged copy of a public validation set (``data/validation/NAME.csv``, see PROVENANCE.md)."""
    from importlib import resources

    return Path(str(resources.files("clustertwin") / "data" / "validation" / f"{name}.csv"))


def resolve_validation_path(path: str | Path) -> Path:
    """A CSV path, or the name of a packaged set (``training``, ``collectives``, ``serving``, ``memory``)."""
    text = str(path)
    if text in PACKAGED_SETS and not Path(text).exists():
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


def validate_file(path: str | Path, *, catalog=None, engine: str = "analytical") -> ValidationReport:
    from .catalog import load_catalog

    catalog = catalog or load_catalog()
    header, rows = _read_csv(path)
    if "measured_busbw_GBps" in header:
        return _validate_collectives(rows, catalog)
    if "measured_step_time_s" not in header:
        raise InputError(
            f"{path}: unknown validation format (no measured_step_time_s or measured_busbw_GBps column)",
            hint="use the format of shared/validation/README.md",
        )
    out = []
    for row in rows:
        rid = (row.get("id") or "?").strip()
        measured, why = measured_value(row, "measured_step_time_s")
        if measured is None:
            out.append(RowResult(rid, None, None, None, reason=why))
            continue
        try:
            check_row_inputs(row)
            pred = predict_training_row(row, catalog, engine)
        except InputError as exc:
            out.append(RowResult(rid, measured, None, None, reason=exc.message))
            continue
        except (ArithmeticError, ValueError, KeyError, TypeError) as exc:  # never lose the other rows
            out.append(RowResult(rid, measured, None, None, reason=f"cannot model this row: {type(exc).__name__}: {exc}"))
            continue
        if not (pred > 0 and pred < float("inf")):
            out.append(RowResult(rid, measured, None, None, reason="model produced no finite step time"))
            continue
        out.append(RowResult(rid, measured, pred, 100.0 * (pred - measured) / measured, stack=stack_for_row(row).id))
    return ValidationReport("training", out)


def _validate_collectives(rows: list[dict[str, str]], catalog) -> ValidationReport:
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
        out.append(RowResult(rid, measured, pred, 100.0 * (pred - measured) / measured, unit="GB/s"))
    return ValidationReport("collectives", out)

"""Shared CLI pieces: the typer app, consoles, common options and JSON output."""

from __future__ import annotations

import json
import math
import sys
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from ..errors import InputError
from .render import FORMATS, OutputConsole

app = typer.Typer(
    name="clustertwin",
    help="ClusterTwin: a digital twin of AI training clusters (scale-up + scale-out, workloads, cost).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
# markup=False: text from users (ids, paths, file contents) is printed as it is, never read as rich
# markup ("[/x]" or "[red]" in a name must neither crash the printer nor vanish). Styling goes through
# ``styled`` / rich ``Text`` objects instead.
console = OutputConsole(highlight=False, soft_wrap=False, markup=False)  # tables adapt: see cli/render.py
console_err = Console(stderr=True, highlight=False, markup=False)


@app.callback()
def _root(
    format: Annotated[str, typer.Option("--format", help="Tables: auto (rich on a terminal, plain aligned text in pipes and files) | rich | plain | csv (stdout only CSV). Also CLUSTERTWIN_FORMAT.")] = "",
) -> None:
    """ClusterTwin: a digital twin of AI training clusters (scale-up + scale-out, workloads, cost)."""
    import os

    fmt = format or os.environ.get("CLUSTERTWIN_FORMAT") or "auto"
    if fmt not in FORMATS:
        from ..errors import UnknownNameError

        raise UnknownNameError("output format", fmt, FORMATS, hint="--format auto | rich | plain | csv")
    console.table_format = fmt  # set on every run (the CLI may run many times in one process)


def styled(head: str, style: str, rest: str = "") -> Text:
    """``head`` in ``style`` followed by plain ``rest`` (neither is parsed as markup)."""
    return Text.assemble((head, style), rest)

# Shared option types: one spelling everywhere (see docs/architecture.md, "Contracts").
JsonOpt = Annotated[bool, typer.Option("--json", help="Print exactly one JSON document on stdout.")]
# `--network flow` (contention from the flow-level fabric simulator), shared by `collective` and `estimate`.
StackOpt = Annotated[str | None, typer.Option("--stack", help="Software stack: megatron-core (default) | megatron-lm-2021 | megatron-lm-2022 | pytorch-fsdp (clustertwin stacks lists what each can do).")]
NetworkOpt = Annotated[str, typer.Option("--network", help="analytical (default) | flow: add the scale-out contention the flow-level fabric simulator finds (routing, oversubscription, failures).")]
RoutingOpt = Annotated[str | None, typer.Option("--routing", help="With --network flow: ecmp (default) | adaptive | spray.")]
NetTopologyOpt = Annotated[str | None, typer.Option("--topology", help="With --network flow: fat-tree | rail | dual-plane (default: the fabric simulator's).")]
# --oversubscription has one meaning everywhere: the leaf's down:up port ratio (>= 1; 1 = full bisection).
OVERSUB_HELP = "Leaf down:up port ratio (>= 1; 1 = full bisection)"
OversubOpt = Annotated[float, typer.Option("--oversubscription", help=f"{OVERSUB_HELP}.")]
NetOversubOpt = Annotated[float, typer.Option("--oversubscription", help=f"{OVERSUB_HELP}: --network flow builds that fabric; the analytical network takes the worst case (each NIC at 1/ratio), as plan does.")]
FailLinksOpt = Annotated[int, typer.Option("--fail-links", help="With --network flow: K random failed scale-out cables (seeded).")]
SeedOpt = Annotated[int, typer.Option("--seed", help="With --network flow: seed for ECMP hashing and failures.")]
CatalogOpt = Annotated[
    list[Path] | None,
    typer.Option("--catalog", help="Extra catalog YAML file(s) (repeatable); also CLUSTERTWIN_CATALOG."),
]
MemoryMarginOpt = Annotated[float | None, typer.Option("--memory-margin", help="GB per GPU a layout must leave free beyond its modelled peak for the fit check (default 2: NCCL buffers and allocator fragmentation the model does not count; 0 = the modelled peak only).")]


# Model-shape flags, declared once for `estimate` and `plan`: (parameter, flag, ModelSpec field, help).
def _shape(flag: str, help_: str, kind: type = int):
    return Annotated[kind | None, typer.Option(flag, help=help_)]


LayersOpt = _shape("--layers", "Custom model: transformer layers (overrides --model's).")
HiddenOpt = _shape("--hidden", "Custom model: hidden size.")
HeadsOpt = _shape("--heads", "Custom model: attention heads.")
KvHeadsOpt = _shape("--kv-heads", "Custom model: KV heads (GQA).")
FfnOpt = _shape("--ffn", "Custom model: FFN width.")
VocabOpt = _shape("--vocab", "Custom model: vocabulary size.")
SwigluOpt = Annotated[bool | None, typer.Option("--swiglu/--gelu", help="Custom model: gated MLP or not.")]
ExpertsOpt = _shape("--experts", "Custom model: routed experts.")
TopkOpt = _shape("--topk", "Custom model: experts per token.")
ExpertFfnOpt = _shape("--expert-ffn", "Custom model: expert FFN width.")
MoeImbalanceOpt = _shape("--moe-load-imbalance", "MoE routing: max / mean token load of the EP ranks per MoE layer "
                         "(default 1: force-balanced, as published benchmarks run; 1.75: real routing, measured on "
                         "Qwen3-235B, docs/modelling.md).", float)
SHAPE_FIELDS = {"layers": "num_layers", "hidden": "hidden_size", "heads": "num_attention_heads",
                "kv_heads": "num_kv_heads", "ffn": "ffn_hidden_size", "vocab": "vocab_size", "swiglu": "swiglu",
                "experts": "num_experts", "topk": "moe_topk", "expert_ffn": "moe_ffn_hidden_size",
                "moe_load_imbalance": "moe_load_imbalance"}


def model_with_shape(model: str | None, **flags: Any) -> str | dict | None:
    """``--model`` with the shape flags applied: unchanged without them, a zoo model changed by them
    (``{"base": id, ...}``), or a model built from them alone (which then needs layers, hidden, heads and
    vocab). ``flags``: the parameters named in :data:`SHAPE_FIELDS`."""
    unknown = set(flags) - set(SHAPE_FIELDS)
    if unknown:
        raise TypeError(f"not shape flags: {sorted(unknown)}")
    shape = {SHAPE_FIELDS[k]: v for k, v in flags.items() if v is not None}
    if not shape:
        return model
    for k, v in flags.items():
        if k == "moe_load_imbalance":
            continue  # a ratio: ModelSpec checks its range and names the field
        if v is not None and not isinstance(v, bool) and v < 1:
            raise InputError(f"--{k.replace('_', '-')} must be a positive integer, got {v}",
                             hint="model sizes are counts of layers, heads or features")
    if model is not None:
        return {"base": model, "id": f"{model}-custom", **shape}
    need = [f"--{k}" for k in ("layers", "hidden", "heads", "vocab") if SHAPE_FIELDS[k] not in shape]
    if need:
        raise InputError(f"a custom model needs {', '.join(need)}", hint="or start from a zoo model with --model")
    return {"id": "custom", **shape}


def _default(o: Any) -> Any:
    if is_dataclass(o) and not isinstance(o, type):
        return asdict(o)
    if hasattr(o, "tolist"):
        return o.tolist()
    if hasattr(o, "model_dump"):
        return o.model_dump()
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    if isinstance(o, Path):
        return str(o)
    if hasattr(o, "item"):
        return o.item()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def _clean(o: Any) -> Any:
    """Replace NaN/inf (not valid JSON) with None, recursively."""
    if isinstance(o, float):
        return o if math.isfinite(o) else None
    if isinstance(o, dict):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    return o


def emit_json(obj: Any) -> None:
    """Print exactly one JSON document on stdout."""
    text = json.dumps(_clean(json.loads(json.dumps(obj, default=_default))), indent=2, allow_nan=False)
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def catalog_from(paths: list[Path] | None):
    from .. import api

    return api.load_catalog(paths or ())


def require_positive(name: str, value: float | int | None) -> None:
    if value is not None and value <= 0:
        raise InputError(f"{name} must be positive, got {value}", hint=f"pass a value above zero to {name}")

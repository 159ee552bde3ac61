"""One typed schema layer for the files users hand us (issue #19, item 2).

Every user file is validated here, at the edge, by a pydantic model with ``extra="forbid"``: scenario
files, model entries, design files, jobs files, traffic matrices (sweep files, reliability defaults
and catalog overlays have their own models beside their readers, built from the same pieces). The
rules are the same everywhere:

* strict integers and booleans: ``tp: "four"``, ``domains: 2.7`` and ``swiglu: "no"`` are refused,
  never coerced or truncated;
* finite numbers only (NaN and infinities are refused);
* unknown keys are refused with the closest known key;
* an error names the file, the entry, the field, the bad value and what was expected.
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from typing import Annotated, Any

from pydantic import (
    AllowInfNan,
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    StrictBool,
    StrictStr,
    TypeAdapter,
    ValidationError,
    create_model,
)

from .errors import InputError

# Scalars with one meaning in every file.
Int = Annotated[int, Strict()]
PosInt = Annotated[int, Strict(), Field(ge=1)]
NonNegInt = Annotated[int, Strict(), Field(ge=0)]
Float = Annotated[float, AllowInfNan(False)]
PosFloat = Annotated[float, AllowInfNan(False), Field(gt=0)]
NonNegFloat = Annotated[float, AllowInfNan(False), Field(ge=0)]
Bool = StrictBool
Str = StrictStr

FILE_CONFIG = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def _describe(err: dict[str, Any], known: dict[tuple, list[str]]) -> str:
    loc = tuple(err.get("loc", ()))
    field = ".".join(str(p) for p in loc) or "(top level)"
    kind = err.get("type", "")
    if kind == "extra_forbidden":
        parent = loc[:-1]
        close = difflib.get_close_matches(str(loc[-1]), known.get(parent, []), n=1, cutoff=0.5)
        return f"unknown field {field!r}" + (f" — did you mean {close[0]!r}?" if close else "")
    if kind == "missing":
        return f"field {field!r} is required"
    return f"field {field!r}: {err.get('msg', 'invalid')} (got {err.get('input')!r})"


def _known_fields(model: type[BaseModel], prefix: tuple = ()) -> dict[tuple, list[str]]:
    out: dict[tuple, list[str]] = {prefix: list(model.model_fields)}
    for name, f in model.model_fields.items():
        ann = f.annotation
        for t in (ann, *typing.get_args(ann)):
            if isinstance(t, type) and issubclass(t, BaseModel):
                out.update(_known_fields(t, (*prefix, name)))
    return out


def parse(model: type[BaseModel], data: Any, label: str, *, hint: str | None = None) -> Any:
    """Validate ``data`` against ``model``; ``label`` names the file and entry ("scenario 'x.yaml'")."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errs = exc.errors()
        more = f" (and {len(errs) - 1} more problem(s))" if len(errs) > 1 else ""
        raise InputError(f"{label}: {_describe(errs[0], _known_fields(model))}{more}",
                         hint=hint or f"fields: {', '.join(model.model_fields)}") from None


# ------------------------------------------------------------------------------------------ plans

class PlanIn(BaseModel):
    """The ``plan:`` section of a scenario (the same fields as the ``estimate`` flags)."""

    model_config = FILE_CONFIG
    tp: PosInt | None = None
    pp: PosInt | None = None
    dp: PosInt | None = None
    cp: PosInt | None = None
    ep: PosInt | None = None
    etp: PosInt | None = None
    vpp: PosInt | None = None
    micro_batch: PosInt | None = None
    global_batch: PosInt | None = None
    seq_len: PosInt | None = None
    sequence_parallel: Bool | None = None
    zero: Annotated[int, Strict(), Field(ge=0, le=3)] | None = None
    fsdp: Bool | None = None
    recompute: Str | None = None
    dtype: Str | None = None
    flash_attention: Bool | None = None
    overlap: Bool | None = None
    grad_reduce_bytes: Annotated[int, Strict(), Field(ge=1, le=8)] | None = None
    uneven_pipeline: Bool | None = None
    cp_comm: Str | None = None
    microbatch_group: PosInt | None = None
    pipeline_schedule: Str | None = None
    offload: Str | None = None
    activation_offload_layers: Annotated[int, Strict(), Field(ge=0)] | None = None
    stack: Str | None = None


class ScenarioIn(BaseModel):
    """A scenario file (``clustertwin estimate SCENARIO.yaml``; see scenarios/)."""

    model_config = FILE_CONFIG
    name: Str | None = None
    description: Str | None = None
    source: Str | None = None
    model: Str | dict[str, Any]
    system: Str
    fabric: Str | None = None
    gpus: PosInt | None = None
    plan: PlanIn | None = None


# ------------------------------------------------------------------------------------------ models

_SCALARS = {int: Int, float: Float, bool: Bool, str: Str}


def dataclass_schema(cls: type, name: str, *, skip: tuple[str, ...] = ()) -> type[BaseModel]:
    """A strict pydantic model with the fields of a frozen dataclass (model entries, ...)."""
    hints = typing.get_type_hints(cls)
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        t = hints[f.name]
        args = typing.get_args(t)
        base = next((a for a in args if a is not type(None)), t) if args else t
        ann = _SCALARS.get(base, t)
        if args and type(None) in args:
            ann = ann | None
        if f.default is not dataclasses.MISSING:
            fields[f.name] = (ann, f.default)
        elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            fields[f.name] = (ann, Field(default_factory=f.default_factory))  # type: ignore[misc]
        else:
            fields[f.name] = (ann, ...)
    return create_model(name, __config__=FILE_CONFIG, **fields)


def positive_count(value: Any, label: str) -> int:
    """A strict whole number >= 1 (``domains: 2.7`` or ``"abc"`` is an error, never truncated)."""
    try:
        return TypeAdapter(PosInt).validate_python(value)
    except ValidationError:
        raise InputError(f"{label} must be a whole number >= 1, got {value!r}") from None

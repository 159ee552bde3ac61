"""``clustertwin models list|show``: the model zoo (and your own model files)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from ._common import JsonOpt, app, console, emit_json

models_app = typer.Typer(help="Browse the model zoo (shapes, parameter counts, sources).", no_args_is_help=True)
app.add_typer(models_app, name="models")

ModelFileOpt = Annotated[
    list[Path] | None,
    typer.Option("--model-file", help="Extra model YAML file(s) (format: docs/models.md); repeatable."),
]


def _summary(m) -> dict:
    return {"id": m.id, "name": m.name, "layers": m.num_layers, "hidden": m.hidden_size,
            "heads": m.num_attention_heads, "kv_heads": m.num_kv_heads, "experts": m.num_experts,
            "topk": m.moe_topk, "params_b": m.num_params() / 1e9, "active_params_b": m.num_active_params() / 1e9,
            "mla": bool(m.is_mla), "source": m.source}


@models_app.command("list")
def models_list(model_file: ModelFileOpt = None, json_: JsonOpt = False) -> None:
    """Every model id with its shape and parameter count."""
    from .. import api

    rows = [_summary(api.resolve_model(mid, tuple(str(p) for p in model_file or ()))) for mid in
            api.list_models(tuple(str(p) for p in model_file or ()))]
    if json_:
        emit_json({"models": rows})
        return
    t = Table(title="models (clustertwin models show ID for every field)")
    for c in ("id", "layers", "hidden", "heads/kv", "experts (top-k)", "params", "active"):
        t.add_column(c, justify="left" if c == "id" else "right", no_wrap=c == "id")
    for r in rows:
        moe = f"{r['experts']} ({r['topk']})" if r["experts"] else "-"
        t.add_row(r["id"], str(r["layers"]), str(r["hidden"]), f"{r['heads']}/{r['kv_heads']}", moe,
                  f"{r['params_b']:.1f} B", f"{r['active_params_b']:.1f} B")
    console.print(t)


@models_app.command("show")
def models_show(model: Annotated[str, typer.Argument(help="Model id (see `clustertwin models list`).")],
                model_file: ModelFileOpt = None, json_: JsonOpt = False) -> None:
    """Every field of one model, in the YAML format a model file uses."""
    from .. import api

    m = api.resolve_model(model, tuple(str(p) for p in model_file or ()))
    fields = {f.name: getattr(m, f.name) for f in dataclasses.fields(m) if f.name not in ("extra",)}
    doc = {**fields, "params_b": m.num_params() / 1e9, "active_params_b": m.num_active_params() / 1e9}
    if json_:
        emit_json(doc)
        return
    console.print(f"{m.id}: {m.num_params() / 1e9:.2f} B parameters ({m.num_active_params() / 1e9:.2f} B active)")
    console.print("models:")
    console.print(f"  {m.id}:")
    for k, v in fields.items():
        if k == "id":
            continue
        console.print(f"    {k}: {v!r}" if isinstance(v, str) else f"    {k}: {str(v).lower() if isinstance(v, bool) else v}")

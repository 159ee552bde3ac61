"""``clustertwin catalog list|show``."""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from typing import Annotated, Any

import typer
from rich.table import Table

from ..errors import UnknownNameError
from ._common import CatalogOpt, JsonOpt, app, catalog_from, console, emit_json

catalog_app = typer.Typer(help="Browse the sourced hardware catalog.", no_args_is_help=True)
app.add_typer(catalog_app, name="catalog")

KINDS = ("accelerators", "systems", "fabrics")


# Display units for SI fields of the specs: field name -> (unit label, divisor).
_HUMAN: dict[str, tuple[str, float]] = {
    "peak_flops": ("TFLOP/s", 1e12),
    "hbm_bytes": ("GB", 1e9),
    "hbm_reported_bytes": ("GB (driver-reported total)", 1e9),
    "hbm_bw": ("TB/s", 1e12),
    "scaleup_bw": ("GB/s per direction", 1e9),
    "bw_per_device": ("GB/s per direction", 1e9),
    "scaleup_bw_per_device": ("GB/s per direction", 1e9),
    "latency_s": ("us", 1e-6),
    "hop_latency_s": ("us", 1e-6),
    "nic_latency_s": ("us", 1e-6),
    "port_bw": ("Gb/s", 1.25e8),
    "nic_bw": ("Gb/s", 1.25e8),
    "frontend_nic_bw": ("Gb/s", 1.25e8),
    "tdp_w": ("W", 1.0),
    "host_power_w": ("W", 1.0),
    "domain_overhead_power_w": ("W", 1.0),
    "switch_power_w": ("W", 1.0),
    "nic_power_w": ("W", 1.0),
    "transceiver_power_w": ("W", 1.0),
    "switch_price_usd": ("USD", 1.0),
    "nic_price_usd": ("USD", 1.0),
    "transceiver_price_usd": ("USD", 1.0),
    "cable_price_usd": ("USD", 1.0),
    "price_usd_per_device": ("USD", 1.0),
}


def _human(name: str, value: Any) -> str:
    """Render one field in the units engineers quote (SI inside, see units.py)."""
    unit = _HUMAN.get(name)
    if unit is None or value is None:
        if isinstance(value, dict):
            return ", ".join(f"{k}: {v:g}" if isinstance(v, float) else f"{k}: {v}" for k, v in value.items())
        if isinstance(value, float):
            return f"{value:g}"
        return str(value)
    label, div = unit
    if isinstance(value, dict):
        return ", ".join(f"{k} {v / div:g}" for k, v in value.items()) + f" {label}"
    return f"{value / div:g} {label}"


def _to_dict(spec: Any) -> dict:
    out: dict[str, Any] = {}
    for f in fields(spec):
        v = getattr(spec, f.name)
        if is_dataclass(v):
            v = v.id
        elif hasattr(v, "items"):
            v = dict(v)
        out[f.name] = v
    return out


def _rows(cat, kind: str) -> list[dict]:
    if kind == "accelerators":
        return [
            {"id": a.id, "name": a.name, "vendor": a.vendor, "bf16_tflops": a.peak("bf16") / 1e12,
             "fp8_tflops": a.peak("fp8") / 1e12, "hbm_gb": a.hbm_bytes / 1e9, "hbm_tbps": a.hbm_bw / 1e12,
             "scaleup_gbps": a.scaleup_bw / 1e9, "tdp_w": a.tdp_w, "assumed": sorted(a.assumptions)}
            for a in cat.accelerators.values()
        ]
    if kind == "systems":
        return [
            {"id": s.id, "name": s.name, "accelerator": s.accelerator.id, "domain": s.devices_per_domain,
             "per_host": s.devices_per_host, "scaleup": s.scaleup.id, "scaleup_gbps": s.scaleup_bw_per_device / 1e9,
             "nic_gbps_per_device": s.nic_bw_per_device * 8 / 1e9, "default_scaleout": s.default_scaleout,
             "assumed": sorted(s.assumptions)}
            for s in cat.systems.values()
        ]
    rows = [
        {"id": f.id, "layer": "scale-up", "name": f.name, "kind": f.topology, "gbps": f.bw_per_device / 1e9 * 8,
         "latency_us": f.latency_s * 1e6, "in_network_reduction": f.in_network_reduction, "assumed": sorted(f.assumptions)}
        for f in cat.scaleup.values()
    ]
    rows += [
        {"id": f.id, "layer": "scale-out", "name": f.name, "kind": f.kind, "gbps": f.port_bw / 1e9 * 8,
         "latency_us": f.hop_latency_s * 1e6, "in_network_reduction": f.sharp, "assumed": sorted(f.assumptions)}
        for f in cat.scaleout.values()
    ]
    return rows


@catalog_app.command("list")
def list_cmd(
    kind: Annotated[str, typer.Argument(help="accelerators | systems | fabrics (default: all)")] = "all",
    json_: JsonOpt = False,
    catalog: CatalogOpt = None,
) -> None:
    """List catalog entries."""
    if kind != "all" and kind not in KINDS:
        raise UnknownNameError("catalog section", kind, KINDS)
    cat = catalog_from(catalog)
    kinds = KINDS if kind == "all" else (kind,)
    data = {k: _rows(cat, k) for k in kinds}
    if json_:
        emit_json(data if kind == "all" else {kind: data[kind]})
        return
    for k in kinds:
        rows = data[k]
        table = Table(title=f"{k} ({len(rows)})", show_lines=False)
        cols = [c for c in rows[0] if c != "assumed"] if rows else []
        for c in cols:
            table.add_column(c)
        for r in rows:
            table.add_row(*[(f"{r[c]:g}" if isinstance(r[c], float) else str(r[c])) for c in cols])
        console.print(table)
    console.print(f"catalog version {cat.version}")


@catalog_app.command("show")
def show_cmd(
    id: Annotated[str, typer.Argument(help="an accelerator, system or fabric id")],
    json_: JsonOpt = False,
    catalog: CatalogOpt = None,
) -> None:
    """Show one entry with every number's source and the assumptions."""
    cat = catalog_from(catalog)
    for kind, table in (("accelerator", cat.accelerators), ("system", cat.systems),
                        ("scale-up fabric", cat.scaleup), ("scale-out fabric", cat.scaleout)):
        if id in table:
            d = {"kind": kind, **_to_dict(table[id])}
            if json_:
                emit_json(d)
                return
            t = Table(title=f"{kind} {id}", show_header=True)
            t.add_column("field", no_wrap=True)
            t.add_column("value")
            t.add_column("source / assumption")
            srcs, assumed = d.get("sources", {}), d.get("assumptions", {})
            for k, v in d.items():
                if k in ("sources", "assumptions", "kind", "bom"):
                    continue
                note = f"ASSUMED: {assumed[k]}" if k in assumed else srcs.get(k, "")
                t.add_row(k, _human(k, v), note)
            for k, v in (d.get("bom") or {}).items():
                key = f"bom.{k}"
                note = f"ASSUMED: {assumed[key]}" if key in assumed else srcs.get(key, "")
                t.add_row(key, _human(k, v), note)
            console.print(t)
            return
    known = list(cat.accelerators) + list(cat.systems) + list(cat.scaleup) + list(cat.scaleout)
    raise UnknownNameError("catalog id", id, known, hint="list ids with `clustertwin catalog list`")



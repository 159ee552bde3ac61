"""``clustertwin cluster SYSTEM`` (summary) and ``clustertwin bom SYSTEM`` (bill of materials)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from .. import api
from ..errors import InputError
from ._common import CatalogOpt, JsonOpt, OversubOpt, app, catalog_from, console, emit_json

SystemArg = Annotated[str, typer.Argument(help="system id, e.g. hgx-h100, gb200-nvl72, cloudmatrix-384")]
DomainsOpt = Annotated[int, typer.Option("--domains", help="number of scale-up domains (servers / racks / supernodes)")]
FabricOpt = Annotated[str | None, typer.Option("--fabric", help="scale-out fabric id (default: the system's)")]
TopologyOpt = Annotated[str | None, typer.Option("--topology", help="scale-out topology: fat-tree | rail | dual-plane (default: rail, dual-plane for a two-plane fabric)")]
TiersOpt = Annotated[str, typer.Option("--tiers", help="scale-out switch tiers: 1, 2, 3 or auto")]
DomainSizeOpt = Annotated[int | None, typer.Option("--domain-size", help="scale-up partition size (default: full)")]
RouteOpt = Annotated[str | None, typer.Option("--route", help="also show the route between two ranks, e.g. 0,9")]
CheckOpt = Annotated[bool, typer.Option("--graph-check", help="verify the bisection closed forms by max-flow on the graph (<= 4096 devices)")]


def _g(x: float) -> str:
    return f"{x:,.4g}" if isinstance(x, float) else f"{x:,}" if isinstance(x, int) else str(x)


@app.command("cluster")
def cluster_cmd(
    system: SystemArg,
    domains: DomainsOpt = 1,
    fabric: FabricOpt = None,
    topology: TopologyOpt = None,
    oversubscription: OversubOpt = 1.0,
    tiers: TiersOpt = "auto",
    domain_size: DomainSizeOpt = None,
    route: RouteOpt = None,
    graph_check: CheckOpt = False,
    json_: JsonOpt = False,
    catalog: CatalogOpt = None,
) -> None:
    """Summarise a cluster: devices, hosts, bisection bandwidth per GPU in and across domains, hops, switches."""
    pair = None
    if route is not None:
        try:
            a, b = (int(x) for x in route.split(","))
        except ValueError:
            raise InputError(f"--route takes two ranks separated by a comma, got {route!r}", hint="e.g. --route 0,9") from None
        pair = (a, b)
    out = api.cluster_summary(system, domains, fabric=fabric, topology=topology, oversubscription=oversubscription,
                              tiers=tiers, domain_size=domain_size, route=pair, graph_check=graph_check,
                              catalog=catalog_from(catalog))
    if json_:
        emit_json(out)
        return
    t = Table(title=f"cluster: {out['domains']} x {out['system']} ({out['accelerator']}) on {out['fabric']}, {out['topology']}")
    t.add_column("quantity")
    t.add_column("value", justify="right")
    up, so = out["scaleup"], out["scaleout"]
    rows = [
        ("devices", out["devices"]), ("hosts", out["hosts"]), ("scale-up domain size", out["domain_size"]),
        ("physical systems", out["systems"]), ("scale-out NICs", out["nics"]),
        (f"scale-up ({up['tech']}, {up['topology']}) Gb/s per device", up["bw_per_device_gbps"]),
        ("bisection in a domain, Gb/s per device", up["bisection_per_device_gbps"]),
        ("scale-up switches per domain", up["switches_per_domain"]),
        ("scale-up max switch hops", up["max_switch_hops"]),
    ]
    if so:
        rows += [
            ("scale-out tiers", so["tiers"]),
            ("scale-out switches (leaf, spine, core)", ", ".join(map(str, so["switches_per_tier"]))),
            ("scale-out links per tier", ", ".join(map(str, so["links_per_tier"]))),
            ("leaf oversubscription (down:up)", so["oversubscription"]),
            ("max endpoints for this radix/tiers", so["max_endpoints"]),
            ("NIC Gb/s per device", so["nic_bw_per_device_gbps"]),
            ("bisection across domains, Gb/s per device", so["bisection_per_device_gbps"]),
            ("scale-out bisection, Tb/s", so["bisection_tbps"]),
            ("scale-out max switch hops", so["max_switch_hops"]),
            ("scale-out max latency, us", so["max_latency_us"]),
        ]
    if out["frontend"]:
        rows.append(("front-end switches", sum(out["frontend"]["switches_per_tier"])))
    for k, v in out.get("graph_check", {}).items():
        rows.append((f"graph max-flow: {k.replace('_', ' ')}", v))
    for k, v in rows:
        t.add_row(k, _g(v))
    console.print(t)
    if "route" in out:
        r = out["route"]
        console.print(f"route {r['src']} -> {r['dst']} ({r['layer']}): "
                      + " -> ".join(f"{k}{i}" for k, i in r["path"])
                      + f"; {r['switch_hops']} switch hop(s), {r['bandwidth_gbps']:.4g} Gb/s, {r['latency_us']:.3g} us")
    if out["assumed"]:
        console.print(f"assumed catalog values: {', '.join(out['assumed'])} (see `clustertwin catalog show`)", style="dim")


@app.command("bom")
def bom_cmd(
    system: SystemArg,
    domains: DomainsOpt = 1,
    fabric: FabricOpt = None,
    topology: TopologyOpt = None,
    oversubscription: OversubOpt = 1.0,
    tiers: TiersOpt = "auto",
    domain_size: DomainSizeOpt = None,
    json_: JsonOpt = False,
    catalog: CatalogOpt = None,
) -> None:
    """Bill of materials: devices, CPUs, trays, switches, NICs, optics and copper, power and cost."""
    d = api.bom(system, domains, fabric=fabric, topology=topology, oversubscription=oversubscription, tiers=tiers,
                domain_size=domain_size, catalog=catalog_from(catalog))
    if json_:
        emit_json(d)
        return
    cs = d["cluster"]
    t = Table(title=f"bill of materials: {cs['domains']} x {cs['system']} on {cs['fabric']} ({cs['topology']})")
    for col in ("category", "item", "count", "power kW", "cost USD", "rule"):
        t.add_column(col, justify="right" if col in ("count", "power kW", "cost USD") else "left")
    for ln in d["lines"]:
        pk = "" if ln["power_kw"] is None else f"{ln['power_kw']:,.1f}" + ("*" if ln["power_assumed"] else "")
        pr = "" if ln["price_usd"] is None else f"{ln['price_usd']:,.0f}" + ("*" if ln["price_assumed"] else "")
        t.add_row(ln["category"], ln["item"], f"{ln['count']:,}", pk, pr, ln["rule"])
    console.print(t)
    tot = d["totals"]
    console.print(
        f"optical transceivers: {tot['optical_transceivers']:,} (scale-up {tot['optical_transceivers_scaleup']:,}, "
        f"scale-out {tot['optical_transceivers_scaleout']:,}, front-end {tot['optical_transceivers_frontend']:,}); "
        f"copper cables: {tot['copper_cables']:,}"
    )
    console.print(f"power: {tot['power_kw']:,.1f} kW (systems {tot['power_kw_systems']:,.1f} + networks "
                  f"{tot['power_kw_network']:,.1f}; {tot['power_basis']})")
    if tot["cost_usd"] is not None:
        console.print(f"cost: {tot['cost_usd']:,.0f} USD{'' if tot['cost_complete'] else ' (partial)'}; * = assumed value")
    for name, v in d["published"].items():
        console.print(f"  {name}: computed {v['computed']:,.4g} vs published {v['published']:,.4g} ({v['source']})")
    for note in d["notes"]:
        console.print(f"note: {note}", style="dim")

"""``clustertwin report``: one self-contained HTML report of a scenario or of a stored plan/sweep."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..errors import InputError
from ._common import CatalogOpt, JsonOpt, app, catalog_from, console, console_err, emit_json


@app.command("report")
def report_cmd(
    scenario: Annotated[Path | None, typer.Argument(help="Scenario YAML (see scenarios/).")] = None,
    html: Annotated[Path, typer.Option("--html", help="HTML file to write (one self-contained page).")] = Path("report.html"),
    from_db: Annotated[Path | None, typer.Option("--from-db", help="Results database of `plan` / `sweep` (with --id).")] = None,
    record_id: Annotated[str | None, typer.Option("--id", help="Plan or sweep id (or unique prefix / name) in --from-db.")] = None,
    trace: Annotated[Path | None, typer.Option("--trace", help="Perfetto trace file (default: HTML_STEM.trace.json beside the HTML).")] = None,
    no_trace: Annotated[bool, typer.Option("--no-trace", help="Write no trace file.")] = False,
    fabric_domains: Annotated[int | None, typer.Option("--fabric-domains", help="Scale-up domains for the fabric study (default: the scenario's, at least 64).")] = None,
    monte_carlo: Annotated[int, typer.Option("--monte-carlo", help="Simulated runs for the goodput distribution.")] = 2000,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the fabric and Monte-Carlo simulations.")] = 0,
    scheduling: Annotated[bool, typer.Option("--scheduling", help="Add the openb GPU-sharing scheduling experiment (random, best-fit, FGD; ~10 s).")] = False,
    json_: JsonOpt = False,
    catalog: CatalogOpt = None,
) -> None:
    """Write an HTML report: cluster picture and BOM, step waterfall, timeline, memory, plans, scaling,
    Pareto front, fabric heatmap and routing, goodput distribution, serving throughput vs interactivity,
    (with --scheduling) GPU allocation per placement policy, accuracy table, assumptions.

    Example: clustertwin report scenarios/llama3-70b-hgx-h100.yaml --html r.html
    """
    from .. import api
    from .render import progress_bar

    if scenario is None and from_db is None:
        raise InputError("report needs a scenario YAML or --from-db DB --id ID",
                         hint="e.g. clustertwin report scenarios/llama3-70b-hgx-h100.yaml --html r.html")
    if scenario is not None and from_db is not None:
        raise InputError("give a scenario or --from-db, not both")
    if from_db is not None and not record_id:
        raise InputError("--from-db needs --id", hint="list the ids with `clustertwin results list --db DB`")
    if fabric_domains is not None and fabric_domains < 1:
        raise InputError(f"--fabric-domains must be positive, got {fabric_domains}")
    if monte_carlo < 0:
        raise InputError(f"--monte-carlo must not be negative, got {monte_carlo}")
    if html.suffix.lower() not in (".html", ".htm"):
        raise InputError(f"--html {str(html)!r} should end in .html", hint="e.g. --html report.html")
    tr: Path | bool | None = None if no_trace or scenario is None else (trace if trace is not None else True)
    cat = catalog_from(catalog)
    sc = api.load_scenario(scenario, catalog=cat) if scenario is not None else None
    with progress_bar("report", unit="parts", enabled=not json_) as bar:
        data = api.report(sc, html=html, db=from_db, record_id=record_id, trace=tr, fabric_domains=fabric_domains,
                          monte_carlo_runs=monte_carlo, seed=seed, scheduling=scheduling, progress=bar)
    sections = data["sections"]
    doc = {"html": data["html_path"], "bytes": data["html_bytes"], "sections": sections,
           "trace": (data.get("step") or {}).get("trace_file"), "skipped": data.get("skipped", {})}
    if json_:
        emit_json(doc)
        return
    console.print(f"wrote {doc['html']} ({doc['bytes'] / 1e6:.2f} MB; sections: {', '.join(sections)})")
    if doc["trace"]:
        console.print(f"trace: {doc['trace']} (open it in ui.perfetto.dev or chrome://tracing)")
    for k, why in doc["skipped"].items():
        console_err.print(f"note: {k} left out: {why}")

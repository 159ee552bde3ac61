"""Collect + render + write: the one entry point ``api.report_html`` and the web app use."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..userfiles import write_atomic
from .collect import collect_from_db, collect_scenario
from .html import MAX_BYTES, render_document


def report_data(api: Any, scenario: Any = None, *, db: str | Path | None = None, record_id: str | None = None,
                html_path: str | Path | None = None, trace: str | Path | bool | None = None,
                fabric_domains: int | None = None, monte_carlo_runs: int = 2000, seed: int = 0,
                validation: bool = True, scheduling: bool = False, progress: Any = None) -> dict[str, Any]:
    """The report's data for a scenario (``api.Scenario``) or a stored plan/sweep (``db`` + ``record_id``).

    ``trace``: a path for the Perfetto trace, ``True`` for ``<html stem>.trace.json`` beside the HTML,
    ``None``/``False`` for none. The report links the trace by its path relative to the HTML.
    """
    if scenario is None:
        if db is None or record_id is None:
            from ..errors import InputError

            raise InputError("a report needs a scenario, or --from-db DB with --id ID",
                             hint="e.g. clustertwin report scenarios/llama3-70b-hgx-h100.yaml --html r.html")
        return collect_from_db(db, record_id)
    trace_path = None
    if trace is True and html_path is not None:
        hp = Path(html_path)
        trace_path = hp.with_name(hp.stem + ".trace.json")
    elif trace not in (None, False, True):
        trace_path = Path(trace)  # type: ignore[arg-type]
    data = collect_scenario(api, scenario, trace_path=trace_path, fabric_domains=fabric_domains,
                            monte_carlo_runs=monte_carlo_runs, seed=seed, validation=validation,
                            scheduling=scheduling, progress=progress)
    if trace_path is not None and data.get("step", {}).get("trace_file"):
        base = Path(html_path).resolve().parent if html_path is not None else Path.cwd()
        href = os.path.relpath(Path(data["step"]["trace_file"]).resolve(), base).replace(os.sep, "/")
        data["step"]["trace_href"] = href
    data["catalog_version"] = getattr(scenario.catalog, "version", None)
    return data


def write_report(data: dict[str, Any], path: str | Path) -> tuple[Path, int]:
    """Render and write atomically; returns the path and its size in bytes (``data["sections"]``: the
    ids of the sections the page has)."""
    text, ids = render_document(data)
    data["sections"] = ids
    size = len(text.encode("utf-8"))
    if size > MAX_BYTES:
        raise RuntimeError(f"report is {size / 1e6:.1f} MB, over the {MAX_BYTES / 2**20:.0f} MiB budget (a chart drew too much)")
    return write_atomic(Path(path), text), size


__all__ = ["report_data", "write_report"]

"""Shared by the report tests: the scenario report is built once per session."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clustertwin.cli import main

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "scenarios" / "llama3-70b-hgx-h100.yaml"


@pytest.fixture(scope="session")
def scenario_report(tmp_path_factory) -> tuple[Path, dict]:
    """`clustertwin report scenarios/llama3-70b-hgx-h100.yaml --html r.html --json`, run once."""
    d = tmp_path_factory.mktemp("report")
    html = d / "r.html"
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            main(["report", str(SCENARIO), "--html", str(html), "--json"])
        except SystemExit as exc:
            assert not exc.code, buf.getvalue()
    return html, json.loads(buf.getvalue())



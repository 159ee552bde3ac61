"""Fixtures shared by the planner tests."""

from __future__ import annotations

import pytest

from cli_runner import CliResult, run_cli


@pytest.fixture
def ct(capsys):
    """``ct("plan", "--json")`` runs the CLI in-process and returns a ``CliResult``."""
    return lambda *args: CliResult(*run_cli(capsys, *args))


@pytest.fixture(autouse=True)
def _in_tmp_dir(tmp_path, monkeypatch):
    """Run each planner test in its own folder (nothing may land in the checkout)."""
    monkeypatch.chdir(tmp_path)

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VALIDATION = ROOT / "src" / "clustertwin" / "data" / "validation"


@pytest.fixture(scope="session")
def catalog():
    from clustertwin.catalog import load_catalog

    return load_catalog()


@pytest.fixture(scope="session")
def validation_dir() -> Path:
    """The vendored public validation set (src/clustertwin/data/validation, see PROVENANCE.md)."""
    return VALIDATION


@pytest.fixture(autouse=True)
def _results_db_in_tmp(tmp_path, monkeypatch):
    """Commands that store results default to the per-user database: keep every test's in its tmp dir."""
    monkeypatch.setenv("CLUSTERTWIN_RESULTS_DB", str(tmp_path / "clustertwin-results.db"))

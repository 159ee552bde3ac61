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

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CLUSTERTWIN_SHARED", ROOT.parent / "shared"))


@pytest.fixture(scope="session")
def catalog():
    from clustertwin.catalog import load_catalog

    return load_catalog()


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    return SHARED

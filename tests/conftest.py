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


# ----------------------------------------------------------------------------------- real browser
# Browser tests drive Debian's chromium through Playwright (no browser download: .ci/run installs the
# apt package). One browser per test session; each test gets a fresh page.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium_path() -> str | None:
    import os
    import shutil

    p = os.environ.get("CLUSTERTWIN_CHROMIUM") or "/usr/bin/chromium"
    return p if Path(p).exists() else shutil.which("chromium")


def need(module: str):
    """Import an optional test dependency (the ``test`` extra has it). In CI (``CI`` set) a missing one
    is an error; in an older local venv the test is skipped with the fix."""
    import importlib
    import os

    if os.environ.get("CI"):
        return importlib.import_module(module)
    return pytest.importorskip(module, reason=f"{module} is missing: pip install -e '.[test]'")


@pytest.fixture(scope="session")
def browser_context(tmp_path_factory):
    exe = chromium_path()
    if exe is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium; .ci/run does this)")
    need("playwright")
    from playwright.sync_api import sync_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(str(profile), executable_path=exe, args=CHROMIUM_ARGS,
                                                    headless=True, viewport={"width": 1200, "height": 900})
        try:
            yield ctx
        finally:
            ctx.close()


@pytest.fixture()
def page(browser_context):
    pg = browser_context.new_page()
    yield pg
    pg.close()


@pytest.fixture(scope="session")
def screenshot_dir(tmp_path_factory) -> Path:
    """Screenshots of browser tests: CLUSTERTWIN_SCREENSHOTS if set (CI artifacts), else a temp dir."""
    import os

    d = os.environ.get("CLUSTERTWIN_SCREENSHOTS")
    if d:
        p = Path(d)
        p.mkdir(parents=True, exist_ok=True)
        return p
    return tmp_path_factory.mktemp("screenshots")

"""Enforced architecture: the import layers of docs/architecture.md (import-linter contract in
pyproject.toml) and no new mypy errors in src/ over the recorded baseline.

The baseline (``mypy_baseline.txt``, one ``file: error: message [code]`` per line, line numbers dropped
so unrelated edits do not shift it) lists the errors that existed when the check was introduced. Fix
errors freely; after fixing some, or if a deliberate change must add one, regenerate it:

    CLUSTERTWIN_REGEN_MYPY_BASELINE=1 .venv/bin/python -m pytest tests/common/test_layers.py -q
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BASELINE = Path(__file__).with_name("mypy_baseline.txt")


INSTALL = "import-linter and mypy are in the test extra: run  .venv/bin/pip install -e '.[test]'"


def test_import_layers_kept():
    exe = Path(sys.executable).with_name("lint-imports")
    assert exe.exists(), INSTALL
    p = subprocess.run([str(exe), "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    assert "0 broken" in p.stdout


def _mypy_errors(cache: Path) -> Counter:
    p = subprocess.run([sys.executable, "-m", "mypy", "src/clustertwin", "--no-error-summary", "--cache-dir", str(cache)],
                       cwd=ROOT, capture_output=True, text=True)
    assert "No module named mypy" not in p.stderr, INSTALL
    assert p.returncode in (0, 1), p.stdout[-2000:] + p.stderr[-2000:]  # 2: mypy itself failed
    lines = [re.sub(r"^(\S+?):\d+(:\d+)?: ", r"\1: ", ln) for ln in p.stdout.splitlines()]
    return Counter(ln for ln in lines if ": error: " in ln)


def test_no_new_mypy_errors(tmp_path):
    now = _mypy_errors(tmp_path / "mypy-cache")
    if os.environ.get("CLUSTERTWIN_REGEN_MYPY_BASELINE") == "1":
        BASELINE.write_text("".join(f"{ln}\n" for ln in sorted(now.elements())))
        return
    base = Counter(ln for ln in BASELINE.read_text().splitlines() if ln.strip())
    new = now - base
    assert not new, "new mypy errors (fix them; see the module docstring to regenerate):\n" + "\n".join(sorted(new))

"""No absolute machine paths in the repository: a fresh clone has no /work, /root, /home or /tmp of the
machine a file was written on. Tests write under pytest's ``tmp_path``, never a literal /tmp path."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# "/work/", "/root/", "/home/" or "/tmp/" starting a path (not inside a word or a URL path such as
# https://example.org/home/...)
PATTERN = re.compile(r"(?<![\w.:/-])/(work|root|home|tmp)/")
SKIP_SUFFIXES = {".gz", ".png", ".jpg", ".pdf", ".sqlite", ".parquet", ".arrow", ".whl"}


def _files() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
        return [ROOT / p for p in out.decode().split("\0") if p]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout (sdist): walk the tree
        skip = {".git", ".venv", ".ci-venv", "__pycache__", ".hypothesis", ".ruff_cache", ".pytest_cache"}
        return [p for p in ROOT.rglob("*") if p.is_file() and not skip & set(p.relative_to(ROOT).parts)]


def test_no_absolute_machine_paths():
    hits = []
    for p in _files():
        if p.suffix in SKIP_SUFFIXES or not p.exists() or p == Path(__file__).resolve():
            continue
        try:
            text = p.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for i, line in enumerate(text.splitlines(), 1):
            if PATTERN.search(line):
                hits.append(f"{p.relative_to(ROOT)}:{i}: {line.strip()[:120]}")
    assert not hits, "absolute machine paths (use a relative path or the packaged data):\n" + "\n".join(hits)


def test_pattern_catches_a_machine_path():
    assert PATTERN.search('path = "/' + 'work/' + 'shared/validation/x.csv"')  # split so this file stays clean
    assert PATTERN.search("see /tmp/notes/a.md")
    assert not PATTERN.search("https://example.org/home/page and shared/hardware/README.md")

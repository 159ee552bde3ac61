"""Writing catalog overlays that commands produce (``calibrate``, ``calibrate-gpu``) without harming
the user's file.

``write_calibration(path, section, entries, written_by)`` merges ``entries`` into
``calibration: SECTION:`` of the overlay at ``path``:

* a new file is created (atomically, with the umask's permission bits);
* an existing file must already be a ClusterTwin catalog overlay (a YAML mapping whose top-level keys
  are catalog sections); anything else — notes, another program's YAML, a broken file — is refused and
  left exactly as it was;
* in an existing overlay only the top-level ``calibration:`` block is rewritten: every other line,
  comments included, stays byte for byte, and the file keeps its permission bits. (Comments *inside*
  the old ``calibration:`` block are not kept: that block is generated.)
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml

from ..errors import InputError
from ..userfiles import parse_yaml_text, read_text, write_atomic
from .schema import CatalogFile

OVERLAY_KEYS = frozenset(CatalogFile.model_fields)
_TOP_KEY = re.compile(r"^([A-Za-z_][\w-]*)\s*:")


def _calibration_span(lines: list[str]) -> tuple[int, int] | None:
    """Line range [start, end) of the top-level ``calibration:`` block, or None. Comment and blank
    lines at column 0 after the block's last indented line belong to what follows and are kept."""
    start = end = None
    for i, line in enumerate(lines):
        if start is None:
            m = _TOP_KEY.match(line)
            if m and m.group(1) == "calibration":
                start = end = i + 1
            continue
        if line[:1] in (" ", "\t"):
            end = i + 1
        elif line.strip() and not line.startswith("#"):
            break
    return None if start is None else (start - 1, end)


def write_calibration(path: str | os.PathLike, section: str, entries: dict[str, Any], written_by: str) -> Path:
    p = Path(path)
    header = f"# ClusterTwin catalog overlay written by `clustertwin {written_by}`; use with --catalog FILE\n"
    if not p.exists():
        text = header + yaml.safe_dump({"calibration": {section: entries}}, sort_keys=False, default_flow_style=False)
        return write_atomic(p, text)
    old_text = read_text(p, "overlay file")
    refuse_hint = "pass --out with a new file name or an existing ClusterTwin overlay; this file was not changed"
    try:
        data = parse_yaml_text(old_text, f"--out file {str(p)!r}")
    except InputError as exc:
        raise InputError(f"{exc.message}; refusing to overwrite it", hint=refuse_hint) from None
    if data is None:
        data = {}
    if not isinstance(data, dict) or not set(data) <= OVERLAY_KEYS:
        keys = ", ".join(sorted(map(str, data))[:5]) if isinstance(data, dict) else type(data).__name__
        raise InputError(f"--out file {str(p)!r} is not a ClusterTwin catalog overlay (top level: {keys}); "
                         "refusing to overwrite it", hint=refuse_hint)
    cal = data.get("calibration") or {}
    if not isinstance(cal, dict) or not isinstance(cal.get(section) or {}, dict):
        raise InputError(f"--out file {str(p)!r}: its `calibration.{section}` is not a mapping; refusing to change it",
                         hint=refuse_hint)
    merged = dict(cal)
    merged[section] = {**(cal.get(section) or {}), **entries}
    block = yaml.safe_dump({"calibration": merged}, sort_keys=False, default_flow_style=False)
    lines = old_text.splitlines(keepends=True)
    span = _calibration_span(lines)
    if span is None:
        body = old_text + ("" if not old_text or old_text.endswith("\n") else "\n") + block
    else:
        body = "".join(lines[: span[0]]) + block + "".join(lines[span[1]:])
    return write_atomic(p, body)

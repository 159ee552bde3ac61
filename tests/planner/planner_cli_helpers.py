"""Run the CLI in-process (fast) with the same exit-code mapping as the installed command."""

from __future__ import annotations

import pytest

from clustertwin.cli import main


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = 0
    try:
        main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


__all__ = ["pytest", "run_cli"]

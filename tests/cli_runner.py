"""Run the CLI in-process (fast) with the same exit-code mapping as the installed command; shared by every test folder (tests/ is on sys.path through its conftest)."""

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


class CliResult:
    """What a CLI run left: exit code, stdout, stderr (attribute names as subprocess uses them)."""

    def __init__(self, code: int, out: str, err: str):
        self.returncode, self.stdout, self.stderr = code, out, err


__all__ = ["CliResult", "pytest", "run_cli"]

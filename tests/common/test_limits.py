"""Requests that could exhaust memory or run for hours are refused up front (issue #19, limits)."""

from __future__ import annotations

import pytest

from clustertwin.cli import main
from clustertwin.limits import LIMITS


def _code(capsys, argv):
    with pytest.raises(SystemExit) as ei:
        main(argv)
    return ei.value.code, capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, word",
    [
        (["estimate", "--model", "llama3-8b", "--system", "hgx-h100", "--gpus", "1073741824"], "limit"),
        (["collective", "all_reduce", "--system", "hgx-h100", "--domains", "1000000000000"], "limit"),
        (["collective", "all_reduce", "--system", "hgx-h100", "--sizes", "8:8G:1.0000001"], "limit"),
        (["collective", "all_reduce", "--system", "hgx-h100", "--sizes", "1Gb"], "bits"),
        (["fabric", "all_reduce", "--system", "hgx-h100", "--domains", "4", "--channels", "100000"], "limit"),
        (["goodput", "--system", "hgx-h100", "--gpus", "1024", "--monte-carlo", "100000000"], "limit"),
        (["goodput", "--system", "hgx-h100", "--gpus", "1024", "--days", "inf"], "finite"),
        (["power", "hgx-h100x8", "--pue", "nan"], "finite"),
        (["power", "hgx-h100x8", "--price-kwh=1e999"], "finite"),
        (["cluster", "hgx-h100", "--domains", "10000000"], "limit"),
        (["estimate", "--model", "llama3-8b", "--system", "hgx-h100", "--gpus", "8", "--global-batch", "40000000",
          "--engine", "event"], "limit"),
    ],
)
def test_explosive_requests_exit_2_with_the_limit(capsys, argv, word):
    code, err = _code(capsys, argv)
    assert code == 2, err
    assert word in err and "Traceback" not in err


def test_limits_table_is_documented():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "limits.md").read_text()
    rows = {line.split("|")[1].strip(): line.split("|")[2].strip() for line in doc.splitlines()
            if line.startswith("| `")}
    for name, (limit, _) in LIMITS.items():
        want = "1 PiB" if name == "message_bytes" else f"{int(limit):,}"
        assert rows.get(f"`{name}`") == want, (name, rows.get(f"`{name}`"), want)

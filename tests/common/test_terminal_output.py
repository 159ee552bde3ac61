"""Tables survive 80 columns and pipes: plain aligned text when stdout is not a terminal, CSV with
--format csv (stdout only CSV), rich tables fitted to the terminal width."""

from __future__ import annotations

import csv
import io

import pytest

from cli_runner import run_cli as run
from clustertwin.cli._common import console

BOX = set("━─│┃┏┓┗┛┡┩╇╈┳┻╭╮╰╯")


def test_pipe_gets_plain_aligned_text(capsys):
    code, out, _ = run(capsys, "stacks")
    assert code == 0
    assert not BOX & set(out)
    lines = out.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("id "))
    assert set(lines[head + 1]) <= {"-", " "}  # the rule under the header
    for col in ("flash attn", "overlap", "grad reduce", "ZeRO", "recompute"):
        assert col in lines[head]  # one header line, never wrapped
    # columns line up: every row's second column starts where the header's does
    start = lines[head].index("flash attn")
    rows = lines[head + 2: head + 6]
    assert all(r[start - 2: start] == "  " for r in rows)


def test_format_csv_is_only_csv_on_stdout(capsys):
    code, out, err = run(capsys, "--format", "csv", "stacks")
    assert code == 0
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0][:3] == ["id", "flash attn", "overlap"]
    assert any(r and r[0].startswith("megatron-core") for r in rows[1:])
    assert "Source:" in err and "Source:" not in out  # prose goes to stderr


def test_format_plain_and_bad_format(capsys):
    code, out, _ = run(capsys, "--format", "plain", "stacks")
    assert code == 0 and not BOX & set(out)
    code, _, err = run(capsys, "--format", "cvs", "stacks")
    assert code == 2 and "csv" in err


def test_rich_tables_fit_80_columns(capsys, monkeypatch):
    monkeypatch.setattr(console, "_width", 80)
    code, out, _ = run(capsys, "--format", "rich", "stacks")
    assert code == 0 and BOX & set(out)
    assert max(len(ln) for ln in out.splitlines()) <= 80


@pytest.mark.parametrize("fmt", ["plain", "csv"])
def test_json_wins_over_format(capsys, fmt):
    import json

    code, out, _ = run(capsys, "--format", fmt, "stacks", "--json")
    assert code == 0 and json.loads(out)["default"]


def test_validate_reports_progress_per_row():
    from clustertwin import api

    seen: list[tuple[int, int]] = []
    rep = api.validate("training", progress=lambda d, n: seen.append((d, n)))
    n = len(rep.rows)
    assert seen[-1] == (n, n) and [d for d, _ in seen] == list(range(1, n + 1))

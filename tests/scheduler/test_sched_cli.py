"""`clustertwin schedule ...` end to end: JSON contract, text output, exit code 2 on bad input."""

from __future__ import annotations

import json

import pytest


def run(capsys, *args: str) -> tuple[int, str, str]:
    """In-process run through ``clustertwin.cli.main`` (same error mapping as the console script)."""
    from clustertwin.cli import main

    with pytest.raises(SystemExit) as e:
        main(list(args))
    out = capsys.readouterr()
    return int(e.value.code or 0), out.out, out.err


def test_openb_json_contract(capsys):
    rc, out, err = run(capsys, "schedule", "openb", "--pods", "multigpu20", "--policy", "packing", "--seed", "3", "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert d["policy"] == "packing" and d["seed"] == 3 and d["total_gpus"] == 6212
    levels = [p["arrived_pct"] for p in d["curve"]]
    assert levels[0] == 0 and levels[-1] == 130 and levels == sorted(levels)
    assert all(set(p) == {"arrived_pct", "allocated_pct"} for p in d["curve"])


def test_openb_text_and_bad_input(capsys, tmp_path):
    rc, out, _ = run(capsys, "schedule", "openb", "--pods", "multigpu20", "--policy", "random", "--seed", "1")
    assert rc == 0 and "arrived" in out
    rc, _, err = run(capsys, "schedule", "openb", "--policy", "fgdd")
    assert rc == 2 and "'fgd'" in err
    bad = tmp_path / "p.csv"
    bad.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\nx1,1,1,1,-5\n")
    rc, _, err = run(capsys, "schedule", "openb", "--pods", str(bad))
    assert rc == 2 and "x1" in err and "gpu_milli" in err

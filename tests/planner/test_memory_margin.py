"""--memory-margin: one memory rule (workload.rules) for every fit check, shown in the output (issue #19)."""

from __future__ import annotations

import csv
import json

import numpy as np

from cli_runner import pytest, run_cli
from clustertwin import api
from clustertwin.workload.rules import DEFAULT_MEMORY_MARGIN_GB, memory_fit_text, memory_fits, memory_left_gb

TIGHT = dict(model="llama3-405b", gpus=512, store=False, top=5)  # best layout at margin 0 leaves < 1 GB


def test_the_rule_and_its_sentence():
    assert DEFAULT_MEMORY_MARGIN_GB == 2.0
    total, cap = np.array([70e9, 79.5e9, 80e9]), 81e9
    np.testing.assert_array_equal(memory_fits(total, cap, 2.0), [True, False, False])
    np.testing.assert_array_equal(memory_fits(total, cap, 0.0), [True, True, True])
    assert memory_left_gb(70e9, cap, 2.0) == pytest.approx(9.0)
    assert memory_fit_text(70.0, 81.0, 2.0) == "fits with 9.0 GB left after a 2 GB margin (81.0 GB usable)"
    assert memory_fit_text(80.0, 81.0, 2.0).startswith("DOES NOT FIT: needs 1.0 GB more")


def test_planner_no_longer_ranks_first_a_layout_without_headroom():
    bare = api.plan(memory_margin=0, **TIGHT)
    assert bare["plans"][0]["memory_headroom_gb"] < DEFAULT_MEMORY_MARGIN_GB  # what the issue saw (0.9 GB)
    doc = api.plan(**TIGHT)
    assert doc["request"]["memory_margin_gb"] == doc["stats"]["memory_margin_gb"] == DEFAULT_MEMORY_MARGIN_GB
    for p in doc["plans"]:
        assert p["memory_left_gb"] >= 0 and p["memory_headroom_gb"] >= DEFAULT_MEMORY_MARGIN_GB
        assert p["memory_left_gb"] == pytest.approx(p["memory_headroom_gb"] - DEFAULT_MEMORY_MARGIN_GB)
    assert doc["stats"]["fit_memory"] < bare["stats"]["fit_memory"]
    wide = api.plan(memory_margin=20, **TIGHT)
    assert all(p["memory_headroom_gb"] >= 20 for p in wide["plans"])


def test_estimate_shows_the_fit_and_takes_the_margin(capsys):
    args = ("estimate", "--model", "llama3-70b", "--system", "hgx-h100", "--gpus", "64", "--tp", "8", "--pp", "2",
            "--global-batch", "64")
    code, out, _ = run_cli(capsys, *args)
    assert code == 0 and "GB left after a 2 GB margin" in out
    code, out, _ = run_cli(capsys, *args, "--json", "--memory-margin", "5")
    d = json.loads(out)
    assert d["memory_margin_gb"] == 5 and d["fits_memory"]
    assert d["memory_left_gb"] == pytest.approx(d["memory_capacity_gb"] - d["memory_gb_per_gpu"] - 5)
    code, out, _ = run_cli(capsys, *args, "--memory-margin", "60")
    assert code == 0 and "DOES NOT FIT" in out
    code, out, _ = run_cli(capsys, *args, "--engine", "event", "--json", "--memory-margin", "60")
    assert code == 0 and json.loads(out)["fits_memory"] is False
    for bad in ("-1", "nan", "inf"):
        code, _, err = run_cli(capsys, *args, "--memory-margin", bad)
        assert code == 2 and "--memory-margin" in err and "Traceback" not in err


def test_plan_text_and_bad_margin(capsys):
    code, out, _ = run_cli(capsys, "plan", "--model", "llama3-8b", "--gpus", "16", "--no-store", "--memory-margin", "3")
    assert code == 0 and "left after a 3 GB margin" in out and "less a 3 GB margin" in out
    code, _, err = run_cli(capsys, "plan", "--model", "llama3-8b", "--gpus", "16", "--no-store", "--memory-margin", "-2")
    assert code == 2 and "--memory-margin" in err
    # a margin no layout can keep: says so, and that a smaller margin would fit
    code, _, err = run_cli(capsys, "plan", "--model", "llama3-8b", "--gpus", "16", "--no-store", "--memory-margin", "79")
    assert code == 2 and "79 GB margin" in err and "lower --memory-margin" in err


def test_compare_and_sweep_use_the_margin(catalog, tmp_path, capsys):
    a = api.compare(["hgx-h100x2"], model="llama3-8b", memory_margin=0.5, catalog=catalog)
    row = a["designs"][0]
    assert row["memory_margin_gb"] == 0.5 and row["memory_left_gb"] >= 0 and "0.5 GB margin" in row["performance_basis"]
    spec = {"name": "m", "designs": {"system": "hgx-h100", "domains": [2]}, "models": "llama3-8b",
            "global_batch": 64, "seq_len": 4096}
    s0 = api.build_sweep(spec, catalog=catalog)
    s1 = api.build_sweep({**spec, "memory_margin_gb": 10}, catalog=catalog)
    assert s0.sweep_id != s1.sweep_id and s1.jobs[0].memory_margin_gb == 10
    assert s0.jobs[0].memory_margin_gb == DEFAULT_MEMORY_MARGIN_GB
    f = tmp_path / "s.yaml"
    f.write_text("name: m\ndesigns: {system: hgx-h100, domains: [2]}\nmodels: llama3-8b\nglobal_batch: 64\n"
                 "seq_len: 4096\nmemory_margin_gb: -1\n")
    code, _, err = run_cli(capsys, "sweep", str(f), "--db", str(tmp_path / "r.db"))
    assert code == 2 and "memory_margin_gb" in err
    code, out, _ = run_cli(capsys, "sweep", str(f), "--db", str(tmp_path / "r.db"), "--memory-margin", "30",
                           "--workers", "1", "--json")
    d = json.loads(out)
    assert code == 0 and d["memory_margin_gb"] == 30
    assert all(r["memory_gb_per_gpu"] * 1e9 <= 81559 * 2**20 * 0.95 - 30e9 for r in d["rows"] if r["feasible"])


def test_validate_still_models_published_runs_the_margin_would_refuse(catalog, validation_dir, tmp_path):
    """The margin is for planning: a published run that really ran is modelled even when its modelled
    peak leaves less than the margin free (or does not fit at all: a memory-model error, not a refusal)."""
    from clustertwin.validate import _estimate_row, read_rows

    path = validation_dir / "training.csv"
    rows = read_rows(path)
    tight = []
    for r in rows:
        e = _estimate_row(r, catalog, "analytical")
        if not e.fits_memory:  # refused by the fit rule: inside the margin, or over the usable capacity
            tight.append(r)
    assert tight, "some published layouts leave less than the default margin free"
    sub = tmp_path / "tight.csv"
    with sub.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(tight)
    rep = api.validate(sub, catalog=catalog)
    assert len(rep.modelled) == len(tight) and not rep.failures

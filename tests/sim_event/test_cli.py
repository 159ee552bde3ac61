"""The event engine behind the estimate/validate commands (``--engine event``)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest

ROWS = ("mbridge-256", "mcore-h100-weak-5", "korth-22B-present", "mbridge-249")


def _run(*args):
    return subprocess.run([sys.executable, "-m", "clustertwin", *args], capture_output=True, text=True, timeout=300)


def test_estimate_engine_event_json():
    out = _run("estimate", "--model", "llama3-8b", "--system", "hgx-h100", "--gpus", "32", "--tp", "2", "--pp", "2",
               "--vpp", "2", "--global-batch", "64", "--seq-len", "4096", "--engine", "event", "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    for key in ("step_time_s", "tokens_per_s", "mfu", "hfu", "tflops_per_gpu", "memory_gb_per_gpu", "fits_memory",
                "breakdown", "bottleneck", "critical_path", "stream_utilisation", "exposed_comm_s"):
        assert key in d
    assert d["engine"] == "event" and d["schedule"] == "interleaved"
    assert sum(d["breakdown"].values()) == pytest.approx(d["step_time_s"], rel=1e-6)


def test_validate_engine_event_agrees_with_analytical(tmp_path, validation_dir):
    src = validation_dir / "training.csv"
    with src.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        rows = [r for r in reader if r["id"] in ROWS]
        fields = reader.fieldnames
    path = tmp_path / "subset.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    ev = _run("validate", str(path), "--engine", "event", "--json")
    an = _run("validate", str(path), "--json")
    assert ev.returncode == 0, ev.stderr
    assert an.returncode == 0, an.stderr
    e = {r["id"]: r for r in json.loads(ev.stdout)["rows"]}
    a = {r["id"]: r for r in json.loads(an.stdout)["rows"]}
    assert set(e) == set(ROWS)
    for rid in ROWS:
        assert e[rid]["predicted"] == pytest.approx(a[rid]["predicted"], rel=0.05), rid

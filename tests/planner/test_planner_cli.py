"""CLI: sweep/results commands over a database made with the fake evaluator; plan error paths."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import pytest
from planner_fakes import fake_cost, fake_factory, resolve

from clustertwin.planner.executors import LocalExecutor
from clustertwin.planner.store import ResultsStore
from clustertwin.planner.sweep import build_sweep, run_sweep


def test_real_process_exit_code(tmp_path):
    r = subprocess.run([sys.executable, "-m", "clustertwin", "results", "list", "--db", str(tmp_path / "no.db")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "does not exist" in r.stderr and "Traceback" not in r.stderr


@pytest.fixture(scope="module")
def db(tmp_path_factory, catalog):
    path = tmp_path_factory.mktemp("db") / "r.db"
    spec = {"name": "cli-grid", "designs": {"system": "hgx-h100", "domains": [4, 8]}, "models": "fake-7b",
            "global_batch": 256, "seq_len": 4096}
    sw = build_sweep(spec, catalog, resolve=resolve)
    run_sweep(sw, ResultsStore(path), LocalExecutor(workers=1), factory=fake_factory, cost_fn=fake_cost)
    return path, sw


def test_results_list_show_export(db, tmp_path, ct):
    path, sw = db
    r = ct("results", "list", "--db", str(path), "--json")
    assert r.returncode == 0, r.stderr
    sweeps = json.loads(r.stdout)["sweeps"]
    assert [s["id"] for s in sweeps] == [sw.sweep_id] and sweeps[0]["rows"] == 2
    r = ct("results", "show", "cli-grid", "--db", str(path), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["sweep"]["id"] == sw.sweep_id and len(doc["rows"]) == 2 and doc["pareto"]
    for args in (("results", "list", "--db", str(path)), ("results", "show", sw.sweep_id, "--db", str(path))):
        r = ct(*args)
        assert r.returncode == 0 and sw.sweep_id[:8] in r.stdout.replace("\n", ""), r.stderr
    r = ct("results", "export", sw.sweep_id[:8], "--db", str(path), "--format", "csv")
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert [int(x["num_gpus"]) for x in rows] == [32, 64] and all(x["feasible"] == "True" for x in rows)
    out = tmp_path / "e.json"
    r = ct("results", "export", sw.sweep_id, "--db", str(path), "--format", "json", "-o", str(out))
    assert r.returncode == 0 and len(json.loads(out.read_text())["rows"]) == 2


def test_results_errors(db, tmp_path, ct):
    path, _ = db
    r = ct("results", "show", "nope", "--db", str(path))
    assert r.returncode == 2 and "no sweep or plan 'nope'" in r.stderr and "Traceback" not in r.stderr
    r = ct("results", "list", "--db", str(tmp_path / "missing.db"))
    assert r.returncode == 2 and "does not exist" in r.stderr
    r = ct("results", "export", "cli-grid", "--db", str(path), "--format", "parquet")
    assert r.returncode == 2 and "--output" in r.stderr


def test_results_export_parquet_round_trip(db, tmp_path, ct):
    """Parquet export writes a real file that pyarrow reads back with the same rows as JSON export."""
    pq = pytest.importorskip("pyarrow.parquet")
    path, _ = db
    out = tmp_path / "rows.parquet"
    r = ct("results", "export", "cli-grid", "--db", str(path), "--format", "parquet", "-o", str(out))
    assert r.returncode == 0, r.stderr
    table = pq.read_table(out).to_pylist()
    js = tmp_path / "rows.json"
    assert ct("results", "export", "cli-grid", "--db", str(path), "--format", "json", "-o", str(js)).returncode == 0
    rows = json.loads(js.read_text())["rows"]
    assert len(table) == len(rows) == 2
    assert [t["tokens_per_s"] for t in table] == [r["tokens_per_s"] for r in rows]


def test_sweep_and_plan_bad_input(tmp_path, ct):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ndesigns: {system: hgx-h10, domains: 2}\nmodels: llama3-8b\nglobal_batch: 64\n")
    r = ct("sweep", str(bad), "--db", str(tmp_path / "r.db"))
    assert r.returncode == 2 and "hgx-h100" in r.stderr  # did you mean
    bad.write_text("name: x\ndesigns: {system: hgx-h100}\nmodels: llama3-8b\nglobal_batch: 64\n")
    r = ct("sweep", str(bad), "--db", str(tmp_path / "r.db"))
    assert r.returncode == 2 and "domains" in r.stderr
    r = ct("sweep", str(tmp_path / "none.yaml"))
    assert r.returncode == 2 and "does not exist" in r.stderr
    r = ct("plan", "--model", "llama3-40b")
    assert r.returncode == 2 and "unknown model" in r.stderr.lower()
    r = ct("plan", "--gpus", "64", "--domains", "4")
    assert r.returncode == 2 and "disagree" in r.stderr
    r = ct("plan", "--engine", "fast")
    assert r.returncode == 2 and "engine" in r.stderr


def test_plan_results_are_stored_queried_and_exported(ct, tmp_path):
    db = tmp_path / "plans.db"
    r = ct("plan", "--model", "llama3-8b", "--gpus", "64", "--top", "3", "--db", str(db), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    rid = doc["stored"]["id"]
    again = json.loads(ct("plan", "--model", "llama3-8b", "--gpus", "64", "--top", "3", "--db", str(db),
                          "--json").stdout)
    assert again["stored"]["id"] == rid  # same inputs and versions: one record, no duplicate rows
    listed = json.loads(ct("results", "list", "--db", str(db), "--json").stdout)["sweeps"]
    assert [(s["id"], s["rows"]) for s in listed] == [(rid, 3)]
    shown = json.loads(ct("results", "show", rid[:6], "--db", str(db), "--json").stdout)
    assert shown["sweep"]["spec"]["kind"] == "plan" and shown["sweep"]["spec"]["request"]["stack"] == "megatron-core"
    # the ranked plans as planned, best first, with the design's power from the bill of materials
    assert [(s["tp"], s["pp"], s["dp"], s["cp"]) for s in shown["rows"]] == \
        [(p["tp"], p["pp"], p["dp"], p["cp"]) for p in doc["plans"]]
    assert [s["tokens_per_s"] for s in shown["rows"]] == pytest.approx([p["tokens_per_s"] for p in doc["plans"]])
    assert all(s["power_w"] and s["power_w"] > 0 for s in shown["rows"])
    csv_text = ct("results", "export", rid, "--db", str(db), "--format", "csv").stdout
    assert len(csv_text.strip().splitlines()) == 4 and csv_text.startswith("job_index,")


def test_plan_no_store_writes_no_database(ct, tmp_path):
    r = ct("plan", "--model", "llama3-8b", "--gpus", "64", "--top", "1", "--no-store", "--db", str(tmp_path / "x.db"))
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "x.db").exists() and "stored in" not in r.stdout


def test_plan_still_prints_when_the_database_cannot_be_written(ct, tmp_path):
    r = ct("plan", "--model", "llama3-8b", "--gpus", "64", "--top", "1", "--db", str(tmp_path / "no" / "such" / "x.db"),
           "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["plans"] and "stored" not in json.loads(r.stdout)
    err = " ".join(r.stderr.split())  # rich wraps long lines
    assert "plans not stored" in err and "does not exist" in err

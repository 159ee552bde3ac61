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


def test_replay_compare_export_gen_trace(capsys, tmp_path):
    trace = tmp_path / "jobs.csv"
    rc, out, err = run(capsys, "schedule", "gen-trace", str(trace), "--jobs", "200", "--cluster", "gb200-nvl72",
                       "--domains", "16", "--unhealthy-per-domain", "2", "--json")
    assert rc == 0, err
    assert json.loads(out)["jobs"] == 200 and trace.exists()
    db = tmp_path / "r.db"
    per_job = tmp_path / "per_job.csv"
    rc, out, err = run(capsys, "schedule", "replay", str(trace), "--cluster", "gb200-nvl72", "--domains", "16",
                       "--unhealthy-per-domain", "2", "--policy", "slurm-block", "--db", str(db),
                       "--jobs-csv", str(per_job), "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert d["policy"] == "slurm-block" and d["metrics"]["jobs"] == 200 and d["stored"]["id"]
    assert len(per_job.read_text().splitlines()) == 201
    rc, out, err = run(capsys, "results", "show", d["stored"]["id"], "--db", str(db))
    assert rc == 0 and "slurm-block" in out
    rc, out, err = run(capsys, "schedule", "compare", "llm:150", "--cluster", "gb200-nvl72", "--domains", "16",
                       "--policies", "fifo,tas", "--no-store", "--json")
    assert rc == 0, err
    assert [p["policy"] for p in json.loads(out)["policies"]] == ["fifo", "tas"]
    rc, out, _ = run(capsys, "schedule", "export", "--format", "slurm", "--cluster", "gb200-nvl72", "--domains", "2")
    assert rc == 0 and "block_sizes" in out


def test_replay_bad_input_exits_2(capsys, tmp_path):
    f = tmp_path / "j.yaml"
    f.write_text("jobs:\n- {id: big-one, pods: 3, gpus_per_pod: 8, duration_s: 60}\n")
    rc, _, err = run(capsys, "schedule", "replay", str(f), "--cluster", "gb200-nvl72", "--domains", "2", "--no-store")
    assert rc == 2 and "big-one" in err and "gpus_per_pod" in err
    f.write_text("jobs:\n- {id: rack, pods: 19, gpus_per_pod: 4, duration_s: 60, required: domain}\n")
    rc, _, err = run(capsys, "schedule", "replay", str(f), "--cluster", "gb200-nvl72", "--domains", "2", "--no-store")
    assert rc == 2 and "rack" in err and "required" in err
    rc, _, err = run(capsys, "schedule", "replay", str(f), "--policy", "kueue", "--no-store")
    assert rc == 2 and "unknown scheduling policy" in err
    rc, _, err = run(capsys, "schedule", "export", "--format", "sge")
    assert rc == 2 and "kueue" in err


def test_stored_schedule_and_plan_records_render_in_the_web_ui(capsys, tmp_path):
    from fastapi.testclient import TestClient

    from clustertwin.web.app import create_app

    db = tmp_path / "r.db"
    rc, out, err = run(capsys, "schedule", "compare", "llm:60", "--cluster", "gb200-nvl72", "--domains", "4",
                       "--policies", "fifo,dra", "--db", str(db), "--json")
    assert rc == 0, err
    rid = json.loads(out)["stored"]["id"]
    with TestClient(create_app(db=db)) as c:
        page = c.get(f"/results/{rid}")
        assert page.status_code == 200 and "dra" in page.text and "jct_mean_h" in page.text
        assert c.get("/results").status_code == 200

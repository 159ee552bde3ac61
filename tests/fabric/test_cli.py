"""``clustertwin fabric``: output contract and bad input (exit 2, message, suggestions)."""

from __future__ import annotations

import json
import subprocess
import sys


def _run(*args: str, cwd=None):
    return subprocess.run([sys.executable, "-m", "clustertwin", "fabric", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


def test_json_collective_with_faults():
    p = _run("all_reduce", "--domains", "32", "--routing", "spray", "--fail-links", "2", "--seed", "3", "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["gpus"] == 256 and d["routing"] == "spray"
    assert d["time_s"] > 0 and 0 < d["efficiency"] <= 1
    assert d["slowdown"] >= 1 - 1e-9
    assert len(d["faults"]) == 4  # two cables, both directions
    assert {t["tier"] for t in d["tier_utilisation"]} >= {"nic-up", "leaf-up"}
    assert d["hottest_links"] and d["hottest_links"][0]["util"] <= 1 + 1e-9


def test_human_output_all_to_all():
    p = _run("all_to_all", "--domains", "16", "--topology", "fat-tree", "--size", "256M")
    assert p.returncode == 0, p.stderr
    assert "completion time" in p.stdout and "hottest links" in p.stdout


def test_unknown_routing_suggests():
    p = _run("all_reduce", "--routing", "ecmq")
    assert p.returncode == 2
    assert "ecmp" in p.stderr and "Traceback" not in p.stderr


def test_unknown_workload_suggests():
    p = _run("all_reduc")
    assert p.returncode == 2 and "all_reduce" in p.stderr


def test_matrix_ok_and_bad(tmp_path):
    good = tmp_path / "m.csv"
    good.write_text("src,dst,bytes,start_s\n0,8,1G,0\n1,9,512M,0.001\n8,0,1000000,0\n")
    p = _run("matrix", "--matrix", str(good), "--domains", "4", "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["flows_simulated"] == 3 and d["time_s"] > 0
    y = tmp_path / "m.yaml"
    y.write_text("flows:\n  - {src: gpu0, dst: gpu9, bytes: 1M}\n")
    assert _run("matrix", "--matrix", str(y), "--domains", "2", "--json").returncode == 0
    neg = tmp_path / "neg.csv"
    neg.write_text("src,dst,bytes\n0,8,-5\n")
    p = _run("matrix", "--matrix", str(neg), "--domains", "4")
    assert p.returncode == 2 and "negative" in p.stderr
    unk = tmp_path / "unk.csv"
    unk.write_text("src,dst,bytes\n0,999,5\n")
    p = _run("matrix", "--matrix", str(unk), "--domains", "4")
    assert p.returncode == 2 and "unknown endpoint" in p.stderr


def test_disconnecting_failure_is_input_error():
    p = _run("all_reduce", "--domains", "16", "--topology", "fat-tree", "--fail-switch", "leaf:0")
    assert p.returncode == 2
    assert "disconnects endpoint" in p.stderr and "Traceback" not in p.stderr


def test_jobs(tmp_path):
    f = tmp_path / "jobs.yaml"
    f.write_text(
        "jobs:\n"
        "  - {name: a, gpus: 64, placement: packed, traffic: all_reduce, size: 256M}\n"
        "  - {name: b, gpus: 64, placement: spread, traffic: all_to_all, size: 64M}\n"
    )
    p = _run("jobs", "--jobs", str(f), "--domains", "32", "--topology", "fat-tree", "--json")
    assert p.returncode == 0, p.stderr
    jobs = json.loads(p.stdout)["jobs"]
    assert [j["name"] for j in jobs] == ["a", "b"]
    assert all(j["slowdown"] >= 1 - 1e-9 for j in jobs)
    bad = tmp_path / "bad.yaml"
    bad.write_text("jobs:\n  - {gpus: 8, placement: sprad}\n")
    p = _run("jobs", "--jobs", str(bad))
    assert p.returncode == 2 and "spread" in p.stderr


def test_slow_nic_and_straggler_report_slowdown():
    p = _run("all_reduce", "--domains", "16", "--routing", "spray", "--slow-nic", "3:0.5",
             "--straggler", "5:0.001", "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    # 30 ring steps; the first waits 1 ms for rank 5 (then one healthy step), the other 29 run at
    # the slow NIC's half rate
    step = d["healthy_time_s"] / 30
    assert abs(d["time_s"] - (1e-3 + step + 29 * 2 * step)) < 1e-6 * d["time_s"]
    assert d["slowdown"] > 2
    assert _run("all_reduce", "--slow-nic", "3x").returncode == 2

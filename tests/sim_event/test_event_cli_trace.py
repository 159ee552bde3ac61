"""`clustertwin estimate --engine event --trace` writes a valid Chrome trace; --trace without the
event engine is bad input (exit 2)."""

from __future__ import annotations

import json
import subprocess
import sys

ARGS = ["estimate", "--model", "gpt3-175b", "--system", "dgx-a100", "--gpus", "64", "--tp", "8", "--pp", "8",
        "--global-batch", "64", "--micro-batch", "1"]


def _run(*extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "clustertwin", *ARGS, *extra], capture_output=True, text=True)


def test_trace_written_and_valid(tmp_path):
    out = tmp_path / "step.json"
    r = _run("--engine", "event", "--trace", str(out), "--json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    doc = json.loads(out.read_text())
    events = doc["traceEvents"]
    xs = [e for e in events if e["ph"] == "X"]
    assert xs and all({"name", "ts", "dur", "pid", "tid"} <= set(e) for e in xs)
    # the timeline spans the simulated step (microseconds)
    end = max(e["ts"] + e["dur"] for e in xs)
    assert abs(end / 1e6 - summary["step_time_s"]) / summary["step_time_s"] < 0.02
    assert summary["critical_path"]


def test_trace_needs_event_engine(tmp_path):
    r = _run("--trace", str(tmp_path / "x.json"))
    assert r.returncode == 2
    assert "--engine event" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "x.json").exists()


def test_straggler_slows_the_step():
    base = json.loads(_run("--engine", "event", "--json").stdout)["step_time_s"]
    slow = json.loads(_run("--engine", "event", "--straggler", "stage=3,compute=1.5", "--json").stdout)["step_time_s"]
    assert slow > base * 1.05

"""The Chrome trace is valid trace-event JSON (checked against a JSON schema of the Trace Event
Format written here) and is byte-identical for identical inputs (determinism)."""

from __future__ import annotations

import json
import numbers

import pytest

from clustertwin.report.trace import chrome_trace, write_chrome_trace
from clustertwin.sim.event import EventOptions, simulate_work

from ._synth import uniform_stages

# JSON schema (draft 2020-12 subset) of the Trace Event Format, JSON Object Format.
TRACE_SCHEMA = {
    "type": "object",
    "required": ["traceEvents"],
    "properties": {
        "traceEvents": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["ph", "ts", "pid", "tid", "name"],
                "properties": {
                    "ph": {"type": "string", "enum": ["X", "M", "B", "E", "i", "C"]},
                    "ts": {"type": "number", "minimum": 0},
                    "dur": {"type": "number", "minimum": 0},
                    "pid": {"type": "integer", "minimum": 0},
                    "tid": {"type": "integer", "minimum": 0},
                    "name": {"type": "string", "minLength": 1},
                    "cat": {"type": "string"},
                    "args": {"type": "object"},
                },
                "allOf": [{"if": {"properties": {"ph": {"const": "X"}}}, "then": {"required": ["dur"]}}],
            },
        },
        "displayTimeUnit": {"type": "string", "enum": ["ms", "ns"]},
    },
}


def _check(instance, schema, path="$"):
    """A small validator for the keywords used in TRACE_SCHEMA (no third-party dependency)."""
    t = schema.get("type")
    types = {"object": dict, "array": list, "string": str, "integer": int}
    if t == "number":
        assert isinstance(instance, numbers.Real) and not isinstance(instance, bool), f"{path}: not a number"
    elif t == "integer":
        assert isinstance(instance, int) and not isinstance(instance, bool), f"{path}: not an integer"
    elif t:
        assert isinstance(instance, types[t]), f"{path}: not {t}"
    if "enum" in schema:
        assert instance in schema["enum"], f"{path}: {instance!r} not in {schema['enum']}"
    if "const" in schema:
        assert instance == schema["const"], f"{path}: != {schema['const']}"
    if "minimum" in schema:
        assert instance >= schema["minimum"], f"{path}: {instance} < {schema['minimum']}"
    if "minLength" in schema:
        assert len(instance) >= schema["minLength"], f"{path}: too short"
    for k in schema.get("required", []):
        assert k in instance, f"{path}: missing {k!r}"
    for k, sub in schema.get("properties", {}).items():
        if isinstance(instance, dict) and k in instance:
            _check(instance[k], sub, f"{path}.{k}")
    if "items" in schema:
        for i, x in enumerate(instance):
            _check(x, schema["items"], f"{path}[{i}]")
    for cond in schema.get("allOf", []):
        try:
            _check(instance, cond["if"], path)
        except AssertionError:
            continue
        _check(instance, cond["then"], path)


def _result(**kw):
    stages = uniform_stages(4, layers_per_chunk=2, v=2, tp=0.3, dp=1.0, p2p=0.05, optimizer=0.2)
    return simulate_work(stages, EventOptions(schedule="interleaved", num_microbatches=8, **kw), trace=True)


def test_schema_checker_catches_bad_events():
    with pytest.raises(AssertionError):
        _check({"traceEvents": [{"ph": "X", "ts": 0, "pid": 0, "tid": 0, "name": "a"}]}, TRACE_SCHEMA)
    with pytest.raises(AssertionError):
        _check({"traceEvents": [{"ph": "X", "ts": "0", "dur": 1, "pid": 0, "tid": 0, "name": "a"}]}, TRACE_SCHEMA)
    with pytest.raises(AssertionError):
        _check({"traceEvents": [{"ph": "X", "ts": 0, "dur": 1, "pid": 0.5, "tid": 0, "name": "a"}]}, TRACE_SCHEMA)


def test_trace_is_valid_trace_event_json(tmp_path):
    r = _result()
    path = write_chrome_trace(r, tmp_path / "step.json")
    doc = json.loads(path.read_text())
    _check(doc, TRACE_SCHEMA)
    ev = doc["traceEvents"]
    x = [e for e in ev if e["ph"] == "X"]
    meta = [e for e in ev if e["ph"] == "M"]
    assert len(x) > 100
    # every (pid, tid) used by an op is named by metadata; every stage is a named process
    named_threads = {(e["pid"], e["tid"]) for e in meta if e["name"] == "thread_name"}
    assert {(e["pid"], e["tid"]) for e in x} <= named_threads
    assert {e["pid"] for e in meta if e["name"] == "process_name"} == {0, 1, 2, 3}
    # events end within the step and ops on one stream never overlap
    end_us = r.step_time_s * 1e6
    assert max(e["ts"] + e["dur"] for e in x) == pytest.approx(end_us, rel=1e-6)
    by_thread: dict = {}
    for e in x:
        by_thread.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for spans in by_thread.values():
        spans.sort()
        for (_a0, a1), (b0, _b1) in zip(spans, spans[1:], strict=False):
            assert b0 >= a1 - 5e-3  # ts and dur are rounded to 1 ns separately


def test_same_inputs_same_trace():
    a = json.dumps(chrome_trace(_result()), sort_keys=True)
    b = json.dumps(chrome_trace(_result()), sort_keys=True)
    assert a == b
    ra, rb = _result(), _result()
    assert ra.to_dict() == rb.to_dict()


def test_trace_requires_timeline():
    r = simulate_work(uniform_stages(2), EventOptions(num_microbatches=2))
    with pytest.raises(ValueError):
        chrome_trace(r)


def test_trace_identical_across_processes_and_hash_seeds():
    import hashlib
    import os
    import subprocess
    import sys

    code = (
        "import json,hashlib;from clustertwin.sim.event import EventOptions,simulate_work;"
        "from clustertwin.report.trace import chrome_trace;"
        "from sim_event._synth import uniform_stages;"
        "r=simulate_work(uniform_stages(4,layers_per_chunk=2,v=2,tp=0.3,dp=1.0,p2p=0.05,optimizer=0.2),"
        "EventOptions(schedule='interleaved',num_microbatches=8),trace=True);"
        "print(hashlib.sha256(json.dumps(chrome_trace(r),sort_keys=True).encode()).hexdigest())"
    )
    tests_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    digests = set()
    for seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": tests_dir + os.pathsep + os.environ.get("PYTHONPATH", "")}
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
        digests.add(out.stdout.strip())
    here = hashlib.sha256(json.dumps(chrome_trace(_result()), sort_keys=True).encode()).hexdigest()
    assert digests == {here}

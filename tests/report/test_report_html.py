"""The HTML report: charts, sections, size, determinism, --from-db, and errors (no browser here)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cli_runner import run_cli as run
from clustertwin.report import svg

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "scenarios" / "llama3-70b-hgx-h100.yaml"
EXPECTED_CHARTS = {"topology", "power", "capex", "waterfall", "comm-exposed", "timeline", "memory", "scaling",
                   "pareto-cost", "pareto-power", "link-heatmap", "routing", "goodput-cdf", "interruptions",
                   "accuracy-by-gpu", "serving-pareto"}




def test_scenario_report_has_every_section_and_chart(scenario_report):
    html, doc = scenario_report
    text = html.read_text(encoding="utf-8")
    assert doc["sections"] == ["overview", "cluster", "step", "plan", "fabric", "reliability", "serving", "accuracy",
                               "assumptions"]
    assert doc["skipped"] == {}
    charts = set(re.findall(r'class="ct-chart" data-chart="([^"]+)"', text))
    assert charts == EXPECTED_CHARTS
    assert doc["bytes"] == len(text.encode()) < 5 * 1024 * 1024
    # units on every axis: each axis label names a unit in parentheses or is a category axis
    for label in re.findall(r'class="ct-ylabel"[^>]*>([^<]+)<', text):
        assert "(" in label and ")" in label, label
    # the trace is written beside the HTML and linked relatively
    trace = html.with_name("r.trace.json")
    assert doc["trace"] == str(trace) and trace.exists()
    assert 'href="r.trace.json"' in text
    assert json.loads(trace.read_text())["traceEvents"]


def test_report_is_self_contained(scenario_report):
    text = scenario_report[0].read_text(encoding="utf-8")
    assert "<script" not in text.lower()
    assert not re.search(r"\b(src|srcset)=", text)
    assert "<link" not in text.lower() and "@import" not in text and "url(" not in text
    # the only external references are plain links a reader may click (sources)
    for href in re.findall(r'href="([^"]+)"', text):
        assert href.startswith(("#", "https://", "http://")) or href == "r.trace.json", href


def test_report_is_deterministic(scenario_report, tmp_path):
    from clustertwin import api

    html, _ = scenario_report
    again = tmp_path / "r.html"
    api.report(str(SCENARIO), html=again, trace=True)
    assert again.read_bytes() == html.read_bytes()


def test_report_numbers_match_estimate(scenario_report):
    from clustertwin import api

    text = scenario_report[0].read_text(encoding="utf-8")
    r = api.estimate(str(SCENARIO))
    assert f"{r.step_time_s:.3f} s" in text
    assert f"{r.tokens_per_s:,.0f}" in text


def test_report_from_db_sweep_and_plan(capsys, tmp_path):
    db = tmp_path / "s.db"
    code, out, err = run(capsys, "sweep", str(ROOT / "scenarios" / "sweeps" / "smoke.yaml"), "--db", str(db), "--workers", "1", "--json")
    assert code == 0, err
    sid = json.loads(out)["sweep_id"]
    code, out, err = run(capsys, "report", "--from-db", str(db), "--id", sid, "--html", str(tmp_path / "s.html"), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert "plan" in doc["sections"] and doc["trace"] is None
    text = (tmp_path / "s.html").read_text()
    assert 'data-chart="pareto-cost"' in text and 'data-chart="scaling"' in text
    code, out, err = run(capsys, "plan", "--model", "llama3-8b", "--gpus", "64", "--db", str(db), "--json")
    assert code == 0, err
    pid = json.loads(out)["stored"]["id"]
    code, out, err = run(capsys, "report", "--from-db", str(db), "--id", pid, "--html", str(tmp_path / "p.html"))
    assert code == 0, err
    assert "Top layouts" in (tmp_path / "p.html").read_text()


@pytest.mark.parametrize(("args", "needle"), [
    (["report"], "needs a scenario"),
    (["report", "--from-db", "x.db"], "--from-db needs --id"),
    (["report", "--from-db", "nope.db", "--id", "x"], "does not exist"),
    (["report", str(SCENARIO), "--html", "r.txt"], "should end in .html"),
    (["report", str(SCENARIO), "--fabric-domains", "0"], "--fabric-domains must be positive"),
    (["report", "missing.yaml"], "missing.yaml"),
])
def test_report_bad_input_exits_2(capsys, tmp_path, monkeypatch, args, needle):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, *args)
    assert code == 2 and needle in err, err


def test_report_scenario_errors_match_estimate(capsys, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: llama3-70b\nsystem: hgx-h100\ngpus: 64\nplan: {tp: 4, pp: 8, global_batch: 256}\nfabrik: x\n")
    _, _, e1 = run(capsys, "estimate", str(bad))
    code, _, e2 = run(capsys, "report", str(bad), "--html", str(tmp_path / "b.html"))
    assert code == 2 and e1 == e2 and "fabrik" in e2


# ----------------------------------------------------------------------------------- chart kit


@given(st.floats(-1e9, 1e9), st.floats(0.001, 1e9))
@settings(max_examples=200, deadline=None)
def test_nice_ticks_cover_the_range(lo, span):
    hi = lo + span
    t = svg.nice_ticks(lo, hi)
    tol = 1e-9 * max(span, abs(lo), abs(hi))  # ticks are drawn: sub-nanoscale rounding is fine
    assert t[0] <= lo + tol and t[-1] >= hi - tol
    assert all(b > a for a, b in zip(t, t[1:], strict=False)) and len(t) <= 12


def test_charts_draw_one_mark_per_value_and_escape_labels():
    s = svg.bar_chart("b", "t", ["a", "<script>"], [("x", [1, 2]), ("y", [0, 3])], x_label="c", y_label="v (s)")
    assert s.count('class="ct-mark"') == 3 and "<script>" not in s and "&lt;script&gt;" in s
    w = svg.waterfall("w", "t", [("a", 1.0), ("b", 0.0), ("c", 2.0)])
    assert w.count('class="ct-mark"') == 3  # two components (zero dropped) and the total
    assert "no data" in svg.bar_chart("e", "t", [], [], x_label="x", y_label="y")
    sc = svg.scatter("s", "t", [{"x": 1, "y": 2, "front": True}, {"x": float("nan"), "y": 1}], x_label="x", y_label="y")
    assert sc.count('class="ct-mark"') == 1
    h = svg.heatmap("h", "t", ["r"], ["1", "2"], [[0.5, None]], x_label="x", y_label="y")
    assert h.count('class="ct-mark"') == 2 and "no links" in h


def test_scheduling_section_renders_the_openb_curves():
    from clustertwin.report.html import render_document
    from clustertwin.report.serving_sched import collect_scheduling

    d = collect_scheduling(("random", "bestfit"))
    assert [r["policy"] for r in d["runs"]] == ["random", "bestfit"]
    final = {r["policy"]: r["curve"][-1]["allocated_pct"] for r in d["runs"]}
    assert 0 < final["random"] <= final["bestfit"] <= 100  # best-fit packs at least as well as random (ATC'23 Fig. 7)
    html, ids = render_document({"scheduling": d, "skipped": {}})
    assert ids == ["scheduling"] and 'data-chart="sched-allocation"' in html and html.count("<polyline") == 2


def test_custom_model_scenario_reports_what_it_can(tmp_path):
    """A scenario whose model is defined inline (not a zoo id): the sweep and serving parts say why they
    are left out; every other section is there."""
    from clustertwin import api

    d = api.report(str(ROOT / "scenarios" / "deepseek-v3-gb200.yaml"), html=tmp_path / "d.html", monte_carlo_runs=200)
    assert set(d["skipped"]) == {"sweep", "serving"} and "defined in the scenario" in d["skipped"]["sweep"]
    assert {"cluster", "step", "plan", "fabric", "reliability", "accuracy"} <= set(d["sections"])
    text = (tmp_path / "d.html").read_text()
    assert "Not available for this input: the design sweep runs zoo models" in text

"""benchmarks/data/megatron_bridge_best_known.csv: each entry is a faster published run of the job of a
Megatron-Bridge row of the packaged training set (the realism benchmark's `best/known` reference)."""

from __future__ import annotations

import csv
from pathlib import Path

KNOWN = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "megatron_bridge_best_known.csv"


def _realism_bench():
    """The realism benchmark script as a module (it lives under benchmarks/, not in the package)."""
    import importlib.util

    path = KNOWN.parents[1] / "bench_planner_realism.py"
    spec = importlib.util.spec_from_file_location("bench_planner_realism", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


KEYS = ("model", "system", "num_gpus", "precision", "global_batch", "seq_len")


def test_every_best_known_run_is_a_faster_run_of_a_row_job(validation_dir):
    with (validation_dir / "training.csv").open(newline="", encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if r["framework"] == "megatron-bridge"]
    with KNOWN.open(newline="", encoding="utf-8") as fh:
        known = list(csv.DictReader(fh))
    assert known
    jobs: dict[tuple[str, ...], list[dict[str, str]]] = {}
    for r in rows:
        jobs.setdefault(tuple(r[k] for k in KEYS), []).append(r)
    seen = set()
    for k in known:
        key = tuple(k[c] for c in KEYS)
        assert key not in seen, f"job {key} listed twice"
        seen.add(key)
        assert key in jobs, f"{key}: no Megatron-Bridge row of training.csv runs this job"
        assert k["source"] and k["source_locator"] and k["release"]
        # a faster run than every row of the job (per GPU: the rows publish tokens / sec / GPU)
        assert all(float(k["tokens_per_s_per_gpu"]) > float(r["published_value"]) for r in jobs[key])
        lay = {c: int(k[c]) for c in ("micro_batch", "tp", "pp", "vpp", "ep")}
        assert all(v >= 1 for v in lay.values()) and int(k["num_gpus"]) % (lay["tp"] * lay["pp"]) == 0


def test_realism_reason_classifies_from_published_figures():
    mod = _realism_bench()
    # a later run 2.8x the row, best plan 0.80 of it: shown reason, whatever the own-layout error
    assert mod.reason(2.23, 0.97, 2.80, 0.80)[0] == "later-run"
    assert mod.reason(2.31, 1.34, 2.25, 1.03)[0] == "later-run"
    # a later run exists but the best plan is still far above it, and the model is 1.27x at the row's layout
    assert mod.reason(1.33, 1.27, 1.01, 1.31)[0] == "own-layout"
    # neither: the search's own gain
    cat, text = mod.reason(1.52, 0.97, 1.0, 1.52)
    assert cat == "open" and "1.57x" in text
    assert set(mod.REASONS) == {"later-run", "own-layout", "open"}


def test_realism_knob_walk_goes_from_the_row_layout_to_the_best_plan(validation_dir):
    """knob_walk starts at the validator's estimate of the row's own layout and, after the last knob group,
    is the planner's best plan (same step time), so the steps between attribute the search's whole gain."""
    from clustertwin import load_catalog
    from clustertwin.planner.fromrow import request_from_row
    from clustertwin.planner.planning import plan
    from clustertwin.validate import _estimate_row, read_rows

    mod = _realism_bench()
    cat = load_catalog()
    row = next(r for r in read_rows(validation_dir / "training.csv") if r["id"] == "mbridge-227")
    req, _ = request_from_row(row, cat, top_k=1)
    best = plan(req, cat).plans[0]
    walk = mod.knob_walk(row, best, cat)
    assert [w[0] for w in walk] == ["row"] + [s for s, _ in mod.KNOB_STEPS]
    assert abs(walk[0][2] - _estimate_row(row, cat).step_time_s) < 1e-9
    assert abs(walk[-1][2] - best["step_time_s"]) < 1e-6 * best["step_time_s"]
    assert walk[-1][3] is True  # the best plan fits
    line = mod.format_walk(walk)
    assert line.startswith("row ") and line.count(" -> ") == len(mod.KNOB_STEPS)


def test_realism_fsdp_exposure_reads_the_plans_sharded_dp_traffic(validation_dir):
    """fsdp_exposure: None below ZeRO 3; for a ZeRO-3 plan of a MoE row the exposed term is the plan's own
    fsdp_comm, and one layer's gather is bound by the node's NICs either way: at EP 1 (DP 64 on 8 nodes) every
    rank gathers all experts over a ring that uses all 8 NICs of its node, at EP 8 one eighth of them over an
    expert-data-parallel group of 8 ranks one per node (one NIC each), so the two take about as long."""
    from clustertwin import load_catalog
    from clustertwin.planner.fromrow import request_from_row
    from clustertwin.planner.planning import plan
    from clustertwin.planner.space import SpaceOptions
    from clustertwin.validate import read_rows

    mod = _realism_bench()
    cat = load_catalog()
    row = next(r for r in read_rows(validation_dir / "training.csv") if r["id"] == "mbridge-264")
    z1 = plan(request_from_row(row, cat, top_k=1, options=SpaceOptions(zero_stages=(1,)))[0], cat).plans[0]
    assert mod.fsdp_exposure(row, z1, cat) is None
    got = {}
    for ep in (1, 8):
        opts = SpaceOptions(zero_stages=(3,), fixed={"ep": (ep,), "pp": (1,), "micro_batch": (8,)})
        best = plan(request_from_row(row, cat, top_k=1, options=opts)[0], cat).plans[0]
        got[ep] = mod.fsdp_exposure(row, best, cat)
        assert got[ep]["exposed_s"] == best["breakdown"]["fsdp_comm"] and got[ep]["gather_ms"] > 0
    assert 0.5 < got[1]["gather_ms"] / got[8]["gather_ms"] < 2.0
    assert "gather" in mod.format_fsdp(got[1])

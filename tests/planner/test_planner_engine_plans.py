"""The planner on the real analytical engine: CLI contract, exact memory pruning, impossible requests,
and the published layouts (Llama 3 405B on 16,384 H100; GPT-3 175B on 1,024 A100)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from clustertwin.errors import InputError
from clustertwin.planner.evaluator import AnalyticalEvaluator, resolve_model
from clustertwin.planner.planning import PlanRequest, plan
from clustertwin.planner.space import ModelShape, SpaceOptions, structural_space

pytest.importorskip("clustertwin.sim.analytical")

CONTRACT = {"tp", "pp", "dp", "cp", "ep", "vpp", "zero", "micro_batch", "recompute", "step_time_s", "tokens_per_s",
            "mfu", "hfu", "tflops_per_gpu", "memory_gb_per_gpu", "fits_memory", "breakdown", "bottleneck"}


def ct_proc(*args):
    return subprocess.run([sys.executable, "-m", "clustertwin", *args], capture_output=True, text=True, timeout=120)


def test_plain_plan_json_contract(ct):
    r = ct("plan", "--json", "--top", "4")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)  # exactly one JSON document
    plans = doc["plans"]
    assert len(plans) == 4 and all(CONTRACT <= set(p) for p in plans)
    tps = [p["tokens_per_s"] for p in plans]
    assert tps == sorted(tps, reverse=True)
    assert doc["defaults_used"]["model"] == "llama3-70b" and doc["defaults_used"]["gpus"] == 1024
    for p in plans:
        assert p["tp"] * p["pp"] * p["dp"] * p["cp"] == 1024 and p["tp"] <= 8
        assert 0 < p["mfu"] < 1 and p["fits_memory"] and p["memory_gb_per_gpu"] <= doc["stats"]["memory_capacity_gb"]
        assert sum(p["breakdown"].values()) == pytest.approx(p["step_time_s"], rel=0.02)
    assert doc["runner_up"]["component"] in plans[1]["breakdown"]


def test_memory_pruning_matches_the_engine(catalog):
    model = resolve_model("llama3-70b")
    system = catalog.system("hgx-h100")
    ev = AnalyticalEvaluator(model=model, system=system, fabric=catalog.fabric("ib-ndr-400g"), num_gpus=256,
                             global_batch=256, seq_len=8192, catalog=catalog)
    space = structural_space(ModelShape.of(model), num_gpus=256, domain_size=8, global_batch=256, seq_len=8192)
    full = ev.evaluate(space)
    np.testing.assert_allclose(ev.memory_bytes(space), full.metrics["memory_gb_per_gpu"] * 1e9, rtol=1e-9)
    cap = ev.memory_capacity_bytes
    # the driver-reported 81,559 MiB of an H100 less the 5 % fragmentation reserve, not the nominal 80e9
    assert cap == pytest.approx(81559 * 2**20 * 0.95)
    # the fit keeps the default 2 GB margin beyond the modelled peak (workload.rules.memory_fits)
    assert ev.memory_margin_gb == 2.0
    np.testing.assert_array_equal(full.fits_memory, full.metrics["memory_gb_per_gpu"] * 1e9 <= cap - 2e9)
    assert 0 < full.fits_memory.sum() < full.fits_memory.size  # the pruning has something to do


def test_too_big_model_names_the_smallest_gpu_count(catalog):
    req = dict(model="llama3-405b", system="hgx-h100", global_batch=512, seq_len=8192, top_k=1)
    with pytest.raises(InputError) as exc:
        plan(PlanRequest(num_gpus=16, **req), catalog)
    text = exc.value.render()
    assert "does not fit on 16" in text and "use --gpus" in text
    need = int(text.split("use --gpus ")[1].split()[0])
    assert plan(PlanRequest(num_gpus=need, **req), catalog).plans
    with pytest.raises(InputError):
        plan(PlanRequest(num_gpus=need - 8, **req), catalog)
    r = ct_proc("plan", "--model", "llama3-405b", "--gpus", "16")
    assert r.returncode == 2 and "use --gpus" in r.stderr and "Traceback" not in r.stderr


def _published(catalog, *, model, system, gpus, batch, seq, fabric, tp, pp):
    """(ranked plans, best plan with the published TP/PP/CP1 layout) from one search."""
    full = plan(PlanRequest(model=model, system=system, num_gpus=gpus, global_batch=batch, seq_len=seq,
                            fabric=fabric, top_k=3), catalog)
    pub = plan(PlanRequest(model=model, system=system, num_gpus=gpus, global_batch=batch, seq_len=seq, fabric=fabric,
                           top_k=1, options=SpaceOptions(fixed={"tp": (tp,), "pp": (pp,), "cp": (1,)})), catalog)
    return full, pub.plans[0]


def test_llama3_405b_published_layout_is_feasible_and_searched(catalog):
    full, pub = _published(catalog, model="llama3-405b", system="hgx-h100", gpus=16384, batch=2048, seq=8192,
                           fabric="roce-400g", tp=8, pp=16)
    assert pub["dp"] == 128 and pub["fits_memory"]
    best = full.plans[0]
    assert best["tokens_per_s"] >= pub["tokens_per_s"]  # the search never misses a better plan it was shown
    assert full.stats["candidates"] > 10_000


def test_gpt3_175b_published_layout_is_near_the_top(catalog):
    full, pub = _published(catalog, model="gpt3-175b", system="dgx-a100", gpus=1024, batch=1536, seq=2048,
                           fabric="ib-hdr-200g", tp=8, pp=8)
    top3 = full.plans[:3]
    within = [p for p in top3 if abs(p["tokens_per_s"] / pub["tokens_per_s"] - 1) <= 0.03]
    assert within or any((p["tp"], p["pp"], p["cp"]) == (8, 8, 1) for p in top3)


def test_event_rerank(catalog):
    rep = plan(PlanRequest(model="llama3-8b", system="hgx-h100", num_gpus=64, global_batch=128, seq_len=4096,
                           top_k=3, engine="event"), catalog)
    assert rep.engine == "event" and len(rep.plans) == 3
    for p in rep.plans:
        assert "analytical_step_time_s" in p and p["step_time_s"] > 0
    timed = [p["tokens_per_s"] for p in rep.plans if "event_error" not in p]
    assert timed == sorted(timed, reverse=True)


def test_sweep_cli_real_engine(tmp_path, ct):
    spec = tmp_path / "s.yaml"
    spec.write_text("name: t\ndesigns: {system: hgx-h100, domains: [2, 4], oversubscription: [1, 2]}\n"
                    "models: llama3-8b\nglobal_batch: 64\nseq_len: 4096\n")
    db = tmp_path / "r.db"
    r = ct("sweep", str(spec), "--db", str(db), "--workers", "1", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    rows = doc["rows"]
    assert len(rows) == 4 and doc["computed_chunks"] == 4 and all(x["feasible"] for x in rows)
    assert all(x["cost_usd"] > 0 and x["power_w"] > 0 for x in rows)
    by = {(x["num_gpus"], x["oversubscription"]): x for x in rows}
    # 2:1 oversubscription: cheaper network, never faster
    for n in (16, 32):
        assert by[(n, 2.0)]["tokens_per_s"] <= by[(n, 1.0)]["tokens_per_s"] * (1 + 1e-9)
        assert by[(n, 2.0)]["cost_usd"] <= by[(n, 1.0)]["cost_usd"]
    assert doc["pareto"]
    again = json.loads(ct("sweep", str(spec), "--db", str(db), "--json").stdout)
    assert again["computed_chunks"] == 0 and again["rows"] == rows

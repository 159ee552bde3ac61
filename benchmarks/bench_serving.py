"""Serving twin: speed figures and the calibration / leave-one-source-out check.

    python benchmarks/bench_serving.py            # speed: serve estimate, 10k-request simulation, serve plan
    python benchmarks/bench_serving.py --fit      # refit the engine constants on serving.csv, print them
    python benchmarks/bench_serving.py --loso     # leave-one-source-out MAPE (= clustertwin validate serving --cv source_group)

Targets (issue 17): one offline `serve estimate` < 50 ms; a server simulation of 10,000 requests < 5 s;
`serve plan` for DeepSeek-V3 on one GB200 NVL72 rack < 30 s.

Fit procedure (docs/serving.md "Calibration"): the fitted constants are the engines' host overhead per
pass (``step_overhead_ms``, one per engine) and the Hopper serving GEMM scale (``chips.*.gemm_mamf_scale``
for h100-sxm/h200/h800). Each is chosen on a grid so that the geometric-mean predicted/measured ratio over
the throughput rows (scenario_kind offline / prefill / decode) that depend on it has the smallest mean
absolute log error (Hopper scale first, capped at 1.0 = the measured MAPE; then each engine); nothing
else is tuned. ``--loso`` repeats the fit with one source group held out and predicts that group's rows.
"""

from __future__ import annotations

import argparse
import csv
import math
import time
from importlib import resources

import numpy as np


def _rows() -> list[dict]:
    path = resources.files("clustertwin") / "data" / "validation" / "serving.csv"
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _best(fn, reps: int = 5) -> float:
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def speed() -> None:
    from clustertwin.catalog import load_catalog
    from clustertwin.serving import Deployment, Workload, build_instance, get_engine
    from clustertwin.serving.service import ServeRequest, estimate, plan
    from clustertwin.serving.simulate import simulate
    from clustertwin.workload.model import get_model

    cat = load_catalog()
    req = ServeRequest(model="llama3.3-70b", system="hgx-h100", gpus=8, tp=2, input_len=1000, output_len=1000,
                       engine="trtllm")
    estimate(req, catalog=cat)  # warm caches (catalog, efficiency tables)
    t = _best(lambda: estimate(req, catalog=cat), 20)
    print(f"serve estimate (offline, analytical, llama3.3-70b tp2 on hgx-h100): {t * 1e3:7.2f} ms   target < 50 ms")
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "clustertwin", "serve", "estimate", "--model", "llama3.3-70b", "--system", "hgx-h100",
           "--gpus", "8", "--tp", "2", "--input-len", "1000", "--output-len", "1000", "--engine", "trtllm", "--json"]
    t = _best(lambda: subprocess.run(cmd, check=True, capture_output=True), 3)
    print(f"clustertwin serve estimate ... --json as a fresh process (Python start + imports included): {t * 1e3:7.0f} ms")
    moe = ServeRequest(model="deepseek-v3", system="gb200-nvl72", gpus=72, tp=72, ep=72, dp_attention=True,
                       input_len=2000, output_len=1000, engine="sglang")
    t = _best(lambda: estimate(moe, catalog=cat), 10)
    print(f"serve estimate (offline, analytical, deepseek-v3 ep72 dp-attention on gb200-nvl72): {t * 1e3:7.2f} ms")

    s = cat.system("hgx-h100")
    inst = build_instance(get_model("llama3.1-8b"), s, cat.fabric(s.default_scaleout),
                          Deployment(tp=1, weights_dtype="fp8", kv_dtype="fp8", max_batch=256), get_engine("trtllm"),
                          catalog=cat)
    wl = Workload(input_len=800, output_len=200, scenario="server", input_cv=0.8, output_cv=0.8)
    t0 = time.perf_counter()
    sim = simulate(inst, wl, qps=40.0, requests=10_000, seed=0)
    t = time.perf_counter() - t0
    print(f"server simulation, 10,000 requests (llama3.1-8b, Poisson 40 req/s, {sim.steps} passes): {t:6.2f} s   target < 5 s"
          f"  [TTFT p99 {sim.ttft_s['p99']:.3f} s, TPOT p99 {sim.tpot_s['p99'] * 1e3:.1f} ms]")

    t0 = time.perf_counter()
    res = plan(model="deepseek-v3", system="gb200-nvl72", gpus=72, input_len=2000, output_len=1000, ttft_slo_s=2.0,
               tpot_slo_s=0.08, engine="sglang", catalog=cat)
    t = time.perf_counter() - t0
    print(f"serve plan deepseek-v3 on one gb200-nvl72 rack ({res['candidates']} candidates, {res['layouts']} layouts, "
          f"{len(res['goodput'])} simulated): {t:6.2f} s   target < 30 s")


def _mape(rows, pred) -> float:
    errs = [abs(pred[r["id"]] / float(r["target_value"]) - 1) * 100 for r in rows if math.isfinite(pred.get(r["id"], math.nan))]
    return float(np.mean(errs)) if errs else math.nan


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fit", action="store_true")
    ap.add_argument("--loso", action="store_true")
    ap.add_argument("--group", default="", help="--loso: print only the held-out groups containing this text")
    args = ap.parse_args()
    if not (args.fit or args.loso):
        speed()
        return
    from clustertwin.catalog import load_catalog

    cat = load_catalog()
    rows = _rows()
    from clustertwin.serving.calibration import (
        THROUGHPUT_KINDS,
        cross_validate,
        fit,
        predict_rows,
        restored_constants,
    )

    if args.fit:
        thr = [r for r in rows if r["scenario_kind"] in THROUGHPUT_KINDS]
        print(f"shipped constants: throughput rows MAPE {_mape(thr, predict_rows(thr, cat)):.1f} %")
        with restored_constants():
            over, hop, bw = fit(rows, cat)
            print("fitted step_overhead_ms per engine:", over, " Hopper gemm_mamf_scale:", hop,
                  " Blackwell gemm_mamf_scale per engine:", bw)
            pred = predict_rows(rows, cat)
            print(f"MAPE all rows {_mape(rows, pred):.1f} %, throughput rows {_mape(thr, pred):.1f} %")
    if args.loso:
        rep = cross_validate(rows, "source_group", catalog=cat)
        for fo in rep.folds:
            if args.group and args.group not in fo["fold"]:
                continue
            print(f"held out {fo['fold']!r:55s} n={fo['n']:2d}  MAPE {fo['mape_pct']:6.1f} %  (refit: {fo['values']})")
        print(f"leave-one-source-out MAPE (row-weighted): {rep.mape_pct:.1f} %  (in sample {rep.in_sample_mape_pct:.1f} %)")


if __name__ == "__main__":
    main()

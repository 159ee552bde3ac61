"""Speed of the analytical step-time estimate.

Prints, for one in-process ``estimate()`` of a 16,384-GPU Llama 3 405B plan on hgx-h100 / roce-400g:

* cold: the first call in the process (nothing priced yet), and the per-call time with every
  per-process table emptied before every call (``analytical.clear_tables``: every collective and GEMM
  priced by the model, stage layouts and parameters computed);
* warm, distinct plans: 2,000 different layouts (TP, PP, VPP, CP, DP, micro-batch, ZeRO, recompute,
  global batch), each estimated once after a warm-up on *other* layouts, so a memo of identical calls is
  not what is timed; with the share of collectives the per-machine table already held;
* warm, distinct DeepSeek-V3 layouts (MoE, MLA, expert parallelism: more cost components per call);
* warm, one plan repeated (the old figure, for comparison);
* the same distinct layouts through numpy 0-d arrays (``analytical.SCALAR = False``, the path ``estimate``
  took before it ran one plan on plain Python numbers), and how many plans fell back to numpy;
* ``estimate_batch`` over 100,000 layouts, and the CLI start-up time.

Wall time and CPU time (``time.process_time``) are both printed: on a shared machine wall time
includes other processes. Run: ``python benchmarks/bench_estimate.py [--plans 2000]``. Target (issue 15):
<= 0.2 ms per call.
"""

from __future__ import annotations

import argparse
import inspect
import os
import statistics
import subprocess
import sys
import time

import numpy as np

from clustertwin.catalog import load_catalog
from clustertwin.errors import InputError
from clustertwin.planner.space import SCHEDULES, ModelShape, SpaceOptions, structural_space
from clustertwin.sim import analytical, comm, estimate, estimate_batch
from clustertwin.workload import get_model, make_plan
from clustertwin.workload.plan import RECOMPUTE, check_plan

GPUS = 16384
_MAKE_PLAN_ARGS = set(inspect.signature(make_plan).parameters)


def _plans(model, system, k: int, seed: int) -> list:
    """k distinct valid layouts on 16,384 GPUs over several global batches (shuffled)."""
    rng = np.random.default_rng(seed)
    spaces, picks, seen = {}, [], set()
    for gb in (1024, 2048, 4096):
        sp = spaces[gb] = structural_space(ModelShape.of(model), num_gpus=GPUS, domain_size=system.devices_per_domain,
                                           global_batch=gb, seq_len=8192,
                                           options=SpaceOptions(micro_batches=(1, 2, 4), max_vpp=8, max_cp=8))
        picks += [(gb, i) for i in range(len(sp["tp"]))]
    plans = []
    for j in rng.permutation(len(picks)):
        gb, i = picks[j]
        row = {a: int(spaces[gb][a][i]) for a in spaces[gb]}
        key = (gb, *sorted(row.items()))
        if key in seen:
            continue
        seen.add(key)
        kw = {a: v for a, v in row.items() if a in _MAKE_PLAN_ARGS and a not in ("recompute", "dp")}
        if "schedule" in row:
            kw["pipeline_schedule"] = SCHEDULES[row["schedule"]]
        try:
            p = make_plan(gpus=GPUS, global_batch=gb, seq_len=8192, recompute=RECOMPUTE[row["recompute"]], **kw)
            check_plan(model, p)  # the stack's limits (the default stack runs 1F1B only)
        except InputError:
            continue
        plans.append(p)
        if len(plans) >= k:
            break
    return plans


def _time(fn, items) -> tuple[float, float, list[float]]:
    per = []
    w0, c0 = time.perf_counter(), time.process_time()
    for x in items:
        t = time.perf_counter()
        fn(x)
        per.append(time.perf_counter() - t)
    return (time.perf_counter() - w0) / len(items), (time.process_time() - c0) / len(items), per


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--plans", type=int, default=2000)
    args = ap.parse_args()
    print(f"machine: {os.cpu_count()} core(s); load average {os.getloadavg()[0]:.1f}")
    cat = load_catalog()
    model = get_model("llama3-405b")
    system = cat.system("hgx-h100")
    fabric = cat.fabric("roce-400g")
    table4 = make_plan(gpus=GPUS, tp=8, pp=16, vpp=4, global_batch=2048, seq_len=8192, zero=2)

    def one(p):
        return estimate(model, system, fabric, p, catalog=cat)

    t = time.perf_counter()
    one(table4)
    print(f"estimate() cold, first call in the process: {(time.perf_counter() - t) * 1e3:.2f} ms")

    plans = _plans(model, system, 2 * args.plans, seed=0)
    warmup, timed = plans[: len(plans) // 2], plans[len(plans) // 2:]
    print(f"{len(timed):,} distinct timed layouts (+{len(warmup):,} other layouts for the warm-up)")

    def cold(p):
        analytical.clear_tables()  # collectives, GEMMs, stage layouts and parameters, FLOPs, assumptions
        one(p)

    w, c, _ = _time(cold, timed[:300])
    print(f"estimate() cold, every per-process table emptied before each call: {w * 1e3:.3f} ms wall, "
          f"{c * 1e3:.3f} ms CPU")

    analytical.clear_tables()
    for p in warmup:
        one(p)
    calls = {"n": 0, "hit": 0}
    scalar = comm._scalar

    def counting(op, size, n, r, hw):
        calls["n"] += 1
        calls["hit"] += (op, float(size), float(n), float(r)) in comm._table(hw)
        return scalar(op, size, n, r, hw)

    comm._scalar = counting
    one(timed[0])
    comm._scalar = scalar
    hits = calls["hit"] / max(calls["n"], 1)
    for attempt in range(3):
        w, c, per = _time(one, timed)
        print(f"estimate() warm, {len(timed):,} distinct layouts, run {attempt + 1}: {w * 1e3:.3f} ms wall "
              f"(median {statistics.median(per) * 1e3:.3f}), {c * 1e3:.3f} ms CPU per call (target <= 0.2 ms)")
    calls = {"n": 0, "hit": 0}
    comm._scalar = counting
    for p in timed[:200]:
        one(p)
    comm._scalar = scalar
    print(f"  collective table hits on these layouts: {calls['hit'] / max(calls['n'], 1):.0%} "
          f"(first timed layout: {hits:.0%}; misses are priced by the collective model)")
    moe = get_model("deepseek-v3")  # MoE + MLA + EP: more components per estimate
    moe_plans = _plans(moe, system, 1000, seed=1)
    for p in moe_plans[:500]:
        estimate(moe, system, fabric, p, catalog=cat)
    w, c, per = _time(lambda p: estimate(moe, system, fabric, p, catalog=cat), moe_plans[500:])
    print(f"estimate() warm, DeepSeek-V3 (MoE, MLA, EP), {len(moe_plans[500:])} distinct layouts: {w * 1e3:.3f} ms wall "
          f"(median {statistics.median(per) * 1e3:.3f}), {c * 1e3:.3f} ms CPU per call")
    w, c, _ = _time(one, [table4] * 500)
    print(f"estimate() warm, one plan repeated: {w * 1e3:.3f} ms wall, {c * 1e3:.3f} ms CPU per call")
    print(f"  plans rerun through numpy (division by zero / overflow on plain numbers): "
          f"{analytical.SCALAR_FALLBACKS[0]}")
    analytical.SCALAR = False
    w, c, per = _time(one, timed[:500])
    analytical.SCALAR = True
    print(f"estimate() warm through numpy 0-d arrays (SCALAR = False), {len(timed[:500])} of the layouts: "
          f"{w * 1e3:.3f} ms wall (median {statistics.median(per) * 1e3:.3f}), {c * 1e3:.3f} ms CPU per call")

    rng = np.random.default_rng(0)
    k = 100_000
    tp = rng.choice([1, 2, 4, 8], k)
    pp = rng.choice([1, 2, 4, 8, 16], k)
    cp = rng.choice([1, 2], k)
    dp = GPUS // (tp * pp * cp)
    batch = {"tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": 1, "vpp": rng.choice([1, 2], k),
             "micro_batch": rng.choice([1, 2], k), "recompute": rng.choice([0, 1, 2], k),
             "zero": rng.choice([0, 1, 2, 3], k)}
    estimate_batch(model, system, fabric, {key: v[:10] if hasattr(v, "__len__") else v for key, v in batch.items()},
                   global_batch=4096, seq_len=8192, catalog=cat)
    t0, c0 = time.perf_counter(), time.process_time()
    out = estimate_batch(model, system, fabric, batch, global_batch=4096, seq_len=8192, catalog=cat)
    dt, dc = time.perf_counter() - t0, time.process_time() - c0
    print(f"estimate_batch() {k:,} plans: {dt:.3f} s wall, {dc:.3f} s CPU ({k / dc:,.0f} plans/s of CPU; "
          f"{int(out['valid'].sum()):,} valid)")

    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "clustertwin", "--help"], capture_output=True, check=True)
    print(f"CLI start-up (clustertwin --help): {time.perf_counter() - t0:.2f} s")


if __name__ == "__main__":
    main()

"""Speed of the event-driven step simulator (issue 5 targets, one core):

* Llama 3 405B on 16,384 H100 (TP8, CP1, PP16, DP128, 16 micro-batches per pipeline): < 2 s per step;
* GPT-3 175B on 1,024 A100 (TP8, PP8, DP16): < 0.5 s per step.

Prints the wall time of one simulated step (best of ``--repeat``, graph build + engine + analysis),
the ops and events simulated and the events per second. Run: ``python benchmarks/bench_event.py``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core: numpy must not spread work over threads
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import time  # noqa: E402

from clustertwin.catalog import load_catalog  # noqa: E402
from clustertwin.sim.event import simulate  # noqa: E402
from clustertwin.workload.model import get_model  # noqa: E402
from clustertwin.workload.plan import make_plan  # noqa: E402

CASES = [
    # name, model, system, fabric, plan kwargs, target seconds
    ("llama3-405b 16384xH100 TP8 PP16 DP128 m=16 (1F1B)", "llama3-405b", "hgx-h100", "roce-400g",
     dict(gpus=16384, tp=8, pp=16, cp=1, micro_batch=1, global_batch=2048, seq_len=8192, zero=1), 2.0),
    ("llama3-405b 16384xH100 TP8 PP16 DP128 m=16 (interleaved v=4)", "llama3-405b", "hgx-h100", "roce-400g",
     dict(gpus=16384, tp=8, pp=16, cp=1, vpp=4, micro_batch=1, global_batch=2048, seq_len=8192, zero=1), 2.0),
    ("gpt3-175b 1024xA100 TP8 PP8 DP16 m=96 (1F1B)", "gpt3-175b", "dgx-a100", "ib-hdr-200g",
     dict(gpus=1024, tp=8, pp=8, micro_batch=1, global_batch=1536, seq_len=2048, zero=1), 0.5),
    ("gpt3-175b 1024xA100 TP8 PP8 DP16 m=96 (interleaved v=3)", "gpt3-175b", "dgx-a100", "ib-hdr-200g",
     dict(gpus=1024, tp=8, pp=8, vpp=3, micro_batch=1, global_batch=1536, seq_len=2048, zero=1), 0.5),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    cat = load_catalog()
    print(f"{'case':62s} {'wall s':>8s} {'target':>7s} {'ops':>8s} {'events':>8s} {'events/s':>10s} {'step s':>8s}")
    ok = True
    for name, model_id, sys_id, fab_id, kw, target in CASES:
        model = get_model(model_id)
        system = cat.system(sys_id)
        fabric = cat.fabric(fab_id)
        plan = make_plan(**kw)
        best = float("inf")
        res = None
        for _ in range(max(1, args.repeat)):
            t0 = time.perf_counter()
            res = simulate(model, system, fabric, plan, catalog=cat)
            best = min(best, time.perf_counter() - t0)
        assert res is not None
        ok &= best < target
        print(f"{name:62s} {best:8.3f} {target:7.2f} {res.num_ops:8d} {res.events:8d} "
              f"{res.events / best:10.0f} {res.step_time_s:8.3f}")
    print("all targets met" if ok else "TARGET MISSED")


if __name__ == "__main__":
    main()

"""Plan MFU from 1K to 100K GPUs (issue #15): is the best plan's efficiency steady as the cluster grows,
and how does DeepSeek-V3 on 2,048 H800 compare with DeepSeek's own training throughput?

    python benchmarks/bench_plan_scale.py [--sizes 1024,2048,...] [--skip-deepseek-2048]

Scale curves: the planner's best plan at each size, the batch growing with the cluster: Llama 3 405B on
hgx-h100, BF16, seq 8192, global batch ~ GPUs/4 sequences; DeepSeek-V3 on dgx-h800, FP8, seq 4096, global
batch ~ GPUs/2 sequences; the batch is the power of two or 3 x power of two nearest to that (a power of two
for the power-of-two sizes; at 100,000 GPUs, of which 98,304 = 3 x 2^15 are used, 24,576 and 49,152, so
that the data-parallel degree divides it). Both on the ib-ndr-400g-2plane fabric (buildable at 100K),
default --max-idle-gpus (2 %). The "step" column is the relative MFU change from the previous size.
Target: DeepSeek-V3 MFU falls by no more than 10 % relative in any 2x step from 1K to 65K.

DeepSeek-V3 on 2,048 H800: DeepSeek-V3 Technical Report (arXiv:2412.19437, Introduction and Table 1):
"180K H800 GPU hours" per trillion tokens, "3.7 days on our cluster with 2048 H800 GPUs", i.e.
1e12 / (180e3 * 3600) = 1,543 tokens/s per GPU, 3.16M tokens/s on 2,048 GPUs. That is wall-clock GPU
time of the whole pre-training (any non-step time included). Planned at the final global batch of
15,360 x 4,096 tokens (Sec. 4.2), FP8, with the default stack (megatron-core) and with DeepSeek's own
(hai-llm: DualPipe, ZeRO-1); also DeepSeek's published layout (PP16 EP64 ZeRO-1, no TP) estimated.
Target: within 15 %.
"""

from __future__ import annotations

import argparse
import time

from clustertwin import load_catalog
from clustertwin.errors import InputError
from clustertwin.planner.planning import PlanRequest, plan
from clustertwin.planner.search import layout_label

DEEPSEEK_TOKENS_PER_S_2048 = 1e12 / (180e3 * 3600) * 2048  # arXiv:2412.19437 Table 1 / Introduction
SIZES = (1024, 2048, 4096, 8192, 16384, 32768, 65536, 100000)


def batch_near(x: float) -> int:
    """The power of two or 3 x power of two nearest to ``x`` in ratio (1,024 -> 1,024; 25,000 -> 24,576)."""
    cands = [c for k in range(1, 40) for c in (2 ** k, 3 * 2 ** (k - 1))]
    return min(cands, key=lambda c: max(c / x, x / c))


def best(cat, model, system, gpus, gb, seq, dtype, stack="megatron-core", fabric="ib-ndr-400g-2plane"):
    req = PlanRequest(model=model, system=system, num_gpus=gpus, global_batch=gb, seq_len=seq, dtype=dtype,
                      fabric=fabric, top_k=1, stack=stack)
    rep = plan(req, cat)
    return rep.plans[0], rep.request


def curve(cat, name, model, system, seq, dtype, per_gpu, sizes):
    print(f"\n{name}: {system}, {dtype}, seq {seq}, global batch ~ GPUs x {per_gpu} (power of two or 3 x power of two)")
    print(f"{'GPUs':>8} {'used':>8} {'batch':>7} {'layout':<46} {'MFU':>6} {'step':>7} {'tokens/s':>12} {'s':>5}")
    prev = None
    worst = 0.0
    for n in sizes:
        gb = batch_near(n * per_gpu)
        t0 = time.perf_counter()
        try:
            p, r = best(cat, model, system, n, gb, seq, dtype)
        except InputError as exc:
            print(f"{n:>8} no plan: {exc.message[:90]}")
            prev = None
            continue
        mfu = p["mfu"]
        step = "" if prev is None else f"{mfu / prev - 1:+.1%}"
        if prev is not None and n <= 65536:
            worst = min(worst, mfu / prev - 1)
        print(f"{n:>8,} {r['gpus_used']:>8,} {gb:>7,} {layout_label(p):<46} {100 * mfu:5.1f}% {step:>7} "
              f"{p['tokens_per_s']:>12,.0f} {time.perf_counter() - t0:5.1f}", flush=True)
        prev = mfu
    print(f"worst 2x step up to 65,536 GPUs: {worst:+.1%}")
    return worst


def deepseek_2048(cat):
    print(f"\nDeepSeek-V3 on 2,048 H800 (dgx-h800, ib-ndr-400g), FP8, 15,360 x 4,096 tokens; DeepSeek's published "
          f"rate {DEEPSEEK_TOKENS_PER_S_2048 / 1e6:.2f}M tokens/s (arXiv:2412.19437)")
    for stack in ("megatron-core", "hai-llm"):
        p, _ = best(cat, "deepseek-v3", "dgx-h800", 2048, 15360, 4096, "fp8", stack=stack, fabric="ib-ndr-400g")
        print(f"  plan --stack {stack:<14} {layout_label(p):<44} {p['tokens_per_s'] / 1e6:5.2f}M tokens/s "
              f"= {p['tokens_per_s'] / DEEPSEEK_TOKENS_PER_S_2048:.2f}x published, MFU {100 * p['mfu']:.1f}%, "
              f"{p['memory_gb_per_gpu']:.0f} GB")
    from clustertwin import api

    sc = api.build_scenario(model="deepseek-v3", system="dgx-h800", gpus=2048, tp=1, pp=16, ep=64, micro_batch=1,
                            global_batch=15360, seq_len=4096, dtype="fp8", zero=1, recompute="selective",
                            uneven_pipeline=True, pipeline_schedule="dualpipe", stack="hai-llm", catalog=cat)
    r = api.simulate(sc)
    print(f"  DeepSeek's layout TP1 PP16 EP64 DP128 ZeRO-1 DualPipe (estimate): {r.tokens_per_s / 1e6:5.2f}M tokens/s "
          f"= {r.tokens_per_s / DEEPSEEK_TOKENS_PER_S_2048:.2f}x published, {r.memory_gb_per_gpu:.0f} GB per GPU"
          f" ({'fits' if r.fits_memory else 'does NOT fit'} in the memory model)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--skip-deepseek-2048", action="store_true")
    ap.add_argument("--only", choices=("llama", "deepseek"), default=None)
    a = ap.parse_args()
    sizes = tuple(int(x) for x in a.sizes.split(","))
    cat = load_catalog()
    if not a.skip_deepseek_2048:
        deepseek_2048(cat)
    if a.only in (None, "llama"):
        curve(cat, "Llama 3 405B", "llama3-405b", "hgx-h100", 8192, "bf16", 0.25, sizes)
    if a.only in (None, "deepseek"):
        curve(cat, "DeepSeek-V3", "deepseek-v3", "dgx-h800", 4096, "fp8", 0.5, sizes)


if __name__ == "__main__":
    main()

"""The search space against a naive nested-loop enumeration of the same rules."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from clustertwin.planner.space import (
    AXES,
    RECOMPUTE,
    SCHEDULES,
    ModelShape,
    SpaceOptions,
    divisors,
    structural_space,
)


def naive(shape: ModelShape, n: int, d: int, gb: int, seq: int, o: SpaceOptions) -> set[tuple]:
    """Reference: the rules of space.py written as plain loops (slow, obviously right)."""
    out = set()
    L, A, G = shape.num_layers, shape.num_attention_heads, shape.num_kv_heads
    for tp, pp, cp in itertools.product(range(1, n + 1), repeat=3):
        if n % (tp * pp * cp):
            continue
        dp = n // (tp * pp * cp)
        if A % tp or (G % tp and tp % G) or (shape.ffn_hidden_size and shape.ffn_hidden_size % tp):
            continue
        if not o.tp_across_domains and d % tp:
            continue
        if pp > min(L, o.max_pp) or cp > o.max_cp or (cp > 1 and seq % (2 * cp)):
            continue
        eps = [e for e in range(1, n + 1) if shape.num_experts % e == 0 and (o.ep_across_domains or d % e == 0)
               and n % e == 0] if shape.is_moe else [1]
        for v, ep, mb, z, rc in itertools.product(range(1, o.max_vpp + 1), eps, o.micro_batches, o.zero_stages,
                                                  o.recompute):
            c = pp * v
            # Megatron's embedding/loss layer slots: pp*vpp may divide L + 2 (chunks of one slot included,
            # NVIDIA's 405B recipe: 126 + 2 = 16 x 8), the plan rule of workload/rules.py; with uneven
            # stages any pp*vpp <= L, interleaved with a power-of-two vpp only and uniform interior virtual
            # stages (ceil(L/c) layers each; the first and last lighter by at most 2 ceil(L/c) - 1)
            even = L % c == 0 or (o.uneven_pipeline and pp > 1 and (L + 2) % c == 0)
            per = -(-L // c)
            uniform = v == 1 or per * c - L <= 2 * per - 1
            if not even and not (o.uneven_pipeline and c <= L and (v & (v - 1)) == 0 and uniform):
                continue
            if v > 1 and pp == 1:
                continue
            if gb % (mb * dp):
                continue
            m = gb // (mb * dp)
            if v > 1 and m % pp:
                continue
            if z > 0 and dp * cp == 1:
                continue
            for etp in sorted({1, tp} if (shape.is_moe and o.expert_tp) else {1}):
                if (tp * cp * dp) % (ep * etp):
                    continue
                for sc, name in enumerate(SCHEDULES):
                    if name not in o.schedules:
                        continue
                    if sc and (pp == 1 or v > 1):
                        continue
                    if name == "dualpipe" and (pp % 2 or m % 2 or m < 2 * pp):
                        continue
                    out.add((tp, pp, dp, cp, ep, v, z, mb, RECOMPUTE.index(rc), etp, sc))
    return out


def as_set(s):
    return set(zip(*(s[a].tolist() for a in AXES), strict=True))


@settings(max_examples=40, deadline=None)
@given(
    layers=st.sampled_from([4, 6, 12, 14, 30]),
    heads=st.sampled_from([4, 8, 12, 16]),
    kv=st.sampled_from([1, 2, 4]),
    experts=st.sampled_from([0, 4, 8]),
    n=st.integers(1, 32),
    d=st.sampled_from([1, 2, 4, 8]),
    gb=st.sampled_from([1, 8, 12, 32, 64]),
    seq=st.sampled_from([256, 2048, 4100]),
    cross=st.booleans(),
)
def test_space_matches_naive_enumeration(layers, heads, kv, experts, n, d, gb, seq, cross):
    shape = ModelShape(name="m", num_layers=layers, num_attention_heads=heads, num_kv_heads=kv,
                       num_experts=experts, ffn_hidden_size=heads * 96)
    opts = SpaceOptions(max_vpp=4, max_cp=8, tp_across_domains=cross, ep_across_domains=cross)
    got = structural_space(shape, num_gpus=n, domain_size=d, global_batch=gb, seq_len=seq, options=opts)
    assert as_set(got) == naive(shape, n, d, gb, seq, opts)
    assert len(as_set(got)) == got["tp"].size  # no duplicates
    assert all(v.dtype == np.int64 for v in got.values())


def test_llama3_405b_published_layout_is_in_the_space():
    # 126 layers on PP16: first and last stage hold one layer fewer (arXiv:2407.21783 Sec. 3.3.2)
    shape = ModelShape(name="llama3-405b", num_layers=126, num_attention_heads=128, num_kv_heads=8,
                       ffn_hidden_size=53248)
    s = structural_space(shape, num_gpus=16384, domain_size=8, global_batch=2048, seq_len=8192)
    pub = (s["tp"] == 8) & (s["pp"] == 16) & (s["dp"] == 128) & (s["cp"] == 1) & (s["micro_batch"] == 1)
    assert pub.any()
    assert (s["tp"] <= 8).all()  # TP stays inside the 8-GPU NVLink domain
    strict = structural_space(shape, num_gpus=16384, domain_size=8, global_batch=2048, seq_len=8192,
                              options=SpaceOptions(uneven_pipeline=False))
    assert not ((strict["pp"] == 16) & (strict["tp"] == 8) & (strict["cp"] == 1)).any()


def test_fixed_axes_and_empty_space():
    shape = ModelShape(name="m", num_layers=32, num_attention_heads=32, num_kv_heads=8)
    s = structural_space(shape, num_gpus=64, domain_size=8, global_batch=256, seq_len=4096,
                         options=SpaceOptions(fixed={"tp": (4,), "pp": (2,)}))
    assert s["tp"].size and set(s["tp"].tolist()) == {4} and set(s["pp"].tolist()) == {2}
    assert set(s["dp"].tolist()) <= {8, 4, 2, 1}
    # 7 GPUs, 32 heads, 32 layers, batch 256: only PP7 with uneven stages; 37 > 32 layers: nothing
    e = structural_space(shape, num_gpus=7, domain_size=8, global_batch=256, seq_len=4096)
    assert set(e["pp"].tolist()) == {7}
    assert structural_space(shape, num_gpus=7, domain_size=8, global_batch=256, seq_len=4096,
                            options=SpaceOptions(uneven_pipeline=False))["tp"].size == 0
    assert structural_space(shape, num_gpus=37, domain_size=8, global_batch=256, seq_len=4096)["tp"].size == 0


def test_divisors():
    assert divisors(12).tolist() == [1, 2, 3, 4, 6, 12]
    assert divisors(1).tolist() == [1]
    assert divisors(16384).tolist() == [2**i for i in range(15)]


def test_schedules_and_expert_tp_follow_the_stack():
    from clustertwin.planner.space import with_stack
    from clustertwin.workload.stacks import get_stack

    moe = ModelShape(name="moe", num_layers=61, num_attention_heads=128, num_kv_heads=128, num_experts=256, mla=True)
    kw = dict(num_gpus=256, domain_size=8, global_batch=1024, seq_len=4096)
    mc = structural_space(moe, options=with_stack(SpaceOptions(), get_stack("megatron-core")), **kw)
    hai = structural_space(moe, options=with_stack(SpaceOptions(), get_stack("hai-llm")), **kw)
    assert set(mc["schedule"].tolist()) == {0}
    dual = hai["schedule"] == SCHEDULES.index("dualpipe")
    assert dual.any() and (hai["pp"][dual] % 2 == 0).all() and (hai["vpp"][dual] == 1).all()
    # uneven stages: 61 layers on PP16 (neither 61 nor 63 divisible by 16)
    assert ((mc["pp"] == 16) & (mc["vpp"] == 1)).any()
    # expert TP: 1 or tp, and only for MoE
    assert set(np.unique(mc["etp"][mc["tp"] == 4]).tolist()) == {1, 4}
    dense = ModelShape(name="d", num_layers=32, num_attention_heads=32, num_kv_heads=8)
    assert set(structural_space(dense, **kw)["etp"].tolist()) == {1}


def test_uneven_interleaving_needs_uniform_interior_stages():
    """An uneven layout interleaves only when every virtual stage but the first and the last can hold the
    same whole number of layers (NVIDIA's DeepSeek-V3 layouts): 61 layers on PP8 V4 (31 stages of 2, the
    ends lighter by 3) and PP4 V2 stay; 94 layers on PP8 V8 (34 of 64 chunks one layer short) and 36 on
    PP4 V4 go. Even and embedding/loss-slot layouts (94 + 2 = 96 on PP8 V4 or V6) are not affected, nor a
    vpp fixed by the user."""
    kw = dict(domain_size=8, seq_len=4096)
    ds = structural_space(ModelShape(name="ds", num_layers=61, num_attention_heads=128, num_kv_heads=128,
                                     num_experts=256, mla=True), num_gpus=256, global_batch=1024, **kw)
    pv = set(zip(ds["pp"].tolist(), ds["vpp"].tolist(), strict=True))
    assert {(8, 4), (4, 2), (16, 1), (4, 4)} <= pv
    qw = structural_space(ModelShape(name="q", num_layers=94, num_attention_heads=64, num_kv_heads=4, num_experts=128),
                          num_gpus=256, global_batch=2048, **kw)
    pv = set(zip(qw["pp"].tolist(), qw["vpp"].tolist(), strict=True))
    assert (8, 8) not in pv and (16, 4) not in pv and {(8, 4), (8, 6), (8, 2), (8, 1)} <= pv
    g = structural_space(ModelShape(name="g", num_layers=36, num_attention_heads=64, num_kv_heads=8, num_experts=128),
                         num_gpus=64, global_batch=512, **kw)
    pv = set(zip(g["pp"].tolist(), g["vpp"].tolist(), strict=True))
    assert (4, 4) not in pv and (4, 8) not in pv and {(4, 2), (4, 3), (4, 1)} <= pv
    fixed = structural_space(ModelShape(name="g", num_layers=36, num_attention_heads=64, num_kv_heads=8,
                                        num_experts=128), num_gpus=64, global_batch=512,
                             options=SpaceOptions(fixed={"vpp": (8,)}), **kw)
    assert (fixed["pp"] == 4).any()

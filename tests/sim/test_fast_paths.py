"""The fast paths of ``sim.comm.collective_time`` (and the scalar GEMM table of ``sim.kernels``) give the
numbers of a direct call of the model, and ``estimate`` on plain Python numbers (``clustertwin.xp``
scalar mode) gives the numbers of the same step model on numpy 0-d arrays.

Arrays are priced on their distinct (size, ranks, ranks-per-domain) triples and scalars through a
per-machine table; both must equal pricing every element directly (``comm.FAST = False``), for the
whole step model (``estimate_batch`` over a planner space, scalar ``estimate`` of random plans drawn
from it), so a change inside ``clustertwin.collectives`` reaches both paths by construction.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustertwin.collectives import collective_time as nccl_time
from clustertwin.planner.space import SCHEDULES, ModelShape, space_size, structural_space
from clustertwin.sim import analytical, comm, estimate, estimate_batch, kernels
from clustertwin.sim.costs import make_hardware
from clustertwin.workload import get_model, make_plan
from clustertwin.workload.plan import RECOMPUTE

REL = 1e-9
# (model, system, GPUs, global batch, sequence): dense and MoE, NVLink-8 and NVL72 domains
CASES = [
    ("llama3-70b", "hgx-h100", 512, 512, 8192),
    ("mixtral-8x7b", "hgx-h100", 128, 256, 4096),
    ("deepseek-v3", "gb200-nvl72", 576, 1152, 4096),
]
_MAKE_PLAN_ARGS = set(inspect.signature(make_plan).parameters)


@pytest.fixture(scope="module")
def cat():
    from clustertwin.catalog import load_catalog

    return load_catalog()


def _space(cat, mid, sid, gpus, gb, seq):
    m, s = get_model(mid), cat.system(sid)
    sp = structural_space(ModelShape.of(m), num_gpus=gpus, domain_size=s.devices_per_domain, global_batch=gb,
                          seq_len=seq)
    assert space_size(sp) > 500
    return m, s, cat.fabric(s.default_scaleout), sp


def _batch(m, s, f, sp, gb, seq, cat, fast: bool, monkeypatch):
    monkeypatch.setattr(comm, "FAST", fast)
    comm.clear_tables()
    try:
        return estimate_batch(m, s, f, sp, global_batch=gb, seq_len=seq, catalog=cat)
    finally:
        monkeypatch.setattr(comm, "FAST", True)


def _close(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    both_inf = np.isinf(a) & np.isinf(b) & (np.sign(a) == np.sign(b))
    return bool(np.all(both_inf | np.isclose(a, b, rtol=REL, atol=0.0)))


@pytest.mark.parametrize("mid,sid,gpus,gb,seq", CASES)
def test_batch_fast_path_equals_direct_pricing(cat, monkeypatch, mid, sid, gpus, gb, seq):
    m, s, f, sp = _space(cat, mid, sid, gpus, gb, seq)
    fast = _batch(m, s, f, sp, gb, seq, cat, True, monkeypatch)
    ref = _batch(m, s, f, sp, gb, seq, cat, False, monkeypatch)
    assert fast.keys() == ref.keys()
    bad = [k for k in ref if not _close(fast[k], ref[k])]
    assert not bad, f"fast path differs from direct pricing in {bad}"
    assert float(np.max(ref["breakdown_dp_comm"])) > 0  # collectives were priced at all


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_scalar_estimate_equals_direct_pricing(cat, data):
    mid, sid, gpus, gb, seq = data.draw(st.sampled_from(CASES))
    m, s, f, sp = _space(cat, mid, sid, gpus, gb, seq)
    i = data.draw(st.integers(0, space_size(sp) - 1))
    row = {k: np.asarray(v)[i].item() for k, v in sp.items()}
    kw = {k: v for k, v in row.items() if k in _MAKE_PLAN_ARGS and k != "recompute"}
    if "schedule" in row:
        kw["pipeline_schedule"] = SCHEDULES[int(row["schedule"])]
    plan = make_plan(gpus=gpus, global_batch=gb, seq_len=seq, recompute=RECOMPUTE[int(row["recompute"])], **kw)
    if data.draw(st.booleans()):
        comm.clear_tables()  # cold: every collective and GEMM priced by the model now
        kernels.clear_tables()
    got, ref = _scalar_and_reference(m, s, f, plan, cat)
    _same_result(got, ref)


def _scalar_and_reference(m, s, f, plan, cat, network=None):
    """``estimate`` on plain numbers (no numpy fallback allowed) and on numpy 0-d arrays with every
    collective and GEMM priced directly."""
    fallbacks = analytical.SCALAR_FALLBACKS[0]
    analytical.STRICT_SCALAR = True
    try:
        got = estimate(m, s, f, plan, catalog=cat, check=False, network=network)
    finally:
        analytical.STRICT_SCALAR = False
    assert analytical.SCALAR_FALLBACKS[0] == fallbacks, "the plan fell back to numpy"
    comm.FAST = kernels.FAST = analytical.SCALAR = False
    try:
        ref = estimate(m, s, f, plan, catalog=cat, check=False, network=network)
    finally:
        comm.FAST = kernels.FAST = analytical.SCALAR = True
    return got, ref


def _same_result(got, ref):
    assert _close(got.step_time_s, ref.step_time_s)
    for k, v in ref.breakdown.items():
        assert _close(got.breakdown[k], v), k
    for k, v in ref.memory_breakdown_gb.items():
        assert _close(got.memory_breakdown_gb[k], v), k
    for k in ("tokens_per_s", "mfu", "hfu", "tflops_per_gpu", "tflops_per_gpu_hw", "memory_gb_per_gpu"):
        assert _close(getattr(got, k), getattr(ref, k)), k
    assert got.fits_memory == ref.fits_memory and got.bottleneck == ref.bottleneck
    assert got.details == ref.details and got.assumptions == ref.assumptions and got.plan == ref.plan
    assert all(type(v) is float for v in got.breakdown.values())  # plain numbers, not numpy scalars


# dtypes, stacks and options the planner spaces above do not draw (FP8 / NVFP4 branches, FSDP / ZeRO-3
# stacks, unfused attention, CP all-gather, no overlap, uneven pipelines)
OPTION_CASES = [
    ("llama3-70b", "hgx-h100", dict(gpus=256, tp=4, pp=4, cp=2, global_batch=512, seq_len=8192, dtype="fp8",
                                    vpp=5, zero=1)),
    ("llama3-8b", "gb200-nvl72", dict(gpus=64, tp=2, global_batch=128, seq_len=4096, dtype="nvfp4", zero=2,
                                      recompute="selective")),
    ("llama3-8b", "hgx-h100", dict(gpus=64, global_batch=128, seq_len=8192, zero=3, stack="torchtitan",
                                   recompute="full")),
    ("llama3-70b", "hgx-h100", dict(gpus=128, tp=8, pp=2, global_batch=256, seq_len=4096, fsdp=True,
                                    stack="torchtitan", recompute="selective")),
    ("gpt3-175b", "dgx-a100", dict(gpus=512, tp=8, pp=8, global_batch=1536, seq_len=2048, flash_attention=False,
                                   overlap=False, recompute="selective")),
    ("llama3-70b", "hgx-h100", dict(gpus=256, tp=8, cp=4, global_batch=64, seq_len=32768, cp_comm="allgather")),
    ("deepseek-v3", "hgx-h100", dict(gpus=1024, tp=1, pp=16, ep=64, global_batch=4096, seq_len=4096,
                                     dtype="fp8", uneven_pipeline=True, pipeline_schedule="dualpipe", stack="hai-llm")),
    ("mixtral-8x7b", "hgx-h100", dict(gpus=64, tp=2, pp=4, ep=8, global_batch=256, seq_len=4096,
                                      pipeline_schedule="zb-h1", stack="megatron-zero-bubble")),
    ("gpt3-175b", "dgx-a100", dict(gpus=1536, tp=8, pp=16, global_batch=1536, seq_len=2048, zero=3,
                                   stack="deepspeed-zero3-2021", recompute="full")),
    # 32-bit steps: 4-byte elements everywhere, unfused attention; TF32 on a chip without TF32 (V100 -> FP32)
    ("mixtral-8x7b", "hgx-h100", dict(gpus=64, tp=2, cp=2, ep=8, global_batch=64, seq_len=4096, dtype="tf32",
                                      recompute="full")),
    ("megatron-3.6b", "dgx-1", dict(gpus=16, tp=2, pp=2, global_batch=64, seq_len=2048, dtype="tf32", zero=1)),
]


@pytest.mark.parametrize("mid,sid,kw", OPTION_CASES)
def test_scalar_estimate_equals_numpy_for_options(cat, mid, sid, kw):
    m, s = get_model(mid), cat.system(sid)
    try:
        plan = make_plan(**kw)
        estimate(m, s, cat.fabric(s.default_scaleout), plan, catalog=cat)  # the plan rule accepts it
    except Exception as e:  # noqa: BLE001  (a case this catalog cannot run is a broken test case)
        pytest.fail(f"test case {mid}/{kw} does not run: {e}")
    got, ref = _scalar_and_reference(m, s, cat.fabric(s.default_scaleout), plan, cat)
    _same_result(got, ref)


def test_scalar_estimate_with_the_flow_network_equals_numpy(cat):
    from clustertwin.api import network_model

    m, s = get_model("llama3-70b"), cat.system("hgx-h100")
    plan = make_plan(gpus=512, tp=8, pp=4, global_batch=512, seq_len=8192)
    got, ref = _scalar_and_reference(m, s, cat.fabric(s.default_scaleout), plan, cat, network=network_model("flow"))
    _same_result(got, ref)


def test_every_training_row_is_estimated_on_plain_numbers_exactly(validation_dir):
    """The public training rows (every framework, dtype and MoE layout the validator models) give the same
    prediction on plain numbers as through numpy, and none falls back to numpy."""
    from clustertwin.validate import validate_file

    fallbacks = analytical.SCALAR_FALLBACKS[0]
    analytical.STRICT_SCALAR = True
    try:
        fast = validate_file(validation_dir / "training.csv", engine="analytical")
    finally:
        analytical.STRICT_SCALAR = False
    assert analytical.SCALAR_FALLBACKS[0] == fallbacks
    analytical.SCALAR = False
    try:
        ref = validate_file(validation_dir / "training.csv", engine="analytical")
    finally:
        analytical.SCALAR = True
    assert [r.id for r in fast.rows] == [r.id for r in ref.rows]
    predicted = 0
    for a, b in zip(fast.rows, ref.rows, strict=True):
        assert (a.predicted is None) == (b.predicted is None), a.id
        if b.predicted is not None:
            predicted += 1
            assert _close(a.predicted, b.predicted), a.id
    assert predicted > 50


@settings(max_examples=60, deadline=None)
@given(op=st.sampled_from(["all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv"]),
       sizes=st.lists(st.floats(0.0, 1e11), min_size=1, max_size=8),
       ranks=st.lists(st.sampled_from([0, 1, 2, 3, 8, 16, 72, 96, 1024, 16384]), min_size=1, max_size=5),
       per_domain=st.lists(st.sampled_from([1, 2, 4, 8, 72]), min_size=1, max_size=3),
       reps=st.integers(1, 40))
def test_collective_fast_paths_equal_the_model(cat, op, sizes, ranks, per_domain, reps):
    hw = make_hardware(cat.system("hgx-h100"), cat.fabric("ib-ndr-400g"), "bf16", cat)
    rng = np.random.default_rng(len(sizes) * 7 + reps)
    n_el = len(sizes) * reps
    S = rng.choice(np.asarray(sizes), n_el)
    N = rng.choice(np.asarray(ranks, dtype=float), n_el)
    R = rng.choice(np.asarray(per_domain, dtype=float), n_el)
    ref = np.where(N > 1, nccl_time(op, S, N, R, hw.system, hw.scaleout, catalog=cat), 0.0)
    assert _close(comm.collective_time(op, S, N, R, hw), ref)  # de-duplicated (or direct when small)
    for j in range(min(n_el, 6)):  # scalars, through the per-machine table (second call hits it)
        for _ in range(2):
            assert _close(comm.collective_time(op, S[j], N[j], R[j], hw), ref[j])


def test_bad_inputs_still_raise_through_the_fast_paths(cat):
    from clustertwin.errors import InputError

    hw = make_hardware(cat.system("hgx-h100"), cat.fabric("ib-ndr-400g"), "bf16", cat)
    with pytest.raises(InputError):
        comm.collective_time("all_reduce", float("nan"), 8, 8, hw)
    with pytest.raises(InputError):
        comm.collective_time("all_reduce", np.full(100, -1.0), 8, 8, hw)
    with pytest.raises(InputError):
        comm.collective_time("all_reduce", 1e6, -3, 1, hw)  # even for a group that would cost 0 s


def _bits_equal(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind == "f" and b.dtype.kind == "f":
        return a.shape == b.shape and bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))
    return a.shape == b.shape and bool(np.all(a == b))


@pytest.mark.parametrize("mid,sid,gpus,gb,seq", CASES)
def test_batch_on_distinct_rows_equals_every_row_bit_for_bit(cat, monkeypatch, mid, sid, gpus, gb, seq):
    """Terms computed once per distinct (pp, vpp), (tp, cp, micro-batch) ... (xp.per_distinct) and the
    collectives priced once per distinct triple give the very doubles of computing every row."""
    from clustertwin import xp

    m, s, f, sp = _space(cat, mid, sid, gpus, gb, seq)
    got = estimate_batch(m, s, f, sp, global_batch=gb, seq_len=seq, catalog=cat)
    monkeypatch.setattr(xp, "DISTINCT", False)
    ref = estimate_batch(m, s, f, sp, global_batch=gb, seq_len=seq, catalog=cat)
    assert got.keys() == ref.keys()
    bad = [k for k in ref if not _bits_equal(got[k], ref[k])]
    assert not bad, f"distinct-row path differs from every-row computation in {bad}"


def test_distinct_rows_groups_equal_tuples_only():
    from clustertwin import xp

    rng = np.random.default_rng(3)
    n = 5000
    cols = (rng.choice([1, 2, 4, 8, 16384], n).astype(float),  # wide integer range, few values
            rng.choice([0.5, 1.25, 3.0], n),  # non-integer floats (sorted path)
            rng.choice([1, 2, 3], n),  # int64
            rng.random(n) < 0.5)  # bool
    rep, inv = xp.distinct_rows(*cols)
    assert rep.size == len({tuple(r) for r in zip(*(c.tolist() for c in cols), strict=True)})
    for c in cols:  # every row's tuple is its representative's
        assert np.array_equal(c[rep][inv], c)
    calls = []

    def f(a, b, c, d, scale):
        calls.append(a.size)
        return (a * b + c * scale, np.where(d, a, b)), 7.0

    (x, y), z = xp.per_distinct(f, cols, 3.0)
    assert calls == [rep.size] and z == 7.0
    assert np.array_equal(x, cols[0] * cols[1] + cols[2] * 3.0) and np.array_equal(y, np.where(cols[3], cols[0], cols[1]))


def test_a_calibrated_stack_is_one_object_per_catalog(cat):
    """``resolve_stack`` with a catalog ``stack_efficiency`` overlay gives the same object on every call, so what
    is kept per stack (Stage fields, per-layer compute) is found again, and the numbers are those of
    the overlay."""
    from dataclasses import replace

    from clustertwin.workload.stacks import get_stack, resolve_stack

    sid = get_stack(None).id
    cal = replace(cat, calibration={**cat.calibration, "stack_efficiency": {sid: {"compute_efficiency": 0.9}}})
    st = resolve_stack(None, cal)
    assert st is resolve_stack(None, cal) and st.compute_efficiency == 0.9 and st is not resolve_stack(None, cat)
    m, s = get_model("llama3-70b"), cat.system("hgx-h100")
    plan = make_plan(gpus=512, tp=8, pp=4, global_batch=512, seq_len=8192)
    f = cat.fabric(s.default_scaleout)
    slow, base = estimate(m, s, f, plan, catalog=cal), estimate(m, s, f, plan, catalog=cat)
    assert slow.step_time_s > base.step_time_s
    analytical.clear_tables()
    assert estimate(m, s, f, plan, catalog=cal) == slow

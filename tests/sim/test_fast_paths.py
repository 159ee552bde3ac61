"""The fast paths of ``sim.comm.collective_time`` (and the scalar GEMM table of ``sim.kernels``) give the
numbers of a direct call of the model.

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
from clustertwin.sim import comm, estimate, estimate_batch, kernels
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


@settings(max_examples=40, deadline=None)
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
    got = estimate(m, s, f, plan, catalog=cat, check=False)
    comm.FAST = kernels.FAST = False
    try:
        ref = estimate(m, s, f, plan, catalog=cat, check=False)
    finally:
        comm.FAST = kernels.FAST = True
    assert _close(got.step_time_s, ref.step_time_s)
    for k, v in ref.breakdown.items():
        assert _close(got.breakdown[k], v), k
    assert _close(got.memory_gb_per_gpu, ref.memory_gb_per_gpu)


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

"""Analytical engine: estimate_batch == estimate, breakdown adds up, laws that must hold."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustertwin.sim import estimate, estimate_batch
from clustertwin.sim.analytical import BREAKDOWN
from clustertwin.sim.comm import achieved_bandwidths, collective_time
from clustertwin.sim.costs import make_hardware, stage_costs
from clustertwin.workload import get_model, make_plan

PLANS = [
    ("gpt3-175b", "dgx-a100", dict(gpus=1024, tp=8, pp=8, vpp=3, global_batch=1536, recompute="selective")),
    ("llama3-70b", "hgx-h100", dict(gpus=64, tp=4, pp=8, vpp=5, global_batch=256, seq_len=8192, dtype="fp8")),
    ("llama3-8b", "hgx-h100", dict(gpus=8, tp=1, global_batch=128, micro_batch=1, seq_len=8192, zero=3, fsdp=True)),
    ("mixtral-8x7b", "hgx-h100", dict(gpus=64, tp=2, pp=2, ep=8, global_batch=256, seq_len=4096)),
    ("deepseek-v3", "gb200-nvl72", dict(gpus=256, tp=1, pp=4, vpp=4, ep=64, global_batch=4096, seq_len=4096,
                                        recompute="selective", uneven_pipeline=True)),
    ("llama3-405b", "hgx-h100", dict(gpus=16384, tp=8, pp=16, cp=16, global_batch=128, seq_len=131072, zero=2,
                                     cp_comm="allgather")),
]


@pytest.fixture(scope="module")
def cat():
    from clustertwin.catalog import load_catalog

    return load_catalog()


@pytest.mark.parametrize("mid,sid,kw", PLANS)
def test_batch_equals_scalar_and_breakdown_adds_up(cat, mid, sid, kw):
    m = get_model(mid)
    s = cat.system(sid)
    f = cat.fabric(s.default_scaleout)
    p = make_plan(**kw)
    r = estimate(m, s, f, p, catalog=cat)
    assert r.step_time_s > 0 and 0 < r.mfu < 1 and 0 < r.hfu < 1
    assert sum(r.breakdown.values()) == pytest.approx(r.step_time_s, rel=1e-9)
    assert set(r.breakdown) == set(BREAKDOWN)
    assert sum(r.memory_breakdown_gb.values()) == pytest.approx(r.memory_gb_per_gpu, rel=1e-9)
    plans = {"tp": np.array([p.tp, p.tp]), "pp": p.pp, "dp": p.dp, "cp": p.cp, "ep": p.ep, "vpp": p.vpp,
             "micro_batch": p.micro_batch, "recompute": p.recompute_code, "zero": p.zero_effective,
             "sequence_parallel": p.sequence_parallel, "uneven_pipeline": p.uneven_pipeline}
    out = estimate_batch(m, s, f, plans, seq_len=p.seq_len, global_batch=p.global_batch, dtype=p.dtype,
                         flash_attention=p.flash_attention, overlap=p.overlap, grad_reduce_bytes=p.grad_reduce_bytes,
                         cp_comm=p.cp_comm, catalog=cat)
    assert out["step_time_s"].shape == (2,)
    assert out["step_time_s"][1] == r.step_time_s  # identical numbers, not just close
    assert out["mfu"][0] == r.mfu
    assert out["memory_gb_per_gpu"][0] == r.memory_gb_per_gpu
    assert bool(out["valid"][0])
    for k in BREAKDOWN:
        assert out["breakdown_" + k][0] == r.breakdown[k]


def test_batch_broadcasts_many_plans(cat):
    m = get_model("llama3-70b")
    s = cat.system("hgx-h100")
    f = cat.fabric("ib-ndr-400g")
    tp = np.array([1, 2, 4, 8, 8, 3])
    pp = np.array([8, 8, 4, 2, 1, 1])
    dp = 1024 // (tp * pp)
    out = estimate_batch(m, s, f, {"tp": tp, "pp": pp, "dp": dp, "cp": 1, "ep": 1, "vpp": 1, "micro_batch": 1,
                                   "recompute": 0, "zero": 1}, global_batch=1024, seq_len=8192)
    assert out["step_time_s"].shape == (6,)
    assert np.all(np.isfinite(out["step_time_s"][:5]))
    assert not out["valid"][5]  # 64 heads not divisible by tp 3
    assert out["valid"][:5].all()


def test_recompute_costs_time_and_saves_memory(cat):
    m = get_model("gpt3-175b")
    s = cat.system("dgx-a100")
    f = cat.fabric("ib-hdr-200g")
    res = {rc: estimate(m, s, f, make_plan(gpus=512, tp=8, pp=8, global_batch=512, recompute=rc), catalog=cat)
           for rc in ("none", "full")}
    assert res["full"].step_time_s > res["none"].step_time_s
    assert res["full"].memory_gb_per_gpu < res["none"].memory_gb_per_gpu
    assert res["full"].hfu > res["full"].mfu


def test_slower_fabric_never_faster(cat):
    m = get_model("llama3-8b")
    s = cat.system("hgx-h100")
    p = make_plan(gpus=256, tp=1, global_batch=256, seq_len=8192, zero=0)
    fast = estimate(m, s, cat.fabric("ib-ndr-400g"), p, catalog=cat)
    slow = estimate(m, s, cat.fabric("ib-hdr-200g"), p, catalog=cat)
    assert slow.step_time_s >= fast.step_time_s
    assert "DP" in slow.bottleneck or slow.breakdown["dp_comm"] >= fast.breakdown["dp_comm"]


@settings(max_examples=30, deadline=None)
@given(size=st.floats(1e3, 1e10), n=st.sampled_from([2, 4, 8, 16, 64, 512]))
def test_collective_time_monotone_in_bytes_and_busbw_bounded(cat, size, n):
    """One rank per domain (no SHARP on RoCE): the ring cannot beat the achieved NIC bandwidth."""
    hw = make_hardware(cat.system("hgx-h100"), cat.fabric("roce-400g"), "bf16")
    t1 = float(collective_time("all_reduce", size, n, 1, hw))
    t2 = float(collective_time("all_reduce", size * 2, n, 1, hw))
    assert t2 >= t1 > 0
    busbw = 2 * (n - 1) / n * size / t1
    assert busbw <= achieved_bandwidths(hw)[1] * (1 + 1e-9)


def test_stage_costs_are_granular(cat):
    m = get_model("llama3-70b")
    hw = make_hardware(cat.system("hgx-h100"), cat.fabric("ib-ndr-400g"), "bf16")
    c = stage_costs(m, hw, tp=np.array([2, 4, 8]), pp=4, dp=8, cp=1, ep=1, vpp=1, micro_batch=1, recompute=0, zero=1,
                    global_batch=256, seq_len=8192)
    assert c["layer_fwd_gemm_s"].shape == (3,)
    # more TP: less GEMM time per GPU, more TP bytes per collective stays equal (b s h)
    assert np.all(np.diff(c["layer_fwd_gemm_s"]) < 0)
    assert np.all(c["tp_comm_fwd_s"] > 0)


def test_mixed_interleaved_chunks_are_flagged(cat):
    """An uneven interleaved layout with mixed chunk sizes (80 layers on PP4 V8: virtual stages of 2 and 3
    layers) says that the closed form does not price its stalls; NVIDIA's DeepSeek-V3 layout (61 layers on
    PP4 V4: uniform 4 with lighter ends), an embedding/loss-slot split (126 + 2 on PP8 V4) and an even
    split do not."""
    from clustertwin.workload.pipeline import mixed_interleaved_chunks

    assert mixed_interleaved_chunks(80, 4, 8) and mixed_interleaved_chunks(94, 8, 8)
    assert not any(mixed_interleaved_chunks(*a) for a in ((61, 4, 4), (61, 8, 4), (126, 8, 4), (80, 4, 5), (80, 4, 1)))
    assert mixed_interleaved_chunks(np.array([80, 61]), np.array([4, 4]), np.array([8, 4])).tolist() == [True, False]
    s = cat.system("hgx-h100")
    f = cat.fabric(s.default_scaleout)
    m = get_model("llama3-70b")

    def note(**kw):
        p = make_plan(gpus=64, tp=4, pp=4, global_batch=256, seq_len=8192, **kw)
        return [a for a in estimate(m, s, f, p, catalog=cat).assumptions if a.startswith("pipeline:")]

    assert "vpp 8 mix virtual stages of 2 and 3 layers" in note(vpp=8, uneven_pipeline=True)[0]
    assert not note(vpp=5)


def test_cli_estimate_warns_of_mixed_interleaved_chunks(capsys):
    from cli_runner import run_cli

    args = ["estimate", "--model", "llama3-70b", "--system", "hgx-h100", "--gpus", "64", "--tp", "4", "--pp", "4",
            "--global-batch", "256", "--seq-len", "8192"]
    code, out, _ = run_cli(capsys, *args, "--vpp", "8", "--uneven-pipeline")
    assert code == 0 and "[warning] pipeline: 80 layers on pp 4 x vpp 8" in out and "--engine event" in out
    code, out, _ = run_cli(capsys, *args, "--vpp", "5")
    assert code == 0 and "[warning] pipeline:" not in out


def test_torchtitan_tp_collectives_fp8_gather_and_sequence_dim_copy(cat):
    """torchtitan's TP (DTensor SequenceParallel): each SP collective adds a chunk + cat copy of the whole
    activation, and an FP8 (tensorwise) step all-gathers in FP8, so its TP time falls below the BF16 step's
    while the reduce-scatters stay 16-bit."""
    from dataclasses import replace

    from clustertwin.workload.stacks import get_stack

    m = get_model("llama3-70b")
    tt = get_stack("torchtitan")
    plain = replace(tt, tp_fp8_allgather=False, tp_seq_dim_copy=False)
    kw = dict(tp=8, pp=1, dp=4, cp=1, ep=1, vpp=1, micro_batch=2, recompute=0, zero=3, global_batch=64, seq_len=8192)
    fab = cat.fabric("roce-400g")
    t = {}
    for dtype in ("bf16", "fp8"):
        hw = make_hardware(cat.system("hgx-h100"), fab, dtype)
        for name, stack in (("tt", tt), ("plain", plain), ("copy", replace(plain, tp_seq_dim_copy=True))):
            t[dtype, name] = float(stage_costs(m, hw, stack=stack, **kw)["tp_comm_fwd_s"])
    assert t["bf16", "copy"] > t["bf16", "plain"]  # the copy costs HBM time
    assert t["bf16", "tt"] == pytest.approx(t["bf16", "copy"])  # BF16: no FP8 gather
    assert t["fp8", "plain"] == pytest.approx(t["bf16", "plain"])  # without the plan the gathers stay 16-bit
    assert t["fp8", "tt"] < t["bf16", "tt"]  # FP8 gathers (and a smaller copy of the gathered output)
    assert t["fp8", "tt"] > 0.5 * t["bf16", "tt"]  # the reduce-scatters stay 16-bit


def test_pp_p2p_blocks_without_virtual_stages(cat):
    """Megatron runs 1F1B without virtual stages with batched P2P followed by torch.cuda.synchronize()
    (batch_p2p_comm + batch_p2p_sync, p2p_communication.py), so every micro-batch's forward and backward
    send is exposed (2 m transfers); the interleaved schedule overlaps its P2P and exposes only the
    fill/drain hops 2 (p - 1). Same transfer time in both layouts (same boundary activation)."""
    s = cat.system("hgx-h100")
    f = cat.fabric(s.default_scaleout)
    m = get_model("llama3-70b")
    hw = make_hardware(s, f, "bf16", cat)
    gb, pp = 256, 4
    c = stage_costs(m, hw, tp=4, pp=pp, dp=4, cp=1, ep=1, vpp=1, micro_batch=1, recompute=0, zero=1,
                    global_batch=gb, seq_len=8192)
    p2p, mb = float(c["pp_p2p_s"]), float(c["num_micro_batches"])
    assert p2p > 0 and mb == gb / 4
    plain = estimate(m, s, f, make_plan(gpus=64, tp=4, pp=pp, global_batch=gb, seq_len=8192), catalog=cat)
    inter = estimate(m, s, f, make_plan(gpus=64, tp=4, pp=pp, vpp=5, global_batch=gb, seq_len=8192), catalog=cat)
    assert plain.breakdown["pp_p2p"] == pytest.approx(2.0 * mb * p2p, rel=1e-9)
    assert inter.breakdown["pp_p2p"] == pytest.approx(2.0 * (pp - 1) * p2p, rel=1e-9)


def test_cli_estimate_says_when_a_stack_runs_its_kernels_below_the_megatron_rate(capsys):
    """A stack with compute_efficiency != 1 (megatron-deepspeed 0.82, derived; torchtitan 0.85, fitted) prints it;
    Megatron-Core (1) does not."""
    from cli_runner import run_cli

    args = ["estimate", "--model", "gpt3-175b", "--system", "dgx-a100", "--gpus", "384", "--tp", "4", "--pp", "12",
            "--micro-batch", "2", "--global-batch", "2048", "--recompute", "full"]
    code, out, _ = run_cli(capsys, *args, "--stack", "megatron-deepspeed")
    assert code == 0 and "[warning] stack efficiency: megatron-deepspeed runs every layer kernel" in out and "0.82" in out
    code, out, _ = run_cli(capsys, *args)
    assert code == 0 and "stack efficiency" not in out

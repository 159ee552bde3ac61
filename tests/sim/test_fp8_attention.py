"""FP8/FP4 recipe quantisation costs (sim/components/fp8.py) and the fused-attention backend of a stack."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from clustertwin.sim.components import attention
from clustertwin.sim.components.elementwise import elementwise
from clustertwin.sim.components.fp8 import RECIPES, quant_time, recipe_for
from clustertwin.sim.components.stage import stage_inputs
from clustertwin.sim.costs import make_hardware
from clustertwin.workload import ModelSpec
from clustertwin.workload.stacks import get_stack

LLAMA8B = ModelSpec(id="l8", num_layers=32, hidden_size=4096, num_attention_heads=32, num_kv_heads=8,
                    ffn_hidden_size=14336, vocab_size=128256, swiglu=True)


def _hw(cat, dtype, system="hgx-h100"):
    s = cat.system(system)
    return make_hardware(s, cat.fabric(s.default_scaleout), dtype, cat)


def _stage(cat, dtype="bf16", stack=None, system="hgx-h100", **kw):
    args = dict(tp=1, pp=1, dp=8, cp=1, ep=1, micro_batch=2, recompute=0, zero=1, global_batch=32, seq_len=8192)
    args.update(kw)
    return stage_inputs(LLAMA8B, _hw(cat, dtype, system), stack=stack, **args)


def test_recipe_bytes_per_element():
    # both quantised layouts of one operand: tensorwise = amax pass (2) + cast-transpose (2 + 1 + 1);
    # MXFP8 = one pass (2) writing two FP8 copies + one E8M0 scale per 32; NVFP4 = amax pass + one pass
    # writing two 4-bit copies + one E4M3 scale per 16
    assert RECIPES["tensorwise"].bytes_per_elem == pytest.approx(6.0)
    assert RECIPES["rowwise"].bytes_per_elem == pytest.approx(6.0)
    assert RECIPES["mxfp8"].bytes_per_elem == pytest.approx(4.0625)
    assert RECIPES["nvfp4"].bytes_per_elem == pytest.approx(5.125)
    assert recipe_for("bf16") is None and recipe_for("fp8").name == "tensorwise"
    assert recipe_for("mxfp8").name == "mxfp8" and recipe_for("nvfp4").name == "nvfp4"


def test_quant_time_is_hbm_bound_and_zero_without_fp8(catalog):
    hw = _hw(catalog, "fp8")
    f, b = quant_time(hw, "fp8", x_elems=1e9, dy_elems=2e9, operands=1.0)
    roof = hw.hbm_bw * hw.eff.hbm_efficiency
    kern = hw.eff.kernel_overhead_s
    assert float(f) == pytest.approx(6e9 / roof + 2 * 2 * kern)  # X, plus the (zero) weight cast's launches
    assert float(b) == pytest.approx(12e9 / roof + 2 * kern)
    z = quant_time(_hw(catalog, "bf16"), "bf16", x_elems=1e9, dy_elems=1e9)
    assert float(z[0]) == 0.0 and float(z[1]) == 0.0


def test_torchao_mxfp8_casts_each_layout_from_bf16(catalog):
    """torchao's mx_mm casts every operand layout in its own kernel from the BF16 tensor (2 x (2 + 1 + 1/32) B,
    2 kernels); Transformer Engine's MXFP8 quantizer writes both layouts in one pass (4.0625 B, 1 kernel)."""
    assert RECIPES["mxfp8-per-layout"].bytes_per_elem == pytest.approx(6.0625)
    assert RECIPES["mxfp8-per-layout"].kernels == 2.0
    hw = _hw(catalog, "mxfp8", system="hgx-b200")
    roof, kern = hw.hbm_bw * hw.eff.hbm_efficiency, hw.eff.kernel_overhead_s
    f, b = quant_time(hw, "mxfp8", x_elems=1e9, dy_elems=2e9, operands=1.0, mx_per_layout=True)
    assert float(f) == pytest.approx(6.0625e9 / roof + 2 * 2 * kern)
    assert float(b) == pytest.approx(2 * 6.0625e9 / roof + 2 * kern)
    # only MXFP8 changes: the flag leaves the other recipes alone
    for dt in ("fp8", "nvfp4"):
        h = _hw(catalog, dt, system="hgx-b200")
        assert quant_time(h, dt, x_elems=1e9, dy_elems=1e9, mx_per_layout=True) == quant_time(h, dt, x_elems=1e9,
                                                                                               dy_elems=1e9)
    assert get_stack("torchtitan").mxfp8_cast_per_layout and not get_stack("megatron-bridge").mxfp8_cast_per_layout
    tt = elementwise(_stage(catalog, "mxfp8", stack=get_stack("torchtitan"), system="hgx-b200"))
    te_like = elementwise(_stage(catalog, "mxfp8", system="hgx-b200",
                                 stack=replace(get_stack("torchtitan"), mxfp8_cast_per_layout=False)))
    assert float(tt[0]) > float(te_like[0]) and float(tt[1]) > float(te_like[1])


def test_fp8_casts_add_to_elementwise_and_weight_cache_saves(catalog):
    bf = elementwise(_stage(catalog, "bf16"))
    fp = elementwise(_stage(catalog, "fp8"))
    assert float(fp[0]) > float(bf[0]) and float(fp[1]) > float(bf[1])
    # TE re-uses the step's FP8 weights over the micro-batches (fp8_weight_cache); torchao casts every forward
    te = elementwise(_stage(catalog, "fp8", stack=get_stack("megatron-core")))
    tt = elementwise(_stage(catalog, "fp8", stack=get_stack("torchtitan")))
    assert float(te[0]) < float(tt[0]) and float(te[1]) == pytest.approx(float(tt[1]))


def test_cudnn_attention_backend_on_hopper(catalog):
    """TE stacks run cuDNN fused attention (FA3 paper: ~1.6x FA2 on H100); A100 has one measured rate."""
    mc, tt = get_stack("megatron-core"), get_stack("torchtitan")
    assert mc.attention_backend == "cudnn" and get_stack("megatron-bridge").attention_backend == "cudnn"
    assert tt.attention_backend == "fa2" and get_stack("torchtitan-2026").attention_backend == "cudnn"
    kw = dict(cp_comm="p2p")
    h_te = attention.core(_stage(catalog, stack=mc, **kw))
    h_fa = attention.core(_stage(catalog, stack=None, **kw))
    ratio = float(h_fa.fwd_s) / float(h_te.fwd_s)
    hw = _hw(catalog, "bf16")
    assert ratio == pytest.approx(hw.eff.attention_efficiency_cudnn / hw.eff.attention_efficiency, rel=0.02)
    assert 1.4 < ratio < 1.7
    a_te = attention.core(_stage(catalog, stack=mc, system="dgx-a100", **kw))
    a_fa = attention.core(_stage(catalog, stack=None, system="dgx-a100", **kw))
    assert np.allclose(a_te.fwd_s, a_fa.fwd_s) and np.allclose(a_te.bwd_s, a_fa.bwd_s)


def test_cudnn_attention_is_slower_at_head_dim_64(catalog):
    """cuDNN fused attention at head dim 64 (GPT-OSS) runs at the FlashAttention-3 paper's measured share of its
    head-dim-128 rate (arXiv:2407.08608 Fig. 5-6, H100, 16K: forward 413 vs 595 TFLOP/s, backward 433 vs 516);
    same a x d, so the same FLOPs. FlashAttention-class stacks and head dim >= 128 keep one rate."""
    from dataclasses import replace

    mc = get_stack("megatron-core")
    hd64 = replace(LLAMA8B, num_attention_heads=64, head_dim=64)
    hd256 = replace(LLAMA8B, num_attention_heads=16, head_dim=256)
    kw = dict(tp=1, pp=1, dp=8, cp=1, ep=1, micro_batch=2, recompute=0, zero=1, global_batch=32, seq_len=8192,
              cp_comm="p2p")
    for system in ("hgx-h100", "hgx-b200"):
        hw = _hw(catalog, "bf16", system)
        kern = hw.eff.kernel_overhead_s
        c128 = attention.core(stage_inputs(LLAMA8B, hw, stack=mc, **kw))
        c64 = attention.core(stage_inputs(hd64, hw, stack=mc, **kw))
        assert (float(c64.fwd_s) - 2 * kern) == pytest.approx((float(c128.fwd_s) - 2 * kern) * 595 / 413)
        assert (float(c64.bwd_s) - 4 * kern) == pytest.approx((float(c128.bwd_s) - 4 * kern) * 516 / 433)
        wide = attention.core(stage_inputs(hd256, hw, stack=mc, **kw))
        assert float(wide.fwd_s) == pytest.approx(float(c128.fwd_s))
        f128 = attention.core(stage_inputs(LLAMA8B, hw, stack=None, **kw))
        f64 = attention.core(stage_inputs(hd64, hw, stack=None, **kw))
        assert float(f64.fwd_s) == pytest.approx(float(f128.fwd_s)) and float(f64.bwd_s) == pytest.approx(
            float(f128.bwd_s))


def test_fp4_gemm_ceiling_is_the_measured_one(catalog):
    """FP4 GEMMs reach a smaller share of their peak than FP8 (cuBLAS 8192^3 on B200: 5239 TFLOP/s,
    DeepGEMM pull #348): NVFP4 must not inherit the FP8 MAMF share, so a B200 NVFP4 GEMM ceiling is well
    under 2x the FP8 one (the peaks differ 2.2x)."""
    fp8, fp4 = _hw(catalog, "mxfp8", "hgx-b200"), _hw(catalog, "nvfp4", "hgx-b200")
    assert fp4.peak / fp8.peak == pytest.approx(10000 / 4500)
    assert fp4.mamf * fp4.peak / fp4.eff.gemm_mamf_scale == pytest.approx(5239e12, rel=0.01)  # FLOP/s
    assert 1.3 < (fp4.mamf * fp4.peak) / (fp8.mamf * fp8.peak) < 1.6


def test_torch_sdpa_fa2_backend_is_slow_only_on_blackwell(catalog):
    """torchtitan before torch 2.11 attends through SDPA's bundled FlashAttention-2: the chip's FA2 rate, which
    is its FlashAttention rate on H100 / A100 but ~355 TFLOP/s on B200 (tritonbench pull 171), a third of
    the cuDNN / FA4-class rate that TE stacks (and torchtitan on torch >= 2.11) get there."""
    tt, tt26 = get_stack("torchtitan"), get_stack("torchtitan-2026")
    kw = dict(cp_comm="allgather")
    for system in ("hgx-h100", "dgx-a100"):
        fa2 = attention.core(_stage(catalog, stack=tt, system=system, **kw))
        fa = attention.core(_stage(catalog, stack=None, system=system, **kw))
        assert np.allclose(fa2.fwd_s, fa.fwd_s) and np.allclose(fa2.bwd_s, fa.bwd_s)
    b_fa2 = attention.core(_stage(catalog, stack=tt, system="hgx-b200", **kw))
    b_new = attention.core(_stage(catalog, stack=tt26, system="hgx-b200", **kw))
    hw = _hw(catalog, "bf16", "hgx-b200")
    assert hw.eff.attention_efficiency_fa2 * hw.peak_bf16 == pytest.approx(355e12, rel=0.01)
    assert 2.5 < float(b_fa2.fwd_s) / float(b_new.fwd_s) < 3.5

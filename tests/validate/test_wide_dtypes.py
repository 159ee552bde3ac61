"""TF32 / FP32 training (workload.plan.WIDE_DTYPES): 4-byte weights, activations, GEMM inputs, gradients and
collective payloads, GEMMs at the TF32 (or FP32 CUDA-core) peak, unfused attention. A published TF32 / FP32
row is modelled with a note naming those assumptions; a TF32 row on V100 (no TF32) runs as FP32."""

from __future__ import annotations

import csv

import pytest

from clustertwin.catalog import load_catalog
from clustertwin.errors import InputError
from clustertwin.sim import estimate
from clustertwin.validate import validate_rows
from clustertwin.workload import get_model, make_plan


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


@pytest.fixture(scope="module")
def a100_row(validation_dir):  # Megatron-LM SC'21 Table 1, GPT-1.7B on 32 A100 80GB, FP16
    with open(validation_dir / "training.csv", newline="", encoding="utf-8") as fh:
        return next(r for r in csv.DictReader(fh) if r["id"] == "mlm-sc21-t1-1")


def _est(cat, model, system, **kw):
    s = cat.system(system)
    return estimate(get_model(model), s, cat.fabric(s.default_scaleout), make_plan(**kw), catalog=cat)


def test_tf32_and_fp32_rows_are_modelled_with_the_assumptions_in_the_note(a100_row):
    rep = validate_rows([dict(a100_row, id="t", precision="tf32"), dict(a100_row, id="f", precision="FP32"),
                         dict(a100_row, id="b", precision="bf16")])
    tf32, fp32, bf16 = rep.rows
    for r, peak in ((tf32, "156 TFLOP/s TF32 peak"), (fp32, "19.5 TFLOP/s FP32 peak")):
        assert r.error_pct is not None, r.reason
        assert peak in r.note and "4-byte" in r.note and "unfused attention" in r.note
        assert "MAMF fraction (assumed)" in r.note
    assert not bf16.note
    # TF32 halves the A100's dense peak (312 -> 156), FP32 CUDA cores are 16x below BF16
    assert 1.6 < tf32.predicted / bf16.predicted < 2.4
    assert fp32.predicted > 6 * bf16.predicted


def test_a_tf32_row_on_v100_runs_as_fp32_and_says_so(a100_row):
    r = validate_rows([dict(a100_row, id="v", precision="tf32", gpu="v100-32gb", system="dgx-1")]).rows[0]
    assert r.error_pct is not None, r.reason
    assert "no TF32 tensor cores" in r.note and "modelled as fp32" in r.note and "15.7 TFLOP/s FP32 peak" in r.note


def test_tf32_is_slower_by_the_peak_ratio_on_a_compute_bound_shape(cat):
    # GPT-3 175B, TP 8 x PP 8 on A100: GEMM-bound. Unfused attention in both runs, so only the dtype differs
    kw = dict(gpus=512, tp=8, pp=8, global_batch=1536, seq_len=2048, recompute="full")
    b16 = _est(cat, "gpt3-175b", "dgx-a100", dtype="bf16", flash_attention=False, **kw)
    t32 = _est(cat, "gpt3-175b", "dgx-a100", dtype="tf32", **kw)
    peak_ratio = 312.0 / 156.0
    assert t32.breakdown["gemm"] / b16.breakdown["gemm"] == pytest.approx(peak_ratio, rel=0.05)
    assert t32.step_time_s / b16.step_time_s == pytest.approx(peak_ratio, rel=0.12)
    assert t32.mfu == pytest.approx(b16.mfu * peak_ratio * b16.step_time_s / t32.step_time_s, rel=1e-9)


def test_32_bit_memory_doubles_the_activations_and_weights(cat):
    kw = dict(gpus=8, tp=8, global_batch=8, seq_len=2048, zero=0, recompute="selective")
    b16 = _est(cat, "megatron-3.6b", "dgx-a100", dtype="bf16", flash_attention=False, grad_reduce_bytes=4, **kw)
    f32 = _est(cat, "megatron-3.6b", "dgx-a100", dtype="fp32", **kw)
    mb, mf = b16.memory_breakdown_gb, f32.memory_breakdown_gb
    assert mf["activations"] == pytest.approx(2.0 * mb["activations"], rel=1e-9)
    assert mf["weights"] == pytest.approx(2.0 * mb["weights"], rel=1e-9)  # FP32 weights, 4 B
    assert mf["gradients"] == pytest.approx(mb["gradients"], rel=1e-9)  # FP32 main grads either way
    assert mf["optimizer"] == pytest.approx(mb["optimizer"] * 8.0 / 12.0, rel=1e-9)  # m + v, no master copy
    # model states: 4 + 4 + 8 = 16 B/param (FP32) vs 2 + 4 + 12 = 18 (mixed); activations dominate here
    act = dict(kw, recompute="none", micro_batch=4, global_batch=32)
    assert (_est(cat, "megatron-3.6b", "dgx-a100", dtype="fp32", **act).memory_gb_per_gpu
            > 1.5 * _est(cat, "megatron-3.6b", "dgx-a100", dtype="bf16", flash_attention=False, **act).memory_gb_per_gpu)


@pytest.mark.parametrize("model", ["megatron-18.4b", "mixtral-8x7b"])
def test_32_bit_collective_payloads_are_4_byte(cat, model):
    from clustertwin.sim.costs import make_hardware, stage_costs

    s = cat.system("hgx-h100")
    kw = dict(tp=2, pp=2, dp=4, cp=2, ep=8 if model == "mixtral-8x7b" else 1, vpp=1, micro_batch=1,
              recompute=0, zero=1, global_batch=64, seq_len=4096, flash=False)
    m, fab = get_model(model), cat.fabric(s.default_scaleout)
    c16 = stage_costs(m, make_hardware(s, fab, "bf16", cat), grad_reduce_bytes=4.0, **kw)
    c32 = stage_costs(m, make_hardware(s, fab, "tf32", cat), grad_reduce_bytes=2.0, **kw)  # raised to FP32
    for k in ("tp_bytes_per_collective", "pp_bytes", "dp_grad_bytes") + (("ep_bytes_per_a2a",) if m.is_moe else ()):
        assert float(c32[k]) == pytest.approx(2.0 * float(c16[k]) if k != "dp_grad_bytes" else float(c16[k])), k
    for k in ("tp_comm_fwd_s", "cp_comm_fwd_s", "pp_p2p_s", "dp_ag_s"):
        assert float(c32[k]) > 1.3 * float(c16[k]), k


def test_flash_attention_with_a_32_bit_dtype_is_refused():
    with pytest.raises(InputError, match="no 32-bit kernels"):
        make_plan(gpus=8, tp=8, dtype="tf32", flash_attention=True)
    assert make_plan(gpus=8, tp=8, dtype="tf32").flash_attention is False
    assert make_plan(gpus=8, tp=8, dtype="fp32", grad_reduce_bytes=2).grad_reduce_bytes == 4

"""Host offload (optimizer / parameter shards / activations), DeepSpeed's gradient bucket and the clamped
GLU's saved inputs: memory against DeepSpeed's own estimators and Megatron-Core's constraints, and the step
time the transfers cost."""

from __future__ import annotations

import pytest

from clustertwin import api
from clustertwin.errors import InputError
from clustertwin.workload import get_model, memory_per_gpu
from clustertwin.workload.memory import (
    activation_bytes_per_layer,
    backward_transient_bytes,
    glu_clamp_bytes_per_token,
)
from clustertwin.workload.stacks import get_stack

KW = dict(seq_len=2048, micro_batch=1, num_micro_batches=1, tp=1, pp=1, cp=1, ep=1, sp=False, recompute_code=2,
          grad_bytes=2.0)


def _states(out):
    return float(out["weights"] + out["gradients"] + out["optimizer"])


def test_zero_offload_keeps_16_bit_params_and_the_bucket_like_deepspeeds_estimator():
    m, ds = get_model("megatron-7.5b"), get_stack("deepspeed")
    base = memory_per_gpu(m, stack=ds, dp=8, zero=2, **KW)
    n = float(base["params_per_gpu"])
    bucket = 5e8 * 2.0  # reduce_bucket_size elements in BF16
    # ZeRO paper: 2 + 14/d per parameter, plus DeepSpeed's contiguous-gradients bucket
    assert _states(base) == pytest.approx(2 * n + 14 * n / 8 + bucket)
    off = memory_per_gpu(m, stack=ds, dp=8, zero=2, offload=1, **KW)
    # estimate_zero2_model_states_mem_needs(cpu_offload=True): gpu_mem = 2 * total_params (+ the bucket)
    assert _states(off) == pytest.approx(2 * n + bucket)
    # ZeRO-3 offload_param: only the gathered units (and the bucket) stay on the GPU
    z3 = memory_per_gpu(m, stack=ds, dp=8, zero=3, offload=2, **KW)
    layer = n / m.num_layers
    assert _states(z3) == pytest.approx(2 * 2 * layer + 2 * layer + bucket)
    assert _states(z3) < 0.2 * _states(memory_per_gpu(m, stack=ds, dp=8, zero=3, **KW))


def test_megatron_optimizer_offload_matches_megatron_bridges_measurement():
    # Megatron-Bridge docs/training/cpu-offloading.md: Qwen3-30B-A3B, TP2 PP2 EP4 on 16 H100, 100 % optimizer
    # offload saves 15.3 GB, 32 % of the steady-state allocated memory
    s = dict(model="qwen3-30b-a3b", system="hgx-h100", gpus=16, tp=2, pp=2, ep=4, global_batch=8, micro_batch=1,
             seq_len=4096, stack="megatron-bridge", recompute="selective")
    on = api.estimate(api.build_scenario(**s))
    off = api.estimate(api.build_scenario(**s, offload="optimizer"))
    saved = on.memory_gb_per_gpu - off.memory_gb_per_gpu
    assert saved == pytest.approx(15.3, rel=0.05)
    allocated = on.memory_gb_per_gpu - on.memory_breakdown_gb["runtime"]
    assert saved / allocated == pytest.approx(0.32, abs=0.03)


def test_megatron_optimizer_offload_keeps_the_gradient_buffer():
    m, mc = get_model("llama3-8b"), get_stack("megatron-core")
    on = memory_per_gpu(m, stack=mc, dp=8, zero=1, **KW)
    off = memory_per_gpu(m, stack=mc, dp=8, zero=1, offload=1, **KW)
    # HybridDeviceOptimizer moves Adam's moments (8 of the 12 B); the FP32 main-param shard stays
    assert float(off["optimizer"]) == pytest.approx(float(on["optimizer"]) * 4 / 12)
    assert float(off["gradients"]) == pytest.approx(float(on["gradients"]))
    assert float(off["weights"]) == pytest.approx(float(on["weights"]))


def test_activation_offload_removes_the_offloaded_layers_but_one():
    m, mc = get_model("llama3-70b"), get_stack("megatron-bridge")
    kw = dict(KW, seq_len=8192, micro_batch=2, recompute_code=0, sp=False, dp=64, zero=3)
    full = memory_per_gpu(m, stack=mc, dtype="fp8", fp8=True, **kw)
    half = memory_per_gpu(m, stack=mc, dtype="fp8", fp8=True, activation_offload_layers=40, **kw)
    tr = float(backward_transient_bytes(m, 8192, 2, 1, 1))  # one layer's backward gradients, held in both
    per_layer = (float(full["activations"]) - tr) / m.num_layers
    assert float(half["activations"]) - tr == pytest.approx(per_layer * (m.num_layers - 40 + 1))


def test_activation_offload_rules_follow_megatron_core():
    base = dict(model="llama3-8b", system="hgx-h100", gpus=8, global_batch=8, stack="megatron-core")
    with pytest.raises(InputError, match="pp 1, recompute none"):
        api.build_scenario(**base, pp=2, activation_offload_layers=4)
    with pytest.raises(InputError, match="pp 1, recompute none"):
        api.build_scenario(**base, recompute="full", activation_offload_layers=4)
    with pytest.raises(InputError, match="no activation CPU offload"):
        api.build_scenario(**dict(base, stack="torchtitan"), activation_offload_layers=4)
    with pytest.raises(InputError, match="offers offload none / params"):
        api.build_scenario(**dict(base, stack="torchtitan"), fsdp=True, offload="optimizer")
    with pytest.raises(InputError, match="needs ZeRO-3"):
        api.build_scenario(**dict(base, stack="deepspeed"), zero=2, offload="params")
    with pytest.raises(InputError, match="unknown offload"):
        api.build_scenario(**base, offload="cpu")


def test_offload_costs_step_time_and_saves_memory():
    base = dict(model="llama3-8b", system="hgx-h100", gpus=8, global_batch=64, micro_batch=2, seq_len=4096,
                stack="megatron-core", recompute="none")
    r0 = api.estimate(api.build_scenario(**base))
    r1 = api.estimate(api.build_scenario(**base, offload="optimizer"))
    r2 = api.estimate(api.build_scenario(**base, activation_offload_layers=16))
    assert r1.memory_gb_per_gpu < r0.memory_gb_per_gpu and r1.step_time_s > r0.step_time_s
    assert r1.breakdown["optimizer"] > 5 * r0.breakdown["optimizer"]  # CPU Adam replaces the GPU step
    assert r2.memory_gb_per_gpu < r0.memory_gb_per_gpu and r2.step_time_s >= r0.step_time_s
    # both engines read the same cost fields
    e1 = api.estimate(api.build_scenario(**base, offload="optimizer"), engine="event")
    assert e1.memory_gb_per_gpu == pytest.approx(r1.memory_gb_per_gpu, rel=1e-6)
    assert e1.step_time_s > api.estimate(api.build_scenario(**base), engine="event").step_time_s


def test_clamped_glu_keeps_the_fc1_output_and_its_clamped_copy():
    m = get_model("gpt-oss-120b")
    assert m.glu_clamp
    per_tok = glu_clamp_bytes_per_token(m)
    frac = m.num_moe_layers / m.num_layers
    assert per_tok == pytest.approx(frac * 4.0 * m.moe_topk * m.moe_ffn_hidden_size)
    plain = m.with_(glu_clamp=False)
    tok = 4096
    a = float(activation_bytes_per_layer(m, tok, 1, 1, 1, False, 0, True)[0])
    b = float(activation_bytes_per_layer(plain, tok, 1, 1, 1, False, 0, True)[0])
    assert a - b == pytest.approx(per_tok * tok)
    # moe_act selective recompute checkpoints the clamp with the activation: nothing extra is kept
    kw = dict(seq_len=tok, micro_batch=1, num_micro_batches=1, tp=1, pp=1, dp=8, cp=1, ep=8, zero=1, sp=False,
              recompute_code=1, stack=get_stack("megatron-bridge"))
    assert float(memory_per_gpu(m, **kw)["activations"]) == pytest.approx(
        float(memory_per_gpu(plain, **kw)["activations"]))


def test_memory_basis_names_what_each_component_counts():
    from clustertwin.workload.memory import memory_basis

    sc = api.build_scenario(model="llama3-8b", system="hgx-h100", gpus=8, zero=2, stack="deepspeed",
                            offload="optimizer", global_batch=8)
    b = memory_basis(sc.model, sc.plan, get_stack("deepspeed"))
    assert set(b) == {"weights", "gradients", "optimizer", "activations", "logits", "runtime"}
    assert "host memory" in b["optimizer"] and "reduce bucket" in b["gradients"] and "12 B" in b["logits"]
    tt = api.build_scenario(model="llama3-8b", system="hgx-h100", gpus=8, fsdp=True, stack="torchtitan",
                            recompute="selective", global_batch=8)
    bt = memory_basis(tt.model, tt.plan, get_stack("torchtitan"))
    assert "FP32 4 B" in bt["weights"] and "per-op SAC" in bt["activations"]


def test_one_plan_with_offload_stays_on_the_scalar_fast_path(monkeypatch):
    from clustertwin.sim import analytical

    monkeypatch.setattr(analytical, "STRICT_SCALAR", True)  # a fallback to numpy raises instead
    for kw in ({}, {"offload": "optimizer", "activation_offload_layers": 4}):
        sc = api.build_scenario(model="llama3-8b", system="hgx-h100", gpus=8, global_batch=16, micro_batch=2,
                                seq_len=4096, stack="megatron-core", recompute="none", **kw)
        assert api.estimate(sc).step_time_s > 0

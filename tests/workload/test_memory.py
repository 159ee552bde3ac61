"""Memory formulas vs Korthikanti et al. 2022 (Table 2 / Fig. 1 values quoted in MODELLING.md §2.2)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustertwin.workload import activation_bytes_per_layer, get_model, memory_per_gpu
from clustertwin.workload.memory import GRAD_BYTES, backward_transient_bytes

GiB = 1024**3


def _acts(model, *, tp, pp, vpp, mb, m, sp, rc, flash=False):
    """The saved activations Korthikanti et al. count: the model's activations less the one-layer backward
    transient (activation gradients) it adds on top (``backward_transient_bytes``)."""
    out = memory_per_gpu(model, seq_len=2048, micro_batch=mb, num_micro_batches=m, tp=tp, pp=pp, dp=1, cp=1, ep=1,
                         vpp=vpp, zero=0, sp=sp, recompute_code=rc, flash=flash)
    return (float(out["activations"]) - float(backward_transient_bytes(model, 2048, mb, tp, 1))) / GiB


def test_backward_transient_is_the_mlp_hidden_gradients():
    m = get_model("llama3-8b")  # SwiGLU, f 14336 > h: the activation-output + fc1-output gradients bind
    assert float(backward_transient_bytes(m, 8192, 1, 2, 1)) == pytest.approx(2 * 3 * 14336 * 8192 / 2)
    g = get_model("gpt3-175b")  # GELU, f 4h
    assert float(backward_transient_bytes(g, 2048, 1, 8, 1)) == pytest.approx(2 * 2 * 4 * 12288 * 2048 / 8)
    q = get_model("qwen3-235b-a22b")  # 8 routed experts of width 1536 < h 4096: fc1-output + input gradients
    assert float(backward_transient_bytes(q, 4096, 1, 1, 1)) == pytest.approx(2 * 8 * (2 * 1536 + 4096) * 4096)
    assert float(backward_transient_bytes(q, 4096, 1, 1, 1, 4.0)) == pytest.approx(
        2 * float(backward_transient_bytes(q, 4096, 1, 1, 1)))


@pytest.mark.parametrize(
    "name,tp,pp,vpp,mb,sp,rc,want_gib",
    [
        ("gpt3-175b", 8, 8, 3, 1, True, 1, 12.35),  # SP + selective
        ("gpt3-175b", 8, 8, 3, 1, False, 0, 66.8),  # TP only
        ("gpt-22b", 8, 1, 1, 4, True, 1, 9.56),
        ("gpt-22b", 8, 1, 1, 4, False, 0, 59.2),
    ],
)
def test_korthikanti_fig1(name, tp, pp, vpp, mb, sp, rc, want_gib):
    m = get_model(name)
    assert _acts(m, tp=tp, pp=pp, vpp=vpp, mb=mb, m=64, sp=sp, rc=rc) == pytest.approx(want_gib, rel=0.01)


def test_table2_per_layer_forms():
    m = get_model("gpt3-175b")
    s, b, h, a, t = 2048, 1, 12288, 96, 8
    sbh = s * b * h
    stored, _ = activation_bytes_per_layer(m, s, b, t, 1, False, 0, False)
    assert float(stored) == pytest.approx(sbh * (10 + 24 / t + 5 * a * s / (h * t)))
    stored, _ = activation_bytes_per_layer(m, s, b, t, 1, True, 0, False)
    assert float(stored) == pytest.approx(sbh * (34 + 5 * a * s / h) / t)
    stored, _ = activation_bytes_per_layer(m, s, b, t, 1, True, 1, False)
    assert float(stored) == pytest.approx(34 * sbh / t)
    stored, _ = activation_bytes_per_layer(m, s, b, t, 1, True, 2, False)
    assert float(stored) == pytest.approx(2 * sbh / t)
    stored, _ = activation_bytes_per_layer(m, s, b, 1, 1, False, 0, False)
    assert float(stored) == pytest.approx(sbh * (34 + 5 * a * s / h))


def test_model_states_bytes_per_param():
    m = get_model("llama3-8b")
    kw = dict(seq_len=8192, micro_batch=1, num_micro_batches=8, tp=1, pp=1, cp=1, ep=1, sp=False, recompute_code=0)
    z0 = memory_per_gpu(m, dp=8, zero=0, **kw)
    n = float(z0["params_per_gpu"])
    assert float(z0["weights"] + z0["gradients"] + z0["optimizer"]) == pytest.approx(18 * n)
    z1 = memory_per_gpu(m, dp=8, zero=1, **kw)
    assert float(z1["weights"] + z1["gradients"] + z1["optimizer"]) == pytest.approx((6 + 12 / 8) * n)
    z2 = memory_per_gpu(m, dp=8, zero=2, **kw)
    # + Megatron-FSDP's two unit-sized unsharded gradient buckets (double buffer; a unit = one layer)
    two_units = 2 * GRAD_BYTES * n / m.num_layers
    assert float(z2["weights"] + z2["gradients"] + z2["optimizer"]) == pytest.approx((2 + 16 / 8) * n + two_units)


def test_megatron_fsdp_holds_two_unsharded_gradient_units():
    """Megatron-FSDP (ZeRO 2 = optim_grads, 3 = optim_grads_params) reduce-scatters every unit's unsharded
    gradient bucket after each backward, the buckets in a double buffer of two units (megatron_fsdp.py
    _grad_acc): ZeRO 2 and 3 hold two layers' unsharded gradients beyond the shard; PyTorch FSDP2 keeps its own
    rule (one unit at ZeRO 3, none at ZeRO 2)."""
    from clustertwin.workload.stacks import get_stack

    m = get_model("llama3-70b")
    kw = dict(seq_len=8192, micro_batch=1, num_micro_batches=8, tp=1, pp=1, cp=1, ep=1, sp=False, recompute_code=2,
              dp=64, grad_bytes=2.0)
    for zero in (2, 3):
        mcore = memory_per_gpu(m, zero=zero, stack=get_stack("megatron-bridge"), **kw)
        n = float(mcore["params_per_gpu"])
        assert float(mcore["gradients"]) == pytest.approx(2.0 * n / 64 + 2 * 2.0 * n / m.num_layers)
    fsdp2 = memory_per_gpu(m, zero=2, stack=get_stack("torchtitan"), **kw)
    assert float(fsdp2["gradients"]) == pytest.approx(2.0 * n / 64)


@settings(max_examples=40, deadline=None)
@given(tp_exp=st.integers(0, 2), zero=st.integers(0, 2), rc=st.sampled_from([0, 1, 2]), sp=st.booleans())
def test_memory_falls_as_tp_or_zero_rises(tp_exp, zero, rc, sp):
    m = get_model("llama3-70b")
    kw = dict(seq_len=8192, micro_batch=1, num_micro_batches=16, pp=4, dp=8, cp=1, ep=1, vpp=1, recompute_code=rc, sp=sp)
    tp = 2**tp_exp
    a = float(memory_per_gpu(m, tp=tp, zero=zero, **kw)["total"])
    b = float(memory_per_gpu(m, tp=tp * 2, zero=zero, **kw)["total"])
    c = float(memory_per_gpu(m, tp=tp, zero=zero + 1, **kw)["total"])
    assert b <= a
    assert c <= a


def test_memory_vectorised_equals_scalar():
    m = get_model("llama3-70b")
    tps = np.array([1, 2, 4, 8])
    out = memory_per_gpu(m, seq_len=8192, micro_batch=1, num_micro_batches=16, tp=tps, pp=4, dp=8, cp=1, ep=1, zero=1, sp=tps > 1)
    for i, t in enumerate(tps):
        one = memory_per_gpu(m, seq_len=8192, micro_batch=1, num_micro_batches=16, tp=int(t), pp=4, dp=8, cp=1, ep=1, zero=1, sp=t > 1)
        assert float(out["total"][i]) == pytest.approx(float(one["total"]))

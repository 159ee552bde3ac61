"""Full recompute as jax.checkpoint runs it (stack ``full_recompute = needed``, the jax-xla preset of MaxText / Pax):
the staged recompute is DCE'd to what the backward reads, so the dense MLP's down projection (fc2), whose output
only feeds the residual add, is not recomputed; every other forward cost is (docs/modelling.md "JAX / XLA")."""

from __future__ import annotations

from dataclasses import replace

import pytest

from clustertwin.sim.components.mlp import dense_down_proj_fwd
from clustertwin.sim.components.stage import stage_inputs
from clustertwin.sim.costs import make_hardware, stage_costs
from clustertwin.workload import ModelSpec
from clustertwin.workload.stacks import get_stack

LLAMA70B = ModelSpec(id="l70", num_layers=80, hidden_size=8192, num_attention_heads=64, num_kv_heads=8,
                     ffn_hidden_size=28672, vocab_size=32000, swiglu=True)
GPT5B = ModelSpec(id="g5", num_layers=24, hidden_size=4096, num_attention_heads=32, num_kv_heads=32,
                  ffn_hidden_size=16384, vocab_size=51200, swiglu=False)
PLAN = dict(tp=1, pp=1, dp=64, cp=1, ep=1, vpp=1, micro_batch=2, zero=3, global_batch=128, seq_len=4096)


def _hw(cat, dtype):
    s = cat.system("hgx-h100")
    return make_hardware(s, cat.fabric(s.default_scaleout), dtype, cat)


@pytest.mark.parametrize("model", [LLAMA70B, GPT5B])
@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_jax_full_recompute_leaves_out_the_down_projection_only(catalog, model, dtype):
    hw = _hw(catalog, dtype)
    pt, jx = get_stack("pytorch-fsdp"), get_stack("jax-xla")
    kw = dict(PLAN)
    full_pt = float(stage_costs(model, hw, recompute=2, stack=pt, **kw)["layer_recompute_s"])
    full_jx = float(stage_costs(model, hw, recompute=2, stack=jx, **kw)["layer_recompute_s"])
    st = stage_inputs(model, hw, **{k: v for k, v in kw.items() if k != "vpp"}, recompute=2, stack=jx)
    down = float(dense_down_proj_fwd(st))
    assert down > 0.0
    # the attention backend differs between the two presets (cuDNN vs FlashAttention-2 class), so compare the
    # jax-xla recompute with its own layer forward: everything but the down projection
    fwd_jx = stage_costs(model, hw, recompute=0, stack=jx, **kw)
    layer_fwd = float(fwd_jx["layer_fwd_gemm_s"] + fwd_jx["layer_fwd_attn_s"] + fwd_jx["layer_fwd_mem_s"])
    assert full_jx == pytest.approx(layer_fwd - down, rel=1e-9)
    assert full_jx < full_pt
    # the down projection is a quarter (GELU MLP: 4h^2 of 12h^2) to ~27 % (Llama 2 70B SwiGLU) of the layer's GEMMs
    assert 0.2 < down / float(fwd_jx["layer_fwd_gemm_s"]) < 0.4
    # the rule is the only difference from re-running the whole layer, and it changes full recompute only
    whole = replace(jx, id="jax-xla-whole-layer", full_recompute="layer")
    for rc in (0, 1, 2):
        a = float(stage_costs(model, hw, recompute=rc, stack=jx, **kw)["layer_recompute_s"])
        b = float(stage_costs(model, hw, recompute=rc, stack=whole, **kw)["layer_recompute_s"])
        assert (a == pytest.approx(b - down, rel=1e-9)) if rc == 2 else (a == b)
    assert float(stage_costs(model, hw, recompute=0, stack=jx, **kw)["layer_recompute_s"]) == 0.0


def test_only_the_jax_preset_prunes_the_recompute():
    from clustertwin.workload.stacks import STACKS

    assert {sid for sid in STACKS.names() if STACKS.get(sid).full_recompute == "needed"} == {"jax-xla"}
    assert all(STACKS.get(sid).full_recompute in ("layer", "needed") for sid in STACKS.names())

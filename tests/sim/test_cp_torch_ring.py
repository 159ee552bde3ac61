"""Context-parallel attention as PyTorch's context_parallel runs it (torchtitan): per-chunk SDPA calls over the
all-gathered K,V with FP32 merges, against the Llama 3 all-gather (one kernel) and TE's p2p ring."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from clustertwin.sim.components import attention
from clustertwin.sim.components.stage import stage_inputs
from clustertwin.sim.costs import make_hardware
from clustertwin.sim.kernels import mem_time
from clustertwin.workload import ModelSpec
from clustertwin.workload.stacks import get_stack

LLAMA8B = ModelSpec(id="l8", num_layers=32, hidden_size=4096, num_attention_heads=32, num_kv_heads=8,
                    ffn_hidden_size=14336, vocab_size=128256, swiglu=True)


def _stage(cat, stack, cp, cp_comm="allgather"):
    s = cat.system("hgx-h100")
    hw = make_hardware(s, cat.fabric(s.default_scaleout), "bf16", cat)
    return stage_inputs(LLAMA8B, hw, tp=1, pp=1, dp=8 // cp, cp=cp, ep=1, micro_batch=1, recompute=0, zero=3,
                        global_batch=8 // cp, seq_len=32768 * cp, cp_comm=cp_comm, stack=stack)


def test_torchtitan_cp_is_the_torch_ring():
    assert get_stack("torchtitan").cp_attention == "torch-ring"
    assert get_stack("torchtitan-2024").cp_attention == "torch-ring"
    assert get_stack("pytorch-fsdp").cp_attention == "fused"  # Llama 3: all-gather K,V, one kernel
    assert get_stack("megatron-core").cp_attention == "fused"


def test_torch_ring_adds_fp32_merges_per_step(catalog):
    tt = get_stack("torchtitan")
    fused = replace(tt, cp_attention="fused")
    for cp in (2, 4, 8):
        ring, one = attention.core(_stage(catalog, tt, cp)), attention.core(_stage(catalog, fused, cp))
        st = _stage(catalog, tt, cp)
        # the FLOPs are the same causal share; the ring adds c x 10 B per output element (forward) and per
        # dQ + dK,dV element (backward) of FP32 accumulation, plus the shorter per-call KV length s/c
        out = 32768.0 * 32 * 128
        kv = 32768.0 * 32 * 256  # torchtitan repeats the 8 KV heads to the 32 query heads before SDPA
        merge_f = float(mem_time(st.hw, cp * 10.0 * out, 2.0 * (cp - 1) + 1.0))
        merge_b = float(mem_time(st.hw, cp * 10.0 * (out + kv), 4.0 * (cp - 1) + 1.0))
        s, h, kern = 32768.0 * cp, st.hw.eff.attention_seq_half, st.hw.eff.kernel_overhead_s
        for r, o, merge, launches in ((ring.fwd_s, one.fwd_s, merge_f, 2), (ring.bwd_s, one.bwd_s, merge_b, 4)):
            flops_s = (float(o) - launches * kern) * s / (s + h)  # the kernel time at the asymptotic rate
            rolloff = flops_s * h * (cp - 1.0) / s  # KV length s/c per call instead of s
            assert float(r) - float(o) == pytest.approx(merge + rolloff, rel=1e-6)
    # without CP there is nothing to merge
    a, b = attention.core(_stage(catalog, tt, 1)), attention.core(_stage(catalog, fused, 1))
    assert np.allclose(a.fwd_s, b.fwd_s) and np.allclose(a.bwd_s, b.bwd_s)


def test_torch_ring_merges_cost_more_than_te_ring(catalog):
    """TE's p2p ring merges in the output dtype (6 B per element per step), PyTorch's in FP32 (10 B)."""
    te = get_stack("megatron-core")
    tt = replace(te, cp_attention="torch-ring")
    for cp in (2, 8):
        base = attention.core(_stage(catalog, te, 1, cp_comm="p2p"))
        a = attention.core(_stage(catalog, te, cp, cp_comm="p2p"))
        b = attention.core(_stage(catalog, tt, cp, cp_comm="p2p"))
        assert float(b.fwd_s) > float(a.fwd_s) and float(b.bwd_s) > float(a.bwd_s)
        assert float(a.fwd_s) > cp * float(base.fwd_s) * 0.99  # the causal work grows with s = c x 32K


def test_torchtitan_cp_exchanges_the_repeated_kv_heads(catalog):
    """torchtitan's llama3 Attention repeats the KV heads to the query heads before SDPA (stack sdpa_repeat_kv),
    so PyTorch's context_parallel all-gathers and rotates n_heads / n_kv_heads (here 4) times the GQA K,V."""
    from clustertwin.sim.components.cp_comm import cp_comm

    tt = get_stack("torchtitan")
    gqa = replace(tt, sdpa_repeat_kv=False)
    assert tt.sdpa_repeat_kv and get_stack("torchtitan-2024").sdpa_repeat_kv
    st_r, st_g = _stage(catalog, tt, 4), _stage(catalog, gqa, 4)
    assert float(attention.kv_elems_per_token(st_r)) == pytest.approx(4 * float(attention.kv_elems_per_token(st_g)))
    (fr, br, _), (fg, bg, _) = cp_comm(st_r), cp_comm(st_g)
    assert float(fr) > float(fg) and float(br) > float(bg)
    # nothing changes without CP
    a, b = attention.core(_stage(catalog, tt, 1)), attention.core(_stage(catalog, gqa, 1))
    assert np.allclose(a.bwd_s, b.bwd_s)

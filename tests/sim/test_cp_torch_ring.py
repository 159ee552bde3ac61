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


def _stage_nodes(cat, stack, cp, cp_comm="allgather", tp=8):
    """Llama 3 8B with TP 8 inside the host, so the CP ranks sit on different hosts (scale-out)."""
    s = cat.system("hgx-h100")
    hw = make_hardware(s, cat.fabric(s.default_scaleout), "bf16", cat)
    return stage_inputs(LLAMA8B, hw, tp=tp, pp=1, dp=1, cp=cp, ep=1, micro_batch=1, recompute=2, zero=3,
                        global_batch=1, seq_len=32768 * cp, cp_comm=cp_comm, stack=stack)


def test_torch_ring_waits_follow_the_ring_loop(catalog):
    """_templated_ring_attention: the K,V all-gather is waited for after step 0's SDPA (1/c of the pass), the
    last FP32 dK,dV hop of the backward after the loop; every other dK,dV hop hides behind one step."""
    from clustertwin.sim.comm import ALL_GATHER, SEND_RECV, collective_time
    from clustertwin.sim.components.cp_comm import torch_ring_waits

    tt = get_stack("torchtitan")
    for cp in (2, 4, 8):
        st = _stage_nodes(catalog, tt, cp)
        kv_bytes = 32768.0 * float(attention.kv_elems_per_token(st)) * 2.0
        ag = float(collective_time(ALL_GATHER, kv_bytes * cp, cp, 1.0, st.hw))
        hop32 = float(collective_time(SEND_RECV, kv_bytes * 2.0, 2.0, 1.0, st.hw))
        for attn_f, attn_b in ((1e-3, 2.5e-3), (10.0, 25.0)):
            wf, wb = torch_ring_waits(st, attn_f, attn_b)
            step_b = attn_b / cp
            assert float(wf) == pytest.approx(max(0.0, ag - attn_f / cp))
            assert float(wb) == pytest.approx(max(0.0, ag - step_b) + hop32 + (cp - 2) * max(0.0, hop32 - step_b))
        # a long enough attention hides all but the last dK,dV hop
        assert float(torch_ring_waits(st, 10.0, 25.0)[1]) == pytest.approx(hop32)
    # no CP: no waits
    st1 = _stage_nodes(catalog, tt, 1)
    assert float(torch_ring_waits(st1, 1.0, 2.5)[0]) == 0.0 and float(torch_ring_waits(st1, 1.0, 2.5)[1]) == 0.0


def test_torch_ring_waits_are_on_the_compute_stream(catalog):
    """The stage's attention time of a torch-ring stack includes the waits (and a full recompute re-runs the
    forward loop); a TE-ring stack hides the same exchange behind the whole attention core."""
    from clustertwin.sim.components.cp_comm import torch_ring_waits
    from clustertwin.sim.costs import stage_costs

    tt = get_stack("torchtitan")
    st = _stage_nodes(catalog, tt, 4)
    kw = dict(tp=8, pp=1, dp=1, cp=4, ep=1, vpp=1, micro_batch=1, recompute=2, zero=3, global_batch=1,
              seq_len=4 * 32768, cp_comm="allgather")
    with_waits = stage_costs(LLAMA8B, st.hw, stack=tt, **kw)
    core = attention.core(st)
    ce = tt.compute_efficiency
    wf, wb = torch_ring_waits(st, core.fwd_s / ce, core.bwd_s / ce)
    assert float(wb) > 0.0
    assert float(with_waits["layer_fwd_attn_s"]) == pytest.approx(float(core.fwd_s) / ce + float(wf))
    assert float(with_waits["layer_bwd_attn_s"]) == pytest.approx(float(core.bwd_s) / ce + float(wb))

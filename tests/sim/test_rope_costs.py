"""RoPE with a YaRN concentration factor (ModelSpec.rope_mscale != 1): Megatron-Core's apply_rotary_pos_emb
falls back from TE's fused RoPE to the eager _apply_rotary_pos_emb_bshd (sim/components/elementwise.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from clustertwin.sim.components.elementwise import elementwise
from clustertwin.sim.components.stage import stage_inputs
from clustertwin.sim.costs import make_hardware
from clustertwin.sim.kernels import mem_time
from clustertwin.workload import get_model
from clustertwin.workload.stacks import get_stack


def _stage(cat, model, stack, tp=1):
    s = cat.system("hgx-h100")
    hw = make_hardware(s, cat.fabric(s.default_scaleout), "bf16", cat)
    return stage_inputs(model, hw, tp=tp, pp=1, dp=8, cp=1, ep=8, micro_batch=4, recompute=1, zero=1,
                        global_batch=256, seq_len=4096, stack=stack)


def test_yarn_mscale_makes_megatron_rope_unfused(catalog):
    oss = get_model("gpt-oss-120b")
    assert oss.rope_mscale == pytest.approx(1.3466)  # 0.1 ln 32 + 1: YaRN factor 32 without mscale
    plain = replace(oss, rope_mscale=1.0)
    mc = get_stack("megatron-bridge")
    for tp in (1, 2):
        st = _stage(catalog, oss, mc, tp)
        f, b = elementwise(st)
        f0, b0 = elementwise(_stage(catalog, plain, mc, tp))
        # one pass (read or write) over the rank's queries and keys of the micro-batch, BF16
        e = 2.0 * (64 / tp + max(8 / tp, 1.0)) * 64 * st.tok
        assert float(f - f0) == pytest.approx(float(mem_time(st.hw, 10.0 * e, 22)))  # 12 E instead of 2 E
        assert float(b - b0) == pytest.approx(float(mem_time(st.hw, 13.0 * e, 16)))  # 17 E instead of 4 E
    # a stack whose RoPE code was not read keeps the fused price; so does mscale 1 (plain RoPE)
    tt = get_stack("torchtitan")
    assert elementwise(_stage(catalog, oss, tt)) == pytest.approx(elementwise(_stage(catalog, plain, tt)))


def test_rows_take_rope_mscale_from_the_zoo_model_only(validation_dir):
    import csv

    from clustertwin.validate import model_from_row

    rows = {r["id"]: r for r in csv.DictReader(open(validation_dir / "training.csv", encoding="utf-8"))}
    assert model_from_row(dict(rows["mbridge-93"], notes="")).rope_mscale == pytest.approx(1.3466)
    assert model_from_row(dict(rows["mbridge-93"], notes="", model="my-own-moe")).rope_mscale == 1.0
    assert model_from_row(dict(rows["mbridge-92"], notes="", num_layers="24")).rope_mscale == 1.0

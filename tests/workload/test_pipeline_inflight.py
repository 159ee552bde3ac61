"""Pipeline in-flight activations follow the schedules (workload/memory.py pipeline_inflight_layers)."""

import numpy as np
import pytest

from clustertwin.errors import InputError
from clustertwin.workload import get_model
from clustertwin.workload.memory import pipeline_inflight_layers
from clustertwin.workload.plan import check_plan, make_plan


@pytest.mark.parametrize("p,v,m", [(8, 3, 64), (4, 2, 16), (16, 2, 64)])
def test_default_group_equals_korthikanti_factor(p, v, m):
    L = 96
    first, last = pipeline_inflight_layers(L, p, v, m)
    assert float(first) == pytest.approx(L * (1 + (p - 1) / (p * v)))
    # last stage: (v-1)*p + 1 chunks of L/(p v) layers
    assert float(last) == pytest.approx(((v - 1) * p + 1) * L / (p * v))


def test_1f1b_first_and_last_stage():
    first, last = pipeline_inflight_layers(64, 8, 1, 32)
    assert float(first) == pytest.approx(8 * 8)  # min(p, m) micro-batches of L/p layers
    assert float(last) == pytest.approx(8)
    first, _ = pipeline_inflight_layers(64, 8, 1, 4)
    assert float(first) == pytest.approx(4 * 8)


def test_one_layer_fewer_on_edge_stages_and_all_warmup_when_m_equals_p():
    # Llama 3 405B: 126 layers on PP16 x V4 (128 slots): chunk 0 of stage 0 holds one layer
    first, _ = pipeline_inflight_layers(126, 16, 4, 32)
    assert float(first) == pytest.approx(31 * 1 + 16 * 2 * 3)  # 2p-1 of chunk 0, p of chunks 1-3
    first16, _ = pipeline_inflight_layers(126, 16, 4, 16)
    assert float(first16) == pytest.approx(16 * 7)  # m = p: every forward is warm-up (Megatron)


def test_larger_group_holds_more_and_vectorised():
    g = np.array([0, 16, 32])
    first, _ = pipeline_inflight_layers(128, 16, 4, 64, g)
    assert first[0] == first[1] < first[2]


def test_group_smaller_than_pp_is_rejected():
    model = get_model("llama3-405b")
    plan = make_plan(gpus=16384, tp=8, pp=16, vpp=4, global_batch=2048, seq_len=8192, microbatch_group=8)
    with pytest.raises(InputError, match="deadlocks"):
        check_plan(model, plan)
    check_plan(model, plan.with_(microbatch_group=16))


def test_cli_microbatch_group_flag():
    import json

    from typer.testing import CliRunner

    from clustertwin.cli import app

    base = ["estimate", "--model", "llama3-405b", "--system", "hgx-h100", "--gpus", "16384", "--tp", "8", "--pp", "16",
            "--vpp", "4", "--global-batch", "4096", "--seq-len", "8192", "--json"]
    runner = CliRunner()
    default = runner.invoke(app, base)
    assert default.exit_code == 0, default.output
    wide = runner.invoke(app, [*base, "--microbatch-group", "32"])
    assert wide.exit_code == 0, wide.output
    assert json.loads(wide.stdout)["memory_gb_per_gpu"] > json.loads(default.stdout)["memory_gb_per_gpu"]
    bad = runner.invoke(app, [*base, "--microbatch-group", "8"])
    assert isinstance(bad.exception, InputError) and "deadlocks" in bad.exception.message  # -> exit 2 in main


@pytest.mark.parametrize("L,p,v,m", [(126, 16, 4, 32), (126, 16, 4, 16), (96, 8, 3, 64), (80, 4, 5, 16),
                                     (126, 16, 1, 32), (126, 16, 2, 64)])
def test_formula_matches_the_event_engine_schedules(L, p, v, m):
    """Peak (F done, B not done) layer-micro-batches walked from the event engine's schedule orders."""
    from clustertwin.sim.event.adapter import layers_per_virtual_stage
    from clustertwin.sim.event.schedules import stage_order

    counts = layers_per_virtual_stage(L, p, v)

    def peak(i):
        cur = best = 0
        for kind, _mb, c in stage_order("interleaved" if v > 1 else "1f1b", p, m, v, i):
            cur += counts[c * p + i] if kind == "F" else -counts[c * p + i]
            best = max(best, cur)
        return best

    first, last = pipeline_inflight_layers(L, p, v, m)
    assert float(first) == peak(0)
    assert 0 <= peak(p - 1) - float(last) <= 1  # last stage: its 1-layer chunk may free before a 2-layer one

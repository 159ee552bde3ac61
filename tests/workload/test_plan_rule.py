"""The one plan rule (workload/rules.py): the vectorised mask the planner and estimate_batch use says
exactly what the scalar check of estimate/sweep/validate says; stack limits hold everywhere; the
planner's memory pruning and the engine agree, FP8 included."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustertwin.cli import main
from clustertwin.planner.evaluator import AnalyticalEvaluator
from clustertwin.sim import estimate_batch
from clustertwin.workload import get_model
from clustertwin.workload.plan import RECOMPUTE, ParallelPlan, plan_problems
from clustertwin.workload.rules import plan_mask
from clustertwin.workload.stacks import STACKS, get_stack

MODELS = ("llama3-8b", "llama3-70b", "mixtral-8x7b", "deepseek-v3")


@settings(max_examples=150, deadline=None)
@given(model=st.sampled_from(MODELS), tp=st.sampled_from([1, 2, 3, 4, 8, 16]), pp=st.sampled_from([1, 2, 3, 4, 8, 16]),
       dp=st.sampled_from([1, 2, 3, 4, 8]), cp=st.sampled_from([1, 2, 3, 4]), ep=st.sampled_from([1, 2, 4, 8]),
       vpp=st.sampled_from([1, 2, 3, 5]), mb=st.sampled_from([1, 2, 3]), gb=st.sampled_from([8, 24, 64, 96]),
       zero=st.sampled_from([0, 1, 2, 3]), rc=st.sampled_from(RECOMPUTE), seq=st.sampled_from([2048, 4096, 4098]),
       group=st.sampled_from([0, 1, 4, 64]), uneven=st.booleans(), flash=st.booleans(),
       stack=st.sampled_from(sorted(STACKS)))
def test_vectorised_mask_equals_the_scalar_check(model, tp, pp, dp, cp, ep, vpp, mb, gb, zero, rc, seq, group, uneven,
                                                 flash, stack):
    m = get_model(model)
    plan = ParallelPlan(tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, vpp=vpp, micro_batch=mb, global_batch=gb, seq_len=seq,
                        sequence_parallel=tp > 1, zero=zero, recompute=rc, flash_attention=flash,
                        uneven_pipeline=uneven, microbatch_group=group, stack=stack)
    problems = plan_problems(m, plan)
    arrays = {"tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": ep, "vpp": vpp, "micro_batch": mb, "global_batch": gb,
              "zero": zero, "recompute": RECOMPUTE.index(rc), "uneven": uneven, "mb_group": group, "sp": tp > 1,
              "flash": flash}
    assert bool(plan_mask(m, arrays, seq, get_stack(stack))) == (not problems), problems
    # the same plan inside a batch of others gives the same answer
    batch = {k: np.array([v, v]) for k, v in arrays.items()}
    assert plan_mask(m, batch, seq, get_stack(stack)).tolist() == [not problems] * 2


def _run(capsys, argv):
    with pytest.raises(SystemExit) as ei:
        main(argv)
    out = capsys.readouterr()
    return ei.value.code, out.out, out.err


BASE = ["estimate", "--model", "gpt3-175b", "--system", "dgx-a100", "--gpus", "64", "--tp", "8", "--pp", "8",
        "--global-batch", "64", "--seq-len", "2048"]


def test_estimate_refuses_what_the_stack_cannot_run(capsys):
    code, _, err = _run(capsys, BASE + ["--stack", "megatron-lm-2021", "--zero", "1"])
    assert code == 2, err
    assert "megatron-lm-2021" in err and "ZeRO" in err and "Traceback" not in err
    code, _, err = _run(capsys, BASE + ["--stack", "megatron-lm-2021", "--recompute", "none", "--zero", "0"])
    assert code == 2 and "recompute" in err, err


def test_estimate_takes_the_stacks_defaults(capsys):
    code, out, err = _run(capsys, BASE + ["--stack", "megatron-lm-2021", "--json"])
    assert code in (0, None), err
    plan = json.loads(out)["plan"]
    assert plan["zero"] == 0 and plan["recompute"] == "full" and plan["stack"] == "megatron-lm-2021"


@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_planner_memory_pruning_is_the_engines_memory(catalog, dtype):
    """The planner prunes with the memory the engine reports (FP8 included: it once omitted FP8's copies)."""
    m = get_model("llama3-70b")
    sysm, fab = catalog.system("hgx-h100"), catalog.fabric("ib-ndr-400g")
    plans = {"tp": np.array([8, 4, 8]), "pp": np.array([4, 8, 2]), "dp": np.array([4, 4, 8]), "cp": np.array([1, 1, 1]),
             "ep": np.array([1, 1, 1]), "vpp": np.array([1, 2, 1]), "micro_batch": np.array([1, 1, 2]),
             "zero": np.array([1, 1, 0]), "recompute": np.array([0, 1, 2])}
    ev = AnalyticalEvaluator(model=m, system=sysm, fabric=fab, num_gpus=128, global_batch=256, seq_len=8192,
                             dtype=dtype, catalog=catalog)
    engine = estimate_batch(m, sysm, fab, plans, seq_len=8192, global_batch=256, dtype=dtype, catalog=catalog)
    assert np.allclose(ev.memory_bytes(plans), engine["memory_gb_per_gpu"] * 1e9, rtol=1e-12)


def test_a_plan_that_passed_is_checked_again_for_another_model():
    """check_plan skips a plan object that passed for the same model and stack (workload/plan.py), and only that."""
    from clustertwin.errors import InputError
    from clustertwin.workload.plan import check_plan

    plan = ParallelPlan(tp=2, pp=1, dp=2, ep=2, micro_batch=1, global_batch=8, seq_len=4096)
    moe, dense = get_model("mixtral-8x7b"), get_model("llama3-8b")
    check_plan(moe, plan)
    check_plan(moe, plan)
    with pytest.raises(InputError, match="dense model"):
        check_plan(dense, plan)
    with pytest.raises(InputError, match="dense model"):
        check_plan(dense, plan)  # a failed check is never kept

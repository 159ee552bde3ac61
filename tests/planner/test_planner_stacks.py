"""Software stacks: the planner searches only what the framework can run, with its engine settings, and
the validator models each published run with the stack it used."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from clustertwin import api
from clustertwin.errors import InputError, UnknownNameError
from clustertwin.planner.planning import PlanRequest, plan
from clustertwin.planner.space import SpaceOptions
from clustertwin.validate import stack_for_row
from clustertwin.workload.stacks import STACKS, get_stack

REQ = dict(model="gpt3-175b", system="dgx-a100", num_gpus=1024, global_batch=1536, seq_len=2048,
           fabric="ib-hdr-200g")
VALIDATION = Path(__file__).resolve().parents[2] / "src" / "clustertwin" / "data" / "validation" / "training.csv"


def test_unknown_stack_suggests_the_closest():
    with pytest.raises(UnknownNameError) as exc:
        get_stack("megatron-lm-2020")
    assert "megatron-lm-2021" in exc.value.render()


def test_old_stack_searches_only_what_2021_megatron_could_run(catalog):
    rep = plan(PlanRequest(**REQ, top_k=20, distinct_layouts=False, stack="megatron-lm-2021"), catalog)
    assert rep.request["stack"] == "megatron-lm-2021" and len(rep.plans) == 20
    assert {p["zero"] for p in rep.plans} == {0}  # no distributed optimizer yet
    assert {p["cp"] for p in rep.plans} == {1}  # no context parallelism
    assert "selective" not in {p["recompute"] for p in rep.plans}


def test_a_knob_the_stack_lacks_is_a_clear_error(catalog):
    opts = SpaceOptions(fixed={"zero": (1,)})
    with pytest.raises(InputError) as exc:
        plan(PlanRequest(**REQ, stack="megatron-lm-2021", options=opts), catalog)
    assert "--stack" in exc.value.hint
    # worded by the one plan rule: the same sentence `estimate` gives for a plan with ZeRO-1 on that stack
    from clustertwin.workload.plan import make_plan
    from clustertwin.workload.rules import plan_problems

    p = make_plan(gpus=64, tp=8, pp=8, global_batch=64, seq_len=2048, zero=1, stack="megatron-lm-2021")
    assert exc.value.message in plan_problems(api.resolve_model("gpt3-175b"), p, get_stack("megatron-lm-2021"))
    assert exc.value.message == "the megatron-lm-2021 stack offers ZeRO stage(s) 0, not 1"


def test_planner_and_estimate_agree_on_one_plan_per_stack(catalog):
    """The stack's settings reach the planner's engine exactly as they reach `estimate`."""
    for stack in ("megatron-core", "megatron-lm-2021"):
        fixed = {"tp": (8,), "pp": (8,), "cp": (1,), "vpp": (2,), "micro_batch": (1,), "zero": (0,),
                 "recompute": (2,)}
        p = plan(PlanRequest(**REQ, top_k=1, stack=stack, options=SpaceOptions(fixed=fixed)), catalog).plans[0]
        sc = api.build_scenario(model="gpt3-175b", system="dgx-a100", gpus=1024, fabric="ib-hdr-200g", tp=8, pp=8,
                                vpp=2, micro_batch=1, global_batch=1536, seq_len=2048, zero=0, recompute="full",
                                stack=stack, catalog=catalog)
        assert sc.plan.stack == stack
        assert p["step_time_s"] == pytest.approx(api.simulate(sc).step_time_s, rel=1e-9)
    old = api.build_scenario(model="gpt3-175b", system="dgx-a100", gpus=1024, tp=8, pp=8, global_batch=1536,
                             zero=0, stack="megatron-lm-2021", catalog=catalog)
    assert not old.plan.flash_attention and not old.plan.overlap and old.plan.grad_reduce_bytes == 4
    assert not old.plan.sequence_parallel


def test_2021_software_is_slower_than_today_on_the_same_layout(catalog):
    fixed = {"tp": (8,), "pp": (8,), "cp": (1,), "micro_batch": (1,), "zero": (0,), "recompute": (2,)}
    t = {s: plan(PlanRequest(**REQ, top_k=1, stack=s, options=SpaceOptions(fixed=fixed)), catalog).plans[0]
         for s in ("megatron-core", "megatron-lm-2021")}
    assert t["megatron-lm-2021"]["step_time_s"] > 1.1 * t["megatron-core"]["step_time_s"]


def test_validator_models_each_published_run_with_its_stack():
    with VALIDATION.open(newline="", encoding="utf-8") as f:
        got = {r["id"]: stack_for_row(r).id for r in csv.DictReader(f)}
    assert got["mlm-sc21-t1-7"] == "megatron-lm-2021"
    assert got["korth-175B-present"] == "megatron-lm-2022"
    assert got["llama3-405b-t4-2"] == "pytorch-fsdp"
    assert got["mbridge-39"] == "megatron-bridge"
    assert got["mcore-h100-weak-1"] == "megatron-core"
    assert got["mlm-sc21-t2-1"] == "deepspeed-zero3-2021"
    assert got["mpt-8"] == "llm-foundry" and got["tt-h100-2412-t1-2"] == "torchtitan-2024"
    assert got["tt-h200-trainy-2"] == "torchtitan"


def test_stacks_command_lists_every_preset(ct):
    r = ct("stacks", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["default"] == "megatron-core"
    assert [s["id"] for s in doc["stacks"]] == list(STACKS)
    assert all(s["source"] for s in doc["stacks"])
    bad = ct("plan", "--stack", "megatron-lm-2020")
    assert bad.returncode == 2 and "megatron-lm-2021" in bad.stderr


def test_layout_caveats_name_what_the_model_leaves_out():
    """EP across scale-up domains on a Megatron stack: the all-to-all is priced exposed and the stack's
    overlap is named as unpriced; inside one domain, or on a stack without such an overlap, no caveat.
    Megatron-FSDP (ZeRO 2/3) with MoE or PP > 1 is flagged as not benchmark-validated; dense PP 1 is not."""
    from clustertwin.workload.stacks import CAVEAT_PREFIXES, layout_caveats

    mb = get_stack("megatron-bridge")
    across = layout_caveats(mb, is_moe=True, ep=32, etp=1, pp=8, zero=1, domain=8)
    assert len(across) == 1 and across[0].startswith(CAVEAT_PREFIXES[0]) and "moe_a2a_overlap" in across[0]
    assert layout_caveats(mb, is_moe=True, ep=8, etp=1, pp=8, zero=1, domain=8) == []  # one HGX domain
    assert layout_caveats(mb, is_moe=True, ep=64, etp=1, pp=1, zero=1, domain=72) == []  # one NVL72 domain
    assert layout_caveats(mb, is_moe=True, ep=8, etp=2, pp=1, zero=1, domain=8) != []  # etp 2: 2 domains
    assert layout_caveats(get_stack("hai-llm"), is_moe=True, ep=64, etp=1, pp=16, zero=1, domain=8) == []
    fsdp = layout_caveats(mb, is_moe=False, ep=1, etp=1, pp=4, zero=3, domain=8)
    assert len(fsdp) == 1 and fsdp[0].startswith(CAVEAT_PREFIXES[1]) and "pp 4" in fsdp[0]
    assert layout_caveats(mb, is_moe=True, ep=1, etp=1, pp=1, zero=2, domain=8)[0].startswith(CAVEAT_PREFIXES[1])
    assert layout_caveats(mb, is_moe=False, ep=1, etp=1, pp=1, zero=3, domain=8) == []  # the published case
    assert layout_caveats(get_stack("pytorch-fsdp"), is_moe=False, ep=1, etp=1, pp=4, zero=3, domain=8) == []


def test_estimate_and_plan_print_the_caveats(catalog):
    """`estimate` of a cross-node EP layout carries the EP caveat in its assumptions (and the CLI prints it);
    `plan` prints the caveats of its best plan."""
    sc = api.build_scenario(model="qwen3-30b-a3b", system="hgx-h100", gpus=16, ep=16, global_batch=64,
                            seq_len=4096, stack="megatron-bridge", catalog=catalog)
    r = api.estimate(sc)
    assert any(a.startswith("EP all-to-all: EP 16 crosses") for a in r.assumptions)
    sc8 = api.build_scenario(model="qwen3-30b-a3b", system="hgx-h100", gpus=16, ep=8, global_batch=64,
                             seq_len=4096, stack="megatron-bridge", catalog=catalog)
    assert not any(a.startswith("EP all-to-all") for a in api.estimate(sc8).assumptions)
    fixed = {"tp": (1,), "pp": (1,), "cp": (1,), "ep": (16,), "micro_batch": (1,), "zero": (2,), "recompute": (0,)}
    rep = plan(PlanRequest(model="qwen3-30b-a3b", system="hgx-h100", num_gpus=16, global_batch=64, seq_len=4096,
                           stack="megatron-bridge", top_k=1, options=SpaceOptions(fixed=fixed)), catalog)
    notes = [a for a in rep.assumptions if a.startswith("best plan: ")]
    assert [n.split(":")[1].strip() for n in notes] == ["EP all-to-all", "sharded DP"]

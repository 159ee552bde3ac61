"""One meaning per shared flag: --routing (and --topology/--fail-links) are refused with the reason where
no network model would use them; --oversubscription is the leaf down:up ratio everywhere, taken as the
worst case (each NIC at 1/ratio) by the analytical network, as plan does."""

from __future__ import annotations

import json

import pytest

from clustertwin.cli import main

EST = ["estimate", "--model", "llama3-70b", "--system", "hgx-h100", "--gpus", "256", "--tp", "8", "--pp", "4",
       "--global-batch", "256", "--seq-len", "4096", "--json"]
COLL = ["collective", "all_reduce", "--system", "hgx-h100", "--gpus", "64", "--sizes", "1GB", "--json"]


def _run(capsys, argv):
    with pytest.raises(SystemExit) as ei:
        main(argv)
    out = capsys.readouterr()
    return ei.value.code, out.out, out.err


@pytest.mark.parametrize("base", [EST, COLL], ids=["estimate", "collective"])
@pytest.mark.parametrize("flag", [["--routing", "spray"], ["--fail-links", "2"]])
def test_network_flags_need_the_flow_model(capsys, base, flag):
    code, _, err = _run(capsys, base + flag)
    assert code == 2, err
    assert f"{flag[0]} needs --network flow" in err and "Traceback" not in err


def test_oversubscription_is_the_plan_worst_case_in_estimate(capsys, catalog):
    from clustertwin import api

    code, out, err = _run(capsys, EST + ["--oversubscription", "2"])
    assert code in (0, None), err
    got = json.loads(out)["step_time_s"]
    sc = api.build_scenario(model="llama3-70b", system="hgx-h100", gpus=256, tp=8, pp=4, global_batch=256, seq_len=4096)
    worst = api.simulate(api.oversubscribed_scenario(sc, 2.0)).step_time_s
    assert got == pytest.approx(worst, rel=1e-12)
    assert got > api.simulate(sc).step_time_s  # DP crosses the leaves: slower at 2:1


def _options(command: str) -> dict[str, tuple]:
    import typer.main

    from clustertwin.cli import app

    cmd = typer.main.get_command(app).commands[command]
    return {p.name: (tuple(p.opts), tuple(p.secondary_opts), p.help) for p in cmd.params
            if hasattr(p, "help") and p.opts[0].startswith("-")}


SHAPE_PARAMS = ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "swiglu", "experts", "topk", "expert_ffn")


def test_plan_and_estimate_share_the_shape_flags_and_the_margin():
    est, plan = _options("estimate"), _options("plan")
    for name in SHAPE_PARAMS + ("memory_margin",):
        assert name in est and est[name] == plan[name], name  # one declaration (cli/_common.py)
    assert _options("compare")["memory_margin"] == _options("sweep")["memory_margin"] == est["memory_margin"]


def test_plan_takes_the_shape_flags(capsys):
    code, out, err = _run(capsys, ["plan", "--model", "llama3-70b", "--layers", "40", "--gpus", "64", "--no-store",
                                   "--json"])
    assert code in (0, None), err
    d = json.loads(out)
    assert d["request"]["model"] == "llama3-70b-custom" and d["plans"]
    code, out, err = _run(capsys, ["plan", "--layers", "16", "--hidden", "2048", "--heads", "16", "--vocab", "32000",
                                   "--gpus", "16", "--no-store", "--json"])
    assert code in (0, None), err
    assert json.loads(out)["request"]["model"] == "custom"
    # the same errors as estimate: a custom model without its required sizes, a non-positive size
    plan_base = ["plan", "--gpus", "16", "--no-store"]
    est_base = ["estimate", "--system", "hgx-h100", "--gpus", "16"]
    for base in (plan_base, est_base):
        for argv, text in ((["--layers", "16"], "a custom model needs --hidden, --heads, --vocab"),
                           (["--model", "llama3-8b", "--heads", "0"], "--heads must be a positive integer")):
            code, _, err = _run(capsys, base + argv)
            assert code == 2 and text in err, (base + argv, err)


OVERSUB_COMMANDS = {
    "cluster": ["cluster", "hgx-h100", "--domains", "2"],
    "bom": ["bom", "hgx-h100", "--domains", "2"],
    "fabric": ["fabric", "all_reduce", "--domains", "2"],
    "plan": ["plan", "--gpus", "16", "--no-store"],
    "estimate": EST,
    "collective": COLL,
    "schedule replay": ["schedule", "replay", "llm:5", "--domains", "2", "--no-store"],
}


@pytest.mark.parametrize("name", sorted(OVERSUB_COMMANDS))
def test_oversubscription_has_one_meaning_and_one_check(capsys, name):
    """Every command with --oversubscription refuses a ratio below 1 with the same sentence (one check,
    cluster/fattree.check_oversubscription) and describes it as the leaf's down:up port ratio."""
    code, _, err = _run(capsys, OVERSUB_COMMANDS[name] + ["--oversubscription", "0.5"])
    assert code == 2 and "--oversubscription must be >= 1 (the leaf's down:up port ratio), got 0.5" in err, err
    cmd = name.split()
    import typer.main

    from clustertwin.cli import app

    group = typer.main.get_command(app)
    for part in cmd:
        group = group.commands[part]  # type: ignore[attr-defined]
    (help_text,) = [p.help for p in group.params if "--oversubscription" in getattr(p, "opts", ())]
    assert help_text.startswith("Leaf down:up port ratio (>= 1; 1 = full bisection)"), help_text

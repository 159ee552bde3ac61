"""CLI: goodput / power / compare, JSON contracts and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "clustertwin", *args], capture_output=True, text=True, timeout=120)


def run_inproc(capsys, *args: str) -> tuple[int, str, str]:
    """In-process run through ``clustertwin.cli.main`` (same error mapping, no interpreter start-up)."""
    from clustertwin.cli import main

    with pytest.raises(SystemExit) as e:
        main(list(args))
    out = capsys.readouterr()
    return int(e.value.code or 0), out.out, out.err


def test_goodput_llama3_json():
    p = run("goodput", "--system", "hgx-h100", "--gpus", "16384", "--model", "llama3-405b", "--days", "54",
            "--monte-carlo", "200", "--seed", "3", "--no-plan", "--json")
    assert p.returncode == 0, p.stderr
    o = json.loads(p.stdout)
    assert o["unexpected_interruptions"] == pytest.approx(419, rel=0.01)
    assert 0.9 < o["ettr"] < 1
    assert o["monte_carlo"]["runs"] == 200
    assert o["tokens_per_day"] > 0 and "assumed MFU" in o["throughput_basis"]
    assert any("assign" in a for a in o["assumptions"])  # network split is flagged as an assumption


def test_compare_json_contract(capsys):
    rc, out, err = run_inproc(capsys, "compare", "gb200-nvl72x8@ib-ndr-400g", "cloudmatrix-384", "--model", "llama3-405b",
                              "--mfu", "0.4", "--json")
    assert rc == 0, err
    o = json.loads(out)
    assert [d["name"] for d in o["designs"]] == ["gb200-nvl72x8@ib-ndr-400g", "cloudmatrix-384"]
    for d in o["designs"]:
        for k in ("name", "num_accelerators", "power_kw", "peak_pflops_bf16", "hbm_tb", "hbm_tbps", "cost_usd",
                  "ettr", "tokens_per_usd"):
            assert d[k] is not None and (not isinstance(d[k], float) or d[k] > 0), k
    assert o["designs"][0]["num_accelerators"] == 576


def test_power_json(capsys):
    rc, out, err = run_inproc(capsys, "power", "gb200-nvl72x2", "--utilization", "0.8", "--pue", "1.2", "--price-kwh",
                              "0.08", "--json")
    assert rc == 0, err
    o = json.loads(out)
    assert o["facility_power_kw"] == pytest.approx(o["it_power_kw"] * 1.2)
    assert o["num_accelerators"] == 144


@pytest.mark.parametrize(
    "args, words",
    [
        (("power", "gb200-nvl72", "--pue", "0.9"), "pue"),
        (("power", "gb200-nvl72", "--price-kwh", "-1"), "price"),
        (("power", "gb200-nvl27"), "did you mean"),
        (("goodput", "--gpus", "64", "--model", "llama3-8b", "--rate", "accelerator=-2"), "positive"),
        (("goodput", "--gpus", "64", "--model", "llama3-8b", "--days", "0"), "days"),
        (("goodput", "--gpus", "64", "--model", "llama3-8b", "--checkpoint-interval", "0"), "interval"),
        (("goodput", "--gpus", "60", "--model", "llama3-8b"), "multiple"),
        (("compare", "gb200-nvl72", "cloudmatrix-384@ib-ndr-40g"), "did you mean"),
    ],
)
def test_bad_input_exits_2(capsys, args, words):
    rc, out, err = run_inproc(capsys, *args)
    assert rc == 2, (rc, out, err)
    assert words in err.lower() and "Traceback" not in err


def test_human_output_lists_assumptions(capsys):
    rc, out, err = run_inproc(capsys, "goodput", "--system", "gb200-nvl72", "--domains", "4", "--model", "llama3-70b",
                              "--no-plan")
    assert rc == 0, err
    assert "ETTR" in out and "Assumptions" in out and "spare domains of 72" in out


def test_compare_gives_step_time_when_gpu_count_does_not_divide_the_default_batch():
    """576 GPUs (8 NVL72 racks) cannot split the planner's default batch of 512 sequences; compare must
    still time the design, on a nearby batch it names."""
    import json
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "clustertwin", "compare", "gb200-nvl72x8@ib-ndr-400g",
                        "--model", "llama3-70b", "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)["designs"][0]
    assert d["num_accelerators"] == 576
    assert d["step_time_s"] and d["step_time_s"] > 0
    assert 0 < d["mfu"] < 1
    assert "global batch" in d["performance_basis"]


def test_compare_global_batch_fixes_the_planner_batch(capsys):
    """`compare --global-batch` plans every design at that batch, as a sweep does (issue #19)."""
    import json

    from clustertwin.cli import main

    try:
        main(["compare", "hgx-h100x16", "--model", "llama3-8b", "--global-batch", "256", "--json"])
    except SystemExit as e:
        assert not e.code
    d = json.loads(capsys.readouterr().out)["designs"][0]
    assert "global batch 256" in d["performance_basis"]
    assert d["plan"]["dp"] * d["plan"]["micro_batch"] <= 256
    try:
        main(["compare", "hgx-h100x16", "--model", "llama3-8b", "--global-batch", "0"])
    except SystemExit as e:
        assert e.code == 2

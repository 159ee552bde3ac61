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

"""``plan --from-row FILE.csv:ID``: the job of a validation row, compared with the row (issue #15)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from clustertwin.errors import InputError
from clustertwin.planner.fromrow import (
    breakdown_delta,
    published_tokens_per_s,
    read_row,
    request_from_row,
    row_estimate,
    row_layout,
)
from clustertwin.planner.planning import plan


def test_request_takes_the_job_from_the_row(catalog):
    req, row = request_from_row("training:mbridge-265", catalog)
    assert (req.num_gpus, req.global_batch, req.seq_len, req.dtype) == (8, 128, 8192, "fp8")
    assert req.stack.id == "megatron-bridge" and req.system.id == "hgx-h100"
    assert req.model.num_layers == int(row["num_layers"]) and req.model.hidden_size == int(row["hidden_size"])
    rep = plan(req, catalog)
    assert rep.plans and rep.request["gpus"] == 8
    pub = published_tokens_per_s(row)
    assert pub == pytest.approx(128 * 8192 / float(row["measured_step_time_s"]))
    assert row_layout(row)["dp"] == 8


def test_unknown_row_suggests(catalog):
    with pytest.raises(InputError, match="mbridge-2655"):
        read_row("training:mbridge-2655")
    with pytest.raises(InputError, match="FILE.csv:ID"):
        read_row("training")


def test_cli_from_row_json():
    p = subprocess.run([sys.executable, "-m", "clustertwin", "plan", "--from-row", "training:mbridge-265", "--json"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    fr = d["from_row"]
    assert fr["id"] == "mbridge-265" and fr["layout"]["dp"] == 8 and fr["published_tokens_per_s"] > 0
    assert fr["best_over_published"] == pytest.approx(d["plans"][0]["tokens_per_s"] / fr["published_tokens_per_s"])
    assert "stored" not in d
    own = fr["row_estimate"]  # the model at the row's layout (the validator's prediction of the row)
    assert own["measured_over_predicted"] == pytest.approx(own["tokens_per_s"] / fr["published_tokens_per_s"], rel=1e-6)
    # the per-term side-by-side is complete: the differences add up to the difference of the step times
    assert sum(fr["best_minus_row_s"].values()) == pytest.approx(d["plans"][0]["step_time_s"] - own["step_time_s"],
                                                                 abs=1e-6)
    bad = subprocess.run([sys.executable, "-m", "clustertwin", "plan", "--from-row", "training:mbridge-265",
                          "--gpus", "16"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--gpus" in bad.stderr and "Traceback" not in bad.stderr


def test_max_idle_gpus_takes_a_better_layout_and_says_so(catalog):
    """100,000 = 2^5 * 5^5 GPUs and a power-of-two batch admit no layout at all; 98,304 = 2^15 * 3
    (1,696 idle, within the default 2 %) admit many."""
    from clustertwin.planner.planning import PlanRequest, idle_candidates

    assert idle_candidates(100_000, 8, 2_000)[-1] == 98_304
    kw = dict(model="llama3-405b", system="hgx-h100", num_gpus=100_000, global_batch=32_768, seq_len=8192,
              fabric="ib-xdr-800g", top_k=3)
    with pytest.raises(InputError, match="no parallel layout"):
        plan(PlanRequest(max_idle_gpus=0, **kw), catalog)
    loose = plan(PlanRequest(**kw), catalog)
    used = loose.request["gpus_used"]
    assert 98_000 <= used < 100_000 and loose.request["idle_gpus"] == 100_000 - used
    assert f"uses {used:,} of 100,000 GPUs" in loose.request["idle_note"]
    for p in loose.plans:
        assert p["tp"] * p["pp"] * p["dp"] * p["cp"] == used
    with pytest.raises(InputError, match="max-idle"):
        plan(PlanRequest(max_idle_gpus=-1, **kw), catalog)


def test_side_by_side_of_a_moe_row(catalog):
    """mbridge-227 (Qwen3-30B-A3B, 8 B200, EP8 mb1): the best plan drops the EP all-to-all and amortises the
    per-micro-batch dispatcher stall; breakdown_delta names exactly those terms, largest first, and each
    term is the difference of the two breakdowns."""
    req, row = request_from_row("training:mbridge-227", catalog, top_k=1)
    best = plan(req, catalog).plans[0]
    own = row_estimate(row, catalog)
    d = breakdown_delta(best["breakdown"], own["breakdown"])
    assert [abs(v) for _, v in d] == sorted((abs(v) for _, v in d), reverse=True)
    for k, v in d:
        assert v == pytest.approx(best["breakdown"].get(k, 0.0) - own["breakdown"].get(k, 0.0))
    assert own["breakdown"]["ep_comm"] > 0 and sum(v for _, v in d) < 0  # the row's EP8 pays all-to-alls
    if best["ep"] == 1:  # no expert parallelism, no all-to-all: the whole term is a gain
        assert dict(d)["ep_comm"] == pytest.approx(-own["breakdown"]["ep_comm"])
    assert breakdown_delta({"a": 1.0}, {"a": 1.0, "b": 2.0}) == [("b", -2.0)]

"""One buildability check for plan, estimate, sweep, fabric, bom (cluster.buildable; issue #15)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from clustertwin import api
from clustertwin.cluster.buildable import check_buildable
from clustertwin.errors import InputError


def test_100k_h100_on_ndr_is_refused_with_what_works(catalog):
    sysm, ndr = catalog.system("hgx-h100"), catalog.fabric("ib-ndr-400g")
    with pytest.raises(InputError) as e:
        check_buildable(sysm, ndr, 100_000, catalog=catalog)
    msg, hint = e.value.message, e.value.hint
    assert "limit is 65536" in msg and "100,000 NIC ports" in msg
    assert "--topology dual-plane" in hint and "ib-ndr-400g-2plane" in hint and "ib-xdr-800g" in hint
    assert "at most 65,536 GPUs" in hint
    # every suggestion really builds
    check_buildable(sysm, ndr, 100_000, topology="dual-plane", catalog=catalog)
    assert check_buildable(sysm, catalog.fabric("ib-ndr-400g-2plane"), 100_000).scaleout.planes == 2
    check_buildable(sysm, catalog.fabric("ib-xdr-800g"), 200_000)
    check_buildable(sysm, catalog.fabric("ib-ndr-400g-2plane"), 200_000)
    check_buildable(sysm, ndr, 65_536)


def test_suggestions_only_name_the_callers_options(catalog):
    with pytest.raises(InputError) as e:
        check_buildable(catalog.system("hgx-h100"), catalog.fabric("ib-ndr-400g"), 100_000, catalog=catalog,
                        knobs=("fabric",))
    assert "--topology" not in e.value.hint and "--oversubscription" not in e.value.hint
    assert "--fabric ib-ndr-400g-2plane" in e.value.hint


def test_estimate_and_plan_refuse_what_cannot_be_built(catalog):
    with pytest.raises(InputError, match="cannot be built"):
        api.build_scenario(model="llama3-405b", system="hgx-h100", gpus=100_000, tp=8, pp=4, catalog=catalog)
    sc = api.build_scenario(model="llama3-405b", system="hgx-h100", gpus=100_000, tp=8, pp=4,
                            fabric="ib-ndr-400g-2plane", catalog=catalog)
    assert sc.plan.num_gpus == 100_000
    from clustertwin.planner.planning import PlanRequest, plan

    with pytest.raises(InputError, match="cannot be built") as e:
        plan(PlanRequest(model="llama3-405b", system="hgx-h100", num_gpus=100_000), catalog)
    assert "--fabric" in e.value.hint


def test_sweep_row_for_an_unbuildable_design_has_the_reason(catalog):
    from clustertwin.planner.space import SpaceOptions
    from clustertwin.planner.sweep import build_sweep, default_factory, design_cost_power, evaluate_job

    sw = build_sweep({"designs": [{"system": "hgx-h100", "gpus": [100_000]}], "models": ["llama3-8b"],
                      "global_batch": [1024]}, catalog)
    job = sw.jobs[0]
    row = evaluate_job(job, catalog, SpaceOptions(), default_factory, design_cost_power)
    assert row["feasible"] is False and row["reason"].startswith("cannot be built")


@pytest.mark.parametrize("cmd", [["fabric", "all_to_all", "--domains", "12500"],
                                 ["plan", "--gpus", "100000", "--no-store"],
                                 ["bom", "hgx-h100", "--domains", "12500"]])
def test_cli_exit_2_with_the_limit(cmd):
    p = subprocess.run([sys.executable, "-m", "clustertwin", *cmd], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stderr
    assert "cannot be built" in p.stderr and "limit is 65536" in p.stderr and "Traceback" not in p.stderr

"""One consistent set of power and cost assumptions in every command's output (issue #19).

Each assumption is worded once (``reliability.assumptions``); ``power``, ``compare``, ``serve plan`` and
``report`` state it with the same value and the same words, their figures for the same cluster agree,
and no output both prices the accelerators and says it has no price for them.
"""

from __future__ import annotations

import json

from cli_runner import pytest, run_cli
from clustertwin.cluster.bom import PARTIAL_COST_NOTE


def _json(capsys, *argv):
    code, out, err = run_cli(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def _by_key(lines):
    out = {}
    for ln in lines:
        key, _, rest = ln.partition(" = ")
        if rest:
            out[key] = ln
    return out


@pytest.mark.parametrize("system", ["hgx-h100", "gb200-nvl72"])
def test_the_lines_agree_across_commands(capsys, catalog, system):
    from clustertwin import api
    from clustertwin.report.collect import cluster_part

    gpus = catalog.system(system).devices_per_domain  # one whole scale-up domain
    pw = _json(capsys, "power", f"{system}x1")
    cmp_ = _json(capsys, "compare", f"{system}x1", "--no-plan")["designs"][0]
    srv = _json(capsys, "serve", "plan", "--model", "llama3-8b", "--system", system, "--gpus", str(gpus),
                "--input-len", "512", "--output-len", "128")["economics"]
    sc = api.build_scenario(model="llama3-8b", system=system, gpus=gpus, tp=4, global_batch=gpus, catalog=catalog)
    rep = cluster_part(sc)
    outputs = {"power": pw["assumptions"], "compare": cmp_["assumptions"], "serve plan": srv["notes"],
               "report": rep["power"]["assumptions"] + rep["cost"]["assumptions"]}
    keyed = {name: _by_key(lines) for name, lines in outputs.items()}
    cost_keys = [k for k in keyed["power"] if any(w in k for w in ("PUE", "energy price", "amortisation", "price",
                                                                    "utilisation", "power"))]
    assert any("PUE" in k for k in cost_keys) and any("energy price" in k for k in cost_keys)
    assert any("price per accelerator" in k for k in cost_keys)
    for key in cost_keys:
        stated = {name: kv[key] for name, kv in keyed.items() if key in kv}
        assert len(set(stated.values())) == 1, (key, stated)  # same value, same words everywhere
        assert len(stated) == len(outputs), (key, sorted(stated))  # and stated by every command
    for name, lines in outputs.items():
        assert PARTIAL_COST_NOTE not in lines, name  # the devices are priced: never "no device price"
    # the figures behind the lines agree too (serve plan on one whole domain = the design)
    assert srv["capex_usd"] == pytest.approx(cmp_["cost_usd"], rel=1e-9)
    assert rep["cost"]["capex_usd"] == pytest.approx(cmp_["cost_usd"], rel=1e-9)
    assert srv["facility_power_kw"] == pytest.approx(cmp_["facility_power_kw"], rel=1e-9)
    assert srv["usd_per_hour"] == pytest.approx(cmp_["usd_per_hour"], rel=1e-9)


def test_bom_rated_power_is_the_compare_rated_power(capsys):
    for system, domains in (("hgx-h100", 16), ("gb200-nvl72", 2)):
        bom = _json(capsys, "bom", system, "--domains", str(domains))
        cmp_ = _json(capsys, "compare", f"{system}x{domains}", "--no-plan")["designs"][0]
        assert cmp_["rated_power_kw"] == pytest.approx(bom["totals"]["power_kw"], rel=1e-9), system

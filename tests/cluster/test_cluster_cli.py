from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from clustertwin.cli import app, main

runner = CliRunner()


def run(*args):
    return subprocess.run([sys.executable, "-m", "clustertwin", *args], capture_output=True, text=True)


def test_cluster_json_is_one_document():
    r = runner.invoke(app, ["cluster", "hgx-h100", "--domains", "2048", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["devices"] == 16384 and d["hosts"] == 2048
    assert d["scaleout"]["switches_per_tier"] == [512, 512, 256]
    assert d["scaleout"]["bisection_per_device_gbps"] == pytest.approx(400)
    assert d["scaleup"]["bisection_per_device_gbps"] == pytest.approx(3600)


def test_graph_check_matches_closed_form():
    r = runner.invoke(app, ["cluster", "mi300x-8", "--domains", "8", "--graph-check", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    chk = d["graph_check"]
    assert chk["scaleup_bisection_per_device_gbps"] == pytest.approx(d["scaleup"]["bisection_per_device_gbps"])
    assert chk["scaleout_bisection_per_device_gbps"] == pytest.approx(d["scaleout"]["bisection_per_device_gbps"])


def test_cluster_route_option():
    r = runner.invoke(app, ["cluster", "gb200-nvl72", "--domains", "2", "--route", "0,100", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["route"]["layer"] == "scale-out" and d["route"]["switch_hops"] >= 1


def test_bom_json_and_text():
    r = runner.invoke(app, ["bom", "cloudmatrix-384", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["totals"]["optical_transceivers"] == 6912
    r = runner.invoke(app, ["bom", "gb200-nvl72", "--domains", "2"])
    assert r.exit_code == 0 and "optical transceivers" in r.stdout


@pytest.mark.parametrize(
    "args,needle",
    [
        (["cluster", "hgx-h10", "--domains", "2"], "did you mean"),
        (["cluster", "hgx-h100", "--domains", "2", "--fabric", "ib-ndr-40g"], "did you mean"),
        (["cluster", "hgx-h100", "--domains", "0"], ">= 1"),
        (["cluster", "hgx-h100", "--domains", "4", "--oversubscription", "0.5"], ">= 1"),
        (["cluster", "hgx-h100", "--domains", "9000"], "limit is 65536"),
        (["cluster", "gb200-nvl72", "--domain-size", "10"], "supported"),
        (["cluster", "hgx-h100", "--topology", "fat-tre"], "did you mean"),
        (["bom", "hgx-h100", "--domains", "2", "--tiers", "x"], "tiers"),
        (["catalog", "show", "hgx-h10"], "did you mean"),
        (["catalog", "list", "fabric"], "did you mean"),
    ],
)
def test_bad_input_exits_2_without_traceback(args, needle, capsys):
    # in-process through the real entry point (main maps InputError to exit 2); one subprocess case below
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    err = capsys.readouterr().err
    assert exc.value.code == 2, err
    assert needle in err and "Traceback" not in err


def test_bad_input_subprocess_exit_code():
    r = run("cluster", "hgx-h100", "--domains", "9000")
    assert r.returncode == 2 and "limit is 65536" in r.stderr and "Traceback" not in r.stderr


def test_malformed_user_catalog_names_file_entry_field(tmp_path):
    f = tmp_path / "mine.yaml"
    f.write_text(
        "systems:\n  my-box:\n    name: box\n    accelerator: h100-sxm\n    scaleup: nvlink4\n"
        "    devices_per_domain: 8\n    devices_per_host: 8\n    nics_per_host: 8\n    nic_gbps: fast\n"
        "    default_scaleout: ib-ndr-400g\n    source: my datasheet\n"
    )
    r = run("cluster", "my-box", "--catalog", str(f))
    assert r.returncode == 2
    assert "mine.yaml" in r.stderr and "systems.my-box" in r.stderr and "nic_gbps" in r.stderr

"""`clustertwin collective` and `clustertwin calibrate` through the real entry point."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

from clustertwin.collectives.nccl_tests import format_log


def run(*args, check=False):
    p = subprocess.run([sys.executable, "-m", "clustertwin", *args], capture_output=True, text=True, timeout=120)
    if check:
        assert p.returncode == 0, p.stderr
    return p


def test_table_has_nccl_tests_columns():
    p = run("collective", "all_reduce", "--system", "hgx-h100", "--domains", "1", "--sizes", "8:1M", check=True)
    lines = [ln for ln in p.stdout.splitlines() if ln and not ln.startswith("#")]
    assert len(lines) == 18  # 8 B .. 1 MiB, powers of two
    first = lines[0].split()
    assert first[:5] == ["8", "2", "float", "sum", "-1"]
    time_us, algbw = float(first[5]), float(first[6])
    assert time_us > 0 and algbw == 0.0  # 8 B: algbw rounds to 0.00 as in nccl-tests
    last = lines[-1].split()
    assert abs(float(last[7]) - float(last[6]) * 2 * 7 / 8) < 0.02  # busbw = algbw x 2(n-1)/n
    assert "time" in p.stdout and "busbw" in p.stdout


def test_json_is_one_document_with_rows():
    p = run("collective", "all_gather", "--system", "dgx-a100", "--domains", "2", "--sizes", "1M,1G", "--json", check=True)
    doc = json.loads(p.stdout)
    assert doc["n_ranks"] == 16 and doc["domains"] == 2 and doc["ranks_per_domain"] == 8
    assert [r["size_bytes"] for r in doc["rows"]] == [2**20, 2**30]
    r = doc["rows"][1]
    assert abs(r["busbw_GBps"] - r["algbw_GBps"] * 15 / 16) < 1e-6


def test_forced_algorithm_and_gpus_split():
    p = run("collective", "all_reduce", "--system", "hgx-h100", "--gpus", "32", "--algo", "ring", "--sizes", "1G", "--json", check=True)
    doc = json.loads(p.stdout)
    assert doc["domains"] == 4 and doc["rows"][0]["algorithm"] == "ring"


def test_bad_inputs_exit_2_with_a_message():
    p = run("collective", "allreduse", "--system", "hgx-h100")
    assert p.returncode == 2 and "all_reduce" in p.stderr and "Traceback" not in p.stderr
    p = run("collective", "all_reduce", "--sizes", "8X")
    assert p.returncode == 2 and "8X" in p.stderr
    p = run("collective", "all_reduce", "--sizes", "1G:1M")
    assert p.returncode == 2 and "empty" in p.stderr
    p = run("collective", "all_reduce", "--gpus", "12", "--domains", "5")
    assert p.returncode == 2
    p = run("collective", "all_reduce", "--system", "dgx-a100", "--algo", "nvls")
    assert p.returncode == 2 and "NVLS" in p.stderr


def test_calibrate_writes_overlay_that_load_catalog_uses(tmp_path):
    sizes = 2.0 ** np.arange(3, 34, 2)
    times = 30e-6 + sizes * 1.75 / 250e9
    log = tmp_path / "ar.log"
    log.write_text(format_log("all_reduce", sizes, times, 8, ["h1"], "NVIDIA H100 80GB HBM3"))
    out = tmp_path / "cal.yaml"
    p = run("calibrate", str(log), "--out", str(out), "--json", check=True)
    doc = json.loads(p.stdout)
    assert doc["out"] == str(out) and doc["systems"][0]["system"] == "hgx-h100"
    p2 = run("collective", "all_reduce", "--system", "hgx-h100", "--sizes", "8G", "--json", "--catalog", str(out), check=True)
    busbw = json.loads(p2.stdout)["rows"][0]["busbw_GBps"]
    assert abs(busbw - 250) / 250 < 0.10
    empty = tmp_path / "e.log"
    empty.write_text("")
    p3 = run("calibrate", str(empty), "--out", str(tmp_path / "x.yaml"))
    assert p3.returncode == 2 and "e.log" in p3.stderr
    assert not (tmp_path / "x.yaml").exists()

"""`clustertwin calibrate-gpu`: overlay derivation (no torch needed) and the CPU code path (torch)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest
import yaml

from clustertwin import calibrate_gpu as cg
from clustertwin.catalog import load_catalog
from clustertwin.errors import InputError

HAS_TORCH = importlib.util.find_spec("torch") is not None


def _measured():
    env = {"date": "2026-12-01T00:00:00Z", "torch": "2.13.0", "cuda": "12.8", "driver": "570.1", "device": "cuda",
           "gpu_name": "NVIDIA H200", "gpu_count": 8}
    gemm = [{"dtype": "bf16", "m": 8192, "n": 8192, "k": 8192, "time_s": 1.0, "tflops": 700.0},
            {"dtype": "bf16", "m": 1024, "n": 1024, "k": 1024, "time_s": 1.0, "tflops": 400.0},
            {"dtype": "fp8", "m": 8192, "n": 8192, "k": 8192, "time_s": 1.0, "tflops": 1300.0}]
    # rate(s) = 500 * s / (s + 1000): the fit must return r_inf 500, s_half 1000
    attn = [{"seq_len": s, "tflops": 500.0 * s / (s + 1000.0)} for s in (512, 2048, 8192)]
    coll = [{"op": "all_reduce", "size_bytes": 1 << 30, "n_ranks": 8, "time_s": 1.0, "busbw_GBps": 360.0},
            {"op": "all_reduce", "size_bytes": 1 << 20, "n_ranks": 8, "time_s": 1.0, "busbw_GBps": 50.0}]
    return {"environment": env, "gemm": gemm, "attention": attn, "copy": {"bytes": 1 << 31, "time_s": 1.0, "GBps": 4000.0},
            "collectives": coll}


def test_overlay_fractions_follow_the_measurements(catalog):
    spec = catalog.system("hgx-h200")
    ov = cg.derive_overlay(_measured(), spec)
    step = ov["calibration"]["step_efficiency"]["h200"]
    assert step["mamf_fraction"]["bf16"] == pytest.approx(700 / 989.4, rel=1e-3)
    assert step["mamf_fraction"]["fp8"] == pytest.approx(1300 / 1978.9, rel=1e-3)
    assert step["hbm_efficiency"] == pytest.approx(4000 / 4800, rel=1e-3)
    assert step["attention_efficiency"] == pytest.approx(500 / 989.4, rel=1e-3)
    assert step["attention_seq_half"] == pytest.approx(1000, rel=1e-3)
    # the largest all-reduce sets the scale-up fraction (450 GB/s per device on NVLink4)
    assert ov["calibration"]["collectives"]["hgx-h200"]["scaleup_busbw_fraction"] == pytest.approx(360 / 450, rel=1e-3)
    prof = ov["calibration"]["gpu_profile"]["h200"]
    assert prof["environment"]["gpu_name"] == "NVIDIA H200" and prof["environment"]["driver"] == "570.1"


def test_written_profile_is_a_catalog_overlay_that_changes_predictions(tmp_path, catalog):
    from clustertwin.collectives import collective_time

    path = cg.write_profile(cg.derive_overlay(_measured(), catalog.system("hgx-h200")), tmp_path / "p.yaml")
    cat2 = load_catalog([path])
    assert cat2.accelerator("h200").mamf_fraction["bf16"] == pytest.approx(700 / 989.4, rel=1e-3)
    spec, fab = cat2.system("hgx-h200"), cat2.fabric("ib-ndr-400g")
    t_cal = collective_time("all_reduce", 1 << 30, 8, 8, spec, fab, algo="ring", catalog=cat2)
    t_def = collective_time("all_reduce", 1 << 30, 8, 8, spec, fab, algo="ring", catalog=catalog)
    assert t_cal > t_def  # measured 0.80 of the link vs the shipped Hopper 0.822
    assert yaml.safe_load(path.read_text())["calibration"]["gpu_profile"]["h200"]["gemm"][0]["tflops"] == 700.0


def test_without_torch_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(InputError, match="PyTorch"):
        cg.run(device="cpu", system="hgx-h100")


@pytest.mark.skipif(not HAS_TORCH, reason="PyTorch not installed (optional extra `gpu`)")
def test_cpu_code_path_measures_and_writes(tmp_path):
    res = cg.run(device="cpu", system="hgx-h100", world=2)
    m = res["measured"]
    assert {g["dtype"] for g in m["gemm"]} == {"bf16"} and all(g["tflops"] > 0 for g in m["gemm"])
    assert [a["seq_len"] for a in m["attention"]] == list(cg.ATTN_SEQS_CPU)
    assert m["copy"]["GBps"] > 0
    ops = {r["op"] for r in m["collectives"]}
    assert ops == set(cg.COLL_OPS) and all(r["n_ranks"] == 2 and r["busbw_GBps"] > 0 for r in m["collectives"])
    path = cg.write_profile(res["overlay"], tmp_path / "cpu.yaml")
    assert load_catalog([path]).calibration["gpu_profile"]["h100-sxm"]["environment"]["device"] == "cpu"


@pytest.mark.skipif(not HAS_TORCH, reason="PyTorch not installed (optional extra `gpu`)")
def test_cli_without_gpu_exits_2():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible here")
    p = subprocess.run([sys.executable, "-m", "clustertwin", "calibrate-gpu", "--out", "unused.yaml"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "no CUDA GPU" in p.stderr


def test_profile_never_replaces_a_foreign_file(tmp_path, catalog):
    ov = cg.derive_overlay(_measured(), catalog.system("hgx-h200"))
    mine = cg.write_profile(ov, tmp_path / "p.yaml")
    cg.write_profile(ov, mine)  # its own profile: replaced
    other = tmp_path / "my-catalog.yaml"
    other.write_text("systems: {}\n")
    with pytest.raises(InputError, match="not a profile"):
        cg.write_profile(ov, other)
    assert other.read_text() == "systems: {}\n"

"""Slowest-GPU pace (sim/components/pace.py): the expected-maximum statistic and the opt-in step factor."""

from __future__ import annotations

import csv
from dataclasses import replace

import numpy as np
import pytest

from clustertwin.catalog import load_catalog
from clustertwin.sim.components.pace import expected_max_normal, slowest_gpu_factor
from clustertwin.validate import _estimate_row

# exact E[max of n standard normals] (tabulated order statistics; Harter 1961)
EXACT = {2: 0.5642, 4: 1.0294, 8: 1.4236, 16: 1.7660, 100: 2.5076}


def test_expected_max_matches_the_exact_order_statistic():
    assert expected_max_normal(1) == 0.0
    for n, exact in EXACT.items():
        assert expected_max_normal(n) == pytest.approx(exact, rel=0.05)
    ns = np.array([1.0, 2.0, 8.0, 100.0, 2048.0, 16384.0])
    z = expected_max_normal(ns)
    assert np.all(np.diff(z) > 0)  # grows with the job size
    assert [expected_max_normal(float(n)) for n in ns] == pytest.approx(list(z), rel=1e-12)  # scalar = array path
    assert slowest_gpu_factor(4096, 0.0) == 1.0
    assert slowest_gpu_factor(4096, 0.01) == pytest.approx(1.0 + 0.01 * expected_max_normal(4096))


@pytest.fixture(scope="module")
def row(validation_dir):
    with open(validation_dir / "training.csv", newline="", encoding="utf-8") as fh:
        return next(r for r in csv.DictReader(fh) if r["id"] == "mlm-sc21-t1-4")  # 256 A100 GPUs, tp 8 x dp 32


@pytest.mark.parametrize("engine", ["analytical", "event"])
def test_spread_slows_every_gpu_kernel_by_the_slowest_of_n(row, engine):
    """Off by default; with a catalog overlay each GPU kernel (GEMMs here) runs 1 + sigma z(num_gpus) as long,
    communication is untouched, and a bigger job pays more."""
    cat = load_catalog()
    chip = row["gpu"]
    paced = replace(cat, calibration={"step_efficiency": {chip: {"gpu_speed_spread": 0.02}}})
    base, slow = _estimate_row(row, cat, engine), _estimate_row(row, paced, engine)
    n = int(row["num_gpus"])
    if engine == "analytical":
        assert slow.breakdown["gemm"] == pytest.approx(base.breakdown["gemm"] * (1 + 0.02 * expected_max_normal(n)))
        assert slow.breakdown["tp_comm"] == pytest.approx(base.breakdown["tp_comm"])
    assert slow.step_time_s > base.step_time_s
    small = dict(row, num_gpus=str(n // 4), dp=str(int(row["dp"]) // 4), global_batch=str(int(row["global_batch"]) // 4))  # same work per GPU
    gain = lambda r: _estimate_row(r, paced, engine).step_time_s / _estimate_row(r, cat, engine).step_time_s  # noqa: E731
    assert gain(row) > gain(small) > 1.0

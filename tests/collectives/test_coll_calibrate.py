"""nccl-tests log parsing and the calibration round trip."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from clustertwin.catalog import load_catalog
from clustertwin.collectives import collective_time
from clustertwin.collectives.calibrate import calibrate, write_overlay
from clustertwin.collectives.nccl_tests import format_log, parse_log, parse_log_text, parse_sizes
from clustertwin.errors import InputError

REAL_HEADER = """# nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  23456 on gpu-node-3 device  0 [0x18] NVIDIA A100-SXM4-80GB
#  Rank  1 Group  0 Pid  23456 on gpu-node-3 device  1 [0x2a] NVIDIA A100-SXM4-80GB
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1    12.10    0.00    0.00      0    11.95    0.00    0.00      0
     1048576        262144     float     sum      -1    20.50   51.15   51.15      0    20.10   52.17   52.17      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 26.08
"""


def _synthetic_log(tmp_path, catalog, sid, n, hosts, truth, seed=7, noise=0.03):
    """A log in real nccl-tests format generated from the model with known parameters plus noise."""
    system = catalog.system(sid)
    fabric = catalog.fabric(system.default_scaleout)
    g = n // len(hosts)
    cat = SimpleNamespace(calibration={"collectives": {sid: truth}})
    sizes = parse_sizes("8:8G")
    rng = np.random.default_rng(seed)
    t = collective_time("all_reduce", sizes, n, g, system, fabric, "auto", cat) * np.exp(rng.normal(0, noise, sizes.size))
    return system, fabric, sizes, t, g


def test_parse_real_format_header_and_table():
    log = parse_log_text(REAL_HEADER, "ar.log")
    assert log.collective == "all_reduce"  # busbw/algbw = 2(n-1)/n = 1 for n = 2
    assert log.n_ranks == 2 and log.hosts == 1
    assert "A100" in log.device
    np.testing.assert_allclose(log.sizes, [8, 1048576])
    np.testing.assert_allclose(log.times_s, [11.95e-6, 20.10e-6])  # in-place


@pytest.mark.parametrize("noise", [0.0, 0.03])
def test_calibration_round_trip_predicts_held_out_sizes_within_10pct(tmp_path, catalog, noise):
    truth = {"latency_scale": 1.7, "scaleup_busbw_fraction": 0.70}
    system, fabric, sizes, t, g = _synthetic_log(tmp_path, catalog, "hgx-h100", 8, ["node01"], truth, noise=noise)
    fit_idx, held = np.arange(0, sizes.size, 2), np.arange(1, sizes.size, 2)
    log = tmp_path / "all_reduce_perf.log"
    log.write_text(format_log("all_reduce", sizes[fit_idx], t[fit_idx], 8, ["node01"], "NVIDIA H100 80GB HBM3"))
    res = calibrate([log], catalog)
    out = write_overlay(res["overlay"], tmp_path / "overlay.yaml")
    cat2 = load_catalog([out])
    assert cat2.calibration["collectives"]["hgx-h100"]["latency_scale"] == pytest.approx(1.7, rel=0.1)
    pred = collective_time("all_reduce", sizes[held], 8, g, system, fabric, "auto", cat2)
    err = np.abs(pred / t[held] - 1)
    assert err.max() < 0.10, err.max()
    # without the overlay the shipped model is clearly off for this (slower) system
    base = collective_time("all_reduce", sizes[held], 8, g, system, fabric, "auto", catalog)
    assert np.abs(base / t[held] - 1).max() > 0.15


def test_multinode_calibration_fits_the_network(tmp_path, catalog):
    truth = {"net_latency_scale": 2.0, "scaleout_busbw_fraction": 0.80}
    hosts = ["n1", "n2", "n3", "n4"]
    system, fabric, sizes, t, g = _synthetic_log(tmp_path, catalog, "dgx-a100", 32, hosts, truth, noise=0.02)
    log = tmp_path / "ar.log"
    log.write_text(format_log("all_reduce", sizes[::2], t[::2], 32, hosts, "NVIDIA A100-SXM4-80GB"))
    res = calibrate([log], catalog, system="dgx-a100")
    vals = res["report"][0]["values"]
    assert vals["scaleout_busbw_fraction"] == pytest.approx(0.80, rel=0.05)
    cat2 = load_catalog([write_overlay(res["overlay"], tmp_path / "o.yaml")])
    pred = collective_time("all_reduce", sizes[1::2], 32, 8, system, fabric, "auto", cat2)
    assert np.abs(pred / t[1::2] - 1).max() < 0.10


def test_overlay_write_is_atomic_and_merges(tmp_path, catalog):
    out = tmp_path / "ov.yaml"
    out.write_text("calibration:\n  other_engine:\n    x: {a: 1}\n")
    write_overlay({"calibration": {"collectives": {"hgx-h100": {"latency_scale": 1.2}}}}, out)
    data = yaml.safe_load(out.read_text())
    assert data["calibration"]["other_engine"]["x"] == {"a": 1}
    assert data["calibration"]["collectives"]["hgx-h100"]["latency_scale"] == 1.2
    assert [p.name for p in tmp_path.iterdir()] == ["ov.yaml"]  # no temp file left behind


def test_empty_and_unparseable_logs_name_the_file(tmp_path, catalog):
    empty = tmp_path / "empty.log"
    empty.write_text("")
    with pytest.raises(InputError, match="empty.log.*empty"):
        calibrate([empty], catalog)
    junk = tmp_path / "junk.log"
    junk.write_text("# nThread 1 nGpus 8\nsomething went wrong\n")
    with pytest.raises(InputError, match="junk.log.*no result table"):
        parse_log(junk)
    with pytest.raises(InputError, match="does not exist"):
        parse_log(tmp_path / "missing.log")
    with pytest.raises(InputError):
        calibrate([], catalog)


def test_unknown_device_needs_system(tmp_path, catalog):
    log = tmp_path / "x.log"
    log.write_text(REAL_HEADER.replace("NVIDIA A100-SXM4-80GB", "Mystery GPU"))
    with pytest.raises(InputError, match="--system"):
        calibrate([log], catalog)


def test_size_ranges_like_nccl_tests():
    s = parse_sizes("8:8G")
    assert s[0] == 8 and s[-1] == 8 * 2**30 and s.size == 31
    assert list(parse_sizes("1M:16M:4")) == [2**20, 2**22, 2**24]
    assert list(parse_sizes("1K,2K")) == [1024, 2048]
    for bad in ("8X", "8G:8", "", "1M:", "1M:1G:1"):
        with pytest.raises(InputError):
            parse_sizes(bad)

"""Every row of the published collectives CSV is modelled within the accuracy targets."""

from __future__ import annotations

import csv

import pytest

from clustertwin.collectives.validation import predict_busbw_row, run_rows


@pytest.fixture(scope="module")
def rows(validation_dir):
    path = validation_dir / "collectives.csv"
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_every_row_is_modelled_within_targets(rows, catalog):
    res = run_rows(rows, catalog)
    assert res["failed"] == 0
    assert len(res["rows"]) == len(rows)
    assert res["mape_pct"] <= 5.5, res["mape_pct"]
    assert res["mape_large_pct"] <= 3.0, res["mape_large_pct"]
    assert res["mape_small_pct"] <= 10.0, res["mape_small_pct"]


def test_h200_sweep_is_predicted_from_the_hopper_constants(rows, catalog):
    """H200 has no constants of its own: the nvlink4 fit carries to it (issue #14: 34 % mid-size before)."""
    from clustertwin.collectives import resolve_params
    from clustertwin.collectives.validation import size_band

    h100 = resolve_params(catalog.system("hgx-h100"), catalog.fabric("ib-ndr-400g"))
    h200 = resolve_params(catalog.system("hgx-h200"), catalog.fabric("ib-ndr-400g"))
    for key in ("latency_scale", "pipeline_fill_s", "pipeline_fill_max_s", "channel_launch_s", "small_msg_bw_fraction"):
        assert getattr(h100, key) == getattr(h200, key), key
    res = run_rows([r for r in rows if r["system"] == "hgx-h200"], catalog)
    bands: dict[str, list[float]] = {}
    for x in res["rows"]:
        bands.setdefault(size_band(x["size_bytes"]), []).append(abs(x["error_pct"]))
    assert set(bands) == {"<1MiB", "1-64MiB", ">=64MiB"}
    for band, errs in bands.items():
        assert sum(errs) / len(errs) <= 10.0, (band, errs)


def test_row_nics_override_the_system_default(rows, catalog):
    row = next(r for r in rows if r["id"] == "coll-a100-3node-4hdr")
    four = predict_busbw_row(row, catalog)
    eight = predict_busbw_row({**row, "nics_per_node": "8"}, catalog)
    assert four < 100.0  # 4 x HDR = 100 GB/s per node caps the ring
    assert eight > 1.5 * four


def test_missing_column_is_an_input_error(catalog):
    from clustertwin.errors import InputError

    with pytest.raises(InputError, match="size_bytes"):
        predict_busbw_row({"id": "x", "system": "hgx-h100", "num_gpus": "8", "collective": "all_reduce"}, catalog)


def test_by_system_size_band_prints_the_two_way_table():
    import json
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "clustertwin", "validate", "collectives", "--by", "system,size-band", "--json"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    cross = doc["by_cross"]
    assert cross["rows"] == "system" and cross["column_values"] == ["<1MiB", "1-64MiB", ">=64MiB"]
    rows = {t["value"]: t["cells"] for t in cross["table"]}
    assert set(rows) == {"dgx-a100", "hgx-h100", "hgx-h200"}
    assert sum(c["n"] for cells in rows.values() for c in cells.values()) == len(doc["rows"])
    # each cell is the MAPE of exactly its rows
    h200_large = [abs(r["error_pct"]) for r in doc["rows"] if r["id"] in {"coll-h200-8"} or
                  (r["id"].startswith("sweep-NDH200v5-") and int(r["id"].rsplit("-", 1)[1]) >= 17)]
    assert rows["hgx-h200"][">=64MiB"]["mape_pct"] == pytest.approx(sum(h200_large) / len(h200_large))

"""`validate` never lets a bad measurement or an out-of-range input into the MAPE (issue #19, item 6)."""

from __future__ import annotations

import csv

import pytest

from clustertwin.validate import validate_file


def _write(tmp_path, src, edits):
    with open(src, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
        header = reader.fieldnames
    base = rows[0]
    out_rows = [base] + [dict(base, id=f"bad-{i}", **e) for i, e in enumerate(edits)]
    path = tmp_path / "t.csv"
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=header)
        w.writeheader()
        w.writerows(out_rows)
    return validate_file(path)


@pytest.mark.parametrize(
    "edit, word",
    [
        ({"measured_step_time_s": "-3.5"}, "positive"),
        ({"measured_step_time_s": "nan"}, "positive"),
        ({"measured_step_time_s": "inf"}, "positive"),
        ({"measured_step_time_s": ""}, "no measurement"),
        ({"measured_step_time_s": "fast"}, "not a number"),
        ({"nic_gbps": "-200"}, "nic_gbps"),
        ({"hidden_size": "nan"}, "hidden_size"),
        ({"global_batch": "0"}, "global_batch"),
    ],
)
def test_bad_training_rows_are_failures_with_reason(tmp_path, validation_dir, edit, word):
    rep = _write(tmp_path, validation_dir / "training.csv", [edit])
    good, bad = rep.rows
    assert good.error_pct is not None
    assert bad.error_pct is None and word in bad.reason, bad.reason
    assert rep.mape_pct == pytest.approx(abs(good.error_pct))
    assert rep.to_dict()["failed"] == 1


@pytest.mark.parametrize("edit", [{"measured_busbw_GBps": "-1"}, {"measured_busbw_GBps": "nan"}, {"size_bytes": "-8"}])
def test_bad_collective_rows_are_failures_with_reason(tmp_path, validation_dir, edit):
    rep = _write(tmp_path, validation_dir / "collectives.csv", [edit])
    good, bad = rep.rows
    assert good.error_pct is not None
    assert bad.error_pct is None and bad.reason
    assert rep.to_dict()["failed"] == 1

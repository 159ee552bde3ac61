"""Accuracy regression guard: the published training runs (shared/validation/training.csv)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest

from clustertwin.validate import validate_file


@pytest.fixture(scope="module")
def report(validation_dir):
    return validate_file(validation_dir / "training.csv")


def _framework_of(validation_dir) -> dict[str, str]:
    with open(validation_dir / "training.csv", newline="", encoding="utf-8") as fh:
        return {r["id"]: r["framework"] for r in csv.DictReader(fh)}


def test_every_row_listed(report, validation_dir):
    """Every row of the file comes back, modelled or listed as a failure with its reason."""
    assert len(report.rows) == len(_framework_of(validation_dir))
    for r in report.failures:
        assert r.reason
    # Regression guard (issue #13 tracks the target of no failure at all).
    assert len(report.failures) <= 1, [(r.id, r.reason) for r in report.failures]


def test_mape_regression_guard(report, validation_dir):
    """Accuracy must not get worse than measured when this guard was set (see README's accuracy table).
    The Megatron-LM rows are where the fitted constants come from; the whole set is the regression bound."""
    fw = _framework_of(validation_dir)
    mlm = [abs(r.error_pct) for r in report.modelled if fw[r.id] == "megatron-lm"]
    assert len(mlm) >= 18 and sum(mlm) / len(mlm) <= 5.0
    assert report.mape_pct <= 15.5


def test_subset_any_order(tmp_path, validation_dir, report):
    src = validation_dir / "training.csv"
    with open(src, newline="") as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
        header = reader.fieldnames
    pick = [rows[40], rows[3], rows[20]]
    out = tmp_path / "subset.csv"
    with open(out, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=header)
        w.writeheader()
        w.writerows(pick)
    sub = validate_file(out)
    full = {r.id: r.predicted for r in report.rows}
    assert [r.id for r in sub.rows] == [p["id"] for p in pick]
    for r in sub.rows:
        assert r.predicted == pytest.approx(full[r.id], rel=1e-12)


def test_unmodellable_row_is_a_listed_failure(tmp_path, validation_dir):
    src = validation_dir / "training.csv"
    with open(src, newline="") as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
        header = reader.fieldnames
    bad = dict(rows[0], id="bad-row", gpu="tpu-v5p", system="tpu-v5p-pod")
    out = tmp_path / "bad.csv"
    with open(out, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=header)
        w.writeheader()
        w.writerows([rows[0], bad])
    rep = validate_file(out)
    assert rep.failures and rep.failures[0].id == "bad-row" and "no TPU model" in rep.failures[0].reason
    assert rep.to_dict()["failed"] == 1


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "clustertwin", *args], capture_output=True, text=True, timeout=120)


def test_cli_validate_json(validation_dir):
    p = _cli("validate", str(validation_dir / "training.csv"), "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert set(d) >= {"rows", "mape_pct"}
    assert {"id", "measured", "predicted", "error_pct"} <= set(d["rows"][0])
    assert d["mape_pct"] <= 20.0


def test_cli_validate_packaged_set_by_name():
    p = _cli("validate", "collectives", "--json")
    assert p.returncode == 0, p.stderr
    assert len(json.loads(p.stdout)["rows"]) > 50


def test_cli_validate_collectives_lists_rows(validation_dir):
    p = _cli("validate", str(validation_dir / "collectives.csv"), "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    with open(validation_dir / "collectives.csv", newline="", encoding="utf-8") as fh:
        assert len(d["rows"]) == sum(1 for _ in csv.DictReader(fh))
    for row in d["rows"]:
        assert row["error_pct"] is not None or row.get("reason")


def test_cli_estimate_json_contract():
    p = _cli("estimate", "--model", "gpt3-175b", "--system", "dgx-a100", "--gpus", "1024", "--tp", "8", "--pp", "8",
             "--global-batch", "1536", "--micro-batch", "1", "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    for k in ("step_time_s", "tokens_per_s", "mfu", "hfu", "tflops_per_gpu", "memory_gb_per_gpu", "fits_memory",
              "breakdown", "bottleneck"):
        assert k in d
    assert 0 < d["mfu"] < 1 and isinstance(d["breakdown"], dict)


def test_cli_estimate_scenario(tmp_path):
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    for f in sorted((root / "scenarios").glob("*.yaml")):
        p = _cli("estimate", str(f), "--json")
        assert p.returncode == 0, (f, p.stderr)
        assert json.loads(p.stdout)["step_time_s"] > 0


@pytest.mark.parametrize(
    "args",
    [
        ["estimate", "--model", "gpt3-175b", "--system", "dgx-a100", "--gpus", "1000", "--tp", "8", "--pp", "8"],
        ["estimate", "--model", "gpt3-17b", "--system", "dgx-a100", "--gpus", "64"],
        ["estimate", "--model", "gpt3-175b", "--system", "dgx-a100", "--gpus", "64", "--tp", "0"],
        ["estimate", "--model", "llama3-8b", "--system", "dgx-a100", "--gpus", "8", "--dtype", "fp8"],
        ["estimate", "--model", "gpt3-175b", "--system", "dgx-a100", "--gpus", "64", "--engine", "warp"],
        ["validate", "/no/such/file.csv"],
    ],
)
def test_bad_input_exit_2(args):
    p = _cli(*args)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "Traceback" not in p.stderr and p.stderr.strip()




def test_llama3_rows_reduce_gradients_in_fp32_and_fit(validation_dir):
    import csv

    from clustertwin.catalog import load_catalog
    from clustertwin.sim.analytical import estimate
    from clustertwin.validate import hardware_from_row, model_from_row, plan_from_row

    cat = load_catalog()
    with open(validation_dir / "training.csv", newline="", encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if r["id"].startswith("llama3-405b")]
    assert len(rows) == 3
    for r in rows:
        plan = plan_from_row(r)
        assert plan.grad_reduce_bytes == 4  # Llama 3 paper Sec. 3.3.2: FP32 reduce-scatter
        system, fabric = hardware_from_row(r, cat)
        res = estimate(model_from_row(r), system, fabric, plan, catalog=cat, check=False)
        assert res.fits_memory, (r["id"], res.memory_gb_per_gpu)  # ran at 8K without checkpointing


def test_every_shipped_scenario_pins_its_stack():
    """A scenario that reproduces a paper must run that paper's software (issue #19): no implicit default."""
    from pathlib import Path

    from clustertwin.userfiles import read_yaml

    root = Path(__file__).resolve().parents[2]
    for f in sorted((root / "scenarios").glob("*.yaml")):
        assert read_yaml(f, "scenario")["plan"].get("stack"), f

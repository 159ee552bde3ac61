"""Golden per-row predictions: the vendored public validation sets must predict exactly what
``predictions.json`` records (relative tolerance 1e-9).

This guards refactors that must not change numbers (the split of the step cost model into
``sim/components/``, the hardware view, registries). It is NOT an accuracy target: when you change a
prediction deliberately (a modelling fix, a new constant with its source), regenerate the file and say
so in the commit message, listing the rows that moved:

    CLUSTERTWIN_REGEN_GOLDEN=1 .venv/bin/python -m pytest tests/golden -q

With the switch set the test rewrites ``tests/golden/predictions.json`` from the current code and
passes; without it the test compares. ``git diff tests/golden/predictions.json`` then shows which rows
changed and by how much.

Covered: training.csv with the analytical and the event engine (step time per row), collectives.csv
(bus bandwidth per row). A row the model cannot predict is recorded as ``null`` with its reason, so a
row that starts or stops failing is a change too.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from clustertwin.validate import validate_file

GOLDEN = Path(__file__).with_name("predictions.json")
REGEN = os.environ.get("CLUSTERTWIN_REGEN_GOLDEN") == "1"
SETS = (("training", "analytical"), ("training", "event"), ("collectives", "analytical"))


def _key(name: str, engine: str) -> str:
    return name if name == "collectives" else f"{name}/{engine}"


def _current(validation_dir: Path, name: str, engine: str) -> dict[str, dict]:
    rep = validate_file(validation_dir / f"{name}.csv", engine=engine)
    out: dict[str, dict] = {}
    for r in rep.rows:
        assert r.id not in out, f"duplicate row id {r.id} in {name}.csv"
        out[r.id] = {"predicted": r.predicted, "reason": r.reason or None}
    return out


@pytest.mark.parametrize(("name", "engine"), SETS, ids=[_key(*s) for s in SETS])
def test_predictions_match_golden(validation_dir, name, engine):
    cur = _current(validation_dir, name, engine)
    key = _key(name, engine)
    if REGEN:
        data = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
        data[key] = cur
        GOLDEN.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        return
    assert GOLDEN.exists(), "tests/golden/predictions.json missing: run with CLUSTERTWIN_REGEN_GOLDEN=1"
    gold = json.loads(GOLDEN.read_text())[key]
    assert sorted(cur) == sorted(gold), "row ids differ from the golden file (regenerate if deliberate)"
    changed = []
    for rid, g in gold.items():
        c = cur[rid]
        gp, cp = g["predicted"], c["predicted"]
        if gp is None or cp is None:
            if gp != cp:
                changed.append((rid, gp, cp, c["reason"]))
        elif not math.isclose(cp, gp, rel_tol=1e-9, abs_tol=0.0):
            changed.append((rid, gp, cp))
    assert not changed, f"{len(changed)} {key} predictions changed (golden, now): {changed[:10]}"

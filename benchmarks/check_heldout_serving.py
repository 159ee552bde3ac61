"""Published serving results that are NOT in the serving validation set (a check only; nothing is fitted to
them): the error of `clustertwin validate` on benchmarks/data/heldout_serving.csv, per category and per row.
Prints figures; not a test.

    python benchmarks/check_heldout_serving.py [--file CSV] [--by COLS] [--ids REGEX] [--json]

``--ids REGEX`` runs only the rows whose id matches (re.search), e.g. ``--ids l40s`` or ``--ids 'llama3.1-8b'``:
a quick subset check (the full file takes ~10 min on a shared 2-core machine); the figures then cover that
subset only and say so.

The rows (benchmarks/data/README.md) are MLPerf Inference v5.1 results of systems serving.csv does not
contain (other submitters; the 72-GPU GB200 / GB300 NVL72 racks) and the CloudMatrix384 paper's
DeepSeek-R1 figures, copied from their sources with SERVING.md's conventions before any prediction was looked
at. What a source does not print (TP / EP, batch, precision, prompt length) is left blank, so the rows
exercise the validator's stated defaults the way an unseen published row does. They must never be picked,
changed or dropped because of what the model predicts; they say how the serving twin does on systems and
submissions it was not fitted to, the way check_heldout_training.py does for the training model.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

from _heldout_report import fmt, print_by, print_failed
from clustertwin.catalog import load_catalog
from clustertwin.serving.validation import validate_serving_rows
from clustertwin.validate import by_table, read_rows

HERE = Path(__file__).resolve().parent
DEFAULT = HERE / "data" / "heldout_serving.csv"
BY = ["source_group", "scenario_kind", "gpu_id", "model_ref", "framework"]


def run(path: Path, by: list[str], ids: str = "") -> dict:
    rows = read_rows(path)
    if ids:
        try:
            pat = re.compile(ids)
        except re.error as exc:
            raise SystemExit(f"--ids {ids!r} is not a regular expression: {exc}") from None
        rows = [r for r in rows if pat.search(r.get("id") or "")]
        if not rows:
            raise SystemExit(f"--ids {ids!r} matches no row id of {path.name}")
    t0 = time.perf_counter()
    rep = validate_serving_rows(rows, load_catalog())
    ok = rep.modelled
    return {
        "file": path.name, "ids": ids, "rows": len(rows), "modelled": len(ok), "seconds": time.perf_counter() - t0,
        "mape_pct": rep.mape_pct, "bias_pct": sum(r.error_pct for r in ok) / len(ok) if ok else None,
        "max_abs_error_pct": rep.max_abs_error_pct,
        "within_20_pct": sum(abs(r.error_pct) <= 20.0 for r in ok),
        "failed": [{"id": r.id, "reason": r.reason} for r in rep.failures],
        "by": by_table(rep, rows, by),
        "per_row": [r.to_dict() | {"note": r.note} for r in rep.rows],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--file", type=Path, default=DEFAULT, help="held-out CSV (serving.csv columns)")
    ap.add_argument("--by", default=",".join(BY), help="comma-separated columns for the per-category table")
    ap.add_argument("--ids", default="", help="only the rows whose id matches this regular expression (a subset)")
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    args = ap.parse_args()
    res = run(args.file, [c.strip() for c in args.by.split(",") if c.strip()], args.ids)
    if args.json:
        print(json.dumps(res, indent=1))
        return
    subset = f" (subset: ids matching {res['ids']!r})" if res["ids"] else ""
    print(f"{res['file']}: {res['rows']} held-out published serving results (never used for fitting){subset}")
    print(f"MAPE {fmt(res['mape_pct'], '.2f')} %, bias {fmt(res['bias_pct'], '+.1f')} %, max |error| "
          f"{fmt(res['max_abs_error_pct'], '.1f')} %, within 20 %: {res['within_20_pct']}/{res['modelled']}, "
          f"modelled {res['modelled']}/{res['rows']} ({res['seconds']:.0f} s)")
    print()
    print_by(res["by"], 14, 44)
    print("\n  every row (sorted by |error|):")
    for r in sorted(res["per_row"], key=lambda r: -abs(r["error_pct"] or 0.0)):
        if r["error_pct"] is None:
            continue
        print(f"    {r['id'][:78]:78s} measured {r['measured']:9.4g}  predicted {r['predicted']:9.4g}  "
              f"{r['error_pct']:+6.1f} %")
    print_failed(res["failed"])


if __name__ == "__main__":
    main()

"""Published training runs that are NOT in the validation set (a check only; nothing is fitted to them, except that
the 2,240-GPU MT-NLG run with a public Megatron-LM row derives megatron-deepspeed's compute_efficiency, docs/validation.md):
step-time error of `clustertwin validate` on benchmarks/data/heldout_training.csv, with both engines.
Prints figures; not a test.

    python benchmarks/check_heldout_training.py [--file CSV] [--engine analytical|event|both] [--worst N] [--json]

The rows (benchmarks/data/README.md) come from sources the packaged training.csv does not cite (NVIDIA
dgxc-benchmarking READMEs, MT-NLG 530B, the Nemotron-4 340B report, BLOOM-176B, the NeMo 24.07 performance
summary), plus one block (`mbperf-*`) of Megatron-Bridge performance-table MoE configurations that no training.csv
row has (another commit of a document training.csv cites). They were copied from those
sources and normalised with the validation README's conventions before any prediction was looked at, and
they must never be picked, changed or dropped because of what the model predicts. They say how the model
does on runs it was not fitted to, the way check_heldout_collectives.py does for the collective model.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from _heldout_report import fmt, print_by, print_failed
from clustertwin.catalog import load_catalog
from clustertwin.validate import by_table, read_rows, validate_rows

HERE = Path(__file__).resolve().parent
DEFAULT = HERE / "data" / "heldout_training.csv"
BY = ["framework", "gpu", "family", "precision"]


def run(path: Path, engines: list[str], worst: int) -> dict:
    rows = read_rows(path)
    cat = load_catalog()
    out: dict = {"file": path.name, "rows": len(rows), "engines": {}}
    for engine in engines:
        rep = validate_rows(rows, catalog=cat, engine=engine)
        ok = rep.modelled
        bias = sum(r.error_pct for r in ok) / len(ok) if ok else None
        out["engines"][engine] = {
            "mape_pct": rep.mape_pct, "bias_pct": bias, "max_abs_error_pct": rep.max_abs_error_pct,
            "modelled": len(ok), "failed": [{"id": r.id, "reason": r.reason} for r in rep.failures],
            "by": by_table(rep, rows, BY),
            "worst": [r.to_dict() | {"stack": r.stack, "note": r.note}
                      for r in sorted(ok, key=lambda r: -abs(r.error_pct))[:worst]],
            "per_row": {r.id: r.error_pct for r in rep.rows},
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--file", type=Path, default=DEFAULT, help="held-out CSV (training.csv columns)")
    ap.add_argument("--engine", choices=["analytical", "event", "both"], default="both")
    ap.add_argument("--worst", type=int, default=8, help="how many worst rows to list")
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    args = ap.parse_args()
    engines = ["analytical", "event"] if args.engine == "both" else [args.engine]
    res = run(args.file, engines, args.worst)
    if args.json:
        print(json.dumps(res, indent=1))
        return
    print(f"{res['file']}: {res['rows']} held-out published training runs (never used for fitting; mtnlg-530b-1 "
          "derives one framework constant, docs/validation.md)")
    for engine, e in res["engines"].items():
        print(f"\n== engine {engine}: MAPE {fmt(e['mape_pct'], '.2f')} %, bias {fmt(e['bias_pct'], '+.1f')} %, "
              f"max |error| {fmt(e['max_abs_error_pct'], '.1f')} %, modelled {e['modelled']}/{res['rows']}")
        print_by(e["by"], 10, 24)
        print("  worst rows:")
        for w in e["worst"]:
            print(f"    {w['id']:32s} measured {w['measured']:9.4g} s  predicted {w['predicted']:9.4g} s  "
                  f"{w['error_pct']:+6.1f} %  [{w['stack']}] {w['note'][:160]}")
        print_failed(e["failed"])
    if len(engines) == 2:
        a, b = (res["engines"][x]["per_row"] for x in engines)
        diffs = [abs(a[k] - b[k]) for k in a if a[k] is not None and b.get(k) is not None]
        if diffs:
            print(f"\nengines: largest per-row difference in error {max(diffs):.2f} points")


if __name__ == "__main__":
    main()

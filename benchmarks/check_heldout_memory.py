"""Published per-GPU training memory figures that are NOT in the validation set (a check only; nothing is
fitted to them): memory error of `clustertwin validate` on benchmarks/data/heldout_memory.csv. Prints
figures; not a test.

    python benchmarks/check_heldout_memory.py [--file CSV] [--json]

The rows (benchmarks/data/README.md, fixed selection rule) are every published peak-memory figure of the
cited documents that the packaged memory.csv does not hold: the rest of the torchtitan tables memory.csv
samples (H100 Dec-2024 benchmarks, the MXFP8 and NVFP4 docs) and Megatron-LM's training-analysis-tool table
(torch.cuda.max_memory_allocated of Llama 2 7B on one H800 node). They were copied from those sources and
normalised with the validation README's conventions before any prediction was looked at, and they must
never be picked, changed or dropped because of what the model predicts. The memory model has no fitted
constant (docs/modelling.md section 2), so the check and `clustertwin validate FILE` give the same figures.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from _heldout_report import fmt, print_by, print_failed
from clustertwin.catalog import load_catalog
from clustertwin.validate import by_table, memory_basis, read_rows, validate_file

HERE = Path(__file__).resolve().parent
DEFAULT = HERE / "data" / "heldout_memory.csv"
BY = ["framework", "gpu", "precision", "basis"]


def run(path: Path) -> dict:
    rows = read_rows(path)
    for r in rows:  # what the figure counts, as validate reads `memory_basis` (allocator / device)
        r["basis"] = memory_basis(r)[0]
    rep = validate_file(path, catalog=load_catalog())  # the memory validator, as `clustertwin validate FILE`
    ok = rep.modelled
    by_id = {r["id"]: r for r in rows}
    return {
        "file": path.name, "rows": len(rows), "mape_pct": rep.mape_pct,
        "bias_pct": sum(r.error_pct for r in ok) / len(ok) if ok else None,
        "max_abs_error_pct": rep.max_abs_error_pct, "modelled": len(ok),
        "failed": [{"id": r.id, "reason": r.reason} for r in rep.failures],
        "by": by_table(rep, rows, BY),
        "per_row": [r.to_dict() | {"stack": r.stack, "note": r.note, "framework": by_id[r.id]["framework"],
                                   "basis": by_id[r.id]["basis"]} for r in rep.rows],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--file", type=Path, default=DEFAULT, help="held-out CSV (memory.csv columns)")
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    args = ap.parse_args()
    res = run(args.file)
    if args.json:
        print(json.dumps(res, indent=1))
        return
    print(f"{res['file']}: {res['rows']} held-out published per-GPU memory figures (never used for fitting)")
    print(f"MAPE {fmt(res['mape_pct'], '.2f')} %, bias {fmt(res['bias_pct'], '+.1f')} %, "
          f"max |error| {fmt(res['max_abs_error_pct'], '.1f')} %, modelled {res['modelled']}/{res['rows']}")
    print_by(res["by"], 10, 24)
    print("  every row:")
    for w in res["per_row"]:
        if w["error_pct"] is None:
            continue
        print(f"    {w['id']:34s} measured {w['measured']:7.2f} GB  predicted {w['predicted']:7.2f} GB  "
              f"{w['error_pct']:+6.1f} %  [{w['stack']}, {w['basis']}] {w['note'][:120]}")
    print_failed(res["failed"])


if __name__ == "__main__":
    main()

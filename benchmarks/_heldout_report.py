"""Printing shared by the held-out checks (check_heldout_training / _memory / _serving): the per-category
table that `clustertwin.validate.by_table` returns and the list of rows that could not be modelled."""

from __future__ import annotations


def fmt(x: float | None, spec: str = "6.1f") -> str:
    """A figure in `spec`, or a dash where there is none (a category with no modelled row)."""
    return format(x, spec) if x is not None else f"{'-':>6s}"


def print_by(by: list[dict], column_width: int = 10, value_width: int = 24) -> None:
    """The per-category table: column, value, n, MAPE, bias, max |error| and the worst row of each."""
    print(f"  {'column':{column_width}s} {'value':{value_width}s} {'n':>3s} {'MAPE %':>7s} {'bias %':>7s} "
          f"{'max %':>6s}  worst")
    for s in by:
        print(f"  {s['column']:{column_width}s} {s['value'][:value_width]:{value_width}s} {s['n']:3d} "
              f"{fmt(s['mape_pct'], '7.1f')} {fmt(s['bias_pct'], '+7.1f')} "
              f"{fmt(s['max_abs_error_pct'], '6.1f')}  {s['worst'] or ''}")


def print_failed(failed: list[dict]) -> None:
    """Every row that could not be modelled, with why."""
    print(f"  not modelled: {len(failed)}")
    for f in failed:
        print(f"    {f['id']}: {f['reason']}")

"""Terminal output shared by every command: progress bars on stderr (stdout stays clean for --json
and pipes). One place decides how output adapts to the terminal."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text


class _Bar:
    def __init__(self, progress: Progress | None):
        self.progress = progress
        self.task = None

    def __call__(self, done: int, total: int) -> None:
        if self.progress is None:
            return
        if self.task is None:
            self.task = self.progress.add_task("", total=total, completed=done)
        else:
            self.progress.update(self.task, completed=done, total=total)


@contextmanager
def progress_bar(label: str, *, unit: str = "", enabled: bool = True) -> Iterator[Callable[[int, int], None]]:
    """A ``progress(done, total)`` callback that draws a bar on stderr while the block runs.

    Draws nothing when ``enabled`` is false or stderr is not a terminal (logs and pipes stay clean)."""
    from ._common import console_err

    if not enabled or not console_err.is_terminal:
        yield _Bar(None)
        return
    cols = [TextColumn(label), BarColumn(), MofNCompleteColumn()]
    if unit:
        cols.append(TextColumn(unit))
    cols += [TimeElapsedColumn(), TimeRemainingColumn()]
    progress = Progress(*cols, console=console_err, transient=True)
    progress.start()
    try:
        yield _Bar(progress)
    finally:
        progress.stop()


# ----------------------------------------------------------------------------------- tables
FORMATS = ("auto", "rich", "plain", "csv")


def table_rows(t: Table) -> tuple[list[str], list[list[str]], list[str]]:
    """A rich table as plain strings: headers, rows, and each column's justification."""
    cols = t.columns
    heads = [_plain(c.header) for c in cols]
    n = max((len(c._cells) for c in cols), default=0)
    rows = [[_plain(c._cells[i]) if i < len(c._cells) else "" for c in cols] for i in range(n)]
    return heads, rows, [c.justify or "left" for c in cols]


def _plain(cell: Any) -> str:
    if isinstance(cell, Text):
        return cell.plain
    return str(cell)  # the consoles print without markup: a string cell is its own text


def plain_table(t: Table) -> str:
    """Aligned text without box characters or wrapping: survives pipes, files, diff and grep."""
    heads, rows, just = table_rows(t)
    show_head = t.show_header
    body = ([heads] if show_head else []) + rows
    widths = [max((len(r[i]) for r in body), default=0) for i in range(len(heads))]
    lines = []
    if t.title:
        lines.append(_plain(t.title))
    for k, r in enumerate(body):
        cells = [c.rjust(w) if j == "right" else c.ljust(w) for c, w, j in zip(r, widths, just, strict=True)]
        lines.append("  ".join(cells).rstrip())
        if show_head and k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines) + "\n"


def csv_table(t: Table) -> str:
    import csv
    import io

    heads, rows, _ = table_rows(t)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(heads if t.show_header else [f"col{i + 1}" for i in range(len(heads))])
    w.writerows(rows)
    return buf.getvalue()


class OutputConsole(Console):
    """stdout for every command. Tables adapt to where they go: on a terminal rich draws them to its
    width; in a pipe or file (or ``--format plain``) they are plain aligned text at full width; with
    ``--format csv`` stdout carries only CSV (one block per table) and other lines go to stderr."""

    def __init__(self, *a: Any, **kw: Any):
        super().__init__(*a, **kw)
        self.table_format = os.environ.get("CLUSTERTWIN_FORMAT") or "auto"
        self._csv_blocks = 0

    def mode(self) -> str:
        f = self.table_format
        if f == "auto":
            return "rich" if self.is_terminal else "plain"
        return f

    def print(self, *objects: Any, **kw: Any) -> None:  # noqa: A003 - rich's name
        mode = self.mode()
        if len(objects) == 1 and isinstance(objects[0], Table) and mode != "rich":
            t = objects[0]
            if mode == "csv":
                text = ("\n" if self._csv_blocks else "") + csv_table(t)
                self._csv_blocks += 1
            else:
                text = plain_table(t)
            self.file.write(text)
            self.file.flush()
            return
        if mode == "csv":  # keep stdout machine-readable: prose goes to stderr
            from ._common import console_err

            console_err.print(*objects, **kw)
            return
        if mode == "plain":
            kw.setdefault("soft_wrap", True)  # no hard wrap at 80 columns in pipes
        super().print(*objects, **kw)


__all__ = ["FORMATS", "OutputConsole", "csv_table", "plain_table", "progress_bar", "table_rows"]

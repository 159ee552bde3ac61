"""Terminal output shared by every command: progress bars on stderr (stdout stays clean for --json
and pipes). One place decides how output adapts to the terminal."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from ._common import console_err


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


__all__ = ["progress_bar"]

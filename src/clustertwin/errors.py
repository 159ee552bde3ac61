"""Errors for users. ``InputError`` means the input is wrong (exit code 2); anything else
is our bug (exit code 1). Every message says what is wrong and how to fix it."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager


class InputError(ValueError):
    """Bad user input: a clear message, an optional hint and close matches."""

    def __init__(self, message: str, *, hint: str | None = None, suggestions: Iterable[str] = ()):
        self.message = message
        self.hint = hint
        self.suggestions = tuple(suggestions)
        super().__init__(self.render())

    def render(self) -> str:
        text = self.message
        if self.suggestions:
            quoted = ", ".join(repr(s) for s in self.suggestions)
            text += f" — did you mean {quoted}?"
        if self.hint:
            text += f"\nHint: {self.hint}"
        return text


class UnknownNameError(InputError):
    """A name that is not in a registry; suggests the closest known names."""

    def __init__(self, kind: str, name: str, known: Iterable[str], *, hint: str | None = None):
        known = sorted(known)
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
        if not close:
            low = name.lower()
            close = [k for k in known if low in k or k in low][:3]
        self.kind = kind
        self.name = name
        super().__init__(
            f"unknown {kind} {name!r}",
            hint=hint or f"known {plural(kind)}: {', '.join(known[:40])}{' ...' if len(known) > 40 else ''}",
            suggestions=close,
        )


def plural(noun: str) -> str:
    """English plural of the last word of ``noun`` ("policy" -> "policies", "switch" -> "switches")."""
    if noun.endswith("y") and noun[-2:-1] not in ("a", "e", "i", "o", "u"):
        return noun[:-1] + "ies"
    if noun.endswith(("s", "x", "z", "ch", "sh")):
        return noun + "es"
    return noun + "s"


def closest(name: str, known: Iterable[str], n: int = 3) -> list[str]:
    return difflib.get_close_matches(name, list(known), n=n, cutoff=0.5)


@contextmanager
def in_file(label: str) -> Iterator[None]:
    """Name the user file an InputError came from (``s.yaml: unknown system 'hgx-h10'``), once."""
    try:
        yield
    except InputError as exc:
        if label not in exc.message:
            exc.message = f"{label}: {exc.message}"  # the same error (and type), with the file named
            exc.args = (exc.render(),)
        raise

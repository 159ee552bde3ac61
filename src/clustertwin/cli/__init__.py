"""The ``clustertwin`` command line. Thin: parse, call ``clustertwin.api``, render.

Errors: ``InputError`` -> one paragraph on stderr, exit 2; any other exception -> a short
message on stderr, exit 1 (set ``CLUSTERTWIN_DEBUG=1`` for the traceback).
"""

from __future__ import annotations

import math
import os
import re
import sys

import typer

from ..errors import InputError

# Command modules register themselves on ``app`` when imported: one module per area, so that each
# area's commands live next to nothing else.
from . import (  # noqa: E402,F401
    catalog_cmd,
    cluster_cmd,
    collective_cmd,
    estimate_cmd,
    fabric_cmd,
    models_cmd,
    plan_cmd,
    reliability_cmd,
    report_cmd,
    schedule_cmd,
    serve_cmd,
    ui_cmd,
)
from ._common import app, console_err, styled

_NON_FINITE = re.compile(r"^[+-]?(nan|inf|infinity)$", re.IGNORECASE)


def _refuse_non_finite(argv: list[str]) -> None:
    """NaN or an infinity anywhere on the command line is bad input (numbers must be finite): typer's
    float options would take "nan", "inf" and "1e999" as they are."""
    for i, tok in enumerate(argv):
        opt, _, value = tok.partition("=") if tok.startswith("--") and "=" in tok else (argv[i - 1] if i else "", "", tok)
        try:
            x = float(value)
        except ValueError:
            continue
        if _NON_FINITE.match(value.strip()) or not math.isfinite(x):
            where = f"{opt} " if opt.startswith("-") else ""
            raise InputError(f"{where}{value!r} is not a finite number", hint="give a finite number such as 8 or 0.5")


def main(argv: list[str] | None = None) -> None:
    try:
        _refuse_non_finite(list(sys.argv[1:] if argv is None else argv))
        app(args=argv, standalone_mode=True, prog_name="clustertwin")
    except InputError as exc:
        console_err.print(styled("error:", "bold red", f" {exc.render()}"), highlight=False, soft_wrap=True)
        sys.exit(2)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        console_err.print("interrupted")
        sys.exit(130)
    except Exception as exc:  # our bug: short message, no traceback unless asked
        if os.environ.get("CLUSTERTWIN_DEBUG"):
            raise
        console_err.print(
            styled("internal error:", "bold red", f" {type(exc).__name__}: {exc}\n"
                   "This is a ClusterTwin bug; rerun with CLUSTERTWIN_DEBUG=1 for the traceback and report it."),
            highlight=False,
        )
        sys.exit(1)


__all__ = ["app", "main", "typer"]

"""The ``clustertwin`` command line. Thin: parse, call ``clustertwin.api``, render.

Errors: ``InputError`` -> one paragraph on stderr, exit 2; any other exception -> a short
message on stderr, exit 1 (set ``CLUSTERTWIN_DEBUG=1`` for the traceback).
"""

from __future__ import annotations

import os
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
    plan_cmd,
    reliability_cmd,
    report_cmd,
    schedule_cmd,
    serve_cmd,
)
from ._common import app, console_err, styled


def main(argv: list[str] | None = None) -> None:
    try:
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

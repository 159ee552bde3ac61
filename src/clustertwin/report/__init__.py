"""Presentation of results: tables, plots, HTML, Chrome traces. Reads results; never inside the core."""

from __future__ import annotations

from .trace import chrome_trace, write_chrome_trace

__all__ = ["chrome_trace", "write_chrome_trace"]

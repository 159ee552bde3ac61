"""Presentation of results: the HTML report, SVG charts, Chrome traces. Reads results; never inside the core.

>>> from clustertwin import api
>>> html = api.report_html("scenarios/llama3-70b-hgx-h100.yaml")  # doctest: +SKIP
"""

from __future__ import annotations

from . import serving_sched  # noqa: F401  (registers the serving and scheduling sections)
from .html import SECTIONS, Section, register_section, render_html
from .trace import chrome_trace, write_chrome_trace

__all__ = ["SECTIONS", "Section", "chrome_trace", "register_section", "render_html", "write_chrome_trace"]

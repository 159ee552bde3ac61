"""A small, dependency-free SVG chart kit for the HTML report and the web app.

Every chart is a plain ``<svg>`` string: no JavaScript, no fonts or images fetched, so a report opens
offline and is byte-identical for the same inputs (numbers are printed with fixed precision, series
keep their given order). Each chart carries ``class="ct-chart"``, a ``data-chart`` name and a
``<title>``; every plotted mark (bar, point, line, cell) has ``class="ct-mark"`` so a browser test can
check that a chart really drew something. Hovering a mark shows its value (SVG ``<title>``).

Charts: :func:`bar_chart` (grouped / stacked, optional reference line), :func:`waterfall`,
:func:`line_chart` (optionally log x), :func:`scatter` (with a highlighted front), :func:`heatmap`,
:func:`gantt` (timeline lanes), :func:`legend`. Axes always carry their unit in the label.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
           "#9c755f", "#bab0ac", "#1f77b4", "#8c564b")
FONT = "font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif"
W, H = 720, 340
M_LEFT, M_RIGHT, M_TOP, M_BOTTOM = 72, 20, 34, 58


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def _f(x: float) -> str:
    """Fixed-precision coordinate (deterministic, compact)."""
    s = f"{x:.2f}".rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


def _e(text: object) -> str:
    return escape(str(text), quote=True)


def fmt(v: float) -> str:
    """A tick / value label: 3 significant figures, thousands grouped, k/M/G for big numbers."""
    if v is None or not math.isfinite(v):
        return "-"
    a = abs(v)
    if a >= 1e9:
        return f"{v / 1e9:.3g}G"
    if a >= 1e6:
        return f"{v / 1e6:.3g}M"
    if a >= 1e4:
        return f"{v / 1e3:.3g}k"
    if a >= 100 or a == 0:
        return f"{v:,.0f}"
    return f"{v:.3g}"


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """Round tick values spanning [lo, hi] (Heckbert's 'nice numbers')."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        lo, hi = 0.0, 1.0
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    span = hi - lo
    raw = span / max(1, n)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks = []
    t = start
    while t <= hi + step * 1e-9:
        ticks.append(round(t, 12))
        t += step
    if ticks[-1] < hi - 1e-12:
        ticks.append(round(t, 12))
    return ticks


def _open(name: str, title: str, width: int = W, height: int = H) -> list[str]:
    return [f'<svg xmlns="http://www.w3.org/2000/svg" class="ct-chart" data-chart="{_e(name)}" role="img" '
            f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" style="{FONT};font-size:12px;max-width:100%;height:auto">',
            f"<title>{_e(title)}</title>",
            f'<text x="{_f(width / 2)}" y="18" text-anchor="middle" font-size="14" font-weight="600">{_e(title)}</text>']


def _empty(name: str, title: str, why: str) -> str:
    parts = _open(name, title, height=90)
    parts.append(f'<text x="{W / 2}" y="55" text-anchor="middle" fill="#666">{_e(why)}</text></svg>')
    return "".join(parts)


class _Axis:
    """A linear (or log10) mapping from data to pixels."""

    def __init__(self, lo: float, hi: float, p0: float, p1: float, log: bool = False, ticks: int = 5):
        self.log = log
        if log:
            lo, hi = max(lo, 1e-12), max(hi, 1e-12)
            a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
            if b == a:
                b = a + 1
            self.ticks = [10.0 ** k for k in range(a, b + 1)]
            self.lo, self.hi = math.log10(self.ticks[0]), math.log10(self.ticks[-1])
        else:
            self.ticks = nice_ticks(lo, hi, ticks)
            self.lo, self.hi = self.ticks[0], self.ticks[-1]
        self.p0, self.p1 = p0, p1

    def __call__(self, v: float) -> float:
        x = math.log10(max(v, 1e-12)) if self.log else v
        return self.p0 + (x - self.lo) / (self.hi - self.lo or 1.0) * (self.p1 - self.p0)


def _axes(parts: list[str], xa: _Axis | None, ya: _Axis, x_label: str, y_label: str, width: int = W,
          height: int = H, right: float | None = None, bottom: float = M_BOTTOM) -> None:
    x0, x1, y0, y1 = M_LEFT, (width - M_RIGHT) if right is None else right, height - bottom, M_TOP
    for t in ya.ticks:
        y = ya(t)
        parts.append(f'<line x1="{x0}" x2="{_f(x1)}" y1="{_f(y)}" y2="{_f(y)}" stroke="#e5e5e5"/>'
                     f'<text x="{x0 - 6}" y="{_f(y + 4)}" text-anchor="end" fill="#444">{_e(fmt(t))}</text>')
    if xa is not None:
        for t in xa.ticks:
            x = xa(t)
            parts.append(f'<line x1="{_f(x)}" x2="{_f(x)}" y1="{y0}" y2="{y0 + 5}" stroke="#888"/>'
                         f'<text x="{_f(x)}" y="{y0 + 18}" text-anchor="middle" fill="#444">{_e(fmt(t))}</text>')
    parts.append(f'<line x1="{x0}" x2="{_f(x1)}" y1="{y0}" y2="{y0}" stroke="#888"/>'
                 f'<line x1="{x0}" x2="{x0}" y1="{y0}" y2="{y1}" stroke="#888"/>')
    parts.append(f'<text class="ct-xlabel" x="{_f((x0 + x1) / 2)}" y="{height - 10}" text-anchor="middle">{_e(x_label)}</text>')
    parts.append(f'<text class="ct-ylabel" transform="translate(16,{_f((y0 + y1) / 2)}) rotate(-90)" '
                 f'text-anchor="middle">{_e(y_label)}</text>')


def _cat_labels(parts: list[str], labels: Sequence[str], centres: Sequence[float], slot: float, y0: float) -> None:
    """Category labels under the axis: straight when they fit the slot, else rotated (full text)."""
    fits = all(len(c) * 6.6 <= slot for c in labels)
    for c, x in zip(labels, centres, strict=True):
        if fits:
            parts.append(f'<text x="{_f(x)}" y="{_f(y0 + 16)}" text-anchor="middle" fill="#444">{_e(c)}</text>')
        else:
            parts.append(f'<text transform="translate({_f(x + 3)},{_f(y0 + 10)}) rotate(-40)" text-anchor="end" '
                         f'fill="#444" font-size="11">{_e(c)}</text>')


def _label_room(labels: Sequence[str], slot: float) -> float:
    """Extra bottom margin rotated category labels need."""
    if all(len(c) * 6.6 <= slot for c in labels):
        return 0.0
    return min(130.0, max(len(c) for c in labels) * 6.2 * 0.6)


def legend(names: Sequence[str], x: float = M_LEFT + 8, y: float = M_TOP + 4, colors: Sequence[str] | None = None) -> str:
    out = []
    for i, n in enumerate(names):
        c = colors[i] if colors else color(i)
        yy = y + 15 * i
        out.append(f'<rect x="{_f(x)}" y="{_f(yy)}" width="10" height="10" fill="{c}"/>'
                   f'<text x="{_f(x + 14)}" y="{_f(yy + 9)}" font-size="11">{_e(n)}</text>')
    return "".join(out)


def _hline(y: float, right: float, label: str, extra: str = "") -> str:
    """A labelled horizontal reference line across the plot area (red, dashed)."""
    return (f'<line class="ct-ref" x1="{M_LEFT}" x2="{_f(right)}" y1="{_f(y)}" y2="{_f(y)}" stroke="#d62728" '
            f'stroke-dasharray="6 4"{extra}/><text x="{_f(right - 4)}" y="{_f(y - 5)}" text-anchor="end" '
            f'fill="#d62728">{_e(label)}</text>')


def _close(parts: list[str], names: list[str], right: float) -> str:
    """The legend (when there is more than one series) and the closing tag; the chart as one string."""
    if len(names) > 1:
        parts.append(legend(names, x=right + 14, y=M_TOP + 10))
    parts.append("</svg>")
    return "".join(parts)


def bar_chart(name: str, title: str, categories: Sequence[str], series: Sequence[tuple[str, Sequence[float]]], *,
              x_label: str, y_label: str, stacked: bool = True, ref: tuple[float, str] | None = None,
              value_fmt=fmt) -> str:
    """Vertical bars: one group per category, one bar segment per series (stacked or side by side).
    ``ref``: a horizontal reference line ``(value, label)`` such as the HBM capacity. With more than
    one series the legend sits right of the plot."""
    if not categories or not series:
        return _empty(name, title, "no data")
    n = len(categories)
    vals = [[max(0.0, float(v or 0.0)) for v in s[1]] for s in series]
    top = max((sum(col) for col in zip(*vals, strict=True)) if stacked else (max(v) for v in vals))
    if ref is not None:
        top = max(top, ref[0])
    right = W - M_RIGHT - (150 if len(series) > 1 else 0)
    slot = (right - M_LEFT) / n
    extra = _label_room(categories, slot)
    height = H + extra
    bottom = M_BOTTOM + extra
    ya = _Axis(0.0, top * 1.05 or 1.0, height - bottom, M_TOP)
    parts = _open(name, title, height=int(height))
    _axes(parts, None, ya, x_label, y_label, height=int(height), right=right, bottom=bottom)
    bw = slot * 0.7 / (1 if stacked else len(series))
    for i, cat in enumerate(categories):
        x = M_LEFT + slot * i + slot * 0.15
        base = 0.0
        for j, (sname, _) in enumerate(series):
            v = vals[j][i]
            if stacked:
                y_top, y_bot = ya(base + v), ya(base)
                xx = x
                base += v
            else:
                y_top, y_bot = ya(v), ya(0.0)
                xx = x + bw * j
            if v > 0:
                parts.append(f'<rect class="ct-mark" x="{_f(xx)}" y="{_f(y_top)}" width="{_f(bw)}" '
                             f'height="{_f(max(0.5, y_bot - y_top))}" fill="{color(j)}"><title>{_e(cat)} · '
                             f'{_e(sname)}: {_e(value_fmt(v))}</title></rect>')
    _cat_labels(parts, categories, [M_LEFT + slot * (i + 0.5) for i in range(n)], slot, height - bottom)
    if ref is not None:
        parts.append(_hline(ya(ref[0]), right, ref[1], ' stroke-width="1.5"'))
    return _close(parts, [s[0] for s in series], right)


def waterfall(name: str, title: str, items: Sequence[tuple[str, float]], *, total_label: str = "step",
              y_label: str = "time (s)") -> str:
    """Step-time waterfall: each component starts where the previous ended; the last bar is the total."""
    items = [(k, float(v)) for k, v in items if v and v > 0]
    if not items:
        return _empty(name, title, "no time components")
    total = sum(v for _, v in items)
    n = len(items) + 1
    right = W - M_RIGHT
    slot = (right - M_LEFT) / n
    labels = [k for k, _ in items] + [total_label]
    extra = _label_room(labels, slot)
    height, bottom = H + extra, M_BOTTOM + extra
    ya = _Axis(0.0, total * 1.05, height - bottom, M_TOP)
    parts = _open(name, title, height=int(height))
    _axes(parts, None, ya, "component (compute, then communication the step cannot hide, bubble, overheads)", y_label,
          height=int(height), bottom=bottom)
    bw = slot * 0.68
    base = 0.0
    for i, (k, v) in enumerate([*items, (total_label, total)]):
        is_total = i == len(items)
        lo, hi = (0.0, total) if is_total else (base, base + v)
        x = M_LEFT + slot * i + slot * 0.16
        fill = "#333" if is_total else color(i)
        share = f" ({100 * v / total:.1f}%)" if not is_total else ""
        parts.append(f'<rect class="ct-mark" x="{_f(x)}" y="{_f(ya(hi))}" width="{_f(bw)}" '
                     f'height="{_f(max(0.5, ya(lo) - ya(hi)))}" fill="{fill}"><title>{_e(k)}: {v:.4g} s{share}</title></rect>')
        parts.append(f'<text x="{_f(x + bw / 2)}" y="{_f(ya(hi) - 4)}" text-anchor="middle" font-size="10">{v:.3g}</text>')
        if not is_total:
            if i < len(items) - 1:
                parts.append(f'<line x1="{_f(x + bw)}" x2="{_f(x + slot)}" y1="{_f(ya(hi))}" y2="{_f(ya(hi))}" '
                             f'stroke="#999" stroke-dasharray="2 2"/>')
            base += v
    _cat_labels(parts, labels, [M_LEFT + slot * i + slot * 0.16 + bw / 2 for i in range(n)], slot, height - bottom)
    parts.append("</svg>")
    return "".join(parts)


def line_chart(name: str, title: str, series: Sequence[tuple[str, Sequence[float], Sequence[float]]], *,
               x_label: str, y_label: str, log_x: bool = False, y_min: float | None = 0.0,
               hlines: Sequence[tuple[float, str]] = (), step: bool = False, y_max: float | None = None) -> str:
    """Lines with point markers; ``step`` draws a staircase (for CDFs and counts over time)."""
    pts = [(float(x), float(y)) for _, xs, ys in series for x, y in zip(xs, ys, strict=True)
           if math.isfinite(x) and math.isfinite(y)]
    if not pts:
        return _empty(name, title, "no data")
    xs_all = [p[0] for p in pts]
    ys_all = [p[1] for p in pts] + [h[0] for h in hlines]
    lo_y = min(ys_all) if y_min is None else min(y_min, min(ys_all))
    right = W - M_RIGHT - (170 if len(series) > 1 else 0)
    xa = _Axis(min(xs_all), max(xs_all), M_LEFT, right, log=log_x)
    ya = _Axis(lo_y, y_max if y_max is not None else (max(ys_all) * 1.05 if max(ys_all) > 0 else 1.0), H - M_BOTTOM, M_TOP)
    parts = _open(name, title)
    _axes(parts, xa, ya, x_label, y_label, right=right)
    for i, (sname, xs, ys) in enumerate(series):
        pp = [(xa(float(x)), ya(float(y))) for x, y in zip(xs, ys, strict=True) if math.isfinite(x) and math.isfinite(y)]
        if not pp:
            continue
        if step:
            d = [f"M{_f(pp[0][0])},{_f(pp[0][1])}"]
            for (_x0, _y0), (x1, y1) in zip(pp, pp[1:], strict=False):
                d.append(f"H{_f(x1)}V{_f(y1)}")
            parts.append(f'<path class="ct-mark" d="{"".join(d)}" fill="none" stroke="{color(i)}" stroke-width="2">'
                         f"<title>{_e(sname)}</title></path>")
        else:
            path = " ".join(f"{_f(x)},{_f(y)}" for x, y in pp)
            parts.append(f'<polyline class="ct-mark" points="{path}" fill="none" stroke="{color(i)}" stroke-width="2"/>')
            for (px, py), x, y in zip(pp, xs, ys, strict=False) if len(pp) <= 40 else ():  # dense: the line only
                parts.append(f'<circle class="ct-mark" cx="{_f(px)}" cy="{_f(py)}" r="3.5" fill="{color(i)}">'
                             f"<title>{_e(sname)}: {_e(fmt(x))}, {_e(fmt(y))}</title></circle>")
    parts.extend(_hline(ya(v), right, lab) for v, lab in hlines)
    return _close(parts, [s[0] for s in series], right)


def scatter(name: str, title: str, points: Sequence[dict], *, x_label: str, y_label: str,
            log_x: bool = False, front_label: str = "Pareto front", vlines: Sequence[tuple[float, str]] = (),
            hlines: Sequence[tuple[float, str]] = ()) -> str:
    """Points ``{"x", "y", "label", "front": bool}``; front points are joined by a line and drawn larger.
    ``vlines``/``hlines``: reference lines such as SLOs."""
    pts = [p for p in points if p.get("x") is not None and p.get("y") is not None
           and math.isfinite(p["x"]) and math.isfinite(p["y"])]
    if not pts:
        return _empty(name, title, "no feasible points")
    xs = [p["x"] for p in pts] + [v[0] for v in vlines]
    ys = [p["y"] for p in pts] + [h[0] for h in hlines]
    span_x = (max(xs) - min(xs)) or abs(max(xs)) or 1.0
    right = W - M_RIGHT - 130
    lo_x = min(xs) - (0 if log_x else 0.05 * span_x)
    if min(xs) >= 0 and not log_x:
        lo_x = max(0.0, lo_x)
    xa = _Axis(lo_x, max(xs) + (0 if log_x else 0.05 * span_x), M_LEFT, right, log=log_x)
    ya = _Axis(min(0.0, min(ys)), max(ys) * 1.08 or 1.0, H - M_BOTTOM, M_TOP)
    parts = _open(name, title)
    _axes(parts, xa, ya, x_label, y_label, right=right)
    front = sorted((p for p in pts if p.get("front")), key=lambda p: p["x"])
    if len(front) > 1:
        parts.append('<polyline points="' + " ".join(f"{_f(xa(p['x']))},{_f(ya(p['y']))}" for p in front)
                     + '" fill="none" stroke="#e15759" stroke-width="1.5" stroke-dasharray="4 3"/>')
    for p in pts:
        on = bool(p.get("front"))
        parts.append(f'<circle class="ct-mark" cx="{_f(xa(p["x"]))}" cy="{_f(ya(p["y"]))}" r="{5 if on else 3.5}" '
                     f'fill="{"#e15759" if on else "#4e79a7"}" fill-opacity="{1 if on else 0.6}">'
                     f'<title>{_e(p.get("label", ""))}: {_e(fmt(p["x"]))}, {_e(fmt(p["y"]))}</title></circle>')
    for v, lab in vlines:
        x = xa(v)
        parts.append(f'<line class="ct-ref" x1="{_f(x)}" x2="{_f(x)}" y1="{M_TOP}" y2="{H - M_BOTTOM}" stroke="#d62728" '
                     f'stroke-dasharray="6 4"/><text x="{_f(x + 4)}" y="{M_TOP + 12}" fill="#d62728">{_e(lab)}</text>')
    parts.extend(_hline(ya(v), right, lab) for v, lab in hlines)
    parts.append(legend(["design", front_label], x=right + 14, y=M_TOP + 10, colors=["#4e79a7", "#e15759"]))
    parts.append("</svg>")
    return "".join(parts)


def _heat(v: float) -> str:
    """0 -> pale yellow, 1 -> dark red (sequential, colour-blind safe enough for a heatmap)."""
    v = min(1.0, max(0.0, v))
    stops = ((255, 255, 204), (254, 178, 76), (240, 59, 32), (128, 0, 38))
    pos = v * (len(stops) - 1)
    i = min(int(pos), len(stops) - 2)
    t = pos - i
    r, g, b = (round(stops[i][k] + (stops[i + 1][k] - stops[i][k]) * t) for k in range(3))
    return f"#{r:02x}{g:02x}{b:02x}"


def heatmap(name: str, title: str, row_labels: Sequence[str], col_labels: Sequence[str],
            values: Sequence[Sequence[float | None]], *, x_label: str, y_label: str, value_label: str = "utilisation",
            as_percent: bool = True) -> str:
    """A grid of cells coloured 0..1; ``None`` cells (no link) are left grey."""
    if not row_labels or not col_labels:
        return _empty(name, title, "no data")
    height = max(H, M_TOP + M_BOTTOM + 26 * len(row_labels))
    gw = W - (M_LEFT + 40) - M_RIGHT - 60
    cw = gw / len(col_labels)
    ch = (height - M_TOP - M_BOTTOM) / len(row_labels)
    parts = _open(name, title, height=height)
    for i, r in enumerate(row_labels):
        parts.append(f'<text x="{M_LEFT + 40 - 6}" y="{_f(M_TOP + ch * i + ch / 2 + 4)}" text-anchor="end">{_e(r)}</text>')
        for j, c in enumerate(col_labels):
            v = values[i][j]
            x, y = M_LEFT + 40 + cw * j, M_TOP + ch * i
            fill = "#eeeeee" if v is None else _heat(v)
            lab = "no links" if v is None else (f"{100 * v:.1f}%" if as_percent else fmt(v))
            parts.append(f'<rect class="ct-mark" x="{_f(x)}" y="{_f(y)}" width="{_f(cw - 1)}" height="{_f(ch - 1)}" '
                         f'fill="{fill}"><title>{_e(r)} · {_e(c)}: {lab}</title></rect>')
            if cw > 34 and ch > 14 and v is not None:
                parts.append(f'<text x="{_f(x + cw / 2)}" y="{_f(y + ch / 2 + 4)}" text-anchor="middle" font-size="10" '
                             f'fill="{"#fff" if v > 0.6 else "#222"}">{lab}</text>')
    step = max(1, len(col_labels) // 12)
    for j in range(0, len(col_labels), step):
        parts.append(f'<text x="{_f(M_LEFT + 40 + cw * j + cw / 2)}" y="{height - M_BOTTOM + 16}" text-anchor="middle" '
                     f'font-size="10" fill="#444">{_e(col_labels[j])}</text>')
    parts.append(f'<text class="ct-xlabel" x="{_f(M_LEFT + 40 + gw / 2)}" y="{height - 14}" text-anchor="middle">{_e(x_label)}</text>')
    parts.append(f'<text class="ct-ylabel" transform="translate(16,{_f(height / 2)}) rotate(-90)" text-anchor="middle">'
                 f'{_e(y_label)}</text>')
    # colour scale
    sx = W - M_RIGHT - 14
    for k in range(10):
        parts.append(f'<rect x="{sx}" y="{_f(M_TOP + (9 - k) * 16)}" width="12" height="16" fill="{_heat(k / 9)}"/>')
    parts.append(f'<text x="{sx - 2}" y="{M_TOP + 8}" text-anchor="end" font-size="10">{"100%" if as_percent else "max"}</text>'
                 f'<text x="{sx - 2}" y="{M_TOP + 160}" text-anchor="end" font-size="10">0</text>'
                 f'<text transform="translate({sx - 26},{M_TOP + 80}) rotate(-90)" text-anchor="middle" font-size="10">'
                 f'{_e(value_label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def gantt(name: str, title: str, lanes: Sequence[str], bars: Sequence[tuple[int, float, float, str, str]], *,
          x_label: str = "time (ms)", scale: float = 1e3, categories: Sequence[str] = ()) -> str:
    """A timeline: ``bars`` are ``(lane index, start_s, end_s, category, label)``; time shown in ms."""
    if not lanes or not bars:
        return _empty(name, title, "no events")
    cats = list(categories) or sorted({b[3] for b in bars})
    cidx = {c: i for i, c in enumerate(cats)}
    lane_h = 16
    legend_rows = 1 + int(sum(14 + 6.2 * len(c) + 12 for c in cats) // (W - M_RIGHT - 150))
    y0 = M_TOP + lane_h * len(lanes) + 4
    height = int(y0 + 44 + 15 * legend_rows + 4)
    left = 150
    t_end = max(b[2] for b in bars) * scale
    xa = _Axis(0.0, t_end, left, W - M_RIGHT)
    parts = _open(name, title, height=height)
    for t in xa.ticks:
        x = xa(t)
        parts.append(f'<line x1="{_f(x)}" x2="{_f(x)}" y1="{M_TOP}" y2="{y0}" stroke="#eee"/>'
                     f'<text x="{_f(x)}" y="{y0 + 16}" text-anchor="middle" fill="#444">{_e(fmt(t))}</text>')
    for i, lane in enumerate(lanes):
        parts.append(f'<text x="{left - 6}" y="{_f(M_TOP + lane_h * i + 12)}" text-anchor="end" font-size="10">{_e(lane)}</text>')
    for lane_i, s, e, cat, label in bars:
        x, x2 = xa(s * scale), xa(e * scale)
        parts.append(f'<rect class="ct-mark" x="{_f(x)}" y="{_f(M_TOP + lane_h * lane_i + 2)}" width="{_f(max(0.4, x2 - x))}" '
                     f'height="{lane_h - 4}" fill="{color(cidx.get(cat, 0))}"><title>{_e(label)} ({_e(cat)}): '
                     f'{s * scale:.3f}–{e * scale:.3f} ms</title></rect>')
    parts.append(f'<text class="ct-xlabel" x="{_f((left + W - M_RIGHT) / 2)}" y="{y0 + 32}" text-anchor="middle">'
                 f'{_e(x_label)}</text>')
    lx, ly = float(left), y0 + 42
    for c in cats:
        w = 14 + 6.2 * len(c) + 12
        if lx + w > W - M_RIGHT:
            lx, ly = float(left), ly + 15
        parts.append(f'<rect x="{_f(lx)}" y="{_f(ly)}" width="10" height="10" fill="{color(cidx[c])}"/>'
                     f'<text x="{_f(lx + 13)}" y="{_f(ly + 9)}" font-size="10">{_e(c)}</text>')
        lx += w
    parts.append("</svg>")
    return "".join(parts)


__all__ = ["bar_chart", "fmt", "gantt", "heatmap", "legend", "line_chart", "nice_ticks", "scatter", "waterfall"]

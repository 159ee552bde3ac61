"""The cluster picture: scale-out switch tiers above the scale-up domains, with counts and link rates.

Drawn from ``Cluster.summary()`` only. Large tiers are drawn as a few boxes plus "x N" so the picture
stays readable at 16,384 GPUs; every number on it is the summary's.
"""

from __future__ import annotations

from typing import Any

from .svg import FONT, _e, _f

W = 720


def topology_svg(summary: dict[str, Any]) -> str:
    so = summary.get("scaleout") or {}
    up = summary["scaleup"]
    tiers = int(so.get("tiers") or 0)
    per_tier = list(so.get("switches_per_tier") or [])
    tier_names = ["leaf", "spine", "core"][:tiers]
    rows = list(reversed(list(zip(tier_names, per_tier, strict=False))))  # top row = highest tier
    dsize_ = int(summary["domain_size"])
    shown_ = min(int(summary["domains"]), 6)
    bw_ = min(104, (W - 200) / max(shown_, 1) - 10)
    gpu_rows = -(-min(dsize_, max(1, int((bw_ - 12) // 8)) * 7) // max(1, min(dsize_, int((bw_ - 12) // 8))))
    box_h = 24 + 9 * gpu_rows + 6
    height = int(50 + 80 * len(rows) + box_h + 50)
    title = (f"{summary['domains']:,} × {summary['system']} ({summary['devices']:,} {summary['accelerator']}) on "
             f"{summary['fabric']}, {so.get('kind', 'no scale-out')}")
    p = [f'<svg xmlns="http://www.w3.org/2000/svg" class="ct-chart" data-chart="topology" role="img" '
         f'viewBox="0 0 {W} {height}" width="{W}" height="{height}" style="{FONT};font-size:12px;max-width:100%;height:auto">',
         f"<title>{_e(title)}</title>",
         f'<text x="{W / 2}" y="18" text-anchor="middle" font-size="14" font-weight="600">{_e(title)}</text>']
    y = 50
    centres_prev: list[float] = []
    port = so.get("port_gbps")
    for ri, (name, count) in enumerate(rows):
        shown = min(count, 8)
        xs = _spread(shown, 240, W - 50)
        sw_w = min(68.0, (xs[1] - xs[0] - 6) if len(xs) > 1 else 68.0)
        for x in xs:
            p.append(f'<rect class="ct-mark" x="{_f(x - sw_w / 2)}" y="{y}" width="{_f(sw_w)}" height="26" rx="4" fill="#4e79a7">'
                     f"<title>{_e(name)} switch ({count:,} in the tier, radix {so.get('radix')})</title></rect>"
                     f'<text x="{_f(x)}" y="{y + 17}" text-anchor="middle" fill="#fff" font-size="11">{_e(name)}</text>')
        label = f"{count:,} {name} switch{'es' if count != 1 else ''}" + (f" (showing {shown})" if shown < count else "")
        p.append(f'<text x="8" y="{y + 17}" font-size="11" fill="#333">{_e(label)}</text>')
        if centres_prev:
            for a in centres_prev:
                for b in xs:
                    p.append(f'<line x1="{_f(a)}" y1="{y - 54}" x2="{_f(b)}" y2="{y}" stroke="#9db4d0" stroke-width="1"/>')
            links = (so.get("links_per_tier") or [0] * 3)
            li = tiers - ri  # links between this tier and the one above
            n_links = links[li] if 0 <= li < len(links) else None
            if port:
                p.append(f'<text x="{W - 8}" y="{y - 18}" text-anchor="end" font-size="11" fill="#555" paint-order="stroke" stroke="#fff" stroke-width="4">'
                         f'{_e(f"{n_links:,} links × " if n_links else "")}{port:g} Gb/s</text>')
        centres_prev = xs
        y += 80
    # domains
    n_dom = int(summary["domains"])
    shown = min(n_dom, 6)
    xs = _spread(shown, 240, W - 60) if shown > 1 else [W / 2]
    box_w = min(104, (W - 200) / max(shown, 1) - 10)
    dsize = int(summary["domain_size"])
    if centres_prev:
        nic = so.get("nic_bw_per_device_gbps")
        for a in centres_prev:
            for b in xs:
                p.append(f'<line x1="{_f(a)}" y1="{y - 54}" x2="{_f(b)}" y2="{y}" stroke="#f0b27a" stroke-width="1"/>')
        p.append(f'<text x="{W - 8}" y="{y - 18}" text-anchor="end" font-size="11" fill="#555" paint-order="stroke" stroke="#fff" stroke-width="4">'
                 f'{summary.get("nics", 0):,} NICs, {nic:g} Gb/s per GPU' + (f", {so.get('planes')} planes" if (so.get("planes") or 1) > 1 else "")
                 + (f", {so.get('rails')} rails" if so.get("kind") == "rail" else "") + "</text>")
    for x in xs:
        p.append(f'<rect class="ct-mark" x="{_f(x - box_w / 2)}" y="{y}" width="{_f(box_w)}" height="{box_h}" rx="6" fill="#f4f1ea" '
                 f'stroke="#b07aa1"><title>scale-up domain: {dsize} GPUs, {up["tech"]} {up["topology"]}, '
                 f'{up["bw_per_device_gbps"]:g} Gb/s per GPU</title></rect>')
        p.append(f'<rect x="{_f(x - box_w / 2 + 6)}" y="{y + 6}" width="{_f(box_w - 12)}" height="12" rx="2" fill="#b07aa1"/>'
                 f'<text x="{_f(x)}" y="{y + 15}" text-anchor="middle" fill="#fff" font-size="9">{_e(up["tech"])}</text>')
        cols = max(1, min(dsize, int((box_w - 12) // 8)))
        for g in range(min(dsize, cols * 7)):
            gx = x - box_w / 2 + 6 + (g % cols) * 8
            gy = y + 24 + (g // cols) * 9
            p.append(f'<rect x="{_f(gx)}" y="{_f(gy)}" width="6" height="7" fill="#59a14f"/>')
    dom_label = f"{n_dom:,} scale-up domain{'s' if n_dom != 1 else ''} × {dsize} GPUs" + (f" (showing {shown})" if shown < n_dom else "")
    p.append(f'<text x="8" y="{y + 17}" font-size="11" fill="#333">{n_dom:,} domain{"s" if n_dom != 1 else ""}</text>')
    p.append(f'<text x="8" y="{y + box_h + 18}" font-size="11" fill="#333">{_e(dom_label)}; {summary["hosts"]:,} hosts; '
             f'{_e(up["tech"])} {up["bw_per_device_gbps"]:g} Gb/s per GPU, {up["switches_per_domain"]} switch chip(s) per domain</text>')
    if so:
        p.append(f'<text x="8" y="{y + box_h + 36}" font-size="11" fill="#333">scale-out: {tiers}-tier {_e(so.get("kind"))}, '
                 f'oversubscription {so.get("oversubscription"):g}:1, bisection {so.get("bisection_tbps", 0):,.1f} Tb/s '
                 f'({so.get("bisection_per_device_gbps", 0):g} Gb/s per GPU), max {so.get("max_switch_hops")} switch hops</text>')
    p.append("</svg>")
    return "".join(p)


def _spread(n: int, lo: float, hi: float) -> list[float]:
    if n <= 1:
        return [(lo + hi) / 2]
    return [lo + (hi - lo) * i / (n - 1) for i in range(n)]


__all__ = ["topology_svg"]

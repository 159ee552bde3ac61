"""One self-contained HTML report from the dict ``report.collect`` builds.

The page has no external reference at all (inline CSS, inline SVG, no script, no font or image
fetched), so it opens offline and is byte-identical for the same inputs: there is no timestamp, and
the tool and catalog versions stand in for one.

Sections are pluggable: a :class:`Section` has an id, a title and ``render(data) -> str | None``
(``None`` when the inputs do not have that part). :func:`register_section` adds one (the serving and
scheduling areas add theirs this way); :data:`SECTIONS` is the order they appear in.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from . import svg
from .topology import topology_svg

MAX_BYTES = 5 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Section:
    id: str
    title: str
    render: Callable[[dict[str, Any]], str | None]


SECTIONS: list[Section] = []


def register_section(section: Section, *, before: str | None = None) -> Section:
    """Add (or replace, by id) a report section; ``before`` puts it ahead of another section id."""
    for i, s in enumerate(SECTIONS):
        if s.id == section.id:
            SECTIONS[i] = section
            return section
    if before is not None:
        for i, s in enumerate(SECTIONS):
            if s.id == before:
                SECTIONS.insert(i, section)
                return section
    SECTIONS.append(section)
    return section


def _e(x: Any) -> str:
    return escape(str(x), quote=True)


def num(v: Any, spec: str = ",.4g") -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (int, float)):
        return format(v, spec)
    return _e(v)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, cls: str = "", numeric: Sequence[int] = ()) -> str:
    """A plain table; cells are escaped unless given as ``Raw``."""
    h = "".join(f'<th{" class=num" if i in numeric else ""}>{_e(c)}</th>' for i, c in enumerate(headers))
    body = []
    for r in rows:
        cells = []
        for i, c in enumerate(r):
            text = c.html if isinstance(c, Raw) else _e(c)
            cells.append(f'<td{" class=num" if i in numeric else ""}>{text}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f'<table class="{cls}"><thead><tr>{h}</tr></thead><tbody>{"".join(body)}</tbody></table>'


@dataclass(frozen=True, slots=True)
class Raw:
    html: str


_URL = re.compile(r"https?://[^\s,;)\"']+")
_ARXIV = re.compile(r"arXiv:(\d{4}\.\d{4,5})", re.I)


def source_html(text: str) -> str:
    """A source string with its URLs (and arXiv ids) as links (followed only when clicked)."""
    if not text:
        return ""
    out = _e(text)
    url = _URL.search(text)
    if url:
        u = url.group(0)
        return out.replace(_e(u), f'<a href="{_e(u)}">{_e(u)}</a>', 1)
    ax = _ARXIV.search(text)
    if ax:
        return out.replace(_e(ax.group(0)), f'<a href="https://arxiv.org/abs/{ax.group(1)}">{_e(ax.group(0))}</a>', 1)
    return out


def figure(chart: str, caption: str, extra_html: str = "") -> str:
    return f'<figure>{chart}<figcaption>{_e(caption)}{extra_html}</figcaption></figure>'


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#1f2d3d;color:#fff;padding:18px 28px}header h1{margin:0 0 4px;font-size:22px}
header p{margin:2px 0;color:#cfd8e3;font-size:13px}
nav{background:#fff;border-bottom:1px solid #ddd;padding:8px 28px;font-size:13px;position:sticky;top:0}
nav a{margin-right:14px;color:#1f5fa8;text-decoration:none}
main{max-width:1100px;margin:0 auto;padding:8px 28px 40px}
section{background:#fff;border:1px solid #e3e3e3;border-radius:6px;margin:18px 0;padding:8px 20px 16px}
h2{font-size:18px;border-bottom:1px solid #eee;padding-bottom:6px}h3{font-size:15px;margin:18px 0 6px}
table{border-collapse:collapse;font-size:12.5px;margin:6px 0 10px;width:auto}
th,td{border-bottom:1px solid #eee;padding:3px 8px;text-align:left;vertical-align:top}th{background:#f3f5f8}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
figure{margin:10px 0}figcaption{font-size:12px;color:#555;margin-top:2px}
.kpis{display:flex;flex-wrap:wrap;gap:10px;margin:10px 0}
.kpi{border:1px solid #e3e3e3;border-radius:6px;padding:8px 12px;min-width:120px;background:#fcfcfd}
.kpi b{display:block;font-size:18px}.kpi span{font-size:11.5px;color:#666}
.note{color:#555;font-size:12.5px}.skipped{color:#8a5a00;font-size:12.5px}
.scroll{max-height:420px;overflow:auto}.scroll td:last-child{max-width:420px;font-size:11.5px;overflow-wrap:anywhere}
.why{font-size:14px}.err-pos{color:#b03030}.err-neg{color:#2f6fb0}
"""


def render_html(data: dict[str, Any], *, title: str | None = None) -> str:
    """The whole page. Raises nothing for missing parts: those sections are left out."""
    return render_document(data, title=title)[0]


def render_document(data: dict[str, Any], *, title: str | None = None) -> tuple[str, list[str]]:
    """The page and the ids of the sections it has."""
    from .. import __version__

    parts, nav, ids = [], [], []
    for s in SECTIONS:
        body = s.render(data)
        if body is None:
            continue
        ids.append(s.id)
        nav.append(f'<a href="#{_e(s.id)}">{_e(s.title)}</a>')
        parts.append(f'<section id="{_e(s.id)}" data-section="{_e(s.id)}"><h2>{_e(s.title)}</h2>{body}</section>')
    head = data.get("scenario") or {}
    t = title or (f"ClusterTwin report: {head.get('name')}" if head else
                  f"ClusterTwin report: {data.get('kind')} {(data.get('record') or {}).get('name', '')}")
    sub = ""
    if head:
        sub = (f"<p>{_e(head['model'])} on {head['gpus']:,} GPUs of {_e(head['system'])} ({_e(head['fabric'])})</p>")
    catalog = data.get("catalog_version")
    sub += (f"<p>clustertwin {_e(__version__)}" + (f", catalog {_e(catalog)}" if catalog else "")
            + ". Every number below comes from the model; assumptions are listed at the end with their sources.</p>")
    page = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">"
            f"<title>{_e(t)}</title><style>{CSS}</style></head><body>"
            f"<header><h1>{_e(t)}</h1>{sub}</header><nav>{''.join(nav)}</nav><main>{''.join(parts)}</main></body></html>\n")
    return page, ids


def _skipped(data: dict[str, Any], key: str) -> str | None:
    why = (data.get("skipped") or {}).get(key)
    return f'<p class="skipped">Not available for this input: {_e(why)}</p>' if why else None


def _kpis(items: Sequence[tuple[str, str]]) -> str:
    return '<div class="kpis">' + "".join(f'<div class="kpi"><b>{_e(v)}</b><span>{_e(k)}</span></div>' for k, v in items) + "</div>"


# ----------------------------------------------------------------------------------------- sections


def _overview(data: dict[str, Any]) -> str | None:
    head = data.get("scenario")
    if not head:
        rec = data.get("record")
        if not rec:
            return None
        return table(["field", "value"], [["id", rec.get("id")], ["name", rec.get("name")], ["kind", data.get("kind")],
                                          ["database", data.get("db")], ["created", rec.get("created_at")],
                                          ["catalog", rec.get("catalog_version")], ["tool", rec.get("tool_version")]])
    step = (data.get("step") or {}).get("estimate")
    out = []
    if step:
        out.append(_kpis([("step time", f"{step['step_time_s']:.3f} s"), ("tokens/s", f"{step['tokens_per_s']:,.0f}"),
                          ("MFU", f"{100 * step['mfu']:.1f} %"), ("memory per GPU", f"{step['memory_gb_per_gpu']:.1f} GB"),
                          ("fits in HBM", "yes" if step["fits_memory"] else "NO")]))
        out.append(f'<p class="note">bottleneck: {_e(step["bottleneck"])}</p>')
    plan = head.get("plan") or {}
    out.append(table(["plan field", "value"], [[k, v] for k, v in plan.items()]))
    return "".join(out)


def _cluster(data: dict[str, Any]) -> str | None:
    c = data.get("cluster")
    if not c:
        return _skipped(data, "cluster")
    s = c["summary"]
    out = [figure(topology_svg(s), "Scale-out switch tiers above the scale-up domains; counts and link rates from the "
                  "cluster model (cluster/fattree.py sizing).")]
    bom = c["bom"]
    rows = []
    for ln in bom["lines"]:
        pk = "" if ln["power_kw"] is None else f"{ln['power_kw']:,.1f}" + ("*" if ln["power_assumed"] else "")
        pr = "" if ln["price_usd"] is None else f"{ln['price_usd']:,.0f}" + ("*" if ln["price_assumed"] else "")
        rows.append([ln["category"], ln["item"], f"{ln['count']:,}", pk, pr, ln["rule"]])
    out.append("<h3>Bill of materials</h3>")
    out.append(table(["category", "item", "count", "power (kW)", "cost (USD)", "rule"], rows, numeric=(2, 3, 4)))
    out.append('<p class="note">* = assumed value (see Assumptions). Accelerator prices are not in the BOM; the '
               "capital cost below prices them from the reliability defaults.</p>")
    pw, cst = c["power"], c["cost"]
    comp = pw.get("by_component_kw") or {}
    if comp:
        out.append(figure(svg.bar_chart("power", "IT power by component", list(comp), [("kW", list(comp.values()))],
                                        x_label="component", y_label="power (kW)"),
                          f"IT power {pw.get('it_power_kw', 0):,.1f} kW at utilisation {pw.get('utilization', 0):g}; "
                          f"facility {pw.get('facility_power_kw', 0):,.1f} kW at PUE {pw.get('pue', 0):g}."))
    capex = cst.get("capex_by_component_usd") or {}
    if capex:
        out.append(figure(svg.bar_chart("capex", "Capital cost by component", list(capex),
                                        [("USD", [v / 1e6 for v in capex.values()])], x_label="component",
                                        y_label="capital cost (million USD)"),
                          f"capex {cst.get('capex_usd', 0):,.0f} USD; {cst.get('usd_per_hour', 0):,.0f} USD/h with "
                          f"{cst.get('amortization_years', 0):g}-year amortisation and energy at "
                          f"{cst.get('energy_usd_per_kwh', 0):g} USD/kWh."))
    return "".join(out)


def _step(data: dict[str, Any]) -> str | None:
    st = data.get("step")
    if not st:
        return _skipped(data, "step")
    est = st["estimate"]
    out = [figure(svg.waterfall("waterfall", "Step time breakdown (analytical engine)", st["waterfall"],
                                total_label="step", y_label="time per step (s)"),
                  f"Each bar starts where the previous ended; communication shown is what the step cannot hide "
                  f"(exposed). Step {est['step_time_s']:.3f} s.")]
    ev = st.get("event")
    if ev:
        exp, hid = ev.get("exposed_comm_s") or {}, ev.get("hidden_comm_s") or {}
        groups = sorted(set(exp) | set(hid))
        if groups:
            out.append(figure(svg.bar_chart("comm-exposed", "Communication per step: exposed vs hidden (event engine)",
                                            groups, [("exposed", [exp.get(g, 0.0) for g in groups]),
                                                     ("hidden under compute", [hid.get(g, 0.0) for g in groups])],
                                            x_label="communication group", y_label="time per step (s)"),
                              f"Event engine, {ev.get('schedule')} schedule: step {ev['step_time_s']:.3f} s, "
                              f"bubble fraction {100 * (ev.get('bubble_fraction') or 0):.1f} %."))
        tl = st.get("timeline") or {}
        if tl.get("bars"):
            chart = svg.gantt("timeline", "Event timeline of one step", tl["lanes"], tl["bars"],
                              x_label="time in the step (ms)", categories=tl["categories"])
            cap = "Ops closer than a pixel are merged; hover a bar for its ops."
            if st.get("trace_href"):
                name = st["trace_href"]
                link = (f' The full timeline ({tl["num_ops"]:,} ops) is in <a class="trace-link" href="{_e(name)}">'
                        f'{_e(name)}</a>, next to this file (open it in ui.perfetto.dev or chrome://tracing).')
                out.append(figure(chart, cap, link))
            else:
                out.append(figure(chart, cap + f" Write the full timeline ({tl['num_ops']:,} ops) for Perfetto with "
                                  "`clustertwin report ... --trace FILE`."))
    elif st.get("event_error"):
        out.append(f'<p class="skipped">event engine: {_e(st["event_error"])}</p>')
    mem = (data.get("plan") or {}).get("memory") or [{"label": "scenario plan", "gb": est["memory_breakdown_gb"],
                                                       "total_gb": est["memory_gb_per_gpu"]}]
    kinds = [k for k in ("weights", "gradients", "optimizer", "activations", "logits", "runtime")
             if any(m["gb"].get(k) for m in mem)]
    kinds += sorted({k for m in mem for k, v in m["gb"].items() if v and k not in kinds})
    hbm = st.get("hbm_gb")
    out.append(figure(svg.bar_chart("memory", "Memory per GPU by kind", [m["label"] for m in mem],
                                    [(k, [m["gb"].get(k, 0.0) for m in mem]) for k in kinds],
                                    x_label="parallel layout", y_label="memory per GPU (GB)",
                                    ref=(hbm, f"HBM capacity {hbm:.1f} GB") if hbm else None),
                      "The scenario's plan and the planner's top layouts (busiest pipeline stage); the dashed line is "
                      "the accelerator's memory as the driver reports it (what fit checks compare against)."))
    return "".join(out)


def _plan(data: dict[str, Any]) -> str | None:
    pl = data.get("plan")
    sw = data.get("sweep")
    if not pl and not sw:
        return _skipped(data, "plan")
    from .collect import layout_label

    out = []
    if pl:
        rows = []
        for p in pl["plans"]:
            rows.append([p.get("rank"), layout_label(p), f"mb{p.get('micro_batch')} ZeRO{p.get('zero')} {p.get('recompute')}",
                         f"{p['tokens_per_s']:,.0f}", f"{p['step_time_s']:.3f}", f"{100 * p['mfu']:.1f}",
                         f"{p['memory_gb_per_gpu']:.1f}", p.get("bottleneck", "")])
        out.append("<h3>Top layouts</h3>")
        out.append(table(["#", "layout", "micro-batch, ZeRO, recompute", "tokens/s", "step (s)", "MFU (%)",
                          "memory (GB/GPU)", "bottleneck"], rows, numeric=(0, 3, 4, 5, 6)))
        ru = pl.get("runner_up")
        if ru:
            out.append(f'<p class="why"><b>Why the runner-up lost:</b> {_e(ru.get("text") if isinstance(ru, dict) else ru)}</p>')
        stats = pl.get("stats")
        if stats:
            out.append(f'<p class="note">searched {stats["candidates"]:,} layouts; {stats["fit_memory"]:,} fit in '
                       f'{stats["memory_capacity_gb"]:.0f} GB; {stats["feasible"]:,} feasible.</p>')
    if not sw and _skipped(data, "sweep"):
        out.append(_skipped(data, "sweep") or "")
    if sw:
        rows = [r for r in sw["rows"] if r.get("feasible")]
        fabrics = sorted({r["fabric"] for r in rows})
        systems = sorted({r["system"] for r in rows})
        series = []
        for sys_id in systems:
            for f in fabrics:
                pts = sorted((r["num_gpus"], 100 * r["mfu"]) for r in rows if r["fabric"] == f and r["system"] == sys_id)
                if pts:
                    series.append((f"{sys_id} · {f}", [p[0] for p in pts], [p[1] for p in pts]))
        if series:
            gpus = [x for _, xs, _ in series for x in xs]
            log = max(gpus) >= 8 * min(gpus)
            out.append(figure(svg.line_chart("scaling", "MFU vs GPUs (best layout per size)", series,
                                             x_label="GPUs (log scale)" if log else "GPUs", y_label="MFU (%)", log_x=log),
                              "Best plan per design at a fixed global batch; MFU falls where the per-GPU batch "
                              "gets too small to hide communication and the pipeline bubble."))
        pts_c = [{"x": r["cost_usd"] / 1e6, "y": r["tokens_per_s"], "front": r.get("pareto"),
                  "label": f"{r['num_gpus']} × {r['system']} · {r['fabric']}"} for r in rows if r.get("cost_usd")]
        pts_p = [{"x": r["power_w"] / 1e3, "y": r["tokens_per_s"], "front": r.get("pareto"),
                  "label": f"{r['num_gpus']} × {r['system']} · {r['fabric']}"} for r in rows if r.get("power_w")]
        if pts_c:
            out.append(figure(svg.scatter("pareto-cost", "Throughput vs capital cost", pts_c,
                                          x_label="capital cost (million USD)", y_label="throughput (tokens/s)"),
                              "Red: Pareto front over throughput (max), cost (min) and power (min)."))
        if pts_p:
            out.append(figure(svg.scatter("pareto-power", "Throughput vs IT power", pts_p,
                                          x_label="IT power (kW)", y_label="throughput (tokens/s)"),
                              "Same designs; power from the bill of materials at rated load."))
        trows = [["*" if r.get("pareto") else "", r["system"], r["num_gpus"], r["fabric"],
                  layout_label(r) if r.get("feasible") else "–",
                  f"{r['tokens_per_s']:,.0f}" if r.get("feasible") else "–",
                  f"{100 * r['mfu']:.1f}" if r.get("feasible") else "–",
                  num(None if r.get("cost_usd") is None else r["cost_usd"] / 1e6, ".2f"),
                  num(None if r.get("power_w") is None else r["power_w"] / 1e3, ",.1f"),
                  r.get("reason") or ""] for r in sw["rows"]]
        out.append("<h3>Designs (best plan each; * = Pareto front)</h3>")
        out.append(table(["", "system", "GPUs", "fabric", "layout", "tokens/s", "MFU (%)", "cost (M USD)",
                          "power (kW)", "why infeasible"], trows, numeric=(2, 5, 6, 7, 8)))
    return "".join(out)


def _fabric(data: dict[str, Any]) -> str | None:
    f = data.get("fabric")
    if not f:
        return _skipped(data, "fabric")
    out = [f'<p class="note">Flow-level simulation on {f["domains"]:,} domains ({f["gpus"]:,} GPUs): {f["tiers"]}-tier '
           f'{_e(f["topology"])}, NIC {f["nic_gbps"]:g} Gb/s, switch links {f["link_gbps"]:g} Gb/s, switches: '
           f'{_e(_switches(f["switches"]))}; collectives of {f["size_bytes"] / 2**30:g} GiB per rank, seed {f["seed"]}.</p>']
    hm = f.get("heatmap") or {}
    if hm.get("rows"):
        width = max(len(r[1]) for r in hm["rows"])
        vals = [r[1] + [None] * (width - len(r[1])) for r in hm["rows"]]
        out.append(figure(svg.heatmap("link-heatmap", f"Link utilisation per tier ({hm['op']}, {hm['routing'].upper()})",
                                      [f"{r[0]} ({r[2]})" for r in hm["rows"]], [str(i + 1) for i in range(width)], vals,
                                      x_label="link group (links in id order, max utilisation in each group)",
                                      y_label="tier (links)"),
                          "Utilisation = bytes carried / (capacity × completion time)."))
    runs = f["runs"]
    ops = sorted({v["op"] for v in runs.values()})
    routings = list(dict.fromkeys(v["routing"] for v in runs.values()))  # the policies the data holds

    out.append(figure(svg.bar_chart("routing", "Routing policies: " + " vs ".join(routings),
                                    ops, [(r, [1e3 * runs[f"{op}:{r}"]["time_s"] for op in ops]) for r in routings],
                                    x_label="collective", y_label="completion time (ms)", stacked=False),
                      "Lower is better; the ideal is every flow alone at the NIC line rate."))
    out.append(table(["collective", "routing", "time (ms)", "ideal (ms)", "efficiency (%)"],
                     [[v["op"], v["routing"], f"{1e3 * v['time_s']:.3f}", f"{1e3 * v['ideal_time_s']:.3f}",
                       f"{100 * v['efficiency']:.1f}"] for v in runs.values()], numeric=(2, 3, 4)))
    hot = runs.get("all_to_all:ecmp", {}).get("hottest") or []
    if hot:
        out.append("<h3>Hottest links (all-to-all, ECMP)</h3>")
        out.append(table(["link", "utilisation (%)", "GB carried"],
                         [[h["link"], f"{100 * h['util']:.1f}", f"{h['bytes'] / 1e9:,.2f}"] for h in hot], numeric=(1, 2)))
    return "".join(out)


def _switches(sw: Any) -> str:
    if isinstance(sw, dict):
        return ", ".join(f"{sw[k]:,} {k}" for k in ("leaf", "spine", "core") if sw.get(k))
    return str(sw)


def _reliability(data: dict[str, Any]) -> str | None:
    r = data.get("reliability")
    if not r:
        return _skipped(data, "reliability")
    out = [_kpis([("ETTR (expected)", f"{r['ettr']:.4f}"), ("interruptions / day", f"{r['unexpected_per_day']:.3g}"),
                  ("mean time between interruptions", f"{r['mtbi_h']:.1f} h"),
                  ("checkpoint interval", f"{r['checkpoint_interval_s'] / 60:.1f} min"),
                  ("tokens / day", svg.fmt(r.get("tokens_per_day") or 0))])]
    mc = r.get("monte_carlo") or {}
    q = mc.get("ettr_quantiles")
    if q:
        probs = [i * 5 for i in range(len(q))]
        out.append(figure(svg.line_chart("goodput-cdf", f"Goodput (ETTR) distribution over {mc['runs']:,} simulated runs",
                                         [("Monte-Carlo CDF", [100 * v for v in q], probs)],
                                         x_label="effective training time ratio (%)", y_label="runs at or below (%)",
                                         y_min=0.0, y_max=100.0, step=True),
                          f"{r['days']:g}-day run, seed {mc.get('seed')}; expected ETTR {r['ettr']:.4f}, "
                          f"Monte-Carlo mean {mc.get('ettr_mean', 0):.4f}."))
    by = sorted(r["by_class"], key=lambda c: -c["expected"])
    out.append(figure(svg.bar_chart("interruptions", f"Expected unexpected interruptions in {r['days']:g} days, by class",
                                    [c["class"] for c in by], [("interruptions", [c["expected"] for c in by])],
                                    x_label="component class", y_label=f"interruptions (count in {r['days']:g} days)"),
                      "Rates from the Llama 3 paper's Table 5, scaled by this cluster's component counts."))
    out.append(table(["class", "components", "per 1000 unit-days", "expected", "share (%)", "effect", "basis"],
                     [[c["class"], f"{c['components']:,.0f}", f"{c['rate_per_1000_unit_days']:.4g}", f"{c['expected']:.2f}",
                       f"{100 * c['share']:.1f}", c["effect"], c["basis"]] for c in by], numeric=(1, 2, 3, 4)))
    return "".join(out)


def _accuracy(data: dict[str, Any]) -> str | None:
    a = data.get("accuracy")
    if not a:
        return _skipped(data, "accuracy")
    rows = a["rows"]
    by_gpu: dict[str, list[float]] = {}
    for r in rows:
        if r.get("error_pct") is not None:
            by_gpu.setdefault(r.get("gpu") or "?", []).append(abs(r["error_pct"]))
    keys = sorted(by_gpu)
    out = [f'<p>MAPE <b>{a["mape_pct"]:.1f} %</b> over {a["modelled"]} published runs of the packaged '
           f'<code>{_e(a["set"])}</code> set ({a["failures"]} not modelled), {a["engine"]} engine.</p>']
    if keys:
        out.append(figure(svg.bar_chart("accuracy-by-gpu", "Mean absolute error by GPU", keys,
                                        [("MAPE", [sum(by_gpu[k]) / len(by_gpu[k]) for k in keys])],
                                        x_label="GPU", y_label="mean |error| (%)"),
                          "Predicted vs published step time, per row; rows are modelled from their columns only."))
    trows = []
    for r in rows:
        err = r.get("error_pct")
        cls = "err-pos" if (err or 0) > 0 else "err-neg"
        trows.append([r["id"], r.get("model", ""), r.get("gpu", ""), r.get("num_gpus", ""), num(r["measured"]),
                      num(r["predicted"]), Raw(f'<span class="{cls}">{err:+.1f}</span>' if err is not None else
                                               _e("not modelled: " + str(r.get("reason")))),
                      Raw(source_html(r.get("source", "")) + (f"<br><small>{_e(r['source_locator'])}</small>"
                                                                  if r.get("source_locator") else ""))])
    unit = rows[0]["unit"] if rows else "s"
    out.append('<div class="scroll">' + table(["id", "model", "GPU", "GPUs", f"published ({unit})", f"predicted ({unit})",
                                               "error (%)", "source"], trows, numeric=(3, 4, 5, 6)) + "</div>")
    return "".join(out)


def _assumptions(data: dict[str, Any]) -> str | None:
    a = data.get("assumptions")
    if not a:
        return None
    return ("<p>Values the numbers rest on that are not from a published source, or choices this report made:</p>"
            + table(["assumption", "where it comes from"], [[x["text"], x["source"]] for x in a]))


for _s in (Section("overview", "Overview", _overview), Section("cluster", "The cluster", _cluster),
           Section("step", "One step", _step), Section("plan", "The plan", _plan),
           Section("fabric", "The fabric", _fabric), Section("reliability", "Reliability", _reliability),
           Section("accuracy", "Accuracy", _accuracy), Section("assumptions", "Assumptions", _assumptions)):
    register_section(_s)


__all__ = ["MAX_BYTES", "SECTIONS", "Raw", "Section", "register_section", "render_document", "render_html", "source_html", "table"]

"""Server-rendered pages: one layout, one small shared script. No template engine, no user input
placed in a page unescaped; results arrive as JSON whose HTML parts the server built and escaped."""

from __future__ import annotations

from html import escape
from typing import Any

NAV = (("/", "Estimate"), ("/cluster", "Cluster"), ("/plan", "Plan"), ("/compare", "Compare"), ("/sweep", "Sweep"), ("/results", "Results"))

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#222;background:#f6f7f9}
header{background:#1f2d3d;color:#fff;padding:10px 24px;display:flex;align-items:center;gap:24px}
header b{font-size:17px}header a{color:#cfe0f5;text-decoration:none;font-size:14px}header a.on{color:#fff;font-weight:600}
main{max-width:1180px;margin:0 auto;padding:14px 24px 40px}
form{background:#fff;border:1px solid #e0e0e0;border-radius:6px;padding:12px 16px}
fieldset{border:none;margin:0;padding:0;display:flex;flex-wrap:wrap;gap:10px 16px}
label{display:flex;flex-direction:column;font-size:12px;color:#444;min-width:120px}
input,select,textarea{font:inherit;font-size:13px;padding:4px 6px;border:1px solid #bbb;border-radius:4px;margin-top:2px}
textarea{width:100%;min-height:150px;font-family:ui-monospace,monospace}
.buttons{margin-top:12px;display:flex;gap:8px;flex-wrap:wrap}
button{font:inherit;font-size:13px;padding:6px 14px;border-radius:4px;border:1px solid #1f5fa8;background:#1f5fa8;color:#fff;cursor:pointer}
button.secondary{background:#fff;color:#1f5fa8}
.error{background:#fdecea;border:1px solid #f5c2c0;color:#8a1c1c;padding:8px 12px;border-radius:4px;margin:12px 0;white-space:pre-wrap}
.status{color:#555;font-size:13px;margin:10px 0}
progress{width:320px;vertical-align:middle}
#out{margin-top:14px}
.card{background:#fff;border:1px solid #e0e0e0;border-radius:6px;padding:10px 16px;margin:12px 0}
table{border-collapse:collapse;font-size:12.5px}th,td{border-bottom:1px solid #eee;padding:3px 8px;text-align:left}
th{background:#f3f5f8}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.kpis{display:flex;flex-wrap:wrap;gap:10px;margin:6px 0}
.kpi{border:1px solid #e3e3e3;border-radius:6px;padding:6px 12px;min-width:110px;background:#fcfcfd}
.kpi b{display:block;font-size:17px}.kpi span{font-size:11.5px;color:#666}
.note{color:#555;font-size:12.5px}figure{margin:8px 0}figcaption{font-size:12px;color:#555}
h2{font-size:17px}h3{font-size:14px}
"""

# One shared script: post a form as JSON, show the error the server gives (the CLI's message), render
# the HTML the server built, poll jobs with a progress bar and a cancel button. No eval, no innerHTML of
# anything but server-built HTML.
SCRIPT = r"""
const $ = (s) => document.querySelector(s);
function formJson(form) {
  const o = {};
  for (const el of form.elements) {
    if (!el.name || el.disabled) continue;
    if (el.type === 'checkbox') { o[el.name] = el.checked; continue; }
    const v = el.value.trim();
    if (v === '') continue;
    if (el.dataset.kind === 'int') o[el.name] = /^-?\d+$/.test(v) ? parseInt(v, 10) : v;
    else if (el.dataset.kind === 'float') o[el.name] = isNaN(Number(v)) ? v : Number(v);
    else if (el.dataset.kind === 'lines') o[el.name] = v.split(/\n|,/).map(s => s.trim()).filter(Boolean);
    else o[el.name] = v;
  }
  return o;
}
function showError(doc) {
  const e = document.createElement('div'); e.className = 'error'; e.setAttribute('role', 'alert');
  e.textContent = doc && (doc.text || doc.error || doc.detail) ? (doc.text || doc.error || JSON.stringify(doc.detail)) : 'request failed';
  $('#out').replaceChildren(e);
}
function download(name, text, type) {
  const a = document.createElement('a');
  a.href = URL.createObjectURL(new Blob([text], {type}));
  a.download = name; document.body.appendChild(a); a.click(); a.remove();
}
async function post(url, body) {
  const r = await fetch(url, {method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify(body)});
  let doc = null; try { doc = await r.json(); } catch (_) {}
  return [r.ok, doc];
}
async function run(form, url) {
  $('#out').replaceChildren(Object.assign(document.createElement('div'), {className: 'status', textContent: 'running…'}));
  const [ok, doc] = await post(url, formJson(form));
  if (!ok) { showError(doc); return null; }
  if (doc.job) return watch(doc.job);
  render(doc); return doc;
}
function render(doc) {
  const out = $('#out'); out.innerHTML = doc.html || '';
  window.lastResult = doc.result;
  out.dataset.ready = '1';
}
async function watch(job) {
  const out = $('#out');
  out.innerHTML = '<div class="status" id="jobstatus"><span id="jobtext">queued</span> <progress id="jobbar" max="1" value="0"></progress> <button type="button" class="secondary" id="cancel">Cancel</button></div>';
  $('#cancel').onclick = () => post('/api/jobs/' + job + '/cancel', {});
  for (;;) {
    await new Promise(r => setTimeout(r, 250));
    const r = await fetch('/api/jobs/' + job); const s = await r.json();
    if (!r.ok) { showError(s); return; }
    $('#jobtext').textContent = s.status + (s.total ? ` ${s.done}/${s.total}` : '');
    if (s.total) { $('#jobbar').max = s.total; $('#jobbar').value = s.done; }
    if (s.status === 'done') {
      const rr = await fetch('/api/jobs/' + job + '/result?format=json'); const d = await rr.json();
      if (!rr.ok) { showError(d); return; }
      render(d); return d;
    }
    if (s.status === 'failed') { showError(s.error); return; }
    if (s.status === 'cancelled') { out.innerHTML = '<div class="status" id="cancelled">cancelled</div>'; return; }
  }
}
"""


def _e(x: Any) -> str:
    return escape(str(x), quote=True)


def layout(title: str, active: str, body: str, script: str = "") -> str:
    nav = "".join(f'<a href="{h}"{" class=on" if h == active else ""}>{_e(t)}</a>' for h, t in NAV)
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
            f"<title>{_e(title)} · ClusterTwin</title><style>{CSS}</style></head><body>"
            f"<header><b>ClusterTwin</b>{nav}</header><main><h1 style=\"font-size:20px\">{_e(title)}</h1>{body}"
            f"<div id=\"out\" aria-live=\"polite\"></div></main><script>{SCRIPT}{script}</script></body></html>")


def field(name: str, label: str, *, kind: str = "text", value: Any = "", options: list[str] | None = None,
          placeholder: str = "") -> str:
    attrs = f'name="{_e(name)}" id="f-{_e(name)}"'
    if options is not None:
        opts = "".join(f'<option{" selected" if o == value else ""}>{_e(o)}</option>' for o in options)
        return f'<label>{_e(label)}<select {attrs}>{opts}</select></label>'
    dk = f' data-kind="{kind}"' if kind in ("int", "float", "lines") else ""
    ph = f' placeholder="{_e(placeholder)}"' if placeholder else ""
    return f'<label>{_e(label)}<input {attrs}{dk}{ph} value="{_e(value)}"></label>'


def design_fields(cat: dict[str, list[str]], *, gpus: int | str = 64, with_plan: bool = True) -> str:
    f = [field("model", "model", value="llama3-70b", options=cat["models"]),
         field("system", "system", value="hgx-h100", options=cat["systems"]),
         field("fabric", "scale-out fabric", value="", options=[""] + cat["fabrics"]),
         field("gpus", "GPUs", kind="int", value=gpus)]
    if with_plan:
        f += [field(k, k.replace("_", " "), kind="int", placeholder=ph) for k, ph in
              (("tp", "1"), ("pp", "1"), ("dp", "auto"), ("cp", "1"), ("ep", "1"), ("vpp", "1"), ("zero", "1"),
               ("micro_batch", "1"), ("global_batch", "auto"), ("seq_len", "model's"))]
        f += [field("recompute", "recompute", value="", options=["", "none", "selective", "full"]),
              field("dtype", "dtype", value="", options=["", "bf16", "fp16", "fp8", "mxfp8", "nvfp4"])]
    return "<fieldset>" + "".join(f) + "</fieldset>"


def estimate_page(cat: dict[str, list[str]]) -> str:
    body = (f'<form id="form" onsubmit="return false">{design_fields(cat)}'
            '<fieldset style="margin-top:8px">' + field("engine", "engine", value="analytical", options=["analytical", "event"])
            + '<label>scenario YAML<input type="file" id="upload" accept=".yaml,.yml"></label></fieldset>'
            '<div class="buttons"><button id="run">Estimate</button>'
            '<button type="button" class="secondary" id="yaml">Download scenario YAML</button>'
            '<button type="button" class="secondary" id="json">Download JSON</button>'
            '<button type="button" class="secondary" id="report">HTML report</button></div></form>')
    script = r"""
$('#f-tp').value = '4'; $('#f-pp').value = '8'; $('#f-vpp').value = '5'; $('#f-global_batch').value = '256';
$('#f-seq_len').value = '8192'; $('#f-dtype').value = 'fp8'; $('#f-fabric').value = 'ib-ndr-400g';
$('#run').onclick = () => run($('#form'), '/api/estimate');
$('#json').onclick = async () => { const d = await run($('#form'), '/api/estimate'); if (d) download('estimate.json', JSON.stringify(d.result, null, 2), 'application/json'); };
$('#yaml').onclick = async () => {
  const r = await fetch('/api/scenario.yaml', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify(formJson($('#form')))});
  if (!r.ok) { showError(await r.json()); return; }
  download('scenario.yaml', await r.text(), 'application/yaml');
};
$('#report').onclick = async () => {
  const d = await run($('#form'), '/api/report');
  if (d && d.download) { const a = document.createElement('a'); a.href = d.download; a.id = 'report-link'; a.textContent = 'download the report'; a.setAttribute('download', 'report.html'); $('#out').prepend(a); }
};
$('#upload').onchange = async (ev) => {
  const f = ev.target.files[0]; if (!f) return;
  const fd = new FormData(); fd.append('file', f);
  const r = await fetch('/api/scenario/upload', {method: 'POST', body: fd}); const d = await r.json();
  if (!r.ok) { showError(d); return; }
  for (const [k, v] of Object.entries(d.fields)) { const el = $('#f-' + k); if (el) el.value = v; }
  $('#out').replaceChildren(Object.assign(document.createElement('div'), {className: 'status', id: 'uploaded', textContent: 'loaded ' + d.name}));
};
"""
    return layout("Estimate one training step", "/", body, script)


def cluster_page(cat: dict[str, list[str]]) -> str:
    body = ('<form id="form" onsubmit="return false"><fieldset>'
            + field("system", "system", value="hgx-h100", options=cat["systems"])
            + field("domains", "scale-up domains", kind="int", value=16)
            + field("fabric", "scale-out fabric", value="", options=[""] + cat["fabrics"])
            + field("topology", "topology", value="rail", options=["rail", "fat-tree", "dual-plane"])
            + field("oversubscription", "oversubscription", kind="float", value=1)
            + field("tiers", "tiers", value="auto", options=["auto", "1", "2", "3"])
            + '</fieldset><div class="buttons"><button id="run">Show the cluster</button></div></form>')
    return layout("Cluster design", "/cluster", body, "$('#run').onclick = () => run($('#form'), '/api/cluster');")


def plan_page(cat: dict[str, list[str]]) -> str:
    body = (f'<form id="form" onsubmit="return false">{design_fields(cat, gpus=1024, with_plan=False)}'
            '<fieldset style="margin-top:8px">'
            + field("global_batch", "global batch", kind="int", placeholder="4 Mi tokens / seq len")
            + field("seq_len", "seq len", kind="int", placeholder="model's")
            + field("dtype", "dtype", value="bf16", options=["bf16", "fp16", "fp8", "mxfp8", "nvfp4"])
            + field("top", "plans to show", kind="int", value=5)
            + field("tp", "fix TP", kind="int") + field("pp", "fix PP", kind="int")
            + '</fieldset><div class="buttons"><button id="run">Plan</button></div></form>')
    script = "$('#run').onclick = () => run($('#form'), '/api/plan');"
    return layout("Best parallel layouts", "/plan", body, script)


def compare_page(cat: dict[str, list[str]]) -> str:
    body = ('<form id="form" onsubmit="return false"><fieldset>'
            '<label style="min-width:420px">designs, one per line: SYSTEM[xDOMAINS][@FABRIC]'
            '<textarea name="designs" id="f-designs" data-kind="lines" style="min-height:80px">'
            'gb200-nvl72x8@ib-ndr-400g\nhgx-h100x72@ib-ndr-400g</textarea></label>'
            + field("model", "model", value="llama3-70b", options=[""] + cat["models"])
            + field("mfu", "assumed MFU (blank: planner)", kind="float")
            + '</fieldset><div class="buttons"><button id="run">Compare</button></div></form>')
    return layout("Compare cluster designs", "/compare", body, "$('#run').onclick = () => run($('#form'), '/api/compare');")


SWEEP_EXAMPLE = """name: web-smoke
designs:
  system: hgx-h100
  domains: [8, 16]
  fabric: [ib-ndr-400g, roce-400g]
models: llama3-8b
global_batch: 128
seq_len: 8192
"""


def sweep_page() -> str:
    body = ('<form id="form" onsubmit="return false">'
            f'<label>sweep YAML (the format of scenarios/sweeps/*.yaml)<textarea name="spec" id="f-spec">{_e(SWEEP_EXAMPLE)}</textarea></label>'
            '<div class="buttons"><button id="run">Run sweep</button></div></form>')
    return layout("Design-space sweep", "/sweep", body, "$('#run').onclick = () => run($('#form'), '/api/sweep');")


def results_page(rows: list[dict[str, Any]], db: str) -> str:
    if not rows:
        body = f'<p class="note">No sweeps or plans in {_e(db)} yet: run one on the Plan or Sweep page.</p>'
    else:
        tr = "".join(
            f'<tr><td><a href="/results/{_e(r["id"])}">{_e(r["id"])}</a></td><td>{_e(r["name"])}</td>'
            f'<td class="num">{_e(r["num_jobs"])}</td><td class="num">{_e(r["rows"])}</td><td>{_e(r["created_at"])}</td>'
            f'<td>{_e(r.get("finished_at") or "(unfinished)")}</td></tr>' for r in rows)
        body = (f'<p class="note">results database: {_e(db)}</p><table id="results"><thead><tr><th>id</th><th>name</th>'
                f'<th class="num">jobs</th><th class="num">rows</th><th>created</th><th>finished</th></tr></thead>'
                f'<tbody>{tr}</tbody></table>')
    return layout("Results database", "/results", body)


def result_page(meta: dict[str, Any], html: str) -> str:
    rid = _e(meta["id"])
    links = (f'<div class="buttons"><a href="/api/results/{rid}?download=1"><button type="button" class="secondary">'
             f'Download JSON</button></a><a href="/api/results/{rid}/report"><button type="button" class="secondary" '
             f'id="dbreport">HTML report</button></a></div>')
    return layout(f"{meta.get('name')} ({meta['id']})", "/results", links + html)


__all__ = ["cluster_page", "compare_page", "estimate_page", "layout", "plan_page", "result_page", "results_page", "sweep_page"]

"""The local web app: FastAPI over ``clustertwin.api`` and the HTML report.

Pages are server-rendered (``pages.py``); each posts JSON to ``/api/*`` and shows the HTML the
server builds from the result (charts are the report's inline SVG). Bad input answers 400 with the
message, hint and suggestions the CLI prints for the same input (the same ``api`` checks raise it);
an internal error answers 500 with a short message. Request bodies and uploads have size limits;
nothing a user sends is evaluated (YAML is read with ``yaml.safe_load`` through ``userfiles``).
Long runs (sweeps, reports) are background jobs with progress and cancellation.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import yaml
from fastapi import FastAPI, Request, UploadFile
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from pydantic import BaseModel, ConfigDict

from .. import api
from ..errors import InputError
from . import pages
from .jobs import JobManager, error_doc

MAX_BODY = 1 << 20  # 1 MiB for any request body
MAX_UPLOAD = 256 << 10  # 256 KiB for an uploaded scenario / sweep YAML
MAX_SWEEP_JOBS = 256  # designs x models x batches one web sweep may run


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EstimateIn(_In):
    model: str | None = None
    system: str | None = None
    gpus: int | None = None
    fabric: str | None = None
    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    cp: int | None = None
    ep: int | None = None
    vpp: int | None = None
    zero: int | None = None
    micro_batch: int | None = None
    global_batch: int | None = None
    seq_len: int | None = None
    recompute: str | None = None
    dtype: str | None = None
    stack: str | None = None
    engine: str = "analytical"


class PlanIn(_In):
    model: str | None = None
    system: str | None = None
    gpus: int | None = None
    domains: int | None = None
    fabric: str | None = None
    global_batch: int | None = None
    seq_len: int | None = None
    dtype: str = "bf16"
    top: int = 5
    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    cp: int | None = None
    ep: int | None = None
    vpp: int | None = None
    zero: int | None = None
    micro_batch: int | None = None
    recompute: str | None = None
    stack: str | None = None


class CompareIn(_In):
    designs: list[str]
    model: str | None = None
    gpus: int | None = None
    mfu: float | None = None


class ClusterIn(_In):
    system: str
    domains: int = 1
    fabric: str | None = None
    topology: str = "rail"
    oversubscription: float = 1.0
    tiers: str = "auto"


class SweepIn(_In):
    spec: str


PLAN_FIELDS = ("tp", "pp", "dp", "cp", "ep", "vpp", "zero", "micro_batch", "global_batch", "seq_len", "recompute",
               "dtype", "stack")


def estimate_scenario(body: EstimateIn) -> Any:
    """The scenario ``clustertwin estimate`` builds from the same flags, with the same checks."""
    kw = {k: getattr(body, k) for k in PLAN_FIELDS}
    for k, v in kw.items():
        if isinstance(v, int) and v < (0 if k == "zero" else 1):
            raise InputError(f"--{k.replace('_', '-')} must be positive, got {v}", hint="pass a positive integer")
    missing = [f for f, v in (("--model", body.model), ("--system", body.system), ("--gpus", body.gpus)) if v is None]
    if missing:
        raise InputError(f"estimate needs {', '.join(missing)} (or a scenario YAML)",
                         hint="e.g. clustertwin estimate --model gpt3-175b --system dgx-a100 --gpus 1024 --tp 8 --pp 8 --global-batch 1536")
    kw = {k: v for k, v in kw.items() if v is not None}
    kw.setdefault("tp", 1)
    return api.build_scenario(model=body.model, system=body.system, gpus=body.gpus, fabric=body.fabric, **kw)


def scenario_yaml(body: EstimateIn, sc: Any) -> str:
    plan = {k: getattr(body, k) for k in PLAN_FIELDS if getattr(body, k) is not None}
    plan.setdefault("tp", sc.plan.tp)
    doc = {"name": f"{sc.model.id}-{sc.system.id}-{sc.plan.num_gpus}", "description": "written by clustertwin ui",
           "model": sc.model.id, "system": sc.system.id, "fabric": sc.fabric.id, "gpus": sc.plan.num_gpus, "plan": plan}
    return yaml.safe_dump(doc, sort_keys=False)


# ----------------------------------------------------------------------------------------- rendering


def _estimate_html(r: Any, sc: Any) -> str:
    from ..report import svg
    from ..report.collect import STEP_GROUPS
    from ..report.html import _kpis

    bd = r.breakdown
    water = [(label, float(sum(bd.get(k, 0.0) for k in keys))) for label, keys in STEP_GROUPS]
    hbm = sc.system.accelerator.memory_capacity_bytes / 1e9
    mem = r.memory_breakdown_gb
    kinds = [k for k, v in mem.items() if v]
    out = [_kpis([("step time", f"{r.step_time_s:.3f} s"), ("tokens/s", f"{r.tokens_per_s:,.0f}"),
                  ("MFU", f"{100 * r.mfu:.1f} %"), ("memory per GPU", f"{r.memory_gb_per_gpu:.1f} GB"),
                  ("fits in HBM", "yes" if r.fits_memory else "NO")]),
           f'<p class="note">{pages._e(r.model)} on {r.num_gpus:,} × {pages._e(r.system)} ({pages._e(r.fabric)}), '
           f'{pages._e(r.engine)} engine; bottleneck: {pages._e(r.bottleneck)}</p>',
           '<div class="card">', svg.waterfall("waterfall", "Step time breakdown", water, y_label="time per step (s)"),
           svg.bar_chart("memory", "Memory per GPU by kind", ["this plan"], [(k, [mem[k]]) for k in kinds],
                         x_label="parallel layout", y_label="memory per GPU (GB)", ref=(hbm, f"HBM capacity {hbm:.1f} GB")),
           "</div>"]
    return "".join(out)


def _cluster_html(doc: dict[str, Any]) -> str:
    from ..report.html import _cluster

    return f'<div class="card">{_cluster({"cluster": {"summary": doc["summary"], "bom": doc["bom"], "power": {}, "cost": {}}})}</div>'


def _plan_html(doc: dict[str, Any]) -> str:
    from ..report import svg
    from ..report.collect import layout_label
    from ..report.html import _plan

    plans = [{**p, "rank": p.get("rank") or i + 1} for i, p in enumerate(doc["plans"]) if p.get("tokens_per_s")]
    doc = {**doc, "plans": plans}
    chart = svg.bar_chart("plans", "Throughput of the top layouts", [f"#{p['rank']} {layout_label(p)}" for p in plans],
                          [("tokens/s", [p["tokens_per_s"] for p in plans])], x_label="layout",
                          y_label="throughput (tokens/s)")
    r = doc["request"]
    head = (f'<p class="note">{pages._e(r["model"])} on {r["gpus"]:,} × {pages._e(r["system"])} ({pages._e(r["fabric"])}), '
            f'global batch {r["global_batch"]} × {r["seq_len"]} tokens</p>')
    return head + f'<div class="card">{chart}</div><div class="card">{_plan({"plan": doc})}</div>'


def _compare_html(doc: dict[str, Any]) -> str:
    from ..report import svg
    from ..report.html import table

    rows = doc["designs"]
    spec = [("accelerators", "num_accelerators", ",.0f"), ("peak BF16 PFLOP/s", "peak_pflops_bf16", ",.1f"),
            ("HBM TB", "hbm_tb", ",.1f"), ("IT power kW", "power_kw", ",.1f"), ("capex USD", "cost_usd", ",.0f"),
            ("USD per hour", "usd_per_hour", ",.0f"), ("MTBI h", "mtbi_h", ".3g"), ("step time s", "step_time_s", ".3g"),
            ("MFU", "mfu", ".3f"), ("ETTR", "ettr", ".4f"), ("tokens/s", "tokens_per_s", ".4g"),
            ("USD per M tokens", "usd_per_million_tokens", ".3f")]

    def f(v: Any, s: str) -> str:
        return "–" if v is None else (format(v, s) if isinstance(v, (int, float)) else str(v))

    t = table(["metric", *[r["name"] for r in rows]], [[lab, *[f(r.get(k), s) for r in rows]] for lab, k, s in spec],
              numeric=tuple(range(1, len(rows) + 1)))
    charts = [svg.bar_chart("compare-power", "IT power", [r["name"] for r in rows],
                            [("kW", [r.get("power_kw") or 0 for r in rows])], x_label="design", y_label="IT power (kW)")]
    if any(r.get("tokens_per_s") for r in rows):
        charts.append(svg.bar_chart("compare-throughput", "Throughput", [r["name"] for r in rows],
                                    [("tokens/s", [r.get("tokens_per_s") or 0 for r in rows])], x_label="design",
                                    y_label="throughput (tokens/s)"))
    note = f'<p class="note">{pages._e(doc["omitted"])}</p>' if doc.get("omitted") else ""
    return f'<div class="card">{t}{note}</div><div class="card">{"".join(charts)}</div>'


def _sweep_html(rows: list[dict[str, Any]]) -> str:
    from ..report.html import _plan

    return f'<div class="card">{_plan({"sweep": {"rows": rows}})}</div>'


# ----------------------------------------------------------------------------------------- app


class BodyLimit:
    """Refuse request bodies over ``limit`` bytes with 413, whether announced or streamed."""

    def __init__(self, app: Any, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for k, v in scope.get("headers", []):
            if k == b"content-length":
                try:
                    n = int(v)
                except ValueError:
                    n = self.limit + 1
                if n > self.limit:
                    await _too_large(send, self.limit)
                    return
        seen = 0
        sent = False

        async def limited() -> dict:
            nonlocal seen
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > self.limit:
                    raise _TooLarge()
            return msg

        async def tracking_send(msg: dict) -> None:
            nonlocal sent
            if msg["type"] == "http.response.start":
                sent = True
            await send(msg)

        try:
            await self.app(scope, limited, tracking_send)
        except _TooLarge:
            if not sent:
                await _too_large(send, self.limit)


class _TooLarge(Exception):
    pass


async def _too_large(send: Any, limit: int) -> None:
    body = json.dumps({"error": f"request body over the {limit // 1024} KiB limit",
                       "hint": "send a smaller file or fewer designs", "suggestions": []}).encode()
    await send({"type": "http.response.start", "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def _bad(exc: InputError, status: int = 400) -> JSONResponse:
    return JSONResponse(error_doc(exc), status_code=status)


def _catalog_lists() -> dict[str, list[str]]:
    from ..catalog import load_catalog

    cat = load_catalog()
    return {"systems": sorted(cat.systems), "fabrics": sorted(cat.scaleout), "models": api.list_models()}


def _page_route(page: Callable[..., str], lists: Any) -> Callable[[], str]:
    """A GET handler without parameters for a form page (rendered with the catalog lists when given)."""
    def render() -> str:
        return page(lists) if lists is not None else page()

    return render


def create_app(*, db: str | Path = "clustertwin-results.db", max_body: int = MAX_BODY, workers: int = 2) -> FastAPI:
    """The app; ``db``: the results database plans and sweeps are stored in and browsed from."""
    db_path = Path(db)
    jobs = JobManager(workers=workers)

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        yield
        jobs.shutdown()

    app = FastAPI(title="ClusterTwin", version=_version(), docs_url=None, redoc_url=None, lifespan=lifespan)
    app.state.jobs = jobs
    app.state.db = db_path
    lists = _catalog_lists()

    @app.exception_handler(InputError)
    async def _input_error(_req: Request, exc: InputError) -> JSONResponse:
        return _bad(exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(_req: Request, exc: RequestValidationError) -> JSONResponse:
        return _bad(validation_message(exc))

    @app.exception_handler(Exception)
    async def _internal(_req: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"error": f"internal error: {type(exc).__name__}", "hint": "this is a ClusterTwin bug; "
                             "run the same input with the CLI and CLUSTERTWIN_DEBUG=1", "suggestions": []}, status_code=500)

    # pages -----------------------------------------------------------------------------------
    # the form pages: one GET route each, rendered from the catalog lists
    for path, page, with_lists in (("/", pages.estimate_page, True), ("/cluster", pages.cluster_page, True),
                                   ("/plan", pages.plan_page, True), ("/compare", pages.compare_page, True),
                                   ("/sweep", pages.sweep_page, False)):
        app.add_api_route(path, _page_route(page, lists if with_lists else None), methods=["GET"],
                          response_class=HTMLResponse, name=page.__name__)

    @app.get("/results", response_class=HTMLResponse)
    def results_page() -> str:
        rows = api.results(db_path)["sweeps"] if db_path.exists() else []
        return pages.results_page(rows, str(db_path))

    @app.get("/results/{record_id}", response_class=HTMLResponse)
    def result_page(record_id: str) -> HTMLResponse:
        try:
            doc = api.results(db_path, record_id)
        except InputError as exc:
            return HTMLResponse(pages.layout("Not found", "/results", f'<div class="error">{pages._e(exc.render())}</div>'),
                                status_code=404)
        meta, rows = doc["sweep"], doc["rows"]
        if (meta.get("spec") or {}).get("kind") == "plan":
            # stored plan rows carry job_index = rank - 1 (planner/record.py), not the live plan's rank
            rows = [dict(r, rank=r.get("rank", int(r.get("job_index", i)) + 1)) for i, r in enumerate(rows)]
            html = _plan_html({"plans": rows, "request": _plan_request(meta, rows), "runner_up": None})
        elif (meta.get("spec") or {}).get("kind") == "schedule":  # clustertwin schedule replay | compare
            from ..report.html import table

            keys = ("jct_mean_h", "jct_p95_h", "queue_mean_h", "utilisation", "goodput", "stranded_domain_gpus",
                    "fgd_frag_ratio", "mean_step_penalty", "lost_gpu_h")
            metrics = meta["spec"].get("metrics", {})
            html = '<div class="card">' + table(["policy", *keys], [[p, *[format(m.get(k, float("nan")), ".4g") for k in keys]]
                                                                      for p, m in metrics.items()]) + "</div>"
        else:
            html = _sweep_html(rows)
        return HTMLResponse(pages.result_page(meta, html))

    @app.get("/healthz")
    def healthz() -> dict[str, Any]:
        return {"ok": True}

    # api -------------------------------------------------------------------------------------
    @app.get("/api/catalog")
    def catalog() -> dict[str, list[str]]:
        return lists

    @app.post("/api/estimate")
    def estimate(body: EstimateIn) -> dict[str, Any]:
        sc = estimate_scenario(body)
        r = api.simulate(sc, engine=body.engine)
        return {"result": _jsonable(r.to_dict()), "html": _estimate_html(r, sc)}

    @app.post("/api/scenario.yaml")
    def scenario_file(body: EstimateIn) -> Response:
        sc = estimate_scenario(body)
        return PlainTextResponse(scenario_yaml(body, sc), media_type="application/yaml",
                                 headers={"Content-Disposition": 'attachment; filename="scenario.yaml"'})

    @app.post("/api/scenario/upload")
    async def upload(file: UploadFile) -> dict[str, Any]:
        data = await file.read(MAX_UPLOAD + 1)
        if len(data) > MAX_UPLOAD:
            raise InputError(f"scenario file over the {MAX_UPLOAD // 1024} KiB limit", hint="a scenario YAML is a few lines")
        name = _safe_name(file.filename or "scenario.yaml")
        with tempfile.TemporaryDirectory(prefix="ct-upload-") as tmp:
            p = Path(tmp) / name
            p.write_bytes(data)
            try:
                sc = api.load_scenario(p)
            except InputError as exc:  # name the file as the user knows it, not the temp path
                raise InputError(exc.message.replace(str(p), name), hint=exc.hint, suggestions=exc.suggestions) from None
        fields = {"model": sc.model.id, "system": sc.system.id, "fabric": sc.fabric.id, "gpus": sc.plan.num_gpus}
        fields.update({k: getattr(sc.plan, k) for k in ("tp", "pp", "dp", "cp", "ep", "vpp", "zero", "micro_batch",
                                                        "global_batch", "seq_len", "recompute", "dtype")
                       if hasattr(sc.plan, k)})
        return {"name": name, "fields": _jsonable(fields)}

    @app.post("/api/cluster")
    def cluster(body: ClusterIn) -> dict[str, Any]:
        tiers: int | str = body.tiers
        if body.tiers != "auto":
            try:
                tiers = int(body.tiers)
            except ValueError:
                raise InputError(f"--tiers must be 1, 2, 3 or auto, got {body.tiers!r}") from None
        doc = _jsonable(api.cluster(body.system, body.domains, fabric=body.fabric or None, topology=body.topology,
                                    oversubscription=body.oversubscription, tiers=tiers))
        return {"result": doc, "html": _cluster_html(doc)}

    @app.post("/api/plan")
    def plan(body: PlanIn) -> dict[str, Any]:
        rep = api.plan(**body.model_dump(), store_db=db_path)
        doc = _jsonable(rep)
        return {"result": doc, "html": _plan_html(doc)}

    @app.post("/api/compare")
    def compare(body: CompareIn) -> dict[str, Any]:
        if not 1 <= len(body.designs) <= 8:
            raise InputError(f"compare takes 1 to 8 designs, got {len(body.designs)}",
                             hint="one per line: SYSTEM[xDOMAINS][@FABRIC]")
        doc = _jsonable(api.compare(body.designs, model=body.model or None, gpus=body.gpus, mfu=body.mfu))
        return {"result": doc, "html": _compare_html(doc)}

    @app.post("/api/sweep")
    def sweep(body: SweepIn) -> dict[str, Any]:
        if len(body.spec) > MAX_UPLOAD:
            raise InputError(f"sweep YAML over the {MAX_UPLOAD // 1024} KiB limit")
        try:
            spec = yaml.safe_load(body.spec)
        except yaml.YAMLError as exc:
            raise InputError(f"sweep YAML does not parse: {str(exc).splitlines()[0]}",
                             hint="see scenarios/sweeps/*.yaml for the format") from None
        if not isinstance(spec, dict):
            raise InputError("sweep YAML must be a mapping", hint="keys: name, designs, models, global_batch, seq_len")
        sw = api.build_sweep(spec)  # validation before the job starts: errors answer at once
        if len(sw.jobs) > MAX_SWEEP_JOBS:
            raise InputError(f"the sweep has {len(sw.jobs)} designs; the web app runs at most {MAX_SWEEP_JOBS}",
                             hint="run big sweeps with `clustertwin sweep FILE --db DB` and browse them here")

        def work(progress: Any) -> dict[str, Any]:
            doc = _jsonable(api.sweep(sw, db=db_path, progress=progress, workers=1))
            return {"result": doc, "html": _sweep_html(doc["rows"])}

        return {"job": jobs.submit("sweep", work).id}

    @app.post("/api/report")
    def report(body: EstimateIn) -> dict[str, Any]:
        sc = estimate_scenario(body)

        def work(progress: Any) -> dict[str, Any]:
            with tempfile.TemporaryDirectory(prefix="ct-report-") as tmp:
                out = Path(tmp) / "report.html"
                data = api.report(sc, html=out, trace=None, progress=progress)
                html = out.read_text(encoding="utf-8")
            return {"report": html, "sections": data["sections"], "bytes": data["html_bytes"]}

        return {"job": jobs.submit("report", work).id}

    @app.get("/api/jobs/{job_id}")
    def job_status(job_id: str) -> dict[str, Any]:
        return jobs.get(job_id).public()

    @app.post("/api/jobs/{job_id}/cancel")
    def job_cancel(job_id: str) -> dict[str, Any]:
        return jobs.cancel(job_id).public()

    @app.get("/api/jobs/{job_id}/result", response_model=None)
    def job_result(job_id: str, format: str = "json") -> Response | dict[str, Any]:
        job = jobs.get(job_id)
        if job.status != "done":
            raise InputError(f"job {job_id} is {job.status}, not done", hint="poll /api/jobs/ID until status is done")
        res = job.result
        if job.kind == "report":
            if format == "html":
                return HTMLResponse(res["report"], headers={"Content-Disposition": 'attachment; filename="report.html"'})
            return {"html": f'<p class="note">report ready: {res["bytes"] / 1e6:.2f} MB, sections '
                            f'{pages._e(", ".join(res["sections"]))}</p>', "download": f"/api/jobs/{job_id}/result?format=html",
                    "result": {"sections": res["sections"], "bytes": res["bytes"]}}
        return res

    @app.get("/api/results")
    def results() -> dict[str, Any]:
        return _jsonable(api.results(db_path)) if db_path.exists() else {"sweeps": []}

    @app.get("/api/results/{record_id}", response_model=None)
    def result(record_id: str, download: int = 0) -> Response | dict[str, Any]:
        doc = _jsonable(api.results(db_path, record_id))
        if download:
            return Response(json.dumps(doc, indent=2), media_type="application/json",
                            headers={"Content-Disposition": f'attachment; filename="{_safe_name(record_id)}.json"'})
        return doc

    @app.get("/api/results/{record_id}/report")
    def result_report(record_id: str) -> HTMLResponse:
        html = api.report_html(db=db_path, record_id=record_id)
        return HTMLResponse(html, headers={"Content-Disposition": f'attachment; filename="{_safe_name(record_id)}.html"'})

    return BodyLimit(app, max_body)  # type: ignore[return-value]


def _plan_request(meta: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
    r = rows[0] if rows else {}
    req = (meta.get("spec") or {}).get("request") or {}
    return {"model": req.get("model", r.get("model", "?")), "gpus": req.get("gpus", r.get("num_gpus", 0)),
            "system": req.get("system", r.get("system", "?")), "fabric": req.get("fabric", r.get("fabric", "?")),
            "global_batch": req.get("global_batch", r.get("global_batch", "?")), "seq_len": req.get("seq_len", r.get("seq_len", "?"))}


def validation_message(exc: RequestValidationError) -> InputError:
    """A request that does not match the form, said the way the CLI's option parser says it."""
    err = exc.errors()[0]
    loc = [str(p) for p in err.get("loc", ()) if p not in ("body",)]
    name = "--" + loc[0].replace("_", "-") if loc else "the request"
    kind = err.get("type", "")
    val = err.get("input")
    if kind == "extra_forbidden":
        return InputError(f"no such option: {name}", hint="see the form for the options")
    if kind == "missing":
        return InputError(f"missing option {name}")
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return InputError(f"Invalid value for '{name}': {val!r} is not a valid integer.")
    if kind in ("float_parsing", "float_type"):
        return InputError(f"Invalid value for '{name}': {val!r} is not a valid float.")
    if kind == "json_invalid":
        return InputError("the request body is not valid JSON")
    return InputError(f"Invalid value for '{name}': {err.get('msg', 'invalid')}")


def _safe_name(name: str) -> str:
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(name).name)[:80].strip("._") or "file"
    return base


def _jsonable(o: Any) -> Any:
    if hasattr(o, "to_json"):
        o = o.to_json()
    elif hasattr(o, "to_dict"):
        o = o.to_dict()
    return _finite(json.loads(json.dumps(o, default=_default)))


def _finite(o: Any) -> Any:
    """NaN / inf are not JSON: None instead, recursively."""
    if isinstance(o, float):
        return o if o == o and o not in (float("inf"), float("-inf")) else None
    if isinstance(o, dict):
        return {str(k): _finite(v) for k, v in o.items()}
    if isinstance(o, list):
        return [_finite(v) for v in o]
    return o


def _default(o: Any) -> Any:
    if hasattr(o, "tolist"):
        return o.tolist()
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    if isinstance(o, Path):
        return str(o)
    return str(o)


def _version() -> str:
    from .. import __version__

    return __version__


__all__ = ["EstimateIn", "create_app", "estimate_scenario", "validation_message"]

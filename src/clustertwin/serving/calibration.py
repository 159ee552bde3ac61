"""Fitted constants of the serving twin: the fit and leave-one-group-out cross-validation.

Fitted (and nothing else): each engine's host overhead per pass (``engines.*.step_overhead_ms`` in
``serving/data/engines.yaml``, one value per engine), the Hopper serving GEMM scale
(``chips.{h100-sxm,h200,h800}.gemm_mamf_scale``, one value for the family) and each engine's Blackwell
GEMM scale (``engines.*.gemm_mamf_scale.{b200,gb200,b300,gb300}``, one value per engine for the family).
Procedure (docs/serving.md "Calibration"): with every other constant fixed, the Hopper scale is chosen on
``HOPPER_GRID`` (<= 1.0: MAMF is the most a GEMM reaches) over the Hopper throughput rows; then each
engine's Blackwell scale on ``BLACKWELL_GRID`` over that engine's Blackwell throughput rows, an engine with
none taking the value that fits all Blackwell throughput rows together (one scale for every engine); then
each engine's overhead on ``OVERHEAD_GRID_MS`` over that engine's throughput rows (scenario_kind offline /
prefill / decode), each minimising the mean |log(predicted / measured)|. An engine with no rows keeps the
generic engine's overhead.

``cross_validate`` holds out one value of a column (``source_group``: one publisher) at a time, refits on
the other rows and predicts every held-out row (server / interactive rows included), so the reported error
is on results the constants never saw. The shipped constants are restored afterwards.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..errors import InputError
from ..validate import CVReport

THROUGHPUT_KINDS = ("offline", "prefill", "decode")
OVERHEAD_GRID_MS = (0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0)  # plausible host time per iteration
HOPPER_GRID = (0.8, 0.85, 0.9, 0.95, 1.0)  # <= 1: MAMF is the most a GEMM reaches
HOPPER = ("h100-sxm", "h200", "h800")
# Blackwell (tcgen05 tensor cores): the serving stacks' GEMM kernels there are their own (TensorRT-LLM's
# trtllm-gen / CUTLASS, SGLang's FlashInfer-CUTLASS / DeepGEMM), so the share of MAMF is fitted per engine;
# rows exist for b200 / gb200 only, b300 / gb300 (same kernels) take the same value (assumed)
BLACKWELL = ("b200", "gb200", "b300", "gb300")
BLACKWELL_GRID = (0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0)


@contextmanager
def restored_constants():
    """Run a block that changes the in-memory engine table; restore the shipped values afterwards."""
    from . import engines

    table = engines._table()
    saved = {e: {k: (dict(x) if isinstance(x, dict) else x) for k, x in v.items()} for e, v in table["engines"].items()}
    saved_chips = {c: dict(v) for c, v in (table.get("chips") or {}).items()}
    try:
        yield
    finally:
        table["engines"] = saved
        table["chips"] = saved_chips


def _set(overheads: dict[str, float], hopper: float, blackwell: dict[str, float] | None = None) -> None:
    from . import engines

    table = engines._table()
    for eng, ms in overheads.items():
        table["engines"][eng]["step_overhead_ms"] = ms
    for chip in HOPPER:
        table.setdefault("chips", {}).setdefault(chip, {})["gemm_mamf_scale"] = hopper
    for eng, sc in (blackwell or {}).items():
        table["engines"][eng]["gemm_mamf_scale"] = {c: sc for c in BLACKWELL}


def shipped_blackwell() -> dict[str, float]:
    """Each engine's shipped Blackwell GEMM scale (its b200 value)."""
    from . import engines

    return {e: float((v.get("gemm_mamf_scale") or {}).get("b200", math.nan))
            for e, v in engines._table()["engines"].items()}


def predict_rows(rows: list[dict], catalog) -> dict[str, float]:
    """Predicted target of each row (NaN where the row cannot be modelled)."""
    from .validation import predict_serving_row

    out = {}
    for r in rows:
        try:
            out[r["id"]] = predict_serving_row(r, catalog).predicted
        except (InputError, ArithmeticError, ValueError, KeyError, TypeError):
            out[r["id"]] = float("nan")
    return out


def _log_err(rows, pred) -> float:
    v = [abs(math.log(pred[r["id"]] / float(r["target_value"]))) for r in rows
         if math.isfinite(pred.get(r["id"], math.nan)) and pred[r["id"]] > 0]
    return float(np.mean(v)) if v else math.inf


def _measured(r: dict) -> float | None:
    try:
        v = float(r.get("target_value") or "")
    except ValueError:
        return None
    return v if v > 0 and math.isfinite(v) else None


def _fit_blackwell(by_engine: dict[str, list[dict]], over: dict[str, float], hopper: float, catalog) -> dict[str, float]:
    """Each engine's Blackwell GEMM scale on ``BLACKWELL_GRID`` over its Blackwell throughput rows; an engine
    with none takes the best single value over all of them. A row depends only on its own engine's scale,
    so one sweep per engine gives both."""
    bw = {e: [r for r in rs if (r.get("gpu_id") or "").strip() in BLACKWELL] for e, rs in by_engine.items()}
    errs: dict[str, list[list[float]]] = {e: [] for e in bw}
    for g in BLACKWELL_GRID:
        _set(over, hopper, {e: g for e in bw})
        for e, rs in bw.items():
            pred = predict_rows(rs, catalog) if rs else {}
            errs[e].append([abs(math.log(pred[r["id"]] / float(r["target_value"]))) for r in rs
                            if math.isfinite(pred.get(r["id"], math.nan)) and pred[r["id"]] > 0])
    pooled = [sum(sum(errs[e][i]) for e in bw) / max(1, sum(len(errs[e][i]) for e in bw))
              for i in range(len(BLACKWELL_GRID))]
    family = BLACKWELL_GRID[int(np.argmin(pooled))] if any(bw.values()) else 1.0
    out = {}
    for e, rs in bw.items():
        mean_err = [float(np.mean(x)) if x else math.inf for x in errs[e]]
        out[e] = BLACKWELL_GRID[int(np.argmin(mean_err))] if rs else family
    return out


def fit(rows: list[dict], catalog) -> tuple[dict[str, float], float, dict[str, float]]:
    """Refit on ``rows`` (serving.csv format) and leave the fitted values in the in-memory table: (engine
    overheads in ms, Hopper GEMM scale, each engine's Blackwell GEMM scale)."""
    from . import engines
    from .engines import engine_for_framework, engine_ids

    thr = [r for r in rows if r.get("scenario_kind") in THROUGHPUT_KINDS and _measured(r)]
    by_engine = {e: [r for r in thr if engine_for_framework(r.get("framework") or "").id == e] for e in engine_ids()}
    over = {e: float(engines._table()["engines"][e]["step_overhead_ms"]) for e in engine_ids()}
    hop_rows = [r for r in thr if (r.get("gpu_id") or "").strip() in HOPPER]
    best_h, err_h = 1.0, math.inf
    for h in HOPPER_GRID if hop_rows else ():
        _set(over, h)
        e = _log_err(hop_rows, predict_rows(hop_rows, catalog))
        if e < err_h:
            best_h, err_h = h, e
    bw = _fit_blackwell(by_engine, over, best_h, catalog)
    for eng, rs in by_engine.items():
        if not rs:  # nothing to fit on (e.g. its only source held out): the generic engine's value
            over[eng] = float(engines._table()["engines"]["generic"]["step_overhead_ms"])
            continue
        best, err = over[eng], math.inf
        for ms in OVERHEAD_GRID_MS:
            over[eng] = ms
            _set(over, best_h, bw)
            e = _log_err(rs, predict_rows(rs, catalog))
            if e < err:
                best, err = ms, e
        over[eng] = best
    _set(over, best_h, bw)
    return over, best_h, bw


def cross_validate(rows: list[dict], column: str = "source_group", *, catalog=None):
    """Leave-one-``column``-value-out: refit without the fold, predict the fold (``CVReport``)."""
    from ..catalog import load_catalog
    from . import engines

    if column == "source" and rows and "source_group" in rows[0]:
        column = "source_group"  # serving.csv's "source" names one document per row; the publisher is the group
    if rows and column not in rows[0]:
        raise InputError(f"--cv {column}: the file has no column {column!r}",
                         hint="group by a column of the file, e.g. --cv source_group")
    catalog = catalog or load_catalog()
    meas = {r["id"]: v for r in rows if (v := _measured(r)) is not None}
    rows = [r for r in rows if r["id"] in meas]
    skipped: list[str] = []
    with restored_constants():
        shipped = {e: float(v["step_overhead_ms"]) for e, v in engines._table()["engines"].items()}
        shipped_h = float((engines._table().get("chips") or {}).get("h100-sxm", {}).get("gemm_mamf_scale", 1.0))
        shipped_bw = shipped_blackwell()
        in_pred = predict_rows(rows, catalog)
        all_over, all_h, all_bw = fit(rows, catalog)
        folds, out_rows, fold_vals = [], [], []
        for name in sorted({(r.get(column) or "").strip() for r in rows}):
            train = [r for r in rows if (r.get(column) or "").strip() != name]
            held = [r for r in rows if (r.get(column) or "").strip() == name]
            _set(shipped, shipped_h, shipped_bw)
            over, hop, bw = fit(train, catalog)
            fold_vals.append((over, hop, bw))
            pred = predict_rows(held, catalog)
            errs = []
            for r in held:
                p = pred[r["id"]]
                if not math.isfinite(p):
                    skipped.append(r["id"])
                    continue
                m = meas[r["id"]]
                e = 100.0 * (p - m) / m
                errs.append(e)
                out_rows.append({"id": r["id"], "fold": name, "measured": m, "predicted": p, "error_pct": e})
            if errs:
                folds.append({"fold": name, "n": len(errs), "mape_pct": float(np.mean(np.abs(errs))),
                              "bias_pct": float(np.mean(errs)), "max_abs_error_pct": float(np.max(np.abs(errs))),
                              "values": {"step_overhead_ms": over, "hopper_gemm_mamf_scale": hop,
                                         "blackwell_gemm_mamf_scale": bw}})
    cv_mape = float(np.mean([abs(r["error_pct"]) for r in out_rows])) if out_rows else float("nan")
    ins = [abs(in_pred[r["id"]] / meas[r["id"]] - 1.0) * 100 for r in rows if math.isfinite(in_pred[r["id"]])]
    constants: list[dict[str, Any]] = []
    for eng, v in shipped.items():
        spread = [fv[0][eng] for fv in fold_vals]
        constants.append({"key": "step_overhead_ms", "group": eng, "chips": [eng], "unit": "ms", "value": v,
                          "refit_all_rows": all_over[eng], "fold_min": min(spread) if spread else None,
                          "fold_max": max(spread) if spread else None,
                          "rows": sum(1 for r in rows if r.get("scenario_kind") in THROUGHPUT_KINDS
                                      and engines.engine_for_framework(r.get("framework") or "").id == eng)})
    hs = [fv[1] for fv in fold_vals]
    constants.append({"key": "gemm_mamf_scale", "group": "hopper", "chips": list(HOPPER), "unit": "", "value": shipped_h,
                      "refit_all_rows": all_h, "fold_min": min(hs) if hs else None, "fold_max": max(hs) if hs else None,
                      "rows": sum(1 for r in rows if r.get("scenario_kind") in THROUGHPUT_KINDS
                                  and (r.get("gpu_id") or "").strip() in HOPPER)})
    for eng, v in shipped_bw.items():
        spread = [fv[2][eng] for fv in fold_vals]
        constants.append({"key": "gemm_mamf_scale", "group": f"blackwell/{eng}",
                          "chips": [f"{eng} on " + "/".join(BLACKWELL)], "unit": "",
                          "value": v, "refit_all_rows": all_bw[eng], "fold_min": min(spread) if spread else None,
                          "fold_max": max(spread) if spread else None,
                          "rows": sum(1 for r in rows if r.get("scenario_kind") in THROUGHPUT_KINDS
                                      and (r.get("gpu_id") or "").strip() in BLACKWELL
                                      and engines.engine_for_framework(r.get("framework") or "").id == eng)})
    return CVReport(column, folds, out_rows, cv_mape, float(np.mean(ins)) if ins else float("nan"), constants,
                    sorted(set(skipped)))

"""Fit the collective model to real nccl-tests logs and write a catalog overlay.

For each system the fit adjusts the physically meaningful per-system parameters by least squares on
log(time) over every (log, size) point:

* collectives inside one scale-up domain: ``latency_scale`` (x NCCL tuner latencies) and
  ``scaleup_busbw_fraction`` (achieved ring busbw / link bandwidth);
* collectives across domains: ``net_latency_scale`` and ``scaleout_busbw_fraction`` (achieved busbw /
  NIC line rate).

It also records, per log, the plain α-β fit ``t = α + factor·S / busbw`` (weighted least squares on
relative error) as information. The overlay is a catalog file with a ``calibration: collectives:``
section; ``load_catalog([overlay])`` (``--catalog overlay.yaml``) picks it up.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from ..errors import InputError
from .core import busbw_factor, collective_time
from .nccl_tests import NcclTestsLog, parse_log
from .params import CALIBRATION_SECTION, calibration_entry, resolve_params

# device-name fragments (nccl-tests "#  Rank" lines) -> catalog system ids, most specific first
_DEVICE_SYSTEMS = (
    ("GB300", "gb300-nvl72"),
    ("GB200", "gb200-nvl72"),
    ("B300", "hgx-b300"),
    ("B200", "hgx-b200"),
    ("H200", "hgx-h200"),
    ("H800", "dgx-h800"),
    ("H100", "hgx-h100"),
    ("A100", "dgx-a100"),
    ("MI300X", "mi300x-8"),
)

BOUNDS = {
    "latency_scale": (0.05, 50.0),
    "net_latency_scale": (0.05, 50.0),
    "scaleup_busbw_fraction": (0.02, 1.5),
    "scaleout_busbw_fraction": (0.02, 1.0),
    "channel_launch_us": (0.0, 5.0),
    "small_msg_bw_fraction": (1e-3, 1.0),
    "pipeline_fill_us": (0.0, 50.0),
}


def guess_system(device: str, catalog) -> str | None:
    up = (device or "").upper()
    for frag, sid in _DEVICE_SYSTEMS:
        if frag in up and sid in catalog.systems:
            return sid
    return None


@dataclasses.dataclass
class Record:
    log: NcclTestsLog
    system_id: str
    system: Any
    fabric: Any
    n: int
    g: int

    @property
    def domains(self) -> int:
        return int(np.ceil(self.n / self.g))


def _records(logs: list[NcclTestsLog], catalog, system: str | None, fabric: str | None) -> list[Record]:
    out = []
    for lg in logs:
        if lg.n_ranks < 2:
            raise InputError(
                f"nccl-tests log {lg.path!r} ran on {lg.n_ranks} rank(s): a collective needs at least 2 to calibrate",
                hint="rerun nccl-tests on 2 or more GPUs (e.g. -g 8), keeping its '# Rank' lines",
            )
        sid = system or guess_system(lg.device, catalog)
        if not sid:
            raise InputError(
                f"nccl-tests log {lg.path!r}: cannot tell the system from device {lg.device or '(none)'!r}",
                hint="pass --system, e.g. --system hgx-h100",
            )
        spec = catalog.system(sid)
        fab = catalog.fabric(fabric or spec.default_scaleout)
        hosts_per_domain = max(1, spec.devices_per_domain // max(1, spec.devices_per_host))
        g = int(min(lg.n_ranks, lg.ranks_per_host * hosts_per_domain, spec.devices_per_domain))
        out.append(Record(lg, sid, spec, fab, lg.n_ranks, max(1, g)))
    return out


def _predict(rec: Record, values: dict[str, float], catalog, sizes=None):
    base = dict(calibration_entry(rec.system_id, catalog, rec.system.scaleup.id))
    base.update(values)
    cat = SimpleNamespace(calibration={CALIBRATION_SECTION: {rec.system_id: base}})
    S = rec.log.sizes if sizes is None else sizes
    return collective_time(rec.log.collective, S, rec.n, rec.g, rec.system, rec.fabric, "auto", cat)


def alpha_beta_fit(sizes, times, factor: float) -> tuple[float, float, float]:
    """Weighted least squares of ``t = α + factor·S/B`` on relative error. Returns (α s, B B/s, rms)."""
    x = factor * np.asarray(sizes, dtype=float)
    t = np.asarray(times, dtype=float)
    A = np.stack([1 / t, x / t], axis=1)
    coef, *_ = np.linalg.lstsq(A, np.ones_like(t), rcond=None)
    alpha, beta = float(max(coef[0], 0.0)), float(max(coef[1], 1e-30))
    rms = float(np.sqrt(np.mean(((alpha + x * beta) / t - 1) ** 2)))
    return alpha, 1.0 / beta, rms


def fit_system(records: list[Record], catalog) -> dict[str, Any]:
    """Least-squares fit of the per-system parameters on log(time) over all records."""
    keys: list[str] = []
    if any(r.domains == 1 for r in records):
        keys += ["latency_scale", "scaleup_busbw_fraction"]
    if any(r.domains > 1 for r in records):
        keys += ["net_latency_scale", "scaleout_busbw_fraction"]
    P0 = resolve_params(records[0].system, records[0].fabric, catalog)
    start = {
        "latency_scale": P0.latency_scale,
        "net_latency_scale": P0.net_latency_scale,
        "scaleup_busbw_fraction": P0.scaleup_fraction,
        "scaleout_busbw_fraction": P0.scaleout_fraction,
    }
    vals, rel = _least_squares(records, catalog, keys, start)
    if keys[0] == "latency_scale" and np.sqrt(np.mean(rel**2)) > 0.05:
        # The curve's shape differs from the shipped small-message model: also fit the channel-launch
        # latency, the trimmed-channel bandwidth and the pipeline fill; keep it only if it helps.
        P0d = {
            "channel_launch_us": P0.channel_launch_s * 1e6,
            "small_msg_bw_fraction": P0.small_msg_bw_fraction,
            "pipeline_fill_us": P0.pipeline_fill_s * 1e6,
        }
        keys2 = keys + list(P0d)
        vals2, rel2 = _least_squares(records, catalog, keys2, {**start, **vals, **P0d})
        if np.sqrt(np.mean(rel2**2)) < 0.9 * np.sqrt(np.mean(rel**2)):
            vals, rel = vals2, rel2
    return {
        "values": vals,
        "rms_rel_err": float(np.sqrt(np.mean(rel**2))),
        "max_rel_err": float(np.max(np.abs(rel))),
        "points": int(rel.size),
    }


def _least_squares(records, catalog, keys, start):
    """Minimise log(model/measured) over ``keys`` within their physical bounds."""
    from scipy.optimize import least_squares

    lo = np.array([BOUNDS[k][0] for k in keys])
    hi = np.array([BOUNDS[k][1] for k in keys])
    x0 = np.clip(np.array([start[k] for k in keys], dtype=float), lo + 1e-9 * (hi - lo), hi - 1e-9 * (hi - lo))

    def resid(x):
        v = dict(zip(keys, x.tolist(), strict=True))
        return np.concatenate([np.log(_predict(r, v, catalog) / r.log.times_s) for r in records])

    sol = least_squares(resid, x0, bounds=(lo, hi), x_scale=np.maximum(np.abs(x0), 1e-3), diff_step=1e-4)
    vals = dict(zip(keys, sol.x.tolist(), strict=True))
    return vals, np.exp(resid(sol.x)) - 1


def calibrate(
    paths: list[str | os.PathLike],
    catalog,
    system: str | None = None,
    fabric: str | None = None,
    collective: str | None = None,
) -> dict[str, Any]:
    """Parse logs, fit per system; returns ``{"calibration": {"collectives": {...}}}`` plus a report."""
    if not paths:
        raise InputError("no nccl-tests logs given", hint="clustertwin calibrate all_reduce.log [more.log ...]")
    logs = [parse_log(p, collective) for p in paths]
    recs = _records(logs, catalog, system, fabric)
    by_sys: dict[str, list[Record]] = {}
    for r in recs:
        by_sys.setdefault(r.system_id, []).append(r)
    section: dict[str, Any] = {}
    report = []
    for sid, rs in by_sys.items():
        fit = fit_system(rs, catalog)
        ab = []
        for r in rs:
            alpha, bus, rms = alpha_beta_fit(r.log.sizes, r.log.times_s, busbw_factor(r.log.collective, r.n))
            ab.append(
                {
                    "file": Path(r.log.path).name,
                    "collective": r.log.collective,
                    "n_ranks": r.n,
                    "ranks_per_domain": r.g,
                    "alpha_us": round(alpha * 1e6, 3),
                    "busbw_GBps": round(bus / 1e9, 3),
                    "rms_rel_err_pct": round(rms * 100, 2),
                }
            )
        files = sorted({Path(r.log.path).name for r in rs})
        entry = {k: round(float(v), 5) for k, v in fit["values"].items()}
        entry["source"] = (
            f"clustertwin calibrate: least squares on log(time) over {fit['points']} nccl-tests points from "
            f"{', '.join(files)}; rms error {fit['rms_rel_err'] * 100:.1f}%"
        )
        entry["alpha_beta_fits"] = ab
        section[sid] = entry
        report.append({"system": sid, **fit, "alpha_beta_fits": ab, "notes": sorted({n for r in rs for n in r.log.notes})})
    return {"overlay": {"calibration": {CALIBRATION_SECTION: section}}, "report": report}


def write_overlay(overlay: dict[str, Any], out: str | os.PathLike) -> Path:
    """Write (or merge into) a catalog overlay atomically, refusing files that are not overlays and
    keeping the rest of an existing overlay (comments, mode) as it was (``catalog.overlay``)."""
    from ..catalog.overlay import write_calibration

    return write_calibration(out, CALIBRATION_SECTION, overlay["calibration"][CALIBRATION_SECTION], "calibrate")

"""Predict nccl-tests bus bandwidth for rows of the published-measurement CSV
(the packaged ``data/validation/collectives.csv``; columns in its README).

``predict_busbw_row(row, catalog)`` is what ``clustertwin validate`` calls. ``python -m
clustertwin.collectives.validation FILE.csv`` prints every row's error and the MAPEs.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import sys
from typing import Any

from ..errors import InputError
from ..units import gbps_to_bytes_per_s
from .core import busbw_factor, collective_time, normalize_op

LARGE_BYTES = 64 * 1024**2  # accuracy buckets: >= 64 MiB and smaller
MID_BYTES = 1024**2
SIZE_BANDS = ("<1MiB", "1-64MiB", ">=64MiB")


def size_band(size_bytes: float) -> str:
    """Message-size band of the accuracy tables: ``<1MiB``, ``1-64MiB`` or ``>=64MiB``."""
    if size_bytes < MID_BYTES:
        return SIZE_BANDS[0]
    return SIZE_BANDS[1] if size_bytes < LARGE_BYTES else SIZE_BANDS[2]


def _int(row: dict[str, str], key: str, default: int | None = None) -> int | None:
    v = (row.get(key) or "").strip()
    if not v:
        return default
    try:
        return int(float(v))
    except ValueError:
        raise InputError(f"row {row.get('id', '?')}: column {key!r} must be a number, got {v!r}") from None


def row_setup(row: dict[str, str], catalog) -> dict[str, Any]:
    """System, fabric and group layout for one CSV row (row values override system defaults)."""
    rid = row.get("id", "?")
    for key in ("num_gpus", "collective", "size_bytes"):
        if not (row.get(key) or "").strip():
            raise InputError(f"row {rid}: column {key!r} is empty", hint="every collectives row needs num_gpus, collective, size_bytes (and a system or gpu)")
    from ..catalog.names import is_no_scaleout, resolve_accelerator, resolve_fabric, resolve_system

    notes: list[str] = []
    gpu = (row.get("gpu") or "").strip()
    if gpu:
        gpu, note = resolve_accelerator(gpu, catalog)
        notes.append(note)
    sid, defaults, note = resolve_system(row.get("system") or "", gpu, _int(row, "gpus_per_node", 0) or 0, catalog)
    notes.append(note)
    gpu = gpu or str(defaults.get("gpu") or "")
    system = catalog.system(sid)
    if gpu and gpu != system.accelerator.id:
        system = dataclasses.replace(system, accelerator=catalog.accelerator(gpu))
    row = {**{k: str(v) for k, v in defaults.items() if k != "gpu"},
           **{k: v for k, v in row.items() if (v or "").strip()}}
    fname = (row.get("scale_out") or "").strip()
    if not fname or is_no_scaleout(fname):
        fabric = catalog.fabric(system.default_scaleout)
        if fname:
            notes.append(f"scale-out {fname!r}: the system's {system.default_scaleout} is used where the group "
                         "leaves the node")
    else:
        fabric, note = resolve_fabric(fname, float(row.get("nic_gbps") or 0) if _is_num(row.get("nic_gbps")) else 0.0,
                                      catalog)
        notes.append(note)
    nics = _int(row, "nics_per_node")
    nic_gbps = (row.get("nic_gbps") or "").strip()
    if nic_gbps:
        bw = gbps_to_bytes_per_s(float(nic_gbps))
        system = dataclasses.replace(system, nic_bw=bw)
        fabric = dataclasses.replace(fabric, port_bw=bw)
    if nics:
        system = dataclasses.replace(system, nics_per_host=nics)
    n = _int(row, "num_gpus")
    nodes = _int(row, "num_nodes", 1) or 1
    per_node = max(1, math.ceil(n / nodes))
    hosts_per_domain = max(1, system.devices_per_domain // max(1, system.devices_per_host))
    g = min(n, per_node * hosts_per_domain, system.devices_per_domain)
    algo = (row.get("algorithm") or "auto").strip().lower() or "auto"
    if algo != "auto":
        from ..errors import UnknownNameError
        from .core import ALGORITHMS, normalize_algo

        op = normalize_op(row["collective"])
        try:
            algo = normalize_algo(op, algo)
        except UnknownNameError:
            notes.append(f"algorithm {row.get('algorithm')!r} is not modelled for {op}: NCCL's own choice among "
                         f"{', '.join(ALGORITHMS[op])} (auto) is used")
            algo = "auto"
    # How the sweep was launched is not a column. nccl-tests' documented usage (README "Usage"):
    # one node -> a single process drives all its GPUs (`-g <ngpus>`); several nodes -> mpirun with
    # one process per GPU (`-g 1`). The published single-node sweeps here follow the first.
    gpp = per_node if nodes <= 1 else 1
    return {
        "system": system,
        "fabric": fabric,
        "n": n,
        "g": g,
        "op": normalize_op(row["collective"]),
        "algo": algo,
        "size": float(row["size_bytes"]),
        "gpus_per_process": gpp,
        "notes": [n for n in notes if n],
    }


def _is_num(text: str | None) -> bool:
    try:
        float(text or "")
    except ValueError:
        return False
    return True


def _row_time(s: dict[str, Any], catalog) -> float:
    """Time of the row's collective; inf where its named algorithm cannot run on this system (NVLS without
    NVLink SHARP, CollNet without SHARP)."""
    try:
        return float(collective_time(s["op"], s["size"], s["n"], s["g"], s["system"], s["fabric"], s["algo"],
                                     catalog, gpus_per_process=s["gpus_per_process"]))
    except InputError:
        if s["algo"] == "auto":
            raise
        return math.inf


def row_notes(row: dict[str, str], catalog) -> str:
    """What the collective model assumed for a row beyond its columns (names outside the catalog, an
    algorithm the system cannot run)."""
    try:
        s = row_setup(row, catalog)
    except InputError:
        return ""
    notes = list(s["notes"])
    if s["algo"] != "auto":
        t = _row_time(s, catalog)
        if not (t > 0 and math.isfinite(t)):
            notes.append(f"algorithm {s['algo']!r} cannot run on {s['system'].id} with {s['fabric'].id} "
                         "(e.g. no NVLS / SHARP): NCCL's own choice (auto) is used")
    return "; ".join(notes)


def predict_busbw_row(row: dict[str, str], catalog) -> float:
    """Predicted nccl-tests busbw (GB/s, 1e9 B/s) for one validation row."""
    s = row_setup(row, catalog)
    t = _row_time(s, catalog)
    if not (t > 0 and math.isfinite(t)) and s["algo"] != "auto":  # the named algorithm cannot run here
        t = _row_time(dict(s, algo="auto"), catalog)
    if not (t > 0 and math.isfinite(t)):
        raise InputError(f"row {row.get('id', '?')}: the model cannot run {s['op']} with algorithm {s['algo']!r} here")
    return s["size"] / t * busbw_factor(s["op"], s["n"]) / 1e9


def run_rows(rows: list[dict[str, str]], catalog) -> dict[str, Any]:
    """Predict every row; returns per-row errors and MAPE overall / >= 64 MiB / < 64 MiB."""
    out = []
    for r in rows:
        meas = float(r["measured_busbw_GBps"])
        try:
            pred = predict_busbw_row(r, catalog)
            err = (pred - meas) / meas * 100
            out.append({"id": r["id"], "size_bytes": float(r["size_bytes"]), "measured": meas, "predicted": pred, "error_pct": err})
        except InputError as exc:
            out.append({"id": r["id"], "size_bytes": float(r["size_bytes"]), "measured": meas, "predicted": None, "error_pct": None, "reason": exc.message})

    def mape(sel):
        errs = [abs(x["error_pct"]) for x in sel if x["error_pct"] is not None]
        return sum(errs) / len(errs) if errs else float("nan")

    large = [x for x in out if x["size_bytes"] >= LARGE_BYTES]
    small = [x for x in out if x["size_bytes"] < LARGE_BYTES]
    return {
        "rows": out,
        "mape_pct": mape(out),
        "mape_large_pct": mape(large),
        "mape_small_pct": mape(small),
        "failed": sum(1 for x in out if x["predicted"] is None),
    }


def main(argv: list[str] | None = None) -> int:
    from ..catalog import load_catalog

    argv = sys.argv[1:] if argv is None else argv
    if argv:
        path = argv[0]
    else:
        from importlib import resources

        path = str(resources.files("clustertwin") / "data" / "validation" / "collectives.csv")
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    res = run_rows(rows, load_catalog())
    print(f"{'id':26s} {'size':>12s} {'measured':>9s} {'predicted':>9s} {'err%':>7s}")
    for x in res["rows"]:
        if x["predicted"] is None:
            print(f"{x['id']:26s} {int(x['size_bytes']):12d} {x['measured']:9.2f}   FAILED: {x['reason']}")
        else:
            print(f"{x['id']:26s} {int(x['size_bytes']):12d} {x['measured']:9.2f} {x['predicted']:9.2f} {x['error_pct']:+7.1f}")
    print(f"MAPE all {res['mape_pct']:.1f}%  >=64MiB {res['mape_large_pct']:.1f}%  <64MiB {res['mape_small_pct']:.1f}%  failed {res['failed']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Chrome trace-event JSON (opens in Perfetto / chrome://tracing) from an event-engine timeline.

Format (Trace Event Format, "JSON Object Format"): ``{"traceEvents": [...], "displayTimeUnit": "ms"}``;
each op is a complete event ``{"ph": "X", "name", "cat", "pid", "tid", "ts", "dur"}`` with ``ts`` and
``dur`` in microseconds; ``pid`` = pipeline stage (one representative rank), ``tid`` = stream.
Metadata events (``"ph": "M"``, ``process_name`` / ``thread_name`` / ``*_sort_index``) name them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..userfiles import write_atomic

STREAM_ORDER = ("compute", "tp", "cp", "ep", "pp-send-fwd", "pp-send-bwd", "dp-grad", "dp-param")


def chrome_trace(result_or_timeline: Any, *, include_zero: bool = False) -> dict[str, Any]:
    """Build the trace-event document from an ``EventResult`` (simulated with ``trace=True``) or a
    ``Timeline``. Zero-length ops (joins, barriers) are left out unless ``include_zero``."""
    tl = getattr(result_or_timeline, "timeline", result_or_timeline)
    if tl is None:
        raise ValueError("no timeline: simulate with trace=True")
    tids: dict[str, int] = {name: i for i, name in enumerate(STREAM_ORDER)}
    events: list[dict[str, Any]] = []
    used: set[tuple[int, str]] = set()
    stages: set[int] = set()
    for name, stage, stream, cat, start, end in tl.ops():
        dur = end - start
        if dur <= 0 and not include_zero:
            continue
        if stream not in tids:
            tids[stream] = len(tids)
        used.add((stage, stream))
        stages.add(stage)
        events.append({
            "name": name, "cat": cat, "ph": "X", "pid": int(stage), "tid": tids[stream],
            "ts": round(start * 1e6, 3), "dur": round(dur * 1e6, 3),
        })
    labels = tl.stage_labels
    meta: list[dict[str, Any]] = []
    for stage in sorted(stages):
        label = labels[stage] if stage < len(labels) else f"stage {stage}"
        meta.append({"name": "process_name", "ph": "M", "pid": stage, "tid": 0, "ts": 0,
                     "args": {"name": f"PP {label}"}})
        meta.append({"name": "process_sort_index", "ph": "M", "pid": stage, "tid": 0, "ts": 0,
                     "args": {"sort_index": stage}})
    for stage, stream in sorted(used, key=lambda x: (x[0], tids[x[1]])):
        meta.append({"name": "thread_name", "ph": "M", "pid": stage, "tid": tids[stream], "ts": 0,
                     "args": {"name": stream}})
        meta.append({"name": "thread_sort_index", "ph": "M", "pid": stage, "tid": tids[stream], "ts": 0,
                     "args": {"sort_index": tids[stream]}})
    return {"traceEvents": meta + events, "displayTimeUnit": "ms",
            "otherData": {"producer": "clustertwin event engine", "time_unit": "us"}}


def write_chrome_trace(result_or_timeline: Any, path: str | Path) -> Path:
    """Write the trace JSON to ``path`` (the only place the event engine's output touches disk)."""
    p = Path(path)
    doc = chrome_trace(result_or_timeline)
    # Atomic: a crash never leaves a half-written trace where the user asked for one.
    return write_atomic(p, json.dumps(doc, separators=(",", ":")))

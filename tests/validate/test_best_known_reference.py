"""benchmarks/data/megatron_bridge_best_known.csv: each entry is a faster published run of the job of a
Megatron-Bridge row of the packaged training set (the realism benchmark's `best/known` reference)."""

from __future__ import annotations

import csv
from pathlib import Path

KNOWN = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "megatron_bridge_best_known.csv"
KEYS = ("model", "system", "num_gpus", "precision", "global_batch", "seq_len")


def test_every_best_known_run_is_a_faster_run_of_a_row_job(validation_dir):
    with (validation_dir / "training.csv").open(newline="", encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if r["framework"] == "megatron-bridge"]
    with KNOWN.open(newline="", encoding="utf-8") as fh:
        known = list(csv.DictReader(fh))
    assert known
    jobs: dict[tuple[str, ...], list[dict[str, str]]] = {}
    for r in rows:
        jobs.setdefault(tuple(r[k] for k in KEYS), []).append(r)
    seen = set()
    for k in known:
        key = tuple(k[c] for c in KEYS)
        assert key not in seen, f"job {key} listed twice"
        seen.add(key)
        assert key in jobs, f"{key}: no Megatron-Bridge row of training.csv runs this job"
        assert k["source"] and k["source_locator"] and k["release"]
        # a faster run than every row of the job (per GPU: the rows publish tokens / sec / GPU)
        assert all(float(k["tokens_per_s_per_gpu"]) > float(r["published_value"]) for r in jobs[key])
        lay = {c: int(k[c]) for c in ("micro_batch", "tp", "pp", "vpp", "ep")}
        assert all(v >= 1 for v in lay.values()) and int(k["num_gpus"]) % (lay["tp"] * lay["pp"]) == 0

"""Results store: a SQLite database file (stdlib ``sqlite3``) for sweeps.

Tables
------
``sweeps``   one row per sweep: id (hash of the inputs), name, the spec as JSON, catalog version,
             tool version, number of jobs and chunks, created/finished timestamps.
``chunks``   one row per finished chunk (sweep id, chunk id = hash of the chunk's inputs).
``results``  one row per (sweep, job): the design, the best plan, its metrics, cost and power.

Every chunk is written in **one transaction** (its result rows and its ``chunks`` row together), so a
sweep killed at any moment leaves either the whole chunk or nothing of it; a restarted sweep skips
the chunks whose id is already in ``chunks`` and never duplicates a row (``UNIQUE(sweep_id,
job_index)``).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..errors import InputError

SCHEMA_VERSION = 1

RESULT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("job_index", "INTEGER NOT NULL"),
    ("chunk_id", "TEXT NOT NULL"),
    ("system", "TEXT"),
    ("num_gpus", "INTEGER"),
    ("domains", "INTEGER"),
    ("fabric", "TEXT"),
    ("oversubscription", "REAL"),
    ("model", "TEXT"),
    ("global_batch", "INTEGER"),
    ("seq_len", "INTEGER"),
    ("dtype", "TEXT"),
    ("feasible", "INTEGER"),
    ("reason", "TEXT"),
    ("tp", "INTEGER"),
    ("pp", "INTEGER"),
    ("dp", "INTEGER"),
    ("cp", "INTEGER"),
    ("ep", "INTEGER"),
    ("vpp", "INTEGER"),
    ("zero", "INTEGER"),
    ("micro_batch", "INTEGER"),
    ("recompute", "TEXT"),
    ("step_time_s", "REAL"),
    ("tokens_per_s", "REAL"),
    ("mfu", "REAL"),
    ("hfu", "REAL"),
    ("tflops_per_gpu", "REAL"),
    ("memory_gb_per_gpu", "REAL"),
    ("bottleneck", "TEXT"),
    ("breakdown", "TEXT"),  # JSON
    ("cost_usd", "REAL"),
    ("power_w", "REAL"),
    ("num_candidates", "INTEGER"),
    ("num_feasible", "INTEGER"),
)
RESULT_FIELDS = tuple(c for c, _ in RESULT_COLUMNS)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class ResultsStore:
    """A results database. Opening it creates the file and tables if needed (no other I/O)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    # connection per operation: safe across fork, cheap for SQLite
    def _connect(self) -> sqlite3.Connection:
        try:
            if self.path.parent and not self.path.parent.exists():
                raise InputError(
                    f"results database folder {str(self.path.parent)!r} does not exist",
                    hint="create the folder or pass another --db path",
                )
            con = sqlite3.connect(str(self.path), timeout=30.0, isolation_level=None)
        except sqlite3.Error as exc:
            raise InputError(f"cannot open results database {str(self.path)!r}: {exc}") from None
        con.row_factory = sqlite3.Row
        try:
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")
            self._create(con)
        except sqlite3.DatabaseError as exc:
            con.close()
            raise InputError(
                f"{str(self.path)!r} is not a ClusterTwin results database ({exc})",
                hint="pass another --db path",
            ) from None
        return con

    @staticmethod
    def _create(con: sqlite3.Connection) -> None:
        cols = ",\n  ".join(f"{c} {t}" for c, t in RESULT_COLUMNS)
        con.executescript(
            f"""
            CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
            INSERT OR IGNORE INTO meta VALUES ('schema_version', '{SCHEMA_VERSION}');
            CREATE TABLE IF NOT EXISTS sweeps (
              id TEXT PRIMARY KEY, name TEXT, spec TEXT NOT NULL, catalog_version TEXT NOT NULL,
              tool_version TEXT NOT NULL, num_jobs INTEGER NOT NULL, num_chunks INTEGER NOT NULL,
              created_at TEXT NOT NULL, finished_at TEXT, executor TEXT);
            CREATE TABLE IF NOT EXISTS chunks (
              sweep_id TEXT NOT NULL REFERENCES sweeps(id), chunk_id TEXT NOT NULL,
              chunk_index INTEGER NOT NULL, num_jobs INTEGER NOT NULL, finished_at TEXT NOT NULL,
              elapsed_s REAL, PRIMARY KEY (sweep_id, chunk_id));
            CREATE TABLE IF NOT EXISTS results (
              sweep_id TEXT NOT NULL REFERENCES sweeps(id),
              {cols},
              UNIQUE (sweep_id, job_index));
            """
        )

    # ---------------------------------------------------------------- writes
    def begin_sweep(self, *, sweep_id: str, name: str, spec: Mapping[str, Any], catalog_version: str,
                    tool_version: str, num_jobs: int, num_chunks: int, executor: str) -> None:
        con = self._connect()
        try:
            con.execute("BEGIN IMMEDIATE")
            con.execute(
                "INSERT OR IGNORE INTO sweeps (id, name, spec, catalog_version, tool_version, num_jobs, "
                "num_chunks, created_at, executor) VALUES (?,?,?,?,?,?,?,?,?)",
                (sweep_id, name, json.dumps(spec, sort_keys=True), catalog_version, tool_version, num_jobs,
                 num_chunks, _now(), executor),
            )
            con.execute("COMMIT")
        finally:
            con.close()

    def write_chunk(self, *, sweep_id: str, chunk_id: str, chunk_index: int, rows: Iterable[Mapping[str, Any]],
                    elapsed_s: float | None = None) -> bool:
        """Write one finished chunk atomically. Returns False if it was already stored."""
        rows = list(rows)
        con = self._connect()
        try:
            con.execute("BEGIN IMMEDIATE")
            try:
                done = con.execute("SELECT 1 FROM chunks WHERE sweep_id=? AND chunk_id=?", (sweep_id, chunk_id)).fetchone()
                if done:
                    con.execute("ROLLBACK")
                    return False
                placeholders = ",".join("?" for _ in range(len(RESULT_FIELDS) + 1))
                con.executemany(
                    f"INSERT INTO results (sweep_id, {', '.join(RESULT_FIELDS)}) VALUES ({placeholders})",
                    [(sweep_id, *(_cell(r.get(c)) for c in RESULT_FIELDS)) for r in rows],
                )
                con.execute(
                    "INSERT INTO chunks (sweep_id, chunk_id, chunk_index, num_jobs, finished_at, elapsed_s) "
                    "VALUES (?,?,?,?,?,?)",
                    (sweep_id, chunk_id, chunk_index, len(rows), _now(), elapsed_s),
                )
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
            return True
        finally:
            con.close()

    def finish_sweep(self, sweep_id: str) -> None:
        con = self._connect()
        try:
            con.execute("UPDATE sweeps SET finished_at=? WHERE id=?", (_now(), sweep_id))
        finally:
            con.close()

    # ---------------------------------------------------------------- reads
    def done_chunks(self, sweep_id: str) -> set[str]:
        con = self._connect()
        try:
            return {r[0] for r in con.execute("SELECT chunk_id FROM chunks WHERE sweep_id=?", (sweep_id,))}
        finally:
            con.close()

    def sweeps(self) -> list[dict[str, Any]]:
        con = self._connect()
        try:
            rows = con.execute(
                "SELECT s.id, s.name, s.catalog_version, s.tool_version, s.num_jobs, s.num_chunks, s.created_at, "
                "s.finished_at, s.executor, (SELECT COUNT(*) FROM chunks c WHERE c.sweep_id=s.id) AS chunks_done, "
                "(SELECT COUNT(*) FROM results r WHERE r.sweep_id=s.id) AS rows FROM sweeps s ORDER BY s.created_at, s.id"
            ).fetchall()
            return [dict(r) for r in rows]
        finally:
            con.close()

    def sweep(self, sweep_id: str) -> dict[str, Any]:
        """One sweep's metadata; accepts a unique id prefix or the sweep's name."""
        con = self._connect()
        try:
            rows = con.execute(
                "SELECT * FROM sweeps WHERE id LIKE ? OR name = ? ORDER BY created_at DESC",
                (sweep_id + "%", sweep_id),
            ).fetchall()
        finally:
            con.close()
        if not rows:
            known = [s["id"] for s in self.sweeps()]
            raise InputError(
                f"no sweep or plan {sweep_id!r} in {str(self.path)!r}",
                hint=("known ids: " + ", ".join(known)) if known else "this database holds no sweep or plan yet",
            )
        ids = {r["id"] for r in rows}
        if len(ids) > 1:
            raise InputError(f"{sweep_id!r} matches {len(ids)} sweeps", hint="give more of the id: " + ", ".join(sorted(ids)))
        d = dict(rows[0])
        d["spec"] = json.loads(d["spec"])
        return d

    def results(self, sweep_id: str) -> list[dict[str, Any]]:
        con = self._connect()
        try:
            rows = con.execute(
                f"SELECT {', '.join(RESULT_FIELDS)} FROM results WHERE sweep_id=? ORDER BY job_index", (sweep_id,)
            ).fetchall()
        finally:
            con.close()
        out = []
        for r in rows:
            d = dict(r)
            d["breakdown"] = json.loads(d["breakdown"]) if d.get("breakdown") else {}
            d["feasible"] = bool(d["feasible"])
            out.append(d)
        return out


def _cell(v: Any) -> Any:
    if isinstance(v, dict):
        return json.dumps(v, sort_keys=True)
    if isinstance(v, bool):
        return int(v)
    if hasattr(v, "item"):
        return v.item()
    return v

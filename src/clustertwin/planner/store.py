"""Results store: a SQLite database file (stdlib ``sqlite3``) for sweeps.

Tables
------
``sweeps``   one row per sweep: id (hash of the inputs), name, the spec as JSON, catalog version,
             tool version, number of jobs and chunks, created/finished timestamps.
``chunks``   one row per finished chunk (sweep id, chunk id = hash of the chunk's inputs).
``results``  one row per (sweep, job): the design, the best plan, its metrics, cost and power.

Every chunk is written in **one transaction** (its result rows and its ``chunks`` row together; a sweep's
driver keeps one write connection open for the run, ``keep_open``), so a
sweep killed at any moment leaves either the whole chunk or nothing of it; a restarted sweep skips
the chunks whose id is already in ``chunks`` and never duplicates a row (``UNIQUE(sweep_id,
job_index)``).

Safety of the file (nothing a user saved is touched by mistake):

* Our files are marked: SQLite ``application_id`` = ``APPLICATION_ID`` and ``user_version`` = the schema
  version. A database with another application id, or with tables that are not ours, is refused without
  being changed (no tables added, no journal-mode switch). A newer schema is refused with an upgrade hint.
  Files from before the marking (a ``meta`` table with ``schema_version``) are still read, and marked on
  the next write.
* Read commands open the file read-only (``mode=ro``; ``immutable`` for a read-only WAL file), so
  listing or exporting never changes it and works on read-only files.
* A damaged file is reported as damaged with a recovery hint; a full disk as a full disk.

Where results go by default: ``default_db_path()`` — ``$CLUSTERTWIN_RESULTS_DB`` if set, else
``$XDG_DATA_HOME/clustertwin/results.db`` (``~/.local/share/clustertwin/results.db``); commands print
the path they stored to.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import InputError

# SQLite primary result codes (https://www.sqlite.org/rescode.html): read-only, I/O error, corrupt
# ("malformed"), disk full, not a database -- the file troubles that are the user's to fix
_SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_CORRUPT, _SQLITE_FULL, _SQLITE_NOTADB = 8, 10, 11, 13, 26
_FILE_TROUBLE = frozenset((_SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_CORRUPT, _SQLITE_FULL, _SQLITE_NOTADB))

SCHEMA_VERSION = 1
APPLICATION_ID = 0x43547731  # "CTw1": marks a ClusterTwin results database (PRAGMA application_id)
_OUR_TABLES = {"meta", "sweeps", "chunks", "results"}
_SQLITE_MAGIC = b"SQLite format 3\x00"


def default_db_path() -> Path:
    """The per-user results database (documented in docs/planner.md); ``CLUSTERTWIN_RESULTS_DB`` wins."""
    env = os.environ.get("CLUSTERTWIN_RESULTS_DB")
    if env:
        return Path(env)
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "clustertwin" / "results.db"

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
    """A results database. Construction does no I/O; writes create the file and tables when needed."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path is not None else default_db_path()
        self._kept: sqlite3.Connection | None = None  # the write connection ``keep_open`` holds
        self._kept_pid = 0

    @contextlib.contextmanager
    def keep_open(self) -> Iterator[None]:
        """Reuse one write connection for the chunk writes inside the block (a sweep's driver writes
        hundreds of chunks; a connection per chunk pays an open, and closing the last connection
        checkpoints the WAL every time). The connection is opened at the first write in the block, only
        ever used by the process that opened it (forked executor workers never write), and closed at
        the end of the block."""
        if self._kept is not None or self._kept_pid:
            yield
            return
        self._kept_pid = os.getpid()
        try:
            yield
        finally:
            con, self._kept, self._kept_pid = self._kept, None, 0
            if con is not None:
                con.close()

    def _write_connection(self) -> sqlite3.Connection:
        if self._kept_pid and self._kept_pid == os.getpid():
            if self._kept is None:
                self._kept = self._connect()
            return self._kept
        return self._connect()

    def _release(self, con: sqlite3.Connection) -> None:
        if con is not self._kept:
            con.close()

    def _refuse(self, what: str, hint: str) -> InputError:
        return InputError(f"{str(self.path)!r} {what}", hint=hint)

    def _check_header(self) -> None:
        """Refuse a file that is not an SQLite database before SQLite touches it."""
        try:
            with self.path.open("rb") as fh:
                head = fh.read(16)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise self._refuse(f"cannot be read ({exc.strerror})", "check the path and its permissions") from None
        if head and head != _SQLITE_MAGIC:
            raise self._refuse("is not a ClusterTwin results database (not an SQLite file); it was not changed",
                               "pass another --db path")

    def _check_ours(self, con: sqlite3.Connection, *, writing: bool) -> None:
        app_id = con.execute("PRAGMA application_id").fetchone()[0]
        version = con.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if app_id not in (0, APPLICATION_ID):
            raise self._refuse(f"belongs to another application (application_id {app_id:#x}); it was not changed",
                               "pass another --db path")
        if app_id == 0 and tables and not (tables <= _OUR_TABLES and "meta" in tables):
            raise self._refuse("is an SQLite database of another program (tables: "
                               f"{', '.join(sorted(tables)[:6])}); it was not changed", "pass another --db path")
        if app_id == 0 and tables:  # unmarked file from before the marking: read its meta version
            row = con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            version = int(row[0]) if row and str(row[0]).isdigit() else 0
        if version > SCHEMA_VERSION:
            raise self._refuse(f"was written by a newer ClusterTwin (schema {version}, this one reads up to "
                               f"{SCHEMA_VERSION}); it was not changed", "upgrade clustertwin to read it")
        if not tables and not writing:
            raise self._refuse("holds no ClusterTwin results (an empty database)",
                               "run `clustertwin plan` or `clustertwin sweep FILE --db PATH` first")

    def _damaged(self, exc: sqlite3.Error) -> InputError:
        text = str(exc)
        # SQLite's result code, never the message text (sqlite3.Error.sqlite_errorcode, Python 3.11+);
        # the primary code is the low byte of an extended one (https://www.sqlite.org/rescode.html)
        code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
        if code == _SQLITE_FULL:
            return InputError(f"disk full while writing {str(self.path)!r}",
                              hint="free space on that disk (or pass --db on another disk) and rerun; "
                                   "finished chunks are kept and a rerun resumes")
        if code == _SQLITE_READONLY:
            return InputError(f"{str(self.path)!r} is read-only", hint="pass a writable --db path")
        return InputError(f"{str(self.path)!r} is damaged ({text})",
                          hint="recover it with `sqlite3 DB '.recover' | sqlite3 NEW.db`, or pass another --db")

    # connection per operation: safe across fork, cheap for SQLite
    def _connect(self, *, write: bool = True) -> sqlite3.Connection:
        if not write:
            return self._connect_read()
        parent = self.path.parent
        if str(parent) and not parent.exists():
            if self.path == default_db_path():
                parent.mkdir(parents=True, exist_ok=True)
            else:
                raise InputError(f"results database folder {str(parent)!r} does not exist",
                                 hint="create the folder or pass another --db path")
        self._check_header()
        try:
            con = sqlite3.connect(str(self.path), timeout=30.0, isolation_level=None)
        except sqlite3.Error as exc:
            raise InputError(f"cannot open results database {str(self.path)!r}: {exc}") from None
        con.row_factory = sqlite3.Row
        try:
            self._check_ours(con, writing=True)
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")
            self._create(con)
            con.execute(f"PRAGMA application_id={APPLICATION_ID}")
            con.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        except InputError:
            con.close()
            raise
        except sqlite3.DatabaseError as exc:
            con.close()
            raise self._damaged(exc) from None
        return con

    def _connect_read(self) -> sqlite3.Connection:
        if not self.path.exists():
            raise InputError(f"results database {str(self.path)!r} does not exist",
                             hint="run `clustertwin plan` or `clustertwin sweep FILE --db PATH` first, or pass the right --db")
        self._check_header()
        uri = self.path.resolve().as_uri()
        last: sqlite3.Error | None = None
        for mode in ("?mode=ro", "?mode=ro&immutable=1"):
            try:
                con = sqlite3.connect(uri + mode, uri=True, timeout=30.0, isolation_level=None)
            except sqlite3.Error as exc:
                last = exc
                continue
            try:
                con.row_factory = sqlite3.Row
                self._check_ours(con, writing=False)
                return con
            except InputError:
                con.close()
                raise
            except sqlite3.Error as exc:  # e.g. a read-only WAL file without its -shm: retry immutable
                con.close()
                last = exc
        raise self._damaged(last) from None  # type: ignore[arg-type]

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
        return self.write_chunks(sweep_id, [(chunk_id, chunk_index, rows, elapsed_s)])[0]

    def write_chunks(self, sweep_id: str,
                     chunks: Sequence[tuple[str, int, Iterable[Mapping[str, Any]], float | None]]) -> list[bool]:
        """Write several finished chunks ``(chunk_id, chunk_index, rows, elapsed_s)`` in one transaction
        (one open, commit and WAL checkpoint for all of them: a sweep's driver writes what finished
        together). All or nothing, so no chunk is ever half stored; one already stored is skipped (False
        in the result)."""
        if not chunks:
            return []
        con = self._write_connection()
        try:
            con.execute("BEGIN IMMEDIATE")
            out = []
            try:
                placeholders = ",".join("?" for _ in range(len(RESULT_FIELDS) + 1))
                insert = f"INSERT INTO results (sweep_id, {', '.join(RESULT_FIELDS)}) VALUES ({placeholders})"
                for chunk_id, chunk_index, rows, elapsed_s in chunks:
                    done = con.execute("SELECT 1 FROM chunks WHERE sweep_id=? AND chunk_id=?",
                                       (sweep_id, chunk_id)).fetchone()
                    if done:
                        out.append(False)
                        continue
                    rows = list(rows)
                    con.executemany(insert, [(sweep_id, *(_cell(r.get(c)) for c in RESULT_FIELDS)) for r in rows])
                    con.execute(
                        "INSERT INTO chunks (sweep_id, chunk_id, chunk_index, num_jobs, finished_at, elapsed_s) "
                        "VALUES (?,?,?,?,?,?)",
                        (sweep_id, chunk_id, chunk_index, len(rows), _now(), elapsed_s),
                    )
                    out.append(True)
                con.execute("COMMIT" if any(out) else "ROLLBACK")
            except BaseException as exc:
                if con.in_transaction:  # SQLite may already have rolled back (e.g. on a full disk)
                    con.execute("ROLLBACK")
                if isinstance(exc, sqlite3.DatabaseError) and _is_file_trouble(exc):
                    raise self._damaged(exc) from None
                raise
            return out
        finally:
            self._release(con)

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
        con = self._connect(write=False)
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
        con = self._connect(write=False)
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
        con = self._connect(write=False)
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


def _is_file_trouble(exc: sqlite3.Error) -> bool:
    """A full disk, a read-only or a damaged file (the user's to fix), not a constraint or our SQL."""
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    return code in _FILE_TROUBLE


def _cell(v: Any) -> Any:
    if isinstance(v, dict):
        return json.dumps(v, sort_keys=True)
    if isinstance(v, bool):
        return int(v)
    if hasattr(v, "item"):
        return v.item()
    return v

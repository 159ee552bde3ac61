"""Background jobs for long runs (sweeps, reports): progress, cancellation, bounded concurrency.

A job runs in a worker thread; its work function receives a ``progress(done, total)`` callback. A
cancel request sets a flag that the next progress call turns into :class:`Cancelled`, so work stops
at the next chunk boundary (a sweep keeps its finished chunks in the database and resumes later).
Finished jobs are kept for a while so their results can be downloaded, then forgotten.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..errors import InputError


class Cancelled(Exception):
    """Raised inside a job's work when the user cancelled it."""


@dataclass
class Job:
    id: str
    kind: str
    status: str = "queued"  # queued | running | done | failed | cancelled
    done: int = 0
    total: int = 0
    result: Any = None
    error: dict[str, Any] | None = None
    created: float = field(default_factory=time.monotonic)
    finished: float | None = None
    cancel_event: threading.Event = field(default_factory=threading.Event)

    def public(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "status": self.status, "done": self.done, "total": self.total,
                "error": self.error, "has_result": self.result is not None}


class JobManager:
    def __init__(self, *, workers: int = 2, max_jobs: int = 64, keep_s: float = 3600.0):
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="clustertwin-job")
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self.max_jobs = max_jobs
        self.keep_s = keep_s

    def submit(self, kind: str, work: Callable[[Callable[[int, int], None]], Any]) -> Job:
        with self._lock:
            self._gc()
            active = sum(1 for j in self._jobs.values() if j.status in ("queued", "running"))
            if active >= self.max_jobs:
                raise InputError(f"too many jobs running ({active})", hint="wait for one to finish or cancel one")
            job = Job(id=f"j{next(self._ids)}", kind=kind)
            self._jobs[job.id] = job

        def progress(done: int, total: int) -> None:
            if job.cancel_event.is_set():
                raise Cancelled()
            job.done, job.total = int(done), int(total)

        def run() -> None:
            if job.cancel_event.is_set():
                job.status, job.finished = "cancelled", time.monotonic()
                return
            job.status = "running"
            try:
                job.result = work(progress)
                job.status = "cancelled" if job.cancel_event.is_set() else "done"
            except Cancelled:
                job.status = "cancelled"
            except InputError as exc:
                job.status, job.error = "failed", error_doc(exc)
            except Exception as exc:  # noqa: BLE001 - reported to the user, never raised in the server
                job.status, job.error = "failed", {"error": f"internal error: {type(exc).__name__}: {exc}", "hint": None,
                                                   "suggestions": []}
            finally:
                job.finished = time.monotonic()

        self._pool.submit(run)
        return job

    def get(self, job_id: str) -> Job:
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None:
            raise InputError(f"no job {job_id!r}", hint="jobs are kept for an hour after they finish")
        return job

    def cancel(self, job_id: str) -> Job:
        job = self.get(job_id)
        job.cancel_event.set()
        if job.status == "queued":
            job.status = "cancelled"
        return job

    def _gc(self) -> None:
        now = time.monotonic()
        for k in [k for k, j in self._jobs.items() if j.finished is not None and now - j.finished > self.keep_s]:
            del self._jobs[k]

    def shutdown(self) -> None:
        for j in list(self._jobs.values()):
            j.cancel_event.set()
        self._pool.shutdown(wait=True, cancel_futures=True)


def error_doc(exc: InputError) -> dict[str, Any]:
    """The JSON shape of a bad-input error: the same message, hint and suggestions the CLI prints."""
    return {"error": exc.message, "hint": getattr(exc, "hint", None), "suggestions": list(getattr(exc, "suggestions", ()) or ()),
            "text": exc.render()}


__all__ = ["Cancelled", "Job", "JobManager", "error_doc"]

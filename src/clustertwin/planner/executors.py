"""Executors: run chunks of a sweep in local processes (default) or as Ray tasks.

Both take the same picklable function and payloads and call ``on_done(index, result)`` in the
driver as each chunk finishes, so the driver alone writes to the results store (one transaction
per chunk) and draws the progress bar. Ray is an optional extra (``pip install clustertwin[ray]``)
imported only when asked for.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import InputError

OnDone = Callable[[int, Any], None]


class Executor(Protocol):
    name: str

    def run(self, fn: Callable[[Any], Any], payloads: Sequence[tuple[int, Any]], on_done: OnDone) -> None:
        """Run ``fn(payload)`` for each ``(index, payload)``; call ``on_done(index, result)`` as each ends."""
        ...


def default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


@dataclass
class LocalExecutor:
    """Processes on this machine (``concurrent.futures``). ``workers=1`` runs in-process."""

    workers: int | None = None
    name: str = "local"

    def run(self, fn: Callable[[Any], Any], payloads: Sequence[tuple[int, Any]], on_done: OnDone) -> None:
        workers = self.workers or default_workers()
        if workers <= 1 or len(payloads) <= 1:
            for idx, p in payloads:
                on_done(idx, fn(p))
            return
        with ProcessPoolExecutor(max_workers=min(workers, len(payloads))) as pool:
            # keep at most 2 chunks per worker in flight, so a crash loses little queued work
            it = iter(payloads)
            pending: dict[Any, int] = {}

            def submit_next() -> bool:
                try:
                    idx, p = next(it)
                except StopIteration:
                    return False
                pending[pool.submit(fn, p)] = idx
                return True

            for _ in range(2 * workers):
                if not submit_next():
                    break
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in sorted(done, key=lambda f: pending[f]):
                    idx = pending.pop(fut)
                    on_done(idx, fut.result())
                    submit_next()


def _run_batch(fn: Callable[[Any], Any], batch: Sequence[Any]) -> list[Any]:
    """One Ray task: several chunks (per-task overhead paid once, caches reused), through ``fn.batched``
    when ``fn`` has one (``planner.sweep.run_chunk``: the chunks' jobs searched together, vectorised)."""
    many = getattr(fn, "batched", None)
    return list(many(batch)) if many is not None else [fn(p) for p in batch]


def batch_size(n_payloads: int, cpus: int, per_cpu: int = 16) -> int:
    """Chunks per Ray task: about ``per_cpu`` tasks per CPU of the cluster (enough to balance uneven
    load, few enough that Ray's per-task cost -- scheduling, serialisation, a worker's first import
    -- is small next to the work)."""
    return max(1, -(-int(n_payloads) // max(1, int(cpus) * per_cpu)))


@dataclass
class RayExecutor:
    """Chunks as Ray tasks, several chunks per task (:func:`batch_size`; ``batch`` overrides): on a
    cluster (``address``) or a local Ray instance started for the run."""

    address: str | None = None
    num_cpus: int | None = None
    batch: int | None = None
    name: str = "ray"

    def run(self, fn: Callable[[Any], Any], payloads: Sequence[tuple[int, Any]], on_done: OnDone) -> None:
        ray = import_ray()
        started = False
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                      "configure_logging": False}
            if self.address:
                _probe(self.address)
                kwargs["address"] = self.address
            elif self.num_cpus:
                kwargs["num_cpus"] = self.num_cpus
            try:
                ray.init(**kwargs)
            except ConnectionError as exc:
                raise InputError(
                    f"cannot connect to the Ray cluster at {self.address!r}: {exc}",
                    hint="start it with `ray start --head` or check --address (e.g. ray://host:10001 or auto)",
                ) from None
            started = True
        try:
            cpus = int(ray.cluster_resources().get("CPU", 1) or 1)
            size = self.batch or batch_size(len(payloads), cpus)
            task = ray.remote(_run_batch)
            fn_ref = ray.put(fn)
            refs = {}
            for start in range(0, len(payloads), size):
                part = payloads[start:start + size]
                refs[task.remote(fn_ref, [p for _, p in part])] = [idx for idx, _ in part]
            while refs:
                done, _ = ray.wait(list(refs), num_returns=1)
                for ref in done:
                    idxs = refs.pop(ref)
                    for idx, res in zip(idxs, ray.get(ref), strict=True):
                        on_done(idx, res)
        finally:
            if started:
                ray.shutdown()


def _probe(address: str, timeout_s: float = 5.0) -> None:
    """Fail fast on an unreachable ``host:port`` (Ray itself retries for minutes without a word)."""
    import socket

    if address == "auto" or "://" in address or ":" not in address:
        return
    host, _, port = address.rpartition(":")
    if not port.isdigit():
        return
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            pass
    except OSError as exc:
        raise InputError(
            f"cannot reach the Ray cluster at {address!r}: {exc.strerror or exc}",
            hint="start it with `ray start --head`, check --address (host:port of the head's GCS, default port 6379), "
                 "or use --executor local",
        ) from None


def import_ray():
    try:
        import ray  # noqa: PLC0415
    except ImportError:
        raise InputError(
            "the Ray executor needs the optional dependency 'ray', which is not installed",
            hint="install it with `pip install clustertwin[ray]`, or use --executor local",
        ) from None
    return ray


def make_executor(name: str, *, address: str | None = None, workers: int | None = None) -> Executor:
    if name == "local":
        if address:
            raise InputError("--address only applies to --executor ray", hint="drop --address or use --executor ray")
        return LocalExecutor(workers=workers)
    if name == "ray":
        import_ray()
        return RayExecutor(address=address, num_cpus=workers)
    from ..errors import UnknownNameError

    raise UnknownNameError("executor", name, ("local", "ray"))

"""Sweeps: the results store, resuming after SIGKILL, local vs Ray executors."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import planner_fakes
import pytest
from planner_fakes import fake_cost, fake_factory, resolve

from clustertwin.planner.executors import LocalExecutor, RayExecutor
from clustertwin.planner.store import ResultsStore
from clustertwin.planner.sweep import best_per_design, build_sweep, run_sweep

HERE = Path(__file__).resolve().parent

SPEC = {
    "name": "fake-grid",
    "designs": [{"system": "hgx-h100", "domains": [4, 8, 16], "oversubscription": [1, 2]},
                {"system": "hgx-h100", "gpus": [37]}],  # prime, more than the 32 layers: no layout
    "models": ["fake-7b"],
    "global_batch": [256, 512],
    "seq_len": 4096,
    "chunk_size": 2,
}


def _run(catalog, db, executor, spec=SPEC):
    sw = build_sweep(spec, catalog, resolve=resolve)
    out = run_sweep(sw, ResultsStore(db), executor, factory=fake_factory, cost_fn=fake_cost)
    return sw, out


def _strip(rows):
    return [{k: v for k, v in r.items()} for r in rows]


def test_sweep_rows_store_and_pareto(catalog, tmp_path):
    sw, out = _run(catalog, tmp_path / "r.db", LocalExecutor(workers=1))
    assert len(sw.jobs) == (3 * 2 + 1) * 2 and len(out.rows) == len(sw.jobs)
    assert [r["job_index"] for r in out.rows] == list(range(len(sw.jobs)))
    bad = [r for r in out.rows if r["num_gpus"] == 37]
    assert bad and all(not r["feasible"] and "GPU count" in r["reason"] for r in bad)
    good = [r for r in out.rows if r["feasible"]]
    assert all(r["tp"] * r["pp"] * r["dp"] * r["cp"] == r["num_gpus"] for r in good)
    rows = best_per_design(out.rows)
    front = [r for r in rows if r["pareto"]]
    assert front and all(r["feasible"] for r in front)
    # within one (model, batch), no front member is dominated by any feasible design
    for f in front:
        same = [r for r in rows if r["feasible"] and (r["global_batch"], r["model"]) == (f["global_batch"], f["model"])]
        for r in same:
            assert not (r["tokens_per_s"] >= f["tokens_per_s"] and r["cost_usd"] <= f["cost_usd"]
                        and r["power_w"] <= f["power_w"]
                        and (r["tokens_per_s"], r["cost_usd"], r["power_w"]) != (f["tokens_per_s"], f["cost_usd"], f["power_w"]))
    # stored with inputs and versions
    meta = ResultsStore(tmp_path / "r.db").sweep(sw.sweep_id[:6])
    import clustertwin

    assert meta["tool_version"] == clustertwin.__version__ and meta["catalog_version"] == catalog.version
    assert meta["spec"]["models"] == ["fake-7b"] and meta["finished_at"]
    # a second run recomputes nothing and duplicates nothing
    _, again = _run(catalog, tmp_path / "r.db", LocalExecutor(workers=1))
    assert again.computed_chunks == 0 and again.skipped_chunks == len(sw.chunks)
    assert again.rows == out.rows


def test_local_processes_equal_in_process(catalog, tmp_path):
    _, a = _run(catalog, tmp_path / "a.db", LocalExecutor(workers=1))
    _, b = _run(catalog, tmp_path / "b.db", LocalExecutor(workers=2))
    assert a.rows == b.rows


def test_chunk_write_is_atomic(tmp_path):
    store = ResultsStore(tmp_path / "x.db")
    store.begin_sweep(sweep_id="s", name="n", spec={}, catalog_version="c", tool_version="t", num_jobs=2,
                      num_chunks=1, executor="local")
    rows = [{"job_index": 0, "chunk_id": "c0"}, {"job_index": 0, "chunk_id": "c0"}]  # duplicate job: fails
    with pytest.raises(sqlite3.IntegrityError):
        store.write_chunk(sweep_id="s", chunk_id="c0", chunk_index=0, rows=rows)
    assert store.results("s") == [] and store.done_chunks("s") == set()
    assert store.write_chunk(sweep_id="s", chunk_id="c0", chunk_index=0, rows=rows[:1])
    assert not store.write_chunk(sweep_id="s", chunk_id="c0", chunk_index=0, rows=rows[:1])
    assert len(store.results("s")) == 1


KILL_SCRIPT = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {here!r})
    from planner_fakes import fake_cost, fake_factory, resolve
    from clustertwin.catalog import load_catalog
    from clustertwin.planner.executors import LocalExecutor
    from clustertwin.planner.store import ResultsStore
    from clustertwin.planner.sweep import build_sweep, run_sweep
    spec = {spec!r}
    sw = build_sweep(spec, load_catalog(), resolve=resolve)
    run_sweep(sw, ResultsStore(sys.argv[1]), LocalExecutor(workers=int(sys.argv[2])), factory=fake_factory,
              cost_fn=fake_cost)
    """
)


def test_sweep_killed_midway_resumes_without_duplicates(catalog, tmp_path):
    spec = dict(SPEC, designs=[{"system": "hgx-h100", "domains": [2, 4, 8, 16, 32], "oversubscription": [1, 2]}],
                global_batch=[256, 512], chunk_size=2)
    script = tmp_path / "run.py"
    script.write_text(KILL_SCRIPT.format(here=str(HERE), spec=spec))
    db = tmp_path / "killed.db"
    sw = build_sweep(spec, catalog, resolve=resolve)
    assert len(sw.chunks) == 10 and all(len(c.jobs) == 2 for c in sw.chunks)
    # Deterministic stop: the first 8 jobs (of 20) finish, every later one blocks until the kill. With 2
    # workers at most 2 chunks are left half done, so 3 or 4 chunks are complete whatever the load.
    gate = tmp_path / "gate"
    gate.mkdir()
    env = dict(os.environ, **{planner_fakes.STALL_ENV: f"{gate}:8"})
    proc = subprocess.Popen([sys.executable, str(script), str(db), "2"], start_new_session=True, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    done = 0
    while time.time() < deadline:
        if db.exists():
            try:
                done = len(ResultsStore(db).done_chunks(sw.sweep_id))
            except Exception:
                done = 0
        if done >= 3 and len(list(gate.iterdir())) >= 10:  # 8 finished jobs + both workers blocked
            break
        assert proc.poll() is None, proc.stderr.read().decode()
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and its worker processes, mid-sweep
    proc.wait(timeout=10)
    store = ResultsStore(db)
    done_after_kill = store.done_chunks(sw.sweep_id)
    assert 3 <= len(done_after_kill) <= 4, "the kill must land mid-sweep"
    partial = store.results(sw.sweep_id)
    assert {r["chunk_id"] for r in partial} == done_after_kill  # no row of an unfinished chunk
    assert len(partial) == sum(len(c.jobs) for c in sw.chunks if c.chunk_id in done_after_kill)

    # restart: only the missing chunks are computed
    rc = subprocess.run([sys.executable, str(script), str(db), "1"], capture_output=True, timeout=120)
    assert rc.returncode == 0, rc.stderr.decode()
    resumed = ResultsStore(db)
    con = sqlite3.connect(db)
    n_rows, n_distinct = con.execute("SELECT COUNT(*), COUNT(DISTINCT job_index) FROM results").fetchone()
    con.close()
    assert n_rows == n_distinct == len(sw.jobs)
    chunk_times = {c: t for c, t in sqlite3.connect(db).execute("SELECT chunk_id, finished_at FROM chunks")}
    assert set(chunk_times) == {c.chunk_id for c in sw.chunks}
    # same results as an uninterrupted run
    _, ref = _run(catalog, tmp_path / "ref.db", LocalExecutor(workers=2), spec=spec)
    assert resumed.results(sw.sweep_id) == ref.rows


def test_ray_and_local_give_identical_results(catalog, tmp_path):
    ray = pytest.importorskip("ray")
    import ray.cloudpickle as rcp

    rcp.register_pickle_by_value(planner_fakes)  # ship the test-only fake evaluator to Ray workers
    _, local = _run(catalog, tmp_path / "local.db", LocalExecutor(workers=2))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}})
    real_spec = {"name": "real", "designs": {"system": "hgx-h100", "domains": [2, 4], "fabric": ["ib-ndr-400g", "roce-400g"]},
                 "models": "llama3-8b", "global_batch": 64, "seq_len": 4096, "chunk_size": 1}
    real_sw = build_sweep(real_spec, catalog)
    real_local = run_sweep(real_sw, ResultsStore(tmp_path / "real-local.db"), LocalExecutor(workers=2))
    try:
        _, remote = _run(catalog, tmp_path / "ray.db", RayExecutor())
        real_ray = run_sweep(real_sw, ResultsStore(tmp_path / "real-ray.db"), RayExecutor())
    finally:
        ray.shutdown()
        rcp.unregister_pickle_by_value(planner_fakes)
    assert remote.rows == local.rows
    assert len(remote.rows) == 14
    # the analytical engine, the default factory and cost function: same code path, same rows
    assert real_ray.rows == real_local.rows and len(real_ray.rows) == 4
    assert all(r["feasible"] and r["tokens_per_s"] > 0 for r in real_ray.rows)


def test_missing_ray_is_a_clear_input_error(monkeypatch):
    from clustertwin.errors import InputError
    from clustertwin.planner.executors import make_executor

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(InputError) as exc:
        make_executor("ray")
    assert "pip install clustertwin[ray]" in exc.value.render()
    with pytest.raises(InputError):
        make_executor("local", address="auto")


def test_unreachable_ray_address_fails_fast():
    pytest.importorskip("ray")
    import socket

    from clustertwin.errors import InputError

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    t = time.perf_counter()
    with pytest.raises(InputError) as exc:
        RayExecutor(address=f"127.0.0.1:{port}").run(len, [(0, "x")], lambda i, r: None)
    assert "cannot reach the Ray cluster" in exc.value.message and time.perf_counter() - t < 10


def test_a_design_the_engine_refuses_is_an_infeasible_row(catalog, tmp_path):
    from planner_fakes import picky_factory

    spec = dict(SPEC, designs=[{"system": ["dgx-a100", "hgx-h100"], "domains": [4]}], global_batch=[256])
    sw = build_sweep(spec, catalog, resolve=resolve)
    out = run_sweep(sw, ResultsStore(tmp_path / "p.db"), LocalExecutor(workers=1), factory=picky_factory,
                    cost_fn=fake_cost)
    a100, h100 = out.rows
    assert not a100["feasible"] and "fp8" in a100["reason"] and a100["cost_usd"] > 0
    assert h100["feasible"] and h100["tokens_per_s"] > 0


def test_sweep_search_fixed_axes(catalog, tmp_path):
    spec = dict(SPEC, designs=[{"system": "hgx-h100", "domains": [4, 8]}], global_batch=[256],
                search={"fixed": {"tp": 8, "recompute": ["full"]}})
    sw = build_sweep(spec, catalog, resolve=resolve)
    out = run_sweep(sw, ResultsStore(tmp_path / "f.db"), LocalExecutor(workers=1), factory=fake_factory,
                    cost_fn=fake_cost)
    assert all(r["feasible"] and r["tp"] == 8 and r["recompute"] == "full" for r in out.rows)
    from clustertwin.errors import InputError

    with pytest.raises(InputError):
        build_sweep(dict(spec, search={"fixed": {"recompute": ["most"]}}), catalog, resolve=resolve)


def test_sweep_stack_limits_the_search_and_reaches_the_engine(catalog, tmp_path):
    spec = dict(SPEC, designs=[{"system": "hgx-h100", "domains": [4, 8]}], global_batch=[256],
                stack="megatron-lm-2021")
    sw = build_sweep(spec, catalog, resolve=resolve)
    assert sw.options.zero_stages == (0,) and sw.options.recompute == ("full",) and sw.options.max_cp == 1
    assert all(j.engine_options["grad_reduce_bytes"] == 4 and not j.engine_options["flash_attention"]
               for j in sw.jobs)
    out = run_sweep(sw, ResultsStore(tmp_path / "s.db"), LocalExecutor(workers=1), factory=fake_factory,
                    cost_fn=fake_cost)
    assert out.rows and all(r["feasible"] and r["zero"] == 0 and r["cp"] == 1 for r in out.rows)
    # a stack changes the sweep's identity: resuming never mixes results of two stacks
    assert build_sweep(dict(spec, stack="megatron-core"), catalog, resolve=resolve).sweep_id != sw.sweep_id
    from clustertwin.errors import UnknownNameError

    with pytest.raises(UnknownNameError):
        build_sweep(dict(spec, stack="megatron-lm-2020"), catalog, resolve=resolve)


def test_batched_chunks_equal_one_design_at_a_time(catalog):
    """``run_chunks`` (what a Ray task runs on its batch of chunks: the jobs of one machine and model
    searched in one vectorised pass, ``search.search_many``) gives exactly the rows ``evaluate_job`` gives
    one design at a time, infeasible designs included, in any grouping. Batch 8 leaves 70B layouts near the
    memory limit whose fit depends on the row's own batch (micro-batches in flight)."""
    from clustertwin.planner.sweep import (
        ChunkTask,
        default_factory,
        design_cost_power,
        evaluate_job,
        run_chunks,
    )

    spec = {"name": "batched", "designs": [{"system": "hgx-h100", "domains": [1, 2], "fabric": ["ib-ndr-400g", "roce-400g"]},
                                           {"system": "hgx-h100", "gpus": [13]}],  # 13 GPUs: no layout divides the batches
            "models": ["llama3-70b", "mixtral-8x7b"], "global_batch": [8, 96], "seq_len": 4096, "chunk_size": 3}
    sw = build_sweep(spec, catalog)
    tasks = [ChunkTask(chunk=c, options=sw.options, catalog_paths=sw.catalog_paths) for c in sw.chunks]
    ref = [[evaluate_job(j, catalog, sw.options, default_factory, design_cost_power, t.chunk.chunk_id)
            for j in t.chunk.jobs] for t in tasks]
    assert any(not r["feasible"] for rows in ref for r in rows) and any(r["feasible"] for rows in ref for r in rows)
    together = run_chunks(tasks)
    assert [rows for rows, _ in together] == ref
    apart = [rows for i in range(3) for rows, _ in run_chunks(tasks[i::3])]  # other groupings of the chunks
    assert apart == [rows for i in range(3) for rows in ref[i::3]]
    assert all(elapsed >= 0.0 for _, elapsed in together)

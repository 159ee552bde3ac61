"""Web app fixtures: an in-process client (fast API tests) and one real server per session (browser,
load test), started as `clustertwin ui` on a free localhost port and stopped, with no process left."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest


def need(module: str):
    """An optional test dependency (the ``test`` extra has it): an error in CI, a skip with the fix
    in an older local venv."""
    import importlib

    if os.environ.get("CI"):
        return importlib.import_module(module)
    return pytest.importorskip(module, reason=f"{module} is missing: pip install -e '.[test]'")

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "scenarios" / "llama3-70b-hgx-h100.yaml"


@pytest.fixture(scope="session")
def client(tmp_path_factory):
    need("fastapi")
    need("httpx")
    from fastapi.testclient import TestClient

    from clustertwin.web import create_app

    db = tmp_path_factory.mktemp("webdb") / "results.db"
    with TestClient(create_app(db=db)) as c:
        c.db = db
        yield c


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _children(pid: int) -> list[int]:
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                stat = (p / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(p.name))
    return out


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """`clustertwin ui --port P --db D` as a real process; yields the base URL."""
    need("fastapi")
    need("uvicorn")
    import httpx

    port = _free_port()
    db = tmp_path_factory.mktemp("serverdb") / "results.db"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "clustertwin", "ui", "--port", str(port), "--db", str(db)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            raise RuntimeError("clustertwin ui exited: " + (proc.stdout.read() if proc.stdout else ""))
        try:
            if httpx.get(base + "/healthz", timeout=1.0).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("clustertwin ui did not answer /healthz within 60 s")
        time.sleep(0.1)
    try:
        yield {"url": base, "proc": proc, "db": db}
    finally:
        kids = _children(proc.pid)
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        if proc.stdout:
            proc.stdout.close()
        left = [k for k in kids if Path(f"/proc/{k}").exists()]
        assert proc.returncode is not None and not left, f"processes left behind: {left}"

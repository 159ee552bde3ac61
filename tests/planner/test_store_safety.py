"""The results store never harms a file it does not own, and says clearly what is wrong (issue #19)."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat

import pytest

from clustertwin.errors import InputError
from clustertwin.planner.store import APPLICATION_ID, SCHEMA_VERSION, ResultsStore

ROW = {"job_index": 0, "chunk_id": "c0", "system": "hgx-h100", "num_gpus": 8, "feasible": True, "step_time_s": 1.0}


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _filled(path):
    st = ResultsStore(path)
    st.begin_sweep(sweep_id="s1", name="n", spec={}, catalog_version="c", tool_version="t", num_jobs=1,
                   num_chunks=1, executor="local")
    st.write_chunk(sweep_id="s1", chunk_id="c0", chunk_index=0, rows=[ROW])
    return st


def test_new_file_is_marked(tmp_path):
    _filled(tmp_path / "r.db")
    con = sqlite3.connect(tmp_path / "r.db")
    assert con.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


@pytest.mark.parametrize("write", [False, True])
def test_foreign_sqlite_file_is_refused_untouched(tmp_path, write):
    path = tmp_path / "other.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE customers (id INTEGER, name TEXT)")
    con.commit()
    con.close()
    before = _digest(path)
    st = ResultsStore(path)
    with pytest.raises(InputError, match="another program"):
        _filled(path) if write else st.sweeps()
    assert _digest(path) == before
    assert not (tmp_path / "other.db-wal").exists()


def test_other_application_id_is_refused(tmp_path):
    path = tmp_path / "app.db"
    con = sqlite3.connect(path)
    con.execute("PRAGMA application_id=1234")
    con.execute("CREATE TABLE meta (key TEXT, value TEXT)")
    con.commit()
    con.close()
    with pytest.raises(InputError, match="another application"):
        ResultsStore(path).sweeps()


def test_newer_schema_is_refused_untouched(tmp_path):
    path = tmp_path / "r.db"
    _filled(path)
    con = sqlite3.connect(path)
    con.execute(f"PRAGMA user_version={SCHEMA_VERSION + 98}")
    con.commit()
    con.close()
    before = _digest(path)
    for call in (lambda: ResultsStore(path).sweeps(), lambda: _filled(path)):
        with pytest.raises(InputError, match="newer ClusterTwin") as ei:
            call()
        assert "upgrade" in (ei.value.hint or "")
    assert _digest(path) == before


def test_not_sqlite_and_damaged_files(tmp_path):
    text = tmp_path / "notes.db"
    text.write_text("my notes, not a database\n" * 10)
    before = _digest(text)
    with pytest.raises(InputError, match="not an SQLite file"):
        _filled(text)
    assert _digest(text) == before
    bad = tmp_path / "bad.db"
    _filled(bad)
    data = bytearray(bad.read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)  # smash the schema page, keep the header
    bad.write_bytes(bytes(data))
    with pytest.raises(InputError) as ei:
        ResultsStore(bad).sweeps()
    assert "damaged" in ei.value.message or "not a ClusterTwin" in ei.value.message
    assert ei.value.hint


def test_reads_do_not_change_the_file_and_work_read_only(tmp_path):
    path = tmp_path / "r.db"
    _filled(path)
    con = sqlite3.connect(path)  # checkpoint the WAL so the main file holds everything
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.execute("PRAGMA journal_mode=DELETE")
    con.close()
    before = _digest(path)
    st = ResultsStore(path)
    assert [s["id"] for s in st.sweeps()] == ["s1"]
    assert st.results("s1")[0]["system"] == "hgx-h100"
    assert _digest(path) == before
    os.chmod(path, stat.S_IRUSR)
    os.chmod(tmp_path, stat.S_IRUSR | stat.S_IXUSR)
    try:
        if os.access(path, os.W_OK):  # root ignores permission bits: the read-only check cannot be made
            pytest.skip("running as root: file permissions are not enforced")
        assert [s["id"] for s in ResultsStore(path).sweeps()] == ["s1"]
    finally:
        os.chmod(tmp_path, stat.S_IRWXU)
        os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)


def test_legacy_unmarked_database_is_read_and_marked_on_write(tmp_path):
    path = tmp_path / "old.db"
    st = _filled(path)
    con = sqlite3.connect(path)
    con.execute("PRAGMA application_id=0")
    con.execute("PRAGMA user_version=0")
    con.commit()
    con.close()
    assert [s["id"] for s in st.sweeps()] == ["s1"]
    st.finish_sweep("s1")
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID


def test_missing_database_for_reads(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        ResultsStore(tmp_path / "nope.db").sweeps()
    assert not (tmp_path / "nope.db").exists()


def test_disk_full_is_reported_as_disk_full(tmp_path, monkeypatch):
    path = tmp_path / "r.db"
    st = _filled(path)
    real = sqlite3.connect

    def tiny(*a, **k):  # a real SQLITE_FULL from SQLite: cap the file at its current size
        con = real(*a, **k)
        pages = con.execute("PRAGMA page_count").fetchone()[0]
        con.execute(f"PRAGMA max_page_count={pages + 1}")
        return con

    monkeypatch.setattr(sqlite3, "connect", tiny)
    rows = [dict(ROW, job_index=i, chunk_id="c1", system="x" * 5000) for i in range(1, 200)]
    with pytest.raises(InputError, match="disk full") as ei:
        st.write_chunk(sweep_id="s1", chunk_id="c1", chunk_index=1, rows=rows)
    assert "rerun" in (ei.value.hint or "")
    monkeypatch.setattr(sqlite3, "connect", real)
    assert len(st.results("s1")) == 1  # the failed chunk left nothing behind


def test_default_path_is_per_user_and_overridable(tmp_path, monkeypatch):
    from clustertwin.planner.store import default_db_path

    monkeypatch.delenv("CLUSTERTWIN_RESULTS_DB", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_db_path() == tmp_path / "xdg" / "clustertwin" / "results.db"
    monkeypatch.setenv("CLUSTERTWIN_RESULTS_DB", str(tmp_path / "mine.db"))
    assert default_db_path() == tmp_path / "mine.db"

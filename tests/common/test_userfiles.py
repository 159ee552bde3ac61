"""Every user-file reader gives a clear InputError (file named, what is wrong), never a traceback."""

from __future__ import annotations

import pytest

from clustertwin.errors import InputError
from clustertwin.userfiles import read_yaml


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="scenario file .* does not exist"):
        read_yaml(tmp_path / "nope.yaml", "scenario file")


def test_folder_instead_of_file(tmp_path):
    with pytest.raises(InputError, match="is a folder"):
        read_yaml(tmp_path, "sweep file")


def test_broken_yaml_names_the_file(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("a: [1, 2\n")
    with pytest.raises(InputError, match="bad.yaml.*not valid YAML"):
        read_yaml(f, "design file")


def test_wrong_shape(tmp_path):
    f = tmp_path / "list.yaml"
    f.write_text("- 1\n- 2\n")
    with pytest.raises(InputError, match="must hold a mapping"):
        read_yaml(f, "catalog file", shape="sections accelerators, systems")
    assert read_yaml(f, "traffic matrix", mapping=False) == [1, 2]


def test_binary_file(tmp_path):
    f = tmp_path / "x.yaml"
    f.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(InputError, match="not UTF-8"):
        read_yaml(f, "scenario file")


def test_empty_file_is_empty_mapping(tmp_path):
    f = tmp_path / "empty.yaml"
    f.write_text("")
    assert read_yaml(f, "scenario file") == {}


@pytest.mark.parametrize("args", [
    ["estimate", "NOPE.yaml"],
    ["compare", "NOPE.yaml"],
    ["catalog", "list", "--catalog", "NOPE.yaml"],
])
def test_cli_missing_user_files_exit_2(args):
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "clustertwin", *args], capture_output=True, text=True)
    assert r.returncode == 2, r.stderr
    assert "NOPE.yaml" in r.stderr and "Traceback" not in r.stderr


def test_write_atomic_replaces_whole_file_and_leaves_no_temp(tmp_path):
    from clustertwin.userfiles import write_atomic

    f = tmp_path / "out.json"
    f.write_text("old")
    write_atomic(f, "new")
    assert f.read_text() == "new"
    write_atomic(f, b"\x00\x01")
    assert f.read_bytes() == b"\x00\x01"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_write_atomic_keeps_old_file_when_the_writer_fails(tmp_path):
    from clustertwin.userfiles import write_atomic

    f = tmp_path / "table.parquet"
    f.write_text("previous results")

    def broken(tmp):
        with open(tmp, "w") as fh:
            fh.write("half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        write_atomic(f, writer=broken)
    assert f.read_text() == "previous results"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table.parquet"]


def test_write_atomic_missing_folder_is_input_error(tmp_path):
    from clustertwin.userfiles import write_atomic

    with pytest.raises(InputError, match="does not exist"):
        write_atomic(tmp_path / "nope" / "x.csv", "a")


# --- limits, duplicate keys, atomic writes (issue #19) ------------------------------------------------


def test_duplicate_keys_are_refused(tmp_path):
    f = tmp_path / "dup.yaml"
    f.write_text("systems:\n  a: 1\n  a: 2\n")
    with pytest.raises(InputError, match="duplicate key 'a'"):
        read_yaml(f, "catalog file")


@pytest.mark.parametrize("text", ["[" * 200 + "]" * 200, "a:\n" + "".join("  " * i + "b:\n" for i in range(1, 80)),
                                  "[ " * 3000])
def test_deep_nesting_is_refused_without_recursion_error(tmp_path, text):
    f = tmp_path / "deep.yaml"
    f.write_text(text)
    with pytest.raises(InputError, match="nested|not valid YAML"):
        read_yaml(f, "sweep file", mapping=False)


def test_oversized_file_is_refused_before_parsing(tmp_path):
    from clustertwin.userfiles import MAX_USER_FILE_BYTES

    f = tmp_path / "big.yaml"
    f.write_text("a: " + "x" * (MAX_USER_FILE_BYTES + 10) + "\n")
    with pytest.raises(InputError, match="MiB"):
        read_yaml(f, "scenario file")


def test_device_file_is_refused():
    with pytest.raises(InputError, match="not a regular file"):
        read_yaml("/dev/zero", "scenario file")


def test_atomic_write_keeps_mode_and_honours_umask(tmp_path):
    import os
    import stat

    from clustertwin.userfiles import write_atomic

    old = os.umask(0o022)
    try:
        new = write_atomic(tmp_path / "new.csv", "a\n")
        assert stat.S_IMODE(new.stat().st_mode) == 0o644
        keep = tmp_path / "keep.csv"
        keep.write_text("x")
        os.chmod(keep, 0o640)
        write_atomic(keep, "y")
        assert stat.S_IMODE(keep.stat().st_mode) == 0o640 and keep.read_text() == "y"
    finally:
        os.umask(old)


def test_stale_temp_files_of_dead_writers_are_removed(tmp_path):
    import subprocess

    from clustertwin.userfiles import write_atomic

    dead = subprocess.Popen(["true"])  # a finished process: its pid is no longer alive
    dead.wait()
    stale = tmp_path / f".out.csv.{dead.pid}.abcd.tmp"
    stale.write_text("partial")
    other = tmp_path / ".unrelated.tmp"
    other.write_text("keep me")
    write_atomic(tmp_path / "out.csv", "ok")
    assert not stale.exists() and other.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == [".unrelated.tmp"]


# --- calibration overlays: never harm a user's file ---------------------------------------------------


def test_overlay_refuses_files_that_are_not_overlays(tmp_path):
    from clustertwin.catalog.overlay import write_calibration

    notes = tmp_path / "notes.txt"
    notes.write_text("meeting notes: buy more GPUs\n")
    before = notes.read_bytes()
    with pytest.raises(InputError, match="not a ClusterTwin catalog overlay"):
        write_calibration(notes, "collectives", {"hgx-h100": {"x": 1}}, "calibrate")
    assert notes.read_bytes() == before
    other = tmp_path / "compose.yaml"
    other.write_text("services:\n  web: {image: nginx}\n")
    with pytest.raises(InputError, match="not a ClusterTwin catalog overlay"):
        write_calibration(other, "collectives", {"hgx-h100": {"x": 1}}, "calibrate")


def test_overlay_rewrite_keeps_comments_other_sections_and_mode(tmp_path):
    import os
    import stat

    from clustertwin.catalog.overlay import write_calibration
    from clustertwin.userfiles import read_yaml as ry

    f = tmp_path / "mine.yaml"
    f.write_text("# my cluster, tuned 2026-11\nversion: mine-1\n\ncalibration:\n  collectives:\n    dgx-a100: {a: 1}\n"
                 "# systems below are ours\nsystems: {}\n")
    os.chmod(f, 0o640)
    write_calibration(f, "collectives", {"hgx-h100": {"b": 2}}, "calibrate")
    text = f.read_text()
    assert text.startswith("# my cluster, tuned 2026-11\nversion: mine-1\n")
    assert "# systems below are ours\nsystems: {}\n" in text
    assert ry(f, "x")["calibration"]["collectives"] == {"dgx-a100": {"a": 1}, "hgx-h100": {"b": 2}}
    assert stat.S_IMODE(f.stat().st_mode) == 0o640


def test_calibration_for_unknown_system_is_refused(tmp_path):
    from clustertwin.catalog import load_catalog

    f = tmp_path / "cal.yaml"
    f.write_text("calibration:\n  collectives:\n    hgx-h10: {bus_efficiency: 0.9}\n")
    with pytest.raises(InputError, match="hgx-h10") as ei:
        load_catalog([f])
    assert "hgx-h100" in ei.value.suggestions

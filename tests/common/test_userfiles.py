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

"""`clustertwin models list|show`; `show` prints a valid model file (docs/models.md)."""

from __future__ import annotations

import json

import pytest

from clustertwin.cli import main


def _run(capsys, argv):
    try:
        main(argv)
        code = 0
    except SystemExit as e:
        code = e.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


def test_list_has_the_zoo(capsys):
    code, out, _ = _run(capsys, ["models", "list", "--json"])
    assert code == 0
    ids = {m["id"]: m for m in json.loads(out)["models"]}
    assert ids["llama3-405b"]["params_b"] == pytest.approx(405.8, abs=1.0)
    assert ids["deepseek-v3"]["active_params_b"] == pytest.approx(37.5, abs=1.0)


def test_show_round_trips_as_a_model_file(capsys, tmp_path):
    code, out, _ = _run(capsys, ["models", "show", "llama3-70b"])
    assert code == 0
    f = tmp_path / "mine.yaml"
    f.write_text(out.split("\n", 1)[1].replace("llama3-70b:", "my-70b:", 1))
    code, out, err = _run(capsys, ["models", "show", "my-70b", "--model-file", str(f), "--json"])
    assert code == 0, err
    mine = json.loads(out)
    code, out, _ = _run(capsys, ["models", "show", "llama3-70b", "--json"])
    zoo = json.loads(out)
    assert {k: v for k, v in mine.items() if k != "id"} == {k: v for k, v in zoo.items() if k != "id"}


def test_unknown_model_suggests(capsys):
    code, _, err = _run(capsys, ["models", "show", "llama3-7b"])
    assert code == 2 and "did you mean" in err

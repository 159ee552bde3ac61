"""User-supplied text is printed as it is: never read as rich markup (issue #19, "messages are plain text").

Every error path below gets a hostile name; the message must keep the name verbatim, exit 2 and show no
traceback."""

from __future__ import annotations

import pytest

from clustertwin.cli import main

HOSTILE = ["[/x]", "[red]hgx", "a[/b]c[bold]", "[link=file:///etc]x[/link]"]


def _run(capsys, argv):
    with pytest.raises(SystemExit) as ei:
        main(argv)
    out = capsys.readouterr()
    return ei.value.code, out.out, out.err


@pytest.mark.parametrize("name", HOSTILE)
@pytest.mark.parametrize(
    "argv",
    [
        ["estimate", "--model", "llama3-8b", "--gpus", "8", "--system", "{}"],
        ["estimate", "--system", "hgx-h100", "--gpus", "8", "--model", "{}"],
        ["catalog", "show", "{}"],
        ["plan", "--no-store", "--system", "hgx-h100", "--gpus", "64", "--model", "{}"],
        ["collective", "all_reduce", "--system", "{}"],
        ["bom", "{}"],
    ],
)
def test_hostile_names_are_printed_verbatim(capsys, argv, name):
    code, _, err = _run(capsys, [a.replace("{}", name) for a in argv])
    assert code == 2, err
    assert "Traceback" not in err
    assert name in err, err


def test_internal_error_text_is_not_markup(capsys, monkeypatch):
    from clustertwin import api

    def boom(*a, **k):
        raise RuntimeError("[/] broken [red]thing")

    monkeypatch.setattr(api, "simulate", boom)
    code, _, err = _run(capsys, ["estimate", "--model", "llama3-8b", "--system", "hgx-h100", "--gpus", "8"])
    assert code == 1
    assert "[/] broken [red]thing" in err


def test_unknown_name_hint_pluralises():
    from clustertwin.errors import UnknownNameError

    assert "known policies:" in UnknownNameError("policy", "fifp", ["fifo", "tas"]).hint
    assert "known systems:" in UnknownNameError("system", "hgx", ["hgx-h100"]).hint

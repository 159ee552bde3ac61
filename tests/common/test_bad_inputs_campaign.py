"""Regressions from the second bad-input campaign (issue #19 item 5): each case used to exit 0 with
numbers (silent accept) or 1 (internal error); now it exits 2 naming the bad input."""

from __future__ import annotations

from cli_runner import pytest, run_cli

EST = ["estimate", "--model", "llama3-8b", "--system", "hgx-h100", "--gpus", "16", "--tp", "8", "--global-batch", "32"]
PLAN = ["plan", "--model", "llama3-8b", "--gpus", "16", "--no-store"]
SERVE = ["serve", "estimate", "--model", "llama3-8b", "--system", "hgx-h100", "--gpus", "8", "--tp", "8",
         "--input-len", "512", "--output-len", "128"]

CASES = [
    (PLAN + ["--seq-len", "0"], "--seq-len"),  # was ZeroDivisionError
    (["compare", "x" * 300], "unknown system"),  # was OSError: file name too long
    (["estimate", "--model", "llama3-8b", "--system", "hgx-h100", "--gpus", "0"], "--gpus"),  # said --dp
    (EST + ["--layers", "4294967297"], "num_layers"),
    (EST + ["--hidden", "4294967297"], "hidden_size"),
    (EST + ["--seq-len", "4294967297"], "--seq-len"),
    (PLAN + ["--global-batch", "4294967297"], "--global-batch"),
    (PLAN + ["--oversubscription", "1e12"], "--oversubscription"),
    (PLAN + ["--workers", "0"], "--workers"),
    (["cluster", "hgx-h100", "--domains", "4", "--oversubscription", "1e12"], "--oversubscription"),
    (["fabric", "all_reduce", "--system", "hgx-h100", "--domains", "4", "--oversubscription", "1e12"],
     "--oversubscription"),
    (["compare", "hgx-h100x2", "--no-plan", "--gpus", "4294967297"], "--gpus"),
    (["power", "hgx-h100x2", "--pue", "1e12"], "--pue"),
    (["power", "hgx-h100x2", "--price-kwh", "1e12"], "--price-kwh"),
    (SERVE + ["--ep", "0"], "--ep"),  # was ignored for a dense model
]


@pytest.mark.parametrize("argv,word", CASES, ids=[" ".join(a[-2:])[:40] for a, _ in CASES])
def test_flags_are_refused_by_name(capsys, argv, word):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and word in err and "Traceback" not in err, (code, err)


FILES = [
    ("s.yaml", "model: {base: llama3-8b, swiglu: 'no'}\nsystem: hgx-h100\ngpus: 16\n", ["estimate", "s.yaml"], "swiglu"),
    ("s.yaml", "model: {base: llama3-8b, hiden_size: 4}\nsystem: hgx-h100\ngpus: 16\n", ["estimate", "s.yaml"],
     "hiden_size"),
    ("o.yaml", "power: {pue: {value: .nan, assumed: x}}\n", ["power", "hgx-h100x2", "--defaults", "o.yaml"], "power.pue"),
    ("t.csv", "src,dst,bytes\n0,1,1e30\n",
     ["fabric", "matrix", "--system", "hgx-h100", "--domains", "2", "--matrix", "t.csv"], "t.csv flow 1"),
    ("c.yaml", "calibration:\n  hgx-h10: {collectives: {}}\n", ["catalog", "list", "--catalog", "c.yaml"],
     "calibration.hgx-h10"),
]


@pytest.mark.parametrize("name,text,argv,word", FILES, ids=[w for *_, w in FILES])
def test_user_files_are_refused_by_field(capsys, tmp_path, monkeypatch, name, text, argv, word):
    monkeypatch.chdir(tmp_path)
    (tmp_path / name).write_text(text)
    code, _, err = run_cli(capsys, *argv)
    assert code == 2 and word in err and "Traceback" not in err, (code, err)
    assert (tmp_path / name).read_text() == text  # the user's file is left as it was


NAMED = [
    ("m.yaml", "model: llama3-8b\nsystem: hgx-h10\ngpus: 16\n", ["estimate", "m.yaml"], "scenario 'm.yaml'"),
    ("d.yaml", "system: hgx-h10\ndomains: 2\n", ["power", "d.yaml"], "design file 'd.yaml'"),
    ("w.yaml", "name: s\ndesigns: {system: hgx-h100, domains: [2]}\nmodels: llama9\nglobal_batch: 64\n",
     ["sweep", "w.yaml", "--db", "r.db"], "w.yaml: unknown model"),
    ("t.csv", "src,dst,bytes\n0,9,nan\n", ["fabric", "matrix", "--system", "hgx-h100", "--domains", "2", "--matrix",
                                          "t.csv"], "t.csv flow 1"),
]


@pytest.mark.parametrize("name,text,argv,word", NAMED, ids=[n for n, *_ in NAMED])
def test_errors_inside_a_user_file_name_the_file(capsys, tmp_path, monkeypatch, name, text, argv, word):
    monkeypatch.chdir(tmp_path)
    (tmp_path / name).write_text(text)
    code, _, err = run_cli(capsys, *argv)
    assert code == 2 and word in err, (code, err)


def test_ep_on_a_dense_model_is_reported_not_silently_ignored(capsys):
    code, out, err = run_cli(capsys, *SERVE, "--ep", "8", "--json")
    import json

    notes = json.loads(out)["notes"]
    assert code == 0 and any("--ep 8 ignored" in n and "dense" in n for n in notes), notes


def test_goodput_with_an_absurd_model_size_is_refused_by_its_limit(capsys):
    code, out, err = run_cli(capsys, "goodput", "--system", "hgx-h100", "--gpus", "64", "--params", "1e12", "--no-plan")
    assert code == 2 and "--params" in err and "Traceback" not in err, err  # used to blame the planned rate

"""One typed schema for user files: strict integers and booleans, finite numbers, no unknown keys, and
errors that name the file, the field and the bad value (issue #19, item 2)."""

from __future__ import annotations

import pytest

from clustertwin.cli import main

SCENARIO = """model: llama3-8b
system: hgx-h100
gpus: 8
plan: {tp: 8, global_batch: 16, seq_len: 2048}
"""


def _run(capsys, argv):
    with pytest.raises(SystemExit) as ei:
        main(argv)
    out = capsys.readouterr()
    return ei.value.code, out.out, out.err


def test_good_scenario_runs(tmp_path, capsys):
    f = tmp_path / "s.yaml"
    f.write_text(SCENARIO)
    code, out, err = _run(capsys, ["estimate", str(f), "--json"])
    assert code in (0, None), err


@pytest.mark.parametrize(
    "text, words",
    [
        (SCENARIO.replace("tp: 8", 'tp: "four"'), ["plan.tp", "'four'"]),
        (SCENARIO.replace("gpus: 8", 'gpus: "sixty-four"'), ["gpus", "sixty-four"]),
        (SCENARIO.replace("gpus: 8", "gpus: 2.7"), ["gpus", "2.7"]),
        (SCENARIO.replace("tp: 8", "tp: 8, overlap: \"no\""), ["plan.overlap", "'no'"]),
        (SCENARIO.replace("gpus: 8", "gpuz: 8"), ["gpuz", "did you mean 'gpus'"]),
        (SCENARIO.replace("tp: 8", "tpp: 8"), ["plan.tpp", "did you mean 'tp'"]),
        (SCENARIO.replace("system: hgx-h100\n", ""), ["system", "required"]),
        (SCENARIO + "fabric: .nan\n", ["fabric"]),
    ],
)
def test_bad_scenarios_name_the_field(tmp_path, capsys, text, words):
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    code, _, err = _run(capsys, ["estimate", str(f)])
    assert code == 2, err
    assert "bad.yaml" in err and "Traceback" not in err
    for w in words:
        assert w in err, (w, err)


@pytest.mark.parametrize(
    "entry, words",
    [
        ("{num_layers: 2, hidden_size: 64, num_attention_heads: 4, vocab_size: 100, swiglu: \"no\"}", ["swiglu", "'no'"]),
        ("{num_layers: 2.5, hidden_size: 64, num_attention_heads: 4, vocab_size: 100}", ["num_layers", "2.5"]),
        ("{num_layers: 2, hidden_size: 64, num_attention_heads: 4}", ["vocab_size", "required"]),
        ("{num_layerz: 2, hidden_size: 64, num_attention_heads: 4, vocab_size: 100}", ["num_layerz"]),
        ("7", ["mapping"]),
    ],
)
def test_bad_model_entries(entry, words):
    from clustertwin.errors import InputError
    from clustertwin.workload.model import _parse_models_yaml

    with pytest.raises(InputError) as ei:
        _parse_models_yaml(f"models:\n  tiny: {entry}\n", "my-models.yaml")
    text = ei.value.render()
    assert "my-models.yaml" in text and "tiny" in text
    for w in words:
        assert w in text, (w, text)


@pytest.mark.parametrize("text", ["models: {}\n", "42\n", "models: [1, 2]\n"])
def test_empty_or_scalar_model_files(text):
    from clustertwin.errors import InputError
    from clustertwin.workload.model import _parse_models_yaml

    with pytest.raises(InputError, match="non-empty mapping"):
        _parse_models_yaml(text, "m.yaml")


@pytest.mark.parametrize("value", ["abc", "2.7", "0", "true"])
def test_design_file_domains_are_strict(tmp_path, value):
    from clustertwin.catalog import load_catalog
    from clustertwin.errors import InputError
    from clustertwin.reliability.design import _from_file

    f = tmp_path / "d.yaml"
    f.write_text(f"system: hgx-h100\ndomains: {value}\n")
    with pytest.raises(InputError, match="domains must be a whole number"):
        _from_file(f, load_catalog(), None)


def test_design_file_unknown_key(tmp_path):
    from clustertwin.catalog import load_catalog
    from clustertwin.errors import InputError
    from clustertwin.reliability.design import _from_file

    f = tmp_path / "d.yaml"
    f.write_text("system: hgx-h100\ndomain: 4\n")
    with pytest.raises(InputError, match="unknown field 'domain'"):
        _from_file(f, load_catalog(), None)

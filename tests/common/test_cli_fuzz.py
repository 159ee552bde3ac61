"""Fuzzing the exit-code contract (issue #19, item 8).

Hypothesis builds argument lists for the main commands, mixing valid ids and values with hostile ones
(unknown names, zero/negative/huge/NaN/inf numbers, rich markup, empty and unicode strings), and writes
user files (scenario, model, design, sweep, traffic, jobs, validation CSV, catalog overlay, defaults) with
wrong types, keys and values. Whatever comes in, the CLI must exit 0 or 2 — never 1 ("internal error"),
never an uncaught exception or a traceback — and a refusal (2) must say something.

Bounded: a few hundred examples in all (``max_examples`` per test), no deadline, and the valid side is
kept small (few GPUs and domains) so that no run is legitimately slow."""

from __future__ import annotations

import contextlib
import io
import itertools
import math

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from clustertwin.cli import main

FUZZ = settings(max_examples=25, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

# ------------------------------------------------------------------------------------------ values
HOSTILE_TEXT = ["", " ", "[/x]", "[red]hgx", "a[/b]c[bold]", "hgx-h10", "llama3-8", "ünïcødé-名前", "-", "--json",
                "../../etc/passwd", "x" * 300, "NaN", "1e999", "0x10", "null", "~", "{a: 1}", "[1, 2]", "🙂"]
HOSTILE_INT = ["0", "-1", "-8", "3", "7", "2147483648", "1000000000000", "1e3", "1.5", "nan", "inf", "-inf",
               "abc", "", "8.0", "[/x]"]
HOSTILE_FLOAT = ["0", "-1", "-0.5", "nan", "inf", "-inf", "1e308", "1e999", "abc", "", "1e-300", "2.5e2"]

SYSTEMS = ["hgx-h100", "dgx-a100", "gb200-nvl72", "hgx-h200"]
MODELS = ["llama3-8b", "gpt3-175b", "llama3-70b"]
FABRICS = ["ib-ndr-400g", "roce-400g"]


def _mix(valid, hostile=HOSTILE_TEXT, p_valid=6):
    """Mostly valid values, sometimes hostile ones (weights by repetition)."""
    return st.one_of(*([st.sampled_from(valid)] * p_valid), st.sampled_from(hostile))


ids_system = _mix(SYSTEMS)
ids_model = _mix(MODELS)
ids_fabric = _mix(FABRICS)
small_int = _mix(["1", "2", "4", "8"], HOSTILE_INT)
tiny_count = _mix(["1", "2"], HOSTILE_INT)
any_float = _mix(["0.5", "1", "1.0", "2"], HOSTILE_FLOAT)
ratio = _mix(["0.3", "0.5", "0.9"], HOSTILE_FLOAT)
text = st.one_of(st.sampled_from(HOSTILE_TEXT), st.text(max_size=12).filter(lambda s: "\x00" not in s))


def _opts(table: dict[str, st.SearchStrategy]) -> st.SearchStrategy[list[str]]:
    """A random subset of `--flag value` pairs from `table` (a value of None is a bare boolean flag)."""
    names = sorted(table)

    @st.composite
    def build(draw):
        chosen = draw(st.lists(st.sampled_from(names), unique=True, max_size=5))
        out: list[str] = []
        for flag in chosen:
            if table[flag] is None:
                out.append(flag)
            else:
                out += [flag, draw(table[flag])]
        return out

    return build()


# ------------------------------------------------------------------------------------------ runner
def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(argv)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    return code, out.getvalue(), err.getvalue()


COUNT = itertools.count()


def _check(argv: list[str]) -> int:
    next(COUNT)
    code, out, err = _run(argv)
    assert code in (0, 2), f"exit {code} for {argv!r}\n{err[-2000:]}"
    assert "Traceback" not in err and "internal error" not in err, f"{argv!r}\n{err[-2000:]}"
    if code == 2:
        assert err.strip(), f"exit 2 without a message for {argv!r}"
    return code


# ------------------------------------------------------------------------------------------ argv fuzz
ESTIMATE = {
    "--gpus": small_int, "--tp": small_int, "--pp": small_int, "--dp": small_int, "--cp": tiny_count,
    "--ep": tiny_count, "--vpp": tiny_count, "--zero": _mix(["0", "1", "3"], HOSTILE_INT),
    "--micro-batch": small_int, "--global-batch": _mix(["8", "16", "64"], HOSTILE_INT),
    "--seq-len": _mix(["512", "2048"], HOSTILE_INT), "--recompute": _mix(["none", "selective", "full"]),
    "--dtype": _mix(["bf16", "fp8", "fp16"]), "--stack": _mix(["megatron-core", "pytorch-fsdp"]),
    "--layers": small_int, "--hidden": _mix(["512", "1024"], HOSTILE_INT), "--heads": small_int,
    "--kv-heads": small_int, "--ffn": _mix(["2048"], HOSTILE_INT), "--vocab": _mix(["32000"], HOSTILE_INT),
    "--experts": tiny_count, "--topk": tiny_count, "--moe-load-imbalance": any_float, "--fabric": ids_fabric,
    "--engine": _mix(["analytical", "event"]), "--straggler": _mix(["stage=0,compute=1.2"], HOSTILE_TEXT),
    "--network": _mix(["analytical", "flow"]), "--routing": _mix(["ecmp", "spray"]),
    "--oversubscription": any_float, "--fail-links": tiny_count, "--seed": small_int,
    "--fsdp": None, "--no-sp": None, "--json": None,
}
COLLECTIVE = {
    "--domains": tiny_count, "--gpus": small_int, "--fabric": ids_fabric,
    "--sizes": _mix(["8:1M", "1M,64M", "1K", "8:1M:4"], ["", "8:8", "1M:8", "abc", "8:1M:1", "8:1M:nan", "-1M",
                                                        "1Gb", "[/x]", "0", "1M,,2M", "8:1M:0.5"]),
    "--algo": _mix(["auto", "ring", "tree", "nvls"]), "--dtype": _mix(["float", "half", "bfloat16"]),
    "--network": _mix(["analytical", "flow"]), "--routing": _mix(["ecmp", "adaptive"]),
    "--oversubscription": any_float, "--fail-links": tiny_count, "--seed": small_int, "--json": None,
}
FABRIC = {
    "--domains": tiny_count, "--fabric": ids_fabric, "--topology": _mix(["fat-tree", "rail", "dual-plane"]),
    "--oversubscription": any_float, "--tiers": _mix(["2", "3"], HOSTILE_INT),
    "--routing": _mix(["ecmp", "adaptive", "spray"]), "--fail-links": tiny_count,
    "--fail-switch": _mix(["leaf:0", "spine:0.0"], ["leaf:99", "leaf:-1", "spine:x", "core:", "", "[/x]"]),
    "--slow-nic": _mix(["0:0.5"], ["0:nan", "0:-1", "99999:0.5", "a:b", "", "0:inf", "0:0"]),
    "--degrade-link": _mix(["0:0.5"], ["0:nan", "-1:0.5", "x", "", "0:2"]),
    "--straggler": _mix(["0:0.001"], ["0:nan", "0:inf", "0:-1", "99999:0.1", ":", ""]),
    "--seed": small_int, "--size": _mix(["1M", "64K"], ["", "0", "-1M", "1Gb", "abc", "nan", "1e999"]),
    "--tp": small_int, "--pp": tiny_count, "--dp": tiny_count, "--act-size": _mix(["1M"], ["", "-1", "x"]),
    "--microbatches": small_int, "--max-phases": small_int, "--window": tiny_count, "--channels": tiny_count,
    "--top": small_int, "--no-pxn": None, "--json": None,
}
CLUSTER = {
    "--domains": tiny_count, "--fabric": ids_fabric, "--topology": _mix(["fat-tree", "rail", "dual-plane"]),
    "--oversubscription": any_float, "--tiers": _mix(["1", "2", "auto"], HOSTILE_TEXT),
    "--domain-size": small_int, "--json": None,
}
GOODPUT = {
    "--gpus": small_int, "--domains": tiny_count, "--fabric": ids_fabric, "--model": ids_model,
    "--params": any_float, "--days": any_float, "--checkpoint-interval": _mix(["auto", "30"], HOSTILE_FLOAT),
    "--monte-carlo": _mix(["0", "10"], HOSTILE_INT), "--seed": small_int, "--spares": tiny_count,
    "--rate": _mix(["accelerator=1.0", "nic=0.5"], ["nic=nan", "nic=-1", "nope=1", "nic", "=1", "[/x]=1", "",
                                                    "nic=inf", "nic=1e999"]),
    "--write-tbps": any_float, "--read-tbps": any_float, "--restart": any_float,
    "--checkpoint-blocking": ratio, "--tokens-per-s": any_float, "--mfu": ratio, "--json": None,
}
POWER = {"--utilization": ratio, "--pue": _mix(["1.2", "1.5"], HOSTILE_FLOAT), "--price-kwh": any_float,
         "--json": None}
COMPARE = dict(POWER, **{"--model": ids_model, "--gpus": small_int, "--mfu": ratio, "--spares": tiny_count})
SERVE = {
    "--gpus": small_int, "--tp": small_int, "--ep": tiny_count, "--pp": tiny_count,
    "--input-len": any_float, "--output-len": any_float, "--qps": _mix(["0", "1"], HOSTILE_FLOAT),
    "--disaggregate": _mix(["1:1"], ["", "0:1", "1:-1", "a:b", "1", "1:nan", "[/x]"]),
    "--weights-dtype": _mix(["bf16", "fp8"]), "--kv-dtype": _mix(["bf16", "fp8"]),
    "--engine": _mix(["generic", "vllm", "trtllm"]), "--max-batch": small_int, "--max-num-tokens": small_int,
    "--spec-tokens": tiny_count, "--acceptance": ratio, "--prefix-hit": ratio,
    "--requests": _mix(["20", "50"], HOSTILE_INT), "--seed": small_int,
    "--ttft-slo": _mix(["2s", "500ms"], ["", "-1s", "nans", "abc", "0s", "infms"]),
    "--tpot-slo": _mix(["80ms"], ["", "-1ms", "x", "0"]), "--json": None,
}
GEN_TRACE = {"--jobs": _mix(["5", "20"], HOSTILE_INT), "--domains": tiny_count, "--fabric": ids_fabric,
             "--unhealthy-per-domain": tiny_count, "--load": ratio, "--seed": small_int, "--json": None}
REPLAY = {"--domains": tiny_count, "--fabric": ids_fabric, "--topology": _mix(["rail", "fat-tree"]),
          "--oversubscription": any_float, "--unhealthy-per-domain": tiny_count,
          "--policy": _mix(["fifo", "backfill", "tas", "binpack"]), "--queueing": _mix(["strict", "besteffort"]),
          "--faults": _mix(["0", "1"], HOSTILE_FLOAT), "--seed": small_int, "--load": ratio, "--no-store": None,
          "--json": None}


@st.composite
def command_argv(draw):
    kind = draw(st.sampled_from(["estimate", "plan", "collective", "fabric", "cluster", "bom", "catalog",
                                 "goodput", "power", "compare", "validate", "serve", "gen-trace", "replay",
                                 "serve-plan", "export", "format", "trace"]))
    system, model = draw(ids_system), draw(ids_model)
    if kind == "estimate":
        return ["estimate", "--model", model, "--system", system, "--gpus", "8", *draw(_opts(ESTIMATE))]
    if kind == "plan":
        extra = {k: v for k, v in ESTIMATE.items() if k in {"--tp", "--pp", "--dp", "--ep", "--zero",
                 "--micro-batch", "--global-batch", "--seq-len", "--recompute", "--dtype", "--stack", "--fabric",
                 "--json"}}
        extra.update({"--top": small_int, "--max-idle-gpus": tiny_count, "--oversubscription": any_float,
                      "--domains": tiny_count})
        return ["plan", "--no-store", "--model", model, "--system", system, "--gpus", draw(_mix(["8", "16"],
                HOSTILE_INT)), *draw(_opts(extra))]
    if kind == "collective":
        op = draw(_mix(["all_reduce", "all_gather", "all_to_all", "send_recv"]))
        return ["collective", op, "--system", system, "--sizes", "1K:1M", *draw(_opts(COLLECTIVE))]
    if kind == "fabric":
        what = draw(_mix(["all_reduce", "all_to_all", "reduce_scatter", "step"]))
        return ["fabric", what, "--system", system, "--domains", "2", "--size", "1M", *draw(_opts(FABRIC))]
    if kind in ("cluster", "bom"):
        opts = dict(CLUSTER)
        if kind == "cluster":
            opts["--route"] = _mix(["0,9", "0,1"], ["0", "0,99999", "a,b", "-1,0", "", "0,0,0"])
        return [kind, system, *draw(_opts(opts))]
    if kind == "catalog":
        sub = draw(st.sampled_from(["show", "list"]))
        arg = draw(_mix(SYSTEMS + FABRICS + ["h100-sxm", "accelerators", "systems", "fabrics"]))
        return ["catalog", sub, arg, *draw(st.sampled_from([[], ["--json"]]))]
    if kind == "goodput":
        size = draw(st.sampled_from([["--model", model], ["--params", draw(any_float)], []]))
        return ["goodput", "--system", system, "--gpus", "8", "--no-plan", *size, *draw(_opts(GOODPUT))]
    if kind == "power":
        design = draw(_mix(["hgx-h100x2", "gb200-nvl72x1", "dgx-a100"], HOSTILE_TEXT + ["hgx-h100x0",
                      "hgx-h100x-1", "hgx-h100xabc", "hgx-h100x99999999999"]))
        return ["power", design, *draw(_opts(POWER))]
    if kind == "compare":
        designs = draw(st.lists(_mix(["hgx-h100x2", "dgx-a100x2"], HOSTILE_TEXT + ["hgx-h100x0"]), min_size=1,
                                max_size=3))
        return ["compare", *designs, "--no-plan", *draw(_opts(COMPARE))]
    if kind == "validate":
        target = draw(_mix(["memory", "collectives"], HOSTILE_TEXT + ["training.csv", "/nonexistent/x.csv"]))
        extra = draw(st.sampled_from([[], ["--by", "framework"], ["--by", "[/x]"], ["--by", ""], ["--cv", "nope"],
                                      ["--json"]]))
        return ["validate", target, *extra]
    if kind == "serve":
        return ["serve", "estimate", "--model", model, "--system", system, "--requests", "20",
                *draw(_opts(SERVE))]
    if kind == "serve-plan":
        opts = {k: SERVE[k] for k in ("--input-len", "--output-len", "--ttft-slo", "--tpot-slo", "--weights-dtype",
                                      "--kv-dtype", "--engine", "--json")}
        opts["--colocated-only"] = None
        return ["serve", "plan", "--model", model, "--system", system, "--gpus", draw(small_int), "--simulate-top",
                draw(_mix(["0"], ["-1", "abc", "nan"])), *draw(_opts(opts))]
    if kind == "export":
        opts = {"--domains": tiny_count, "--fabric": ids_fabric, "--topology": _mix(["rail", "fat-tree"]),
                "--unhealthy-per-domain": tiny_count, "--seed": small_int, "--name": text, "--node-prefix": text}
        return ["schedule", "export", "--format", draw(_mix(["kueue", "volcano", "slurm"])), "--system", system,
                "--domains", "2", *draw(_opts(opts))]
    if kind == "format":
        return ["--format", draw(_mix(["plain", "csv", "rich", "auto"])), "bom", system, "--domains", "2"]
    if kind == "trace":
        out = draw(_mix(["{tmp}/t.json"], ["{tmp}", "{tmp}/no/such/dir/t.json", "", "{tmp}/[/x].json",
                                           "{tmp}/ü.json"]))
        return ["estimate", "--model", model, "--system", system, "--gpus", "8", "--engine", "event", "--trace", out]
    if kind == "gen-trace":
        return ["schedule", "gen-trace", "{tmp}/trace.yaml", "--jobs", "5", "--domains", "2",
                *draw(_opts(GEN_TRACE))]
    n = draw(_mix(["llm:5", "llm:10"], ["llm:0", "llm:-1", "llm:abc", "llm:", "llm:nan", "llm:99999999999",
                                        "[/x]", "", "nofile.yaml"]))
    return ["schedule", "replay", n, "--system", system, "--domains", "2", *draw(_opts(REPLAY))]


@settings(FUZZ, max_examples=150)
@example(["estimate", "--model", "llama3-8b", "--system", "[/x]", "--gpus", "8"])
@example(["collective", "all_reduce", "--system", "hgx-h100", "--sizes", "8:1M:nan"])
@example(["serve", "estimate", "--model", "llama3-8b", "--system", "hgx-h100", "--pp", "0"])  # was ZeroDivisionError
@given(argv=command_argv())
def test_cli_arguments_keep_the_exit_code_contract(tmp_path, argv):
    _check([a.replace("{tmp}", str(tmp_path)) for a in argv])


# ------------------------------------------------------------------------------------------ user files
JUNK = st.one_of(
    st.sampled_from([None, True, False, 0, -1, 1.5, -2.5, 10**15, float("nan"), float("inf"), "", "abc", "[/x]",
                     "four", "1e999", [], {}, [1, "a"], {"x": 1}, "yes", "no", "ünï"]),
    st.integers(-10, 10**6), st.text(max_size=8),
)


def _yaml_scalar(v) -> str:
    import json

    if isinstance(v, float) and not math.isfinite(v):
        return ".nan" if math.isnan(v) else (".inf" if v > 0 else "-.inf")
    return json.dumps(v)  # JSON is YAML


@st.composite
def mutated(draw, base: dict, extra_keys=("bogus", "gpus_x", "")):
    """`base` with some values replaced by junk, some keys dropped and some unknown keys added."""
    doc = dict(base)
    keys = sorted(doc)
    if not keys:
        return doc
    for k in draw(st.lists(st.sampled_from(keys), unique=True, max_size=3)):
        doc[k] = draw(JUNK)
    for k in draw(st.lists(st.sampled_from(keys), unique=True, max_size=1)):
        doc.pop(k, None)
    if draw(st.booleans()) and draw(st.booleans()):
        doc[draw(st.sampled_from(extra_keys))] = draw(JUNK)
    return doc


def _dump(doc) -> str:
    if not isinstance(doc, dict):
        return _yaml_scalar(doc) + "\n"
    lines = []
    for k, v in doc.items():
        if isinstance(v, dict):
            inner = ", ".join(f"{_yaml_scalar(a)}: {_yaml_scalar(b)}" for a, b in v.items())
            lines.append(f"{_yaml_scalar(k)}: {{{inner}}}")
        else:
            lines.append(f"{_yaml_scalar(k)}: {_yaml_scalar(v)}")
    return "\n".join(lines) + "\n"


NCCL_LOG = """\
# nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1
#
# Using devices
#  Rank  0 Group  0 Pid  23456 on gpu-node-3 device  0 [0x18] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid  23456 on gpu-node-3 device  1 [0x18] NVIDIA H100 80GB HBM3
#  Rank  2 Group  0 Pid  23456 on gpu-node-3 device  2 [0x18] NVIDIA H100 80GB HBM3
#  Rank  3 Group  0 Pid  23456 on gpu-node-3 device  3 [0x18] NVIDIA H100 80GB HBM3
#  Rank  4 Group  0 Pid  23456 on gpu-node-3 device  4 [0x18] NVIDIA H100 80GB HBM3
#  Rank  5 Group  0 Pid  23456 on gpu-node-3 device  5 [0x18] NVIDIA H100 80GB HBM3
#  Rank  6 Group  0 Pid  23456 on gpu-node-3 device  6 [0x18] NVIDIA H100 80GB HBM3
#  Rank  7 Group  0 Pid  23456 on gpu-node-3 device  7 [0x18] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1    12.10    0.00    0.00      0    11.95    0.00    0.00      0
     1048576        262144     float     sum      -1    20.50   51.15   51.15      0    20.10   52.17   52.17      0
   134217728      33554432     float     sum      -1   700.00  191.74  335.54      0   699.00  192.01  336.02      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 26.08
"""


def _dump_nested(doc: dict) -> str:
    """One more level of block mapping: ``key:`` then the indented :func:`_dump` of the value."""
    out = []
    for k, v in doc.items():
        inner = _dump(v)
        out.append(f"{_yaml_scalar(k)}:\n" + "".join("  " + line + "\n" for line in inner.splitlines()))
    return "".join(out)


SCENARIO = {"name": "s", "model": "llama3-8b", "system": "hgx-h100", "fabric": "ib-ndr-400g", "gpus": 8,
            "plan": {"tp": 2, "pp": 1, "micro_batch": 1, "global_batch": 16, "seq_len": 2048, "dtype": "bf16"}}
DESIGN = {"system": "hgx-h100", "domains": 2, "fabric": "ib-ndr-400g"}
MODEL = {"name": "m", "num_layers": 4, "hidden_size": 512, "num_attention_heads": 8, "vocab_size": 32000,
         "seq_len": 1024, "swiglu": True, "ffn_hidden_size": 1408, "num_kv_heads": 8}
SWEEP = {"name": "s", "designs": {"system": "hgx-h100", "domains": 1, "fabric": "ib-ndr-400g"},
         "models": "llama3-8b", "global_batch": 16, "seq_len": 2048}
ACCEL = {"name": "My chip", "vendor": "me", "arch": "x", "peak_tflops": {"bf16": 100}, "hbm_gb": 10,
         "hbm_tbps": 1, "scaleup_gbps_uni": 10, "source": "my datasheet"}
DEFAULTS = {"checkpoint": {"write_tbps": {"value": 1.0, "source": "x"}}}


@st.composite
def scenario_docs(draw):
    doc = draw(mutated(SCENARIO))
    if isinstance(doc.get("plan"), dict) and draw(st.booleans()):
        doc["plan"] = draw(mutated(doc["plan"], extra_keys=("tpp", "bogus")))
    return doc


@st.composite
def user_file_case(draw):
    kind = draw(st.sampled_from(["scenario", "design", "model", "sweep", "overlay", "defaults", "matrix-csv",
                                 "matrix-yaml", "jobs", "validation", "nccl-log", "results-db", "scalar"]))
    if kind == "scenario":
        return kind, _dump(draw(scenario_docs())), lambda f: ["estimate", f]
    if kind == "design":
        cmd = draw(st.sampled_from(["power", "compare"]))
        return kind, _dump(draw(mutated(DESIGN))), (lambda f: [cmd, f, "--no-plan"] if cmd == "compare"
                                                    else [cmd, f])
    if kind == "model":
        doc = {draw(_mix(["my-model"], ["", "[/x]", "llama3-8b"])): draw(mutated(MODEL, extra_keys=("num_layer", "bogus")))}
        return kind, _dump_nested(doc), lambda f: ["estimate", "--model", f, "--system", "hgx-h100", "--gpus", "8"]
    if kind == "sweep":
        doc = draw(mutated(SWEEP, extra_keys=("design", "bogus")))
        if isinstance(doc.get("designs"), dict) and draw(st.booleans()):
            doc["designs"] = draw(mutated(doc["designs"]))
        return kind, _dump(doc), lambda f: ["sweep", f, "--workers", "1", "--db", f + ".db"]
    if kind == "overlay":
        entry = draw(mutated(ACCEL, extra_keys=("hbm", "bogus")))
        inner = "\n".join("    " + line for line in _dump(entry).splitlines())
        body = "accelerators:\n  my-chip:\n" + inner + "\n"
        if draw(st.booleans()):
            body = draw(st.sampled_from(["accelerators: 3\n", "systems: [a, b]\n", "bogus: {}\n", "[1, 2]\n",
                                         "accelerators:\n  h100-sxm: {hbm_gb: -1}\n", "calibration: abc\n",
                                         "calibration:\n  hgx-h10: {}\n"]))
        return kind, body, lambda f: ["catalog", "show", "my-chip", "--catalog", f]
    if kind == "defaults":
        doc = draw(mutated(DEFAULTS, extra_keys=("checkpointt", "power", "bogus")))
        return kind, _dump(doc), lambda f: ["power", "hgx-h100x2", "--defaults", f]
    if kind == "matrix-csv":
        rows = draw(st.lists(st.tuples(_mix(["0", "1", "8"], HOSTILE_INT), _mix(["1", "9"], HOSTILE_INT),
                                       _mix(["1M", "4096"], ["", "-1", "nan", "abc", "1e999"])), max_size=4))
        header = draw(st.sampled_from(["src,dst,bytes", "src,dst", "a,b,c", ""]))
        body = header + "\n" + "\n".join(",".join(r) for r in rows) + "\n"
        return kind, body, lambda f: ["fabric", "matrix", "--system", "hgx-h100", "--domains", "2", "--matrix", f]
    if kind == "matrix-yaml":
        flows = draw(st.lists(mutated({"src": 0, "dst": 9, "bytes": 1048576}), max_size=3))
        body = "flows:\n" + "".join("  - " + _dump(fl).strip().replace("\n", "\n    ") + "\n" for fl in flows)
        if draw(st.booleans()):
            body = "[" + ", ".join("{" + _dump(fl).strip().replace("\n", ", ") + "}" for fl in flows) + "]\n"
        return kind, body, lambda f: ["fabric", "matrix", "--system", "hgx-h100", "--domains", "2", "--matrix", f]
    if kind == "jobs":
        jobs = draw(st.lists(mutated({"id": "j1", "pods": 1, "gpus_per_pod": 8, "submit_s": 0, "duration_s": 3600},
                                     extra_keys=("gpus", "bogus")), max_size=3))
        body = "jobs:\n" + "".join("  - {" + _dump(j).strip().replace("\n", ", ") + "}\n" for j in jobs)
        return kind, body, lambda f: ["schedule", "replay", f, "--system", "hgx-h100", "--domains", "2",
                                      "--no-store"]
    if kind == "validation":
        import csv

        src = "src/clustertwin/data/validation/" + draw(st.sampled_from(["memory.csv", "training.csv",
                                                                          "collectives.csv"]))
        from pathlib import Path

        root = Path(__file__).resolve().parents[2]
        with open(root / src, newline="") as fh:
            rows = list(csv.reader(fh))
        header, row = rows[0], list(rows[draw(st.integers(1, min(20, len(rows) - 1)))])
        for i in draw(st.lists(st.integers(0, len(header) - 1), unique=True, max_size=3)):
            row[i] = draw(st.sampled_from(["", "-1", "nan", "inf", "abc", "[/x]", "0", "1e999", "yes", "-0"]))
        buf = io.StringIO()
        csv.writer(buf).writerows([header, row])
        return kind, buf.getvalue(), lambda f: ["validate", f]
    if kind == "nccl-log":
        lines = NCCL_LOG.splitlines()
        for i in draw(st.lists(st.sampled_from([0, 3, 16, 17]), unique=True, max_size=2)):
            cols = lines[i].split()
            j = draw(st.integers(0, len(cols) - 1))
            cols[j] = draw(st.sampled_from(["nan", "inf", "-1", "0", "abc", "", "1e999", "[/x]", "99999999999999"]))
            lines[i] = "  ".join(cols)
        if draw(st.booleans()):
            lines = lines[: draw(st.integers(0, len(lines)))]
        body = "\n".join(lines) + "\n"
        extra = draw(st.sampled_from([[], ["--system", "hgx-h100"], ["--system", "[/x]"], ["--collective", "nope"],
                                      ["--collective", "all_reduce"], ["--fabric", "hgx-h100"]]))
        return kind, body, lambda f: ["calibrate", f, "--out", f + ".overlay.yaml", *extra]
    if kind == "results-db":
        body = draw(st.sampled_from(["", "not a database\n", "SQLite format 3\x00" + "x" * 200, "a,b\n1,2\n"]))
        cmd = draw(st.sampled_from([["results", "list", "--db", "{f}"], ["results", "show", "abc", "--db", "{f}"],
                                    ["plan", "--model", "llama3-8b", "--system", "hgx-h100", "--gpus", "8", "--db",
                                     "{f}"]]))
        return kind, body, lambda f: [a.replace("{f}", f) for a in cmd]
    scalar = draw(st.sampled_from(["42\n", "- a\n- b\n", "", "~\n", "'just text'\n", "a: [\n", "\t\x01\n",
                                   "a: &x [*x]\n", "[" * 200 + "]" * 200 + "\n"]))
    cmd = draw(st.sampled_from([["estimate", "{f}"], ["power", "{f}"], ["sweep", "{f}", "--workers", "1"],
                                ["estimate", "--model", "{f}", "--system", "hgx-h100", "--gpus", "8"],
                                ["catalog", "list", "--catalog", "{f}"], ["power", "hgx-h100x2", "--defaults", "{f}"],
                                ["fabric", "matrix", "--system", "hgx-h100", "--domains", "2", "--matrix", "{f}"],
                                ["schedule", "replay", "{f}", "--domains", "2", "--no-store"]]))
    return kind, scalar, lambda f: [a.replace("{f}", f) for a in cmd]


SUFFIX = {"matrix-csv": ".csv", "validation": ".csv", "nccl-log": ".log", "results-db": ".db"}


@settings(FUZZ, max_examples=150)
@given(case=user_file_case())
def test_user_files_keep_the_exit_code_contract(tmp_path, case):
    kind, body, argv_of = case
    f = tmp_path / f"user-{next(COUNT)}{SUFFIX.get(kind, '.yaml')}"
    f.write_text(body, encoding="utf-8")
    _check(argv_of(str(f)))


@pytest.mark.parametrize("argv", [
    ["estimate", "--model", "llama3-8b", "--system", "hgx-h100", "--gpus", "8"],
    ["collective", "all_reduce", "--system", "hgx-h100", "--sizes", "1K:1M"],
])
def test_the_checker_accepts_a_valid_run(argv):
    """The contract check is not vacuous: a valid run exits 0 (and a bad one 2, below)."""
    assert _check(argv) == 0
    assert _check([*argv, "--gpus", "nan"]) == 2


# ------------------------------------------------------------------------------------------ regressions
# Each case below was found by the fuzz tests above and exited 1 ("internal error") before its fix.
@pytest.mark.parametrize("body, argv, word", [
    # design file with a non-text fabric: TypeError in the unknown-name suggestion
    ('"system": "hgx-h100"\n"domains": 2\n"fabric": true\n', ["power", "{f}"], "fabric"),
    ('system: hgx-h100\nfabric: [a, b]\n', ["compare", "{f}", "--no-plan"], "fabric"),
    # an nccl-tests log of one rank: the model predicts 0 s, log(0) broke the least-squares fit
    (NCCL_LOG.replace("".join(f"#  Rank  {i} Group  0 Pid  23456 on gpu-node-3 device  {i} [0x18] NVIDIA H100 80GB "
                              "HBM3\n" for i in range(1, 8)), ""),
     ["calibrate", "{f}", "--out", "{f}.overlay.yaml"], "rank"),
])
def test_fuzz_regressions_in_user_files(tmp_path, body, argv, word):
    f = tmp_path / "case.yaml"
    f.write_text(body, encoding="utf-8")
    code, _, err = _run([a.replace("{f}", str(f)) for a in argv])
    assert code == 2, err
    assert word in err and "Traceback" not in err


@pytest.mark.parametrize("old, new", [("-1    12.10", "inf    12.10"),  # root inf: OverflowError in int()
                                      ("699.00", "nan")])  # in-place time NaN
def test_fuzz_regression_non_finite_log_values_are_not_measurements(tmp_path, old, new):
    """A NaN/inf number in an nccl-tests row makes the row unreadable, like any other non-number."""
    f = tmp_path / "nan.log"
    f.write_text(NCCL_LOG.replace(old, new), encoding="utf-8")
    assert _check(["calibrate", str(f), "--out", str(tmp_path / "cal.yaml")]) == 0

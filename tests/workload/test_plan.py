from __future__ import annotations

import pytest

from clustertwin.errors import InputError
from clustertwin.workload import ModelSpec, check_plan, get_model, load_models, make_plan


def test_dp_derived_and_product_checked():
    p = make_plan(gpus=1024, tp=8, pp=8, global_batch=1536)
    assert p.dp == 16 and p.num_gpus == 1024 and p.sequence_parallel
    with pytest.raises(InputError, match="not divisible by tp\\*pp\\*cp"):
        make_plan(gpus=100, tp=8, pp=8)
    with pytest.raises(InputError, match="multiply to"):
        make_plan(gpus=64, tp=8, pp=2, dp=2)


@pytest.mark.parametrize(
    "kw,msg",
    [
        (dict(gpus=64, tp=64, global_batch=64), "heads"),
        (dict(gpus=64, tp=8, pp=8, vpp=5, global_batch=64), "layers"),
        (dict(gpus=64, tp=8, global_batch=12, micro_batch=1), "global batch"),
    ],
)
def test_plan_problems_name_the_degree(kw, msg):
    with pytest.raises(InputError, match=msg):
        check_plan(get_model("gpt3-175b"), make_plan(**kw))


def test_moe_expert_divisibility():
    m = get_model("mixtral-8x7b")
    with pytest.raises(InputError, match="experts"):
        check_plan(m, make_plan(gpus=48, tp=1, ep=3, global_batch=48))
    check_plan(m, make_plan(gpus=64, tp=1, ep=8, global_batch=64))
    with pytest.raises(InputError, match="dense model"):
        check_plan(get_model("llama3-8b"), make_plan(gpus=8, ep=2, global_batch=8))


def test_bad_names():
    with pytest.raises(InputError):
        make_plan(gpus=8, recompute="fulll")
    with pytest.raises(InputError):
        make_plan(gpus=8, dtype="fp64")
    with pytest.raises(InputError, match="did you mean"):
        get_model("llama3-7b")


def test_custom_model_yaml(tmp_path):
    f = tmp_path / "m.yaml"
    f.write_text("models:\n  tiny:\n    num_layers: 2\n    hidden_size: 64\n    num_attention_heads: 4\n    vocab_size: 100\n")
    m = load_models(f)["tiny"]
    assert isinstance(m, ModelSpec) and m.ffn_hidden_size == 256 and m.num_kv_heads == 4
    f.write_text("models:\n  tiny:\n    num_layerz: 2\n")
    with pytest.raises(InputError, match="unknown field"):
        load_models(f)


def test_zoo_ids_present():
    for mid in ("gpt3-175b", "llama3-8b", "llama3-70b", "llama3-405b", "deepseek-v3", "mixtral-8x7b",
                "llama2-7b", "llama2-13b", "llama2-70b", "qwen3-30b-a3b", "megatron-1t", "megatron-1.7b"):
        assert get_model(mid).source

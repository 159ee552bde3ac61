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


def test_embedding_and_loss_count_as_layer_slots():
    """Megatron's split may count embedding and loss as one slot each: pp*vpp up to L + 2 when it divides it
    (Qwen3-235B, 94 layers on pp 32 x vpp 3 = 96 chunks of one slot; NVIDIA's 405B pp 16 x vpp 8)."""
    import numpy as np

    from clustertwin.catalog import load_catalog
    from clustertwin.sim.analytical import estimate_batch

    m = ModelSpec(id="l94", num_layers=94, hidden_size=1024, num_attention_heads=8, vocab_size=1000)
    check_plan(m, make_plan(gpus=96, pp=32, vpp=3, global_batch=96))
    with pytest.raises(InputError, match="layer slots"):  # 95 chunks: neither L nor L + 2 divide
        check_plan(m, make_plan(gpus=95, pp=19, vpp=5, global_batch=95))
    with pytest.raises(InputError, match="more than"):  # 98 > 94 + 2
        check_plan(m, make_plan(gpus=98, pp=49, vpp=2, global_batch=98, uneven_pipeline=True))
    cat = load_catalog()
    out = estimate_batch(m, cat.system("hgx-h100"), cat.fabric("ib-ndr-400g"),
                         {"pp": np.array([32, 19]), "vpp": np.array([3, 5]), "dp": 1, "micro_batch": 1},
                         global_batch=96, seq_len=2048)
    assert out["valid"].tolist() == [True, False]

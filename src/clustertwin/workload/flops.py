"""FLOP counts of transformer training (2 FLOPs per multiply-add).

Per-token forward FLOPs by block follow MODELLING.md §1.1 (Megatron-LM ``num_floating_point_operations``
and Megatron-Bridge ``flop_utils``): QKV 2h(ad+2gd), output 2adh, attention core 4sad (non-causal count;
``causal=True`` halves it), MLP 4hf (GELU) or 6hf (SwiGLU), MoE 6h f_e k + 6h f_sh + 2hE (router), logits
2hV. MLA: Q 2r_q(h + a(d_nope+d_rope)), KV 2r_kv(h + a(d_nope+d_v)) + 2h d_rope, core 2sa(d_nope+d_rope)
+ 2sa d_v, O 2a d_v h.

Training = 3 x forward (fprop, dgrad, wgrad). Full recomputation adds one forward of every transformer
layer (not the logits): for GPT this gives Narayanan et al. (SC'21) eq. (3),
96 B s L h^2 (1 + s/6h + V/16Lh); without recompute 72 B s L h^2 (1 + s/6h + V/12Lh). Selective
recomputation adds one forward of the attention core.
"""

from __future__ import annotations

from .. import xp as np  # numpy, or plain numbers for one plan (clustertwin/xp.py)
from .model import ModelSpec


def forward_flops_per_token(model: ModelSpec, seq_len: int, *, causal: bool = False) -> dict[str, float]:
    """Forward FLOPs per token of the whole model, by block (summed over layers). A new dict per call;
    the numbers are computed once per (model, sequence length, causal) (ModelSpec is frozen)."""
    return dict(_per_token(model, seq_len, causal)[1])


def _per_token(model: ModelSpec, seq_len, causal: bool) -> tuple:
    """The cache entry: (model, flops by block, their sum, the sum without the logits)."""
    key = (id(model), float(seq_len), bool(causal))
    hit = _PER_TOKEN.get(key)
    if hit is None or hit[0] is not model:
        if len(_PER_TOKEN) >= 4096:
            _PER_TOKEN.clear()
        f = _forward_flops_per_token(model, seq_len, causal=causal)
        hit = _PER_TOKEN[key] = (model, f, sum(f.values()), sum(v for k, v in f.items() if k != "logits"))
    return hit


# (id(model), seq_len, causal) -> (model, flops by block, total, layers); the entry keeps the model alive,
# so its id is not reused while cached
_PER_TOKEN: dict[tuple, tuple] = {}


def forward_flops_total(model: ModelSpec, seq_len: int, *, causal: bool = False) -> float:
    """``sum(forward_flops_per_token(...).values())``: forward FLOPs per token of the whole model."""
    return _per_token(model, seq_len, causal)[2]


def _forward_flops_per_token(model: ModelSpec, seq_len: int, *, causal: bool = False) -> dict[str, float]:
    h, a, g, d = model.hidden_size, model.num_attention_heads, model.num_kv_heads, model.head_dim
    L, V, s = model.num_layers, model.vocab_size, float(seq_len)
    core_scale = 0.5 if causal else 1.0
    if model.is_mla:
        dn, dr, dv = model.qk_nope_head_dim, model.qk_rope_head_dim, model.v_head_dim
        rq, rkv = model.q_lora_rank, model.kv_lora_rank
        q = 2.0 * rq * (h + a * (dn + dr)) if rq else 2.0 * h * a * (dn + dr)
        kv = 2.0 * rkv * (h + a * (dn + dv)) + 2.0 * h * dr
        qkv = q + kv
        core = (2.0 * s * a * (dn + dr) + 2.0 * s * a * dv) * core_scale
        out = 2.0 * a * dv * h
    else:
        qkv = 2.0 * h * (a * d + 2 * g * d)
        core = 4.0 * s * a * d * core_scale
        out = 2.0 * a * d * h
    mats = 3 if model.swiglu else 2
    n_moe = model.num_moe_layers
    n_dense = L - n_moe
    mlp = n_dense * 2.0 * mats * h * model.ffn_hidden_size
    experts = shared = router = 0.0
    if model.is_moe:
        fe = model.moe_ffn_hidden_size
        experts = n_moe * 2.0 * mats * h * fe * model.moe_topk
        shared = n_moe * 2.0 * mats * h * fe * model.num_shared_experts
        router = n_moe * 2.0 * h * model.num_experts
    return {
        "qkv": L * qkv,
        "attn_core": L * core,
        "attn_out": L * out,
        "mlp": mlp,
        "moe_experts": experts,
        "moe_shared": shared,
        "router": router,
        "logits": 2.0 * h * V * (1 + model.mtp_depth),
    }


def layer_forward_flops_per_token(model: ModelSpec, seq_len: int, *, causal: bool = False) -> float:
    """Forward FLOPs per token of all transformer layers (everything but the logits)."""
    return _per_token(model, seq_len, causal)[3]


def model_flops_per_step(model: ModelSpec, seq_len: int, global_batch, *, causal: bool = False):
    """Model FLOPs of one iteration: 3 x forward x tokens (no recompute). Arrays broadcast."""
    per_token = _per_token(model, seq_len, causal)[2]
    return 3.0 * per_token * np.asarray(global_batch, dtype=float) * seq_len


def hardware_flops_per_step(model: ModelSpec, seq_len: int, global_batch, recompute_code, *, causal: bool = False):
    """Model FLOPs plus the recomputed forward: full (code 2) = every layer, selective (1) = attention core."""
    _, f, _, layers = _per_token(model, seq_len, causal)
    rc = np.asarray(recompute_code)
    extra = np.where(rc == 2, layers, np.where(rc == 1, f["attn_core"], 0.0))
    tokens = np.asarray(global_batch, dtype=float) * seq_len
    return model_flops_per_step(model, seq_len, global_batch, causal=causal) + extra * tokens


def narayanan_flops(B: float, s: float, L: float, h: float, V: float, *, recompute: bool) -> float:
    """Narayanan et al. SC'21 eq. (3) (recompute) or the 72-form (no recompute), for GPT-style models."""
    if recompute:
        return 96.0 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h))
    return 72.0 * B * s * L * h * h * (1 + s / (6 * h) + V / (12 * L * h))

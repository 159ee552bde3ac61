"""Memory per GPU of one training configuration (bytes). Array-friendly: every plan degree may be a
numpy array; the model is scalar.

Model states (MODELLING.md §2.1, Megatron distributed-optimizer table): BF16 weights 2 B/param, FP32 main
gradients 4 B/param, Adam FP32 master + m + v 12 B/param. ZeRO 1 (Megatron distributed optimizer)
shards the 12 optimizer bytes over the data-parallel ranks (6 + 12/d), ZeRO 2 also the gradients
(2 + 16/d), ZeRO 3 / FSDP everything (18/d) plus the transient unsharded BF16 weights of two layers.
Dense parameters shard over d = dp*cp, expert parameters over the expert-data-parallel size
tp*dp*cp/(ep*etp).

Activations per layer (Korthikanti et al. 2022, Table 2; MODELLING.md §2.2), with s the local sequence
s/cp and 2-byte activations: attention 11 sbh + 5 a s^2 b, MLP 19 sbh, two norms 4 sbh. Generalised
per term: QKV input 2sbh, Q/K/V 2sb(ad + 2gd), attention output 2sb ad, (unfused softmax + dropout
5 a s^2 b), dropout masks sbh per dropout, MLP input 2sbh, MLP hidden 4sbf (GELU: up + activation) or
6sbf (SwiGLU), norms 4sbh. Without sequence parallelism the norm inputs, dropout masks and the inputs of
the QKV and MLP GEMMs (10 sbh with dropout) are replicated on the TP ranks, everything else is split.
FlashAttention and selective recomputation drop the 5as^2b term; full recomputation keeps only the
layer input (2sbh, /t with SP) plus one layer's working set.

Pipeline in-flight activations follow the schedules (MODELLING.md §2.3, §4): 1F1B (PipeDream-Flush)
holds min(p - i, m) micro-batches of its own layers on stage i; Megatron's interleaved schedule
(``schedules.py get_pp_rank_microbatches``) runs ``(p - i - 1)*2 + (v - 1)*G`` warm-up forwards of
model chunks with L/(p v) layers, G = ``microbatch_group_size_per_vp_stage`` (default p), so at its
peak stage i holds ``min((p - i - 1)*2 + (v - 1)*G + 1, m v)`` chunk-micro-batches. With G = p stage 0
holds L(1 + (p - 1)/(p v)) layers' worth (Korthikanti et al. §4.2.3); a smaller G (Llama 3's
"flexible N", arXiv:2407.21783 §3.3.2) holds fewer. The peak is the larger of the first stage
(embedding, most warm-up) and the last stage (fewest in flight, plus the FP32 logits); when L + 2
divides into p v stages the first and last stage hold one layer fewer (embedding / loss counted as
layers: Megatron ``account_for_embedding/loss_in_pipeline_split``, Llama 3 §3.3.2).
"""

from __future__ import annotations

from .. import xp as np  # numpy, or plain numbers for one plan (clustertwin/xp.py)
from .model import ModelSpec
from .pipeline import stage_layout
from .plan import WIDE_DTYPES
from .stacks import NVFP4_BF16_LAYER_SHARE  # layers an NVFP4 recipe with a BF16 tail keeps in BF16

ACT_BYTES = 2.0
WEIGHT_BYTES = 2.0
GRAD_BYTES = 4.0
OPT_BYTES = 12.0


def stage_params(model: ModelSpec, tp, pp, ep, etp=1, vpp=1, schedule=0, dual_rank: str | None = None):
    """Parameters held by one GPU of the most-loaded pipeline rank: (dense, expert), arrays.

    The rank holds the most layers of the pipeline layout (``workload.pipeline.stage_layout``: L/pp when
    even, whole layers otherwise); stage 0 holds the embedding V*h/tp, the last stage the output layer
    (both on one stage when pp = 1 and the embeddings are untied). DualPipe (``schedule`` code 2) keeps
    two stages per rank (stage i and stage p-1-i: 2x parameters, DeepSeek-V3 Table 2), the first rank
    both the embedding and the output layer.

    ``dual_rank`` (the memory model's DualPipe ranks; None = the description above, which the DP collectives
    use): ``"edge"`` = rank 0, stages 0 and p-1: the first and the last rank's layers, the embedding, the
    output layer and the MTP modules (their transformer layers and 2h x h projections; embedding and output
    head shared with the main model: DeepSeek-V3 Sec. 3.2.3); ``"middle"`` = a rank holding two stages of
    the most layers and neither end.
    """
    S = _PLAIN
    if (type(tp) in S and type(pp) in S and type(ep) in S and type(etp) in S and type(vpp) in S
            and type(schedule) in S and np.in_scalar_mode()):
        # one plan (xp.scalar_mode): computed once per (model, degrees); the DP collectives and the memory
        # model of one estimate ask for the same stage
        key = (id(model), float(tp), float(pp), float(ep), float(etp), float(vpp), int(schedule), dual_rank)
        return np.memo(_STAGE_PARAMS, key, model, _stage_params, model, tp, pp, ep, etp, vpp, schedule, dual_rank)
    # many plans: computed once per distinct (tp, pp, ep, etp, vpp, schedule) among them (xp.per_distinct)
    return np.per_distinct(lambda t, p, e, et, v, sc: _stage_params(model, t, p, e, et, v, sc, dual_rank),
                           (tp, pp, ep, etp, vpp, schedule))


# scalar stage parameters already computed: (id(model), tp, pp, ep, etp, vpp, schedule, dual_rank) ->
# (model, None, (dense, expert)) (xp.memo: the entry keeps the model alive, so its id is not reused)
_STAGE_PARAMS: dict[tuple, tuple] = {}
_PLAIN = np._S  # plain numbers (clustertwin/xp.py)


def _stage_params(model: ModelSpec, tp, pp, ep, etp, vpp, schedule, dual_rank):
    tp = np.asarray(tp, dtype=float)
    pp = np.asarray(pp, dtype=float)
    ep = np.asarray(ep, dtype=float)
    etp = np.asarray(etp, dtype=float)
    dual = np.asarray(schedule) == 2
    L = model.num_layers
    h, V = model.hidden_size, model.vocab_size
    first, last, most = stage_layout(model, pp, vpp)
    n_layers = np.where(dual, 2.0, 1.0) * most  # decoder layers on the rank
    mtp = float(getattr(model, "mtp_depth", 0) or 0)
    if dual_rank == "edge":
        n_layers = np.where(dual, first + last + mtp, n_layers)
    elif dual_rank == "middle":
        n_layers = np.where(dual & (pp > 2), 2.0 * most, n_layers)
    per_layer_attn = model.attention_params() / tp
    n_dense_layers = L - model.num_moe_layers
    dense = n_layers * per_layer_attn + (n_layers * n_dense_layers / L) * model.dense_mlp_params() / tp
    expert = np.zeros_like(dense)
    if model.is_moe:
        moe_layers = n_layers * model.num_moe_layers / L
        dense = dense + moe_layers * (model.num_shared_experts * model.expert_params() / tp + h * model.num_experts)
        expert = moe_layers * (model.num_experts / ep) * model.expert_params() / etp
    emb = V * h / tp
    extra = np.where(((pp == 1) | dual) & (not model.tied_embeddings), 2.0 * emb, emb)
    if dual_rank == "edge":
        extra = extra + np.where(dual, mtp * 2.0 * h * h / tp, 0.0)
    elif dual_rank == "middle":
        extra = np.where(dual & (pp > 2), 0.0, extra)
    return dense + extra, expert


def routed_copies(model: ModelSpec) -> float:
    """Routed expert copies per token that the most-loaded EP rank holds activations for: top-k times the
    run's load imbalance (``ModelSpec.moe_load_imbalance``, 1 under forced balance; sim/components/moe.py
    "Routing"), as its expert buffers (dispatched tokens, fc1 / activation outputs) are that much larger."""
    return float(model.moe_topk) * float(getattr(model, "moe_load_imbalance", 1.0) or 1.0)


def activation_bytes_per_layer(model: ModelSpec, seq_len, micro_batch, tp, cp, sp, recompute_code, flash,
                               fp8: bool = False):
    """Korthikanti Table 2 generalised (see module docstring); bytes per layer per micro-batch.

    ``fp8``: the inputs saved for the linear layers' weight gradients are kept in FP8 (1 byte): QKV and
    MLP inputs, attention output, MLP activation output (MODELLING.md §2.4, Megatron MoE README).
    """
    S = _PLAIN
    if (type(seq_len) in S and type(micro_batch) in S and type(tp) in S and type(cp) in S and type(sp) in S
            and type(recompute_code) in S and type(flash) in S and np.in_scalar_mode()):
        # one plan (xp.scalar_mode): a pure function of these values (each is turned into a float or a bool
        # first), computed once per (model, values), as ``stage_params``
        key = (id(model), float(seq_len), float(micro_batch), float(tp), float(cp), bool(sp), float(recompute_code),
               bool(flash), bool(fp8))
        return np.memo(_ACT_BYTES, key, model, _activation_bytes, model, seq_len, micro_batch, tp, cp, sp,
                         recompute_code, flash, fp8)
    return _activation_bytes(model, seq_len, micro_batch, tp, cp, sp, recompute_code, flash, fp8)


# scalar activation bytes already computed: (id(model), seq_len, micro_batch, tp, cp, sp, recompute, flash,
# fp8) -> (model, None, (stored, working)) (xp.memo)
_ACT_BYTES: dict[tuple, tuple] = {}


def _activation_bytes(model: ModelSpec, seq_len, micro_batch, tp, cp, sp, recompute_code, flash, fp8):
    """``activation_bytes_per_layer`` computed (no memo)."""
    tp = np.asarray(tp, dtype=float)
    cp = np.asarray(cp, dtype=float)
    b = np.asarray(micro_batch, dtype=float)
    s = np.asarray(seq_len, dtype=float) / cp
    sp = np.asarray(sp, dtype=bool)
    rc = np.asarray(recompute_code)
    flash = np.asarray(flash, dtype=bool)
    h, a, g = model.hidden_size, model.num_attention_heads, model.num_kv_heads
    dq, dv = model.qk_head_dim, model.v_dim
    drop = 1.0 if model.dropout else 0.0
    sbh = s * b * h
    # elements per token / h, replicated on TP ranks unless SP
    gemm_in = 1.0 if fp8 else 2.0  # bytes per element of a saved GEMM input
    repl = 4.0 + 2.0 * drop + 2.0 * gemm_in  # norms, dropout masks, QKV input, MLP input
    if model.is_mla:
        qkv_out = (a * dq + a * dq + a * dv)  # after up-projection
    else:
        qkv_out = a * dq + 2 * g * dq
    f_eff = float(model.ffn_hidden_size)
    if model.is_moe:
        frac_moe = model.num_moe_layers / model.num_layers
        k_hot = routed_copies(model)  # the most-loaded EP rank's routed copies per token
        moe_f = model.moe_ffn_hidden_size * (k_hot + model.num_shared_experts)
        f_eff = (1 - frac_moe) * model.ffn_hidden_size + frac_moe * (moe_f + k_hot * h / 3.0)
    # fc1 output (2 B x width) + activation output (saved fc2 input)
    mlp_hidden = ((4.0 if model.swiglu else 2.0) + gemm_in) * f_eff + glu_clamp_bytes_per_token(model)
    split = 2.0 * qkv_out + gemm_in * a * dv + mlp_hidden  # bytes per token (x b s)
    # Korthikanti's GELU/MHA case: split = 2*3h + 2h + 16h = 24h. Check in tests.
    scores = 5.0 * a * s * b * s  # softmax 2 + dropout mask 1 + dropout output 2 (bytes)
    keep_scores = np.logical_not(flash) & (rc == 0)
    repl_bytes = repl * sbh
    split_bytes = split * s * b
    per_layer = np.where(sp, (repl_bytes + split_bytes) / tp, repl_bytes + split_bytes / tp)
    per_layer = per_layer + np.where(keep_scores, scores / tp, 0.0)
    full = np.where(sp, 2.0 * sbh / tp, 2.0 * sbh)
    return np.where(rc == 2, full, per_layer), per_layer + np.where(np.logical_not(flash), scores / tp, 0.0)


def backward_transient_bytes(model: ModelSpec, seq_len, micro_batch, tp, cp, elem_bytes: float = 2.0):
    """Activation gradients one layer's backward holds beside the saved activations, bytes per micro-batch
    (arrays). The MLP backward keeps the gradient of the activation output (width w) until the gated
    activation's backward has produced the gradient of the fc1 output (2 w gated, w otherwise), and that one
    until fc1's backward has produced the gradient of its input (h per routed copy): per token and copy
    max((1 + g) w, g w + h) elements, g = 2 gated / 1 not, in the activation dtype (``elem_bytes``), split
    over TP like the hidden. Dense MLP: one copy; MoE: top-k routed + shared experts (the permuted tokens'
    gradient is the h term). The largest layer of the model sets it. Counted in every recompute mode (the first
    layer of the backward runs it with all the stored activations still held); Korthikanti et al.'s Table 2
    counts saved tensors only."""
    S = _PLAIN
    if (type(seq_len) in S and type(micro_batch) in S and type(tp) in S and type(cp) in S and type(elem_bytes) in S
            and np.in_scalar_mode()):
        # one plan (xp.scalar_mode): once per (model, values), as ``activation_bytes_per_layer``
        key = (id(model), float(seq_len), float(micro_batch), float(tp), float(cp), float(elem_bytes))
        return np.memo(_TRANSIENT, key, model, _transient_bytes, model, seq_len, micro_batch, tp, cp, elem_bytes)
    return _transient_bytes(model, seq_len, micro_batch, tp, cp, elem_bytes)


# scalar backward transients already computed: (id(model), seq_len, micro_batch, tp, cp, elem_bytes) ->
# (model, None, bytes) (xp.memo)
_TRANSIENT: dict[tuple, tuple] = {}


def _transient_bytes(model: ModelSpec, seq_len, micro_batch, tp, cp, elem_bytes):
    """``backward_transient_bytes`` computed (no memo)."""
    tok = np.asarray(seq_len, dtype=float) / np.asarray(cp, dtype=float) * np.asarray(micro_batch, dtype=float)
    g = 2.0 if model.swiglu else 1.0
    h = float(model.hidden_size)

    def per_copy(w: float) -> float:
        return max((1.0 + g) * w, g * w + h)

    per_tok = per_copy(float(model.ffn_hidden_size)) if model.num_moe_layers < model.num_layers else 0.0
    if model.is_moe:
        per_tok = max(per_tok, (routed_copies(model) + model.num_shared_experts) * per_copy(float(model.moe_ffn_hidden_size)))
    return float(elem_bytes) * per_tok * tok / np.asarray(tp, dtype=float)


def cp_ring_backward_bytes(model: ModelSpec, seq_len, micro_batch, tp, cp, elem_bytes: float = 2.0,
                           repeat_kv: bool = False):
    """Buffers one layer's attention backward holds under PyTorch's ``context_parallel`` (stack ``cp_attention:
    torch-ring``), bytes per micro-batch (arrays; 0 where cp = 1). From
    ``torch/distributed/tensor/experimental/_attention.py`` ``_templated_ring_attention_backward`` with the
    default ``_ContextParallelOptions`` (``convert_to_f32=True``, ``rotate_method=ALL_GATHER``), the eager op
    sequence: the K,V all-gather output of ``_AllGatherRotater`` (c x the local K,V, activation dtype, held
    through the loop), the FP32 ``grad_query`` accumulator and the copy ``_partial_update``'s ``torch.cat`` makes
    of it (2 x 4 B x q), three FP32 dK,dV buffers (the received one ``grad_key``/``grad_value`` view, the
    ``torch.cat`` sent by ``_AllToAllRotater`` and the one being received: 3 x 4 B x (k + v)) and one step's
    SDPA-backward gradients (activation dtype, q + k + v). q, k, v = local tokens (s/cp x b) x heads x head
    width on the TP rank (KV heads at least one per rank). Forward-only buffers (the same K,V all-gather, the
    FP32 output/LSE merger) are smaller and freed when the layer's forward returns: not counted. ``repeat_kv``: the
    model expanded K,V to one head per query head before SDPA (stack ``sdpa_repeat_kv``, torchtitan), so k, v
    count the query heads."""
    cp_f = np.asarray(cp, dtype=float)
    tp_f = np.asarray(tp, dtype=float)
    tok = np.asarray(seq_len, dtype=float) / cp_f * np.asarray(micro_batch, dtype=float)
    a, g = float(model.num_attention_heads), float(model.num_kv_heads)
    dq, dv = float(model.qk_head_dim), float(model.v_dim)
    q = tok * a * dq / tp_f
    kv_heads = a if (model.is_mla or repeat_kv) else g  # MLA: K,V after the up-projection, one per query head
    kv = tok * np.maximum(kv_heads / tp_f, 1.0) * (dq + dv)  # K + V elements
    e = float(elem_bytes)
    out = cp_f * kv * e + 2.0 * 4.0 * q + 3.0 * 4.0 * kv + e * (q + kv)
    return np.where(cp_f > 1, out, 0.0)


def glu_clamp_bytes_per_token(model: ModelSpec) -> float:
    """Bytes per token and layer (averaged over the layers) that a clamped gated activation (GPT-OSS,
    ``ModelSpec.glu_clamp``) keeps beyond a plain SwiGLU: Megatron-Core's ``weighted_bias_quick_geglu_impl``
    (megatron/core/fusions/fused_bias_geglu.py) clamps the two halves of the routed experts' fc1 output in
    eager PyTorch (``x_glu.clamp(max=...)``, ``x_linear.clamp(-..., ...)``, saved for backward: their input,
    i.e. the whole fc1 output) and concatenates them as the input the fused activation saves, so the layer
    keeps both the fc1 output and its clamped copy: 2 B x 2 x top-k x expert width per token. ``moe_act``
    selective recompute checkpoints the whole activation (clamp included) and keeps only the fc1 output."""
    if not (getattr(model, "glu_clamp", False) and model.is_moe):
        return 0.0
    frac = model.num_moe_layers / model.num_layers
    return frac * 2.0 * 2.0 * routed_copies(model) * model.moe_ffn_hidden_size


def moe_selective_bytes_per_layer(model: ModelSpec, seq_len, micro_batch, tp, cp, sp, fp8: bool = False):
    """Bytes per layer and micro-batch that Megatron-Core's fine-grained selective recompute of a MoE model
    (``recompute_modules=["layernorm", "moe_act"]``, + ``"mla_up_proj"`` with MLA) does not keep, averaged
    over the layers like ``activation_bytes_per_layer``: the pre-MLP norm output (a separate TENorm in the
    MoE layer spec, as the router reads it; counted there as the MLP input), with MLA also the input norm's
    output (TENorm before the separate q/kv down-projections), the routed experts' activation output (the
    saved fc2 input, top-k x expert width) and the MLA up-projections (``mla_up_proj_bytes_per_layer``).
    transformer_config.py ``recompute_modules``: "layernorm: recompute the input_layernorm and
    pre_mlp_layernorm (when they are not fused with the linear)", "moe_act: recompute the MoE MLP activation
    function", "mla_up_proj: recompute the MLA up projection and RoPE applying parts"."""
    tp_f = np.asarray(tp, dtype=float)
    tok = np.asarray(seq_len, dtype=float) / np.asarray(cp, dtype=float) * np.asarray(micro_batch, dtype=float)
    sp = np.asarray(sp, dtype=bool)
    gemm_in = 1.0 if fp8 else 2.0
    h = model.hidden_size
    frac = model.num_moe_layers / model.num_layers
    norms = (1.0 + frac if model.is_mla else frac) * gemm_in * h * tok
    norms = np.where(sp, norms / tp_f, norms)
    act = (frac * gemm_in * routed_copies(model) * model.moe_ffn_hidden_size + glu_clamp_bytes_per_token(model)) * tok / tp_f
    out = norms + act
    if model.is_mla:
        out = out + mla_up_proj_bytes_per_layer(model, seq_len, micro_batch, tp, cp)
    return out


def mla_up_proj_bytes_per_layer(model: ModelSpec, seq_len, micro_batch, tp, cp):
    """Bytes one MLA layer saves per micro-batch by recomputing its up-projections (Megatron-Core
    ``recompute_modules=["mla_up_proj"]``, transformer_config.py: "recompute the MLA up projection and RoPE
    applying parts"): the BF16 up-projected q, k, v that ``activation_bytes_per_layer`` counts (split over
    TP) less the BF16 latents c_q, c_kv and the decoupled RoPE key kept to recompute them (replicated)."""
    tok = np.asarray(seq_len, dtype=float) / np.asarray(cp, dtype=float) * np.asarray(micro_batch, dtype=float)
    a, dq, dv = model.num_attention_heads, model.qk_head_dim, model.v_dim
    up = 2.0 * (2.0 * a * dq + a * dv) * tok / np.asarray(tp, dtype=float)
    latents = 2.0 * (model.q_lora_rank + model.kv_lora_rank + model.qk_rope_head_dim) * tok
    return np.maximum(up - latents, 0.0)




def nvfp4_layers(num_layers: int) -> int:
    """Decoder layers whose linears an NVFP4 training recipe runs in NVFP4: the leading 85 % (Mishra et al.,
    'Pretraining LLMs with NVFP4', arXiv:2509.25149 Sec. 4; torchtitan nvfp4.md: layers 0-26 of Llama 3 8B's
    32 and 0-29 of Qwen3 8B's 36 are NVFP4, the rest and the LM head BF16)."""
    return int(np.floor((1.0 - NVFP4_BF16_LAYER_SHARE) * num_layers + 1e-9))


def _rank_tokens(seq_len, micro_batch, tp, cp, sp):
    """(tp, tokens of one micro-batch on a CP rank, sequence parallelism in effect) as arrays: the inputs
    every per-layer activation count starts from."""
    tp = np.asarray(tp, dtype=float)
    tok = np.asarray(seq_len, dtype=float) / np.asarray(cp, dtype=float) * np.asarray(micro_batch, dtype=float)
    return tp, tok, np.asarray(sp, dtype=bool) & (tp > 1)


def op_sac_bytes_per_layer(model: ModelSpec, seq_len, micro_batch, tp, cp, sp, opaque_share=0.0):
    """Bytes one layer keeps per micro-batch under torchtitan's per-op selective AC (``selective_ac_option =
    "op"``), arrays.

    The policy (torchtitan ``_apply_ac_to_transformer_block`` / ``_custom_policy``) wraps each block in a
    checkpoint whose saved set is the block input plus the outputs of the ops in its save list: every odd
    ``aten.mm`` of the block (attention wq, wv; SwiGLU w1 and w2, GELU fc1), the SDPA outputs (output + FP32
    log-sum-exp) and, with TP, the reduce-scatter outputs; everything else is recomputed from them in
    backward. A rowwise-parallel mm (w2) saves its pre-reduce-scatter output: the full local sequence.
    ``opaque_share``: share of the layers whose GEMMs do not dispatch as ``aten.mm`` (torchao's NVFP4
    training op is a raw autograd Function, torchtitan nvfp4.py), so the policy saves none of their outputs
    and those layers keep only their input and the SDPA outputs. torchao's Float8 / MX linears run ``aten.mm``
    on tensor subclasses, so FP8 / MXFP8 layers save what BF16 layers save (in BF16: the mm output dtype).
    MoE layers: the routed experts run ``_grouped_mm`` (not saved), the shared experts as a dense SwiGLU.
    """
    tp, tok, sp = _rank_tokens(seq_len, micro_batch, tp, cp, sp)
    h, a, g = model.hidden_size, model.num_attention_heads, model.num_kv_heads
    dq, dv = model.qk_head_dim, model.v_dim
    seq_split = np.where(sp, tp, 1.0)
    x = 2.0 * h * tok / seq_split  # block input
    sdpa = (2.0 * a * dv + 4.0 * a) * tok / tp  # SDPA output + FP32 log-sum-exp
    attn_mm = 2.0 * (a * dq + g * dv) * tok / tp  # wq, wv outputs (colwise)
    if model.swiglu:
        mlp_width, mlp_h = float(model.ffn_hidden_size), 1.0  # w1 (colwise) + w2 (rowwise, full h)
    else:
        mlp_width, mlp_h = float(model.ffn_hidden_size), 0.0  # fc1 (5th mm); fc2 is the 6th
    if model.is_moe:
        frac_moe = model.num_moe_layers / model.num_layers
        shared_w = float(model.num_shared_experts * model.moe_ffn_hidden_size)
        mlp_width = (1 - frac_moe) * mlp_width + frac_moe * shared_w
        mlp_h = (1 - frac_moe) * mlp_h + frac_moe * (1.0 if model.num_shared_experts and model.swiglu else 0.0)
    mlp_mm = 2.0 * mlp_width * tok / tp + 2.0 * mlp_h * h * tok  # rowwise mm output: whole local sequence
    rs = np.where(sp, 2.0 * 2.0 * h * tok / tp, 0.0)  # attention and MLP reduce-scatter outputs (TP)
    opaque = np.asarray(opaque_share, dtype=float)
    return x + sdpa + rs + (1.0 - opaque) * (attn_mm + mlp_mm)


FP8_TILE = 1.0 + 4.0 / 128.0  # FP8 element + one FP32 scale per 1 x 128 tile (DeepSeek-V3 Sec. 3.3.2)


def hai_llm_bytes_per_layer(model: ModelSpec, seq_len, micro_batch, tp, cp, sp):
    """Bytes one layer keeps per micro-batch in DeepSeek's HAI-LLM (DeepSeek-V3 arXiv:2412.19437 Sec. 3.2.3
    and 3.3.3), arrays.

    Recomputed in backward, so not kept: every RMSNorm output and the MLA up-projections (q, k, v), and the
    SwiGLU outputs. Kept: the two residual-stream inputs of the layer (BF16, the recomputed norms' inputs);
    the MLA latents (c_q, c_kv and the decoupled RoPE key, BF16: inputs of the recomputed norms and
    up-projections); the attention output, which is both the input of the output projection and needed by
    the attention backward, in DeepSeek's 12-bit E5M6 format (1.5 B); the FP32 log-sum-exp; the router's
    FP32 scores; and in FP8 with 1 x 128 tile scales the cached inputs of the other linear layers: the
    tokens dispatched to each of the top-k experts (FP8 dispatch, Sec. 3.3.3) and the shared experts' input,
    and the SwiGLU inputs (2 x width per expert). The gating weight is applied inside the expert, on the
    SwiGLU output before the down-projection (as Megatron-Core's grouped experts do: activation with probs),
    so no expert output is kept for the combine's backward: an ASSUMPTION, the report does not say.
    Non-MLA attention keeps q, k, v (BF16).
    """
    tp, tok, sp = _rank_tokens(seq_len, micro_batch, tp, cp, sp)
    h, a, g = model.hidden_size, model.num_attention_heads, model.num_kv_heads
    dq, dv = model.qk_head_dim, model.v_dim
    resid = 2.0 * 2.0 * h * tok / np.where(sp, tp, 1.0)
    if model.is_mla:
        qkv = 2.0 * (model.q_lora_rank + model.kv_lora_rank + model.qk_rope_head_dim) * tok  # replicated latents
    else:
        qkv = 2.0 * (a * dq + 2.0 * g * dq) * tok / tp
    attn = qkv + (1.5 * a * dv + 4.0 * a) * tok / tp
    dense_mlp = FP8_TILE * (h + 2.0 * model.ffn_hidden_size / tp) * tok
    per = attn + resid
    if model.is_moe:
        k, w, ns = model.moe_topk, model.moe_ffn_hidden_size, model.num_shared_experts
        moe = (4.0 * model.num_experts + 4.0 * k) * tok  # router scores + gating weights (FP32)
        moe = moe + FP8_TILE * (routed_copies(model) * (h + 2.0 * w) + ns * (h + 2.0 * w / tp)) * tok
        frac = model.num_moe_layers / model.num_layers
        return per + (1.0 - frac) * dense_mlp + frac * moe
    return per + dense_mlp


def pipeline_inflight_layers(num_layers: int, pp, vpp, num_micro_batches, microbatch_group=None, *,
                             model: ModelSpec | None = None, schedule=0, dual_rank: str | None = None):
    """Layer-micro-batches of activations held at the schedule's peak on the first and the last pipeline
    stage: ``(first, last)``, arrays (see the module docstring for the schedules).

    Interleaved: the peak is the warm-up forwards plus one, counted chunk by chunk in Megatron's
    schedule table order (groups of G micro-batches, chunk after chunk), so that the first chunk of
    the first stage and the last chunk of the last stage, which hold one layer fewer when the
    embedding / loss take a layer slot, are weighted by how many of their micro-batches are in flight.
    ``microbatch_group`` (Megatron ``microbatch_group_size_per_vp_stage``): 0 / None means p; the
    warm-up formula is only deadlock-free for G >= p (``check_plan`` rejects smaller groups).

    With ``model`` given, a layout that is neither even nor the embedding/loss slot split uses the whole
    layers of ``workload.pipeline.stage_layout`` on the first and the last rank (without it, L/(p v) per
    chunk as before). ``schedule``: ZB-H1 (1) holds what 1F1B holds; DualPipe (2) holds p + 1 micro-batch
    stages where 1F1B holds p (DeepSeek-V3 Table 2), on its two stages. ``dual_rank``
    (DualPipe): "edge" = rank 0 (the first and the last stage, with the MTP modules), "middle" = a rank with
    two stages of the most layers; None = the mean of the first and the last stage.
    """
    S = _PLAIN
    if (type(pp) in S and type(vpp) in S and type(num_micro_batches) in S
            and (microbatch_group is None or type(microbatch_group) in S) and type(schedule) in S
            and np.in_scalar_mode()):
        # one plan (xp.scalar_mode): a pure function of the pipeline shape (every argument is turned into a
        # float first), computed once per (model, shape); distinct layouts share few pipeline shapes
        key = (int(num_layers), id(model), float(pp), float(vpp), float(num_micro_batches),
               None if microbatch_group is None else float(microbatch_group), float(schedule), dual_rank)
        return np.memo(_INFLIGHT, key, model, _inflight_layers, num_layers, pp, vpp, num_micro_batches,
                         microbatch_group, model, schedule, dual_rank)
    # many plans: computed once per distinct pipeline shape among them (xp.per_distinct)
    return np.per_distinct(lambda p, v, m, g, sc: _inflight_layers(num_layers, p, v, m, g, model, sc, dual_rank),
                           (pp, vpp, num_micro_batches, microbatch_group, schedule))


# scalar in-flight layer counts already computed: (num_layers, id(model), pp, vpp, micro-batches, group,
# schedule, dual_rank) -> (model, None, (first, last)) (xp.memo)
_INFLIGHT: dict[tuple, tuple] = {}


def _inflight_layers(num_layers, pp, vpp, num_micro_batches, microbatch_group, model, schedule, dual_rank):
    """``pipeline_inflight_layers`` computed (no memo)."""
    p = np.asarray(pp, dtype=float)
    v = np.asarray(vpp, dtype=float)
    m = np.asarray(num_micro_batches, dtype=float)
    G = np.asarray(0 if microbatch_group is None else microbatch_group, dtype=float)
    G = np.minimum(np.where(G > 0, G, p), np.maximum(m, 1.0))
    L = float(num_layers)
    stages = p * v
    plus2 = np.logical_not(np.isclose(np.mod(L, stages), 0.0)) & np.isclose(np.mod(L + 2.0, stages), 0.0) & (p > 1)
    per_chunk = np.where(plus2, (L + 2.0) / stages, L / stages)  # layer slots per chunk (1F1B: per stage)
    total_chunks = m * v

    def chunk_count(k, c):
        """Forwards of chunk ``c`` among the first ``k`` of the schedule table (groups of G per chunk)."""
        q, r = np.floor_divide(k, G * v), np.mod(k, G * v)
        return np.minimum(q * G + np.clip(r - c * G, 0.0, G), m)

    k_first = np.minimum((p - 1.0) * 2.0 + (v - 1.0) * G + 1.0, total_chunks)
    k_last = np.minimum((v - 1.0) * G + 1.0, total_chunks)
    # (np.needed: False only for one plan that takes the other branch of the np.where; xp.py)
    inter = (p > 1) & (v > 1)
    if np.needed(inter):
        slot = np.needed(plus2)
        inter_first = k_first * per_chunk - np.where(plus2, chunk_count(k_first, 0.0) if slot else 0.0, 0.0)
        inter_last = k_last * per_chunk - np.where(plus2, chunk_count(k_last, v - 1.0) if slot else 0.0, 0.0)
    else:  # one plan without interleaving: the interleaved counts are not taken
        inter_first = inter_last = 0.0
    # 1F1B: stage i holds min(p - i, m) micro-batches of its layers
    f1b_first = np.minimum(p, m) * (per_chunk - np.where(plus2, 1.0, 0.0))
    f1b_last = np.minimum(1.0, m) * (per_chunk - np.where(plus2, 1.0, 0.0))
    if model is not None:
        lay_first, lay_last, lay_most = stage_layout(model, p, v)
        general = np.logical_not(np.isclose(np.mod(L, stages), 0.0)) & np.logical_not(plus2) & (p > 1)
        if np.needed(general):
            # per chunk: the rank's whole layers over its v chunks
            inter_first = np.where(general, k_first * lay_first / v, inter_first)
            inter_last = np.where(general, k_last * lay_last / v, inter_last)
            f1b_first = np.where(general, np.minimum(p, m) * lay_first, f1b_first)
            f1b_last = np.where(general, np.minimum(1.0, m) * lay_last, f1b_last)
        # DualPipe: p + 1 micro-batch stages of the rank's two stages (about the mean stage each)
        dual = (np.asarray(schedule) == 2) & (p > 1)
        if np.needed(dual):
            dual_held = (np.minimum(p, m) + 1.0) * 0.5 * (lay_first + lay_last)
            mtp = float(getattr(model, "mtp_depth", 0) or 0)
            if dual_rank == "edge":
                dual_held = (np.minimum(p, m) + 1.0) * 0.5 * (lay_first + lay_last + mtp)
            elif dual_rank == "middle":
                dual_held = np.where(p > 2, (np.minimum(p, m) + 1.0) * lay_most, dual_held)
            f1b_first = np.where(dual, dual_held, f1b_first)
            f1b_last = np.where(dual, dual_held, f1b_last)
    first = np.where(p > 1, np.where(v > 1, inter_first, f1b_first), L)
    last = np.where(p > 1, np.where(v > 1, inter_last, f1b_last), L)
    return first, last


def memory_per_gpu(model: ModelSpec, *, seq_len, micro_batch, num_micro_batches, tp, pp, dp, cp, ep, etp=1,
                   vpp=1, zero=1, sp=True, recompute_code=0, flash=True, runtime_overhead_bytes=0.0,
                   grad_bytes: float = GRAD_BYTES, fp8: bool = False, microbatch_group=None, stack=None,
                   schedule=0, dtype: str | None = None, offload=0, activation_offload_layers=0):
    """Memory of the most-loaded GPU by component (bytes, arrays).

    ``grad_bytes``: the gradient buffer's element size (Megatron keeps main grads in FP32 unless
    gradients are reduced in BF16, then 2). ``microbatch_group``: micro-batches per virtual stage of
    the interleaved schedule (Megatron ``microbatch_group_size_per_vp_stage``; 0 / None = p).
    Components are those of the binding stage: the first (most activations in flight) or the last
    (fewer in flight, plus the logits), whichever needs more.

    ``stack`` (a SoftwareStack preset; None = Megatron-Core) adds the framework-dependent pieces
    (docs/modelling.md "Framework-dependent memory"): torchtitan's per-op selective AC
    (``selective_recompute`` = half-forward) stores what ``op_sac_bytes_per_layer`` counts; PyTorch FSDP
    shards the FP32 parameters as Adam's master (16 B per sharded parameter); FSDP2 keeps the output unit
    gathered into backward and, with pipeline parallelism, each stage's parameters unsharded from forward to
    backward with unsharded gradients accumulated across micro-batches (reshard_after_forward = not PP);
    ``fp8_activation_cache`` / ``sac_opaque_dtypes`` say what FP8 / NVFP4 linears keep for backward
    (``dtype``: the GEMM dtype; None = the ``fp8`` flag); ``loss_bytes_per_logit`` is what the loss holds per
    logit element at its peak (Megatron's fused vocab-parallel cross-entropy 4 B FP32; torchtitan's eager
    2024 loss 12 B).

    DualPipe (``schedule`` code 2) ranks differ: rank 0 holds the first and the last stage (embedding,
    output layer, loss, MTP), the others two stages of the most layers; the larger of the two is reported.

    Host offload (docs/modelling.md "CPU offload"): ``offload`` code 1 (``optimizer``) keeps Adam's moments in host
    memory; DeepSpeed ZeRO-Offload also the FP32 master weights and the reduced gradient partitions (its
    GPU keeps the 16-bit parameters and the gradient bucket, ``estimate_zero2_model_states_mem_needs``:
    2 B/param), while Megatron's HybridDeviceOptimizer keeps the FP32 main-parameter shard and the DDP gradient
    buffer on the GPU; code 2 (``params``,
    ZeRO-3 / FSDP only) also the parameter shards and their gradients, so the GPU holds only the gathered
    units (``estimate_zero3_model_states_mem_needs`` with offload_param: 4 B x the largest layer).
    ``activation_offload_layers`` N (Megatron-Core ``cpu_offloading_num_layers``, pp 1, no recompute): N
    layers' saved activations go to host memory after their forward; one offloaded layer is back on the GPU
    ahead of its backward (TE's offload handler reloads the next group while the current one runs backward).
    The stack's ``zero_bucket_elements`` (DeepSpeed ZeRO's contiguous-gradients bucket) adds that many
    gradient elements under ZeRO 1-3.
    """
    kw = dict(seq_len=seq_len, micro_batch=micro_batch, num_micro_batches=num_micro_batches, tp=tp, pp=pp, dp=dp,
              cp=cp, ep=ep, etp=etp, vpp=vpp, zero=zero, sp=sp, recompute_code=recompute_code, flash=flash,
              runtime_overhead_bytes=runtime_overhead_bytes, grad_bytes=grad_bytes, fp8=fp8,
              microbatch_group=microbatch_group, stack=stack, schedule=schedule, dtype=dtype, offload=offload,
              activation_offload_layers=activation_offload_layers)
    sched = np.asarray(schedule)
    if not np.any(sched == 2):
        return _memory_rank(model, **kw)
    edge = _memory_rank(model, dual_rank="edge", **kw)
    middle = _memory_rank(model, dual_rank="middle", **kw)
    use = (sched == 2) & (np.asarray(pp) > 2) & (middle["total"] > edge["total"])
    return {k: np.where(use, middle[k], edge[k]) for k in edge}


def _memory_rank(model: ModelSpec, *, seq_len, micro_batch, num_micro_batches, tp, pp, dp, cp, ep, etp, vpp, zero,
                 sp, recompute_code, flash, runtime_overhead_bytes, grad_bytes, fp8, microbatch_group, stack,
                 schedule, dtype, offload=0, activation_offload_layers=0, dual_rank: str | None = None):
    """``memory_per_gpu`` of one rank (``dual_rank``: which DualPipe rank; see ``stage_params``)."""
    tp_f = np.asarray(tp, dtype=float)
    pp_f = np.asarray(pp, dtype=float)
    dp_f = np.asarray(dp, dtype=float)
    cp_f = np.asarray(cp, dtype=float)
    ep_f = np.asarray(ep, dtype=float)
    vpp_f = np.asarray(vpp, dtype=float)
    zero = np.asarray(zero)
    m = np.asarray(num_micro_batches, dtype=float)
    dense, expert = stage_params(model, tp_f, pp_f, ep_f, etp, vpp_f, schedule, dual_rank=dual_rank)
    d_dense = dp_f * cp_f
    d_exp = np.maximum(1.0, tp_f * dp_f * cp_f / (ep_f * np.asarray(etp, dtype=float)))
    params = dense + expert
    sharded = dense / d_dense + expert / d_exp
    impl = getattr(stack, "fsdp_impl", "megatron-fsdp") if stack is not None else "megatron-fsdp"
    # TF32 / FP32 training (workload.plan.WIDE_DTYPES): FP32 weights (4 B, themselves Adam's parameters: no
    # separate master copy), FP32 gradients, 4-byte activations and gathered weights, no FlashAttention
    wide = dtype in WIDE_DTYPES
    wb = 4.0 if wide else WEIGHT_BYTES
    master = 0.0 if wide else 4.0
    if wide:
        grad_bytes = max(float(grad_bytes), 4.0)
        flash = False
    # PyTorch FSDP (1 and 2) with mixed precision shards the FP32 parameters themselves (they are Adam's
    # master copy) and their FP32 gradients; Adam adds m and v: 4 + 4 + 8 = 16 B per sharded parameter
    # (MODELLING.md 2.1 "FSDP/ZeRO-3 (FP32 sharded master, BF16 gather): 16/d"); BF16 copies exist only
    # while a unit is gathered. Other ZeRO-3 implementations: BF16 shard + grads + 12 B optimizer.
    torch_fsdp = (zero >= 3) & (impl in ("fsdp1", "fsdp2"))
    # Adam's m and v: FP32 (4 B each) unless the stack keeps them in BF16 (DeepSeek-V3 Sec. 3.3.3)
    moments = 2.0 * float(getattr(stack, "adam_moment_bytes", 4.0) if stack is not None else 4.0)
    opt_b = master + moments  # FP32 master (OPT_BYTES - 8 B; none in a 32-bit step) + moments
    weights = np.where(zero >= 3, np.where(torch_fsdp, 4.0, wb) * sharded, wb * params)
    grads = np.where(zero >= 2, grad_bytes * sharded, grad_bytes * params)
    optim = np.where(zero >= 1, np.where(torch_fsdp, opt_b - master, opt_b) * sharded, opt_b * params)
    bucket = float(getattr(stack, "zero_bucket_elements", 0.0) or 0.0) if stack is not None else 0.0
    off = np.asarray(offload)
    if np.any(off > 0):
        # host offload: the optimizer states (and with "params" the shards and their gradients) leave the GPU
        # Megatron's HybridDeviceOptimizer moves Adam's moments; the distributed optimizer's FP32 main-param shard
        # stays on the GPU (Megatron-Bridge docs/training/cpu-offloading.md: "Optimizer states (Adam momentum +
        # variance)", 15.3 GB saved on Qwen3-30B-A3B TP2 PP2 EP4 = 8 B per sharded parameter); DeepSpeed's
        # ZeRO-Offload moves master + moments (and the gradient partitions)
        keep_master = (bucket == 0) & (off == 1) & np.logical_not(torch_fsdp)
        optim = np.where(off >= 1, np.where(keep_master, optim * master / max(opt_b, 1e-9), 0.0), optim)
        ds_offload = (off >= 1) & (zero >= 2) & (bucket > 0)  # ZeRO-Offload: reduced partitions go to the CPU
        grads = np.where(ds_offload | ((off == 2) & (zero >= 3)), 0.0, grads)
        weights = np.where((off == 2) & (zero >= 3), 0.0, weights)
    if bucket > 0:
        grads = grads + np.where(zero >= 1, bucket * grad_bytes, 0.0)
    if np.needed(zero >= 2):  # layers per GPU (DualPipe: two stages), the FSDP unit count below
        n_dec = np.maximum(1.0, model.num_layers / pp_f * np.where(np.asarray(schedule) == 2, 2.0, 1.0))
    if np.needed(zero >= 3):  # (False only for one plan below ZeRO-3; xp.py)
        # ZeRO-3 transient: unsharded BF16 weights of the current and the prefetched layer
        emb_out = model.vocab_size * model.hidden_size / tp_f * (1.0 if model.tied_embeddings else 2.0)
        layer_params = np.where(impl == "fsdp2", np.maximum(params - emb_out, 0.0), params) / n_dec
        weights = weights + np.where(zero >= 3, 2.0 * wb * layer_params, 0.0)
        # ... and the unsharded gradients of the unit being reduce-scattered (MODELLING.md 2.1, FSDP row)
        grads = grads + np.where(zero >= 3, grad_bytes * layer_params, 0.0)
    else:
        weights, grads = weights + 0.0, grads + 0.0
    if impl == "megatron-fsdp" and np.needed(zero >= 2):
        # Megatron-FSDP (Megatron ZeRO 2 = optim_grads, ZeRO 3 = optim_grads_params) writes every FSDP unit's
        # gradients into an unsharded main-grad bucket in each backward and reduce-scatters it on a side stream
        # (megatron_fsdp.py _post_backward: grad_reduce_every_bprop for both modes); with the double buffer NVIDIA
        # recommends (--fsdp-double-buffer, Megatron-LM megatron-fsdp-user-guide; implied by --use-nccl-ub) the
        # buckets live in two unit-sized slots (_grad_acc: "the buffer limit imposed by double-buffer allocator",
        # two FSDP Unit Modules): the unit being reduce-scattered and the one being computed. ZeRO 3 above counts
        # one of them; ZeRO 2 none
        grads = grads + np.where(zero >= 3, 1.0, np.where(zero == 2, 2.0, 0.0)) * grad_bytes * params / n_dec
    if impl == "fsdp2":
        held = (zero >= 3) & (pp_f > 1)  # reshard_after_forward = False under PP: whole stage unsharded
        weights = weights + np.where(held, wb * params, 0.0)
        grads = grads + np.where(held, grad_bytes * params, 0.0)
        # without PP, torchtitan keeps the last unit ([norm, output]) gathered from forward into backward
        # (reshard_after_forward off for it: "FSDP would prefetch it immediately"), and its BF16 weight
        # gradient, computed first, lives until that unit's reduce-scatter: 2 x 2 B x V h at the peak
        out_layer = model.vocab_size * model.hidden_size / tp_f
        root = (zero >= 3) & (pp_f == 1)
        weights = weights + np.where(root, wb * out_layer, 0.0)
        grads = grads + np.where(root, wb * out_layer, 0.0)

    lowp = dtype in LOW_PRECISION_DTYPES if dtype is not None else bool(fp8)
    # FP8 / MXFP8 / NVFP4 linears that keep their saved inputs in 8 bit (Transformer Engine; DeepSeek's FP8
    # activation cache) vs those that save the BF16 input and cast again in backward (torchao Float8Linear:
    # ``matmul_with_hp_or_float8_args`` does ``ctx.save_for_backward(input_hp, weight_hp_t)``)
    fp8_cache = lowp and bool(getattr(stack, "fp8_activation_cache", True) if stack is not None else True)
    stored, working = activation_bytes_per_layer(model, seq_len, micro_batch, tp, cp, sp, recompute_code, flash,
                                                 fp8_cache)
    if stack is not None and stack.selective_recompute == "half-forward":
        rc_arr = np.asarray(recompute_code)
        opaque = 0.0
        if dtype in ("nvfp4", "fp4") and "nvfp4" in getattr(stack, "sac_opaque_dtypes", ()):
            opaque = nvfp4_layers(model.num_layers) / model.num_layers
        sac = op_sac_bytes_per_layer(model, seq_len, micro_batch, tp, cp, sp, opaque)
        stored = np.where(rc_arr == 1, sac, stored)
    sel = getattr(stack, "selective_recompute", "attention-core") if stack is not None else "attention-core"
    megatron = stack is None or str(getattr(stack, "id", "")).startswith("megatron")
    if sel == "attention-core" and megatron and model.is_moe:
        # Megatron-Bridge's MoE recipes select the fine-grained recompute_modules "layernorm", "moe_act" (+
        # "mla_up_proj" with MLA) rather than the attention core (docs/modelling.md; the step-time model
        # redoes the same modules, sim/costs.py): what they discard after the forward is not kept
        stored = np.where(np.asarray(recompute_code) == 1,
                          stored - moe_selective_bytes_per_layer(model, seq_len, micro_batch, tp, cp, sp, fp8_cache),
                          stored)
    if stack is not None and stack.selective_recompute == "norm-mla-up":
        hai = hai_llm_bytes_per_layer(model, seq_len, micro_batch, tp, cp, sp)
        stored = np.where(np.asarray(recompute_code) == 1, hai, stored)
    if wide:  # every saved activation at 4 B: the 2-byte terms double (the 1-byte dropout masks too: <= 2 sbh over)
        stored, working = 2.0 * stored, 2.0 * working
    first, last = pipeline_inflight_layers(model.num_layers, pp_f, vpp_f, m, microbatch_group, model=model,
                                           schedule=schedule, dual_rank=dual_rank)
    extra = np.where(np.asarray(recompute_code) == 2, working, 0.0)
    n_off = np.asarray(activation_offload_layers, dtype=float)
    if np.any(n_off > 0):
        # offloaded layers leave the GPU after their forward; one is back ahead of its backward
        back = np.where(n_off > 0, n_off - 1.0, 0.0)
        first = np.maximum(first - back, 1.0)
        last = np.maximum(last - back, 1.0)
    bwd = backward_transient_bytes(model, seq_len, micro_batch, tp, cp, 4.0 if wide else ACT_BYTES)
    if stack is not None and getattr(stack, "cp_attention", "fused") == "torch-ring":
        # PyTorch's ring attention backward runs after the layer's MLP backward has freed its gradients: the
        # larger of the two sequential transients sets the peak (an upper bound: the MLP's saved inputs are
        # still counted in ``stored``/``working`` while the attention backward runs)
        bwd = np.maximum(bwd, cp_ring_backward_bytes(model, seq_len, micro_batch, tp, cp, 4.0 if wide else ACT_BYTES,
                                                     repeat_kv=bool(getattr(stack, "sdpa_repeat_kv", False))))
    extra = extra + bwd
    acts_first = stored * first + extra
    acts_last = stored * last + extra
    # logits (FP32) on the last stage: 4 s b V / (t cp)
    loss_b = float(getattr(stack, "loss_bytes_per_logit", 4.0)) if stack is not None else 4.0
    # the MTP modules' output heads on the last stage (DeepSeek-V3 Sec. 2.2: one more logits tensor per depth)
    heads = 1.0 + float(getattr(model, "mtp_depth", 0) or 0)
    logits = heads * loss_b * np.asarray(seq_len, dtype=float) / cp_f * np.asarray(micro_batch, dtype=float) \
        * model.vocab_size / tp_f
    if dual_rank == "middle":
        logits = np.where((np.asarray(schedule) == 2) & (pp_f > 2), 0.0, logits)
    first_binds = acts_first >= acts_last + logits
    acts = np.where(first_binds, acts_first, acts_last)
    logits = np.where(first_binds, 0.0, logits)
    total = weights + grads + optim + acts + logits + runtime_overhead_bytes
    return {
        "weights": weights,
        "gradients": grads,
        "optimizer": optim,
        "activations": acts,
        "logits": logits,
        "runtime": np.astype(np.broadcast_to(np.asarray(runtime_overhead_bytes, dtype=float), np.shape(total)), float),
        "total": total,
        "params_per_gpu": params,
    }


LOW_PRECISION_DTYPES = ("fp8", "mxfp8", "nvfp4", "fp4")  # GEMMs in FP8/FP4: transient casts and copies


def plan_memory(model: ModelSpec, plans, *, seq_len: int, dtype: str = "bf16", flash: bool = True,
                grad_bytes: float = GRAD_BYTES, runtime_overhead_bytes: float = 0.0, stack=None):
    """Memory per GPU of every plan in ``plans`` (arrays that broadcast: tp pp dp cp ep vpp micro_batch
    global_batch zero recompute (code); optional etp, sp (default tp > 1), mb_group, schedule, offload (code),
    act_offload (layers)): the one call the
    engine (``sim.analytical.estimate_batch``) and the planner's memory pruning both make, so both see the
    same dtype handling and the same software ``stack`` (a ``SoftwareStack``). Returns ``memory_per_gpu``'s
    component dict."""
    get = plans.get
    tp, dp, mb = np.asarray(get("tp", 1)), np.asarray(get("dp", 1)), np.asarray(get("micro_batch", 1))
    sp = get("sp")
    sp = (tp > 1) if sp is None else (np.asarray(sp, dtype=bool) & (tp > 1))
    gb = np.asarray(get("global_batch"))
    return memory_per_gpu(
        model, seq_len=seq_len, micro_batch=mb, num_micro_batches=gb // np.maximum(mb * dp, 1), tp=tp,
        pp=get("pp", 1), dp=dp, cp=get("cp", 1), ep=get("ep", 1), etp=get("etp", 1), vpp=get("vpp", 1),
        zero=get("zero", 1), sp=sp, recompute_code=get("recompute", 0), flash=flash,
        runtime_overhead_bytes=runtime_overhead_bytes, grad_bytes=float(grad_bytes),
        fp8=dtype in LOW_PRECISION_DTYPES, microbatch_group=get("mb_group"), stack=stack,
        schedule=get("schedule", 0), dtype=dtype, offload=get("offload", 0),
        activation_offload_layers=get("act_offload", 0),
    )


def memory_basis(model: ModelSpec, plan, stack=None) -> dict[str, str]:
    """What each memory component of ``memory_per_gpu`` counts for ``plan`` (a ``ParallelPlan``) under
    ``stack``, and its source, one sentence per component (``estimate --json``: ``memory_basis``). The
    sentences follow the same branches as ``_memory_rank``; docs/modelling.md sections 2 and 2.x hold the
    derivations."""
    from .plan import WIDE_DTYPES

    z = int(plan.zero_effective)
    impl = getattr(stack, "fsdp_impl", "megatron-fsdp") if stack is not None else "megatron-fsdp"
    torch_fsdp = z >= 3 and impl in ("fsdp1", "fsdp2")
    wide = plan.dtype in WIDE_DTYPES
    wb = 4 if wide else 2
    off = getattr(plan, "offload", "none")
    bucket = float(getattr(stack, "zero_bucket_elements", 0.0) or 0.0) if stack is not None else 0.0
    mom = float(getattr(stack, "adam_moment_bytes", 4.0) if stack is not None else 4.0)
    if z >= 3:
        w = (f"{'FP32 4 B (the Adam master itself, PyTorch FSDP)' if torch_fsdp else f'{wb} B'} per sharded "
             f"parameter (1/d) + the unsharded {wb}-B weights of the current and the prefetched unit (ZeRO-3 / FSDP, "
             "MODELLING.md 2.1)")
    else:
        w = f"{wb} B per parameter on the rank (replicated over DP{'; FP32 training' if wide else ''})"
    if off == "params":
        w = "parameter shards in host memory (ZeRO-3 offload_param / FSDP CPUOffload): only the gathered units"
    g = (f"{plan.grad_reduce_bytes if not wide else 4} B per parameter, " + ("sharded (ZeRO-2/3)" if z >= 2 else
         "full buffer (DDP / distributed optimizer)"))
    if z >= 3:
        g += " + the unsharded gradients of the unit being reduce-scattered"
    if bucket:
        g += f" + DeepSpeed's {bucket:.0e}-element reduce bucket (reduce_bucket_size)"
    if off != "none" and bucket and z >= 2:
        g += "; the reduced partitions go to host memory (ZeRO-Offload)"
    master = "" if wide else "FP32 master 4 B + "
    o = f"{master}Adam m, v {2 * mom:g} B per parameter, " + ("sharded over DP (ZeRO >= 1)" if z >= 1 else "replicated")
    if torch_fsdp:
        o = f"Adam m, v {2 * mom:g} B per sharded parameter (the FP32 parameter is the master)"
    if off == "optimizer":
        o = ("in host memory" if bucket or torch_fsdp else
             "FP32 master shard only: Adam's moments in host memory (Megatron HybridDeviceOptimizer)")
    elif off == "params":
        o = "in host memory"
    rc = plan.recompute
    sel = getattr(stack, "selective_recompute", "attention-core") if stack is not None else "attention-core"
    if rc == "full":
        a = "layer inputs of the in-flight micro-batches + one layer's recomputed working set"
    elif rc == "selective" and sel == "half-forward":
        a = "torchtitan per-op SAC: block input + odd aten.mm outputs + SDPA outputs per layer"
    elif rc == "selective" and sel == "norm-mla-up":
        a = "HAI-LLM: residual inputs, MLA latents, E5M6 attention output, FP8 expert inputs (DeepSeek-V3 3.3.3)"
    elif rc == "selective" and model.is_moe:
        a = "Korthikanti Table 2 less the recompute_modules layernorm / moe_act (/ mla_up_proj) outputs"
    else:
        a = "Korthikanti et al. 2022 Table 2 per layer" + (" (FlashAttention: no s^2 term)" if plan.flash_attention else "")
    a += " x the schedule's in-flight layer-micro-batches + one layer's backward gradients"
    if getattr(stack, "cp_attention", "fused") == "torch-ring" and int(getattr(plan, "cp", 1)) > 1:
        a += (" (or, if larger, PyTorch context_parallel's ring-attention backward buffers: the cp-fold K,V "
              "all-gather, FP32 dQ, dK, dV)")
    if getattr(model, "glu_clamp", False) and rc != "selective":
        a += " + the clamped GLU's fc1-output copy"
    if plan.activation_offload_layers:
        a += f"; {plan.activation_offload_layers} layers' activations in host memory (one back before its backward)"
    lb = float(getattr(stack, "loss_bytes_per_logit", 4.0)) if stack is not None else 4.0
    lg = f"{lb:g} B per logit of one micro-batch on the last stage (the loss's peak)"
    return {"weights": w, "gradients": g, "optimizer": o, "activations": a, "logits": lg,
            "runtime": "CUDA context + NCCL buffers + workspaces (efficiency.yaml runtime_overhead_gb, MODELLING.md 2.5); "
                       "left out when a measured figure is an allocator peak"}

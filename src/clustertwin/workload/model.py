"""Transformer / MoE model specifications (frozen, SI-free: plain integer shapes).

A :class:`ModelSpec` describes one decoder-only transformer: dense (GPT, Llama) or mixture-of-experts
(Mixtral, DeepSeek-V3, Qwen3-MoE), with multi-head, grouped-query or multi-head latent attention (MLA).
The built-in zoo is ``workload/data/models.yaml`` (every entry names the paper or config it comes from);
users add their own with ``load_models(path)`` or ``model_from_dict``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import InputError, UnknownNameError
from ..userfiles import is_file

# Load imbalance of real (not force-balanced) dropless routing: max / mean token load of the EP ranks of one
# MoE layer (ModelSpec.moe_load_imbalance; sim/components/moe.py "Routing" gives the derivation). DERIVED from
# the published forced-balance / dropless pairs of one configuration at four sequence lengths
# (NVIDIA Megatron-MoE-ModelZoo best_practice/qwen3/readme.md, "Long Context": Qwen3-235B-A22B, 256 H100,
# TP4 PP8 VPP4 EP8, DeepEP, GBS 256; TFLOPS 295/237, 335/277, 368/320, 389/357 at 16K/32K/64K/128K): the value
# for which this model's step-time ratio equals the published one is 1.70 / 1.76 / 1.79 / 1.77 (the ratios
# fall from 1.25 to 1.09 only because attention's share grows with the sequence); 1.75 is their mean, rounded.
# ASSUMED the same for other models, EP sizes and tokens per rank (no other published pair found).
REAL_ROUTING_LOAD_IMBALANCE = 1.75


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSpec:
    """Shape of a decoder-only transformer.

    Symbols follow MODELLING.md: ``L`` layers, ``h`` hidden, ``a`` query heads, ``g`` KV heads, ``d`` head
    dim, ``f`` dense FFN width, ``V`` vocabulary. MoE: ``num_experts`` routed experts of width
    ``moe_ffn_hidden_size``, ``moe_topk`` per token, ``num_shared_experts`` always-on experts of the same
    width, the first ``num_dense_layers`` layers dense. MLA (DeepSeek-V2/V3): ``q_lora_rank`` (0 = no
    q compression), ``kv_lora_rank``, ``qk_nope_head_dim``, ``qk_rope_head_dim``, ``v_head_dim``.
    Sliding-window attention (GPT-OSS, Gemma, Mistral): ``sliding_window_fraction`` of the layers attend
    only to the last ``sliding_window`` tokens. ``glu_clamp``: the gated activation clamps its inputs
    (GPT-OSS's clamped SwiGLU: gate clamped above at 7, linear half to +-7, Megatron-Core
    ``activation_func_clamp_value``), which Megatron-Core runs as separate clamp + concatenate kernels
    before the fused activation (sim/components/moe.py). ``linear_bias``: the linear layers carry biases
    (GPT-OSS; Megatron-Core ``add_bias_linear``). ``rope_mscale``: the YaRN concentration factor on the RoPE
    cos / sin (GPT-OSS: 0.1 ln 32 + 1), which makes Megatron-Core apply RoPE unfused. Attention and dense-MLP biases ride in the GEMM epilogue
    (no extra pass); the routed experts' fc2 bias is scaled by each token's router probability in eager
    PyTorch, one expert at a time (``TEGroupedMLP._apply_bias``), which sim/components/moe.py prices.
    Routing: ``moe_load_imbalance`` (max / mean EP-rank load; 1 = force-balanced) and ``moe_token_drop``
    (capacity-factor token drop padded to capacity: no dispatcher host sync; False = dropless).
    """

    id: str
    name: str = ""
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int = 0  # 0 -> = num_attention_heads (MHA)
    head_dim: int = 0  # 0 -> hidden_size / num_attention_heads
    ffn_hidden_size: int = 0  # 0 -> 4 * hidden_size
    vocab_size: int
    swiglu: bool = False  # gated MLP with three matrices
    dropout: bool = False  # GPT-style hidden/attention dropout (adds masks to activation memory)
    tied_embeddings: bool = False
    seq_len: int = 2048  # default training sequence length
    num_experts: int = 0
    moe_topk: int = 0
    moe_ffn_hidden_size: int = 0
    num_shared_experts: int = 0
    num_dense_layers: int = 0
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    mtp_depth: int = 0
    sliding_window: int = 0  # tokens a query attends to in the sliding-window layers (0 = none)
    sliding_window_fraction: float = 0.0  # share of the layers with the window (GPT-OSS: alternate = 0.5)
    glu_clamp: bool = False  # clamped gated activation (GPT-OSS)
    linear_bias: bool = False  # biases on the linear layers (GPT-OSS); priced on the routed experts' fc2
    # YaRN attention (concentration) factor that scales the RoPE cos / sin (HF rope_scaling "attention_factor",
    # 0.1 ln(factor) + 1 when the config gives no mscale; Megatron-Core _yarn_get_concentration_factor); 1 = plain
    # RoPE or a YaRN whose mscale / mscale_all_dim cancel. Megatron-Core runs RoPE unfused when it is not 1
    # (sim/components/elementwise.py)
    rope_mscale: float = 1.0
    # routing of the run (sim/components/moe.py): max / mean token load of the EP ranks of one MoE layer and
    # micro-batch; 1 = balanced (benchmarks that force load balance), > 1 = the router's real load imbalance
    moe_load_imbalance: float = 1.0
    # capacity-factor token drop with the expert inputs padded to capacity (Megatron-Core
    # `--moe-expert-capacity-factor` + `--moe-pad-expert-input-to-capacity`; Megatron-Bridge's
    # apply_moe_token_drop defaults 1.0 / True): static expert shapes, so the alltoall dispatcher never syncs
    # with the host (sim/components/moe.py host_idle); False = dropless (the benchmark default)
    moe_token_drop: bool = False
    # serving (serving/phases.py): coefficient of variation of the routed-token load over the experts of one
    # MoE layer under the model's real router (hot experts), as measured on a serving workload; 0 = not
    # measured (routing modelled as random: binomial spread only)
    moe_expert_load_cv: float = 0.0
    source: str = ""
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        if not self.num_kv_heads:
            object.__setattr__(self, "num_kv_heads", self.num_attention_heads)
        if not self.head_dim:
            object.__setattr__(self, "head_dim", self.hidden_size // max(1, self.num_attention_heads))
        if not self.ffn_hidden_size:
            object.__setattr__(self, "ffn_hidden_size", 4 * self.hidden_size)
        if not self.name:
            object.__setattr__(self, "name", self.id)
        _check_model(self)

    # --- derived shape facts -------------------------------------------------------------------
    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def num_moe_layers(self) -> int:
        return self.num_layers - self.num_dense_layers if self.is_moe else 0

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim if self.is_mla else self.head_dim

    @property
    def v_dim(self) -> int:
        return self.v_head_dim if self.is_mla else self.head_dim

    def attention_params(self) -> int:
        """Weight count of one attention block (no biases/norms)."""
        h, a, g, d = self.hidden_size, self.num_attention_heads, self.num_kv_heads, self.head_dim
        if self.is_mla:
            dq = self.qk_head_dim
            q = (self.q_lora_rank * (h + a * dq)) if self.q_lora_rank else h * a * dq
            kv = h * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank * a * (
                self.qk_nope_head_dim + self.v_head_dim
            )
            return q + kv + a * self.v_head_dim * h
        return h * (a * d + 2 * g * d) + a * d * h

    def dense_mlp_params(self) -> int:
        return (3 if self.swiglu else 2) * self.hidden_size * self.ffn_hidden_size

    def expert_params(self) -> int:
        """Weights of one routed expert."""
        return (3 if self.swiglu else 2) * self.hidden_size * self.moe_ffn_hidden_size

    def num_params(self) -> int:
        """Total weights incl. embedding (and the output layer when untied)."""
        L, h, V = self.num_layers, self.hidden_size, self.vocab_size
        n = L * self.attention_params()
        n += (L - self.num_moe_layers) * self.dense_mlp_params()
        n += self.num_moe_layers * (
            (self.num_experts + self.num_shared_experts) * self.expert_params() + h * self.num_experts
        )
        n += V * h * (1 if self.tied_embeddings else 2)
        return int(n)

    def num_active_params(self) -> int:
        """Weights touched per token (routed experts counted k times, not E)."""
        L, h, V = self.num_layers, self.hidden_size, self.vocab_size
        n = L * self.attention_params() + (L - self.num_moe_layers) * self.dense_mlp_params()
        n += self.num_moe_layers * (
            (self.moe_topk + self.num_shared_experts) * self.expert_params() + h * self.num_experts
        )
        n += V * h * (1 if self.tied_embeddings else 2)
        return int(n)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("extra", None)
        return d

    def with_(self, **changes: Any) -> ModelSpec:
        return replace(self, **changes)


def _check_model(m: ModelSpec) -> None:
    def bad(msg: str, hint: str) -> None:
        raise InputError(f"model {m.id!r}: {msg}", hint=hint)

    for name in ("num_layers", "hidden_size", "num_attention_heads", "vocab_size"):
        if getattr(m, name) <= 0:
            bad(f"{name} must be positive, got {getattr(m, name)}", "check the model definition")
    from ..limits import LIMITS

    for names, limit in ((("num_layers",), "layers"), (("vocab_size",), "vocab"), (("seq_len",), "seq_len"),
                         (("hidden_size", "ffn_hidden_size", "num_attention_heads", "num_kv_heads", "num_experts",
                           "moe_ffn_hidden_size"), "model_dim")):
        for name in names:
            v = getattr(m, name, 0) or 0
            if not isinstance(v, int) or isinstance(v, bool) or v > LIMITS[limit][0]:
                bad(f"{name} = {v!r} is above the limit of {LIMITS[limit][0]:,.0f} ({LIMITS[limit][1]})"
                    if isinstance(v, int | float) and not isinstance(v, bool) and v == v else
                    f"{name} must be a whole number, got {v!r}", "see the limits table in docs/limits.md")
    if m.num_attention_heads % m.num_kv_heads:
        bad(
            f"num_attention_heads ({m.num_attention_heads}) is not a multiple of num_kv_heads ({m.num_kv_heads})",
            "grouped-query attention needs heads divisible by KV heads",
        )
    imb = m.moe_load_imbalance
    if isinstance(imb, bool) or not isinstance(imb, int | float) or not (1.0 <= imb <= 16.0):
        bad(f"moe_load_imbalance = {imb!r} must be a number between 1 (balanced routing) and 16",
            "it is the max / mean token load of the EP ranks per MoE layer; 1 for force-balanced benchmark runs")
    if m.is_moe:
        if not (0 < m.moe_topk <= m.num_experts):
            bad(f"moe_topk ({m.moe_topk}) must be between 1 and num_experts ({m.num_experts})", "set moe_topk")
        if m.moe_ffn_hidden_size <= 0:
            bad("MoE model needs moe_ffn_hidden_size", "set the expert MLP width")
        if not (0 <= m.num_dense_layers < m.num_layers):
            bad(f"num_dense_layers ({m.num_dense_layers}) must be below num_layers", "fix num_dense_layers")
    if m.sliding_window < 0 or not (0.0 <= m.sliding_window_fraction <= 1.0):
        bad(f"sliding_window ({m.sliding_window}) must be >= 0 and sliding_window_fraction "
            f"({m.sliding_window_fraction}) between 0 and 1", "e.g. sliding_window: 128, sliding_window_fraction: 0.5")
    if m.sliding_window_fraction > 0 and not m.sliding_window:
        bad("sliding_window_fraction is set but sliding_window is 0", "give the window length in tokens")
    if m.is_mla and not (m.qk_nope_head_dim and m.qk_rope_head_dim and m.v_head_dim):
        bad("MLA needs qk_nope_head_dim, qk_rope_head_dim and v_head_dim", "give all MLA dimensions")


_FIELDS = set(ModelSpec.__dataclass_fields__) - {"extra"}


@lru_cache(maxsize=1)
def _model_schema():
    """Strict pydantic view of ModelSpec for model files (``schemas.dataclass_schema``)."""
    from ..schemas import dataclass_schema

    return dataclass_schema(ModelSpec, "ModelIn", skip=("id", "extra"))


def model_from_dict(model_id: str, data: dict[str, Any], *, origin: str = "") -> ModelSpec:
    """Build a ModelSpec from a mapping (YAML entry, CLI flags). Unknown keys are an InputError."""
    if not isinstance(data, dict):
        raise InputError(f"model {model_id!r}{' in ' + origin if origin else ''} must be a mapping of fields, "
                         f"got {type(data).__name__}", hint="fields: " + ", ".join(sorted(_FIELDS)))
    unknown = set(data) - _FIELDS - {"id"}
    if unknown:
        from ..errors import closest

        key = sorted(unknown)[0]
        raise InputError(
            f"model {model_id!r}{' in ' + origin if origin else ''}: unknown field {key!r}",
            suggestions=closest(key, _FIELDS),
            hint="fields: " + ", ".join(sorted(_FIELDS)),
        )
    from ..schemas import parse

    kw = {k: v for k, v in data.items() if k != "id"}
    checked = parse(_model_schema(), kw, f"model {model_id!r}{' in ' + origin if origin else ''}",
                    hint="see `clustertwin models show llama3-8b` for the fields (docs/models.md)")
    return ModelSpec(id=model_id, **{k: getattr(checked, k) for k in kw})


def _parse_models_yaml(text: str, origin: str) -> dict[str, ModelSpec]:
    from ..userfiles import parse_yaml_text

    data = parse_yaml_text(text, f"model file {origin!r}") or {}
    models = data.get("models", data) if isinstance(data, dict) else None
    if not isinstance(models, dict) or not models:
        raise InputError(f"model file {origin!r} must hold a non-empty mapping `models: {{id: {{...}}}}`",
                         hint="see docs/models.md for the format")
    return {k: model_from_dict(k, v or {}, origin=origin) for k, v in models.items()}


@lru_cache(maxsize=1)
def builtin_models() -> dict[str, ModelSpec]:
    text = (resources.files("clustertwin.workload") / "data" / "models.yaml").read_text(encoding="utf-8")
    return _parse_models_yaml(text, "<builtin>/models.yaml")


def load_models(path: str | Path) -> dict[str, ModelSpec]:
    from ..userfiles import read_text

    p = Path(path)
    return _parse_models_yaml(read_text(p, "model file", hint="see docs/models.md for the format"), str(p))


def get_model(name: str, extra_files: tuple[str, ...] = ()) -> ModelSpec:
    """A zoo model by id, or the first model of a YAML file when ``name`` is a path."""
    table = dict(builtin_models())
    for f in extra_files:
        table.update(load_models(f))
    if name in table:
        return table[name]
    if name.endswith((".yaml", ".yml")) and is_file(name):
        models = load_models(name)
        return next(iter(models.values()))
    raise UnknownNameError("model", name, table, hint="list them with `clustertwin estimate --help`; or pass a model YAML file")

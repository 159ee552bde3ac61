"""``Stage``: the inputs every cost component reads, broadcast once.

``stage_inputs`` turns (model, hardware, plan degrees, stack options) into one frozen ``Stage``; every
component in this package is a pure function ``f(st: Stage, ...) -> arrays``. Plan degrees are numpy
arrays of one broadcast shape (the planner evaluates ~1e5 plans at once), so components branch on
values with ``np.where`` only; model constants are Python floats.

Fields (per rank, per micro-batch): ``t p d c e etp b`` the TP, PP, DP, CP, EP, expert-TP degrees and
the micro-batch (float arrays); ``rc`` recompute code (0 none, 1 selective, 2 full), ``zero`` the ZeRO
stage (3 = FSDP); ``sp`` sequence parallelism in effect (bool, only with tp > 1); ``s`` the sequence
length; ``tok`` tokens of one micro-batch on this rank (``b*s/c``), ``tok_sp`` the tokens in the SP
regions (``tok/t`` with SP); ``m`` micro-batches per step; ``in_bytes`` bytes per GEMM input element
of the step dtype; ``act_bytes`` bytes per element of the activations, their gradients and the gathered
weights (2: BF16/FP16 and the FP8/FP4 recipes, whose non-GEMM tensors stay 16-bit; 4: TF32 / FP32 steps,
``workload.plan.WIDE_DTYPES``); ``fp8`` FP8/FP4 GEMMs (adds cast kernels); ``frac_moe`` the share of MoE layers;
``flash``, ``cp_comm`` ("p2p" ring or "allgather"), ``grad_reduce_bytes`` from the software stack, and
from its preset (workload/stacks.py): ``attn_speed`` (fused-attention kernel rate relative to the chip's
FA2-class efficiency), ``attn_backend`` (the fused-attention library: FlashAttention or TE's cuDNN),
``cp_torch_ring`` (CP attention as PyTorch's context_parallel: per-chunk SDPA calls, FP32 merges), ``sel_half`` (selective recompute = half of the forward, torchtitan), and the
sharded-DP implementation: ``fsdp_recompute_gather`` (the recompute forward gathers the parameters again,
DeepSpeed ZeRO-3, any version) and ``fsdp_flat`` (gather rings cross the network on every hop); the TP
collectives' ``tp_fp8_gather`` / ``tp_gather_copy`` (components/tp_comm.py); ``kv_repeat`` (K,V repeated to the
query heads before attention: what CP exchanges and accumulates, components/attention.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from ... import xp as np  # numpy, or plain numbers for one plan (clustertwin/xp.py)
from ...workload.model import ModelSpec
from ...workload.plan import WIDE_DTYPES
from ..machine import Hardware

FP8_DTYPES = ("fp8", "mxfp8")
FP4_DTYPES = ("nvfp4", "fp4")


@dataclass(frozen=True, slots=True)
class Stage:
    model: ModelSpec
    hw: Hardware
    t: np.ndarray
    p: np.ndarray
    d: np.ndarray
    c: np.ndarray
    e: np.ndarray
    etp: np.ndarray
    b: np.ndarray
    rc: np.ndarray
    zero: np.ndarray
    sp: np.ndarray
    s: float
    tok: np.ndarray
    tok_sp: np.ndarray
    m: np.ndarray
    in_bytes: float
    fp8: bool
    frac_moe: float
    flash: bool
    cp_comm: str
    grad_reduce_bytes: float
    attn_speed: float = 1.0
    attn_backend: str = "flash"  # fused-attention backend: "flash" (FlashAttention-2 class) or "cudnn" (TE)
    cp_torch_ring: bool = False  # CP attention as PyTorch's context_parallel runs it (stack cp_attention)
    sel_half: bool = False
    rc_needed: bool = False  # full recompute re-runs only what the backward reads (JAX; stack full_recompute)
    fp8_weight_cache: bool = False  # FP8 weights cast once per step (TE), not every micro-batch (torchao)
    logits_low_precision: bool = True  # the output layer GEMM in the FP8/FP4 step dtype (stack preset)
    moe_grouped_mm: bool = False  # experts in one grouped-GEMM kernel; host sync only in the EP dispatch ...
    moe_sync_ep1: bool = False  # ... unless the grouped GEMM takes its group sizes from the host (MegaBlocks)
    moe_einsum: bool = False  # DeepSpeed-MoE: capacity-factor gating, einsum dispatch/combine, no host sync
    fsdp_recompute_gather: bool = False
    fsdp_flat: bool = False
    nvfp4_bf16_share: float = 0.0  # share of the layers an NVFP4 step runs in BF16 (stack nvfp4_bf16_layer_share)
    nvfp4_rht: bool = False  # NVFP4 wgrad operands through a random Hadamard transform (stack nvfp4_rht)
    mx_per_layout: bool = False  # MXFP8 casts one kernel per layout from BF16 (stack mxfp8_cast_per_layout)
    tp_fp8_gather: bool = False  # FP8 steps all-gather the TP activations in FP8 (stack tp_fp8_allgather)
    tp_gather_copy: bool = False  # each SP collective adds a copy of the whole activation (stack tp_seq_dim_copy)
    kv_repeat: bool = False  # K,V expanded to one head per query head before attention (stack sdpa_repeat_kv)
    rope_mscale_unfused: bool = False  # RoPE unfused when the model's YaRN mscale is not 1 (stack rope_mscale_unfused)
    v: np.ndarray | float = 1.0  # interleaved virtual stages per rank (pipeline layout)
    sched: np.ndarray | int = 0  # pipeline schedule code (workload.pipeline.PIPELINE_SCHEDULES)
    act_bytes: float = 2.0  # bytes per activation / activation-gradient / gathered-weight element (4: TF32, FP32)


def stage_inputs(model: ModelSpec, hw: Hardware, *, tp, pp, dp, cp, ep, micro_batch, recompute, zero,
                 global_batch, seq_len, sp=True, etp=1, flash: bool = True, grad_reduce_bytes: float = 2.0,
                 cp_comm: str = "p2p", stack=None, vpp=1, schedule=0) -> Stage:
    """Broadcast the plan degrees together and derive the token counts (see module docstring)."""
    degrees = (tp, pp, dp, cp, ep, micro_batch, recompute, zero, global_batch, sp, etp)
    if not (np.in_scalar_mode() and np.broadcast_shape(*degrees) == ()):  # one plan: nothing to broadcast
        degrees = np.broadcast_arrays(*(np.asarray(x) for x in degrees))
    tp, pp, dp, cp, ep, mb, rc, zero, gb, sp, etp = degrees
    t = np.astype(tp, float)
    c = np.astype(cp, float)
    d = np.astype(dp, float)
    b = np.astype(mb, float)
    spb = np.astype(sp, bool) & (t > 1)
    s = float(seq_len)
    tok = b * s / c
    dtype = hw.dtype
    wide = dtype in WIDE_DTYPES
    return Stage(
        model=model, hw=hw, t=t, p=np.astype(pp, float), d=d, c=c, e=np.astype(ep, float), etp=np.astype(etp, float), b=b,
        rc=rc, zero=zero, sp=spb, s=s, tok=tok, tok_sp=np.where(spb, tok / t, tok), m=np.astype(gb, float) / (d * b),
        in_bytes=1.0 if dtype in FP8_DTYPES else (0.5 if dtype in FP4_DTYPES else (4.0 if wide else 2.0)),
        fp8=dtype in FP8_DTYPES or dtype in FP4_DTYPES,
        frac_moe=model.num_moe_layers / model.num_layers if model.is_moe else 0.0,
        # FlashAttention has no 32-bit kernels; 32-bit gradients reduce in FP32 (as workload.plan.make_plan)
        flash=bool(flash) and not wide, cp_comm=cp_comm,
        grad_reduce_bytes=max(float(grad_reduce_bytes), 4.0) if wide else float(grad_reduce_bytes),
        v=np.asarray(vpp, dtype=float), sched=np.asarray(schedule), act_bytes=4.0 if wide else 2.0,
        **_stack_fields(stack),
    )


def _stack_fields(stack) -> dict:
    if stack is None:
        return {}
    return np.memo(_STACK_FIELDS, (id(stack),), stack, _fields_of, stack, limit=256)


# (id(stack),) -> (stack, None, its Stage fields) (xp.memo): they depend on the (frozen) preset only
_STACK_FIELDS: dict[tuple, tuple] = {}


def _fields_of(stack) -> dict:
    return {"attn_speed": float(stack.attention_kernel_speed), "attn_backend": stack.attention_backend,
            "cp_torch_ring": getattr(stack, "cp_attention", "fused") == "torch-ring",
            "sel_half": stack.selective_recompute == "half-forward",
            "rc_needed": getattr(stack, "full_recompute", "layer") == "needed",
            "fp8_weight_cache": bool(stack.fp8_weight_cache),
            "logits_low_precision": bool(getattr(stack, "output_layer_low_precision", True)),
            "moe_grouped_mm": getattr(stack, "moe_experts_impl", "te-grouped-linear") in ("grouped-mm", "megablocks-gmm"),
            "moe_sync_ep1": getattr(stack, "moe_experts_impl", "te-grouped-linear") == "megablocks-gmm",
            "moe_einsum": getattr(stack, "moe_experts_impl", "te-grouped-linear") == "deepspeed-einsum",
            "fsdp_recompute_gather": stack.fsdp_impl in ("zero3-2021", "zero3"), "fsdp_flat": bool(stack.fsdp_flat_ring),
            "nvfp4_bf16_share": float(getattr(stack, "nvfp4_bf16_layer_share", 0.0)),
            "nvfp4_rht": bool(getattr(stack, "nvfp4_rht", False)),
            "mx_per_layout": bool(getattr(stack, "mxfp8_cast_per_layout", False)),
            "tp_fp8_gather": bool(getattr(stack, "tp_fp8_allgather", False)),
            "tp_gather_copy": bool(getattr(stack, "tp_seq_dim_copy", False)),
            "kv_repeat": bool(getattr(stack, "sdpa_repeat_kv", False)),
            "rope_mscale_unfused": bool(getattr(stack, "rope_mscale_unfused", False))}

"""Parallel plan: how a training step is split over GPUs (Megatron conventions).

Degrees: ``tp`` tensor, ``pp`` pipeline, ``dp`` data, ``cp`` context, ``ep`` expert (folded inside the
``tp*dp*cp`` ranks of a pipeline stage, Megatron convention, with expert tensor parallel ``etp``),
``vpp`` interleaved virtual stages per pipeline rank. ``tp*pp*dp*cp`` = number of GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from .. import xp as np  # numpy, or plain numbers for one plan (clustertwin/xp.py)
from ..errors import InputError
from .model import ModelSpec
from .rules import plan_problems as _problems
from .stacks import get_stack

RECOMPUTE = ("none", "selective", "full")
RECOMPUTE_CODE = {name: i for i, name in enumerate(RECOMPUTE)}
DTYPES = ("bf16", "fp16", "fp8", "mxfp8", "nvfp4", "tf32", "fp32")
# 32-bit training (no mixed precision): 4-byte weights, activations, GEMM inputs and gradients; "tf32" runs its
# GEMMs on TF32 tensor cores (Ampere and newer), "fp32" on FP32 CUDA cores. Neither has FlashAttention kernels.
WIDE_DTYPES = ("tf32", "fp32")
# what lives in host (CPU) memory instead of HBM (workload/memory.py, sim/components/offload.py):
# "optimizer": the FP32 master weights and Adam moments, stepped on the CPU (DeepSpeed ZeRO-Offload
# offload_optimizer, Megatron --optimizer-cpu-offload); "params": also the parameter shards and their
# gradients, gathered from host memory (ZeRO-3 offload_param / ZeRO-Infinity, PyTorch FSDP CPUOffload,
# torchtitan enable_cpu_offload)
OFFLOAD = ("none", "optimizer", "params")
OFFLOAD_CODE = {name: i for i, name in enumerate(OFFLOAD)}


def offload_code(value) -> Any:
    """Offload names or codes -> int64 codes (array; a plain int for one plan in ``xp.scalar_mode``)."""
    if np.in_scalar_mode() and np.ndim(value) == 0:
        return OFFLOAD_CODE[str(value)] if isinstance(value, str) else int(value)
    arr = np.asarray(value)
    if arr.dtype.kind in "US":
        return np.vectorize(lambda x: OFFLOAD_CODE[str(x)])(arr).astype(np.int64)
    return arr.astype(np.int64)


@dataclass(frozen=True, slots=True, kw_only=True)
class ParallelPlan:
    """One training configuration.

    ``overlap``: communication overlap as in current Megatron-Core/Transformer Engine (DP grad
    reduce-scatter and param all-gather overlapped with backward/forward, TP comm overlap when sequence
    parallelism is on, P2P overlap with interleaving). ``flash_attention``: fused attention kernel
    (FlashAttention / cuDNN) that skips the masked half of causal attention and stores no s x s
    matrices; ``False`` models the 2021-22 Megatron path (batched GEMMs + fused softmax).
    """

    tp: int = 1
    pp: int = 1
    dp: int = 1
    cp: int = 1
    ep: int = 1
    etp: int = 1
    vpp: int = 1
    micro_batch: int = 1
    global_batch: int = 1
    seq_len: int = 2048
    sequence_parallel: bool = True
    zero: int = 1  # 0 none, 1 optimizer states (Megatron distributed optimizer), 2 + grads, 3 + params
    fsdp: bool = False
    recompute: str = "none"
    dtype: str = "bf16"
    flash_attention: bool = True
    overlap: bool = True
    grad_reduce_bytes: int = 2  # Megatron-Core recipes reduce in BF16 (the megatron-core stack); 4 = FP32
    uneven_pipeline: bool = False  # allow layers not divisible by pp*vpp (custom stage layouts)
    cp_comm: str = "p2p"  # "p2p" ring exchange overlapped with attention (Megatron), "allgather" (Llama 3)
    # interleaved schedule: consecutive micro-batches per virtual stage (Megatron
    # microbatch_group_size_per_vp_stage, Llama 3's N); 0 = pp (Megatron's default, depth-first)
    microbatch_group: int = 0
    # pipeline schedule (workload/pipeline.py): 1f1b (interleaved with vpp > 1), zb-h1, dualpipe
    pipeline_schedule: str = "1f1b"
    offload: str = "none"  # model states in host memory: none | optimizer | params (OFFLOAD)
    # layers whose activations go to host memory between forward and backward (Megatron --cpu-offloading
    # --cpu-offloading-num-layers: Transformer Engine's CPU offload context); 0 = none
    activation_offload_layers: int = 0
    stack: str = "megatron-core"  # software stack preset the software options came from (workload/stacks.py)

    @property
    def microbatch_group_effective(self) -> int:
        return self.microbatch_group if self.microbatch_group > 0 else self.pp

    @property
    def num_gpus(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    @property
    def num_micro_batches(self) -> int:
        return self.global_batch // (self.dp * self.micro_batch)

    @property
    def recompute_code(self) -> int:
        return RECOMPUTE_CODE[self.recompute]

    @property
    def offload_code(self) -> int:
        return OFFLOAD_CODE[self.offload]

    @property
    def zero_effective(self) -> int:
        return 3 if self.fsdp else self.zero

    def to_dict(self) -> dict[str, Any]:
        # every field is a scalar, so a shallow copy equals ``dataclasses.asdict`` (without its deep copy)
        return {name: getattr(self, name) for name in _PLAN_FIELDS}

    def with_(self, **kw: Any) -> ParallelPlan:
        return replace(self, **kw)


_PLAN_FIELDS = tuple(f.name for f in fields(ParallelPlan))


def make_plan(
    *,
    gpus: int | None = None,
    tp: int = 1,
    pp: int = 1,
    dp: int | None = None,
    cp: int = 1,
    ep: int = 1,
    etp: int = 1,
    vpp: int = 1,
    micro_batch: int = 1,
    global_batch: int | None = None,
    seq_len: int = 2048,
    sequence_parallel: bool | None = None,
    zero: int | None = None,
    fsdp: bool = False,
    recompute: str | None = None,
    dtype: str = "bf16",
    flash_attention: bool | None = None,
    overlap: bool | None = None,
    grad_reduce_bytes: int | None = None,
    uneven_pipeline: bool = False,
    cp_comm: str | None = None,
    microbatch_group: int | None = None,
    stack: str | None = None,
    pipeline_schedule: str | None = None,
    offload: str | None = None,
    activation_offload_layers: int | None = None,
) -> ParallelPlan:
    """Build a plan from user flags, deriving ``dp`` from ``gpus`` and ``global_batch`` from dp.

    Software options left as ``None`` (flash attention, overlap, gradient-reduce bytes, CP style,
    sequence parallelism) come from the software ``stack`` (default Megatron-Core); a value given
    explicitly wins over the stack's.
    """
    from .stacks import get_stack

    st = get_stack(stack)
    wide = dtype in WIDE_DTYPES
    if wide and flash_attention:
        raise InputError(f"--dtype {dtype}: FlashAttention / cuDNN fused attention has no 32-bit kernels",
                         hint="leave flash attention to the default (unfused attention for tf32/fp32) or use bf16")
    # TF32 / FP32 steps: FlashAttention has no 32-bit kernels (unfused attention, the stack's default is
    # overridden) and the gradients are FP32, so they are reduced in 4 bytes whatever the stack's setting
    flash_attention = (False if wide else st.flash_attention) if flash_attention is None else flash_attention
    overlap = st.overlap if overlap is None else overlap
    grad_reduce_bytes = st.grad_reduce_bytes if grad_reduce_bytes is None else grad_reduce_bytes
    if wide:
        grad_reduce_bytes = max(int(grad_reduce_bytes), 4)
    cp_comm = st.cp_comm if cp_comm is None else cp_comm
    if zero is None:  # the stack's default: the distributed optimizer where it has one
        zero = 1 if 1 in st.zero_stages else st.zero_stages[0]
    if recompute is None:
        recompute = "none" if "none" in st.recompute else st.recompute[-1]
    for name, v in (("tp", tp), ("pp", pp), ("cp", cp), ("ep", ep), ("etp", etp), ("vpp", vpp),
                    ("micro-batch", micro_batch), ("seq-len", seq_len)):
        if v is None or int(v) < 1:
            raise InputError(f"--{name} must be a positive integer, got {v}", hint=f"pass --{name} 1 or more")
    from ..limits import check_limit

    check_limit("seq_len", seq_len, flag="--seq-len")
    if gpus is not None:
        if int(gpus) < 1:
            raise InputError(f"--gpus must be a positive integer, got {gpus}", hint="pass --gpus 1 or more")
        check_limit("gpus", gpus)
    if global_batch is not None:
        check_limit("global_batch", global_batch, flag="--global-batch")
    if dp is None:
        if gpus is None:
            dp = 1
        else:
            inner = tp * pp * cp
            if gpus % inner:
                raise InputError(
                    f"--gpus {gpus} is not divisible by tp*pp*cp = {tp}*{pp}*{cp} = {inner}",
                    hint="choose degrees whose product divides the GPU count, or pass --dp",
                )
            dp = gpus // inner
    if dp < 1:
        raise InputError(f"--dp must be a positive integer, got {dp}")
    check_limit("gpus", tp * pp * cp * dp, flag="tp*pp*cp*dp (GPUs)")
    if global_batch is None:
        global_batch = dp * micro_batch * max(1, pp) * 4 if pp > 1 else dp * micro_batch
    if sequence_parallel is None:
        sequence_parallel = tp > 1 and st.sequence_parallel
    if recompute not in RECOMPUTE:
        from ..errors import closest

        raise InputError(f"unknown recompute {recompute!r}", suggestions=closest(recompute, RECOMPUTE),
                         hint="use none, selective or full")
    if dtype not in DTYPES:
        from ..errors import closest

        raise InputError(f"unknown dtype {dtype!r}", suggestions=closest(dtype, DTYPES), hint="use " + ", ".join(DTYPES))
    if cp_comm not in ("p2p", "allgather"):
        raise InputError(f"unknown CP communication {cp_comm!r}", hint="use p2p (ring) or allgather")
    if zero not in (0, 1, 2, 3):
        raise InputError(f"--zero must be 0, 1, 2 or 3, got {zero}")
    from .pipeline import PIPELINE_SCHEDULES

    pipeline_schedule = pipeline_schedule or "1f1b"
    if pipeline_schedule not in PIPELINE_SCHEDULES:
        from ..errors import closest

        raise InputError(f"unknown pipeline schedule {pipeline_schedule!r}",
                         suggestions=closest(pipeline_schedule, PIPELINE_SCHEDULES),
                         hint="use " + ", ".join(PIPELINE_SCHEDULES))
    if microbatch_group is not None and int(microbatch_group) < 0:
        raise InputError(f"--microbatch-group must be 1 or more (0 = pp), got {microbatch_group}")
    offload = offload or "none"
    if offload not in OFFLOAD:
        from ..errors import closest

        raise InputError(f"unknown offload {offload!r}", suggestions=closest(offload, OFFLOAD),
                         hint="use none, optimizer (master weights + Adam moments on the CPU) or params "
                              "(also the parameter shards and gradients; ZeRO-3 / FSDP)")
    if activation_offload_layers is not None and int(activation_offload_layers) < 0:
        raise InputError(f"--activation-offload-layers must be 0 or more, got {activation_offload_layers}",
                         hint="the number of transformer layers whose activations go to host memory (0 = none)")
    plan = ParallelPlan(
        tp=int(tp), pp=int(pp), dp=int(dp), cp=int(cp), ep=int(ep), etp=int(etp), vpp=int(vpp),
        micro_batch=int(micro_batch), global_batch=int(global_batch), seq_len=int(seq_len),
        sequence_parallel=bool(sequence_parallel and tp > 1), zero=int(zero), fsdp=bool(fsdp),
        recompute=recompute, dtype=dtype, flash_attention=flash_attention, overlap=overlap,
        grad_reduce_bytes=int(grad_reduce_bytes), uneven_pipeline=bool(uneven_pipeline),
        cp_comm=cp_comm, microbatch_group=int(microbatch_group or 0), pipeline_schedule=pipeline_schedule,
        offload=offload, activation_offload_layers=int(activation_offload_layers or 0), stack=st.id,
    )
    if gpus is not None and plan.num_gpus != gpus:
        raise InputError(
            f"degrees multiply to {plan.num_gpus} GPUs (tp {tp} x pp {pp} x dp {plan.dp} x cp {cp}) but --gpus is {gpus}",
            hint="make tp*pp*dp*cp equal the GPU count, or leave out --dp to derive it",
        )
    return plan


def check_plan(model: ModelSpec, plan: ParallelPlan) -> None:
    """Raise InputError with the first reason the plan cannot run this model on its software stack
    (the one plan rule: ``workload.rules``). A plan object that has passed for this model and stack is not
    checked again (``estimate`` checks the plan its caller may have checked already): the rules are a pure
    function of the three, and all are frozen."""
    stack = get_stack(plan.stack)
    hit = _PASSED.get(id(plan))
    if hit is not None and hit[0] is plan and hit[1] is model and hit[2] is stack:
        return
    reasons = _problems(model, plan, stack)
    if reasons:
        raise InputError(f"plan cannot run {model.id}: " + reasons[0],
                         hint="; ".join(reasons[1:]) if len(reasons) > 1
                         else "adjust the parallel degrees, or --zero / --recompute / --stack for a stack limit")
    if type(plan) is ParallelPlan:
        if len(_PASSED) >= 4096:
            _PASSED.clear()
        _PASSED[id(plan)] = (plan, model, stack)


# id(plan) -> (plan, model, stack) of the plans check_plan passed; the entry keeps them alive, so the id is
# not reused while it is held
_PASSED: dict[int, tuple] = {}


def plan_problems(model: ModelSpec, p: ParallelPlan) -> list[str]:
    """Every reason ``p`` cannot run ``model`` on the plan's software stack (``workload.rules``)."""
    return _problems(model, p, get_stack(p.stack))

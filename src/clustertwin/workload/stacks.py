"""Software stacks: what the training framework of a run can do, as one named preset.

The same layout runs at very different speeds on the 2021 Megatron-LM (no FlashAttention, no
communication overlap, FP32 gradient all-reduce, no distributed optimizer) and on today's Megatron-Core
(FlashAttention, overlapped TP/DP/PP communication, BF16 gradient reduce-scatter, distributed optimizer).
A stack fixes the engine options (``flash_attention``, ``overlap``, ``grad_reduce_bytes``, ``cp_comm``)
and which ZeRO stages and recompute modes the search may use, so that the planner answers "what should
I run *on my software*" and the validator models a published run with the software it used. Every
preset names the document its settings are read from; nothing here is fitted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import UnknownNameError

# the settings a stack fixes that a ParallelPlan carries and the engines take as keywords
ENGINE_OPTION_KEYS = ("flash_attention", "overlap", "grad_reduce_bytes", "cp_comm", "sequence_parallel")


@dataclass(frozen=True, slots=True, kw_only=True)
class SoftwareStack:
    id: str
    description: str
    source: str
    flash_attention: bool
    overlap: bool  # TP/CP/DP/PP communication overlapped with compute
    grad_reduce_bytes: int  # element size of the gradient buffer and its reduce-scatter / all-reduce
    zero_stages: tuple[int, ...]  # sharding modes the framework offers (1 = distributed optimizer)
    recompute: tuple[str, ...]  # activation-recompute modes it offers
    cp_comm: str = "p2p"  # context parallelism: "p2p" ring (overlapped) or "allgather" of K/V (exposed)
    sequence_parallel: bool = True  # Megatron sequence parallelism with TP (Korthikanti et al. 2022)
    context_parallel: bool = True  # the framework can split the sequence across GPUs
    uneven_pipeline: bool = True  # embedding / loss may take a layer slot (first/last stage one layer fewer)

    def engine_options(self) -> dict[str, Any]:
        """Keyword arguments of ``estimate_batch`` / ``make_plan`` that this stack fixes."""
        return {k: getattr(self, k) for k in ENGINE_OPTION_KEYS}

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "description": self.description, "source": self.source,
                **self.engine_options(), "zero_stages": list(self.zero_stages), "recompute": list(self.recompute),
                "context_parallel": self.context_parallel, "uneven_pipeline": self.uneven_pipeline}


DEFAULT_STACK = "megatron-core"

STACKS: dict[str, SoftwareStack] = {s.id: s for s in (
    SoftwareStack(
        id="megatron-core",
        description="Megatron-Core / Megatron-Bridge performance recipes (2024-26): FlashAttention, overlapped "
                    "communication, BF16 gradient reduce-scatter, distributed optimizer or FSDP",
        source="NVIDIA-NeMo/Megatron-Bridge performance recipes (grad_reduce_in_fp32=False, "
               "overlap_grad_reduce/overlap_param_gather=True, use_distributed_optimizer=True); "
               "docs/performance-summary-archive.md @067f987 (shared/validation rows mbridge-*)",
        flash_attention=True, overlap=True, grad_reduce_bytes=2, zero_stages=(0, 1, 2, 3),
        recompute=("none", "selective", "full"),
    ),
    SoftwareStack(
        id="megatron-lm-2021",
        description="Megatron-LM as in Narayanan et al. SC'21: unfused attention, no overlap, FP32 gradient "
                    "all-reduce, no distributed optimizer, no sequence or context parallelism, full activation recompute",
        source="Narayanan et al., SC'21, arXiv:2104.04473 Sec. 3-5 and examples/sc21 scripts "
               "(--activations-checkpoint-method uniform); distributed optimizer, sequence parallelism "
               "(Korthikanti et al. 2022) and context parallelism (Megatron-Core 2023) came later",
        # recompute: full only. Every SC'21 run recomputes (eq. (3) assumes it), and Sec. 5.7 / Fig. 17 finds
        # that without it the 145B model on (t, p) = (8, 16) does not fit once p micro-batches are in flight,
        # while Korthikanti's activation count (workload/memory.py) puts that case at ~71 GB: the 2021
        # code held more than the formula, so "none" would be offered where it did not fit.
        flash_attention=False, overlap=False, grad_reduce_bytes=4, zero_stages=(0,),
        recompute=("full",), sequence_parallel=False, context_parallel=False, uneven_pipeline=False,
    ),
    SoftwareStack(
        id="megatron-lm-2022",
        description="Megatron-LM as in Korthikanti et al. 2022: the 2021 stack plus sequence parallelism and "
                    "selective recompute",
        source="Korthikanti et al., 'Reducing Activation Recomputation in Large Transformer Models', "
               "arXiv:2205.05198 Sec. 4-5",
        flash_attention=False, overlap=False, grad_reduce_bytes=4, zero_stages=(0,),
        recompute=("none", "selective", "full"), context_parallel=False, uneven_pipeline=False,
    ),
    SoftwareStack(
        id="pytorch-fsdp",
        description="PyTorch FSDP stack as in Llama 3 (4D parallelism): FlashAttention, overlapped communication, "
                    "FP32 gradient reduce-scatter, FSDP sharding (no shard / grads+optimizer / full), "
                    "all-gather-based context parallelism",
        source="Llama Team, 'The Llama 3 Herd of Models', arXiv:2407.21783 Sec. 3.3.2 (FSDP 'shards optimizer "
               "states and gradients', 'reduce-scatter gradients in FP32', 'all-gather based' CP)",
        flash_attention=True, overlap=True, grad_reduce_bytes=4, zero_stages=(0, 2, 3),
        recompute=("none", "selective", "full"), cp_comm="allgather",
    ),
)}


def get_stack(name: str | None) -> SoftwareStack:
    """The preset called ``name`` (default: Megatron-Core); unknown names suggest the closest ones."""
    key = (name or DEFAULT_STACK).strip().lower()
    if key not in STACKS:
        raise UnknownNameError("software stack", name or "", tuple(STACKS))
    return STACKS[key]

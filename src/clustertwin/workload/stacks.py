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

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from ..errors import InputError, UnknownNameError
from ..registry import Registry

# share of the decoder layers an NVFP4 recipe that keeps a BF16 tail runs in BF16 (Mishra et al., 'Pretraining
# LLMs with NVFP4', arXiv:2509.25149 Sec. 4: ~15 %; torchtitan nvfp4.md: layers 0-26 of Llama 3 8B's 32 NVFP4);
# the stacks that keep one set SoftwareStack.nvfp4_bf16_layer_share to it (workload/memory.py nvfp4_layers)
NVFP4_BF16_LAYER_SHARE = 0.15

# the settings a stack fixes that a ParallelPlan carries and the engines take as keywords
ENGINE_OPTION_KEYS = ("flash_attention", "overlap", "grad_reduce_bytes", "cp_comm", "sequence_parallel", "stack")


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
    # how the CP attention core runs: "fused" (TE's p2p ring merges each step's partial output in the
    # output dtype; an all-gather stack attends to the gathered K,V in one kernel, Llama 3 Sec. 3.3.2) or
    # "torch-ring" (PyTorch's torch.distributed.tensor.experimental context_parallel: whatever the rotate
    # method, one SDPA call per K,V chunk, the partial outputs merged and the dQ / dK,dV accumulated in FP32,
    # _ContextParallelOptions.convert_to_f32 = True; _templated_ring_attention(_backward))
    cp_attention: str = "fused"
    sequence_parallel: bool = True  # Megatron sequence parallelism with TP (Korthikanti et al. 2022)
    # the sequence-parallel TP collectives run beside the layer's GEMMs (TE userbuffers ring exchange in
    # Megatron; async TP in torchtitan): False = the framework's default TP issues them between its GEMMs
    tp_overlap: bool = True
    context_parallel: bool = True  # the framework can split the sequence across GPUs
    uneven_pipeline: bool = True  # embedding / loss may take a layer slot (first/last stage one layer fewer)
    # Sharded data parallelism (ZeRO-3 / FSDP) as the framework implements it (docs/modelling.md "Sharded
    # data parallelism"): which implementation, how many layers' parameter all-gathers are issued ahead of
    # the compute that needs them, and whether the gathers run on their own stream beside the compute.
    fsdp_impl: str = "megatron-fsdp"  # megatron-fsdp | fsdp1 | fsdp2 | zero3-2021 | zero3 (DeepSpeed 2022+)
    fsdp_prefetch: int = 1  # layers of parameter all-gather in flight ahead of compute
    # share of min(sharded-DP communication, compute) of a micro-batch that hides behind the compute
    # (1 = a separate stream with prefetch hides all of it but the first unit; see docs/modelling.md)
    fsdp_overlap: float = 1.0
    # parameter gathers and gradient reduce-scatters run on rings whose every hop crosses the scale-out
    # network (no node-aware aggregation over the host's NICs)
    fsdp_flat_ring: bool = False
    # fused-attention kernel generation: its rate relative to the chip's attention_efficiency (FA2-class = 1)
    attention_kernel_speed: float = 1.0
    # fused-attention library: "flash" (FlashAttention-2 class: the chip's attention_efficiency) or "cudnn"
    # (Transformer Engine's FusedAttention, cuDNN F16_arbitrary_seqlen: the chip's attention_efficiency_cudnn).
    # TE's backend selection disables FlashAttention "to give FusedAttention preference on Hopper+ for
    # performance reasons" (transformer_engine/pytorch/attention/dot_product_attention/utils.py,
    # get_attention_backend), so every TE-based stack runs cuDNN attention on sm90 and newer; "fa2": PyTorch
    # SDPA's FLASH backend, the FlashAttention-2 kernels bundled with torch (the chip's attention_efficiency_fa2:
    # FA2 is the FlashAttention class on A100 / H100, but on Blackwell it runs its sm80 code path)
    attention_backend: str = "flash"
    # FP8/FP4 weights quantised once per step and re-used by every micro-batch (Transformer Engine: Megatron
    # passes is_first_microbatch to TE modules) instead of in every forward (torchao Float8Linear)
    fp8_weight_cache: bool = False
    # the output layer (logits GEMM) runs in the step's FP8 / FP4 dtype (True: a plain torchao
    # convert_to_float8_training without a module filter converts every nn.Linear); False: it stays BF16, as in
    # Megatron-Core, whose GPTModel.output_layer is a tensor_parallel.ColumnParallelLinear (not a Transformer
    # Engine module) called after the TransformerBlock, outside TE's fp8_autocast (megatron/core/models/gpt/
    # gpt_model.py); NVIDIA's FP8 / MXFP8 / NVFP4 recipes therefore keep the logits in BF16. torchtitan and
    # llm-foundry keep it in BF16 as well (see their presets)
    output_layer_low_precision: bool = True
    # implementation efficiency of the framework's compute kernels relative to the Megatron-Core / TE kernels
    # the chip constants describe (1 = same): every GEMM, attention and element-wise kernel of a layer and
    # the output layer run 1/compute_efficiency as long. FITTED per framework (efficiency.yaml `fitted`);
    # megatron-deepspeed's is DERIVED from a published pair (see its preset)
    compute_efficiency: float = 1.0
    # what `recompute = selective` recomputes: "attention-core" (Megatron, Korthikanti et al.) or
    # "half-forward" (torchtitan selective AC: every 2nd layer, or every 2nd matmul of each layer)
    selective_recompute: str = "attention-core"
    # what `recompute = full` re-runs: "layer" (Megatron / torch.utils.checkpoint: the whole layer forward again)
    # or "needed" (JAX jax.checkpoint: only the forward ops whose outputs the backward reads; the MLP's down
    # projection (fc2), whose output only feeds the residual add, is dead code in the recompute; see jax-xla)
    full_recompute: str = "layer"
    # bytes the loss holds per logit element at its peak: Megatron's fused vocab-parallel cross-entropy
    # keeps FP32 logits (4); an unfused PyTorch loss the BF16 logits + FP32 copy + FP32 gradient (10)
    loss_bytes_per_logit: float = 4.0
    # FP8 / MXFP8 / NVFP4 linears keep the inputs they save for backward in 8 bit (Transformer Engine,
    # DeepSeek-V3 Sec. 3.3.3); False: they save the BF16 input and cast it again in backward (torchao)
    fp8_activation_cache: bool = True
    # GEMM dtypes whose kernels do not dispatch as aten.mm, so torchtitan's per-op SAC policy saves none of
    # their outputs (torchao's NVFP4 training GEMM is a raw autograd Function: torchtitan nvfp4.py)
    sac_opaque_dtypes: tuple[str, ...] = ()
    # share of the decoder layers whose linears an NVFP4 step runs in BF16 (the rest NVFP4). Megatron-Core /
    # -Bridge run every layer in NVFP4 unless first_last_layers_bf16 is set, and its NVFP4 performance recipe
    # does not set it (Megatron-Bridge training/mixed_precision.py bf16_with_nvfp4_mixed; MixedPrecisionConfig
    # first_last_layers_bf16 = False; the recipes' dumped configs, e.g. scripts/performance/dryrun_configs/
    # qwen/qwen3_235b_a22b_pretrain_gb200_nvfp4_v1.yaml: first_last_layers_bf16 false): 0. torchtitan's NVFP4
    # recipe keeps the final blocks in BF16 (docs nvfp4.md: layers 0-26 of Llama 3 8B's 32 NVFP4), as the NVFP4
    # pretraining recipe does (Mishra et al. arXiv:2509.25149 Sec. 4: ~15 %): workload/memory.py
    # NVFP4_BF16_LAYER_SHARE
    nvfp4_bf16_layer_share: float = 0.0
    # NVFP4 steps quantise the wgrad operands (X, dY) through a random Hadamard transform in a separate fused
    # transform + columnwise-cast kernel (Transformer Engine NVFP4BlockScaling, on by default: sim/components/fp8.py
    # `nvfp4-rht`); False: the plain NVFP4 cast for every operand (torchtitan's torchao recipe: not modelled)
    nvfp4_rht: bool = True
    # MXFP8 steps quantise every operand layout in its own kernel from the BF16 tensor (torchao's mx_mm: dim0 casts
    # in the forward, dim1 casts of W, dY and the saved BF16 X in the backward; sim/components/fp8.py
    # `mxfp8-per-layout`); False: one kernel writes both layouts (Transformer Engine's MXFP8 quantizer)
    mxfp8_cast_per_layout: bool = False
    # bytes of each of Adam's two moments (FP32 4; DeepSeek-V3 Sec. 3.3.3 keeps them in BF16: 2)
    adam_moment_bytes: float = 4.0
    # pipeline schedules the framework runs (workload/pipeline.py): 1f1b (interleaved with vpp > 1),
    # zb-h1 (zero bubble), dualpipe (DeepSeek's bidirectional pipeline with EP overlap)
    pipeline_schedules: tuple[str, ...] = ("1f1b",)
    # how the routed experts' GEMMs run: "te-grouped-linear" (Megatron: TE GroupedLinear, one GEMM kernel per
    # local expert, prepared and launched per expert on the host, and the dropless dispatcher copies the
    # tokens-per-expert counts to the host in every MoE layer, EP 1 included) or "grouped-mm" (torchtitan:
    # torch._grouped_mm, one kernel for all local experts with device-side offsets; the only device-to-host
    # sync is its EP dispatch's all-to-all split sizes, torchtitan/distributed/expert_parallel.py
    # _token_dispatch: "this would incur a device-to-host sync", so none at EP 1) or "deepspeed-einsum"
    # (DeepSpeed-MoE, GShard-style: capacity-factor gating with static shapes and no host sync, einsum
    # dispatch / combine over an [S, E, C] mask, a Python loop over the local experts; sim/components/moe.py)
    # or "megablocks-gmm" (MegaBlocks dMoE: one grouped GEMM per projection, group sizes copied to the host in
    # every MoE layer)
    moe_experts_impl: str = "te-grouped-linear"
    frameworks: tuple[str, ...] = ()  # `framework` values of published runs this preset models (frameworks.yaml)
    # host-memory offload the framework offers (ParallelPlan.offload; workload/memory.py): "optimizer" (master
    # weights + Adam moments on the CPU, stepped there), "params" (also the parameter shards and gradients)
    offload_modes: tuple[str, ...] = ("none",)
    # activation CPU offload of whole layers between forward and backward (Megatron --cpu-offloading: TE's
    # CPU offload context; Megatron-Core refuses it with pp > 1 or activation recompute)
    activation_offload: bool = False
    # DeepSpeed ZeRO's gradient bucket: ``reduce_bucket_size`` elements (default 5e8, DeepSpeed config docs)
    # in the gradient dtype, allocated in every backward as the contiguous-gradients buffer (stage_1_and_2.py
    # ``ipg_buffer``; ZeRO-3 stage3.py the ipg bucket); 0 = no such buffer (Megatron / FSDP reduce in place)
    zero_bucket_elements: float = 0.0
    # an EP all-to-all overlap the framework offers that the step model does not price (the all-to-all of a
    # MoE layer whose EP group crosses scale-up domains stays exposed; docs/planner.md "EP all-to-all
    # overlap"): the sourced name printed as a caveat (``layout_caveats``); "" = none
    unpriced_ep_overlap: str = ""
    # sharded data parallelism (ZeRO 2/3) with MoE or with pipeline parallelism is code-supported but not
    # benchmark-validated by the framework: the source printed as a caveat; "" = no caveat
    fsdp_combination_caveat: str = ""
    # FP8 (tensorwise) steps all-gather the sequence-parallel activations and output gradients in FP8 (torchao's
    # Float8ColwiseParallel / Float8RowwiseParallel / PrepareFloat8ModuleInput, which torchtitan's TP plan uses for
    # tensorwise Float8); the reduce-scatters stay 16-bit. False: every TP collective moves 16-bit elements
    tp_fp8_allgather: bool = False
    # the sequence-parallel all-gather / reduce-scatter run on the sequence dimension of a [batch, seq, hidden]
    # tensor (DTensor Shard(1)), which PyTorch's functional collectives gather / scatter along dim 0 and re-lay
    # with torch.cat(torch.chunk(...)) (_functional_collectives.py, gather_dim / scatter_dim != 0): one extra read
    # and write of the whole gathered output / unscattered input per collective, on the compute stream
    tp_seq_dim_copy: bool = False
    # the model code expands the grouped K,V heads to one per query head before the attention call
    # (torchtitan's llama3 Attention: repeat_kv(xk, n_rep) / repeat_kv(xv, n_rep), then SDPA), so whatever
    # handles the attention inputs - PyTorch's context_parallel K,V all-gather, its FP32 dK,dV accumulators and
    # rotation - carries n_heads / n_kv_heads times the GQA volume
    sdpa_repeat_kv: bool = False
    # RoPE with a YaRN concentration factor (ModelSpec.rope_mscale != 1) runs unfused: Megatron-Core's
    # apply_rotary_pos_emb (megatron/core/models/common/embeddings/rope_utils.py) warns "mscale=... is not
    # supported by TE's fused RoPE. Using unfused implementation." and calls _apply_rotary_pos_emb_bshd (eager
    # t * cos + rotate_half(t) * sin, then a cat): sim/components/elementwise.py prices its passes. False: RoPE is
    # priced as one fused kernel whatever the model's mscale (frameworks whose RoPE code was not read)
    rope_mscale_unfused: bool = False

    def engine_options(self) -> dict[str, Any]:
        """Keyword arguments of ``estimate_batch`` / ``make_plan`` that this stack fixes."""
        return {k: (self.id if k == "stack" else getattr(self, k)) for k in ENGINE_OPTION_KEYS}

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "description": self.description, "source": self.source,
                **self.engine_options(), "zero_stages": list(self.zero_stages), "recompute": list(self.recompute),
                "context_parallel": self.context_parallel, "uneven_pipeline": self.uneven_pipeline,
                "fsdp_impl": self.fsdp_impl, "fsdp_prefetch": self.fsdp_prefetch, "fsdp_overlap": self.fsdp_overlap,
                "fsdp_flat_ring": self.fsdp_flat_ring, "attention_kernel_speed": self.attention_kernel_speed,
                "attention_backend": self.attention_backend, "cp_attention": self.cp_attention,
                "fp8_weight_cache": self.fp8_weight_cache,
                "compute_efficiency": self.compute_efficiency, "tp_overlap": self.tp_overlap,
                "selective_recompute": self.selective_recompute, "full_recompute": self.full_recompute,
                "pipeline_schedules": list(self.pipeline_schedules),
                "loss_bytes_per_logit": self.loss_bytes_per_logit, "fp8_activation_cache": self.fp8_activation_cache,
                "sac_opaque_dtypes": list(self.sac_opaque_dtypes), "adam_moment_bytes": self.adam_moment_bytes,
                "nvfp4_bf16_layer_share": self.nvfp4_bf16_layer_share, "nvfp4_rht": self.nvfp4_rht,
                "mxfp8_cast_per_layout": self.mxfp8_cast_per_layout,
                "moe_experts_impl": self.moe_experts_impl,
                "offload_modes": list(self.offload_modes), "activation_offload": self.activation_offload,
                "zero_bucket_elements": self.zero_bucket_elements, "unpriced_ep_overlap": self.unpriced_ep_overlap,
                "fsdp_combination_caveat": self.fsdp_combination_caveat,
                "tp_fp8_allgather": self.tp_fp8_allgather, "tp_seq_dim_copy": self.tp_seq_dim_copy,
                "sdpa_repeat_kv": self.sdpa_repeat_kv}


DEFAULT_STACK = "megatron-core"

# The presets, in the order listings show them (`plan --list-stacks`). A preset that shares a framework's
# settings with another is written as that one with what differs replaced.
STACKS: Registry[SoftwareStack] = Registry("software stack")


def register_stack(stack: SoftwareStack) -> SoftwareStack:
    """Add a preset (an id registered twice is an error)."""
    return STACKS.add(stack.id, stack)


# Megatron-Core's EP all-to-all overlap: the dispatch / combine of one micro-batch run beside the computation
# of another in the 1F1B steady state (--overlap-moe-expert-parallel-comm, with --delay-wgrad-compute;
# Megatron-Bridge comm_overlap.overlap_moe_expert_parallel_comm, set by the recipes' moe_a2a_overlap=True, e.g.
# scripts/performance/configs/qwen/qwen3_workload_base_configs.py QWEN3_235B_A22B_PRETRAIN_CONFIG_H100_*_V1).
# Not priced: hiding the all-to-all at the layout of the published run whose recipe sets it (mbridge-270, EP 32
# over InfiniBand) predicts 1.40x its measured rate, pricing it exposed 0.97x (docs/planner.md)
_MCORE_EP_OVERLAP = ("Megatron-Core's EP all-to-all overlap (--overlap-moe-expert-parallel-comm; Megatron-Bridge "
                     "moe_a2a_overlap) is not priced")
# Megatron-Bridge skills/perf-techniques/megatron-fsdp/card.yaml (validated_on 2026-03-14): performance claims
# "doc_only", follow-up "Validate TP / PP / CP / EP compatibility matrix explicitly"; docs/training/megatron-fsdp.md:
# "intended to work with" PP and EP, "not ... fully benchmark-proven for every combination"; every published
# Megatron-FSDP run (performance-summary tables) is a dense model at PP 1
_MCORE_FSDP_CAVEAT = ("Megatron-FSDP with pipeline or expert parallelism is code-supported, not benchmark-validated "
                      "(Megatron-Bridge megatron-fsdp card, 2026-03-14; every published Megatron-FSDP run is a "
                      "dense model at PP 1)")

_MEGATRON_CORE = register_stack(
    SoftwareStack(
        id="megatron-core",
        description="Megatron-Core / Megatron-Bridge performance recipes (2024-26): FlashAttention, overlapped "
                    "communication, BF16 gradient reduce-scatter, distributed optimizer or FSDP",
        source="NVIDIA-NeMo/Megatron-Bridge performance recipes (grad_reduce_in_fp32=False, "
               "overlap_grad_reduce/overlap_param_gather=True, use_distributed_optimizer=True); "
               "docs/performance-summary-archive.md @067f987 (shared/validation rows mbridge-*)",
        flash_attention=True, overlap=True, grad_reduce_bytes=2, zero_stages=(0, 1, 2, 3),
        recompute=("none", "selective", "full"), attention_backend="cudnn",  # TE DotProductAttention
        fp8_weight_cache=True, output_layer_low_precision=False,  # BF16 output layer (non-TE ColumnParallelLinear)
        # Megatron-Bridge docs/training/cpu-offloading.md: optimizer offload (HybridDeviceOptimizer, needs the
        # distributed optimizer) and layer-wise activation offload (cpu_offloading_num_layers; pp 1, no recompute)
        offload_modes=("none", "optimizer"), activation_offload=True,
        unpriced_ep_overlap=_MCORE_EP_OVERLAP, fsdp_combination_caveat=_MCORE_FSDP_CAVEAT,
        rope_mscale_unfused=True,  # Megatron-Core rope_utils.apply_rotary_pos_emb: unfused when mscale != 1
    ))
_MEGATRON_LM_2021 = register_stack(
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
        # Megatron-LM had no MoE layer before Megatron-Core (2023): MoE runs on the 2021/2022 code are
        # Megatron-DeepSpeed's (--num-experts builds deepspeed.moe.layer.MoE; frameworks.yaml megatron-deepspeed)
        moe_experts_impl="deepspeed-einsum",
    ))
register_stack(replace(
    _MEGATRON_LM_2021,
    id="megatron-lm-2022",
    description="Megatron-LM as in Korthikanti et al. 2022: the 2021 stack plus sequence parallelism and "
                "selective recompute",
    source="Korthikanti et al., 'Reducing Activation Recomputation in Large Transformer Models', "
           "arXiv:2205.05198 Sec. 4-5",
    recompute=("none", "selective", "full"), sequence_parallel=True,
))
# Megatron-DeepSpeed (microsoft/Megatron-DeepSpeed, BigScience's fork for BLOOM): the Megatron-LM 2021/22 model code
# and tensor parallelism (megatron-lm-2022), DeepSpeed's PipelineEngine for pipeline parallelism and DeepSpeed ZeRO
# for data parallelism. With a pipeline DeepSpeed refuses ZeRO 2 and 3 (deepspeed/runtime/pipe/engine.py:
# "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism"); BLOOM-176B ran ZeRO stage 1 with TP 4 x PP 12
# (Le Scao et al. arXiv:2211.05100 Sec. 3.4), so the preset offers ZeRO 0 and 1. MoE layers are DeepSpeed-MoE's
# (--num-experts builds deepspeed.moe.layer.MoE), as megatron-lm-2021 already says
register_stack(replace(
    _MEGATRON_LM_2021,
    id="megatron-deepspeed",
    description="Megatron-DeepSpeed (2021-22): the megatron-lm-2022 settings (no FlashAttention, no communication "
                "overlap, FP32 gradient all-reduce) with DeepSpeed's pipeline engine and ZeRO-1 data parallelism",
    source="microsoft/Megatron-DeepSpeed; deepspeed/runtime/pipe/engine.py (ZeRO-2/3 incompatible with pipeline "
           "parallelism); BLOOM-176B, Le Scao et al. arXiv:2211.05100 Sec. 3.4 (ZeRO stage 1, TP 4, PP 12); "
           "Smith et al. MT-NLG arXiv:2201.11990 Sec. 2-3 (TP 8 x PP 35 on DeepSpeed's pipeline, 1F1B)",
    recompute=("none", "selective", "full"), sequence_parallel=False, zero_stages=(0, 1),
    # DERIVED from a published same-hardware pair (not fitted to this preset's own errors): MT-NLG 530B on
    # Selene (Smith et al. arXiv:2201.11990 Sec. 2: 60.1 s per iteration, 2,240 A100 80GB, TP 8 x PP 35, GBS 1920,
    # micro-batch 1, full recompute) and Megatron-LM's run of the same model and layout on the same machine
    # (Narayanan et al. SC'21 Table 1: 2,520 GPUs, batch 2520; public training.csv mlm-sc21-t1-9). With the
    # model pricing both schedules (bubble, DP communication), the Megatron-LM run is predicted -8.2 % (the A100
    # chip residual); 0.82 is the value that puts the MT-NLG run at the same -8.2 %: DeepSpeed's pipeline engine
    # and Megatron-DeepSpeed's 2021-22 kernels take 1/0.82 as long per pipeline slot as Megatron-LM's. Out of
    # sample (benchmarks/check_heldout_training.py): BLOOM-176B (Le Scao et al. arXiv:2211.05100, Jean Zay,
    # TP 4 x PP 12, Omni-Path) -16.4 -> +0.3 %, MT-NLG at 2,800 / 3,360 GPUs -24.1 / -26.2 -> -9.3 / -11.8 %
    compute_efficiency=0.82,
))
register_stack(
    SoftwareStack(
        id="pytorch-fsdp",
        description="PyTorch FSDP stack as in Llama 3 (4D parallelism): FlashAttention, overlapped communication, "
                    "FP32 gradient reduce-scatter, FSDP sharding (no shard / grads+optimizer / full), "
                    "all-gather-based context parallelism",
        source="Llama Team, 'The Llama 3 Herd of Models', arXiv:2407.21783 Sec. 3.3.2 (FSDP 'shards optimizer "
               "states and gradients', 'reduce-scatter gradients in FP32', 'all-gather based' CP)",
        flash_attention=True, overlap=True, grad_reduce_bytes=4, zero_stages=(0, 2, 3),
        recompute=("none", "selective", "full"), cp_comm="allgather", fsdp_impl="fsdp1",
        offload_modes=("none", "params"),  # FSDP CPUOffload(offload_params=True): params, grads, optimizer step
    ))
register_stack(replace(
    STACKS.get("pytorch-fsdp"),
    id="hf-fsdp",
    description="Hugging Face Transformers models under PyTorch FSDP (Trainer / Accelerate FSDP plugin): the "
                "pytorch-fsdp settings with the Transformers loss (FP32 upcast of the logits)",
    source="huggingface/transformers loss/loss_utils.py ForCausalLMLoss (logits.float() then cross_entropy: 12 B "
           "per logit at the backward peak); accelerate FSDP plugin (FullyShardedDataParallel, FULL_SHARD / "
           "SHARD_GRAD_OP, CPUOffload)",
    loss_bytes_per_logit=12.0, recompute=("none", "full"), sequence_parallel=False, context_parallel=False,
))
register_stack(replace(
    _MEGATRON_CORE,  # the same engine settings as Megatron-Core
    id="megatron-bridge",
    description="Megatron-Bridge (NeMo) performance recipes on Megatron-Core: FlashAttention/cuDNN attention, "
                "TE communication overlap, CUDA graphs, BF16 gradient reduce-scatter, distributed optimizer "
                "or Megatron-FSDP",
    source="NVIDIA-NeMo/Megatron-Bridge scripts/performance recipes (grad_reduce_in_fp32=False, "
           "overlap_grad_reduce/overlap_param_gather=True, use_distributed_optimizer=True, "
           "use_megatron_fsdp for the FSDP recipes); docs/performance-summary.md",
))
# Meta's metaseq (OPT, 2021-22): FairScale FullyShardedDataParallel over Megatron-LM (2021 mpu) tensor parallelism,
# FP16 weights with dynamic loss scaling and FP32 Adam state sharded over the hosts (Zhang et al., 'OPT: Open
# Pre-trained Transformer Language Models', arXiv:2205.01068 Sec. 2.4: "Fully Sharded Data Parallel ... with
# Megatron-LM Tensor Parallelism", up to 147 TFLOP/s per GPU on 992 80GB A100). OPT-175B was trained before
# FlashAttention (arXiv:2205.14135, 2022-05): Megatron's fused softmax, no fused attention; Megatron-LM's 2021 TP has
# no sequence parallelism and runs its all-reduces between the GEMMs. ASSUMED: FairScale's default
# fp32_reduce_scatter = False, so the gradient reduce-scatter runs in FP16 (2 B)
register_stack(replace(
    STACKS.get("pytorch-fsdp"),
    id="metaseq",
    description="metaseq (OPT, 2021-22): FairScale FSDP + Megatron-LM 2021 tensor parallelism, FP16 weights and "
                "gradient reduce-scatter, unfused attention, no sequence or context parallelism",
    source="Zhang et al., OPT, arXiv:2205.01068 Sec. 2.4 (FSDP with Megatron-LM tensor parallelism, FP16 weights, "
           "FP32 Adam state sharded); FlashAttention came later (arXiv:2205.14135); grad_reduce_bytes 2 is an "
           "ASSUMPTION (FairScale FSDP fp32_reduce_scatter default False)",
    flash_attention=False, grad_reduce_bytes=2, recompute=("none", "full"), sequence_parallel=False,
    tp_overlap=False, context_parallel=False, uneven_pipeline=False,
))
# JAX / XLA SPMD training (MaxText, Pax / praxis, the NVIDIA JAX-Toolbox containers): parameters, gradients and
# optimizer state sharded over the fsdp / data mesh axis, XLA all-gathering each layer's weights before use and
# reduce-scattering its gradients, its latency-hiding scheduler running them beside the compute. Two things differ
# from the PyTorch FSDP stack it was modelled with before:
# - attention: NVIDIA's recipes run cuDNN fused attention through Transformer Engine (MaxText
#   attention=cudnn_flash_te, dgxc-benchmarking maxtext/configure.sh @0b71cfda; Pax ENABLE_TE=1 with
#   NVTE_FUSED_ATTN=1, paxml/configure.sh @143b90dd), the chip's attention_efficiency_cudnn
# - full recompute: jax.checkpoint re-runs only the forward ops whose outputs the backward reads: remat_partial_eval
#   (jax/_src/ad_checkpoint.py) DCEs the staged recompute (pe.dce_jaxpr(jaxpr_staged, ...)). A linear layer's
#   backward reads its input and weight, not its output, so the MLP down projection (fc2), whose output only feeds
#   the residual add, is not recomputed; every other GEMM of the layer feeds a norm, an activation or attention
#   whose backward reads it. MaxText's remat_policy full (configs/base.yml) and Pax's SAVE_NOTHING are this
register_stack(replace(
    STACKS.get("pytorch-fsdp"),
    id="jax-xla",
    description="JAX / XLA SPMD (MaxText, Pax): parameters sharded over the fsdp mesh axis, per-layer weight "
                "all-gather and gradient reduce-scatter scheduled beside the compute by XLA, cuDNN fused attention "
                "(Transformer Engine), jax.checkpoint recompute (only what the backward reads)",
    source="NVIDIA/dgxc-benchmarking maxtext/configure.sh @0b71cfda (attention=cudnn_flash_te, remat_policy, "
           "xla_gpu_enable_latency_hiding_scheduler, pipelined all-gather / reduce-scatter) and paxml/configure.sh "
           "@143b90dd (ENABLE_TE=1, NVTE_FUSED_ATTN=1); jax/_src/ad_checkpoint.py remat_partial_eval "
           "(pe.dce_jaxpr of the staged recompute)",
    attention_backend="cudnn", full_recompute="needed", context_parallel=False, offload_modes=("none",),
))
# Megatron-LM's own training scripts (pretrain_gpt.py, 2023 on, built on Megatron-Core): the megatron-core
# engine settings, but with --bf16 megatron/training/arguments.py forces FP32 gradient accumulation and
# reduction ("bfloat16 requires gradient accumulation and all-reduce to be done in fp32":
# accumulate_allreduce_grads_in_fp32 = True unless --grad-reduce-in-bf16), so the DDP gradient buffer holds
# 4 B per parameter (tools/get_training_info/README.md prints "Gradients: 24.7GB" for 6.64 B parameters).
# The Megatron-Bridge / NeMo recipes (megatron-core / megatron-bridge presets) set grad_reduce_in_fp32=False.
register_stack(replace(
    _MEGATRON_CORE,
    id="megatron-lm",
    description="Megatron-LM training scripts on Megatron-Core (2023+): the megatron-core settings with FP32 "
                "gradient accumulation and reduce-scatter (Megatron-LM's --bf16 default)",
    source="NVIDIA/Megatron-LM megatron/training/arguments.py (args.bf16: 'bfloat16 requires gradient "
           "accumulation and all-reduce to be done in fp32', accumulate_allreduce_grads_in_fp32 = True unless "
           "--grad-reduce-in-bf16); tools/get_training_info/README.md (Gradients 4 B per parameter)",
    grad_reduce_bytes=4,
))
register_stack(
    SoftwareStack(
        id="deepspeed-zero3-2021",
        description="DeepSpeed ZeRO-3 (2021) on the Megatron-DeepSpeed GPT model: unfused attention, parameters "
                    "all-gathered layer by layer in every forward, recompute-forward and backward with little "
                    "overlap, FP16 gradient reduce-scatter, no tensor / pipeline / sequence parallelism",
        source="Narayanan et al. SC'21 arXiv:2104.04473 Sec. 5.5 / Table 2 (ZeRO-3 'without model parallelism'; "
               "the 175B run does not speed up from 768 to 1536 GPUs); Rajbhandari et al. ZeRO-Infinity "
               "arXiv:2104.07857 Sec. 6-7 (per-layer parameter all-gather before use, prefetch bucket)",
        flash_attention=False, overlap=False, grad_reduce_bytes=2, zero_stages=(0, 1, 2, 3),
        recompute=("none", "full"), sequence_parallel=False, context_parallel=False, uneven_pipeline=False,
        # SC'21 Table 2: the 175B run takes the same step on 768 and 1536 GPUs (66.8 s) while its compute
        # quarters: the parameter traffic per GPU (3 gathers + 1 reduce-scatter of all fp16 weights,
        # independent of the GPU count) moves at ~one HDR NIC per GPU (4 x 350 GB / 66.8 s = 21 GB/s),
        # i.e. rings whose hops all cross the network. fsdp_overlap is FITTED (efficiency.yaml `fitted`).
        fsdp_impl="zero3-2021", fsdp_prefetch=1, fsdp_overlap=0.6, fsdp_flat_ring=True,
        moe_experts_impl="deepspeed-einsum",  # DeepSpeed-MoE (deepspeed/moe/sharded_moe.py)
        offload_modes=("none", "optimizer", "params"), zero_bucket_elements=5e8,  # ZeRO-Offload / -Infinity
    ))
register_stack(
    SoftwareStack(
        id="deepspeed",
        description="DeepSpeed ZeRO (2022+): FlashAttention models, gradient reduce-scatter in the model dtype, "
                    "ZeRO-3 parameters all-gathered per submodule on a separate stream with prefetch "
                    "(overlap_comm), again for the recompute forward",
        source="DeepSpeed configuration docs (zero_optimization: overlap_comm, stage3_prefetch_bucket_size, "
               "stage3_max_live_parameters; communication_data_type default = the model dtype); Rajbhandari et "
               "al. ZeRO-Infinity arXiv:2104.07857 Sec. 6-7 (per-layer gather before use, prefetch). "
               "fsdp_overlap keeps its unfitted prior 1 (no validation row of this stack)",
        flash_attention=True, overlap=True, grad_reduce_bytes=2, zero_stages=(0, 1, 2, 3),
        recompute=("none", "full"), sequence_parallel=False, context_parallel=False, uneven_pipeline=False,
        fsdp_impl="zero3", fsdp_prefetch=1,
        moe_experts_impl="deepspeed-einsum",  # DeepSpeed-MoE (deepspeed/moe/sharded_moe.py)
        # offload_optimizer (ZeRO-Offload, stage 1-3) and offload_param (ZeRO-Infinity, stage 3) to the CPU
        offload_modes=("none", "optimizer", "params"), zero_bucket_elements=5e8,
        # DeepSpeed trains the user's model; published DeepSpeed runs (and the Hugging Face Trainer /
        # Accelerate integration) use Hugging Face Transformers models, whose loss upcasts the logits
        # (transformers loss/loss_utils.py ForCausalLMLoss: logits.float(), then cross_entropy): at the backward
        # peak the saved FP32 log_softmax output, nll_loss's dense FP32 gradient and log_softmax's FP32 input
        # gradient, 12 B per logit (as the eager torchtitan-2024 loss). ASSUMPTION: a Hugging Face model
        loss_bytes_per_logit=12.0,
    ))
register_stack(
    SoftwareStack(
        id="llm-foundry",
        description="MosaicML llm-foundry (Composer + PyTorch FSDP1, FULL_SHARD or SHARD_GRAD_OP): FlashAttention "
                    "MPT blocks, forward/backward prefetch of one FSDP unit (one transformer block), no tensor, "
                    "pipeline or context parallelism",
        source="mosaicml/llm-foundry scripts/train/benchmarking/README.md and yamls (fsdp_config: "
               "FULL_SHARD / SHARD_GRAD_OP, activation_checkpointing, forward_prefetch, limit_all_gathers); "
               "PyTorch FSDP paper arXiv:2304.11277 Sec. 3.3-4 (backward prefetch, rate limiter)",
        flash_attention=True, overlap=True, grad_reduce_bytes=4, zero_stages=(0, 2, 3),
        recompute=("none", "full"), sequence_parallel=False, context_parallel=False, uneven_pipeline=False,
        # llm-foundry's 2023 MPT blocks ran FlashAttention v1 / Triton kernels, which FlashAttention-2
        # outruns by 1.7-3.0x (FA v1) and 1.3-2.5x (Triton) (Dao, arXiv:2307.08691 Sec. 4.1): 1/1.7 taken
        # MoE: MegaBlocks dMoE (llm-foundry ffn_type mb_dmoe), one grouped_gemm per projection whose group
        # sizes are copied to the host in every layer (megablocks/layers/mlp.py GroupedMLP)
        moe_experts_impl="megablocks-gmm",
        fsdp_impl="fsdp1", fsdp_prefetch=1, attention_kernel_speed=round(1 / 1.7, 3),
        compute_efficiency=1.0, fsdp_overlap=0.0,  # FITTED (efficiency.yaml `fitted`)
        offload_modes=("none", "params"),  # Composer fsdp_config cpu_offload (FSDP CPUOffload)
        # MPT ties the unembedding to the input embedding: SharedEmbedding.forward(unembed=True) is a plain
        # F.linear (llmfoundry/models/layers/custom_embedding.py), not a te.Linear, so amp_fp8 (TE fp8_autocast)
        # leaves the logits GEMM in BF16
        output_layer_low_precision=False,
    ))
register_stack(
    SoftwareStack(
        id="megatron-zero-bubble",
        description="Sea AI Lab's zero-bubble fork of Megatron-LM: the Megatron-Core settings plus the ZB-H1 "
                    "schedule (weight-gradient work deferred into the pipeline bubble, 1F1B activation memory)",
        source="sail-sg/zero-bubble-pipeline-parallelism README (--enable-zero-bubble; ZB-H1 keeps 1F1B's peak "
               "memory); Qi et al., 'Zero Bubble Pipeline Parallelism', ICLR 2024, arXiv:2401.10241 Sec. 3; the "
               "other settings are those of the megatron-core preset (the fork follows Megatron-LM)",
        flash_attention=True, overlap=True, grad_reduce_bytes=2, zero_stages=(0, 1, 2, 3),
        recompute=("none", "selective", "full"), pipeline_schedules=("1f1b", "zb-h1"),
        attention_backend="cudnn", fp8_weight_cache=True,  # Megatron-LM + TE, as megatron-core
        output_layer_low_precision=False,
        offload_modes=("none", "optimizer"), activation_offload=True,
    ))
register_stack(
    SoftwareStack(
        id="hai-llm",
        description="DeepSeek's HAI-LLM as in the DeepSeek-V3 report: DualPipe (bidirectional pipeline that "
                    "overlaps the EP all-to-all and PP transfers with computation), ZeRO-1 data parallelism, "
                    "cross-node expert parallelism, recompute of the norms and MLA up-projections, no context "
                    "parallelism",
        source="DeepSeek-AI, 'DeepSeek-V3 Technical Report', arXiv:2412.19437 Sec. 3.2 (HAI-LLM; '16-way Pipeline "
               "Parallelism (PP), 64-way Expert Parallelism (EP) spanning 8 nodes, and ZeRO-1 Data Parallelism'; "
               "DualPipe, Table 2), Sec. 3.2.3 (recomputation of RMSNorm and MLA up-projection), Sec. 3.3 (FP8); "
               "grad_reduce_bytes 4 is an ASSUMPTION (Sec. 3.3.2 keeps weight gradients in higher precision; "
               "the reduce dtype is not stated)",
        flash_attention=True, overlap=True, grad_reduce_bytes=4, zero_stages=(0, 1),
        # Sec. 3.2.3: RMSNorm and the MLA up-projections are recomputed in backward, always (its "selective";
        # workload/memory.py hai_llm_bytes_per_layer); Sec. 3.3.3: FP8 activation caches (E5M6 for the
        # attention output), AdamW moments in BF16, FP32 master weights and gradients; the EMA lives in CPU
        # memory (not on the GPU, so not counted) and the MTP module shares the embedding and output head
        recompute=("selective",), context_parallel=False, pipeline_schedules=("1f1b", "dualpipe"),
        selective_recompute="norm-mla-up", adam_moment_bytes=2.0,
    ))
register_stack(
    SoftwareStack(
        id="torchtitan",
        description="torchtitan: PyTorch FSDP2 (per-parameter sharding, implicit prefetch of the next block) + "
                    "TP / async-TP + PP + CP, Float8 / MXFP8 / NVFP4, FP32 gradient reduce-scatter, "
                    "all-gather-based context parallelism",
        source="pytorch/torchtitan docs/fsdp.md, docs/performance.md and torchtitan/config (mixed_precision_reduce "
               "= float32, context_parallel_rotate_method = allgather); Liang et al. 'TorchTitan' "
               "arXiv:2410.06511 Sec. 3",
        flash_attention=True, overlap=True, grad_reduce_bytes=4, zero_stages=(0, 2, 3),
        recompute=("none", "selective", "full"), cp_comm="allgather", fsdp_impl="fsdp2", fsdp_prefetch=1,
        # torchtitan's CP is PyTorch's context_parallel (create_context_parallel_ctx in torchtitan/utils.py, 2025+
        # torchtitan/distributed/utils.py; SDPA limited to the FLASH / EFFICIENT backends under CP):
        # the K,V all-gather feeds the same per-chunk ring loop, merged in FP32
        cp_attention="torch-ring",
        # torchtitan activation_checkpoint.mode = selective: "op" saves every other matmul output, an int
        # (default 2) checkpoints every 2nd layer (torchtitan/models/llama3/infra/parallelize.py)
        selective_recompute="half-forward", loss_bytes_per_logit=4.0,  # compiled loss (see torchtitan-2024)
        # torchao Float8Linear / MXLinear save the BF16 input (float8_linear.py matmul_with_hp_or_float8_args);
        # the NVFP4 GEMM is opaque to the per-op SAC policy (workload/memory.py op_sac_bytes_per_layer)
        fp8_activation_cache=False, sac_opaque_dtypes=("nvfp4",), nvfp4_bf16_layer_share=NVFP4_BF16_LAYER_SHARE,
        nvfp4_rht=False,
        # MX (MXFP8) linears are torchao's MXLinear / mx_mm (torchtitan components/quantization/mx.py): one
        # cast kernel per operand layout (torchao/prototype/mx_formats/mx_linear.py); torchtitan-2026 inherits it
        # (ASSUMPTION: its own components/quantization/mxfp8/ package was not read)
        mxfp8_cast_per_layout=True,
        # torchtitan's default TP (parallelism.enable_async_tensor_parallel = false) runs the SP all-gather /
        # reduce-scatter between the GEMMs; async TP (opt-in, needs torch.compile) gains 1.04-1.16x on
        # 8B / 70B at TP 8 (benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md). A published run that does
        # not say it enabled async TP is modelled with the default. Its TP plan is DTensor SequenceParallel on
        # Shard(1) (torchtitan/models/llama3/infra/parallelize.py apply_tp), and with tensorwise Float8 it takes
        # torchao's Float8 TP styles (enable_float8_tensorwise_tp; docs/float8.md: "float8 all-gather ... for TP
        # (by default for Float8Linear)"); rowwise Float8 and MXFP8 keep the plain styles (the model reads
        # precision fp8 as tensorwise, validation README)
        tp_overlap=False, moe_experts_impl="grouped-mm", tp_fp8_allgather=True, tp_seq_dim_copy=True,
        # Attention.forward repeats the K,V heads before SDPA (torchtitan/models/llama/model.py @9dec370 and
        # torchtitan/models/llama3/model/model.py through 2025: "repeat k/v heads if n_kv_heads < n_heads");
        # torchtitan-2026 inherits it (ASSUMPTION: its common attention module was not read)
        sdpa_repeat_kv=True,
        # the LM head stays BF16 in every torchtitan low-precision recipe: through early 2025 the Float8 converter
        # hard-codes module_filter_fn=lambda mod, fqn: fqn != "output" (torchtitan/float8_linear.py, then
        # torchtitan/float8.py); later the filter is [float8] filter_fqns, which torchtitan's llama3
        # train_configs (llama3_8b.toml, llama3_70b.toml) set to "output"; MX (MXFP8): job_config MX.filter_fqns
        # defaults to ["output"] ("By default we always skip the output layer", torchtitan/config/job_config.py);
        # NVFP4 keeps "the final 15% plus the LM head in bf16" (torchtitan/components/quantization/nvfp4.md)
        output_layer_low_precision=False,
        # attention through torch SDPA, whose default on sm90 / sm100 is the bundled FlashAttention-2 until
        # torch 2.11 (torchtitan-2026 below)
        attention_backend="fa2",
        offload_modes=("none", "params"),  # training.enable_cpu_offload: FSDP2 CPUOffloadPolicy
        compute_efficiency=0.85,  # FITTED (efficiency.yaml `fitted`: compute_efficiency)
    ))
# torchtitan before 2025: the same stack, but the loss was not compiled (train.py: "TODO: compiling loss
# function causes CUDA errors, turning off for now"), so the eager cross_entropy(pred.float()) holds per logit
# in forward the BF16 logits, their FP32 copy and the saved FP32 log_softmax output (2 + 4 + 4 B), and in
# backward the saved log_softmax output, nll_loss's dense FP32 gradient and log_softmax's FP32 input gradient
# (4 + 4 + 4 = 12 B, the peak); from 2025 torchtitan/components/loss.py compiles it with the model
# (training.compile), and the fused kernel keeps the BF16 logits and their BF16 gradient (4 B)
_TT = STACKS.get("torchtitan")
register_stack(replace(
    _TT, id="torchtitan-2024", loss_bytes_per_logit=12.0,
    description=_TT.description + "; 2024 releases: eager (uncompiled) cross-entropy loss",
    source=_TT.source + "; train.py @9dec370 (2024-12): loss_fn not compiled",
))
# torchtitan on torch >= 2.11 (released 2026-03-23): SDPA prefers cuDNN fused attention on sm90 / sm100
# (aten/src/ATen/native/transformers/cuda/sdp_utils.cpp check_prefer_cudnn_attention, gated on the bundled
# cuDNN > 9.15, which torch 2.11 ships: huggingface/transformers pull 48163, pytorch pull 162073 / 175672)
register_stack(replace(
    _TT, id="torchtitan-2026", attention_backend="cudnn",
    description=_TT.description + "; 2026-04+ releases (torch >= 2.11): SDPA runs cuDNN fused attention",
    source=_TT.source + "; torch sdp_utils.cpp check_prefer_cudnn_attention (cuDNN > 9.15, torch 2.11)",
))


def get_stack(name: str | None) -> SoftwareStack:
    """The preset called ``name`` (default: Megatron-Core); unknown names suggest the closest ones."""
    key = (name or DEFAULT_STACK).strip().lower()
    if key not in STACKS:
        raise UnknownNameError("software stack", name or "", STACKS.names())
    return STACKS.get(key)


CAVEAT_PREFIXES = ("EP all-to-all:", "sharded DP:")  # how layout_caveats lines start (the CLI prints them)


def layout_caveats(stack: SoftwareStack, *, is_moe: bool, ep: int, etp: int, pp: int, zero: int,
                   domain: int) -> list[str]:
    """What the model leaves out or the framework has not validated for one layout on ``stack``: the lines
    ``estimate`` adds to its assumptions and ``plan`` prints for its best plan (empty when none apply)."""
    out = []
    # members of the EP group (ep ranks etp apart) per domain, as placement.ranks_per_domain, on plain ints
    per_domain = min(max(domain // max(etp, 1), 1), ep)
    if stack.unpriced_ep_overlap and is_moe and ep > per_domain:
        out.append(f"{CAVEAT_PREFIXES[0]} EP {ep} crosses scale-up domains ({domain} GPUs each) and is priced "
                   f"exposed; {stack.unpriced_ep_overlap}")
    if stack.fsdp_combination_caveat and zero >= 2 and (pp > 1 or is_moe):
        what = f"pp {pp}" if pp > 1 else "a MoE model"
        out.append(f"{CAVEAT_PREFIXES[1]} ZeRO {zero} with {what}: {stack.fsdp_combination_caveat}")
    return out


# implementation constants a catalog overlay may set per preset (calibration: {stack_efficiency: {ID: {...}}})
STACK_OVERLAY_KEYS = ("fsdp_overlap", "attention_kernel_speed", "compute_efficiency")


def resolve_stack(name: str | None, catalog: Any = None) -> SoftwareStack:
    """The preset ``name`` with the catalog's ``stack_efficiency`` calibration for it applied: one object per
    (preset, catalog) in this process (both frozen), so what is kept per stack is found again."""
    st = get_stack(name)
    key = (id(st), id(catalog))
    hit = _RESOLVED.get(key)
    if hit is not None and hit[0] is st and hit[1] is catalog:
        return hit[2]
    resolved = _resolve(st, catalog)
    if len(_RESOLVED) >= 256:
        _RESOLVED.clear()
    _RESOLVED[key] = (st, catalog, resolved)
    return resolved


# (id(preset), id(catalog)) -> (preset, catalog, resolved stack); the entry keeps both alive, so their ids are
# not reused while it is held
_RESOLVED: dict[tuple, tuple] = {}


def _resolve(st: SoftwareStack, catalog: Any) -> SoftwareStack:
    overlay = catalog.calibration_for("stack_efficiency", st.id) if catalog is not None and hasattr(
        catalog, "calibration_for") else None
    if overlay:
        bad = [k for k in overlay if k not in STACK_OVERLAY_KEYS]
        if bad:
            raise InputError(f"calibration stack_efficiency.{st.id}: unknown key {bad[0]!r}",
                             hint="keys: " + ", ".join(STACK_OVERLAY_KEYS))
        st = replace(st, **{k: float(v) for k, v in overlay.items()})
    return st


# ---------------------------------------------------------------------------------------------------
# framework (+ version) of a published run -> preset (workload/data/frameworks.yaml)
# ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class FrameworkStack:
    """The preset a run of ``framework`` is modelled with, and how that choice was made."""

    stack: SoftwareStack
    framework: str
    blank_vpp_rule: tuple[str, int]  # ("layers_per_virtual_stage", 2) or ("stages_per_rank", N)
    note: str = ""  # set when the framework was not in the table (closest preset used)
    # what a row that leaves `sequence_parallel` / `zero_stage` blank ran with: the framework's recipe default
    # (frameworks.yaml blank_sequence_parallel / blank_zero_stage, with their sources)
    blank_sequence_parallel: bool = False
    blank_zero_stage: int = 0
    # a blank `micro_batch`: "one" (1), or "local" (the per-rank batch global_batch / dp, no gradient
    # accumulation, without pipeline parallelism; 1 per pipeline micro-batch with it): frameworks.yaml
    blank_micro_batch: str = "one"


def _version_key(text: str) -> float | None:
    """The release date a version string names, as year + month/100, or None when it names no date.

    Dates: a leading year ("2021", "2024-12 (9dec370)", "2025.06") or an NGC container tag yy.mm ("23.08",
    "26.06": NVIDIA's containers are named by year and month). Semantic release numbers ("r0.8.0", "v0.4",
    "core_r0.9.0", "0.13") name no date, so no `before:` rule (all are dates) applies to them and the
    framework's default preset is used."""
    import re

    t = (text or "").strip()
    m = re.match(r"\D*((?:19|20)\d\d)(?:[-./](\d{1,2}))?", t)
    if m:
        month = int(m.group(2)) if m.group(2) and 1 <= int(m.group(2)) <= 12 else 0
        return int(m.group(1)) + month / 100.0
    m = re.fullmatch(r"\D*(\d\d)\.(\d\d)(?:\.\d+)*\D*", t)
    if m and 17 <= int(m.group(1)) <= 60 and 1 <= int(m.group(2)) <= 12:
        return 2000 + int(m.group(1)) + int(m.group(2)) / 100.0
    return _torch_release_key(t)


def _torch_release_key(text: str) -> float | None:
    """The date a version string names through the PyTorch build it records ("0.0.2 (torch 2.7.0a0+gitb98af95)",
    "pytorch 2.9.0.dev20250811"), as year + month/100, or None when it names none. A nightly's own date
    (``.devYYYYMMDD``) is used as it is; a pre-release of X.Y (``a0`` / ``rc`` / ``.dev`` without a date) was
    built before X.Y's release, so it takes the release date of the minor before it; a release (or a source
    build of one, ``+git...``) its own. Release dates: frameworks.yaml ``pytorch_releases`` (sourced there)."""
    import re

    m = re.search(r"(?i)\b(?:py)?torch[\s=:_-]*v?(\d+)\.(\d+)(?:\.\d+)?((?:a|b|rc|\.?dev)[0-9]*)?", text)
    if not m:
        return None
    dev = re.fullmatch(r"\.?dev((?:19|20)\d\d)(\d\d)\d*", m.group(3) or "")
    if dev and 1 <= int(dev.group(2)) <= 12:
        return int(dev.group(1)) + int(dev.group(2)) / 100.0
    releases = {str(k): str(v) for k, v in framework_table().get("pytorch_releases", {}).items()}
    major, minor = int(m.group(1)), int(m.group(2))
    if m.group(3):  # a pre-release of major.minor: built after the previous minor's release
        minor -= 1
    d = re.match(r"(\d{4})-(\d{2})", releases.get(f"{major}.{minor}", ""))
    return int(d.group(1)) + int(d.group(2)) / 100.0 if d else None


@lru_cache(maxsize=1)
def framework_table() -> dict[str, Any]:
    from importlib import resources

    import yaml

    text = (resources.files("clustertwin.workload") / "data" / "frameworks.yaml").read_text(encoding="utf-8")
    table = yaml.safe_load(text)
    for name, entry in table["frameworks"].items():
        for key in [entry["stack"], *(r["stack"] for r in entry.get("versions", ()))]:
            if key not in STACKS:
                raise InputError(f"frameworks.yaml: framework {name!r} names unknown stack {key!r}")
    return table


@lru_cache(maxsize=256)
def stack_for_framework(framework: str, version: str = "", sharded: bool = False, fsdp: bool = False) -> FrameworkStack:
    """The preset for a run of ``framework`` (release ``version``); ``sharded``: the run uses ZeRO-3 / FSDP
    (only consulted for a framework the table does not know); ``fsdp``: the run uses PyTorch FSDP (the
    framework's ``fsdp_stack`` where it names one: Hugging Face runs are DeepSpeed ZeRO or PyTorch FSDP)."""
    import difflib

    table = framework_table()
    fws: dict[str, Any] = table["frameworks"]
    key = (framework or "").strip().lower()
    note = ""
    if key not in fws:
        names = {a.lower(): n for n, e in fws.items() for a in (n, *e.get("aliases", ()))}
        if key in names:
            key = names[key]
        else:
            close = difflib.get_close_matches(key, list(names), n=1, cutoff=0.6) if key else []
            if close:
                key = names[close[0]]
                note = f"framework {framework!r} is not in the framework table: modelled as the closest, {key!r}"
            else:
                sid = table["unknown_sharded" if sharded else "unknown_default"]
                st = STACKS[sid]
                what = "blank" if not key else f"{framework!r} is not in the framework table"
                blank = table["unknown_blank"]["sharded" if sharded else "default"]
                return FrameworkStack(st, framework, ("layers_per_virtual_stage", 2),
                                      note=f"framework {what}: modelled with the closest preset {sid!r} "
                                           f"({'sharded data parallel' if sharded else 'default'})",
                                      blank_sequence_parallel=bool(blank["sequence_parallel"]),
                                      blank_zero_stage=int(blank["zero_stage"]))
    entry = fws[key]
    sid = entry["fsdp_stack"] if fsdp and entry.get("fsdp_stack") else entry["stack"]
    blank_sp, blank_zero = bool(entry.get("blank_sequence_parallel", False)), int(entry.get("blank_zero_stage", 0))
    v = _version_key(version)
    for rule in entry.get("versions", ()):
        before = _version_key(str(rule.get("before", "")))
        if v is not None and before is not None and v < before:
            sid = rule["stack"]
            blank_sp = bool(rule.get("blank_sequence_parallel", blank_sp))
            blank_zero = int(rule.get("blank_zero_stage", blank_zero))
            break
    (rule_name, n), = dict(entry.get("blank_virtual_pipeline") or {"layers_per_virtual_stage": 2}).items()
    if entry.get("assumed"):
        note = "; ".join(x for x in (note, " ".join(str(entry["assumed"]).split())) if x)
    return FrameworkStack(STACKS[sid], key, (str(rule_name), int(n)), note=note,
                          blank_sequence_parallel=blank_sp, blank_zero_stage=blank_zero,
                          blank_micro_batch=str(entry.get("blank_micro_batch", "one")))

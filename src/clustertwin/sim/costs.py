"""Per-stage, per-micro-batch costs of a training step, vectorised over plans: ``stage_costs`` composes
the cost components of ``sim/components/`` (one module per component) into the granular items both
engines read (``STAGE_COST_FIELDS``). The analytical composer (``sim.analytical``) turns them into a step
time in closed form; the event engine (``sim.event``) schedules the same items.

Where each cost is computed (all per rank; "layer" = one transformer layer, one micro-batch):

    layer GEMMs             components/attention.py (projections, incl. MLA), mlp.py, moe.py
    attention core          components/attention.py (fused / unfused, CP ring merge)
    element-wise kernels    components/elementwise.py (+ softmax from attention.py, permutation from moe.py)
    output layer + loss     components/embedding.py
    TP / SP collectives     components/tp_comm.py
    CP K,V exchange         components/cp_comm.py
    EP all-to-all           components/ep_comm.py
    PP p2p                  components/pp_comm.py
    DP / ZeRO / FSDP comm   components/dp_comm.py
    optimizer, overhead     components/optimizer.py
    slowest-GPU pace        components/pace.py (the GPU kernels above x 1 + sigma z(num_gpus))
    memory per GPU          workload/memory.py (``memory_per_gpu``; also used by the plan rule)

Primitives: ``sim/kernels.py`` (GEMM and memory-bound kernel time), ``sim/comm.py`` (``collective_time``,
the one call site for collectives), ``sim/machine.py`` (``Hardware``, ``make_hardware``). Units: seconds,
bytes, FLOPs. Formulas and sources: docs/modelling.md and MODELLING.md.
"""

from __future__ import annotations

from dataclasses import replace
from typing import cast

from .. import xp as np  # numpy, or plain numbers for one plan (clustertwin/xp.py)
from ..workload.model import ModelSpec
from .comm import ALL_GATHER, ALL_REDUCE, ALL_TO_ALL, REDUCE_SCATTER, SEND_RECV, collective_time  # noqa: F401
from .components import attention
from .components.cp_comm import cp_comm as cp_exchange
from .components.cp_comm import torch_ring_waits
from .components.dp_comm import dp_comm
from .components.elementwise import elementwise
from .components.embedding import logits
from .components.ep_comm import ep_comm
from .components.mlp import dense_down_proj_fwd, dense_mlp
from .components.moe import host_idle, moe_layer
from .components.optimizer import optimizer_step, step_overhead
from .components.pace import slowest_gpu_factor
from .components.pp_comm import pp_p2p
from .components.stage import FP4_DTYPES, FP8_DTYPES, stage_inputs  # noqa: F401
from .components.tp_comm import tp_comm
from .kernels import gemm_time, gemm_train_time, mem_time  # noqa: F401
from .machine import ChipEfficiency, Hardware, chip_efficiency, make_hardware, mamf_for, with_dtype  # noqa: F401
from .machine import efficiency_table as _efficiency_table  # noqa: F401  (former name, for in-flight callers)

_PLAIN = np._S  # plain numbers (clustertwin/xp.py)

STAGE_COST_FIELDS = (
    # per layer, per micro-batch, on one GPU (dense layer / MoE layer averaged by their share)
    "layer_fwd_gemm_s", "layer_bwd_gemm_s", "layer_fwd_attn_s", "layer_bwd_attn_s",
    "layer_fwd_mem_s", "layer_bwd_mem_s", "layer_recompute_s",
    "layer_fwd_host_s", "layer_bwd_host_s",  # GPU idle while the host issues a dropless MoE layer
    "tp_comm_fwd_s", "tp_comm_bwd_s", "tp_comm_recompute_s", "tp_bytes_per_collective",
    "cp_comm_fwd_s", "cp_comm_bwd_s", "cp_overlappable", "ep_comm_fwd_s", "ep_comm_bwd_s", "ep_bytes_per_a2a",
    # per micro-batch, last stage
    "logits_fwd_s", "logits_bwd_s",
    # pipeline
    "pp_p2p_s", "pp_bytes", "layers_per_stage", "num_micro_batches",
    # per step
    "dp_rs_s", "dp_ag_s", "dp_ar_s", "dp_grad_bytes", "dp_bucket_s",
    "edp_rs_s", "edp_ag_s", "edp_ar_s",
    "fsdp_mb_s", "fsdp_ag_s", "fsdp_rs_s", "fsdp_bwd_gathers", "optimizer_s", "step_overhead_s",
)


def _layer_compute_of(st):
    return attention.projections(st), attention.core(st), dense_mlp(st), logits(st)


def _layer_compute(st):
    """(attention projections, attention core, dense MLP, output layer + loss) of the stage: pure functions of
    the fields in the key below (components/attention.py, mlp.py, embedding.py read no others), so one plan
    (xp.scalar_mode) computes them once per (model, machine, those values); layouts that differ only in
    their DP / PP / ZeRO / batch share them (as the GEMM and collective tables share the kernels below)."""
    S = _PLAIN
    t, c, b, tok = st.t, st.c, st.b, st.tok
    if not (type(t) in S and type(c) in S and type(b) in S and type(tok) in S and np.in_scalar_mode()):
        # many plans: computed once per distinct (t, c, b, tok) among them (on_rows)
        return on_rows(_layer_compute_of, st, ("t", "c", "b", "tok"))
    model, hw = st.model, st.hw
    key = (id(model), id(hw), t, c, b, st.s, tok, st.in_bytes, st.act_bytes, st.flash, st.cp_comm, st.attn_backend,
           st.attn_speed, st.logits_low_precision, st.cp_torch_ring)
    return np.memo(_LAYER, key, model, _layer_compute_of, st, also=hw)


# the plan columns of a Stage (components/stage.py): one value per plan
_PLAN_FIELDS = ("t", "p", "d", "c", "e", "etp", "b", "rc", "zero", "sp", "tok", "tok_sp", "m", "v", "sched")


def on_rows(fn, st, fields: tuple[str, ...]):
    """``fn(st)`` for a component that reads only the plan columns ``fields`` of ``st``: computed once per
    distinct tuple of their values among the plans (xp.per_distinct) and gathered back. The Stage the
    component sees then holds only those rows and its other plan columns unset (None: reading one fails)."""
    cols = tuple(getattr(st, f) for f in fields)

    def rows(*vals):
        if all(v is c for v, c in zip(vals, cols, strict=True)):  # not de-duplicated: the stage as it is
            return fn(st)
        unset = dict.fromkeys(f for f in _PLAN_FIELDS if f not in fields)
        return fn(replace(st, **dict(zip(fields, vals, strict=True)), **unset))

    return np.per_distinct(rows, cols)


# (id(model), id(hw), Stage fields) -> (model, hw, layer compute) (xp.memo)
_LAYER: dict[tuple, tuple] = {}


def stage_costs(model: ModelSpec, hw: Hardware, *, tp, pp, dp, cp, ep, vpp, micro_batch, recompute,
                zero, global_batch, seq_len, sp=True, etp=1, flash: bool = True, overlap: bool = True,
                grad_reduce_bytes: float = 2.0, cp_comm: str = "p2p", stack=None, schedule=0, offload=0,
                activation_offload_layers=0) -> dict[str, np.ndarray]:
    """Granular costs of one pipeline stage (see STAGE_COST_FIELDS). All inputs broadcast.

    ``offload`` (code of ``workload.plan.OFFLOAD``) and ``activation_offload_layers``: host offload
    (components/offload.py): an optimizer in host memory replaces ``optimizer_s``; the exposed activation
    transfers are added to ``step_overhead_s`` (both engines read these two fields).

    ``overlap`` does not change any per-item cost (the engines apply it); ``vpp`` and ``schedule`` (the
    pipeline schedule code) only set the pipeline layout the parameter counts of the DP collectives read
    (DualPipe holds two stages per rank); both engines pass one plan description.
    """
    st = stage_inputs(model, hw, tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, micro_batch=micro_batch, recompute=recompute,
                      zero=zero, global_batch=global_batch, seq_len=seq_len, sp=sp, etp=etp, flash=flash,
                      grad_reduce_bytes=grad_reduce_bytes, cp_comm=cp_comm, stack=stack, vpp=vpp, schedule=schedule)
    fm = st.frac_moe
    (proj_f, proj_b), core, (dense_f, dense_b), (logits_f, logits_b) = _layer_compute(st)
    mo = moe_layer(st)
    ep_f, ep_b = ep_comm(st, mo.a2a_bytes)
    host_f, host_b = host_idle(st, mo.fwd_s + mo.mem_fwd_s + ep_f, mo.bwd_s + mo.mem_bwd_s + ep_b)
    # Full recompute re-runs the whole layer's forward in the backward (Megatron recompute_granularity=full
    # checkpoints the TransformerLayer, MoELayer and its token dispatcher included): the recomputed forward
    # dispatches and combines its tokens again and waits again at the dispatcher's device-to-host sync, so
    # the backward of a MoE layer carries one more forward's all-to-alls and host idle
    full_rc = np.where(st.rc == 2, 1.0, 0.0)
    ep_b = ep_b + full_rc * ep_f
    host_b = host_b + full_rc * host_f
    # many plans: the components below that read only the plan columns named run once per distinct tuple of
    # them (on_rows); one plan calls them directly
    many = not np.in_scalar_mode() and np.ndim(st.t) != 0
    ew_f, ew_b = on_rows(elementwise, st, ("t", "tok", "tok_sp", "m")) if many else elementwise(st)
    if hw.dtype in FP4_DTYPES and st.nvfp4_bf16_share > 0:
        # an NVFP4 recipe with a BF16 tail (stack nvfp4_bf16_layer_share: torchtitan ~15 % of the decoder layers,
        # Mishra et al. 'Pretraining LLMs with NVFP4', arXiv:2509.25149 Sec. 4; Megatron's performance recipes
        # none): those layers' dense GEMMs and casts run as in a BF16 step
        hw16 = with_dtype(hw, "bf16")
        st16 = stage_inputs(model, hw16, tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, micro_batch=micro_batch,
                            recompute=recompute, zero=zero, global_batch=global_batch, seq_len=seq_len, sp=sp,
                            etp=etp, flash=flash, grad_reduce_bytes=grad_reduce_bytes, cp_comm=cp_comm, stack=stack)
        w = st.nvfp4_bf16_share
        p16, d16, e16 = attention.projections(st16), dense_mlp(st16), elementwise(st16)
        proj_f, proj_b = (1 - w) * proj_f + w * p16[0], (1 - w) * proj_b + w * p16[1]
        dense_f, dense_b = (1 - w) * dense_f + w * d16[0], (1 - w) * dense_b + w * d16[1]
        ew_f, ew_b = (1 - w) * ew_f + w * e16[0], (1 - w) * ew_b + w * e16[1]

    fwd_gemm = proj_f + ((1 - fm) * dense_f + fm * mo.fwd_s)
    bwd_gemm = proj_b + ((1 - fm) * dense_b + fm * mo.bwd_s)
    mem_f = ew_f + core.mem_fwd_s + fm * mo.mem_fwd_s
    mem_b = ew_b + core.mem_bwd_s + fm * mo.mem_bwd_s
    fwd_total = fwd_gemm + core.fwd_s + mem_f
    if st.sel_half:
        selective = 0.5 * fwd_total  # torchtitan selective AC: half of the forward (stack preset)
    elif model.is_moe:
        # MoE recipes' fine-grained selective recompute (Megatron --recompute-modules layernorm moe_act,
        # + mla_up_proj with MLA): norms, expert activation, MLA up-projections - not the attention core
        selective = fm * mo.recompute_fwd_s + attention.mla_up_proj_fwd(st)
    else:
        selective = core.fwd_s + core.mem_fwd_s  # Korthikanti et al.: the attention core
    full = fwd_total
    if st.rc_needed:  # jax.checkpoint: the dense down projection's output is dead in the recompute (stack jax-xla)
        full = fwd_total - (1 - fm) * dense_down_proj_fwd(st)
    recompute_s = np.where(st.rc == 2, full, np.where(st.rc == 1, selective, 0.0))

    ce = float(getattr(stack, "compute_efficiency", 1.0) or 1.0) if stack is not None else 1.0
    if ce != 1.0:  # the framework's compute kernels relative to Megatron-Core / TE (stack compute_efficiency)
        fwd_gemm, bwd_gemm, mem_f, mem_b, recompute_s = (x / ce for x in (fwd_gemm, bwd_gemm, mem_f, mem_b, recompute_s))
        core = core._replace(fwd_s=core.fwd_s / ce, bwd_s=core.bwd_s / ce)
    # the job computes at the pace of its slowest GPU (components/pace.py; efficiency.yaml gpu_speed_spread,
    # off by default): every GPU kernel of the step runs `slow` times as long as on the typical GPU
    paced = bool(hw.eff.gpu_speed_spread)
    slow = slowest_gpu_factor(st.t * st.p * st.d * st.c, hw.eff.gpu_speed_spread) if paced else 1.0
    if paced:
        fwd_gemm, bwd_gemm, mem_f, mem_b, recompute_s = (x * slow for x in (fwd_gemm, bwd_gemm, mem_f, mem_b, recompute_s))
        core = core._replace(fwd_s=core.fwd_s * slow, bwd_s=core.bwd_s * slow)
    if many:
        tp_ = on_rows(tp_comm, st, ("t", "tok", "rc", "sp"))
        cp_f, cp_b, cp_hidden = on_rows(cp_exchange, st, ("t", "c", "b", "tok"))
        pp_s, pp_bytes = on_rows(pp_p2p, st, ("t", "p", "d", "c", "tok"))
        dpc = on_rows(dp_comm, st, ("t", "p", "d", "c", "e", "etp", "rc", "zero", "v", "sched"))
    else:
        tp_, (cp_f, cp_b, cp_hidden), (pp_s, pp_bytes), dpc = tp_comm(st), cp_exchange(st), pp_p2p(st), dp_comm(st)
    if st.cp_torch_ring and np.needed(st.c > 1):
        # PyTorch's CP ring loop waits for the exchanges its steps' SDPA calls cannot hide (cp_comm.py): time of
        # the attention op on the compute stream; a full recompute re-runs the forward loop (torchtitan's
        # half-forward selective AC half of it, as it prices the rest of the forward)
        wait_f, wait_b = torch_ring_waits(st, core.fwd_s, core.bwd_s)
        core = core._replace(fwd_s=core.fwd_s + wait_f, bwd_s=core.bwd_s + wait_b)
        share = np.where(st.rc == 2, 1.0, np.where(st.rc == 1, 0.5 if st.sel_half else 1.0, 0.0))
        recompute_s = recompute_s + share * wait_f
    if ce != 1.0:
        logits_f, logits_b = logits_f / ce, logits_b / ce
    if paced:
        logits_f, logits_b = logits_f * slow, logits_b * slow

    out = {
        "layer_fwd_gemm_s": fwd_gemm, "layer_bwd_gemm_s": bwd_gemm,
        "layer_fwd_attn_s": core.fwd_s, "layer_bwd_attn_s": core.bwd_s,
        "layer_fwd_mem_s": mem_f, "layer_bwd_mem_s": mem_b, "layer_recompute_s": recompute_s,
        "layer_fwd_host_s": fm * host_f, "layer_bwd_host_s": fm * host_b,
        "tp_comm_fwd_s": tp_.fwd_s, "tp_comm_bwd_s": tp_.bwd_s, "tp_comm_recompute_s": tp_.recompute_s,
        "tp_bytes_per_collective": tp_.bytes_per_collective,
        "cp_comm_fwd_s": cp_f, "cp_comm_bwd_s": cp_b, "cp_overlappable": cp_hidden,
        "ep_comm_fwd_s": fm * ep_f, "ep_comm_bwd_s": fm * ep_b, "ep_bytes_per_a2a": mo.a2a_bytes,
        "logits_fwd_s": logits_f, "logits_bwd_s": logits_b,
        "pp_p2p_s": pp_s, "pp_bytes": pp_bytes, "layers_per_stage": float(model.num_layers) / st.p,
        "num_micro_batches": st.m,
        "dp_rs_s": dpc.dp_rs_s, "dp_ag_s": dpc.dp_ag_s, "dp_ar_s": dpc.dp_ar_s, "dp_grad_bytes": dpc.dp_grad_bytes,
        "dp_bucket_s": dpc.dp_bucket_s, "edp_rs_s": dpc.edp_rs_s, "edp_ag_s": dpc.edp_ag_s, "edp_ar_s": dpc.edp_ar_s,
        "fsdp_mb_s": dpc.fsdp_mb_s, "fsdp_ag_s": dpc.fsdp_ag_s, "fsdp_rs_s": dpc.fsdp_rs_s,
        "fsdp_bwd_gathers": dpc.fsdp_bwd_gathers, "optimizer_s": optimizer_step(st, dpc),
        "step_overhead_s": step_overhead(st),
    }
    if np.any(np.asarray(offload) > 0) or np.any(np.asarray(activation_offload_layers) > 0):
        from ..workload.memory import activation_bytes_per_layer
        from .components.offload import activation_offload_s, optimizer_offload_s

        off = np.asarray(offload)
        out["optimizer_s"] = np.where(off >= 1, optimizer_offload_s(st, dpc, off, grad_reduce_bytes),
                                      out["optimizer_s"])
        fp8_cache = hw.dtype in ("fp8", "mxfp8", "nvfp4", "fp4") and bool(
            getattr(stack, "fp8_activation_cache", True) if stack is not None else True)
        layer_bytes = activation_bytes_per_layer(model, seq_len, micro_batch, tp, cp, sp, 0, flash, fp8_cache)[0]
        t_f = fwd_gemm + core.fwd_s + mem_f
        t_b = bwd_gemm + core.bwd_s + mem_b
        out["step_overhead_s"] = out["step_overhead_s"] + activation_offload_s(
            st, activation_offload_layers, layer_bytes, t_f, t_b)

    if np.in_scalar_mode():  # one plan on plain numbers (clustertwin/xp.py): nothing to broadcast
        plain = {}
        for k, v in out.items():
            if type(v) is float:
                plain[k] = v
            elif type(v) in _PLAIN:
                plain[k] = float(v)
            else:
                break
        else:
            return cast(dict[str, np.ndarray], plain)
    shape = np.broadcast_shape(*out.values())
    if not shape:  # one plan: nothing to broadcast
        if np.in_scalar_mode():
            return cast(dict[str, np.ndarray], {k: float(v) for k, v in out.items()})
        return {k: np.asarray(v, dtype=float) for k, v in out.items()}
    return {k: np.broadcast_to(np.asarray(v, dtype=float), shape) for k, v in out.items()}

"""The one plan rule: whether a parallel plan can run a model under a software stack.

Each rule is written once, vectorised (numpy arrays of plan degrees, any broadcast shape; a scalar plan
is a 0-d case), with the sentence that explains it. ``plan_mask`` (planner pruning, ``estimate_batch``)
ANDs the rules; ``plan_problems`` / ``check_plan`` (``estimate``, ``sweep``, ``validate``) name the ones a
single plan breaks. Memory fit is the other half of validity and lives in ``workload.memory.plan_memory``
(the same call for the engine and the planner).

Array keys: tp pp dp cp ep etp vpp micro_batch global_batch zero recompute (code 0/1/2), and optional
uneven (bool), mb_group (int, 0 = pp), sp (bool), flash (bool), schedule (code of
``workload.pipeline.PIPELINE_SCHEDULES`` or name), offload (code of ``workload.plan.OFFLOAD``),
act_offload (layers whose activations go to host memory).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from .. import xp as np  # numpy, or plain numbers for one plan (clustertwin/xp.py)
from .model import ModelSpec
from .pipeline import PIPELINE_SCHEDULES, SCHEDULE_CODE, schedule_code

RECOMPUTE_NAMES = ("none", "selective", "full")


@dataclass(frozen=True, slots=True)
class Rule:
    name: str
    ok: Callable[[ModelSpec, Mapping[str, np.ndarray], int, Any], np.ndarray]  # True where the plan passes
    why: Callable[[ModelSpec, Mapping[str, Any], int, Any], str]  # the reason, for one plan that fails


def _stages(a):
    return a["pp"] * a["vpp"]


def _slot_split(m: ModelSpec, a):
    return (a["pp"] > 1) & ((m.num_layers + 2) % _stages(a) == 0)


def _micro_batches(a):
    return a["global_batch"] // np.maximum(a["micro_batch"] * a["dp"], 1)


def _batch_ok(a):
    return a["global_batch"] % np.maximum(a["micro_batch"] * a["dp"], 1) == 0


def _stage_text(m, a, s=None, st=None):
    n, L = _stages(a), m.num_layers
    if n > L:
        return (f"pp*vpp = {a['pp']}*{a['vpp']} = {n} is more than the {L} layers"
                + (f" (or the {L + 2} layer slots with embedding and loss)" if a["pp"] > 1 else ""))
    return (f"layers ({L}) are not divisible by pp*vpp = {a['pp']}*{a['vpp']} = {n}"
            " (nor layers+2, with embedding and loss counted as stages)")


def _mbg_text(m, a, s=None, st=None):
    g, p = a["mb_group"], a["pp"]
    if g < p:
        return (f"microbatch_group ({g}) is smaller than pp ({p}): Megatron's interleaved warm-up "
                "((p-i-1)*2 + (v-1)*group forwards) deadlocks when fewer than p micro-batches run per virtual stage")
    return f"microbatch_group ({g}) is more than the {int(_micro_batches(a))} micro-batches per step"


MODEL_RULES: tuple[Rule, ...] = (
    Rule("heads", lambda m, a, s, st: m.num_attention_heads % a["tp"] == 0,
         lambda m, a, s, st: f"attention heads ({m.num_attention_heads}) are not divisible by tp ({a['tp']})"),
    Rule("kv_heads", lambda m, a, s, st: np.ones_like(a["tp"], dtype=bool) if m.is_mla
         else (m.num_kv_heads % a["tp"] == 0) | (a["tp"] % m.num_kv_heads == 0),
         lambda m, a, s, st: f"KV heads ({m.num_kv_heads}) and tp ({a['tp']}) do not divide one another"),
    Rule("ffn", lambda m, a, s, st: m.ffn_hidden_size % a["tp"] == 0,
         lambda m, a, s, st: f"FFN width ({m.ffn_hidden_size}) is not divisible by tp ({a['tp']})"),
    # Megatron's pipeline split may count the embedding and the loss as one layer slot each
    # (account_for_embedding/loss_in_pipeline_split): with pp > 1, pp*vpp may then be up to L + 2 when
    # it divides L + 2 (NVIDIA's 405B recipes: 126 + 2 = 16 x 8 chunks of one slot).
    Rule("stages", lambda m, a, s, st: _slot_split(m, a) | ((_stages(a) <= m.num_layers)
                                                            & ((m.num_layers % _stages(a) == 0) | a["uneven"])),
         _stage_text),
    Rule("vpp", lambda m, a, s, st: (a["vpp"] == 1) | (a["pp"] >= 2),
         lambda m, a, s, st: "interleaved schedule (vpp > 1) needs pp >= 2"),
    Rule("cp_seq", lambda m, a, s, st: s % a["cp"] == 0,
         lambda m, a, s, st: f"sequence length ({s}) is not divisible by cp ({a['cp']})"),
    Rule("cp_even", lambda m, a, s, st: (a["cp"] == 1) | np.logical_not(a["flash"]) | ((s // a["cp"]) % 2 == 0),
         lambda m, a, s, st: f"cp ({a['cp']}) needs an even local sequence (s/cp = {s // a['cp']}) for load-balanced causal chunks"),
    Rule("experts", lambda m, a, s, st: (m.num_experts % a["ep"] == 0) if m.is_moe else np.ones_like(a["ep"], dtype=bool),
         lambda m, a, s, st: f"experts ({m.num_experts}) are not divisible by ep ({a['ep']})"),
    Rule("ep_group", lambda m, a, s, st: ((a["tp"] * a["dp"] * a["cp"]) % (a["ep"] * a["etp"]) == 0) if m.is_moe
         else np.ones_like(a["ep"], dtype=bool),
         lambda m, a, s, st: f"ep*etp = {a['ep']}*{a['etp']} does not divide the tp*dp*cp = "
                             f"{a['tp'] * a['dp'] * a['cp']} ranks of a pipeline stage"),
    Rule("dense_ep", lambda m, a, s, st: np.ones_like(a["ep"], dtype=bool) if m.is_moe else a["ep"] == 1,
         lambda m, a, s, st: f"ep = {a['ep']} but {m.id} is a dense model (no experts)"),
    Rule("batch", lambda m, a, s, st: _batch_ok(a),
         lambda m, a, s, st: f"global batch ({a['global_batch']}) is not divisible by micro_batch*dp = "
                             f"{a['micro_batch']}*{a['dp']} = {a['micro_batch'] * a['dp']}"),
    Rule("vpp_batch", lambda m, a, s, st: np.logical_not(_batch_ok(a)) | (a["vpp"] == 1) | (_micro_batches(a) % a["pp"] == 0),
         lambda m, a, s, st: f"interleaved schedule needs micro-batches per step ({int(_micro_batches(a))}) "
                             f"divisible by pp ({a['pp']})"),
    # interleaved micro-batch group: 0 (= pp) or pp <= group <= m (smaller groups deadlock the warm-up)
    Rule("mb_group", lambda m, a, s, st: (a["mb_group"] == 0) | (a["vpp"] == 1) | (a["pp"] < 2)
         | ((a["mb_group"] >= a["pp"]) & (np.logical_not(_batch_ok(a)) | (a["mb_group"] <= _micro_batches(a)))),
         _mbg_text),
    Rule("sp", lambda m, a, s, st: np.logical_not(a["sp"]) | (a["tp"] > 1),
         lambda m, a, s, st: "sequence parallelism needs tp > 1"),
    # zero-bubble and DualPipe schedules (workload/pipeline.py): a pipeline without virtual stages;
    # DualPipe also an even pp and an even number of at least 2*pp micro-batches (deepseek-ai/DualPipe)
    Rule("schedule", lambda m, a, s, st: (a["schedule"] == 0) | ((a["pp"] > 1) & (a["vpp"] == 1)),
         lambda m, a, s, st: f"the {_sched_name(a)} schedule needs pp >= 2 and vpp 1 (got pp {a['pp']}, "
                             f"vpp {a['vpp']})"),
    # host offload: parameter shards live on the CPU only where parameters are sharded (ZeRO-3 / FSDP);
    # Megatron-Core's activation offload (transformer_config.py) refuses pp > 1 ("no support for Pipeline
    # parallelism with CPU offloading"), activation recompute, and cpu_offloading_num_layers >= num_layers
    Rule("offload_params", lambda m, a, s, st: (a["offload"] != 2) | (a["zero"] >= 3),
         lambda m, a, s, st: f"offload params needs ZeRO-3 / FSDP (zero {a['zero']}): parameter shards live on "
                             "the CPU only where parameters are sharded; use --offload optimizer"),
    Rule("act_offload", lambda m, a, s, st: (a["act_offload"] == 0) | (
        (a["pp"] == 1) & (a["recompute"] == 0) & (a["act_offload"] < m.num_layers)),
         lambda m, a, s, st: f"activation offload of {a['act_offload']} layers needs pp 1, recompute none and "
                             f"fewer layers than the model's {m.num_layers} (Megatron-Core cpu_offloading; got pp "
                             f"{a['pp']}, recompute {RECOMPUTE_NAMES[int(a['recompute'])]})"),
    Rule("dualpipe", lambda m, a, s, st: (a["schedule"] != 2) | np.logical_not(_batch_ok(a)) | (
        (a["pp"] % 2 == 0) & (_micro_batches(a) % 2 == 0) & (_micro_batches(a) >= 2 * a["pp"])),
         lambda m, a, s, st: f"DualPipe needs an even pp and an even number of micro-batches, at least 2*pp "
                             f"(pp {a['pp']}, {int(_micro_batches(a))} micro-batches)"),
)


def _sched_name(a) -> str:
    return PIPELINE_SCHEDULES[int(a["schedule"])]


def _in(values, allowed) -> np.ndarray:
    return np.isin(values, list(allowed))


STACK_RULES: tuple[Rule, ...] = (
    Rule("stack_zero", lambda m, a, s, st: _in(a["zero"], st.zero_stages),
         lambda m, a, s, st: f"the {st.id} stack offers ZeRO stage(s) {', '.join(map(str, st.zero_stages))}, "
                             f"not {a['zero']}"),
    Rule("stack_recompute", lambda m, a, s, st: _in(a["recompute"], _recompute_codes(st)),
         lambda m, a, s, st: f"the {st.id} stack offers recompute {' / '.join(st.recompute)}, "
                             f"not {RECOMPUTE_NAMES[int(a['recompute'])]}"),
    Rule("stack_cp", lambda m, a, s, st: (a["cp"] == 1) | st.context_parallel,
         lambda m, a, s, st: f"the {st.id} stack has no context parallelism (cp = {a['cp']})"),
    Rule("stack_schedule", lambda m, a, s, st: _in(a["schedule"], _sched_codes(st)),
         lambda m, a, s, st: f"the {st.id} stack offers the pipeline schedule(s) "
                             f"{', '.join(st.pipeline_schedules)}, not {_sched_name(a)}"),
    Rule("stack_offload", lambda m, a, s, st: _in(a["offload"], _offload_codes(st)),
         lambda m, a, s, st: f"the {st.id} stack offers offload {' / '.join(st.offload_modes)}, "
                             f"not {_offload_name(a)}"),
    Rule("stack_act_offload", lambda m, a, s, st: (a["act_offload"] == 0) | bool(st.activation_offload),
         lambda m, a, s, st: f"the {st.id} stack has no activation CPU offload (Megatron stacks: "
                             "--cpu-offloading)"),
)


def _stack_codes(st) -> tuple[list[int], list[int], list[int]]:
    """The (frozen) stack's recompute, pipeline schedule and offload codes, built once per stack."""
    return np.memo(_STACK_CODES, (id(st),), st, _codes_of, st, limit=256)


def _codes_of(st) -> tuple[list[int], list[int], list[int]]:
    from .plan import OFFLOAD_CODE

    return ([RECOMPUTE_NAMES.index(r) for r in st.recompute], [SCHEDULE_CODE[x] for x in st.pipeline_schedules],
            [OFFLOAD_CODE[x] for x in st.offload_modes])


# (id(stack),) -> (stack, None, codes) (xp.memo)
_STACK_CODES: dict[tuple, tuple] = {}


def _recompute_codes(st) -> list[int]:
    return _stack_codes(st)[0]


def _offload_codes(st) -> list[int]:
    return _stack_codes(st)[2]


def _offload_name(a) -> str:
    from .plan import OFFLOAD

    return OFFLOAD[int(a["offload"])]


def _sched_codes(st) -> list[int]:
    return _stack_codes(st)[1]


_ONE_KEYS = ("tp", "pp", "dp", "cp", "ep", "etp", "vpp", "micro_batch", "global_batch", "zero")
_PLAIN = np._S  # plain numbers (clustertwin/xp.py)


def _plain_arrays(a: Mapping[str, Any]) -> dict[str, Any] | None:
    """``_arrays`` of one plan of plain numbers (scalar mode), or None when a value is anything else."""
    get = a.get
    out = {k: get(k, 1) for k in _ONE_KEYS}
    out["recompute"] = get("recompute", 0)
    out["mb_group"] = get("mb_group", 0)
    out["offload"] = get("offload", 0)
    out["act_offload"] = get("act_offload", 0)
    sched = get("schedule", 0)
    out["schedule"] = schedule_code(sched) if type(sched) is str else sched
    for k in ("uneven", "sp"):
        v = get(k, False)
        out[k] = bool(v) if type(v) in _PLAIN else v
    v = get("flash", True)
    out["flash"] = bool(v) if type(v) in _PLAIN else v
    for v in out.values():
        if type(v) not in _PLAIN:
            return None
    return out


def _arrays(a: Mapping[str, Any]) -> dict[str, np.ndarray]:
    if np.in_scalar_mode():
        plain = _plain_arrays(a)
        if plain is not None:
            return plain
    out = {k: np.asarray(a.get(k, 1)) for k in ("tp", "pp", "dp", "cp", "ep", "etp", "vpp", "micro_batch",
                                                 "global_batch")}
    out["zero"] = np.asarray(a.get("zero", 1))
    out["recompute"] = np.asarray(a.get("recompute", 0))
    out["uneven"] = np.asarray(a.get("uneven", False), dtype=bool)
    out["mb_group"] = np.asarray(a.get("mb_group", 0))
    sched = a.get("schedule", 0)
    if isinstance(sched, str) or (not isinstance(sched, int | float) and np.asarray(sched).dtype.kind in "US"):
        sched = schedule_code(sched)
    out["schedule"] = np.asarray(sched)
    out["sp"] = np.asarray(a.get("sp", False), dtype=bool)
    out["flash"] = np.asarray(a.get("flash", True), dtype=bool)
    out["offload"] = np.asarray(a.get("offload", 0))
    out["act_offload"] = np.asarray(a.get("act_offload", 0))
    if np.in_scalar_mode() and np.broadcast_shape(*out.values()) == ():  # one plan: nothing to broadcast
        return out
    keys = list(out)
    return dict(zip(keys, np.broadcast_arrays(*(out[k] for k in keys)), strict=True))


def plan_mask(model: ModelSpec, plans: Mapping[str, Any], seq_len: int, stack: Any = None) -> np.ndarray:
    """True where the plan can run ``model`` (and, with ``stack``, where that stack offers it)."""
    a = _arrays(plans)
    ok = np.ones(np.shape(a["tp"]), dtype=bool)
    for r in MODEL_RULES + (STACK_RULES if stack is not None else ()):
        ok &= np.asarray(r.ok(model, a, int(seq_len), stack), dtype=bool)
    return ok


def stack_problems(stack: Any, *, zero: Any = (), recompute: Any = (), cp: Any = (), schedule: Any = ()) -> list[str]:
    """The stack rules' reasons against option values fixed on their own, before any layout exists
    (``plan --zero 1 --stack megatron-lm-2021``): ZeRO stages, recompute codes (0/1/2), CP degrees,
    pipeline schedule codes. The
    same rules and sentences ``plan_problems`` gives for a whole plan."""
    no_model = cast(ModelSpec, None)  # the stack rules read only the plan and the stack
    out = []
    for key, values, rule in (("zero", zero, STACK_RULES[0]), ("recompute", recompute, STACK_RULES[1]),
                              ("cp", cp, STACK_RULES[2]), ("schedule", schedule, STACK_RULES[3])):
        for v in values:
            a = _arrays({key: v})
            if not bool(np.asarray(rule.ok(no_model, a, 0, stack))):
                out.append(rule.why(no_model, {k: np.item(x) for k, x in a.items()}, 0, stack))
    return out


def plan_problems(model: ModelSpec, plan: Any, stack: Any = None) -> list[str]:
    """Every reason the single ``plan`` (a ``ParallelPlan``) cannot run, in rule order."""
    a = _arrays({"tp": plan.tp, "pp": plan.pp, "dp": plan.dp, "cp": plan.cp, "ep": plan.ep, "etp": plan.etp,
                 "vpp": plan.vpp, "micro_batch": plan.micro_batch, "global_batch": plan.global_batch,
                 "zero": plan.zero_effective, "recompute": plan.recompute_code, "uneven": plan.uneven_pipeline,
                 "mb_group": plan.microbatch_group, "sp": plan.sequence_parallel, "flash": plan.flash_attention,
                 "schedule": plan.pipeline_schedule, "offload": plan.offload_code,
                 "act_offload": plan.activation_offload_layers})
    scal = None
    s = int(plan.seq_len)
    out = []
    for r in MODEL_RULES + (STACK_RULES if stack is not None else ()):
        ok = r.ok(model, a, s, stack)
        if not (ok if type(ok) is bool else bool(np.asarray(ok))):
            if scal is None:
                scal = {k: np.item(v) for k, v in a.items()}
            out.append(r.why(model, scal, s, stack))
    return out


# ------------------------------------------------------------------------------------------ memory fit
# The other half of validity: does the plan's peak memory (``workload.memory.plan_memory``, which already
# counts the runtime overhead: CUDA context, NCCL buffers, allocator workspace) fit the usable device
# memory (``Hardware.hbm_bytes``: the driver-reported capacity less the fragmentation reserve) with
# ``margin`` to spare? Every fit check (the engines' ``fits_memory``, the planner's pruning and ranking,
# sweeps, compare, plan --from-row) calls these; modelling a published run (``validate``) does not.
#
# DEFAULT_MEMORY_MARGIN_GB, ASSUMPTION (no published figure): headroom a planned layout keeps beyond
# the modelled peak, for what the model does not count and what varies from run to run: one more NCCL
# communicator at its defaults holds 4 MiB (DEFAULT_BUFFSIZE, NCCL src/init.cc) x up to 32 channels x
# send + receive x 2 ring peers = 0.5 GiB, NVLS buffers more (Megatron-Core's MoE guide recommends
# NCCL_NVLS_ENABLE=0 to save memory), and the caching allocator's fragmentation varies with the
# allocation pattern (the reason PyTorch offers expandable_segments; MODELLING.md 2.5). 2 GB covers about
# four such communicators; the memory model's own error on memory.csv is larger (clustertwin validate
# memory), so a user with a measured peak may lower it and a cautious one raise it (--memory-margin).
DEFAULT_MEMORY_MARGIN_GB = 2.0


def check_memory_margin(margin_gb: Any) -> float:
    """``--memory-margin`` as a float in GB: finite and >= 0, else an InputError naming the flag."""
    from ..errors import InputError

    try:
        v = float(margin_gb)
    except (TypeError, ValueError):
        raise InputError(f"--memory-margin must be a number of GB, got {margin_gb!r}",
                         hint=f"e.g. --memory-margin {DEFAULT_MEMORY_MARGIN_GB:g}") from None
    if not (np.isfinite(v) and v >= 0.0):
        raise InputError(f"--memory-margin must be a finite number of GB >= 0, got {margin_gb!r}",
                         hint=f"the default {DEFAULT_MEMORY_MARGIN_GB:g} GB keeps room for NCCL buffers and "
                              "allocator fragmentation the model does not count; 0 checks the modelled peak only")
    return v


def memory_left_gb(total_bytes: Any, capacity_bytes: Any, margin_gb: float = DEFAULT_MEMORY_MARGIN_GB) -> np.ndarray:
    """GB a plan leaves free after the margin (negative: it does not fit), arrays."""
    return (np.asarray(capacity_bytes, dtype=float) - np.asarray(total_bytes, dtype=float)) / 1e9 - float(margin_gb)


def memory_fits(total_bytes: Any, capacity_bytes: Any, margin_gb: float = DEFAULT_MEMORY_MARGIN_GB) -> np.ndarray:
    """True where the peak memory per GPU fits the usable capacity with ``margin_gb`` to spare."""
    return memory_left_gb(total_bytes, capacity_bytes, margin_gb) >= 0.0


def memory_fit_text(total_gb: float, capacity_gb: float, margin_gb: float) -> str:
    """The one sentence every command prints about the fit."""
    left = float(capacity_gb) - float(total_gb) - float(margin_gb)
    if left >= 0:
        return f"fits with {left:.1f} GB left after a {margin_gb:g} GB margin ({capacity_gb:.1f} GB usable)"
    return (f"DOES NOT FIT: needs {total_gb - capacity_gb + margin_gb:.1f} GB more than the {capacity_gb:.1f} GB "
            f"usable less a {margin_gb:g} GB margin")

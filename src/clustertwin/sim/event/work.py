"""What the event engine is fed: per-layer, per-micro-batch op durations of one representative rank
per pipeline stage (seconds), plus the options that decide how they are scheduled and overlapped.

The durations come from the shared cost model (``clustertwin.sim.costs``; see ``adapter.py``) so that
the analytical and the event engine agree on every op and differ only in scheduling and overlap.
Tests build them by hand (synthetic durations).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .engine import LINK_SCALEOUT, LINK_SCALEUP, InterferenceModel


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerWork:
    """One transformer layer (or an extra block such as embedding/logits), one micro-batch, one rank.

    Compute: ``fwd`` forward, ``bwd_input`` backward input-gradient (B), ``bwd_weight`` weight
    gradient (W), ``recompute`` extra forward work redone in backward (selective or full).
    ``attn_fraction`` is the share of ``fwd`` spent in the attention block (CP ring exchange overlaps
    it; TP collectives are placed after the attention and after the MLP block).
    Communication (per micro-batch, on the rank's streams): ``tp_fwd``/``tp_bwd``/``tp_recompute``
    tensor-parallel (SP) collectives; ``cp_fwd``/``cp_bwd`` context-parallel ring exchange;
    ``ep_fwd``/``ep_bwd`` expert-parallel dispatch+combine all-to-all (MoE layers only).
    Data parallel (per step): ``dp_grad`` grad reduce-scatter / all-reduce of this layer's grads,
    ``dp_param`` param all-gather of this layer's params (ZeRO-1: once per step; ZeRO-3: before
    every forward and backward use), ``params`` parameters held by the rank (bucket sizing).
    """

    fwd: float
    bwd_input: float
    bwd_weight: float = 0.0
    recompute: float = 0.0
    attn_fraction: float = 0.5
    tp_fwd: float = 0.0
    tp_bwd: float = 0.0
    tp_recompute: float = 0.0
    cp_fwd: float = 0.0
    cp_bwd: float = 0.0
    ep_fwd: float = 0.0
    ep_bwd: float = 0.0
    dp_grad: float = 0.0
    dp_param: float = 0.0
    dp_param_bwd: float | None = None  # ZeRO-3 gathers before the backward (None: dp_param; DeepSpeed: 2x)
    params: float = 0.0
    cp_overlap: bool = True  # ring exchange beside the attention; False: all-gather K,V before it
    name: str = "layer"

    @property
    def bwd(self) -> float:
        return self.bwd_input + self.bwd_weight

    def scaled(self, compute: float = 1.0, comm: float = 1.0, kinds: frozenset[str] | None = None) -> LayerWork:
        """The same layer with compute and communication times multiplied (stragglers). ``kinds``
        limits the communication factor to some of "tp", "cp", "ep", "dp" (default: all)."""

        def f(kind: str) -> float:
            return comm if kinds is None or kind in kinds else 1.0

        return replace(
            self,
            fwd=self.fwd * compute,
            bwd_input=self.bwd_input * compute,
            bwd_weight=self.bwd_weight * compute,
            recompute=self.recompute * compute,
            tp_fwd=self.tp_fwd * f("tp"),
            tp_bwd=self.tp_bwd * f("tp"),
            tp_recompute=self.tp_recompute * f("tp"),
            cp_fwd=self.cp_fwd * f("cp"),
            cp_bwd=self.cp_bwd * f("cp"),
            ep_fwd=self.ep_fwd * f("ep"),
            ep_bwd=self.ep_bwd * f("ep"),
            dp_grad=self.dp_grad * f("dp"),
            dp_param=self.dp_param * f("dp"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class StageWork:
    """The layers of one pipeline stage, split into ``v`` model chunks (interleaving).

    ``chunks[c]`` holds the layers of virtual stage ``c*p + i``. ``p2p_fwd``/``p2p_bwd`` are the
    send times of one activation / activation-gradient to the next / previous virtual stage.
    ``optimizer`` is the optimizer step on this rank's shard.
    """

    chunks: tuple[tuple[LayerWork, ...], ...]
    p2p_fwd: float = 0.0
    p2p_bwd: float = 0.0
    optimizer: float = 0.0
    step_overhead: float = 0.0  # per-step host/launch/sync work outside the layers (data loading, logging)

    def scaled(self, compute: float = 1.0, comm: float = 1.0, kinds: frozenset[str] | None = None) -> StageWork:
        pp = comm if kinds is None or "pp" in kinds else 1.0
        return replace(
            self,
            chunks=tuple(tuple(lw.scaled(compute, comm, kinds) for lw in ch) for ch in self.chunks),
            p2p_fwd=self.p2p_fwd * pp,
            p2p_bwd=self.p2p_bwd * pp,
            optimizer=self.optimizer * compute,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class EventOptions:
    """Scheduling and overlap options (Megatron-LM names in brackets).

    ``overlap_grad_reduce`` [--overlap-grad-reduce]: DP grad buckets reduce while backward runs; with
    PP only during each chunk's last micro-batch backward (Megatron ``schedules.py``).
    ``overlap_param_gather`` [--overlap-param-gather]: ZeRO-1 param all-gather of the previous step
    overlaps this step's forward, bucket by bucket. ZeRO-3 always prefetches one layer ahead.
    ``tp_overlap`` [TE userbuffers, --tp-comm-overlap]: TP collectives run beside the GEMMs they feed,
    except ``tp_exposed_fraction`` of them (the first/last of t ring-exchange chunks: 1/t).
    ``p2p_overlap``: pipeline sends run beside compute on their own streams; otherwise the send
    occupies the sender's compute stream until done (Megatron's non-interleaved schedule waits on
    its batched isend/irecv before the next pass).
    ``ep_overlap``: EP all-to-all runs beside expert compute (DualPipe / ``--overlap-moe-expert-parallel-comm``).
    ``bucket_params``: DP bucket size in parameters (Megatron: max(40e6, 1e6*dp)).
    """

    schedule: str = "1f1b"
    num_microbatches: int = 1
    microbatch_group: int | None = None
    zero_stage: int = 1
    overlap_grad_reduce: bool = True
    overlap_param_gather: bool = True
    tp_overlap: bool = False
    tp_exposed_fraction: float = 0.0
    ep_overlap: bool = False
    # ZeRO-3 / FSDP: share of each parameter gather that the implementation does not hide (1 - the stack's
    # fsdp_overlap; DeepSpeed ZeRO-3 2021 0.3): that part waits on the compute stream before the layer
    fsdp_exposed_share: float = 0.0
    p2p_overlap: bool | None = None  # None: asynchronous with interleaving only (Megatron overlap_p2p_comm)
    bucket_params: float = 40e6
    tp_link: int = LINK_SCALEUP
    cp_link: int = LINK_SCALEUP
    ep_link: int = LINK_SCALEUP
    dp_link: int = LINK_SCALEOUT
    pp_link: int = LINK_SCALEOUT
    interference: InterferenceModel = field(default_factory=InterferenceModel)
    steps: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class Straggler:
    """A perturbation of one pipeline stage: ``compute`` multiplies its compute times (a slowed or
    throttled GPU), ``comm`` its communication times (a degraded link: ``link`` = "scale-out" slows
    only the collectives that cross the scale-out network, e.g. a NIC at half speed, "scale-up" only
    the NVLink ones); ``extra_layers`` adds copies of the stage's last layer (an uneven partition). Ranks are symmetric within a stage, and the
    slowest rank of a stage sets its pace, so one slow GPU slows its whole stage."""

    stage: int
    compute: float = 1.0
    comm: float = 1.0
    extra_layers: int = 0
    link: str = "all"  # which links ``comm`` slows: all | scale-up | scale-out


LINKS = ("all", "scale-up", "scale-out")


def _comm_kinds(link: str, opts: EventOptions | None) -> frozenset[str] | None:
    """The communication kinds that run over ``link`` under ``opts`` (None: all)."""
    if link == "all" or opts is None:
        return None
    want = LINK_SCALEUP if link == "scale-up" else LINK_SCALEOUT
    by_kind = {"tp": opts.tp_link, "cp": opts.cp_link, "ep": opts.ep_link, "dp": opts.dp_link, "pp": opts.pp_link}
    return frozenset(k for k, lk in by_kind.items() if lk == want)


def apply_stragglers(stages: tuple[StageWork, ...], stragglers: tuple[Straggler, ...],
                     opts: EventOptions | None = None) -> tuple[StageWork, ...]:
    from ...errors import InputError, UnknownNameError

    out = list(stages)
    for s in stragglers:
        if not 0 <= s.stage < len(out):
            raise InputError(
                f"straggler stage {s.stage} is outside the pipeline (0..{len(out) - 1})",
                hint="pick a stage between 0 and pp-1",
            )
        if s.compute <= 0 or s.comm <= 0 or s.extra_layers < 0:
            raise InputError("straggler factors must be positive", hint="use e.g. compute=1.2 for 20 % slower")
        if s.link not in LINKS:
            raise UnknownNameError("straggler link", s.link, LINKS)
        st = out[s.stage].scaled(s.compute, s.comm, _comm_kinds(s.link, opts))
        if s.extra_layers:
            chunks = list(st.chunks)
            regular = [lw for ch in chunks for lw in ch if lw.name != "logits"] or [lw for ch in chunks for lw in ch]
            if not regular:
                raise InputError(f"stage {s.stage} has no layer to repeat")
            chunks[-1] = chunks[-1] + (regular[-1],) * s.extra_layers
            st = replace(st, chunks=tuple(chunks))
        out[s.stage] = st
    return tuple(out)


__all__ = [
    "EventOptions",
    "LINK_SCALEOUT",
    "LINK_SCALEUP",
    "LayerWork",
    "StageWork",
    "Straggler",
    "apply_stragglers",
]

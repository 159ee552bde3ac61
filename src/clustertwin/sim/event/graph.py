"""Builds the op graph of one training step from per-stage work and a pipeline schedule.

One representative rank per pipeline stage (ranks of one stage with the same role are identical), so
a 16,384-GPU job with PP16 is 16 ranks here. Streams per rank: ``compute``, ``tp``, ``cp``, ``ep``,
``pp-fwd``, ``pp-bwd``, ``dp-grad``, ``dp-param``.

Per layer and micro-batch (Megatron-LM with sequence parallelism):
forward  = attention GEMMs/core -> TP collective -> MLP (MoE: dispatch a2a -> experts -> combine a2a)
           -> TP collective; a CP ring exchange runs beside the attention block (a CP all-gather of
           K,V, as in Llama 3, runs before it).
backward = (recompute forward) -> MLP/attention backward with the mirrored collectives.
With ``tp_overlap`` (or ``ep_overlap``) the collective runs beside the GEMM it belongs to instead of
after it (TE userbuffers ring-exchange / DualPipe-style overlap).

Data parallel (Megatron DDP, ``distributed_data_parallel.py``): gradient buckets of ``bucket_params``
parameters are reduced as the backward of the *last* micro-batch of each model chunk produces them
(``schedules.py`` enables grad sync only then); ZeRO-2/3 (sharded gradients) reduce every micro-batch. The distributed
optimizer's param all-gather of the previous step runs at the start of the step, bucket by bucket,
each forward of a layer waiting for its bucket (``overlap_param_gather``); ZeRO-3 gathers every
layer before each forward and backward use, prefetching one layer ahead. The optimizer step starts
after a global sync (grad-norm all-reduce), so the step ends when the slowest stage finishes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...errors import InputError
from .engine import LINK_NONE, OpGraph
from .schedules import stage_order
from .work import EventOptions, LayerWork, StageWork


@dataclass(frozen=True, slots=True)
class BuiltStep:
    graph: OpGraph
    num_stages: int
    num_chunks: int
    step_end_ops: tuple[int, ...]  # one zero-work op per step marking its end


class _StageStreams:
    __slots__ = ("compute", "tp", "cp", "ep", "pp_fwd", "pp_bwd", "dp_grad", "dp_param")

    def __init__(self, g: OpGraph, stage: int):
        self.compute = g.stream(stage, "compute")
        self.tp = g.stream(stage, "tp")
        self.cp = g.stream(stage, "cp")
        self.ep = g.stream(stage, "ep")
        self.pp_fwd = g.stream(stage, "pp-send-fwd")
        self.pp_bwd = g.stream(stage, "pp-send-bwd")
        self.dp_grad = g.stream(stage, "dp-grad")
        self.dp_param = g.stream(stage, "dp-param")


def build_step(stages: tuple[StageWork, ...], opts: EventOptions) -> BuiltStep:
    p = len(stages)
    if p == 0:
        raise InputError("no pipeline stages to simulate")
    v = len(stages[0].chunks)
    if any(len(s.chunks) != v for s in stages):
        raise InputError("every pipeline stage needs the same number of model chunks")
    m = opts.num_microbatches
    if opts.schedule == "interleaved" and v > 1 and m < p:
        raise InputError(
            f"the interleaved schedule needs at least p={p} micro-batches per pipeline, got {m}",
            hint="raise the global batch or lower pp/vpp",
        )
    g = OpGraph()
    streams = [_StageStreams(g, i) for i in range(p)]
    costs = _slot_costs(stages) if opts.schedule == "zb-h1" else None
    if costs is not None:
        from .schedules import zb_h1_all

        orders = zb_h1_all(p, m, costs)
    else:
        orders = [stage_order(opts.schedule, p, m, v, i, opts.microbatch_group) for i in range(p)]
    split_w = opts.schedule == "zb-h1"
    p2p_async = (opts.schedule == "interleaved" and v > 1) if opts.p2p_overlap is None else opts.p2p_overlap
    step_ends: list[int] = []
    prev_sync: list[int] = [-1] * p
    for step in range(max(1, opts.steps)):
        prev_sync = _build_one_step(g, stages, streams, orders, opts, split_w, p2p_async, prev_sync, step)
        step_ends.append(prev_sync[0])
    return BuiltStep(graph=g, num_stages=p, num_chunks=v, step_end_ops=tuple(step_ends))


def _slot_costs(stages: tuple[StageWork, ...]) -> tuple[float, float, float, float]:
    """(t_F, t_B, t_W, t_p2p) of one micro-batch on the slowest stage, for cost-aware schedules."""
    tf = tb = tw = tc = 0.0
    for s in stages:
        ch = [lw for c in s.chunks for lw in c]
        tf = max(tf, sum(lw.fwd + lw.tp_fwd + lw.ep_fwd for lw in ch))
        tb = max(tb, sum(lw.bwd_input + lw.recompute + lw.tp_bwd + lw.tp_recompute + lw.ep_bwd for lw in ch))
        tw = max(tw, sum(lw.bwd_weight for lw in ch))
        tc = max(tc, s.p2p_fwd, s.p2p_bwd)
    return tf, tb, tw, tc


def _last_grad_slot(order, split_w: bool, zero_stage: int) -> dict[tuple[int, int], bool]:
    """(microbatch, chunk) pairs whose backward (or W) triggers DP grad reduction."""
    kind = "W" if split_w else "B"
    last: dict[int, int] = {}
    for kd, mb, c in order:
        if kd == kind:
            last[c] = mb
    if zero_stage >= 2:  # sharded gradients: no full-size accumulation buffer, reduce every micro-batch
        return {(mb, c): True for kd, mb, c in order if kd == kind}
    return {(mb, c): True for c, mb in last.items()}


def _build_one_step(g, stages, streams, orders, opts: EventOptions, split_w, p2p_async, prev_sync, step):
    p = len(stages)
    v = len(stages[0].chunks)
    nvs = p * v
    tag = f"s{step} " if opts.steps > 1 else ""
    zero3 = opts.zero_stage >= 3
    cache: dict = {}
    fsend: dict[tuple[int, int], int] = {}
    bsend: dict[tuple[int, int], int] = {}
    fdone: dict[tuple[int, int], int] = {}
    bgrad_ops: dict[tuple[int, int, int], int] = {}  # (mb, vs, layer) -> B op (for W)
    dp_last: list[list[int]] = [[] for _ in range(p)]
    # ZeRO-1/2 param all-gather of the previous step's update, overlapped with this forward.
    ag_for: list[dict[tuple[int, int], int]] = [{} for _ in range(p)]
    first_fwd_mb: list[dict[int, int]] = [{} for _ in range(p)]
    for i in range(p):
        for kd, mb, c in orders[i]:
            if kd == "F" and c not in first_fwd_mb[i]:
                first_fwd_mb[i][c] = mb
    if 1 <= opts.zero_stage <= 2 and opts.overlap_param_gather:
        for i in range(p):
            ss = streams[i]
            for c, chunk in enumerate(stages[i].chunks):
                acc = 0.0
                pending: list[int] = []
                for li, lw in enumerate(chunk):
                    pending.append(li)
                    acc += lw.params
                    if acc >= opts.bucket_params or li == len(chunk) - 1:
                        dur = sum(chunk[x].dp_param for x in pending)
                        op = g.add(f"{tag}param-AG c{c} L{pending[0]}-{pending[-1]}", ss.dp_param, dur,
                                   "dp-param", opts.dp_link, (prev_sync[i],))
                        for x in pending:
                            ag_for[i][(c, x)] = op
                        pending = []
                        acc = 0.0
    grad_slots = [_last_grad_slot(orders[i], split_w, opts.zero_stage) for i in range(p)]
    # Emit slots stage by stage in an order that respects cross-stage dependencies.
    ptr = [0] * p
    total = sum(len(o) for o in orders)
    emitted = 0
    while emitted < total:
        progress = False
        for i in range(p):
            order = orders[i]
            while ptr[i] < len(order):
                kd, mb, c = order[ptr[i]]
                vs = c * p + i
                if kd == "F" and vs > 0 and (mb, vs - 1) not in fsend:
                    break
                if kd == "B" and vs < nvs - 1 and (mb, vs + 1) not in bsend:
                    break
                ss = streams[i]
                chunk = stages[i].chunks[c]
                if kd == "F":
                    deps = [fsend[(mb, vs - 1)]] if vs > 0 else []
                    if step > 0 and prev_sync[i] >= 0:
                        deps.append(prev_sync[i])
                    front = _forward(g, ss, chunk, opts, deps, tag, mb, c, i,
                                     ag_for[i] if first_fwd_mb[i].get(c) == mb else None, zero3, cache)
                    fdone[(mb, vs)] = front
                    if vs < nvs - 1:
                        # blocking sends (no p2p overlap) occupy the compute stream until done
                        sst = ss.pp_fwd if p2p_async else ss.compute
                        op = g.add(f"{tag}send-F mb{mb} c{c}", sst, stages[i].p2p_fwd, "pp", opts.pp_link, (front,))
                        fsend[(mb, vs)] = op
                    else:
                        fsend[(mb, vs)] = front
                elif kd == "B":
                    deps = [fdone[(mb, vs)]]
                    if vs < nvs - 1:
                        deps.append(bsend[(mb, vs + 1)])
                    reduce_now = (not split_w) and grad_slots[i].get((mb, c), False)
                    front = _backward(g, ss, chunk, opts, deps, tag, mb, c, vs, split_w, bgrad_ops,
                                      reduce_now, dp_last[i], zero3, cache)
                    if vs > 0:
                        sst = ss.pp_bwd if p2p_async else ss.compute
                        op = g.add(f"{tag}send-B mb{mb} c{c}", sst, stages[i].p2p_bwd, "pp", opts.pp_link, (front,))
                        bsend[(mb, vs)] = op
                    else:
                        bsend[(mb, vs)] = front
                else:  # W
                    reduce_now = grad_slots[i].get((mb, c), False)
                    _wgrad(g, ss, chunk, opts, tag, mb, c, vs, bgrad_ops, reduce_now, dp_last[i], cache)
                ptr[i] += 1
                emitted += 1
                progress = True
        if not progress:
            raise RuntimeError("pipeline schedule deadlocked while building the op graph")
    # DP grad reduction without overlap: after all backward work of the stage.
    if not opts.overlap_grad_reduce:
        for i in range(p):
            ss = streams[i]
            after = g.stream_last[ss.compute]
            dur = sum(lw.dp_grad for ch in stages[i].chunks for lw in ch)
            if opts.zero_stage >= 2:
                dur *= opts.num_microbatches  # ZeRO-2/3 reduce every micro-batch
            op = g.add(f"{tag}grad-reduce (no overlap)", ss.dp_grad, dur, "dp-grad", opts.dp_link, (after,))
            dp_last[i].append(op)
    # Global sync (grad-norm all-reduce), optimizer step, then (without overlap) the param all-gather.
    sync_deps = [g.stream_last[streams[i].compute] for i in range(p)]
    sync_deps += [g.stream_last[streams[i].dp_grad] for i in range(p)]
    sync_deps += [g.stream_last[streams[i].pp_fwd] for i in range(p)]
    sync_deps += [g.stream_last[streams[i].pp_bwd] for i in range(p)]
    new_sync = []
    for i in range(p):
        ss = streams[i]
        sync = g.add(f"{tag}grad-sync barrier", ss.compute, 0.0, "sync", LINK_NONE, tuple(sync_deps))
        opt = g.add(f"{tag}optimizer", ss.compute, stages[i].optimizer, "optimizer", LINK_NONE, (sync,))
        last = opt
        if 1 <= opts.zero_stage <= 2 and not opts.overlap_param_gather:
            dur = sum(lw.dp_param for ch in stages[i].chunks for lw in ch)
            last = g.add(f"{tag}param-AG (no overlap)", ss.dp_param, dur, "dp-param", opts.dp_link, (opt,))
            last = g.add(f"{tag}wait param-AG", ss.compute, 0.0, "sync", LINK_NONE, (last,))
        if stages[i].step_overhead > 0:
            last = g.add(f"{tag}step overhead", ss.compute, stages[i].step_overhead, "overhead", LINK_NONE)
        new_sync.append(last)
    end_deps = tuple(new_sync)
    return [g.add(f"{tag}step end", streams[i].compute, 0.0, "sync", LINK_NONE, end_deps) for i in range(p)]


def _seq_or_overlap(g, comp_stream, comm_stream, front, comp_work, comm_work, cname, xname, ccat, xcat,
                    link, overlap, exposed=0.0):
    """Run ``comp_work`` then ``comm_work``, or both side by side when ``overlap`` except the
    ``exposed`` fraction of the comm, which runs after both (the first/last chunk of a pipelined
    ring-exchange overlap cannot hide). Returns the new front."""
    ops = []
    if comp_work > 0 or comm_work <= 0:
        c = g.add(cname, comp_stream, comp_work, ccat, LINK_NONE, front)
        ops.append(c)
        if not overlap:
            front = (c,)
    if comm_work > 0:
        hidden = comm_work * (1.0 - exposed) if overlap else comm_work
        x = g.add(xname, comm_stream, hidden, xcat, link, front)
        ops.append(x)
        if not overlap:
            return (x,)
        if exposed > 0:
            return (g.add(xname + " tail", comm_stream, comm_work * exposed, xcat, link, tuple(ops)),)
    return tuple(ops) if overlap else front


def _units(chunk: tuple[LayerWork, ...], coarse: bool, cache: dict) -> list[tuple[int, int, LayerWork]]:
    """Memoised per build (``cache`` lives on one ``build_step`` call, never globally)."""
    key = (id(chunk), coarse)
    hit = cache.get(key)
    if hit is not None and hit[0] is chunk:
        return hit[1]
    out = _units_impl(chunk, coarse)
    cache[key] = (chunk, out)
    return out


def _units_impl(chunk: tuple[LayerWork, ...], coarse: bool) -> list[tuple[int, int, LayerWork]]:
    """Layers as (first, last, work) units. ``coarse`` merges runs of identical layers into one unit:
    exact for a chain of identical layers whose ops nothing outside the chain waits on (the ops of a
    layer run in the same proportions, so n layers behave like one layer n times as long). Used for
    micro-batches without per-layer DP traffic; it keeps 16k-GPU steps to a few thousand ops."""
    if not coarse:
        return [(i, i, lw) for i, lw in enumerate(chunk)]
    out: list[tuple[int, int, LayerWork]] = []
    i = 0
    n = len(chunk)
    while i < n:
        j = i
        while j + 1 < n and (chunk[j + 1] is chunk[i] or chunk[j + 1] == chunk[i]):
            j += 1
        lw = chunk[i]
        out.append((i, j, lw if i == j else _merged(lw, j - i + 1)))
        i = j + 1
    return out


def _merged(lw: LayerWork, n: int) -> LayerWork:
    return replace(
        lw, fwd=lw.fwd * n, bwd_input=lw.bwd_input * n, bwd_weight=lw.bwd_weight * n, recompute=lw.recompute * n,
        tp_fwd=lw.tp_fwd * n, tp_bwd=lw.tp_bwd * n, tp_recompute=lw.tp_recompute * n, cp_fwd=lw.cp_fwd * n,
        cp_bwd=lw.cp_bwd * n, ep_fwd=lw.ep_fwd * n, ep_bwd=lw.ep_bwd * n, dp_grad=lw.dp_grad * n,
        dp_param=lw.dp_param * n, params=lw.params * n,
    )


def _label(lw: LayerWork, a: int, b: int) -> str:
    return f"{lw.name}{a}" if a == b else f"{lw.name}{a}-{b}"


def _forward(g, ss, chunk: tuple[LayerWork, ...], opts, deps, tag, mb, c, stage, ag_map, zero3, cache) -> int:
    front: tuple[int, ...] = tuple(deps)
    hist = [front, front]
    exposed: tuple[int, ...] = ()  # the previous layer's exposed gather part (holds the compute stream)
    for li, lj, lw in _units(chunk, not zero3 and ag_map is None, cache):
        nm = f"{tag}F mb{mb} c{c} {_label(lw, li, lj)}"
        if zero3 and lw.dp_param > 0:
            prefetch = hist[-2] + exposed  # gather layer l while layer l-1 computes (prefetch one ahead)
            front = _fsdp_gather(g, ss, opts, front, prefetch, lw.dp_param, f"{tag}AG-fwd mb{mb} c{c} L{li}",
                                 lw.fwd)
            exposed = front[:-1] if opts.fsdp_exposed_share > 0 else ()
        elif ag_map is not None and (c, li) in ag_map:
            front = (*front, ag_map[(c, li)])
        cat = "logits" if lw.name == "logits" else "forward"
        front = _layer_pass(g, ss, lw, opts, front, nm, cat, lw.fwd, lw.tp_fwd, lw.cp_fwd, lw.ep_fwd)
        hist.append(front)
    return _join(g, ss, front, f"{tag}F-done mb{mb} c{c}")


def _fsdp_gather(g, ss, opts, front, prefetch, dur, name, compute, extra=0.0):
    """A ZeRO-3 / FSDP parameter gather (+ ``extra``: the layer's gradient reduce-scatter) issued one layer
    ahead on the DP stream. As in the closed form, the implementation hides h = (1 - fsdp_exposed_share) x
    min(communication, the layer's compute); the rest holds the compute stream before the layer. The hidden
    part of layer l's gather starts after layer l-1's exposed part (``prefetch`` includes it): both are the
    same collective on the same link, so the hidden part runs beside layer l-1's compute, not beside its
    exposed communication. Returns the front: the exposed op(s), then the hidden gather last."""
    x = float(opts.fsdp_exposed_share)
    if x <= 0:
        return (*front, g.add(name, ss.dp_param, dur, "dp-param", opts.dp_link, prefetch))
    comm = dur + extra
    hidden = (1.0 - x) * min(comm, compute)
    ag = g.add(name, ss.dp_param, hidden * dur / comm if comm > 0 else 0.0, "dp-param", opts.dp_link, prefetch)
    front = (g.add(name + " (exposed)", ss.compute, comm - hidden, "dp-param", opts.dp_link, front),)
    return (*front, ag)


def _join(g, ss, front, name) -> int:
    """One op that waits for the whole front, on the compute stream: the next work of the rank
    (another micro-batch, chunk or pass) starts only after this pass's collectives completed, as in
    Megatron where the schedule issues the next pass after the current one returned."""
    if len(front) == 1 and g.op_stream[front[0]] == ss.compute:
        return front[0]
    return g.add(name, ss.compute, 0.0, "sync", LINK_NONE, front)


def _layer_pass(g, ss, lw: LayerWork, opts, front, nm, cat, compute, tp, cp, ep):
    """attention block (+CP ring beside it) -> TP -> MLP (MoE: dispatch -> experts -> combine) -> TP.

    With ``tp_overlap`` the layer's TP collectives run beside its compute instead of after it."""
    if cp <= 0 and ep <= 0:
        return _seq_or_overlap(g, ss.compute, ss.tp, front, compute, tp, nm, nm + " tp", cat, "tp",
                               opts.tp_link, opts.tp_overlap, opts.tp_exposed_fraction)
    start = front
    attn = compute * lw.attn_fraction
    mlp = compute - attn
    ops = []
    if cp > 0:
        if lw.cp_overlap:
            ops.append(g.add(nm + " cp-ring", ss.cp, cp, "cp", opts.cp_link, front))
        else:  # all-gather of K,V (reduce-scatter of dK,dV) the attention waits for
            front = (g.add(nm + " cp-allgather", ss.cp, cp, "cp", opts.cp_link, front),)
    ops.append(g.add(nm + " attn", ss.compute, attn, cat, LINK_NONE, front))
    front = tuple(ops)
    if tp > 0 and not opts.tp_overlap:
        front = (g.add(nm + " tp-attn", ss.tp, tp / 2, "tp", opts.tp_link, front),)
    if ep > 0 and opts.ep_overlap:
        e = g.add(nm + " ep-a2a", ss.ep, ep, "ep", opts.ep_link, front)
        front = (g.add(nm + " mlp", ss.compute, mlp, cat, LINK_NONE, front), e)
    elif ep > 0:
        d = g.add(nm + " ep-dispatch", ss.ep, ep / 2, "ep", opts.ep_link, front)
        m_ = g.add(nm + " mlp", ss.compute, mlp, cat, LINK_NONE, (d,))
        front = (g.add(nm + " ep-combine", ss.ep, ep / 2, "ep", opts.ep_link, (m_,)),)
    else:
        front = (g.add(nm + " mlp", ss.compute, mlp, cat, LINK_NONE, front),)
    if tp > 0:
        if opts.tp_overlap:
            f = opts.tp_exposed_fraction
            front = (*front, g.add(nm + " tp", ss.tp, tp * (1 - f), "tp", opts.tp_link, start))
            if f > 0:
                front = (g.add(nm + " tp tail", ss.tp, tp * f, "tp", opts.tp_link, front),)
        else:
            front = (g.add(nm + " tp-mlp", ss.tp, tp / 2, "tp", opts.tp_link, front),)
    return front


def _backward(g, ss, chunk, opts, deps, tag, mb, c, vs, split_w, bgrad_ops, reduce_now, dp_last, zero3,
              cache) -> int:
    front: tuple[int, ...] = tuple(deps)
    hist = [front, front]
    exposed: tuple[int, ...] = ()
    acc = 0.0
    pending: list[int] = []
    for li, lj, lw in reversed(_units(chunk, not zero3 and not reduce_now, cache)):
        nm = f"{tag}B mb{mb} c{c} {_label(lw, li, lj)}"
        if zero3 and lw.dp_param > 0:
            prefetch = hist[-2] + exposed
            dur = lw.dp_param if lw.dp_param_bwd is None else lw.dp_param_bwd
            # the unhidden share of this layer's gradient reduce-scatter waits with its gather
            front = _fsdp_gather(g, ss, opts, front, prefetch, dur, f"{tag}AG-bwd mb{mb} c{c} L{li}",
                                 lw.bwd + lw.recompute, extra=lw.dp_grad if opts.fsdp_exposed_share > 0 else 0.0)
            exposed = front[:-1] if opts.fsdp_exposed_share > 0 else ()
        if lw.recompute > 0 or lw.tp_recompute > 0:
            if lw.tp_recompute > 0:
                front = _seq_or_overlap(g, ss.compute, ss.tp, front, lw.recompute, lw.tp_recompute,
                                        nm + " recompute", nm + " recompute tp", "recompute", "tp",
                                        opts.tp_link, opts.tp_overlap, opts.tp_exposed_fraction)
            else:
                front = (g.add(nm + " recompute", ss.compute, lw.recompute, "recompute", LINK_NONE, front),)
        work = lw.bwd_input if split_w else lw.bwd
        cat = "logits" if lw.name == "logits" else "backward"
        front = _layer_pass(g, ss, lw, opts, front, nm, cat, work, lw.tp_bwd, lw.cp_bwd, lw.ep_bwd)
        hist.append(front)
        if split_w:
            done = front[0] if len(front) == 1 else _join(g, ss, front, nm + " done")
            for x in range(li, lj + 1):
                bgrad_ops[(mb, vs, x)] = done
        elif reduce_now and lw.dp_grad > 0:
            pending.append(li)
            acc += lw.params
            if acc >= opts.bucket_params or li == 0:
                _reduce(g, ss, chunk, opts, tag, mb, c, pending, front, dp_last)
                pending, acc = [], 0.0
    if pending:
        _reduce(g, ss, chunk, opts, tag, mb, c, pending, front, dp_last)
    return _join(g, ss, front, f"{tag}B-done mb{mb} c{c}")


def _reduce(g, ss, chunk, opts, tag, mb, c, pending, front, dp_last):
    if not opts.overlap_grad_reduce:
        return
    dur = sum(chunk[x].dp_grad for x in pending)
    if opts.zero_stage >= 3 and opts.fsdp_exposed_share > 0:  # timed with the layer's gather (_fsdp_gather)
        dur = 0.0
    op = g.add(f"{tag}grad-RS mb{mb} c{c} L{pending[-1]}-{pending[0]}", ss.dp_grad, dur, "dp-grad",
               opts.dp_link, front)
    dp_last.append(op)


def _wgrad(g, ss, chunk, opts, tag, mb, c, vs, bgrad_ops, reduce_now, dp_last, cache) -> None:
    acc = 0.0
    pending: list[int] = []
    w = -1
    for li, lj, lw in reversed(_units(chunk, not reduce_now, cache)):
        dep = bgrad_ops[(mb, vs, li)]
        for x in range(li, lj + 1):
            dep = max(dep, bgrad_ops.pop((mb, vs, x)))
        w = g.add(f"{tag}W mb{mb} c{c} {_label(lw, li, lj)}", ss.compute, lw.bwd_weight, "wgrad", LINK_NONE,
                  (dep,))
        if reduce_now and lw.dp_grad > 0:
            pending.append(li)
            acc += lw.params
            if acc >= opts.bucket_params or li == 0:
                _reduce(g, ss, chunk, opts, tag, mb, c, pending, (w,), dp_last)
                pending, acc = [], 0.0
    if pending:
        _reduce(g, ss, chunk, opts, tag, mb, c, pending, (w,), dp_last)

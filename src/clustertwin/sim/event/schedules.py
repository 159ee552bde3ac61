"""Pipeline schedules: the order in which one pipeline stage runs its micro-batch work.

Each schedule returns, per stage, a list of ``(kind, microbatch, chunk)`` with kind ``"F"`` (forward),
``"B"`` (backward; includes the weight gradient unless the schedule splits it) or ``"W"`` (weight
gradient, zero-bubble schedules only). The cross-stage dependencies are the same for every schedule
(F of virtual stage k waits for F of k-1; B of k waits for B of k+1 and for F of k) and are added by
the graph builder, so the engine derives the bubbles instead of assuming them.

* ``1f1b``  — PipeDream-Flush / Megatron non-interleaved (Narayanan et al. SC'21, section 2.2.1):
  ``min(p-i-1, m)`` warm-up forwards, then one forward / one backward, then cool-down backwards.
  Bubble (p-1)/m.
* ``interleaved`` — Megatron interleaved 1F1B (SC'21 section 2.2.2; ``schedules.py``
  ``forward_backward_pipelining_with_interleaving``): virtual micro-batches run in groups of
  ``microbatch_group_size_per_vp_stage`` (default p) per model chunk (``get_schedule_table``);
  warm-up ``(p-i-1)*2 + (v-1)*group``. Bubble (p-1)/(v*m).
* ``zb-h1`` — zero-bubble ZB-H1 (Qi et al. ICLR'24, sail-sg/zero-bubble-pipeline-parallelism):
  the 1F1B order of F and B (input gradient only); each stage defers its W (weight gradient) to fill
  what would be idle time, holding at most p micro-batches (1F1B's peak). Built from the stage's
  F/B/W times like the zero-bubble repository's schedule generator; bubble (p-1)(T_F + T_B - T_W).
* ``gpipe`` — all forwards, then all backwards (bubble (p-1)/m, m micro-batches in flight).
"""

from __future__ import annotations

from ...errors import InputError

SCHEDULES = ("1f1b", "interleaved", "zb-h1", "gpipe")

Slot = tuple[str, int, int]  # (kind, microbatch, chunk)


def schedule_table(num_microbatches: int, num_chunks: int, group: int) -> list[tuple[int, int]]:
    """Megatron ``get_schedule_table``: virtual micro-batch k -> (microbatch, chunk)."""
    table: list[tuple[int, int]] = []
    for lo in range(0, num_microbatches, group):
        hi = min(lo + group, num_microbatches)
        if lo + group >= num_microbatches:
            hi = num_microbatches
        for c in range(num_chunks):
            for mb in range(lo, hi):
                table.append((mb, c))
    return table


def one_f_one_b(p: int, m: int, stage: int) -> list[Slot]:
    warm = min(p - stage - 1, m)
    out: list[Slot] = [("F", j, 0) for j in range(warm)]
    for j in range(m - warm):
        out.append(("F", warm + j, 0))
        out.append(("B", j, 0))
    for j in range(m - warm, m):
        out.append(("B", j, 0))
    return out


def gpipe(p: int, m: int, stage: int) -> list[Slot]:
    return [("F", j, 0) for j in range(m)] + [("B", j, 0) for j in range(m)]


def interleaved(p: int, m: int, v: int, stage: int, group: int | None = None) -> list[Slot]:
    if v == 1:
        return one_f_one_b(p, m, stage)
    group = group or p
    table = schedule_table(m, v, group)
    total = m * v
    warm = min((p - stage - 1) * 2 + (v - 1) * group, total)
    fwd = [("F", mb, c) for mb, c in table]
    bwd = [("B", mb, v - 1 - c) for mb, c in table]
    out: list[Slot] = fwd[:warm]
    for k in range(total - warm):
        out.append(fwd[warm + k])
        out.append(bwd[k])
    out.extend(bwd[total - warm :])
    return out


def zb_h1(p: int, m: int, stage: int, costs: tuple[float, float, float, float] | None = None) -> list[Slot]:
    """ZB-H1 order of ``stage``. With ``costs = (t_F, t_B, t_W, t_p2p)`` the order comes from a greedy
    slot-level simulation, as the zero-bubble repository builds its schedules from profiled F/B/W
    times: each stage runs its next F or B (1F1B order) as soon as it is ready, runs a deferred W
    when it would otherwise idle, and runs a W before a new F once ``p`` micro-batches hold
    activations (1F1B's peak, reached on stage 0, so the peak over stages equals 1F1B's). Without costs, F = B = W is assumed."""
    return zb_h1_all(p, m, costs)[stage]


def zb_h1_all(p: int, m: int, costs=None) -> list[list[Slot]]:
    tf, tb, tw, tc = costs if costs is not None else (1.0, 1.0, 1.0, 0.0)
    fb = [[k for k in one_f_one_b(p, m, i)] for i in range(p)]
    ptr = [0] * p
    free = [0.0] * p
    f_end: dict[tuple[int, int], float] = {}
    b_end: dict[tuple[int, int], float] = {}
    pending_w: list[list[int]] = [[] for _ in range(p)]
    held = [0] * p  # micro-batches whose activations are held (F done, W not done)
    out: list[list[Slot]] = [[] for _ in range(p)]
    inf = float("inf")

    def ready_at(i: int) -> float:
        kd, mb, _ = fb[i][ptr[i]]
        if kd == "F":
            if i == 0:
                return 0.0
            t = f_end.get((i - 1, mb))
            return inf if t is None else t + tc
        if i == p - 1:
            return f_end[(i, mb)]
        t = b_end.get((i + 1, mb))
        return inf if t is None else t + tc

    remaining = sum(len(x) for x in fb) + p * m
    while remaining:
        best = None
        for i in range(p):
            if ptr[i] < len(fb[i]):
                kd = fb[i][ptr[i]][0]
                r = ready_at(i)
                must_w = kd == "F" and held[i] >= p and pending_w[i]
                if pending_w[i] and (must_w or r > free[i]):
                    cand = (free[i], i, "W")
                elif r < inf:
                    cand = (max(free[i], r), i, kd)
                else:
                    continue
            elif pending_w[i]:
                cand = (free[i], i, "W")
            else:
                continue
            if best is None or cand < best:
                best = cand
        if best is None:
            raise RuntimeError("zb-h1 schedule construction deadlocked")
        t, i, kd = best
        if kd == "W":
            mb = pending_w[i].pop(0)
            free[i] = t + tw
            held[i] -= 1
            out[i].append(("W", mb, 0))
        else:
            _, mb, _ = fb[i][ptr[i]]
            ptr[i] += 1
            if kd == "F":
                free[i] = t + tf
                f_end[(i, mb)] = free[i]
                held[i] += 1
            else:
                free[i] = t + tb
                b_end[(i, mb)] = free[i]
                pending_w[i].append(mb)
            out[i].append((kd, mb, 0))
        remaining -= 1
    return out


def stage_order(
    schedule: str, p: int, m: int, v: int, stage: int, group: int | None = None, costs=None
) -> list[Slot]:
    """The ordered work of ``stage`` (0-based) under ``schedule``. ``costs`` = (t_F, t_B, t_W, t_p2p)
    of one micro-batch on one stage, used by schedules built from profiled times (zb-h1)."""
    if p < 1 or m < 1 or v < 1:
        raise InputError(f"pipeline needs p, m, v >= 1 (got p={p}, m={m}, v={v})")
    if schedule == "1f1b":
        if v != 1:
            raise InputError("schedule 1f1b has one model chunk per stage", hint="use 'interleaved' for v > 1")
        return one_f_one_b(p, m, stage)
    if schedule == "interleaved":
        return interleaved(p, m, v, stage, group)
    if schedule == "zb-h1":
        if v != 1:
            raise InputError("schedule zb-h1 has one model chunk per stage", hint="set vpp to 1")
        return zb_h1(p, m, stage, costs)
    if schedule == "gpipe":
        if v != 1:
            raise InputError("schedule gpipe has one model chunk per stage", hint="set vpp to 1")
        return gpipe(p, m, stage)
    from ...errors import UnknownNameError

    raise UnknownNameError("pipeline schedule", schedule, SCHEDULES)

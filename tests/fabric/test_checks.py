"""The fabric checks of docs/fabric.md: spraying reaches line rate, oversubscription halves
cross-leaf throughput, ECMP loses what balls-into-bins predicts, seeds repeat, a failed spine
link costs what the lost bisection predicts, contention never helps."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from clustertwin.fabric import (
    Faults,
    Phase,
    max_min_rates,
    route,
    simulate_collective,
    simulate_phases,
)


def _perm_phase(n: int, seed: int, size: float = 1e9) -> Phase:
    rng = np.random.default_rng(seed)
    while True:
        p = rng.permutation(n)
        if not np.any(p == np.arange(n)):
            return Phase(np.arange(n), p, np.full(n, size))


def test_spray_permutation_reaches_line_rate(small):
    for gpus, radix, tiers in ((128, 16, 2), (128, 8, 3)):
        fab = small(gpus, radix=radix, tiers=tiers)
        assert fab.topo.shape.tiers == tiers
        run = simulate_phases(fab, [_perm_phase(gpus, 1)], routing="spray")
        line = fab.topo.nic_bw
        achieved = 1e9 / run.time_s
        assert achieved >= 0.95 * line, (gpus, achieved / line)


def test_oversubscription_halves_cross_leaf_throughput(small):
    # radix 12 splits a leaf 8 down : 4 up at 2:1 exactly (cluster.fattree sizing)
    full = small(96, radix=12, oversubscription=1.0)
    over = small(96, radix=12, oversubscription=2.0)
    assert over.topo.shape.u1 * 2 == over.topo.shape.down
    d = over.topo.shape.down
    n = 96
    # every flow leaves its leaf: shift by one leaf
    ph = Phase(np.arange(n), (np.arange(n) + d) % n, np.full(n, 1e9))
    t_full = simulate_phases(full, [ph], routing="spray").time_s
    t_over = simulate_phases(over, [ph], routing="spray").time_s
    thr_ratio = t_full / t_over
    assert abs(thr_ratio - 0.5) < 0.01, thr_ratio
    # 3 tiers: cross-pod traffic also halves
    f3 = small(128, radix=8, tiers=3)
    o3 = small(128, radix=8, tiers=3, oversubscription=3.0)  # radix 8: 6 down : 2 up = 3:1
    s = o3.topo.shape
    pod_eps = s.down * s.leaves_per_pod
    ph3 = Phase(np.arange(128), (np.arange(128) + pod_eps) % 128, np.full(128, 1e9))
    r = simulate_phases(f3, [ph3], routing="spray").time_s / simulate_phases(o3, [ph3], routing="spray").time_s
    assert abs(r - s.u1 / s.down) < 0.01, (r, s.u1, s.down)


def test_ecmp_collision_loss_matches_balls_into_bins(small):
    """One leaf sends d flows to d different leaves (no downlink sharing): under ECMP each flow
    picks one of u uplinks at random, a bin with k flows gives each c/k, so the leaf's throughput
    is c x (occupied bins) and E[throughput]/(d c) = u (1 - (1 - 1/u)^d) / d."""
    fab = small(17 * 16, radix=32)  # 16 down : 16 up, 17 leaves
    s = fab.topo.shape
    d, u = s.down, s.u1
    src = np.arange(d)  # leaf 0
    dst = (np.arange(d) + 1) * d  # first endpoint of leaves 1..d
    cap = fab.topo.capacity
    samples = []
    for seed in range(300):
        A = route(fab.topo, src, dst, "ecmp", seed=seed)
        r, _ = max_min_rates(A, cap)
        samples.append(r.sum() / (d * fab.topo.nic_bw))
    samples = np.asarray(samples)
    expected = u * (1 - (1 - 1 / u) ** d) / d
    se = samples.std(ddof=1) / np.sqrt(samples.size)
    assert abs(samples.mean() - expected) < 4 * se + 1e-3, (samples.mean(), expected, se)
    assert samples.mean() < 0.75  # a real loss, not line rate


def test_ecmp_repeats_for_a_seed_and_varies_across_seeds(small):
    fab = small(128, radix=16)
    ph = _perm_phase(128, 3)
    a = simulate_phases(fab, [ph], routing="ecmp", seed=7)
    b = simulate_phases(fab, [ph], routing="ecmp", seed=7)
    assert a.time_s == b.time_s and np.array_equal(a.link_bytes, b.link_bytes)
    times = {simulate_phases(fab, [ph], routing="ecmp", seed=s).time_s for s in range(12)}
    loads = {simulate_phases(fab, [ph], routing="ecmp", seed=s).link_bytes.tobytes() for s in range(12)}
    assert len(loads) == 12  # every seed hashes differently
    assert len(times) >= 3


def test_failed_spine_link_costs_the_lost_bisection(small):
    """Ring all-reduce whose every hop crosses leaves (round-robin rank order) saturates the leaf
    uplinks; failing one leaf-spine cable leaves that leaf u-1 of u uplinks: slowdown u/(u-1)."""
    fab = small(32, radix=8)  # 4 down : 4 up, 8 leaves
    s = fab.topo.shape
    L, d, u = s.n_leaves, s.down, s.u1
    r = np.arange(32)
    order = (r % L) * d + r // L
    healthy = simulate_collective(fab, "all_reduce", 1 << 28, ranks_per_domain=1, routing="spray", gpu_of_rank=order)
    link = int(fab.topo.leaf_up(3, 1))
    broken = small(32, radix=8, faults=Faults(links=(link,)))
    hurt = simulate_collective(broken, "all_reduce", 1 << 28, ranks_per_domain=1, routing="spray", gpu_of_rank=order)
    assert abs(hurt.time_s / healthy.time_s - u / (u - 1)) < 1e-6
    # adaptive routing with 12 channels per connection (4 ring flows x 12 fill 3 uplinks evenly)
    kw = dict(ranks_per_domain=1, routing="adaptive", gpu_of_rank=order, channels=12)
    h = simulate_collective(fab, "all_reduce", 1 << 28, **kw)
    b = simulate_collective(broken, "all_reduce", 1 << 28, **kw)
    assert abs(b.time_s / h.time_s - u / (u - 1)) < 1e-6
    # per-flow routing cannot split a flow: ECMP re-hashes, and is never faster than the bound
    for routing in ("adaptive", "ecmp"):
        h = simulate_collective(fab, "all_reduce", 1 << 28, ranks_per_domain=1, routing=routing, gpu_of_rank=order)
        b = simulate_collective(broken, "all_reduce", 1 << 28, ranks_per_domain=1, routing=routing, gpu_of_rank=order)
        assert b.time_s >= h.time_s * (1 - 1e-9)
        assert b.time_s / h.time_s >= u / (u - 1) - 1e-9 or routing == "ecmp"


@settings(max_examples=40, deadline=None)
@given(
    n_flows=st.integers(1, 40),
    routing=st.sampled_from(["ecmp", "adaptive", "spray"]),
    kind=st.sampled_from(["fat-tree", "rail", "dual-plane"]),
    seed=st.integers(0, 1000),
    fail=st.integers(0, 3),
)
def test_contention_never_beats_alone(small, n_flows, routing, kind, seed, fail):
    fab = small(64, radix=8, per_domain=1, per_host=4, nics=4, topology=kind,
                faults=Faults(random_links=fail, seed=seed))
    rng = np.random.default_rng(seed)
    src = rng.integers(0, 64, n_flows)
    dst = (src + rng.integers(4, 60, n_flows)) % 64  # other host
    size = rng.choice([1e6, 4e6, 1.6e7], n_flows)
    start = rng.choice([0.0, 0.0, 1e-4, 3e-4], n_flows)
    ph = Phase(src, dst, size, start=start, merge_pxn=False)
    try:
        run = simulate_phases(fab, [ph], routing=routing, seed=seed, pxn=False)
    except Exception as exc:  # a random failure set may disconnect a pair: must say which
        assert "disconnects endpoint" in str(exc)
        return
    assert np.all(run.flow_time >= run.flow_alone * (1 - 1e-9))

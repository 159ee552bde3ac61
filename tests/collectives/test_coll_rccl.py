"""RCCL on AMD Instinct: RCCL's own tuner latencies and its single-node protocol-by-size ranges
(ROCm/rccl src/graph/tuning.cc), NVIDIA systems untouched."""

from __future__ import annotations

import numpy as np
import pytest

from clustertwin.collectives import collective_time, resolve_params, sweep
from clustertwin.collectives.params import nccl_constants


def test_rccl_tables_apply_to_amd_only(catalog):
    lib = nccl_constants()["libraries"]["rccl"]
    amd = resolve_params(catalog.system("mi300x-8"), catalog.fabric("roce-400g"))
    assert amd.base["ring"] == pytest.approx(tuple(x * 1e-6 for x in lib["base_latency_us"]["ring"]))
    assert amd.hw_intra["ring"] == pytest.approx(tuple(x * 1e-6 for x in lib["hw_latency_us"]["nvlink"]["ring"]))
    assert amd.protocol_ranges["all_reduce"] == tuple(float(x) for x in lib["protocol_ranges_bytes"]["all_reduce"])
    nv = resolve_params(catalog.system("hgx-h100"), catalog.fabric("ib-ndr-400g"))
    tuner = nccl_constants()["tuner"]
    assert nv.base["ring"] == pytest.approx(tuple(x * 1e-6 for x in tuner["base_latency_us"]["ring"]))
    assert nv.protocol_ranges is None


@pytest.mark.parametrize("sid", ["mi300x-8", "mi355x-8"])
def test_single_node_protocol_follows_rccls_size_ranges(catalog, sid):
    spec = catalog.system(sid)
    fab = catalog.fabric(spec.default_scaleout)
    rng = resolve_params(spec, fab).protocol_ranges
    for op in ("all_reduce", "reduce_scatter", "all_gather"):
        ll_max, ll128_max = rng[op]
        sizes = [ll_max / 2, ll_max, (ll_max + ll128_max) / 2, ll128_max, 4 * ll128_max]
        got = [r.protocol for r in sweep(op, sizes, 8, 8, spec, fab)]
        assert got == ["LL", "LL", "LL128", "LL128", "Simple"], (op, got)
        # time stays monotone in size across the forced switch points
        s = np.geomspace(1024, 2**31, 400)
        t = collective_time(op, s, 8, 8, spec, fab)
        assert np.all(np.diff(t) >= -1e-15), op
    # across nodes RCCL's ranges do not apply: the tuner's own choice (minimum) is kept
    two = sweep("all_reduce", [rng["all_reduce"][0] / 2], 16, 8, spec, fab)[0]
    assert two.domains == 2 and np.isfinite(two.time_s)

"""Two-batch overlap and host-memory weight streaming in the serving op model."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from clustertwin.serving import Deployment, build_instance, get_engine
from clustertwin.serving.phases import STEP_FIELDS, step_costs, step_time
from clustertwin.workload.model import get_model


def _inst(catalog, system, dep, engine):
    s = catalog.system(system)
    return build_instance(get_model("deepseek-v3"), s, catalog.fabric(s.default_scaleout), dep, get_engine(engine),
                          catalog=catalog)


def test_two_batch_overlap_is_never_slower_and_hides_scaleout_a2a(catalog):
    dep = Deployment(tp=32, ep=32, dp_attention=True, weights_dtype="fp8", kv_dtype="fp8")
    tbo = _inst(catalog, "hgx-h100", dep, "sglang")  # a2a_overlap 1.0
    plain = replace(tbo, engine=replace(tbo.engine, a2a_overlap=0.0))
    tokens = np.array([1.0, 16.0, 256.0, 4096.0, 16384.0])
    t_tbo = step_time(tbo, tokens, tokens * 2000.0, 0.0)
    t_plain = step_time(plain, tokens, tokens * 2000.0, 0.0)
    assert np.all(t_tbo <= t_plain + 1e-12)
    # prefill-sized passes over InfiniBand: the overlap hides most of the all-to-all
    c = step_costs(tbo, 16384.0, 0.0, 16384.0 * 2000.0)
    c0 = step_costs(plain, 16384.0, 0.0, 16384.0 * 2000.0)
    assert float(c["ep_comm_s"]) < 0.5 * float(c0["ep_comm_s"])
    assert set(c) == set(STEP_FIELDS)


def test_weights_beyond_hbm_stream_over_c2c_only_on_grace(catalog):
    small = Deployment(tp=2, ep=2, dp_attention=True, weights_dtype="fp8", kv_dtype="fp8")
    gb = _inst(catalog, "gb200-nvl72", small, "sglang")
    assert gb.offload_bytes_gpu > 0 and any("NVLink-C2C" in n for n in gb.notes)
    decode = step_costs(gb, 64.0, 64.0 * 2000.0, 0.0)
    assert float(decode["offload_s"]) > 0  # small passes cannot hide the streaming
    prefill = step_costs(gb, 16384.0, 0.0, 16384.0 * 1000.0)
    assert float(prefill["offload_s"]) < float(decode["offload_s"])

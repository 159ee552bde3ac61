"""NVLS (NVLink SHARP) all-gather / reduce-scatter: offered where NCCL offers it (one NVLS-capable
domain, <= NCCL_MAX_NVLS_ARITY local ranks), refused elsewhere, monotone in size."""

from __future__ import annotations

import numpy as np
import pytest

from clustertwin.collectives import collective_time, estimate_collective
from clustertwin.collectives.core import AUTO, NVLS_MAX_ARITY_AG_RS
from clustertwin.errors import InputError

OPS = ("all_gather", "reduce_scatter")


def _hw(catalog, sid):
    s = catalog.system(sid)
    return s, catalog.fabric(s.default_scaleout)


@pytest.mark.parametrize("op", OPS)
def test_nvls_registered_for_auto(op):
    assert "nvls" in AUTO[op]


@pytest.mark.parametrize("op", OPS)
def test_nvls_runs_inside_one_nvlink_sharp_domain(catalog, op):
    system, fabric = _hw(catalog, "hgx-h100")
    t = collective_time(op, 2**28, 8, 8, system, fabric, algo="nvls")
    assert np.isfinite(t) and t > 0
    # NCCL 2.28 tuning: algBw = nCh * bwIntra * nvlsEfficiency (x (nCh-1)/nCh); one link direction
    # carries S, so NVLS AG/RS is slower than ring at 8 ranks and NCCL's own choice stays ring
    assert t > collective_time(op, 2**28, 8, 8, system, fabric, algo="ring")
    r = estimate_collective(op, 2**28, 8, 8, system, fabric)
    assert "nvls" in r.per_algorithm_s and r.algorithm == "ring"


@pytest.mark.parametrize("op", OPS)
def test_nvls_refused_across_domains_and_beyond_arity(catalog, op):
    system, fabric = _hw(catalog, "hgx-h100")
    # NCCL disables NVLS for nNodes > 1 unless a CollNet plugin (iallgather / ireducescatter) is on
    assert collective_time(op, 2**28, 16, 8, system, fabric, algo="nvls") == np.inf
    nvl72, f72 = _hw(catalog, "gb200-nvl72")
    assert np.isfinite(
        collective_time(op, 2**28, NVLS_MAX_ARITY_AG_RS, NVLS_MAX_ARITY_AG_RS, nvl72, f72, algo="nvls")
    )
    assert collective_time(op, 2**28, 72, 72, nvl72, f72, algo="nvls") == np.inf


@pytest.mark.parametrize("op", OPS)
def test_nvls_refused_without_nvlink_sharp(catalog, op):
    system, fabric = _hw(catalog, "dgx-a100")
    with pytest.raises(InputError, match="NVLS"):
        collective_time(op, 2**28, 8, 8, system, fabric, algo="nvls")
    r = estimate_collective(op, 2**28, 8, 8, system, fabric)
    assert r.per_algorithm_s["nvls"] == np.inf and r.algorithm != "nvls"


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("sid", ["hgx-h100", "gb200-nvl72"])
def test_nvls_monotone_in_size(catalog, op, sid):
    system, fabric = _hw(catalog, sid)
    S = 2.0 ** np.arange(0, 34)
    t = collective_time(op, S, 8, 8, system, fabric, algo="nvls")
    assert np.all(np.isfinite(t)) and np.all(np.diff(t) >= 0)

from __future__ import annotations

import numpy as np

from clustertwin.placement import domains_spanned, group_layout, ranks_per_domain


def test_megatron_order_on_8_gpu_domains():
    lay = group_layout(tp=8, pp=8, dp=16, domain=8).as_dict()
    assert lay["tp"]["ranks_per_domain"] == 8 and lay["tp"]["domains"] == 1
    assert lay["dp"]["ranks_per_domain"] == 1 and lay["dp"]["domains"] == 16  # one DP rank per node
    assert lay["pp"]["ranks_per_domain"] == 1
    lay = group_layout(tp=2, pp=1, dp=32, domain=8).as_dict()
    assert lay["dp"]["ranks_per_domain"] == 4 and lay["dp"]["domains"] == 8


def test_nvl72_keeps_groups_inside_the_rack():
    assert float(ranks_per_domain(64, 1, 72)) == 64
    assert float(domains_spanned(64, 1, 72)) == 1
    r = ranks_per_domain(np.array([8, 16, 64]), np.array([1, 8, 4]), 8)
    assert r.tolist() == [8.0, 1.0, 2.0]

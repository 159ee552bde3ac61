"""Balanced pipeline layout for layer counts that split neither evenly nor as L + 2 (sim/pp_layout.py)."""

import numpy as np
import pytest

from clustertwin.sim.event.adapter import layers_per_virtual_stage
from clustertwin.sim.pp_layout import (
    balanced_last_stage_layers,
    balanced_last_stage_time,
    balanced_virtual_stage_counts,
)


def _brute(L, p, t, head):
    return min(max(-(-(L - k) // (p - 1)) * t, k * t + head) for k in range(L + 1))


@pytest.mark.parametrize("L,p,head", [(61, 16, 2.4), (61, 8, 0.5), (61, 4, 3.0), (94, 8, 0.7), (7, 3, 10.0), (61, 32, 1.0)])
def test_balanced_last_stage_is_the_best_whole_split(L, p, head):
    t = 1.5
    assert float(balanced_last_stage_time(L, p, t, head * t)) == pytest.approx(_brute(L, p, t, head * t))


def test_deepseek_v3_recipe_layout():
    # NVIDIA's DeepSeek-V3 recipe "Et*4|(t*4|)*14tmL": 16 stages of 4 layers except the last, which holds
    # 1 layer + MTP + loss; with the head + MTP worth ~2.4 layers the balanced split is the same
    assert int(balanced_last_stage_layers(61.0, 16.0, 1.0, 2.4)) == 1
    counts = balanced_virtual_stage_counts(61, 16, 1, 2.4)
    assert counts == [4] * 15 + [1]
    v = balanced_virtual_stage_counts(61, 2, 8, 2.4)  # pp 2 x vpp 8: chunk c of rank i is stage c*2+i
    assert sum(v) == 61 and sum(v[1::2]) < sum(v[0::2])
    # Megatron's own splits are kept where they apply
    assert layers_per_virtual_stage(64, 16, 1, 2.4) == [4] * 16
    assert layers_per_virtual_stage(94, 8, 4, 2.4)[0] == 2  # L + 2 = 96 slots: embedding / loss take one


def test_vectorised_over_plans():
    p = np.array([2.0, 4.0, 16.0])
    out = balanced_last_stage_time(61.0, p, np.array([1.0, 1.0, 1.0]), np.array([0.5, 2.0, 2.4]))
    assert out.shape == (3,)
    assert list(out) == [_brute(61, 2, 1.0, 0.5), _brute(61, 4, 1.0, 2.0), _brute(61, 16, 1.0, 2.4)]

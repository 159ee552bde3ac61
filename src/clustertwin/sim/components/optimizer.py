"""Optimizer step: Adam on the rank's parameter shard, ~30 B/param read + written (MODELLING.md §6),
memory-bound. ZeRO >= 1 shards dense parameters over dp*cp and expert parameters over the
expert-data-parallel group.

Interface: ``optimizer_step(st, dp) -> time_s`` (``dp`` the ``dp_comm.DPComm`` of the same stage, for the
parameter counts and group sizes); plus ``step_overhead(st)``, the fixed per-step host overhead.
"""

from __future__ import annotations

from ... import xp as np  # numpy, or plain numbers for one plan (clustertwin/xp.py)
from ..kernels import mem_time
from .dp_comm import DPComm
from .stage import Stage


def optimizer_step(st: Stage, dp: DPComm):
    shard = np.where(st.zero >= 1, dp.dense_params / dp.n_dp + dp.expert_params / dp.n_edp,
                     dp.dense_params + dp.expert_params)
    return mem_time(st.hw, 30.0 * shard, 20)


def step_overhead(st: Stage):
    return np.full_like(st.tok, st.hw.eff.step_overhead_s)

"""Reliability, goodput, power, cost and design comparison.

- :mod:`.params`: shipped defaults (``data/*.yaml``, every number sourced or marked assumed) + overlays
- :mod:`.failures`: per-class failure rates derived from Llama 3 Table 5, spares
- :mod:`.checkpoint`: checkpoint size / times, Young and Daly intervals, Daly ETTR
- :mod:`.goodput`: ETTR, interruptions, tokens per day; :mod:`.montecarlo`: vectorised simulation
- :mod:`.power`, :mod:`.cost`: bottom-up power, capex / opex, derived efficiency
- :mod:`.design`, :mod:`.compare`: ``SYSTEM[xDOMAINS][@FABRIC]`` designs side by side
"""

from __future__ import annotations

from .checkpoint import daly_ettr, daly_interval, young_interval
from .counts import ComponentCounts
from .failures import FailureModel, build_failure_model
from .goodput import CheckpointSetup, GoodputResult, checkpoint_setup, goodput
from .montecarlo import MonteCarloResult, simulate
from .params import Params, load_params

__all__ = [
    "CheckpointSetup",
    "ComponentCounts",
    "FailureModel",
    "GoodputResult",
    "MonteCarloResult",
    "Params",
    "build_failure_model",
    "checkpoint_setup",
    "daly_ettr",
    "daly_interval",
    "goodput",
    "load_params",
    "simulate",
    "young_interval",
]

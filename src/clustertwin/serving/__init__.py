"""Serving twin: LLM inference on scale-up domains (prefill/decode, KV cache, TP/EP/DP-attention,
continuous batching, disaggregated prefill/decode, SLO planning). See docs/serving.md.

Layer: same as the planner (uses workload, catalog, cluster, collectives and the sim op costs; never cli).
"""

from __future__ import annotations

from .analytical import ServingEstimate, Workload, decode_phase, offline, prefill_phase
from .engines import EnginePreset, engine_ids, get_engine
from .phases import Deployment, Instance, build_instance, kv_bytes_per_token, step_costs

__all__ = [
    "Deployment", "EnginePreset", "Instance", "ServingEstimate", "Workload", "build_instance", "decode_phase",
    "engine_ids", "get_engine", "kv_bytes_per_token", "offline", "prefill_phase", "step_costs",
]

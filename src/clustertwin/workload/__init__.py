"""Training workloads: model shapes (dense, MoE, MLA), parallel plans, FLOP and memory formulas."""

from __future__ import annotations

from .flops import forward_flops_per_token, hardware_flops_per_step, model_flops_per_step, narayanan_flops
from .memory import activation_bytes_per_layer, memory_per_gpu, stage_params
from .model import ModelSpec, builtin_models, get_model, load_models, model_from_dict
from .plan import RECOMPUTE, ParallelPlan, check_plan, make_plan, plan_problems

__all__ = [
    "RECOMPUTE",
    "ModelSpec",
    "ParallelPlan",
    "activation_bytes_per_layer",
    "builtin_models",
    "check_plan",
    "forward_flops_per_token",
    "get_model",
    "hardware_flops_per_step",
    "load_models",
    "make_plan",
    "memory_per_gpu",
    "model_flops_per_step",
    "model_from_dict",
    "narayanan_flops",
    "plan_problems",
    "stage_params",
]

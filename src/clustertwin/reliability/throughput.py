"""Fallback training throughput when no step-time estimate is available: an assumed MFU.

    tokens/s = MFU * peak(dtype) * N_acc / F_token,   F_token = 6 * N_active + 12 * L * h * s

(model FLOPs per token, PaLM / Llama 3 convention: Chowdhery et al. 2022 App. B; Llama 3 paper
arXiv:2407.21783 Sec. 3.3.2 — attention counted without causal halving). The estimate and planner
areas replace this with a simulated step time whenever they can.
"""

from __future__ import annotations

from typing import Any

from ..errors import InputError


def flops_per_token(model: Any, seq_len: int | None = None) -> float:
    n_active = float(model.num_active_params())
    s = int(seq_len or getattr(model, "seq_len", 0) or 2048)
    return 6.0 * n_active + 12.0 * model.num_layers * model.hidden_size * s


def mfu_throughput(model: Any, peak_flops_per_device: float, num_devices: float, mfu: float,
                   seq_len: int | None = None) -> float:
    if not 0 < mfu <= 1:
        raise InputError(f"--mfu must be in (0, 1], got {mfu}", hint="e.g. --mfu 0.4")
    if peak_flops_per_device <= 0:
        raise InputError("the accelerator has no peak for this precision")
    return mfu * peak_flops_per_device * num_devices / flops_per_token(model, seq_len)

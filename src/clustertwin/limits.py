"""Documented limits on requests that could exhaust memory or run for hours (issue #19).

Every limit is checked before any allocation and raises an ``InputError`` (exit 2) that names the
limit, the value asked for and what to do instead. The table is in docs/limits.md; change both
together (a test compares them).
"""

from __future__ import annotations

import math

from .errors import InputError

# name -> (limit, why / what to do)
LIMITS: dict[str, tuple[float, str]] = {
    "gpus": (1_048_576, "2^20 accelerators (5x the largest cluster announced); model a slice of the cluster"),
    "domains": (262_144, "2^18 scale-up domains; model a slice of the cluster"),
    "sizes": (4_096, "message sizes per collective sweep; use a larger factor (e.g. 8:8G:2)"),
    "message_bytes": (2.0**50, "1 PiB per message"),
    "channels": (64, "NCCL opens at most 64 channels (MAXCHANNELS)"),
    "monte_carlo": (100_000, "Monte-Carlo runs; 10,000 already give a goodput CDF to < 1 %"),
    "micro_batches": (500_000, "micro-batch x stage x virtual-stage slots the event engine simulates (~1 GB); raise --micro-batch or use --engine analytical"),
    "days": (3_650, "ten years of training"),
    "sweep_jobs": (1_000_000, "jobs per sweep; split the sweep file"),
    "global_batch": (16_777_216, "2^24 sequences per step (Llama 3 405B trained on 2,048-16,384)"),
    "seq_len": (16_777_216, "2^24 tokens per sequence (the longest published contexts are ~10M)"),
    "model_dim": (1_048_576, "2^20 for hidden / FFN / head counts (the largest published models use < 2^17)"),
    "layers": (100_000, "transformer layers (the deepest published LLMs have a few hundred)"),
    "vocab": (16_777_216, "2^24 vocabulary entries (published vocabularies are < 2^18)"),
    "params_b": (1_000_000, "billion parameters (10^15; the largest published models have ~2 x 10^12)"),
    "oversubscription": (64, "leaf down:up ratio; a radix-128 leaf allows at most 127:1, real fabrics use <= 4:1"),
}


def check_limit(name: str, value: float, *, flag: str | None = None) -> None:
    """Refuse a non-finite ``value`` or one above the documented limit ``name``."""
    limit, why = LIMITS[name]
    label = flag or f"--{name.replace('_', '-')}"
    if not math.isfinite(value):
        raise InputError(f"{label} must be a finite number, got {value!r}", hint="give a number such as 8 or 0.5")
    if value > limit:
        raise InputError(f"{label} = {value:,.6g} is above the limit of {limit:,.6g} ({why})",
                         hint="see the limits table in docs/limits.md")


def check_finite(label: str, value: float | None) -> None:
    """Refuse NaN and infinities anywhere in numeric input."""
    if value is not None and not math.isfinite(value):
        raise InputError(f"{label} must be a finite number, got {value!r}", hint="give a number such as 8 or 0.5")


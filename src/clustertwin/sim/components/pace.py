"""The pace of a synchronous job: its slowest GPU.

GPUs of one SKU do not run equally fast: under power management each chip settles at its own sustained
clock (manufacturing variability). Sinha et al., 'Not All GPUs Are Created Equal: Characterizing
Variability in Large-Scale, Accelerator-Rich Systems', SC'22 (arXiv:2208.11035), abstract: "8% (max 22%)
average performance variation even though the GPU architecture and vendor SKU are identical within each
cluster, with outliers up to 1.5X slower than the median GPU" (Summit, Vortex, Frontera, Longhorn: V100;
Corona: MI50/MI60). A training step synchronises every GPU of the job (TP collectives every layer, PP
send/receive every micro-batch, the DP reduction every step), so the job computes at the pace of its
slowest GPU: with per-GPU sustained speed spread sigma (relative standard deviation), the expected
slowest of n GPUs is 1 + sigma * z(n) times slower than the typical one, z(n) = E[max of n standard
normals] (z(1) = 0, z(8) = 1.42, z(128) = 2.6, z(2048) = 3.4).

sigma is efficiency.yaml ``gpu_speed_spread``, OFF (0) by default, set per chip with a catalog overlay
(``calibration: step_efficiency: <chip>: {gpu_speed_spread: 0.01}``) as a what-if. The value the source
suggests is 1 %: the abstract does not define "variation"; read as the spread between a cluster's fastest
and slowest (non-outlier) GPU, i.e. about 2 * z(n_cluster) sigma for clusters of ~500 (Longhorn) to ~27,000
(Summit) GPUs (2 z = 6.1-8.1), 8 % gives sigma = 1.0-1.3 % (ASSUMED reading, measured on V100 / MI50-60).
Why it is not on (measured 2026-12-01, docs/modelling.md "Slowest-GPU pace"): with sigma = 1 % and the
fitted gemm_mamf_scale refit, the held-out check (benchmarks/check_heldout_training.py) improves 8.11 ->
7.80 % and NeMo's weak-scaling growth is followed better, but the public set's leave-one-source-out MAPE
rises 9.73 -> 10.32 % (9.88 -> 10.22 % with a finer fit grid), so the public data do not support it as a
default.

Interface: ``slowest_gpu_factor(n_gpus, sigma)``: 1 + sigma * z(n), for arrays (planner) or plain numbers.
"""

from __future__ import annotations

import math

from ... import xp as np  # numpy, or plain numbers for one plan (clustertwin/xp.py)

_PLAIN = (int, float)

# Abramowitz & Stegun 26.2.23: the upper-tail normal quantile, |error| < 4.5e-4
_C = (2.515517, 0.802853, 0.010328)
_D = (1.432788, 0.189269, 0.001308)


def _upper_quantile(t):
    return t - (_C[0] + _C[1] * t + _C[2] * t * t) / (1.0 + _D[0] * t + _D[1] * t * t + _D[2] * t * t * t)


def expected_max_normal(n):
    """E[max of n standard normals] by Blom's plotting position: the (n - 0.375)/(n + 0.25) quantile
    (Blom 1958; within ~1 % of the exact value for n >= 2); 0 for n <= 1."""
    if type(n) in _PLAIN:
        if n <= 1:
            return 0.0
        return max(_upper_quantile(math.sqrt(-2.0 * math.log(0.625 / (n + 0.25)))), 0.0)
    n = np.maximum(np.asarray(n, dtype=float), 1.0)
    z = _upper_quantile(np.sqrt(-2.0 * np.log(0.625 / (n + 0.25))))
    return np.where(n > 1.0, np.maximum(z, 0.0), 0.0)


def slowest_gpu_factor(n_gpus, sigma: float):
    """How much slower than the typical GPU the slowest of ``n_gpus`` computes: 1 + sigma * z(n)."""
    if sigma == 0.0:
        return 1.0
    return 1.0 + sigma * expected_max_normal(n_gpus)

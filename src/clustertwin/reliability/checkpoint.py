"""Checkpoint size, write and restart times, and the optimal checkpoint interval.

References
----------
Young, J. W. (1974). "A first order approximation to the optimum checkpoint interval."
    CACM 17(9): tau_opt = sqrt(2 * delta * M).
Daly, J. T. (2006). "A higher order estimate of the optimum checkpoint interval for restart
    dumps." FGCS 22(3): eq. (20) expected wall time
    T_w = M * exp(R/M) * (exp((tau + delta)/M) - 1) * T_s / tau  (exponential failures, failures
    may also strike during checkpoints and restarts), and eq. (37) the perturbation solution
    tau_opt = sqrt(2 delta M) * (1 + sqrt(delta/(2M))/3 + delta/(18 M)) - delta  for delta < 2M,
    tau_opt = M otherwise.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize_scalar

from ..errors import InputError


def checkpoint_bytes(num_params: float, bytes_per_param: float) -> float:
    """Model states written per checkpoint: ``num_params * bytes_per_param`` (14 B for mixed-precision
    Adam: bf16 weights + fp32 master + Adam m, v; ZeRO, Rajbhandari et al. SC'20 Sec. 3.1)."""
    if num_params <= 0 or bytes_per_param <= 0:
        raise InputError("checkpoint size needs a positive parameter count and bytes per parameter")
    return float(num_params) * float(bytes_per_param)


def transfer_time(size_bytes: float, bandwidth: float) -> float:
    if bandwidth <= 0:
        raise InputError(f"storage bandwidth must be positive, got {bandwidth}")
    return float(size_bytes) / float(bandwidth)


def young_interval(delta: float, mtbf: float) -> float:
    """Young (1974): tau = sqrt(2 delta M)."""
    return float(np.sqrt(2.0 * delta * mtbf))


def daly_interval(delta: float, mtbf: float) -> float:
    """Daly (2006) eq. (37): higher-order optimum compute time between checkpoints."""
    if delta <= 0:
        return young_interval(max(delta, 1e-9), mtbf)
    if delta >= 2.0 * mtbf:
        return float(mtbf)
    x = np.sqrt(delta / (2.0 * mtbf))
    return float(np.sqrt(2.0 * delta * mtbf) * (1.0 + x / 3.0 + delta / (18.0 * mtbf)) - delta)


def daly_ettr(tau, delta, restart, mtbf):
    """Effective training time ratio T_s / T_w from Daly (2006) eq. (20), vectorised.

    ETTR = tau / (M * exp(R/M) * (exp((tau + delta)/M) - 1)), which is <= tau/(tau + delta) <= 1 and
    decreases as the failure rate 1/M rises. ``mtbf = inf`` gives tau/(tau + delta).
    """
    tau = np.asarray(tau, dtype=float)
    delta = np.asarray(delta, dtype=float)
    restart = np.asarray(restart, dtype=float)
    mtbf = np.asarray(mtbf, dtype=float)
    lam = np.where(np.isfinite(mtbf), 1.0 / np.where(mtbf > 0, mtbf, np.inf), 0.0)
    a = (tau + delta) * lam
    # x/(e^x - 1) -> 1 as x -> 0; expm1 keeps precision for small failure rates.
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # e^x overflow -> ratio 0
        ratio = np.where(a > 1e-12, a / np.expm1(np.where(a > 1e-12, a, 1.0)), 1.0 - a / 2.0)
        out = np.where(tau > 0, tau / (tau + delta), 0.0) * ratio * np.exp(-restart * lam)
    out = np.nan_to_num(out, nan=0.0)
    return out if out.ndim else float(out)


def numeric_optimal_interval(delta: float, restart: float, mtbf: float) -> float:
    """The tau that maximises :func:`daly_ettr` exactly (bounded scalar search), for checking the
    closed forms."""
    if not np.isfinite(mtbf) or mtbf > 1e15 or delta <= 0:
        return young_interval(max(delta, 1e-12), mtbf) if np.isfinite(mtbf) else float("inf")
    hi = max(10.0 * mtbf, 10.0 * delta, 1.0)
    res = minimize_scalar(lambda t: -daly_ettr(t, delta, restart, mtbf), bounds=(1e-6 * hi, hi), method="bounded",
                          options={"xatol": 1e-6 * max(young_interval(delta, mtbf), 1e-3)})
    return float(res.x)

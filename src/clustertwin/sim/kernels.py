"""Primitive compute costs on one GPU: GEMMs and memory-bound kernels. Array-friendly.

Compute model (MODELLING.md §6). Every GEMM of a layer is timed from its own (M, N, K) after the TP split:
    t = max(2MNK / (peak_dtype * eta), bytes / (HBM * eta_hbm)) + t_kernel
    eta = MAMF_fraction(dtype) * mamf_scale * eta_tile * eta_wave * K / (K + k0)
with tile quantisation eta_tile = MN / (ceil(M/tm) tm ceil(N/tn) tn) and wave quantisation
eta_wave = tiles / (ceil(tiles / SMs) SMs) (NVIDIA GEMM performance guide). Fused attention runs at
``attention_efficiency`` of the BF16 peak with a short-sequence roll-off s/(s + s_half); the backward does
2.5x the forward FLOPs (FlashAttention recomputes QK^T, MODELLING.md §1.4). Element-wise kernels (norms,
residual/dropout, activation, RoPE, FP8 casts, softmax when unfused, MoE permutation, cross-entropy,
optimizer) are bytes / (HBM * hbm_efficiency).
"""

from __future__ import annotations

from .. import xp as np  # numpy, or plain numbers for one plan (clustertwin/xp.py)
from .machine import Hardware

# Scalar GEMM times already computed, per machine: id(hw) -> (hw, {(M, N, K, batch, in_bytes, peak, mamf): s}).
# ``make_hardware`` returns one object per machine, so a scalar ``estimate`` reuses the times of earlier
# layouts with the same shapes; the entry keeps hw alive, so its id is not reused while cached.
_GEMM: dict[int, tuple[Hardware, dict]] = {}
_PLAIN = np._S  # plain numbers (and numpy scalars): the table's key is built from them directly
FAST = True  # False: compute every GEMM (the reference tests/sim/test_fast_paths.py compares the table with)


def clear_tables() -> None:
    """Forget the scalar GEMM times (benchmarks use it to time cold calls)."""
    _GEMM.clear()


def gemm_time(hw: Hardware, M, N, K, batch=1.0, *, in_bytes: float = 2.0, peak=None, mamf=None):
    """Time of a (batched) GEMM C[M,N] = A[M,K] B[K,N] on one GPU (see module docstring)."""
    if not FAST:
        return _gemm_time(hw, M, N, K, batch, in_bytes=in_bytes, peak=peak, mamf=mamf)
    S = _PLAIN
    if (type(M) in S and type(N) in S and type(K) in S and type(batch) in S and type(in_bytes) in S
            and (peak is None or type(peak) in S) and (mamf is None or type(mamf) in S)):
        key = (M, N, K, batch, in_bytes, peak, mamf)  # plain numbers: equal values hash alike (8 == 8.0)
    elif (np.ndim(M) == 0 and np.ndim(N) == 0 and np.ndim(K) == 0 and np.ndim(batch) == 0 and np.ndim(in_bytes) == 0
          and (peak is None or np.ndim(peak) == 0) and (mamf is None or np.ndim(mamf) == 0)):
        key = (float(M), float(N), float(K), float(batch), float(in_bytes),
               None if peak is None else float(peak), None if mamf is None else float(mamf))
    else:
        return _gemm_time(hw, M, N, K, batch, in_bytes=in_bytes, peak=peak, mamf=mamf)
    hit = _GEMM.get(id(hw))
    if hit is None:
        if len(_GEMM) >= 64:
            _GEMM.clear()
        hit = _GEMM[id(hw)] = (hw, {})
    t = hit[1].get(key)
    if t is None:
        t = float(_gemm_time(hw, M, N, K, batch, in_bytes=in_bytes, peak=peak, mamf=mamf))
        if len(hit[1]) >= 1 << 16:
            hit[1].clear()
        hit[1][key] = t
    return t


def _gemm_time(hw: Hardware, M, N, K, batch=1.0, *, in_bytes: float = 2.0, peak=None, mamf=None):
    e = hw.eff
    M = np.maximum(np.asarray(M, dtype=float), 1.0)
    N = np.maximum(np.asarray(N, dtype=float), 1.0)
    K = np.maximum(np.asarray(K, dtype=float), 1.0)
    tm, tn = float(e.gemm_tile_m), float(e.gemm_tile_n)
    tiles_m, tiles_n = np.ceil(M / tm), np.ceil(N / tn)
    tiles = tiles_m * tiles_n * batch
    waves = np.ceil(tiles / e.num_sms)
    eta_wave = tiles / (waves * e.num_sms)
    eta_tile = (M * N) / (tiles_m * tm * tiles_n * tn)
    eta_k = K / (K + e.gemm_k_overhead)
    eta = (hw.mamf if mamf is None else mamf) * eta_wave * eta_tile * eta_k
    flops = 2.0 * M * N * K * batch
    t_c = flops / ((hw.peak if peak is None else peak) * eta)
    out_bytes = np.maximum(in_bytes, 2.0)  # output: BF16 for 16-bit / FP8 / FP4 inputs, FP32 for TF32 / FP32
    t_m = ((M * K + K * N) * in_bytes + M * N * out_bytes) * batch / (hw.hbm_bw * e.hbm_efficiency)
    return np.maximum(t_c, t_m) + e.kernel_overhead_s


def gemm_train_time(hw: Hardware, M, N, K, batch=1.0, *, in_bytes: float = 2.0):
    """(forward, backward) time of a linear layer: fprop (M,N,K), dgrad (M,K,N), wgrad (K,N,M)."""
    S = _PLAIN
    key = None
    if FAST and type(M) in S and type(N) in S and type(K) in S and type(batch) in S and type(in_bytes) in S:
        # plain numbers: the three GEMMs' times (from the same table) found with one lookup
        key = ("train", M, N, K, batch, in_bytes)
        hit = _GEMM.get(id(hw))
        if hit is not None and hit[0] is hw:
            fb = hit[1].get(key)
            if fb is not None:
                return fb
    f = gemm_time(hw, M, N, K, batch, in_bytes=in_bytes)
    b = gemm_time(hw, M, K, N, batch, in_bytes=in_bytes) + gemm_time(hw, K, N, M, batch, in_bytes=in_bytes)
    if key is not None:
        hit = _GEMM.get(id(hw))
        if hit is not None and hit[0] is hw:
            hit[1][key] = (f, b)
    return f, b


def mem_time(hw: Hardware, nbytes, kernels=0.0):
    return np.asarray(nbytes, dtype=float) / (hw.hbm_bw * hw.eff.hbm_efficiency) + kernels * hw.eff.kernel_overhead_s

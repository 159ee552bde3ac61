"""``clustertwin calibrate-gpu``: measure this machine's GPUs with PyTorch and write a catalog overlay.

Microbenchmarks (each the best of a few timed repetitions after a warm-up):

* GEMM TFLOP/s over a grid of shapes, bf16 and (on GPUs with FP8 tensor cores, compute capability
  >= 8.9) fp8 e4m3 via ``torch._scaled_mm``;
* fused attention (``scaled_dot_product_attention``, causal, bf16, head_dim 128) over sequence lengths;
* HBM copy bandwidth (device-to-device ``copy_``: read + write bytes / time);
* NCCL all-reduce / all-gather / all-to-all bus bandwidth (nccl-tests definitions) over sizes, when
  more than one GPU is visible (one process per GPU).

The overlay (a catalog file, applied with ``--catalog FILE``) holds

* ``calibration.step_efficiency.<accelerator>``: ``mamf_fraction`` (best GEMM TFLOP/s / catalog peak
  per dtype), ``hbm_efficiency`` (copy bandwidth / catalog HBM bandwidth), ``attention_efficiency``
  and ``attention_seq_half`` (fit of rate(s) = r_inf * s / (s + s_half) to the attention sweep);
* ``calibration.collectives.<system>``: ``scaleup_busbw_fraction`` (largest all-reduce busbw / the
  catalog's per-device scale-up bandwidth), when several GPUs were measured;
* ``calibration.gpu_profile.<accelerator>``: every raw measurement with the date, GPU name, driver,
  CUDA and torch versions, so the profile can be compared with the catalog.

PyTorch is the optional extra ``gpu`` (``pip install "clustertwin[gpu]"``). Without a CUDA GPU the
command says so and exits 2; ``device="cpu"`` (hidden CLI switch ``--device cpu``) runs the same code
path on the CPU with tiny sizes, for tests.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from .errors import InputError

GEMM_SHAPES = ((1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
               (16384, 8192, 1024), (8192, 28672, 8192), (8192, 8192, 28672))
GEMM_SHAPES_CPU = ((64, 64, 64), (128, 96, 64))
ATTN_SEQS = (512, 1024, 2048, 4096, 8192, 16384)
ATTN_SEQS_CPU = (32, 64)
COPY_BYTES = 2 * 1024**3
COPY_BYTES_CPU = 1 << 20
COLL_SIZES = tuple(1 << k for k in range(10, 34, 2))  # 1 KiB .. 8 GiB
COLL_SIZES_CPU = (1024, 65536)
COLL_OPS = ("all_reduce", "all_gather", "all_to_all")
PROFILE_HEADER = "# Written by `clustertwin calibrate-gpu`: measured on this machine; apply with --catalog FILE.\n"


def _torch():
    try:
        import torch
    except ImportError:
        raise InputError(
            "calibrate-gpu needs PyTorch, which is not installed",
            hint='install the optional extra: pip install "clustertwin[gpu]" (a CUDA build of torch for GPUs)',
        ) from None
    return torch


def _timeit(fn, sync, repeat: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    sync()
    best = math.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - t0)
    return best


def environment(torch, device: str) -> dict[str, Any]:
    """Date, GPU name, driver, CUDA and torch versions of this run."""
    env: dict[str, Any] = {
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "torch": str(torch.__version__),
        "cuda": str(torch.version.cuda) if getattr(torch.version, "cuda", None) else None,
        "device": device,
        "host_cpu": platform.processor() or platform.machine(),
    }
    if device == "cuda":
        env["gpu_name"] = torch.cuda.get_device_name(0)
        env["gpu_count"] = torch.cuda.device_count()
        env["compute_capability"] = ".".join(map(str, torch.cuda.get_device_capability(0)))
        env["driver"] = _driver_version()
    else:
        env["gpu_name"] = "cpu"
        env["gpu_count"] = 0
        env["driver"] = None
    return env


def _driver_version() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=False)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.TimeoutExpired):
        return None


def bench_gemm(torch, device: str, shapes, repeat: int) -> list[dict[str, Any]]:
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    dtypes = ["bf16"]
    if device == "cuda" and torch.cuda.get_device_capability(0) >= (8, 9) and hasattr(torch, "_scaled_mm"):
        dtypes.append("fp8")
    out = []
    for dt in dtypes:
        for m, n, k in shapes:
            if dt == "bf16":
                a = torch.randn(m, k, device=device, dtype=torch.bfloat16)
                b = torch.randn(k, n, device=device, dtype=torch.bfloat16)

                def fn(a=a, b=b):
                    return a @ b
            else:
                a = torch.randn(m, k, device=device).to(torch.float8_e4m3fn)
                b = torch.randn(n, k, device=device).to(torch.float8_e4m3fn).t()  # column-major for _scaled_mm
                one = torch.ones((), device=device)

                def fn(a=a, b=b, one=one):
                    return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
            t = _timeit(fn, sync, repeat)
            out.append({"dtype": dt, "m": m, "n": n, "k": k, "time_s": t, "tflops": 2.0 * m * n * k / t / 1e12})
            del a, b
    return out


def bench_attention(torch, device: str, seqs, repeat: int, heads: int = 16, head_dim: int = 128,
                    tokens: int = 32768) -> list[dict[str, Any]]:
    """Causal SDPA forward, bf16. FLOPs = 4·b·h·s²·d / 2 (causal half)."""
    import torch.nn.functional as F

    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    out = []
    for s in seqs:
        b = max(1, tokens // s)
        q = torch.randn(b, heads, s, head_dim, device=device, dtype=torch.bfloat16)
        k, v = torch.randn_like(q), torch.randn_like(q)
        t = _timeit(lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v, is_causal=True), sync, repeat)
        flops = 4.0 * b * heads * s * s * head_dim / 2.0
        out.append({"seq_len": s, "batch": b, "heads": heads, "head_dim": head_dim, "time_s": t, "tflops": flops / t / 1e12})
        del q, k, v
    return out


def bench_copy(torch, device: str, nbytes: int, repeat: int) -> dict[str, Any]:
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    src = torch.empty(nbytes // 2, device=device, dtype=torch.bfloat16)
    src.fill_(1.0)
    dst = torch.empty_like(src)
    t = _timeit(lambda: dst.copy_(src), sync, repeat)
    return {"bytes": nbytes, "time_s": t, "GBps": 2.0 * nbytes / t / 1e9}


# ------------------------------------------------------------------------------------ collectives
def _coll_worker(rank: int, world: int, backend: str, device: str, sizes, repeat: int, port: int, q) -> None:
    import torch
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group(backend, rank=rank, world_size=world)
    dev = torch.device(f"cuda:{rank}") if device == "cuda" else torch.device("cpu")
    if device == "cuda":
        torch.cuda.set_device(dev)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    rows = []
    for op in COLL_OPS:
        for size in sizes:
            n_el = max(world, size // 4 // world * world)
            x = torch.ones(n_el, device=dev, dtype=torch.float32)
            if op == "all_reduce":
                def fn(x=x):
                    dist.all_reduce(x)
            elif op == "all_gather":
                outb = torch.empty(n_el, device=dev, dtype=torch.float32)
                shard = x[: n_el // world]

                gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor

                def fn(outb=outb, shard=shard, gather=gather):
                    gather(outb, shard)
            else:
                outb = torch.empty_like(x)

                def fn(outb=outb, x=x):
                    dist.all_to_all_single(outb, x)
            dist.barrier()
            t = _timeit(fn, sync, repeat)
            rows.append({"op": op, "size_bytes": n_el * 4, "time_s": t})
    # the slowest rank sets the time (nccl-tests reports the max over ranks)
    ts = torch.tensor([r["time_s"] for r in rows], dtype=torch.float64, device=dev)
    dist.all_reduce(ts, op=dist.ReduceOp.MAX)
    if rank == 0:
        for r, t in zip(rows, ts.tolist(), strict=True):
            r["time_s"] = t
        q.put(rows)
    dist.destroy_process_group()


def bench_collectives(device: str, world: int, sizes, repeat: int) -> list[dict[str, Any]]:
    """nccl-tests style sweep over ``world`` processes (NCCL on GPUs, gloo on CPU)."""
    import socket

    import torch.multiprocessing as mp

    from .collectives import busbw_factor

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    backend = "nccl" if device == "cuda" else "gloo"
    procs = [ctx.Process(target=_coll_worker, args=(r, world, backend, device, sizes, repeat, port, q)) for r in range(world)]
    for p in procs:
        p.start()
    try:
        rows = q.get(timeout=600)
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.terminate()
    for r in rows:
        alg = r["size_bytes"] / r["time_s"]
        r["n_ranks"] = world
        r["busbw_GBps"] = alg * busbw_factor(r["op"], world) / 1e9
    return rows


# ------------------------------------------------------------------------------------ derivation
def fit_seq_half(seqs, tflops) -> tuple[float, float]:
    """Least squares of 1/rate = (1/r_inf)·(1 + s_half/s): returns (r_inf, s_half)."""
    s = np.asarray(seqs, dtype=float)
    y = 1.0 / np.asarray(tflops, dtype=float)
    A = np.stack([np.ones_like(s), 1.0 / s], axis=1)
    (c0, c1), *_ = np.linalg.lstsq(A, y, rcond=None)
    if c0 <= 0:
        return float(max(tflops)), 0.0
    return 1.0 / float(c0), max(0.0, float(c1 / c0))


def _frac(x: float, hi: float = 1.0) -> float:
    """A measured fraction, 4 significant digits, inside (0, hi] (a CPU test run gives tiny ones)."""
    return float(f"{min(hi, max(float(x), 1e-6)):.4g}")


def derive_overlay(measured: dict[str, Any], system, catalog=None) -> dict[str, Any]:
    """The catalog overlay (``calibration:`` sections) from a measurement dict (see module doc)."""
    acc = system.accelerator
    step: dict[str, Any] = {}
    notes: dict[str, str] = {}
    mamf: dict[str, float] = {}
    for dt in sorted({g["dtype"] for g in measured.get("gemm", [])}):
        best = max(g["tflops"] for g in measured["gemm"] if g["dtype"] == dt)
        peak = acc.peak(dt) / 1e12
        if peak > 0:
            mamf[dt] = _frac(best / peak)
            if dt == "bf16":
                mamf["fp16"] = mamf[dt]  # the same tensor-core rate
            notes[f"mamf_fraction.{dt}"] = f"best GEMM {best:.1f} TFLOP/s / catalog peak {peak:.1f}"
    if mamf:
        step["mamf_fraction"] = mamf
    copy = measured.get("copy")
    if copy and acc.hbm_bw > 0:
        step["hbm_efficiency"] = _frac(copy["GBps"] * 1e9 / acc.hbm_bw)
        notes["hbm_efficiency"] = f"copy {copy['GBps']:.0f} GB/s / catalog {acc.hbm_bw / 1e9:.0f} GB/s"
    attn = measured.get("attention") or []
    if len(attn) >= 2:
        r_inf, s_half = fit_seq_half([a["seq_len"] for a in attn], [a["tflops"] for a in attn])
        peak = acc.peak("bf16") / 1e12
        step["attention_efficiency"] = _frac(r_inf / peak)
        step["attention_seq_half"] = round(s_half, 1)
        notes["attention_efficiency"] = f"SDPA asymptotic {r_inf:.1f} TFLOP/s / bf16 peak {peak:.1f} (causal, fwd)"
    cal: dict[str, Any] = {"step_efficiency": {acc.id: step} if step else {}}
    coll = [r for r in measured.get("collectives", []) if r["op"] == "all_reduce"]
    if coll and system.scaleup_bw_per_device > 0:
        big = max(coll, key=lambda r: r["size_bytes"])
        frac = big["busbw_GBps"] * 1e9 / system.scaleup_bw_per_device
        cal["collectives"] = {system.id: {"scaleup_busbw_fraction": _frac(frac, hi=1.5),
                                          "source": f"clustertwin calibrate-gpu {measured['environment']['date']}: "
                                                    f"all_reduce {big['size_bytes']} B on {big['n_ranks']} GPUs, "
                                                    f"busbw {big['busbw_GBps']:.1f} GB/s"}}
    out: dict[str, Any] = {}
    if mamf:
        # The step model takes a catalog accelerator's mamf_fraction over the step_efficiency fallback,
        # so the measured fractions go into an accelerator entry (the built-in one, mamf replaced).
        out["accelerators"] = {acc.id: _accelerator_entry(acc, mamf, measured["environment"])}
    cal["gpu_profile"] = {acc.id: {"environment": measured["environment"], "derived": notes,
                                   "gemm": measured.get("gemm", []), "attention": attn,
                                   "copy": copy, "collectives": measured.get("collectives", [])}}
    out["calibration"] = cal
    return out


def _accelerator_entry(acc, mamf: dict[str, float], env: dict[str, Any]) -> dict[str, Any]:
    e: dict[str, Any] = {
        "name": acc.name,
        "vendor": acc.vendor,
        "arch": acc.arch,
        "peak_tflops": {k: float(v) / 1e12 for k, v in acc.peak_flops.items()},
        "hbm_gb": acc.hbm_bytes / 1e9,
        "hbm_tbps": acc.hbm_bw / 1e12,
        "scaleup_gbps_uni": acc.scaleup_bw / 1e9,
        "mamf_fraction": {**{k: float(v) for k, v in acc.mamf_fraction.items()}, **mamf},
        "source": "built-in catalog entry (clustertwin catalog show); mamf_fraction measured by clustertwin calibrate-gpu",
        "sources": {"mamf_fraction": f"clustertwin calibrate-gpu {env['date']} on {env['gpu_name']} "
                                     f"(torch {env['torch']}, CUDA {env.get('cuda')}, driver {env.get('driver')})"},
    }
    if acc.hbm_reported_bytes:
        e["hbm_reported_mib"] = acc.hbm_reported_bytes / 1024**2
    if acc.tdp_w:
        e["tdp_w"] = acc.tdp_w
    if acc.num_sms:
        e["num_sms"] = acc.num_sms
    return e


def guess_system_for(gpu_name: str, catalog) -> str | None:
    from .collectives.calibrate import guess_system

    return guess_system(gpu_name, catalog)


def run(*, device: str = "cuda", system: str | None = None, catalog=None, quick: bool = False,
        collectives: bool = True, world: int | None = None) -> dict[str, Any]:
    """Run the microbenchmarks; returns ``{"measured": ..., "overlay": ..., "system": id}``.

    ``device="cpu"`` runs the identical code path with tiny sizes (tests); ``world`` ranks for the
    collective sweep (default: every visible GPU; CPU: 0 = skipped unless given)."""
    from .catalog import load_catalog

    torch = _torch()
    catalog = catalog or load_catalog()
    if device not in ("cuda", "cpu"):
        raise InputError(f"--device must be cuda or cpu, got {device!r}")
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError(
            "no CUDA GPU is visible on this machine (torch.cuda.is_available() is False)",
            hint="run calibrate-gpu on a machine with an NVIDIA GPU and a CUDA build of PyTorch",
        )
    env = environment(torch, device)
    sid = system or (guess_system_for(env["gpu_name"], catalog) if device == "cuda" else None)
    if not sid:
        raise InputError(
            f"cannot tell the catalog system from GPU {env['gpu_name']!r}",
            hint="pass --system, e.g. --system hgx-h200",
        )
    spec = catalog.system(sid)
    cpu = device == "cpu"
    repeat = 2 if cpu else (5 if quick else 20)
    measured: dict[str, Any] = {"environment": env, "system": sid}
    shapes = GEMM_SHAPES_CPU if cpu else (GEMM_SHAPES[:4] if quick else GEMM_SHAPES)
    measured["gemm"] = bench_gemm(torch, device, shapes, repeat)
    measured["attention"] = bench_attention(torch, device, ATTN_SEQS_CPU if cpu else ATTN_SEQS, repeat,
                                            heads=2 if cpu else 16, head_dim=16 if cpu else 128,
                                            tokens=128 if cpu else 32768)
    measured["copy"] = bench_copy(torch, device, COPY_BYTES_CPU if cpu else COPY_BYTES, repeat)
    n = world if world is not None else (0 if cpu else torch.cuda.device_count())
    measured["collectives"] = []
    if collectives and n > 1:
        sizes = COLL_SIZES_CPU if cpu else (COLL_SIZES[::2] if quick else COLL_SIZES)
        measured["collectives"] = bench_collectives(device, n, sizes, repeat)
    return {"system": sid, "measured": measured, "overlay": derive_overlay(measured, spec, catalog)}


def write_profile(overlay: dict[str, Any], path: str | os.PathLike) -> Path:
    """Write the overlay atomically (a valid catalog file: check it loads before replacing ``path``)."""
    from .catalog.schema import CatalogFile
    from .userfiles import write_atomic

    CatalogFile.model_validate(overlay)
    p = Path(path)
    if p.exists():
        # only ever replace a profile this command wrote: never a user's catalog, notes or other YAML
        try:
            with open(p, encoding="utf-8", errors="replace") as fh:
                first = fh.readline()
        except OSError as exc:
            raise InputError(f"cannot read {str(p)!r} before replacing it: {exc.strerror}") from None
        if not first.startswith(PROFILE_HEADER):
            raise InputError(f"refusing to replace {str(p)!r}: it is not a profile written by calibrate-gpu",
                             hint="choose another --out (the profile is a catalog overlay of its own)")
    text = PROFILE_HEADER + yaml.safe_dump(overlay, sort_keys=False, default_flow_style=None, width=120)
    return write_atomic(p, text)

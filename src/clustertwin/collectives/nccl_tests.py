"""nccl-tests conventions: size ranges (``-b/-e/-f``), data types, and parsing of real stdout logs.

Log format (github.com/NVIDIA/nccl-tests, src/common.cu)::

    # nThread 1 nGpus 8 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 ...
    #  Rank  0 Group  0 Pid  4242 on    node01 device  0 [0x18] NVIDIA H100 80GB HBM3
    #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
               8             2     float     sum      -1    25.61    0.00    0.00      0    25.40    0.00    0.00      0
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..units import parse_size
from .core import busbw_factor, normalize_op

# nccl-tests -d names -> bytes per element; ClusterTwin dtype spellings map onto them.
DTYPES = {
    "float": ("float", 4),
    "fp32": ("float", 4),
    "float32": ("float", 4),
    "half": ("half", 2),
    "fp16": ("half", 2),
    "float16": ("half", 2),
    "bfloat16": ("bfloat16", 2),
    "bf16": ("bfloat16", 2),
    "double": ("double", 8),
    "fp64": ("double", 8),
    "int8": ("int8", 1),
    "uint8": ("uint8", 1),
    "int32": ("int32", 4),
    "int": ("int32", 4),
    "int64": ("int64", 8),
    "fp8": ("f8e4m3", 1),
    "f8e4m3": ("f8e4m3", 1),
    "f8e5m2": ("f8e5m2", 1),
}


def dtype_info(name: str) -> tuple[str, int]:
    key = str(name).strip().lower()
    if key not in DTYPES:
        from ..errors import UnknownNameError

        raise UnknownNameError("data type", name, DTYPES)
    return DTYPES[key]


def parse_sizes(text: str) -> np.ndarray:
    """Message sizes as nccl-tests sweeps them.

    ``8:8G`` = powers of two from 8 B to 8 GiB (``-b 8 -e 8G -f 2``); ``1M:1G:4`` uses factor 4;
    ``64M`` one size; ``1M,16M,128M`` a list. Suffixes are binary (K = 1024).
    """
    s = str(text).strip()
    if not s:
        raise InputError("empty --sizes", hint="write e.g. 8:8G (powers of two) or 1M,64M")
    if "," in s:
        vals = [parse_size(p) for p in s.split(",") if p.strip()]
        if not vals:
            raise InputError(f"--sizes {text!r} lists no sizes", hint="write e.g. 1M,64M")
        from ..limits import check_limit

        check_limit("sizes", len(vals), flag="--sizes (number of sizes)")
        check_limit("message_bytes", max(vals), flag="--sizes maximum")
        return np.asarray(vals, dtype=float)
    if ":" not in s:
        return np.asarray([parse_size(s)], dtype=float)
    parts = s.split(":")
    if len(parts) not in (2, 3) or not all(p.strip() for p in parts):
        raise InputError(f"cannot read size range {text!r}", hint="write MIN:MAX or MIN:MAX:FACTOR, e.g. 8:8G or 1M:1G:4")
    lo, hi = parse_size(parts[0]), parse_size(parts[1])
    factor = 2.0
    if len(parts) == 3:
        try:
            factor = float(parts[2])
        except ValueError:
            raise InputError(f"size range factor {parts[2]!r} is not a number", hint="e.g. 8:8G:2") from None
        if not (math.isfinite(factor) and factor > 1):
            raise InputError(f"size range factor must be a finite number > 1, got {parts[2]}", hint="e.g. 8:8G:2")
    if lo > hi:
        raise InputError(f"size range {text!r} is empty: {lo} B > {hi} B", hint="put the smaller size first, e.g. 8:8G")
    from ..limits import LIMITS, check_limit

    check_limit("message_bytes", hi, flag="--sizes maximum")
    n_points = math.floor(math.log(hi / lo) / math.log(factor) + 1e-9) + 1
    check_limit("sizes", n_points, flag=f"--sizes {text!r} (number of sizes)")
    out = []
    v = float(lo)
    while v <= hi * (1 + 1e-12) and len(out) <= LIMITS["sizes"][0]:
        out.append(math.floor(v))
        v *= factor
    return np.asarray(out, dtype=float)


def count_for(op: str, size_bytes: float, n: int, elem_bytes: int) -> int:
    """nccl-tests ``count`` column (elements per rank buffer)."""
    op = normalize_op(op)
    per = size_bytes / elem_bytes
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        per /= max(1, n)
    return int(per)


# ------------------------------------------------------------------------------------------ parsing
_HDR = re.compile(r"#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)")
_RANK = re.compile(r"#\s*Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)\s+\[[^\]]*\]\s+(.*?)\s*$")
_BIN = re.compile(r"\b(all_reduce|all_gather|reduce_scatter|alltoall|broadcast|reduce|sendrecv)_perf\b")
_TYPES = {"float", "half", "bfloat16", "double", "int8", "uint8", "int32", "uint32", "int64", "uint64", "f8e4m3", "f8e5m2", "int", "char"}


@dataclass
class NcclTestsLog:
    """One parsed nccl-tests run."""

    path: str
    collective: str
    n_ranks: int
    hosts: int
    ranks_per_host: int
    device: str
    dtype: str
    sizes: np.ndarray  # bytes
    times_s: np.ndarray  # in-place time (out-of-place where in-place is missing)
    algbw: np.ndarray  # B/s as printed
    busbw: np.ndarray  # B/s as printed
    notes: list[str] = field(default_factory=list)


def _float(tok: str) -> float | None:
    """The number in ``tok``, or None when it is not a finite number (such a row is not a measurement)."""
    try:
        v = float(tok)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def parse_log_text(text: str, path: str = "<log>", collective: str | None = None) -> NcclTestsLog:
    """Parse nccl-tests stdout. Raises :class:`InputError` naming ``path`` and what is missing."""
    if not text.strip():
        raise InputError(f"nccl-tests log {path!r} is empty", hint="pass the stdout of e.g. all_reduce_perf -b 8 -e 8G -f 2 -g 8")
    n_thread = n_gpus = None
    ranks: dict[int, tuple[str, str]] = {}
    rows = []
    dtype = ""
    redops, roots = set(), set()
    binary = None
    for line in text.splitlines():
        m = _HDR.search(line)
        if m:
            n_thread, n_gpus = int(m.group(1)), int(m.group(2))
            continue
        m = _RANK.search(line)
        if m:
            ranks[int(m.group(1))] = (m.group(2), m.group(4))
            continue
        if binary is None:
            mb = _BIN.search(line)
            if mb:
                binary = mb.group(1)
        if line.lstrip().startswith("#") or not line.strip():
            continue
        tok = line.split()
        if len(tok) < 8 or tok[2] not in _TYPES:
            continue
        size, count = _float(tok[0]), _float(tok[1])
        if size is None or count is None:
            continue
        # 13 tokens: size count type redop root (time algbw busbw #wrong) x2 ; 12: without root;
        # 9 / 8: one result set (with / without root)
        if len(tok) in (13, 9):
            r = _float(tok[4])
            if r is not None:
                roots.add(int(r))
            rest = tok[5:]
        else:
            rest = tok[4:]
        nums = [_float(x) for x in rest]
        if len(nums) >= 8 and None not in nums[4:7]:
            t, a, b = nums[4], nums[5], nums[6]
        elif len(nums) >= 3 and None not in nums[0:3]:
            t, a, b = nums[0], nums[1], nums[2]
        else:
            continue
        if t is None or t <= 0:
            continue
        dtype = tok[2]
        redops.add(tok[3])
        rows.append((size, t, a, b))
    if not rows:
        raise InputError(
            f"nccl-tests log {path!r} has no result table",
            hint="expected rows 'size count type redop root time algbw busbw #wrong time algbw busbw #wrong' "
            "as printed by nccl-tests",
        )
    arr = np.asarray(rows, dtype=float)
    keep = arr[:, 0] > 0
    arr = arr[keep]
    if arr.shape[0] == 0:
        raise InputError(f"nccl-tests log {path!r}: every row has size 0", hint="run with -b 8 or larger")
    notes = []
    hosts = len({h for h, _ in ranks.values()}) if ranks else 1
    if ranks:
        n = len(ranks)
    elif n_thread and n_gpus:
        n = n_thread * n_gpus
        notes.append("no '# Rank' lines: ranks = nThread x nGpus (single process assumed)")
    else:
        n = 0
    device = next(iter(ranks.values()))[1] if ranks else ""
    # collective: explicit > binary name in the log or file name > busbw/algbw ratio
    op = None
    if collective:
        op = normalize_op(collective)
    else:
        mb = binary or (_BIN.search(Path(path).name).group(1) if _BIN.search(Path(path).name) else None)
        if mb:
            op = normalize_op(mb)
    a, b = arr[:, 2], arr[:, 3]
    ok = a > 0
    ratio = float(np.median(b[ok] / a[ok])) if np.any(ok) else float("nan")
    if n <= 0:
        if math.isfinite(ratio) and 1.0 < ratio < 2.0:
            n = int(round(2 / (2 - ratio)))  # all_reduce 2(n-1)/n
            notes.append(f"ranks inferred from busbw/algbw = {ratio:.3f}")
        else:
            raise InputError(
                f"nccl-tests log {path!r} does not say how many ranks ran",
                hint="keep the '# nThread ... nGpus ...' header and the '#  Rank ...' lines in the log",
            )
    if op is None:
        if not math.isfinite(ratio):
            raise InputError(
                f"nccl-tests log {path!r}: cannot tell which collective ran",
                hint="name it with --collective all_reduce (or keep the *_perf command line in the log)",
            )
        cands = {
            "all_reduce": 2 * (n - 1) / n,
            "reduce_scatter" if "sum" in redops else "all_gather": (n - 1) / n,
            ("reduce" if "sum" in redops else "broadcast") if any(r >= 0 for r in roots) else "send_recv": 1.0,
        }
        op = min(cands, key=lambda k: abs(cands[k] - ratio))
        notes.append(f"collective inferred as {op} from busbw/algbw = {ratio:.3f}")
    return NcclTestsLog(
        path=path,
        collective=op,
        n_ranks=int(n),
        hosts=int(hosts),
        ranks_per_host=int(max(1, math.ceil(n / max(1, hosts)))),
        device=device,
        dtype=dtype,
        sizes=arr[:, 0],
        times_s=arr[:, 1] * 1e-6,
        algbw=arr[:, 2] * 1e9,
        busbw=arr[:, 3] * 1e9,
        notes=notes,
    )


def parse_log(path: str | Path, collective: str | None = None) -> NcclTestsLog:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise InputError(f"nccl-tests log {str(p)!r} does not exist", hint="check the path") from None
    except OSError as exc:
        raise InputError(f"cannot read nccl-tests log {str(p)!r}: {exc.strerror}") from None
    return parse_log_text(text, str(p), collective)


def format_log(
    op: str,
    sizes,
    times_s,
    n_ranks: int,
    hosts: list[str],
    device: str,
    dtype: str = "float",
) -> str:
    """Write results in real nccl-tests stdout format (used by tests and ``collective --nccl-tests``)."""
    op = normalize_op(op)
    tname, width = dtype_info(dtype)
    per_host = max(1, n_ranks // max(1, len(hosts)))
    redop = "sum" if op in ("all_reduce", "reduce_scatter", "reduce") else "none"
    root = 0 if op in ("broadcast", "reduce") else -1
    binary = {"all_to_all": "alltoall", "send_recv": "sendrecv"}.get(op, op) + "_perf"
    sizes = np.asarray(sizes, dtype=float)
    lines = [
        f"# {binary} (generated)",
        f"# nThread 1 nGpus {per_host} minBytes {int(sizes.min())} maxBytes {int(sizes.max())} step: 2(factor) "
        "warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0",
        "#",
        "# Using devices",
    ]
    for r in range(n_ranks):
        host = hosts[min(r // per_host, len(hosts) - 1)]
        lines.append(f"#  Rank {r:2d} Group  0 Pid {1000 + r // per_host:6d} on {host:>10s} device {r % per_host:2d} [0x{0x18 + r % per_host:02x}] {device}")
    lines += [
        "#",
        "#                                                              out-of-place                       in-place          ",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       ",
    ]
    f = busbw_factor(op, n_ranks)
    for s, t in zip(sizes, np.asarray(times_s, dtype=float), strict=True):
        us = t * 1e6
        alg = s / t / 1e9
        cnt = count_for(op, s, n_ranks, width)
        cell = f"{us:8.2f} {alg:7.2f} {alg * f:7.2f} {0:6d}"
        lines.append(f"{int(s):12d}  {cnt:12d}  {tname:>8s}  {redop:>6s}  {root:6d}  {cell}  {cell}")
    lines += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 0", "#"]
    return "\n".join(lines) + "\n"

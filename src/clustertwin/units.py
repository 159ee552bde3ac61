"""The only place where units convert. Inside ClusterTwin everything is SI:
seconds, bytes, bytes per second, FLOP/s, watts. Catalog files and the CLI use the
units engineers quote (GB/s, Gb/s, TFLOP/s, us); convert once at the edge.
"""

from __future__ import annotations

import re

from .errors import InputError

# Decimal (SI) multiples, as vendors quote bandwidth and capacity.
KB = 1e3
MB = 1e6
GB = 1e9
TB = 1e12
# Binary multiples, as nccl-tests and memory allocators count.
KiB = 1024.0
MiB = 1024.0**2
GiB = 1024.0**3
TiB = 1024.0**4

US = 1e-6
NS = 1e-9
MS = 1e-3

TFLOPS = 1e12
PFLOPS = 1e15


def gbps_to_bytes_per_s(gbit_per_s: float) -> float:
    """Gb/s (line rate, bits) -> bytes/s."""
    return gbit_per_s * 1e9 / 8.0


def bytes_per_s_to_gbps(bytes_per_s: float) -> float:
    return bytes_per_s * 8.0 / 1e9


_SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([KMGTkmgt]?)(i?)([Bb]?)\s*$")
_SIZE_MULT = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def parse_size(text: str) -> int:
    """Parse a message size the way nccl-tests does: ``8``, ``1K``, ``64M``, ``8G``, ``2GiB``.

    Suffixes are binary (K = 1024), like nccl-tests ``-b/-e``.
    """
    m = _SIZE_RE.match(str(text))
    if not m:
        raise InputError(
            f"cannot read size {text!r}",
            hint="write a number of bytes with an optional K, M, G or T suffix, e.g. 8, 64K, 128M, 8G",
        )
    if m.group(4) == "b":
        raise InputError(f"size {text!r}: a lower-case 'b' means bits; sizes are in bytes",
                         hint=f"write {m.group(1)}{m.group(2).upper()} or {m.group(1)}{m.group(2).upper()}B (bytes)")
    value = float(m.group(1)) * _SIZE_MULT[m.group(2).upper()]
    if value < 1:
        raise InputError(f"size {text!r} is smaller than one byte", hint="use a size of at least 1 byte")
    return int(value)


def format_bytes(n: float) -> str:
    for unit, mult in (("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if abs(n) >= mult:
            return f"{n / mult:.3g} {unit}"
    return f"{n:.0f} B"


def format_seconds(t: float) -> str:
    if t >= 1:
        return f"{t:.3f} s"
    if t >= 1e-3:
        return f"{t * 1e3:.3f} ms"
    return f"{t * 1e6:.2f} us"


_DURATION_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(s|ms|us|ns|min)?\s*$")
_DURATION_MULT = {None: 1.0, "s": 1.0, "ms": MS, "us": US, "ns": NS, "min": 60.0}


def parse_duration(text: str) -> float:
    """Parse a duration: ``2s``, ``80ms``, ``500us``, ``1.5`` (seconds) -> seconds."""
    m = _DURATION_RE.match(str(text))
    if not m:
        raise InputError(f"cannot read duration {text!r}", hint="write a number with s, ms or us, e.g. 2s, 80ms")
    return float(m.group(1)) * _DURATION_MULT[m.group(2)]

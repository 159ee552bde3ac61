"""Model constants for the collective engine: NCCL tuner tables (shipped YAML, sourced) merged with
per-system calibration (shipped defaults, then the catalog ``calibration: collectives:`` overlay).

Everything here is resolved once per (system, fabric, catalog) into a frozen :class:`CollectiveParams`
in SI units, so the vectorised model in :mod:`clustertwin.collectives.model` does no lookups.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np
import yaml

from ..errors import InputError
from ..hardware import ScaleOutTech, SystemSpec, resolve_hardware

US = 1e-6
PROTOCOLS = ("LL", "LL128", "Simple")
CALIBRATION_SECTION = "collectives"

# Keys a calibration entry (shipped or user overlay) may set, with their physical meaning.
CALIBRATION_KEYS = {
    "latency_scale": "x NCCL tuner latencies of collectives inside one scale-up domain",
    "net_latency_scale": "x NCCL tuner latencies of collectives that cross the network",
    "launch_overhead_us": "fixed host-side cost added to every collective (launch + completion, us)",
    "channel_launch_us": "extra latency per additional NCCL channel (us)",
    "small_msg_bw_fraction": "bandwidth fraction with NCCL's trimmed channel/thread set (small messages)",
    "scaleup_busbw_fraction": "achieved ring busbw / scale-up link bandwidth per direction",
    "scaleout_busbw_fraction": "achieved ring busbw / NIC line rate",
    "nvls_efficiency": "NVLS bandwidth efficiency relative to ring busbw",
    "pipeline_fill_us": "per-stage cost a of chunk pipelining: fill = 2*sqrt(a*W) (us)",
    "pipeline_fill_max_us": "fill once NCCL's chunk size is at its maximum (us)",
    "host_launch_us": "host-side enqueue + kernel launch per GPU one host thread drives, per collective (us)",
}


@lru_cache(maxsize=1)
def nccl_constants() -> dict[str, Any]:
    """The shipped, sourced constants (``collectives/data/nccl.yaml``)."""
    text = (resources.files("clustertwin.collectives") / "data" / "nccl.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def _arch_key(arch: str, table: dict[str, Any]) -> Any:
    a = (arch or "").lower()
    if a in table:
        return table[a]
    for k in table:  # "hopper-h800" -> hopper
        if k != "default" and a.startswith(k):
            return table[k]
    return table["default"]


def _ll_max_bw(arch: str, table: dict[str, Any]) -> tuple[float, float, float]:
    """NCCL 2.28 llMaxBws: one scale-up domain -> by GPU generation; across domains -> by host CPU
    (tuning.cc "for multi-node, we look at CPU type"; the catalog has no CPU vendor: Intel assumed)."""
    v = _arch_key(arch, table["single_domain"])
    one = float("inf") if v is None else float(v)
    two, many = (float(x) for x in table["multi_domain"])
    return (one * 1e9, two * 1e9, many * 1e9)


def _library(arch: str, c: dict[str, Any]) -> dict[str, Any]:
    """The collective library's own tuner tables for this GPU family (``libraries`` in nccl.yaml):
    RCCL on AMD Instinct (ROCm/rccl src/graph/tuning.cc), else NCCL's (the ``tuner`` tables)."""
    for lib in (c.get("libraries") or {}).values():
        if any(arch.startswith(a) for a in lib.get("archs", ())):
            return lib
    return {}


def _gbps3(v: Any) -> tuple[float, float, float]:
    a, b, c = _arr3(v)
    return (a * 1e9, b * 1e9, c * 1e9)


def _arr3(v: Any) -> tuple[float, float, float]:
    return (float(v[0]), float(v[1]), float(v[2]))


@dataclass(frozen=True, slots=True)
class CollectiveParams:
    """Resolved model parameters for one system + scale-out fabric (SI units)."""

    system_id: str
    fabric_id: str
    arch: str
    scaleup_link_bw: float  # bytes/s per direction per device
    scaleup_fraction: float
    nic_bw_per_device: float  # bytes/s line rate per device: HardwareView.scaleout_bw_per_device (min(NIC, port))
    nic_bw_per_host: float
    devices_per_host: int
    devices_per_domain: int
    scaleout_fraction: float
    intra_kind: str  # "nvlink" | "pci"
    full_mesh: bool
    latency_scale: float
    launch_overhead_s: float
    net_latency_scale: float
    channel_launch_s: float
    small_msg_bw_fraction: float
    pipeline_fill_s: float
    pipeline_fill_max_s: float
    fill_protocol_factor: tuple[float, float, float]
    channels: int
    nvls_ok: bool
    nvls_efficiency: float
    nvls_min_ranks: int
    sharp_ok: bool
    ll128_multinode: bool
    bw_factor: tuple[float, float, float]
    base: dict[str, tuple[float, float, float]]  # seconds
    hw_intra: dict[str, tuple[float, float, float]]  # seconds
    hw_net: dict[str, tuple[float, float, float]]  # seconds
    net_overhead_s: float
    net_overhead_simple_mult: float
    tree_bw_factor: float
    pat_bw_factor: float
    collnet_per_local_rank_s: float
    pat_per_rank_s: float
    pat_inter_divisor: float
    a2a_per_peer_s: float
    host_launch_s: float = 0.0  # per GPU driven by one host thread (nccl-tests -g N): floor G x this
    ll_max_bw: tuple[float, float, float] = (float("inf"),) * 3  # LL busbw cap, 1 / 2 / >2 domains (B/s)
    ll128_max_bw_per_channel: float = float("inf")  # ring LL128 busbw cap per channel (B/s)
    tree_max_bw_per_channel: tuple[float, float, float] = (float("inf"),) * 3  # tree busbw cap per channel
    p2p_ll_threshold_bytes: float = 16384.0  # NCCL_P2P_LL_THRESHOLD
    # RCCL: single-node protocol by size, op -> (LL max bytes, LL128 max bytes); None = NCCL's tuner choice
    protocol_ranges: Any = None
    tree_correction: Any = None  # np.ndarray (3 protocols, 23 sizes): NCCL treeCorrectionFactor
    # PCIe host with two CPU sockets: a group of more than ``socket_devices`` ranks crosses the
    # inter-socket link (UPI / xGMI), which bounds its bus bandwidth (0 / inf = no split)
    socket_devices: int = 0
    inter_socket_bw: float = float("inf")
    sources: tuple[str, ...] = ()

    @property
    def scaleup_busbw(self) -> float:
        """Achieved ring bus bandwidth per device inside a (switched) scale-up domain (bytes/s)."""
        return self.scaleup_link_bw * self.scaleup_fraction

    @property
    def scaleout_busbw_per_device(self) -> float:
        """Achieved scale-out bandwidth per device (bytes/s): min(NIC, port) line rate x fraction."""
        return self.nic_bw_per_device * self.scaleout_fraction


def calibration_entry(system_id: str, catalog: Any = None, tech: str | None = None) -> dict[str, Any]:
    """Model constants for one system: the shipped per-link-technology fit (``link_technologies``:
    ``tech`` = the system's scale-up technology id, else ``default``), then the shipped per-system
    measured facts, then the catalog's ``calibration.collectives[system]`` overlay, key by key."""
    c = nccl_constants()
    techs = c.get("link_technologies", {})
    entry: dict[str, Any] = {}
    if tech is not None:
        entry.update({k: v for k, v in techs.get(tech, techs.get("default", {})).items() if k in CALIBRATION_KEYS})
    entry.update(c.get("systems", {}).get(system_id, {}))
    if catalog is not None:
        user = (getattr(catalog, "calibration", None) or {}).get(CALIBRATION_SECTION, {}).get(system_id)
        if user:
            if not isinstance(user, dict):
                raise InputError(
                    f"calibration.collectives.{system_id} must be a mapping of parameters",
                    hint=f"known keys: {', '.join(CALIBRATION_KEYS)}",
                )
            entry.update(user)
    return entry


def _tech_note(tech: str) -> str:
    techs = nccl_constants().get("link_technologies", {})
    key = tech if tech in techs else "default"
    t = techs.get(key, {})
    note = t.get("fit") or t.get("assumption") or ""
    return f"link technology {key}: {note}" if note else ""


def _num(entry: dict[str, Any], key: str, default: float, lo: float, hi: float, system_id: str) -> float:
    if key not in entry or entry[key] is None:
        return float(default)
    try:
        v = float(entry[key])
    except (TypeError, ValueError):
        raise InputError(f"calibration.collectives.{system_id}.{key} must be a number, got {entry[key]!r}") from None
    if not (lo <= v <= hi):
        raise InputError(
            f"calibration.collectives.{system_id}.{key} = {v} is outside the physical range [{lo}, {hi}]",
            hint=CALIBRATION_KEYS.get(key, ""),
        )
    return v


def resolve_params(system: SystemSpec, scaleout: ScaleOutTech, catalog: Any = None) -> CollectiveParams:
    """Build :class:`CollectiveParams` for ``system`` on ``scaleout`` (optionally with user calibration)."""
    c = nccl_constants()
    t = c["tuner"]
    arch = (system.accelerator.arch or "").lower()
    entry = calibration_entry(system.id, catalog, system.scaleup.id)
    sid = system.id
    up_frac = _num(entry, "scaleup_busbw_fraction", _arch_key(arch, c["scaleup_busbw_fraction"]), 0.01, 1.5, sid)
    # the fabric's own achievable fraction of line rate (catalog, sourced there) unless calibrated
    out_default = scaleout.protocol_efficiency or c["scaleout_busbw_fraction"].get(
        scaleout.kind, c["scaleout_busbw_fraction"]["default"]
    )
    out_frac = _num(entry, "scaleout_busbw_fraction", out_default, 0.01, 1.0, sid)
    nvls_eff_default = _arch_key(arch, t["nvls_efficiency"])
    nvls_eff = _num(entry, "nvls_efficiency", nvls_eff_default, 0.0, 2.0, sid)
    intra_kind = "pci" if system.scaleup_topology == "pcie" else "nvlink"
    view = resolve_hardware(system, scaleout)  # the one source of every bandwidth (hardware.py)
    lib = _library(arch, c)
    base_t = dict(t["base_latency_us"], **(lib.get("base_latency_us") or {}))
    intra_t = dict(t["hw_latency_us"][intra_kind], **((lib.get("hw_latency_us") or {}).get(intra_kind) or {}))
    base = {k: tuple(x * US for x in _arr3(v)) for k, v in base_t.items()}
    hw_intra = {k: tuple(x * US for x in _arr3(v)) for k, v in intra_t.items()}
    # NCCL's network latencies are for an RDMA NIC on an InfiniBand fat tree; a fabric whose path
    # (end host + 3 switch hops, leaf-spine-leaf) is slower (RoCE switches, TCP sockets) pays the
    # difference on every network step.
    path = view.nic_latency_s + 3 * view.hop_latency_s
    extra = max(0.0, path - float(t["reference_path_latency_us"]) * US)
    hw_net = {k: tuple(x * US + (extra if x > 0 else 0.0) for x in _arr3(v)) for k, v in t["hw_latency_us"]["net"].items()}
    for k in ("nvls", "nvlstree"):
        hw_intra.setdefault(k, (0.0, 0.0, 0.0))
    return CollectiveParams(
        system_id=sid,
        fabric_id=scaleout.id,
        arch=arch,
        scaleup_link_bw=view.scaleup_bw_per_device,
        scaleup_fraction=up_frac,
        nic_bw_per_device=view.scaleout_bw_per_device,
        nic_bw_per_host=view.scaleout_bw_per_host,
        devices_per_host=int(system.devices_per_host),
        devices_per_domain=int(system.devices_per_domain),
        scaleout_fraction=out_frac,
        intra_kind=intra_kind,
        full_mesh=system.scaleup_topology == "full-mesh",
        latency_scale=_num(entry, "latency_scale", 1.0, 0.05, 50.0, sid),
        launch_overhead_s=_num(entry, "launch_overhead_us", 0.0, 0.0, 1000.0, sid) * US,
        net_latency_scale=_num(entry, "net_latency_scale", 1.0, 0.05, 50.0, sid),
        channel_launch_s=_num(entry, "channel_launch_us", 0.0, 0.0, 100.0, sid) * US,
        small_msg_bw_fraction=_num(entry, "small_msg_bw_fraction", 1.0, 1e-4, 1.0, sid),
        pipeline_fill_s=_num(entry, "pipeline_fill_us", 0.0, 0.0, 1000.0, sid) * US,
        fill_protocol_factor=tuple(x / hw_intra["ring"][2] for x in hw_intra["ring"]),
        pipeline_fill_max_s=_num(entry, "pipeline_fill_max_us", 0.0, 0.0, 1e5, sid) * US,
        channels=int(_arch_key(arch, c["channels"])),
        nvls_ok=view.scaleup_in_network_reduction and nvls_eff > 0,
        nvls_efficiency=nvls_eff,
        nvls_min_ranks=int(t["nvls_min_ranks"]),
        sharp_ok=view.scaleout_in_network_reduction,
        ll128_multinode=any(arch.startswith(a) for a in t["ll128_multinode_archs"]),
        bw_factor=_arr3(c["protocols"]["bw_factor"]),
        base=base,
        hw_intra=hw_intra,
        hw_net=hw_net,
        net_overhead_s=float(t["net_overhead_us"]) * US,
        net_overhead_simple_mult=float(t["net_overhead_simple_mult"]),
        tree_bw_factor=float(t["tree_bw_factor"]),
        pat_bw_factor=float(t["pat_bw_factor"]),
        collnet_per_local_rank_s=float(t["collnet_per_local_rank_us"]) * US,
        pat_per_rank_s=float(t["pat_per_rank_us"]) * US,
        pat_inter_divisor=float(t["pat_inter_divisor"]),
        a2a_per_peer_s=float(t.get("a2a_per_peer_us", 0.2)) * US,
        host_launch_s=_num(entry, "host_launch_us", float(c["host"]["launch_us"]), 0.0, 1000.0, sid) * US,
        ll_max_bw=_ll_max_bw(arch, c["tuner"]["ll_max_bw_GBps"]),
        ll128_max_bw_per_channel=float(_arch_key(arch, t["ll128_ring_max_bw_per_channel_GBps"])) * 1e9,
        p2p_ll_threshold_bytes=float(t["p2p_ll_threshold_bytes"]),
        tree_correction=np.asarray(t["tree_correction_factor"], dtype=float),
        protocol_ranges={op: (float(v[0]), float(v[1])) for op, v in (lib.get("protocol_ranges_bytes") or {}).items()}
        or None,
        tree_max_bw_per_channel=_gbps3(_arch_key(arch, t["tree_max_bw_per_channel_GBps"])),
        socket_devices=int(system.devices_per_socket) if system.inter_socket_bw else 0,
        inter_socket_bw=float(system.inter_socket_bw) if system.inter_socket_bw else float("inf"),
        sources=tuple(str(s) for s in (_tech_note(system.scaleup.id), entry.get("source")) if s),
    )

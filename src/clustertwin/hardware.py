"""Frozen hardware specs in SI units. No I/O here: the catalog builds these from sourced YAML.

Units: FLOP/s, bytes, bytes/s (per direction unless the name says otherwise), seconds, watts, USD.
Every spec keeps ``sources`` (field -> citation) and ``assumptions`` (field -> why it is assumed),
so any number can be traced and assumed numbers can be flagged in output.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8", "mxfp8", "nvfp4", "fp4", "int8")
ScaleUpTopology = Literal["switched", "full-mesh", "torus-2d", "torus-3d", "pcie", "clos-2tier"]
ScaleOutTopology = Literal["fat-tree", "rail", "dual-plane"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Accelerator:
    """One accelerator package (a GPU, an NPU, an XPU)."""

    id: str
    name: str
    vendor: str
    arch: str  # ampere, hopper, blackwell, blackwell-ultra, cdna3, cdna4, davinci, kunlun ...
    peak_flops: Mapping[str, float]  # dtype -> dense FLOP/s
    hbm_bytes: float  # the vendor's nominal capacity ("80 GB"), decimal bytes
    hbm_bw: float  # bytes/s
    scaleup_bw: float  # bytes/s per direction, per device, on its native scale-up fabric
    tdp_w: float | None = None
    # device memory as the driver reports it (nvidia-smi "Memory-Usage" total): what a job can fill.
    # NVIDIA's "80 GB" is 80 GiB of HBM less a driver reservation (H100: 81,559 MiB = 85.5e9 B), so
    # the nominal decimal figure understates it by ~7%. None where no reported figure is sourced.
    hbm_reported_bytes: float | None = None
    num_sms: int | None = None  # streaming multiprocessors / AI cores (wave quantisation)
    mamf_fraction: Mapping[str, float] = field(default_factory=dict)  # measured max achievable matmul / peak, per dtype
    sources: Mapping[str, str] = field(default_factory=dict)
    assumptions: Mapping[str, str] = field(default_factory=dict)

    @property
    def memory_capacity_bytes(self) -> float:
        """What memory-fit checks compare against: the driver-reported total where sourced, else nominal."""
        return float(self.hbm_reported_bytes or self.hbm_bytes)

    def peak(self, dtype: str) -> float:
        """Dense peak for ``dtype``; falls back to the closest precision the chip runs.

        mxfp8 falls back to fp8, nvfp4 to fp4, fp16 to bf16 and vice versa, tf32 to fp32 (a chip without
        TF32 tensor cores, e.g. V100, runs a TF32-enabled job's matmuls in FP32 on CUDA cores). Returns 0
        when the chip cannot run the precision at all (e.g. fp8 on A100).
        """
        order = {
            "tf32": ("tf32", "fp32"),
            "mxfp8": ("mxfp8", "fp8"),
            "fp8": ("fp8",),
            "nvfp4": ("nvfp4", "fp4"),
            "fp4": ("fp4", "nvfp4"),
            "fp16": ("fp16", "bf16"),
            "bf16": ("bf16", "fp16"),
        }.get(dtype, (dtype,))
        for d in order:
            v = self.peak_flops.get(d)
            if v:
                return float(v)
        return 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ScaleUpTech:
    """A scale-up link/fabric technology (NVLink+NVSwitch, Infinity Fabric, UB, UALink, PCIe ...)."""

    id: str
    name: str
    topology: str  # one of ScaleUpTopology
    bw_per_device: float  # bytes/s per direction per device (typical product)
    latency_s: float  # one hop (device -> switch -> device, or direct link)
    max_domain: int  # largest domain the technology addresses
    in_network_reduction: bool = False  # NVLS-like multicast/reduce in the switch
    memory_semantic: bool = True
    sources: Mapping[str, str] = field(default_factory=dict)
    assumptions: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class ScaleOutTech:
    """A scale-out network technology (InfiniBand NDR, RoCEv2 400G, Spectrum-X, Ethernet TCP ...)."""

    id: str
    name: str
    kind: str  # infiniband | roce | ethernet
    port_bw: float  # bytes/s per direction per NIC port (line rate)
    switch_radix: int  # ports per switch at this speed
    hop_latency_s: float  # per switch hop
    nic_latency_s: float  # end-host (NIC + software) one-way latency
    protocol_efficiency: float  # achievable fraction of line rate for large transfers
    sharp: bool = False  # in-network reduction (IB SHARP)
    adaptive_routing: bool = False
    packet_spraying: bool = False
    planes: int = 1  # independent switch planes; 2: every NIC port split over two planes (dual-plane)
    switch_power_w: float | None = None
    switch_price_usd: float | None = None
    nic_power_w: float | None = None
    nic_price_usd: float | None = None
    transceiver_power_w: float | None = None
    transceiver_price_usd: float | None = None
    cable_price_usd: float | None = None
    sources: Mapping[str, str] = field(default_factory=dict)
    assumptions: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class SystemSpec:
    """A scale-up system: the unit that is repeated to build a cluster (a server, a rack, a supernode).

    ``devices_per_domain`` is the scale-up (NVLink/UB/...) domain size; ``devices_per_host`` the
    accelerators per OS host (4 per NVL72 compute tray, 8 per HGX server).
    """

    id: str
    name: str
    accelerator: Accelerator
    scaleup: ScaleUpTech
    devices_per_domain: int
    devices_per_host: int
    scaleup_bw_per_device: float  # bytes/s per direction (may be lower than the tech's, e.g. H800)
    scaleup_topology: str  # switched | full-mesh | torus-2d | torus-3d | pcie | clos-2tier
    nics_per_host: int
    nic_bw: float  # bytes/s per direction per NIC
    default_scaleout: str  # ScaleOutTech id
    frontend_nics_per_host: int = 0  # front-end / storage network NICs (third network layer)
    frontend_nic_bw: float | None = None  # bytes/s per direction per front-end NIC
    cpus_per_host: int = 2
    devices_per_socket: int = 0  # PCIe: devices behind one CPU socket; 0 = no socket split
    inter_socket_bw: float | None = None  # bytes/s per direction of the inter-socket (UPI/xGMI) link
    scaleup_switches_per_domain: int = 0
    supported_domain_sizes: tuple[int, ...] = ()  # partitions a user may ask for (empty: only full)
    host_power_w: float | None = None  # everything in a host except the accelerators
    domain_overhead_power_w: float | None = None  # switch trays, power shelves, fans per domain
    price_usd_per_device: float | None = None
    bom: Mapping[str, Any] = field(default_factory=dict)  # system-specific bill-of-materials facts (trays, optics ...)
    sources: Mapping[str, str] = field(default_factory=dict)
    assumptions: Mapping[str, str] = field(default_factory=dict)

    @property
    def hosts_per_domain(self) -> int:
        return max(1, self.devices_per_domain // self.devices_per_host)

    @property
    def nic_bw_per_device(self) -> float:
        """NIC line rate per device as the system ships, before any fabric. Anything priced on a fabric
        reads ``resolve_hardware(system, fabric).scaleout_bw_per_device`` (min of NIC and port) instead."""
        return self.nics_per_host * self.nic_bw / self.devices_per_host


@dataclass(frozen=True, slots=True, kw_only=True)
class HardwareView:
    """The one resolved view of a system on a scale-out fabric: every bandwidth and latency a model
    prices with, derived once (``resolve_hardware``). Collectives, the step model, the fabric simulator,
    the cluster/BOM model and the printed assumptions read these fields; none re-derives a bandwidth.

    Line rates (before any protocol/achieved-bandwidth fraction, which is a property of the model that
    uses them and is printed next to them). Catalog overlays (``--catalog``) are already applied to the
    specs this is built from.
    """

    system_id: str
    fabric_id: str
    devices_per_domain: int
    devices_per_host: int
    scaleup_bw_per_device: float  # bytes/s per direction per device, the system's scale-up links
    scaleup_latency_s: float  # one scale-up hop
    scaleup_in_network_reduction: bool  # NVLS-style reduction in the scale-up switch
    nics_per_host: int
    ports_per_nic: int  # fabric ports one NIC drives (2 on a dual-plane fabric)
    nic_line_bw: float  # one NIC as the system ships it (bytes/s per direction)
    port_bw: float  # one fabric switch port (bytes/s per direction)
    nic_bw: float  # one NIC on this fabric: min(nic_line_bw, ports_per_nic * port_bw)
    scaleout_bw_per_host: float  # nics_per_host * nic_bw
    scaleout_bw_per_device: float  # scaleout_bw_per_host / devices_per_host
    protocol_efficiency: float  # the fabric's achievable fraction of line rate (catalog, sourced there)
    nic_latency_s: float  # end host one way
    hop_latency_s: float  # per switch hop
    switch_radix: int  # switch ports at the NIC port speed (a faster switch port splits: breakout)
    scaleout_in_network_reduction: bool  # IB SHARP


def resolve_hardware(system: SystemSpec, fabric: ScaleOutTech, *, ports_per_nic: int | None = None) -> HardwareView:
    """The resolved view of ``system`` on ``fabric`` (see :class:`HardwareView`).

    Per-device scale-out bandwidth = NICs per host x min(NIC rate, ports x fabric port rate) / devices
    per host: a 400G NIC on an 800G fabric runs at 400G, an 800G NIC on a 400G fabric at 400G.
    ``ports_per_nic`` defaults to the fabric's planes (a dual-plane fabric splits each NIC over two
    ports); a cluster built with an explicit topology passes its own.
    """
    ports = max(1, int(fabric.planes if ports_per_nic is None else ports_per_nic))
    port_nic = min(system.nic_bw / ports, fabric.port_bw)  # one NIC port on this fabric
    nic = port_nic * ports
    per_host = system.nics_per_host * nic
    split = max(1, int(fabric.port_bw // port_nic + 1e-9)) if port_nic > 0 else 1
    return HardwareView(
        system_id=system.id, fabric_id=fabric.id, devices_per_domain=int(system.devices_per_domain),
        devices_per_host=int(system.devices_per_host), scaleup_bw_per_device=float(system.scaleup_bw_per_device),
        scaleup_latency_s=float(system.scaleup.latency_s),
        scaleup_in_network_reduction=bool(system.scaleup.in_network_reduction),
        nics_per_host=int(system.nics_per_host), ports_per_nic=ports, nic_line_bw=float(system.nic_bw),
        port_bw=float(fabric.port_bw), nic_bw=float(nic), scaleout_bw_per_host=float(per_host),
        scaleout_bw_per_device=float(per_host / max(1, system.devices_per_host)),
        protocol_efficiency=float(fabric.protocol_efficiency), nic_latency_s=float(fabric.nic_latency_s),
        hop_latency_s=float(fabric.hop_latency_s), switch_radix=int(fabric.switch_radix) * split,
        scaleout_in_network_reduction=bool(fabric.sharp),
    )

"""Pydantic schema for catalog files (built-in and user overlays). Edge only: converts to the
frozen SI dataclasses of ``clustertwin.hardware`` once. ``extra="forbid"`` everywhere, and every
entry must say where its numbers come from (``source``; per-field ``sources`` override it;
``assumed`` marks numbers that are assumptions, with the reason)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    PositiveFloat,
    PositiveInt,
    model_validator,
)

from .. import units
from ..hardware import Accelerator, ScaleOutTech, ScaleUpTech, SystemSpec


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    source: str = Field(min_length=3, description="URL or paper + table for the numbers of this entry")
    sources: dict[str, str] = Field(default_factory=dict, description="field -> citation, overrides `source`")
    assumed: dict[str, str] = Field(default_factory=dict, description="field -> why this number is an assumption")

    # YAML field name -> name of the field on the frozen spec (``hardware.py``), so that
    # ``spec.sources`` / ``spec.assumptions`` are keyed by the names ``catalog show`` displays.
    SPEC_NAMES: ClassVar[dict[str, str]] = {}

    @model_validator(mode="after")
    def _check_fields_named(self) -> _Entry:
        known = set(type(self).model_fields)
        bom = getattr(self, "bom", None) or {}
        for key in list(self.sources) + list(self.assumed):
            if key.startswith("bom.") and key[4:] in bom:
                continue
            if key not in known or key in ("name", "source", "sources", "assumed"):
                raise ValueError(f"'sources'/'assumed' names field {key!r}, which this entry does not have")
        return self

    def _spec_key(self, key: str) -> str:
        return self.SPEC_NAMES.get(key, key)

    def field_sources(self) -> dict[str, str]:
        """Source of every field that has a value, keyed by the spec field name (plus ``bom.KEY``)."""
        out = {}
        for name in type(self).model_fields:
            if name in ("name", "source", "sources", "assumed"):
                continue
            value = getattr(self, name)
            if value is None:
                continue
            if name == "bom":
                for k in value:
                    out[f"bom.{k}"] = self.sources.get(f"bom.{k}", self.source)
                continue
            out[self._spec_key(name)] = self.sources.get(name, self.source)
        return out

    def field_assumptions(self) -> dict[str, str]:
        return {self._spec_key(k): v for k, v in self.assumed.items()}


class AcceleratorIn(_Entry):
    SPEC_NAMES: ClassVar[dict[str, str]] = {
        "peak_tflops": "peak_flops", "hbm_gb": "hbm_bytes", "hbm_tbps": "hbm_bw", "scaleup_gbps_uni": "scaleup_bw",
        "hbm_reported_mib": "hbm_reported_bytes",
    }
    vendor: str
    arch: str
    peak_tflops: dict[str, PositiveFloat] = Field(description="dtype -> dense TFLOP/s")
    hbm_gb: PositiveFloat
    hbm_reported_mib: PositiveFloat | None = Field(
        default=None, description="device memory total as nvidia-smi / the driver reports it, MiB")
    hbm_tbps: PositiveFloat
    scaleup_gbps_uni: NonNegativeFloat = Field(description="GB/s per direction on the native scale-up link")
    tdp_w: PositiveFloat | None = None
    num_sms: PositiveInt | None = None
    mamf_fraction: dict[str, PositiveFloat] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check_dtypes(self) -> AcceleratorIn:
        from ..hardware import DTYPES

        for d in list(self.peak_tflops) + list(self.mamf_fraction):
            if d not in DTYPES:
                raise ValueError(f"unknown dtype {d!r}; use one of {', '.join(DTYPES)}")
        for d, f in self.mamf_fraction.items():
            if f > 1:
                raise ValueError(f"mamf_fraction[{d}] = {f} is above 1 (it is a fraction of peak)")
        if "bf16" not in self.peak_tflops and "fp16" not in self.peak_tflops:
            raise ValueError("peak_tflops needs at least bf16 or fp16")
        return self

    def to_spec(self, id: str) -> Accelerator:
        return Accelerator(
            id=id,
            name=self.name,
            vendor=self.vendor,
            arch=self.arch,
            peak_flops={k: v * units.TFLOPS for k, v in self.peak_tflops.items()},
            hbm_bytes=self.hbm_gb * units.GB,
            hbm_reported_bytes=self.hbm_reported_mib * units.MiB if self.hbm_reported_mib else None,
            hbm_bw=self.hbm_tbps * units.TB,
            scaleup_bw=self.scaleup_gbps_uni * units.GB,
            tdp_w=self.tdp_w,
            num_sms=self.num_sms,
            mamf_fraction=dict(self.mamf_fraction),
            sources=self.field_sources(),
            assumptions=self.field_assumptions(),
        )


class ScaleUpIn(_Entry):
    SPEC_NAMES: ClassVar[dict[str, str]] = {"gbps_per_device_uni": "bw_per_device", "latency_us": "latency_s"}
    topology: str
    gbps_per_device_uni: NonNegativeFloat
    latency_us: NonNegativeFloat
    max_domain: PositiveInt
    in_network_reduction: bool = False
    memory_semantic: bool = True

    @model_validator(mode="after")
    def _check_topology(self) -> ScaleUpIn:
        allowed = ("switched", "full-mesh", "torus-2d", "torus-3d", "pcie", "clos-2tier")
        if self.topology not in allowed:
            raise ValueError(f"topology {self.topology!r} is not one of {', '.join(allowed)}")
        return self

    def to_spec(self, id: str) -> ScaleUpTech:
        return ScaleUpTech(
            id=id,
            name=self.name,
            topology=self.topology,
            bw_per_device=self.gbps_per_device_uni * units.GB,
            latency_s=self.latency_us * units.US,
            max_domain=self.max_domain,
            in_network_reduction=self.in_network_reduction,
            memory_semantic=self.memory_semantic,
            sources=self.field_sources(),
            assumptions=self.field_assumptions(),
        )


class ScaleOutIn(_Entry):
    SPEC_NAMES: ClassVar[dict[str, str]] = {
        "port_gbps": "port_bw", "hop_latency_us": "hop_latency_s", "nic_latency_us": "nic_latency_s",
    }
    kind: str
    port_gbps: PositiveFloat = Field(description="line rate per NIC port, Gb/s")
    switch_radix: PositiveInt
    hop_latency_us: NonNegativeFloat
    nic_latency_us: NonNegativeFloat
    protocol_efficiency: float = Field(gt=0, le=1)
    sharp: bool = False
    adaptive_routing: bool = False
    packet_spraying: bool = False
    planes: int = Field(default=1, ge=1, le=2, description="switch planes; 2 = dual-plane (NIC ports split)")
    switch_power_w: PositiveFloat | None = None
    switch_price_usd: PositiveFloat | None = None
    nic_power_w: PositiveFloat | None = None
    nic_price_usd: PositiveFloat | None = None
    transceiver_power_w: PositiveFloat | None = None
    transceiver_price_usd: PositiveFloat | None = None
    cable_price_usd: PositiveFloat | None = None

    @model_validator(mode="after")
    def _check_kind(self) -> ScaleOutIn:
        if self.kind not in ("infiniband", "roce", "ethernet"):
            raise ValueError(f"kind {self.kind!r} is not one of infiniband, roce, ethernet")
        return self

    def to_spec(self, id: str) -> ScaleOutTech:
        return ScaleOutTech(
            id=id,
            name=self.name,
            kind=self.kind,
            port_bw=units.gbps_to_bytes_per_s(self.port_gbps),
            switch_radix=self.switch_radix,
            hop_latency_s=self.hop_latency_us * units.US,
            nic_latency_s=self.nic_latency_us * units.US,
            protocol_efficiency=self.protocol_efficiency,
            sharp=self.sharp,
            adaptive_routing=self.adaptive_routing,
            packet_spraying=self.packet_spraying,
            planes=self.planes,
            switch_power_w=self.switch_power_w,
            switch_price_usd=self.switch_price_usd,
            nic_power_w=self.nic_power_w,
            nic_price_usd=self.nic_price_usd,
            transceiver_power_w=self.transceiver_power_w,
            transceiver_price_usd=self.transceiver_price_usd,
            cable_price_usd=self.cable_price_usd,
            sources=self.field_sources(),
            assumptions=self.field_assumptions(),
        )


class SystemIn(_Entry):
    SPEC_NAMES: ClassVar[dict[str, str]] = {
        "scaleup_gbps_per_device_uni": "scaleup_bw_per_device", "nic_gbps": "nic_bw",
        "frontend_nic_gbps": "frontend_nic_bw", "inter_socket_gbps_uni": "inter_socket_bw",
    }
    accelerator: str
    scaleup: str
    devices_per_domain: PositiveInt
    devices_per_host: PositiveInt
    scaleup_gbps_per_device_uni: NonNegativeFloat | None = None  # default: the accelerator's
    scaleup_topology: str | None = None  # default: the scale-up tech's
    nics_per_host: int = Field(ge=0)
    nic_gbps: NonNegativeFloat
    frontend_nics_per_host: int = Field(default=0, ge=0, description="front-end / storage NICs per host")
    frontend_nic_gbps: PositiveFloat | None = None
    default_scaleout: str
    cpus_per_host: int = Field(default=2, ge=0)
    devices_per_socket: int = Field(
        default=0, ge=0, description="PCIe systems: devices behind one CPU socket (0 = no socket split)"
    )
    inter_socket_gbps_uni: PositiveFloat | None = Field(
        default=None, description="GB/s per direction of the CPU inter-socket link GPU traffic crosses (NCCL topo.h)"
    )
    scaleup_switches_per_domain: int = Field(default=0, ge=0)
    supported_domain_sizes: list[PositiveInt] = Field(default_factory=list)
    host_power_w: PositiveFloat | None = None
    domain_overhead_power_w: NonNegativeFloat | None = None
    price_usd_per_device: PositiveFloat | None = None
    bom: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check_shape(self) -> SystemIn:
        for k, v in self.bom.items():
            if isinstance(v, bool) or not isinstance(v, (int, float, str)):
                raise ValueError(f"bom.{k} must be a number or a short text, got {type(v).__name__}")
            if isinstance(v, (int, float)) and v < 0:
                raise ValueError(f"bom.{k} = {v} is negative")
        for size in self.supported_domain_sizes:
            if size > self.devices_per_domain:
                raise ValueError(
                    f"supported_domain_sizes has {size}, larger than devices_per_domain ({self.devices_per_domain})"
                )
        if self.devices_per_domain % self.devices_per_host and self.devices_per_host % self.devices_per_domain:
            raise ValueError(
                f"devices_per_domain ({self.devices_per_domain}) and devices_per_host "
                f"({self.devices_per_host}) must divide one another"
            )
        return self

    def to_spec(self, id: str, acc: Accelerator, up: ScaleUpTech) -> SystemSpec:
        bw = self.scaleup_gbps_per_device_uni
        sources = self.field_sources()
        if bw is None:  # inherited: the smaller of the accelerator's link and the scale-up tech's
            if up.bw_per_device < acc.scaleup_bw:
                sources["scaleup_bw_per_device"] = f"scale-up fabric {up.id}: {up.sources.get('bw_per_device', '')}"
            else:
                sources["scaleup_bw_per_device"] = f"accelerator {acc.id}: {acc.sources.get('scaleup_bw', '')}"
        assumptions = self.field_assumptions()
        if bw is None and up.bw_per_device < acc.scaleup_bw and "bw_per_device" in up.assumptions:
            assumptions.setdefault("scaleup_bw_per_device", f"scale-up fabric {up.id}: {up.assumptions['bw_per_device']}")
        elif bw is None and "scaleup_bw" in acc.assumptions:
            assumptions.setdefault("scaleup_bw_per_device", f"accelerator {acc.id}: {acc.assumptions['scaleup_bw']}")
        if self.scaleup_topology is None:
            sources["scaleup_topology"] = f"scale-up fabric {up.id}: {up.sources.get('topology', '')}"
        return SystemSpec(
            id=id,
            name=self.name,
            accelerator=acc,
            scaleup=up,
            devices_per_domain=self.devices_per_domain,
            devices_per_host=self.devices_per_host,
            scaleup_bw_per_device=(bw * units.GB) if bw is not None else min(acc.scaleup_bw, up.bw_per_device),
            scaleup_topology=self.scaleup_topology or up.topology,
            nics_per_host=self.nics_per_host,
            nic_bw=units.gbps_to_bytes_per_s(self.nic_gbps),
            frontend_nics_per_host=self.frontend_nics_per_host,
            frontend_nic_bw=(units.gbps_to_bytes_per_s(self.frontend_nic_gbps)
                             if self.frontend_nic_gbps is not None else None),
            default_scaleout=self.default_scaleout,
            cpus_per_host=self.cpus_per_host,
            devices_per_socket=self.devices_per_socket,
            inter_socket_bw=(self.inter_socket_gbps_uni * units.GB) if self.inter_socket_gbps_uni is not None else None,
            scaleup_switches_per_domain=self.scaleup_switches_per_domain,
            supported_domain_sizes=tuple(self.supported_domain_sizes),
            host_power_w=self.host_power_w,
            domain_overhead_power_w=self.domain_overhead_power_w,
            price_usd_per_device=self.price_usd_per_device,
            bom=dict(self.bom),
            sources=sources,
            assumptions=assumptions,
        )


class CatalogFile(BaseModel):
    """One catalog file. Every section is optional so overlays can add just one entry."""

    model_config = ConfigDict(extra="forbid")
    version: str | None = None
    accelerators: dict[str, AcceleratorIn] = Field(default_factory=dict)
    scaleup: dict[str, ScaleUpIn] = Field(default_factory=dict)
    scaleout: dict[str, ScaleOutIn] = Field(default_factory=dict)
    systems: dict[str, SystemIn] = Field(default_factory=dict)
    # Free-form calibration sections owned by the engines (e.g. collectives fits written by
    # `clustertwin calibrate`); each engine validates its own section.
    calibration: dict[str, dict[str, Any]] = Field(default_factory=dict)

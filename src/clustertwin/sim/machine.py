"""The machine as the step cost model sees it (``Hardware``), in SI units, and the per-chip efficiency
constants (``ChipEfficiency``: workload/data/efficiency.yaml, overlaid by a catalog's
``calibration.step_efficiency``). Built once per (system, fabric, dtype, catalog) by ``make_hardware``;
every cost component reads it and none re-derives a bandwidth.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

from ..errors import InputError
from ..hardware import HardwareView, ScaleOutTech, SystemSpec, resolve_hardware


@dataclass(frozen=True, slots=True, kw_only=True)
class ChipEfficiency:
    """Per-chip efficiency constants (workload/data/efficiency.yaml; catalog ``calibration.step_efficiency``)."""

    gemm_tile_m: int
    gemm_tile_n: int
    gemm_k_overhead: float
    gemm_mamf_scale: float
    kernel_overhead_s: float
    hbm_efficiency: float
    attention_efficiency: float
    attention_efficiency_cudnn: float  # cuDNN fused attention (TE on sm90+); = attention_efficiency if unmeasured
    # PyTorch SDPA's bundled FlashAttention-2 kernels (torch's FLASH backend); = attention_efficiency where FA2
    # is the chip's FlashAttention class (A100, H100), lower on Blackwell, where FA2 runs its sm80 code path
    attention_efficiency_fa2: float
    attention_seq_half: float
    overlap_slowdown: float
    runtime_overhead_bytes: float
    memory_reserve_fraction: float  # device memory kept free against allocator fragmentation (assumption)
    step_overhead_s: float
    moe_host_layer_s: float  # host time to issue one MoE layer's fwd + bwd besides its experts (framework)
    moe_host_expert_s: float  # host time per local expert per MoE layer fwd + bwd (TE GroupedLinear)
    moe_sync_stall_s: float  # exposed cost of one grouped-GEMM MoE layer's split-size host sync (torchtitan)
    num_sms: int
    mamf_fraction: dict[str, float]
    gpu_speed_spread: float = 0.0  # relative std of sustained speed across GPUs of the SKU (components/pace.py)
    assumptions: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class Hardware:
    """Everything the cost model needs about the machine, in SI units."""

    system: SystemSpec
    scaleout: ScaleOutTech
    view: HardwareView  # the resolved bandwidths/latencies (hardware.resolve_hardware)
    eff: ChipEfficiency
    dtype: str
    peak: float  # dense FLOP/s of the GEMM dtype
    peak_bf16: float
    mamf: float  # MAMF fraction of the GEMM dtype
    hbm_bw: float
    hbm_bytes: float  # what a plan may fill: the driver-reported capacity less the fragmentation reserve
    domain: int  # devices per scale-up domain
    catalog: Any = None
    network: Any = None  # None: analytical collectives; a FlowNetwork adds scale-out contention (--network flow)


@lru_cache(maxsize=1)
def efficiency_table() -> dict[str, Any]:
    text = (resources.files("clustertwin.workload") / "data" / "efficiency.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def chip_efficiency(acc_id: str, acc_num_sms: int | None, acc_mamf: dict[str, float],
                    overlay: dict[str, Any] | None = None) -> ChipEfficiency:
    table = efficiency_table()
    cfg = dict(table["defaults"])
    chip = dict(table.get("chips", {}).get(acc_id, {}))
    cfg.update(chip)
    if overlay:
        cfg.update(overlay)
    mamf = dict(cfg.get("mamf_fraction") or {})
    mamf.update({k: float(v) for k, v in acc_mamf.items()})  # catalog measurement wins over fallback
    sms = acc_num_sms or cfg.get("num_sms") or 132
    tile = cfg["gemm_tile"]
    return ChipEfficiency(
        gemm_tile_m=int(tile[0]), gemm_tile_n=int(tile[1]), gemm_k_overhead=float(cfg["gemm_k_overhead"]),
        gemm_mamf_scale=float(cfg["gemm_mamf_scale"]), kernel_overhead_s=float(cfg["kernel_overhead_us"]) * 1e-6,
        hbm_efficiency=float(cfg["hbm_efficiency"]), attention_efficiency=float(cfg["attention_efficiency"]),
        attention_efficiency_cudnn=float(cfg.get("attention_efficiency_cudnn") or cfg["attention_efficiency"]),
        attention_efficiency_fa2=float(cfg.get("attention_efficiency_fa2") or cfg["attention_efficiency"]),
        attention_seq_half=float(cfg["attention_seq_half"]),
        overlap_slowdown=float(cfg["overlap_slowdown"]), runtime_overhead_bytes=float(cfg["runtime_overhead_gb"]) * 1e9,
        memory_reserve_fraction=float(cfg["memory_reserve_fraction"]),
        step_overhead_s=float(cfg["step_overhead_s"]),
        moe_host_layer_s=float(cfg.get("moe_host_layer_us", 0.0)) * 1e-6,
        moe_host_expert_s=float(cfg.get("moe_host_expert_us", 0.0)) * 1e-6,
        moe_sync_stall_s=float(cfg.get("moe_sync_stall_us", 0.0)) * 1e-6,
        num_sms=int(sms), mamf_fraction=mamf, gpu_speed_spread=float(cfg.get("gpu_speed_spread", 0.0)),
        assumptions=dict(chip.get("assumed", {})),
    )


def mamf_for(mamf: dict[str, float], dtype: str) -> float:
    order = {"mxfp8": ("mxfp8", "fp8"), "fp8": ("fp8",), "nvfp4": ("nvfp4", "fp4", "fp8"),
             "fp16": ("fp16", "bf16"), "bf16": ("bf16", "fp16")}.get(dtype, (dtype,))
    for d in order:
        if d in mamf:
            return float(mamf[d])
    return float(mamf.get("bf16", 0.8))


# (id(system), id(scaleout), dtype, id(catalog), id(network)) -> (Hardware, the keyed objects). Specs and
# catalogs are frozen but hold dicts (unhashable), so the key is their identity; the entry keeps them
# alive, so an id is never reused while its entry exists.
_HARDWARE: dict[tuple, tuple[Hardware, tuple]] = {}


def make_hardware(system: SystemSpec, scaleout: ScaleOutTech, dtype: str, catalog: Any = None,
                  network: Any = None) -> Hardware:
    """The machine as the cost model sees it; built once per (system, fabric, dtype, catalog, network)."""
    key = (id(system), id(scaleout), dtype, id(catalog), id(network))
    hit = _HARDWARE.get(key)
    if hit is not None:
        return hit[0]
    hw = _make_hardware(system, scaleout, dtype, catalog, network)
    if len(_HARDWARE) >= 256:
        _HARDWARE.clear()
    _HARDWARE[key] = (hw, (system, scaleout, catalog, network))
    return hw


def _make_hardware(system: SystemSpec, scaleout: ScaleOutTech, dtype: str, catalog: Any,
                   network: Any) -> Hardware:
    acc = system.accelerator
    overlay = None
    if catalog is not None and hasattr(catalog, "calibration_for"):
        overlay = catalog.calibration_for("step_efficiency", acc.id)
    eff = chip_efficiency(acc.id, acc.num_sms, dict(acc.mamf_fraction), overlay)
    peak = acc.peak(dtype)
    if peak <= 0:
        raise InputError(
            f"{acc.name} has no {dtype} tensor-core peak in the catalog",
            hint="pick a precision the chip supports (e.g. bf16 on A100; fp8 needs Hopper or newer)",
        )
    view = resolve_hardware(system, scaleout)
    return Hardware(
        system=system, scaleout=scaleout, view=view, eff=eff, dtype=dtype, peak=peak, peak_bf16=acc.peak("bf16"),
        mamf=mamf_for(eff.mamf_fraction, dtype) * eff.gemm_mamf_scale, hbm_bw=acc.hbm_bw,
        hbm_bytes=acc.memory_capacity_bytes * (1.0 - eff.memory_reserve_fraction),
        domain=view.devices_per_domain, catalog=catalog, network=network,
    )


def with_dtype(hw: Hardware, dtype: str) -> Hardware:
    """``hw`` with its GEMMs in ``dtype`` (peak and MAMF of that dtype; same chip constants and network)."""
    from dataclasses import replace

    return replace(hw, dtype=dtype, peak=hw.system.accelerator.peak(dtype),
                   mamf=mamf_for(hw.eff.mamf_fraction, dtype) * hw.eff.gemm_mamf_scale)


def uncalibrated_note(acc_id: str) -> str:
    """The flag of a chip whose step efficiencies were not fitted to training runs, else "":
    "uncalibrated efficiency (assumed)" where workload/data/efficiency.yaml has no ``chips`` entry for it (the
    defaults are used), "sourced efficiency (not fitted)" where its entry holds published kernel measurements
    but the chip is in no fitted ``gemm_mamf_scale`` group (no validation rows: the AMD Instinct chips)."""
    table = efficiency_table()
    chip = (table.get("chips") or {}).get(acc_id)
    if chip is None:
        return (f"uncalibrated efficiency (assumed): {acc_id} has no fitted step efficiencies; "
                "the defaults of workload/data/efficiency.yaml are used")
    groups = (((table.get("fitted") or {}).get("gemm_mamf_scale") or {}).get("groups") or {}).values()
    if any(acc_id in members for members in groups):
        return ""
    cfg = dict(table["defaults"], **chip)
    return (f"sourced efficiency (not fitted): {acc_id} has no training rows to fit; its step efficiencies are "
            f"published kernel measurements or transfers from them (workload/data/efficiency.yaml chips.{acc_id}: "
            f"GEMMs at {float(cfg['gemm_mamf_scale']):g} x MAMF, fused attention at "
            f"{float(cfg['attention_efficiency']):g} of the BF16 peak, element-wise kernels at "
            f"{float(cfg['hbm_efficiency']):g} of HBM bandwidth)")

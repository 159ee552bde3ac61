"""Power of a design, bottom-up from component counts.

    P_acc  = N_acc * TDP * (idle + (1 - idle) * utilisation)
    P_host = N_host * host_power_w                (catalog; CPUs, memory, NICs, fans)
           | N_cpu * cpu_w + N_host * host_other_w + N_nic * nic_w   (defaults when the catalog has none)
    P_up   = N_domain * domain_overhead_power_w   (catalog: switch trays, power shelves)
           | N_scaleup_switch * scaleup_switch_w  (scale-up switches outside the hosts)
    P_net  = N_switch * switch_power_w + N_transceiver * transceiver_power_w (scale-out fabric; catalog)
    P_IT   = sum of the above;  P_facility = PUE * P_IT  (cooling and distribution = (PUE - 1) * P_IT)

Every number not in the catalog comes from ``data/defaults.yaml`` and is listed as an assumption.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import InputError
from ..hardware import ScaleOutTech, SystemSpec
from .counts import ComponentCounts
from .params import Param, Params


@dataclass(frozen=True, slots=True, kw_only=True)
class PowerResult:
    by_component_w: dict[str, float]
    it_w: float
    facility_w: float
    utilization: float
    pue: float
    assumptions: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict:
        return {
            "it_power_kw": self.it_w / 1e3,
            "facility_power_kw": self.facility_w / 1e3,
            "utilization": self.utilization,
            "pue": self.pue,
            "by_component_kw": {k: v / 1e3 for k, v in self.by_component_w.items()},
            "assumptions": list(self.assumptions),
        }


def _pick(value: float | None, default: Param, label: str, notes: list[str]) -> float:
    if value is not None:
        return float(value)
    notes.append(f"{label} = {default.value:g}: {default.assumed or default.source}")
    return default.value


def check_power_inputs(utilization: float | None, pue: float | None) -> None:
    if utilization is not None and not 0 <= utilization <= 1:
        raise InputError(f"--utilization must be between 0 and 1, got {utilization}", hint="e.g. --utilization 0.8")
    if pue is not None and pue < 1:
        raise InputError(f"--pue must be at least 1 (facility power / IT power), got {pue}", hint="e.g. --pue 1.2")


def power(system: SystemSpec, fabric: ScaleOutTech | None, counts: ComponentCounts, params: Params, *,
          utilization: float | None = None, pue: float | None = None) -> PowerResult:
    check_power_inputs(utilization, pue)
    p = params.power
    notes: list[str] = []
    u = utilization if utilization is not None else _pick(None, p["utilization"], "utilisation", notes)
    pue_v = pue if pue is not None else _pick(None, p["pue"], "PUE", notes)
    acc = system.accelerator
    tdp = acc.tdp_w
    if tdp is None:
        d = params.tdp_by_accelerator.get(acc.id)
        if d is None:
            raise InputError(f"accelerator {acc.id!r} has no tdp_w in the catalog and no default",
                             hint="add tdp_w to the catalog entry or power.tdp_w_by_accelerator to a --defaults file")
        tdp = _pick(None, d, f"{acc.id} TDP (W)", notes)
    idle = _pick(None, p["accelerator_idle_fraction"], "accelerator idle fraction of TDP", notes)
    out: dict[str, float] = {"accelerators": counts.accelerators * tdp * (idle + (1.0 - idle) * u)}
    if system.host_power_w is not None:
        out["hosts"] = counts.hosts * system.host_power_w
    else:
        cpu = _pick(None, p["cpu_w"], "CPU W", notes)
        other = _pick(None, p["host_other_w"], "host other W", notes)
        nic = fabric.nic_power_w if fabric and fabric.nic_power_w else _pick(None, p["nic_w"], "NIC W", notes)
        out["hosts"] = counts.cpus * cpu + counts.hosts * other + counts.nics * nic
    if system.domain_overhead_power_w is not None:
        out["scaleup_fabric"] = counts.domains * system.domain_overhead_power_w
    elif counts.scaleup_leaves_host and counts.scaleup_switches:
        out["scaleup_fabric"] = counts.scaleup_switches * _pick(None, p["scaleup_switch_w"], "scale-up switch W", notes)
    else:
        out["scaleup_fabric"] = 0.0
    sw_w = fabric.switch_power_w if fabric and fabric.switch_power_w else _pick(None, p["scaleout_switch_w"], "scale-out switch W", notes)
    tx_w = fabric.transceiver_power_w if fabric and fabric.transceiver_power_w else _pick(None, p["transceiver_w"], "transceiver W", notes)
    out["scaleout_switches"] = counts.scaleout_switches * sw_w
    out["transceivers"] = counts.transceivers * tx_w
    if counts.frontend_switches or counts.frontend_transceivers:
        nic_w = fabric.nic_power_w if fabric and fabric.nic_power_w else p["nic_w"].value
        out["frontend_network"] = (counts.frontend_switches * sw_w + counts.frontend_transceivers * tx_w
                                   + counts.frontend_nics * nic_w)
    if fabric is not None:
        for k in ("switch_power_w", "transceiver_power_w", "nic_power_w"):
            if k in fabric.assumptions and getattr(fabric, k):
                notes.append(f"{fabric.id} {k} = {getattr(fabric, k):g}: {fabric.assumptions[k]}")
    for k in ("host_power_w", "domain_overhead_power_w"):
        if k in system.assumptions and getattr(system, k) is not None:
            notes.append(f"{system.id} {k} = {getattr(system, k):g}: {system.assumptions[k]}")
    if "tdp_w" in acc.assumptions and acc.tdp_w is not None:
        notes.append(f"{acc.id} tdp_w = {acc.tdp_w:g}: {acc.assumptions['tdp_w']}")
    it = float(sum(out.values()))
    out["cooling_and_distribution"] = it * (pue_v - 1.0)
    return PowerResult(by_component_w=out, it_w=it, facility_w=it * pue_v, utilization=u, pue=pue_v,
                       assumptions=tuple(dict.fromkeys(notes + list(counts.notes))))

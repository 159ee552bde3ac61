"""Power of a design, bottom-up from component counts.

    P_acc  = N_acc * TDP * (idle + (1 - idle) * utilisation)
    P_host = N_host * host_power_w                (catalog; CPUs, memory, NICs, fans)
           | N_cpu * cpu_w + N_host * host_other_w + N_nic * nic_w   (defaults when the catalog has none)
    P_up   = N_domain * domain_overhead_power_w   (catalog: switch trays, power shelves)
           | N_scaleup_switch * scaleup_switch_w  (scale-up switches outside the hosts)
    P_net  = N_switch * switch_power_w + N_transceiver * transceiver_power_w (scale-out fabric; catalog)
    P_IT   = sum of the above;  P_facility = PUE * P_IT  (cooling and distribution = (PUE - 1) * P_IT)

Every number not in the catalog comes from ``data/defaults.yaml``; values and assumption lines come from
``assumptions.py`` (the one wording of each, shared with cost, compare and serve plan).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import InputError
from ..hardware import ScaleOutTech, SystemSpec
from .assumptions import Value, assumption_line, catalog_or_default, default
from .counts import ComponentCounts
from .params import Params


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


MAX_PUE = 5.0  # sanity bound: the worst surveyed data centres report ~2.5-3 (Uptime Institute)


def check_power_inputs(utilization: float | None, pue: float | None) -> None:
    if utilization is not None and not 0 <= utilization <= 1:
        raise InputError(f"--utilization must be between 0 and 1, got {utilization}", hint="e.g. --utilization 0.8")
    if pue is not None and not 1 <= pue <= MAX_PUE:
        raise InputError(f"--pue must be between 1 and {MAX_PUE:g} (facility power / IT power), got {pue}",
                         hint="e.g. --pue 1.2 (hyperscale) or 1.6 (survey average)")


def power(system: SystemSpec, fabric: ScaleOutTech | None, counts: ComponentCounts, params: Params, *,
          utilization: float | None = None, pue: float | None = None) -> PowerResult:
    check_power_inputs(utilization, pue)
    notes: list[str] = []

    def use(v: Value) -> float:  # the value, and its line when it is an assumption
        if v.line:
            notes.append(v.line)
        return v.value

    u = use(default(params, "power", "utilization", given=utilization))
    pue_v = use(default(params, "power", "pue", given=pue))
    acc = system.accelerator
    tdp = acc.tdp_w
    if tdp is None:
        d = params.tdp_by_accelerator.get(acc.id)
        if d is None:
            raise InputError(f"accelerator {acc.id!r} has no tdp_w in the catalog and no default",
                             hint="add tdp_w to the catalog entry or power.tdp_w_by_accelerator to a --defaults file")
        tdp = use(Value(d.value, assumption_line("tdp_w", d.value, d.assumed, acc.id) if d.assumed else None))
    elif "tdp_w" in acc.assumptions:
        notes.append(assumption_line("tdp_w", tdp, acc.assumptions["tdp_w"], acc.id))
    idle = use(default(params, "power", "accelerator_idle_fraction"))
    out: dict[str, float] = {"accelerators": counts.accelerators * tdp * (idle + (1.0 - idle) * u)}
    if system.host_power_w is not None:
        out["hosts"] = counts.hosts * use(catalog_or_default(system, "host_power_w", params))
    else:
        cpu = use(default(params, "power", "cpu_w"))
        other = use(default(params, "power", "host_other_w"))
        out["hosts"] = counts.cpus * cpu + counts.hosts * other + counts.nics * use(catalog_or_default(fabric, "nic_power_w", params))
    if system.domain_overhead_power_w is not None:
        out["scaleup_fabric"] = counts.domains * use(catalog_or_default(system, "domain_overhead_power_w", params))
    elif counts.scaleup_leaves_host and counts.scaleup_switches:
        out["scaleup_fabric"] = counts.scaleup_switches * use(default(params, "power", "scaleup_switch_w"))
    else:
        out["scaleup_fabric"] = 0.0
    sw_w = use(catalog_or_default(fabric, "switch_power_w", params))
    tx_w = use(catalog_or_default(fabric, "transceiver_power_w", params))
    out["scaleout_switches"] = counts.scaleout_switches * sw_w
    out["transceivers"] = counts.transceivers * tx_w
    if counts.frontend_switches or counts.frontend_transceivers:
        # front-end NICs draw from the host's budget when the catalog gives a host power (as the BOM counts them)
        nic_w = 0.0 if system.host_power_w is not None else use(catalog_or_default(fabric, "nic_power_w", params))
        out["frontend_network"] = (counts.frontend_switches * sw_w + counts.frontend_transceivers * tx_w
                                   + counts.frontend_nics * nic_w)
    it = float(sum(out.values()))
    out["cooling_and_distribution"] = it * (pue_v - 1.0)
    return PowerResult(by_component_w=out, it_w=it, facility_w=it * pue_v, utilization=u, pue=pue_v,
                       assumptions=tuple(dict.fromkeys(notes + list(counts.notes))))

"""Adapter: ``clustertwin.cluster.bom.BillOfMaterials`` -> :class:`ComponentCounts`.

The counting rules are the BOM's (see ``clustertwin/cluster/bom.py``); this module only maps its
lines onto the component classes of the failure, power and cost models:

* switches (failure exposure): scale-out switches, plus scale-up switch chips when the scale-up
  fabric leaves the host (NVL72 trays, CloudMatrix UB switches);
* transceivers: optical transceivers of the scale-up and scale-out fabrics;
* cables: optical links plus copper cables of the scale-up and scale-out fabrics;
* the front-end network is counted for power and cost only (its failures do not stop the job).
"""

from __future__ import annotations

from ..hardware import ScaleOutTech, SystemSpec
from .counts import ComponentCounts


def counts_from_bom(system: SystemSpec, domains: int, fabric: ScaleOutTech | None) -> ComponentCounts | None:
    from ..cluster import build_cluster
    from ..cluster.bom import PARTIAL_COST_NOTE, bill_of_materials

    if fabric is None:
        return None
    cluster = build_cluster(system, domains=domains, fabric=fabric)
    bom = bill_of_materials(cluster)

    def tot(prefix: str, category: str | None = None) -> float:
        return float(bom.total(prefix, category))

    cables = sum(tot(p, c) for p in ("optical links", "copper") for c in ("scale-up", "scale-out"))
    return ComponentCounts(
        accelerators=float(bom.count("accelerators")),
        hosts=float(cluster.num_hosts),
        cpus=float(bom.count("CPUs")),
        domains=float(domains),
        devices_per_domain=system.devices_per_domain,
        devices_per_host=system.devices_per_host,
        scaleup_switches=tot("scale-up switch chips"),
        scaleout_switches=tot("switches, scale-out"),
        nics=tot("NICs, scale-out"),
        transceivers=tot("optical transceivers", "scale-up") + tot("optical transceivers", "scale-out"),
        scaleup_transceivers=tot("optical transceivers", "scale-up"),
        cables=cables,
        scaleup_cables=tot("optical links", "scale-up") + tot("copper", "scale-up"),
        frontend_switches=tot("switches, front-end"),
        frontend_nics=tot("NICs, front-end"),
        frontend_transceivers=tot("optical transceivers", "front-end"),
        frontend_cables=tot("copper", "front-end") + tot("optical links", "front-end"),
        scaleup_leaves_host=system.devices_per_domain > system.devices_per_host,
        source="bill of materials (clustertwin.cluster.bom)",
        notes=tuple(n for n in bom.notes if n != PARTIAL_COST_NOTE),  # cost() prices the devices itself
        bom_power_kw=float(bom.power_kw),
        bom_power_basis=bom.power_basis,
    )

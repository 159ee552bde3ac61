"""Bill of materials of a :class:`~clustertwin.cluster.model.Cluster`: devices, CPUs, trays, switches,
NICs, optics and copper by network layer, power and (where the catalog has prices) cost.

Counting rules (docs/cluster.md explains each with its source):

* physical systems = ceil(devices / full domain size): partitions (``--domain-size``) share hardware;
* compute trays / switch trays / power shelves / racks = systems x the system's ``bom`` figures;
* scale-up switch chips = systems x ``scaleup_switches_per_domain``;
* scale-up cabling: a domain inside one host (HGX baseboard, MI300X platform) has no cables (board
  traces); a switched or mesh domain across hosts in a rack (NVL72, Kunlun 32) uses copper, one cable
  per device link (``bom.scaleup_links_per_device``) or per device pair across hosts (full mesh);
  clos-2tier: device -> first tier inside its group is board / copper (copper when the group spans
  hosts), first tier -> second tier is optical, one link per device link (non-blocking), 2 optical
  transceivers per link (one at each end) - CloudMatrix384: 384 x 7 x 2 = 5,376;
* scale-out cabling: NIC -> leaf is copper (DAC) for a ``fat-tree`` (top-of-rack leaf) and optical
  for ``rail`` / ``dual-plane`` (leaves in network racks, DGX SuperPOD / HPN); leaf -> spine and
  spine -> core are always optical; every optical link has 2 transceivers and 1 fibre; with one NIC
  per device and two optical tiers that is 4 transceivers per device (CloudMatrix384: 384 x 4 = 1,536);
* the front-end network is a non-blocking fat tree with top-of-rack leaves (DAC down, optics up);
* power = systems (devices x TDP + hosts x host power (CPUs, memory, NICs, fans) + systems x domain
  overhead + scale-up optics) + networks (scale-out and front-end switches and optics); when the
  accelerator TDP is not published the system's published ``bom.domain_power_kw`` replaces the
  systems part;
* cost: only parts with a catalog price are summed; prices are assumptions unless sourced.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .model import Cluster

# the BOM prices no accelerator the catalog gives no price for; power / cost / compare / serve price them
# (reliability.assumptions.device_price) and leave this note out, so no output states both
PARTIAL_COST_NOTE = "no device price in the catalog: cost covers network parts only (prices assumed)"


@dataclass(frozen=True, slots=True)
class BomLine:
    item: str
    category: str  # compute | scale-up | scale-out | front-end
    count: int
    unit_power_w: float | None = None
    unit_price_usd: float | None = None
    power_assumed: bool = False
    price_assumed: bool = False
    rule: str = ""

    @property
    def power_w(self) -> float | None:
        return None if self.unit_power_w is None else self.unit_power_w * self.count

    @property
    def price_usd(self) -> float | None:
        return None if self.unit_price_usd is None else self.unit_price_usd * self.count

    def to_dict(self) -> dict:
        return {
            "item": self.item, "category": self.category, "count": self.count,
            "unit_power_w": self.unit_power_w, "power_kw": None if self.power_w is None else self.power_w / 1e3,
            "unit_price_usd": self.unit_price_usd, "price_usd": self.price_usd,
            "power_assumed": self.power_assumed, "price_assumed": self.price_assumed, "rule": self.rule,
        }


@dataclass(frozen=True)
class BillOfMaterials:
    cluster_summary: dict
    lines: tuple[BomLine, ...]
    power_kw: float  # systems + networks
    power_basis: str  # bottom-up | published domain power
    power_kw_bottom_up: float | None  # systems (compute + scale-up) bottom-up, None when not computable
    power_kw_systems: float
    power_kw_network: float
    cost_usd: float | None  # sum over lines with a price
    cost_complete: bool  # every priced category (devices included) had a price
    published: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> {computed, published, source}
    notes: tuple[str, ...] = ()

    def count(self, item: str) -> int:
        return sum(line.count for line in self.lines if line.item == item)

    def total(self, prefix: str, category: str | None = None) -> int:
        return sum(line.count for line in self.lines
                   if line.item.startswith(prefix) and (category is None or line.category == category))

    @property
    def optical_transceivers(self) -> int:
        return self.total("optical transceivers")

    def to_dict(self) -> dict:
        return {
            "cluster": self.cluster_summary,
            "lines": [line.to_dict() for line in self.lines],
            "totals": {
                "devices": self.count("accelerators"),
                "cpus": self.count("CPUs"),
                "optical_transceivers": self.optical_transceivers,
                "optical_transceivers_scaleup": self.total("optical transceivers", "scale-up"),
                "optical_transceivers_scaleout": self.total("optical transceivers", "scale-out"),
                "optical_transceivers_frontend": self.total("optical transceivers", "front-end"),
                "copper_cables": self.total("copper"),
                "power_kw": self.power_kw,
                "power_kw_systems": self.power_kw_systems,
                "power_kw_network": self.power_kw_network,
                "power_basis": self.power_basis,
                "power_kw_bottom_up": self.power_kw_bottom_up,
                "cost_usd": self.cost_usd,
                "cost_complete": self.cost_complete,
            },
            "published": self.published,
            "notes": list(self.notes),
        }


def _num(bom: dict, key: str) -> float | None:
    v = bom.get(key)
    return float(v) if isinstance(v, (int, float)) else None


def bill_of_materials(cluster: Cluster) -> BillOfMaterials:
    """Count every part of ``cluster`` (see the module docstring for the rules)."""
    sys_ = cluster.system
    acc = sys_.accelerator
    fab = cluster.fabric
    bom = dict(sys_.bom)
    n = cluster.num_devices
    systems = cluster.num_systems
    hosts = cluster.num_hosts
    lines: list[BomLine] = []
    notes: list[str] = []
    fa = fab.assumptions

    def add(item, category, count, power=None, price=None, power_assumed=False, price_assumed=False, rule=""):
        count = int(round(count))
        if count > 0:
            lines.append(BomLine(item, category, count, power, price, power_assumed, price_assumed, rule))

    # ---- compute
    add("accelerators", "compute", n, acc.tdp_w, sys_.price_usd_per_device, "tdp_w" in acc.assumptions,
        "price_usd_per_device" in sys_.assumptions, f"{cluster.domains} domain(s) x {cluster.devices_per_domain}")
    add("hosts (compute trays / servers)", "compute", hosts, sys_.host_power_w, None,
        "host_power_w" in sys_.assumptions, False, f"devices / {sys_.devices_per_host} per host")
    add("CPUs", "compute", hosts * sys_.cpus_per_host, rule=f"{sys_.cpus_per_host} per host")
    add("systems (servers / racks / supernodes)", "compute", systems, sys_.domain_overhead_power_w, None,
        "domain_overhead_power_w" in sys_.assumptions, rule=f"ceil(devices / {sys_.devices_per_domain})")
    for key, item in (("racks", "racks"), ("compute_racks", "compute racks"), ("communication_racks", "communication racks"),
                      ("switch_trays", "scale-up switch trays"), ("power_shelves", "power shelves")):
        v = _num(bom, key)
        if v:
            add(item, "compute" if "switch" not in item else "scale-up", systems * v, rule=f"{v:g} per system (bom.{key})")

    # ---- scale-up
    topo = sys_.scaleup_topology
    d_full = sys_.devices_per_domain
    links_per_dev = _num(bom, "scaleup_links_per_device")
    spans_hosts = d_full > sys_.devices_per_host
    add("scale-up switch chips", "scale-up", systems * sys_.scaleup_switches_per_domain,
        rule=f"{sys_.scaleup_switches_per_domain} per system ({sys_.scaleup.id})")
    up_optics_power = fab.transceiver_power_w
    if topo == "clos-2tier":
        g = int(bom.get("l1_group_devices", sys_.devices_per_host))
        if g > sys_.devices_per_host and links_per_dev:
            add("copper cables, scale-up device-L1", "scale-up", n * links_per_dev,
                rule=f"{links_per_dev:g} links per device, first tier in the same rack")
        if links_per_dev and d_full > g:
            optical_links = n * links_per_dev
            add("optical links, scale-up L1-L2", "scale-up", optical_links,
                rule=f"non-blocking: one uplink per device link ({links_per_dev:g} per device)")
            add("optical transceivers, scale-up", "scale-up", 2 * optical_links, up_optics_power, fab.transceiver_price_usd,
                True, True, "2 per optical link (one at each end)")
    elif spans_hosts and topo in ("switched", "torus-2d", "torus-3d"):
        per_dev = links_per_dev or (2 * (len(cluster.torus_shape) or 1))
        add("copper cables, scale-up", "scale-up", n * per_dev, rule=f"{per_dev:g} links per device (in-rack copper)")
    elif spans_hosts and topo == "full-mesh":
        h = sys_.devices_per_host
        pairs = d_full * (d_full - 1) // 2 - (d_full // h) * h * (h - 1) // 2
        add("copper cables, scale-up", "scale-up", systems * pairs, rule="one per device pair on different hosts")
    else:
        notes.append("scale-up links are board traces inside one host: no cables counted")

    # ---- scale-out
    so = cluster.scaleout
    if so is not None:
        add("NICs, scale-out", "scale-out", cluster.num_nics, None, fab.nic_price_usd,
            False, "nic_price_usd" in fa, f"{sys_.nics_per_host} per host (power counted in the host)")
        names = ("leaf", "spine", "core")
        for tier, count in enumerate(so.switches_per_tier):
            add(f"switches, scale-out {names[tier]}", "scale-out", count, fab.switch_power_w, fab.switch_price_usd,
                "switch_power_w" in fa, "switch_price_usd" in fa, f"radix {so.radix}, {so.kind}, {so.tiers} tier(s)")
        optical_links = 0
        for tier, count in enumerate(so.links_per_tier):
            label = ("NIC-leaf", "leaf-spine", "spine-core")[tier]
            copper = tier == 0 and so.kind == "fat-tree"
            if copper:
                add(f"copper cables (DAC), scale-out {label}", "scale-out", count, None, fab.cable_price_usd,
                    False, "cable_price_usd" in fa, "top-of-rack leaf: DAC")
            else:
                optical_links += count
                add(f"optical links, scale-out {label}", "scale-out", count, rule="optical between racks")
        add("optical transceivers, scale-out", "scale-out", 2 * optical_links, fab.transceiver_power_w,
            fab.transceiver_price_usd, "transceiver_power_w" in fa, "transceiver_price_usd" in fa,
            "2 per optical link (one at each end)")
    fe = cluster.frontend
    if fe is not None:
        add("NICs, front-end", "front-end", fe.endpoints, None, fab.nic_price_usd, False, True,
            f"{sys_.frontend_nics_per_host} per host (power counted in the host)")
        for tier, count in enumerate(fe.switches_per_tier):
            add(f"switches, front-end {('leaf', 'spine', 'core')[tier]}", "front-end", count, fab.switch_power_w,
                fab.switch_price_usd, True, True, "non-blocking fat tree, same radix as the compute fabric")
        links = fe.links_per_tier
        add("copper cables (DAC), front-end host-leaf", "front-end", links[0], None, fab.cable_price_usd, False, True,
            "top-of-rack leaf")
        if len(links) > 1:
            add("optical transceivers, front-end", "front-end", 2 * sum(links[1:]), fab.transceiver_power_w,
                fab.transceiver_price_usd, True, True, "2 per optical link")

    # ---- power: systems (compute + scale-up) and networks (scale-out + front-end) separately
    system_w = sum(ln.power_w or 0.0 for ln in lines if ln.category in ("compute", "scale-up"))
    network_kw = sum(ln.power_w or 0.0 for ln in lines if ln.category in ("scale-out", "front-end")) / 1e3
    missing_compute = acc.tdp_w is None or sys_.host_power_w is None
    published_domain_kw = _num(bom, "domain_power_kw")
    bottom: float | None = system_w / 1e3
    if missing_compute and published_domain_kw:
        system_kw = systems * published_domain_kw * min(1.0, n / (systems * d_full))
        basis = "published system power (bom.domain_power_kw) + scale-out/front-end switches and optics"
        notes.append(f"{acc.id} TDP or host power not published: used the published {published_domain_kw:g} kW "
                     "per system (it already includes the system's own optics and NICs)")
        bottom = None
    else:
        system_kw, basis = system_w / 1e3, "bottom-up"
        if missing_compute:
            notes.append("accelerator TDP or host power missing and no published system power: power is a lower bound")
    power_kw = system_kw + network_kw

    # ---- cost
    priced = [ln.price_usd for ln in lines if ln.price_usd is not None]
    cost = sum(priced) if priced else None
    cost_complete = sys_.price_usd_per_device is not None
    if not cost_complete:
        notes.append(PARTIAL_COST_NOTE)

    # ---- comparison with published figures (scaled to the number of systems)
    published: dict[str, dict[str, Any]] = {}

    def compare(name, computed, key, scale=systems):
        v = _num(bom, key)
        if v is not None:
            published[name] = {"computed": computed, "published": v * scale,
                               "source": sys_.sources.get(f"bom.{key}", ""),
                               "assumed": sys_.assumptions.get(f"bom.{key}")}

    per_dev_bidir_tbps = 2 * sys_.scaleup_bw_per_device / 1e12
    compare("aggregate_scaleup_tbps", per_dev_bidir_tbps * d_full * systems, "aggregate_scaleup_tbps")
    if bottom is not None:
        compare("power_kw_per_system", bottom / systems, "domain_power_kw", 1)
    up_optics = sum(ln.count for ln in lines if ln.item == "optical transceivers, scale-up")
    out_optics = sum(ln.count for ln in lines if ln.item == "optical transceivers, scale-out")
    compare("scaleup_optics_per_device", up_optics / n, "scaleup_optics_per_device", 1)
    compare("scaleout_optics_per_device", out_optics / n, "scaleout_optics_per_device", 1)
    compare("optical_transceivers", up_optics + out_optics, "optical_transceivers")
    compare("compute_trays", hosts, "compute_trays")

    return BillOfMaterials(
        cluster_summary={"system": sys_.id, "fabric": fab.id, "topology": cluster.topology, "domains": cluster.domains,
                         "domain_size": cluster.devices_per_domain, "devices": n, "hosts": hosts, "systems": systems,
                         "tiers": so.tiers if so else 0},
        lines=tuple(lines),
        power_kw=power_kw,
        power_kw_systems=system_kw,
        power_kw_network=network_kw,
        power_basis=basis,
        power_kw_bottom_up=bottom,
        cost_usd=cost,
        cost_complete=cost_complete,
        published=published,
        notes=tuple(notes),
    )


__all__ = ["BillOfMaterials", "BomLine", "bill_of_materials"]

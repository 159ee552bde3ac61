"""Component counts of a design: the interface between the bill of materials and the failure,
power and cost models.

The counting itself belongs to ``clustertwin.cluster.bom`` (the BOM owner); this module only
defines the shape the reliability models consume and adapts whatever the BOM returns to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True, kw_only=True)
class ComponentCounts:
    """How many of each component class a design holds (floats: fractional shares are allowed)."""

    accelerators: float
    hosts: float
    cpus: float
    domains: float
    devices_per_domain: int
    devices_per_host: int
    scaleup_switches: float = 0.0  # switch chips / trays of the scale-up fabric
    scaleout_switches: float = 0.0
    nics: float = 0.0  # backend (scale-out) NICs
    transceivers: float = 0.0  # optical modules, scale-up and scale-out
    scaleup_transceivers: float = 0.0  # the part of ``transceivers`` inside the scale-up domain (priced with the system)
    cables: float = 0.0  # optical links and copper cables of the scale-up and scale-out fabrics
    scaleup_cables: float = 0.0  # the part of ``cables`` inside the scale-up domain (priced with the system)
    frontend_switches: float = 0.0  # front-end / storage network (power and cost only, not failures)
    frontend_nics: float = 0.0
    frontend_transceivers: float = 0.0
    frontend_cables: float = 0.0
    scaleup_leaves_host: bool = False  # scale-up fabric is a separate box (NVL72 trays, UB switches)
    source: str = ""
    notes: tuple[str, ...] = field(default=())
    bom_power_kw: float | None = None  # the BOM's own power total (TDP-based), for reference
    bom_power_basis: str = ""

    def exposure(self) -> dict[str, float]:
        """Counts keyed like the failure model's ``exposure`` classes.

        Scale-up switches count as switches only where the scale-up fabric leaves the host (NVL72
        switch trays, CloudMatrix UB switches); on 8-GPU baseboards the NVSwitches are part of the
        GPU board, as in the Llama 3 reference exposure.
        """
        switches = self.scaleout_switches + (self.scaleup_switches if self.scaleup_leaves_host else 0.0)
        return {
            "accelerator": float(self.accelerators),
            "host": float(self.hosts),
            "nic": float(self.nics),
            "switch": float(switches),
            "transceiver": float(self.transceivers),
            "cable": float(self.cables),
            "domain": float(self.domains),
            "job": 1.0,
        }

    @property
    def replacement_unit(self) -> str:
        """What a job must swap when a device or host fails: the whole scale-up domain when the
        domain spans hosts (the plan keeps TP/EP inside it), else the host."""
        return "domain" if self.devices_per_domain > self.devices_per_host else "host"

    @property
    def replacement_unit_devices(self) -> int:
        return self.devices_per_domain if self.replacement_unit == "domain" else self.devices_per_host

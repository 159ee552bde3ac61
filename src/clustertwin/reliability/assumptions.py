"""The one table of power and cost assumptions, and the one way each is worded (issue #19).

Every command that prices or powers a design (``power``, ``compare``, ``goodput``-based comparisons,
``serve plan``, sweeps through ``api.device_price_usd``, ``report``) takes these numbers from here:
the value (the user's, else the catalog's, else ``data/defaults.yaml``) and, when the value is an
assumption, its line. A line is ``"[subject ]label = value unit: why"``, so the same assumption reads
the same in every command's output and two commands can never state different values for it
(``tests/reliability/test_assumption_lines.py`` compares them across commands).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..hardware import SystemSpec
from .params import Param, Params

HOURS_PER_YEAR = 8760.0  # capex per hour = capex / (amortisation years x 8760 h): 24x7 operation

# key -> (label, unit); the keys are those of data/defaults.yaml (power.*, cost.*) and of the catalog
LABELS: dict[str, tuple[str, str]] = {
    "utilization": ("accelerator utilisation", "of the TDP dynamic range"),
    "pue": ("PUE", ""),
    "accelerator_idle_fraction": ("accelerator idle power", "x TDP"),
    "tdp_w": ("TDP", "W"),
    "cpu_w": ("CPU power", "W"),
    "host_other_w": ("host power besides CPUs and NICs", "W"),
    "host_power_w": ("host power", "W"),
    "domain_overhead_power_w": ("scale-up domain overhead power", "W"),
    "scaleup_switch_w": ("scale-up switch power", "W"),
    "switch_power_w": ("switch power", "W"),
    "transceiver_power_w": ("optical transceiver power", "W"),
    "nic_power_w": ("NIC power", "W"),
    "energy_usd_per_kwh": ("energy price", "USD/kWh"),
    "amortization_years": ("capex amortisation", "years"),
    "price_usd_per_device": ("price per accelerator (all-in system share)", "USD"),
    "switch_price_usd": ("switch price", "USD"),
    "transceiver_price_usd": ("optical transceiver price", "USD"),
    "cable_price_usd": ("cable price", "USD"),
    "nic_price_usd": ("NIC price", "USD"),
}
# catalog attribute -> the defaults.yaml key used when the catalog has no value
FABRIC_DEFAULTS = {"switch_power_w": ("power", "scaleout_switch_w"), "transceiver_power_w": ("power", "transceiver_w"),
                   "nic_power_w": ("power", "nic_w"), "switch_price_usd": ("cost", "scaleout_switch_usd"),
                   "transceiver_price_usd": ("cost", "transceiver_usd"), "cable_price_usd": ("cost", "cable_usd"),
                   "nic_price_usd": ("cost", "nic_usd")}


def assumption_line(key: str, value: float, why: str, subject: str | None = None) -> str:
    """The wording of one assumption (the only place it is worded)."""
    label, unit = LABELS[key]
    head = f"{subject} {label}" if subject else label
    return f"{head} = {value:,.6g}{' ' + unit if unit else ''}: {why}"


@dataclass(frozen=True, slots=True)
class Value:
    """A number a power or cost figure uses, and its assumption line (None: given or sourced)."""

    value: float
    line: str | None = None


def _param(key: str, p: Param, given: float | None = None, subject: str | None = None) -> Value:
    if given is not None:
        return Value(float(given))
    return Value(float(p.value), assumption_line(key, p.value, p.assumed, subject) if p.assumed else None)


def default(params: Params, section: str, key: str, *, given: float | None = None, label_key: str | None = None,
            subject: str | None = None) -> Value:
    """A ``data/defaults.yaml`` number (``section`` power | cost), or the user's ``given`` value."""
    table = params.power if section == "power" else params.cost
    return _param(label_key or key, table[key], given, subject)


def catalog_or_default(obj: Any, attr: str, params: Params) -> Value:
    """A catalog attribute of a fabric (or system / accelerator), else its ``data/defaults.yaml`` value."""
    v = getattr(obj, attr, None) if obj is not None else None
    if v:
        why = getattr(obj, "assumptions", {}).get(attr)
        return Value(float(v), assumption_line(attr, float(v), why, obj.id) if why else None)
    section, key = FABRIC_DEFAULTS[attr]
    return default(params, section, key, label_key=attr)


def device_price(system: SystemSpec, params: Params, given: float | None = None) -> Value:
    """USD per accelerator, all-in system share: the user's, the catalog's, the defaults' for this
    system, else the defaults' generic figure."""
    if given is not None:
        return Value(float(given))
    if system.price_usd_per_device is not None:
        why = system.assumptions.get("price_usd_per_device")
        v = float(system.price_usd_per_device)
        return Value(v, assumption_line("price_usd_per_device", v, why, system.id) if why else None)
    if system.id in params.price_by_system:
        return _param("price_usd_per_device", params.price_by_system[system.id], subject=system.id)
    return default(params, "cost", "default_usd_per_device", label_key="price_usd_per_device", subject=system.id)


@dataclass(frozen=True, slots=True, kw_only=True)
class CostBasis:
    """The operating assumptions of a design's cost per hour."""

    utilization: Value
    pue: Value
    energy_usd_per_kwh: Value
    amortization_years: Value
    price_usd_per_device: Value

    def lines(self) -> list[str]:
        return [v.line for v in (self.price_usd_per_device, self.utilization, self.pue, self.energy_usd_per_kwh,
                                 self.amortization_years) if v.line]


def cost_basis(system: SystemSpec, params: Params, *, utilization: float | None = None, pue: float | None = None,
               price_kwh: float | None = None, years: float | None = None,
               price_per_device: float | None = None) -> CostBasis:
    return CostBasis(
        utilization=default(params, "power", "utilization", given=utilization),
        pue=default(params, "power", "pue", given=pue),
        energy_usd_per_kwh=default(params, "cost", "energy_usd_per_kwh", given=price_kwh),
        amortization_years=default(params, "cost", "amortization_years", given=years),
        price_usd_per_device=device_price(system, params, price_per_device),
    )


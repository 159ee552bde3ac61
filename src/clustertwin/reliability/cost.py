"""Capital and operating cost of a design, and the derived efficiency figures.

    capex  = N_acc * price_per_device (all-in system share: accelerator, CPUs, memory, scale-up
             switches, NICs, scale-up optics and cables) + N_switch * switch_price
             + N_scaleout_transceiver * transceiver_price + N_scaleout_cable * cable_price + front-end network
    cost/h = capex / (amortisation_years * 8760 h) + P_facility[kW] * energy price [USD/kWh]

Derived (with tokens/s from the step-time estimate and the goodput ETTR):
    tokens per MWh = tokens/h * ETTR / (P_facility [MW] * 1 h)
    USD per million tokens = cost/h / (tokens/h * ETTR / 1e6)
    FLOP per watt = peak (or achieved) FLOP/s / P_IT
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import InputError
from ..hardware import ScaleOutTech, SystemSpec
from .counts import ComponentCounts
from .params import Params
from .power import PowerResult

HOURS_PER_YEAR = 8760.0


@dataclass(frozen=True, slots=True, kw_only=True)
class CostResult:
    capex_usd: float
    capex_by_component_usd: dict[str, float]
    energy_usd_per_kwh: float
    amortization_years: float
    capex_usd_per_hour: float
    energy_usd_per_hour: float
    assumptions: tuple[str, ...] = field(default=())

    @property
    def usd_per_hour(self) -> float:
        return self.capex_usd_per_hour + self.energy_usd_per_hour

    def to_dict(self) -> dict:
        return {
            "capex_usd": self.capex_usd,
            "capex_by_component_usd": self.capex_by_component_usd,
            "energy_usd_per_kwh": self.energy_usd_per_kwh,
            "amortization_years": self.amortization_years,
            "usd_per_hour": self.usd_per_hour,
            "capex_usd_per_hour": self.capex_usd_per_hour,
            "energy_usd_per_hour": self.energy_usd_per_hour,
            "assumptions": list(self.assumptions),
        }


def check_cost_inputs(price_kwh: float | None, years: float | None = None) -> None:
    if price_kwh is not None and not price_kwh > 0:
        raise InputError(f"--price-kwh must be positive, got {price_kwh}", hint="e.g. --price-kwh 0.08 (USD per kWh)")
    if years is not None and not years > 0:
        raise InputError(f"amortisation years must be positive, got {years}")


def cost(system: SystemSpec, fabric: ScaleOutTech | None, counts: ComponentCounts, pw: PowerResult, params: Params, *,
         price_kwh: float | None = None, price_per_device: float | None = None, years: float | None = None) -> CostResult:
    check_cost_inputs(price_kwh, years)
    if price_per_device is not None and not price_per_device > 0:
        raise InputError(f"price per accelerator must be positive, got {price_per_device}")
    c = params.cost
    notes: list[str] = []

    def pick(value, key, label, table=c):
        if value is not None:
            return float(value)
        d = table[key]
        if d.assumed:
            notes.append(f"{label} = {d.value:g}: {d.assumed}")
        return d.value

    if price_per_device is None and system.price_usd_per_device is not None:
        price_per_device = system.price_usd_per_device
        if "price_usd_per_device" in system.assumptions:
            notes.append(f"{system.id} price per device = {price_per_device:g}: {system.assumptions['price_usd_per_device']}")
    if price_per_device is None:
        if system.id in params.price_by_system:
            price_per_device = pick(None, system.id, f"{system.id} price per accelerator (USD, all-in system share)", params.price_by_system)
        else:
            price_per_device = pick(None, "default_usd_per_device", "price per accelerator (USD)")
    def fab(attr, key, label):
        v = getattr(fabric, attr, None) if fabric is not None else None
        if v:
            if fabric is not None and attr in fabric.assumptions:
                notes.append(f"{fabric.id} {attr} = {v:g}: {fabric.assumptions[attr]}")
            return float(v)
        return pick(None, key, label)

    by = {
        "systems": counts.accelerators * price_per_device,
        "scaleout_switches": counts.scaleout_switches * fab("switch_price_usd", "scaleout_switch_usd", "switch price (USD)"),
        "transceivers": max(counts.transceivers - counts.scaleup_transceivers, 0.0)
        * fab("transceiver_price_usd", "transceiver_usd", "transceiver price (USD)"),
        "cables": max(counts.cables - counts.scaleup_cables, 0.0) * fab("cable_price_usd", "cable_usd", "cable price (USD)"),
    }
    if counts.frontend_switches or counts.frontend_transceivers or counts.frontend_cables:
        by["frontend_network"] = (counts.frontend_switches * fab("switch_price_usd", "scaleout_switch_usd", "switch price (USD)")
                                  + counts.frontend_transceivers * fab("transceiver_price_usd", "transceiver_usd", "transceiver price (USD)")
                                  + counts.frontend_cables * fab("cable_price_usd", "cable_usd", "cable price (USD)")
                                  + counts.frontend_nics * fab("nic_price_usd", "nic_usd", "NIC price (USD)"))
    capex = float(sum(by.values()))
    kwh = pick(price_kwh, "energy_usd_per_kwh", "energy price (USD/kWh)")
    yrs = pick(years, "amortization_years", "amortisation (years)")
    return CostResult(capex_usd=capex, capex_by_component_usd=by, energy_usd_per_kwh=kwh, amortization_years=yrs,
                      capex_usd_per_hour=capex / (yrs * HOURS_PER_YEAR), energy_usd_per_hour=pw.facility_w / 1e3 * kwh,
                      assumptions=tuple(notes))


def efficiency(*, tokens_per_s: float | None, ettr: float | None, pw: PowerResult, cst: CostResult,
               peak_flops: float, achieved_flops: float | None = None) -> dict:
    """Tokens per MWh, USD per million tokens, FLOP per watt (peak and, if known, achieved)."""
    out = {"peak_gflops_per_watt": peak_flops / pw.it_w / 1e9 if pw.it_w else None,
           "achieved_gflops_per_watt": (achieved_flops / pw.it_w / 1e9) if achieved_flops and pw.it_w else None,
           "tokens_per_mwh": None, "usd_per_million_tokens": None, "tokens_per_usd": None}
    if tokens_per_s and ettr is not None:
        tok_h = tokens_per_s * ettr * 3600.0
        out["tokens_per_mwh"] = tok_h / (pw.facility_w / 1e6) if pw.facility_w else None
        out["usd_per_million_tokens"] = cst.usd_per_hour / (tok_h / 1e6) if tok_h else None
        out["tokens_per_usd"] = tok_h / cst.usd_per_hour if cst.usd_per_hour else None
    return out

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
from .assumptions import HOURS_PER_YEAR, Value, catalog_or_default, cost_basis
from .counts import ComponentCounts
from .params import Params
from .power import PowerResult


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


MAX_PRICE_KWH = 10.0  # sanity bound, USD/kWh: retail peaks are below 1


def check_cost_inputs(price_kwh: float | None, years: float | None = None) -> None:
    if price_kwh is not None and not 0 < price_kwh <= MAX_PRICE_KWH:
        raise InputError(f"--price-kwh must be in (0, {MAX_PRICE_KWH:g}] USD per kWh, got {price_kwh}",
                         hint="e.g. --price-kwh 0.08 (US industrial average)")
    if years is not None and not years > 0:
        raise InputError(f"amortisation years must be positive, got {years}")


def cost(system: SystemSpec, fabric: ScaleOutTech | None, counts: ComponentCounts, pw: PowerResult, params: Params, *,
         price_kwh: float | None = None, price_per_device: float | None = None, years: float | None = None) -> CostResult:
    check_cost_inputs(price_kwh, years)
    if price_per_device is not None and not price_per_device > 0:
        raise InputError(f"price per accelerator must be positive, got {price_per_device}")
    notes: list[str] = []

    def use(v: Value) -> float:  # the value, and its line when it is an assumption
        if v.line and v.line not in notes:
            notes.append(v.line)
        return v.value

    basis = cost_basis(system, params, price_kwh=price_kwh, years=years, price_per_device=price_per_device)
    price_per_device = use(basis.price_usd_per_device)

    def fab(attr: str) -> float:  # catalog fabric figure, else the defaults' (with its line)
        return use(catalog_or_default(fabric, attr, params))

    by = {
        "systems": counts.accelerators * price_per_device,
        "scaleout_switches": counts.scaleout_switches * fab("switch_price_usd"),
        "transceivers": max(counts.transceivers - counts.scaleup_transceivers, 0.0)
        * fab("transceiver_price_usd"),
        "cables": max(counts.cables - counts.scaleup_cables, 0.0) * fab("cable_price_usd"),
    }
    if counts.frontend_switches or counts.frontend_transceivers or counts.frontend_cables:
        by["frontend_network"] = (counts.frontend_switches * fab("switch_price_usd")
                                  + counts.frontend_transceivers * fab("transceiver_price_usd")
                                  + counts.frontend_cables * fab("cable_price_usd")
                                  + counts.frontend_nics * fab("nic_price_usd"))
    capex = float(sum(by.values()))
    kwh = use(basis.energy_usd_per_kwh)
    yrs = use(basis.amortization_years)
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

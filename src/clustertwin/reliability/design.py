"""Designs to compare: ``SYSTEM[xDOMAINS][@FABRIC]`` on the command line, or a scenario YAML file.

``gb200-nvl72x8@ib-ndr-400g`` = 8 GB200 NVL72 domains on InfiniBand NDR; ``cloudmatrix-384`` = one
CloudMatrix 384 on its default scale-out fabric; ``hgx-h100x2048`` = 2,048 HGX H100 servers.

Component counts come from the bill of materials (``clustertwin.cluster.bom``) when it is
available; otherwise from the system spec (devices, hosts, CPUs, scale-up switches, NICs) with the
scale-out network scaled per NIC from the failure model's reference fabric (marked in the output).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..catalog import Catalog
from ..errors import InputError, UnknownNameError
from ..hardware import ScaleOutTech, SystemSpec
from ..userfiles import is_file, read_yaml
from .counts import ComponentCounts
from .params import Params

_COUNT_RE = re.compile(r"^(?P<sys>.+?)x(?P<n>[0-9]+)$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Design:
    name: str
    system: SystemSpec
    domains: int
    fabric: ScaleOutTech | None
    counts: ComponentCounts
    origin: str  # "command line" or the file path
    model: str | None = None

    @property
    def num_accelerators(self) -> int:
        return self.domains * self.system.devices_per_domain


def _fabric(cat: Catalog, fid: str | None, system: SystemSpec) -> ScaleOutTech | None:
    fid = fid or system.default_scaleout
    if fid in cat.scaleout:
        return cat.scaleout[fid]
    if fid in cat.scaleup:
        raise InputError(f"{fid!r} is a scale-up fabric; after '@' write a scale-out fabric",
                         hint=f"scale-out fabrics: {', '.join(sorted(cat.scaleout))}")
    raise UnknownNameError("scale-out fabric", fid, cat.scaleout, hint="list them with `clustertwin catalog list fabrics`")


def parse_design(text: str, cat: Catalog, params: Params | None = None, *, gpus: int | None = None) -> Design:
    """Parse ``SYSTEM[xDOMAINS][@FABRIC]`` or a scenario YAML path into a :class:`Design`."""
    text = str(text).strip()
    if not text:
        raise InputError("empty design", hint="write SYSTEM[xDOMAINS][@FABRIC], e.g. gb200-nvl72x8@ib-ndr-400g")
    if text.endswith((".yaml", ".yml")) or is_file(text):
        from ..errors import in_file

        with in_file(f"design file {text!r}"):
            return _from_file(Path(text), cat, params)
    base, at, fab = text.partition("@")
    if at and not fab:
        raise InputError(f"design {text!r} ends with '@' but names no fabric",
                         hint=f"e.g. {base}@{next(iter(sorted(cat.scaleout)), 'ib-ndr-400g')}")
    n: int | None = None
    sid = base
    if base not in cat.systems:
        m = _COUNT_RE.match(base)
        if m and m.group("sys") in cat.systems:
            sid, n = m.group("sys"), int(m.group("n"))
        elif m:
            raise UnknownNameError("system", m.group("sys"), cat.systems,
                                   hint="write SYSTEM[xDOMAINS][@FABRIC]; list systems with `clustertwin catalog list systems`")
        else:
            raise UnknownNameError("system", base, cat.systems,
                                   hint="write SYSTEM[xDOMAINS][@FABRIC]; list systems with `clustertwin catalog list systems`")
    system = cat.systems[sid]
    if n is not None and n < 1:
        raise InputError(f"design {text!r}: the number of domains must be at least 1, got {n}")
    if n is None:
        n = domains_for(system, gpus) if gpus else 1
    return make_design(text, system, n, _fabric(cat, fab or None, system), params, origin="command line")


def domains_for(system: SystemSpec, gpus: int) -> int:
    if gpus < 1:
        raise InputError(f"--gpus must be at least 1, got {gpus}")
    per = system.devices_per_domain
    if gpus % per:
        raise InputError(f"{gpus} accelerators is not a whole number of {system.id} domains ({per} each)",
                         hint=f"use a multiple of {per}, e.g. {max(per, gpus // per * per)}")
    return gpus // per


def _from_file(path: Path, cat: Catalog, params: Params | None) -> Design:
    data = read_yaml(path, "design file", hint="give SYSTEM[xDOMAINS][@FABRIC] or the path of a scenario YAML file",
                     shape="at least `system`")
    c: dict[str, Any] = data.get("cluster", data) if isinstance(data.get("cluster", data), dict) else data
    sid = c.get("system")
    if not sid:
        raise InputError(f"design file {str(path)!r} has no `system`", hint="add e.g. `system: gb200-nvl72` (or under `cluster:`)")
    system = cat.system(str(sid))
    from ..schemas import positive_count

    known = {"system", "domains", "gpus", "fabric", "name", "model", "cluster", "workload", "description",
             "source", "plan", "topology", "oversubscription"}
    for mapping in (data, c):
        unknown = sorted(set(mapping) - known)
        if unknown:
            from ..errors import closest

            raise InputError(f"design file {str(path)!r}: unknown field {unknown[0]!r}",
                             suggestions=closest(unknown[0], known), hint="fields: " + ", ".join(sorted(known)))
    if c.get("domains") is not None:
        n = positive_count(c["domains"], f"design file {str(path)!r}: domains")
    elif c.get("gpus") is not None:
        n = domains_for(system, positive_count(c["gpus"], f"design file {str(path)!r}: gpus"))
    else:
        n = 1
    fid = c.get("fabric")
    if fid is not None and not isinstance(fid, str):
        raise InputError(f"design file {str(path)!r}: fabric must be a fabric id (text), got {fid!r}",
                         hint="e.g. `fabric: ib-ndr-400g`; list them with `clustertwin catalog list fabrics`")
    fabric = _fabric(cat, fid, system)
    model = data.get("model") if isinstance(data.get("model"), str) else (data.get("workload") or {}).get("model") if isinstance(data.get("workload"), dict) else None
    name = str(data.get("name") or path.stem)
    return make_design(name, system, n, fabric, params, origin=str(path), model=model)


def make_design(name: str, system: SystemSpec, domains: int, fabric: ScaleOutTech | None, params: Params | None,
                *, origin: str = "api", model: str | None = None) -> Design:
    counts = component_counts(system, domains, fabric, params)
    return Design(name=name, system=system, domains=domains, fabric=fabric, counts=counts, origin=origin, model=model)


def component_counts(system: SystemSpec, domains: int, fabric: ScaleOutTech | None, params: Params | None) -> ComponentCounts:
    """Counts from the BOM when ``clustertwin.cluster.bom`` is importable, else from the spec."""
    bom = _bom_counts(system, domains, fabric)
    if bom is not None:
        return bom
    return _spec_counts(system, domains, params)


def _bom_counts(system: SystemSpec, domains: int, fabric: ScaleOutTech | None) -> ComponentCounts | None:
    try:
        from ..cluster import bom as bom_mod  # noqa: F401  (owned by the cluster area)
    except ImportError:
        return None
    from .bom_adapter import counts_from_bom

    return counts_from_bom(system, domains, fabric)  # InputError from the BOM (impossible fabric) propagates


def _spec_counts(system: SystemSpec, domains: int, params: Params | None) -> ComponentCounts:
    acc = domains * system.devices_per_domain
    hosts = acc / system.devices_per_host
    nics = hosts * system.nics_per_host
    notes = ["no bill of materials available (clustertwin.cluster.bom missing): counts from the system spec"]
    sw = tx = cab = 0.0
    if params is not None and nics > 0:
        ref = params.exposure
        per_nic = nics / ref["nic"].value
        sw, tx, cab = ref["switch"].value * per_nic, ref["transceiver"].value * per_nic, ref["cable"].value * per_nic
        notes.append("scale-out switches, transceivers and cables scaled per NIC from the failure model's reference fabric")
    up_tx = 0.0
    bom = dict(system.bom or {})
    published_tx = bom.get("optical_transceivers")
    if isinstance(published_tx, (int, float)):
        tx = float(published_tx) * domains
        notes.append(f"transceivers: published count {published_tx:g} per {system.id} domain")
        if isinstance(bom.get("scaleup_optics_per_device"), (int, float)):
            up_tx = min(tx, float(bom["scaleup_optics_per_device"]) * acc)
    return ComponentCounts(
        accelerators=acc, hosts=hosts, cpus=hosts * system.cpus_per_host, domains=domains,
        devices_per_domain=system.devices_per_domain, devices_per_host=system.devices_per_host,
        scaleup_switches=domains * system.scaleup_switches_per_domain, scaleout_switches=sw, nics=nics,
        transceivers=tx, scaleup_transceivers=up_tx, cables=cab, scaleup_leaves_host=system.devices_per_domain > system.devices_per_host,
        source="system spec (no BOM)", notes=tuple(notes),
    )

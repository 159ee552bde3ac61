"""Names published runs print that the catalog spells differently (catalog/names.yaml).

``clustertwin validate`` (and ``plan --from-row``) read a row's ``gpu``, ``system``, ``scale_out`` and
``precision`` columns through these functions. A catalog id passes unchanged with no note; any other name
is resolved by a listed alias, then by a documented rule (chip family and memory size; the canonical
system of the accelerator with the row's NIC columns), and the returned note says what was assumed. A
name no rule can place fails with a clear reason (``InputError``), e.g. a TPU row ("no TPU model").
"""

from __future__ import annotations

import difflib
import re
from dataclasses import replace
from functools import lru_cache
from typing import Any

from ..errors import InputError, UnknownNameError


@lru_cache(maxsize=1)
def names_table() -> dict[str, Any]:
    from importlib import resources

    import yaml

    text = (resources.files("clustertwin.catalog") / "names.yaml").read_text(encoding="utf-8")
    table = yaml.safe_load(text)
    sys_alias: dict[str, str] = {}
    for key, entry in (table.get("systems") or {}).items():
        for a in (key, *(entry.get("aliases") or ())):
            sys_alias[normalize(str(a))] = key
    table["_system_alias"] = sys_alias
    return table


_VENDOR_PREFIX = re.compile(r"^(nvidia|amd|tesla|instinct|huawei|intel|google|aws|baidu)-")


def normalize(name: str) -> str:
    """Lower case, spaces / underscores / slashes as '-', vendor prefixes dropped ("NVIDIA H100_SXM" ->
    "h100-sxm")."""
    t = re.sub(r"[\s_/]+", "-", (name or "").strip().lower()).strip("-")
    prev = None
    while prev != t:
        prev, t = t, _VENDOR_PREFIX.sub("", t)
    return t


# ------------------------------------------------------------------------------------------ accelerators
def unsupported_accelerator(name: str) -> str:
    """The reason a family without a model is refused ("" if the name is not such a family)."""
    n = normalize(name)
    for entry in names_table().get("unsupported_accelerators") or ():
        if re.search(entry["pattern"], n):
            return str(entry["reason"])
    return ""


def resolve_accelerator(name: str, catalog) -> tuple[str, str]:
    """(catalog accelerator id, note) for a row's ``gpu`` value; the note is "" for a catalog id."""
    raw = (name or "").strip()
    if raw in catalog.accelerators:
        return raw, ""
    n = normalize(raw)
    if n in catalog.accelerators:
        return n, ""
    why = unsupported_accelerator(n)
    if why:
        raise InputError(f"gpu {raw!r}: {why}", hint="a row of this accelerator cannot be modelled")
    table = names_table()
    alias = (table.get("accelerators") or {}).get(n)
    if alias and alias in catalog.accelerators:
        extra = (table.get("accelerator_notes") or {}).get(n, "")
        return alias, f"gpu {raw!r} is not a catalog id: modelled as {alias!r}" + (f" ({extra})" if extra else "")
    acc = _by_family(n, catalog)
    if acc:
        return acc
    raise UnknownNameError("accelerator", raw, catalog.accelerators,
                           hint="use a catalog accelerator id (`clustertwin catalog list accelerators`) or add "
                                "the chip with a user catalog (--catalog)")


def _by_family(n: str, catalog) -> tuple[str, str] | None:
    """Chip family (leading letters+digits: h100, a100, mi300x, gb200) and memory size ("80gb") of a name
    that is no alias: the catalog part of that family with the closest memory, SXM/OAM unless the name says
    pcie / nvl."""
    m = re.match(r"([a-z]+\d+[a-z]?)", n)
    if not m:
        return None
    fam = m.group(1)
    cands = [a for a in catalog.accelerators if a == fam or a.startswith(fam + "-")]
    if not cands:
        return None
    form = next((f for f in ("pcie", "nvl") if re.search(rf"\b{f}", n.replace("-", " "))), "")
    formed = [a for a in cands if form and form in a]
    plain = [a for a in cands if not any(f in a for f in ("pcie", "nvl"))] or cands
    pool = formed or plain
    mem_m = re.search(r"(\d+)\s*g(?:b|ib)?\b", n.replace("-", " "))
    mem = float(mem_m.group(1)) if mem_m else None
    if mem:
        best = min(pool, key=lambda a: (abs(catalog.accelerators[a].hbm_bytes / 1e9 - mem), pool.index(a)))
    else:
        best = pool[0]
    what = f"chip family {fam}" + (f", {mem:g} GB" if mem else "")
    note = f"gpu {n!r} is not a catalog id: modelled as {best!r} ({what})"
    if form and not formed:
        note += f"; no {form.upper()} variant in the catalog, the SXM/OAM part's peaks and bandwidths are used"
    return best, note


# ------------------------------------------------------------------------------------------ precision
def resolve_dtype(name: str, known: tuple[str, ...]) -> tuple[str, str]:
    """(dtype, note) for a row's ``precision`` value (blank = bf16, no note); ``known``: the dtypes the
    caller runs (workload.plan.DTYPES for a training plan)."""
    raw = (name or "").strip()
    if not raw:
        return "bf16", ""
    if raw in known:
        return raw, ""
    n = normalize(raw)
    if n in known:
        return n, ""
    table = names_table()
    alias = (table.get("dtypes") or {}).get(n)
    if alias:
        extra = (table.get("dtype_notes") or {}).get(n, "")
        return alias, f"precision {raw!r} modelled as {alias}" + (f" ({extra})" if extra else "")
    why = (table.get("unsupported_dtypes") or {}).get(n)
    if why:
        raise InputError(f"precision {raw!r}: {why}")
    head = re.sub(r"\s*\(.*$", "", raw).strip()  # "fp8 (tensorwise)", "bf16 (mixed)": the dtype before the detail
    if head and head != raw:
        dt, _ = resolve_dtype(head, known)
        return dt, f"precision {raw!r} modelled as {dt} (the detail in brackets is not modelled)"
    raise UnknownNameError("dtype", raw, known, hint="use " + ", ".join(known) + " (or a spelling in catalog/names.yaml)")


# ------------------------------------------------------------------------------------------ systems
def system_alias(name: str) -> dict[str, Any] | None:
    """The names.yaml entry (with its key as ``id``) for a published system name, or None."""
    table = names_table()
    key = table["_system_alias"].get(normalize(name))
    if key is None:
        return None
    return dict(table["systems"][key], id=key)


def canonical_system(acc: str, per_node: int, catalog) -> str | None:
    """The catalog system a row of accelerator ``acc`` is modelled with when its system is unknown:
    names.yaml ``canonical_systems``, else the first catalog system of that accelerator (one whose host
    has ``per_node`` devices first)."""
    pinned = (names_table().get("canonical_systems") or {}).get(acc)
    if pinned and pinned in catalog.systems:
        return pinned
    same = [s for s in catalog.systems.values() if s.accelerator.id == acc]
    if not same:
        return None
    return min(same, key=lambda s: (bool(per_node) and s.devices_per_host != per_node, list(catalog.systems).index(s.id))).id


def resolve_system(name: str, acc: str, per_node: int, catalog) -> tuple[str, dict[str, Any], str]:
    """(catalog system id, the alias's defaults {gpu, scale_out, nics_per_node, nic_gbps}, note) for a
    row's ``system`` value. ``acc``: the row's (resolved) accelerator id or ""."""
    raw = (name or "").strip()
    if raw in catalog.systems:
        return raw, {}, ""
    if not raw:
        canon = canonical_system(acc, per_node, catalog) if acc else None
        if canon is None:
            if acc:
                raise InputError(f"the system column is blank and no catalog system has gpu {acc!r}",
                                 hint="fill the system column with a catalog system id (`clustertwin catalog list systems`)")
            raise InputError("the system column is blank and so is the gpu column",
                             hint="fill the system (a catalog system id) or the gpu column")
        return canon, {}, f"system blank: modelled as {canon!r}, the catalog's system for gpu {acc}"
    n = normalize(raw)
    if n in catalog.systems:
        return n, {}, ""
    entry = system_alias(n)
    if entry and entry["system"] in catalog.systems:
        defaults: dict[str, Any] = {k: entry[k] for k in ("gpu", "scale_out", "nics_per_node", "nic_gbps")
                                    if k in entry}
        note = f"system {raw!r} is not in the catalog: modelled as {entry['system']!r} ({entry['source']})"
        if entry.get("note"):
            note += f"; {entry['note']}"
        return str(entry["system"]), defaults, note
    # a spelling of a catalog system of the same accelerator (e.g. dgx-h100 for hgx-h100)
    ratios = {s.id: difflib.SequenceMatcher(None, n, s.id).ratio() for s in catalog.systems.values()
              if not acc or s.accelerator.id == acc}
    cands = [catalog.systems[sid] for sid, r in ratios.items() if r >= 0.6]
    if cands:
        best = min(cands, key=lambda s: (bool(per_node) and s.devices_per_host != per_node
                                         and s.devices_per_domain != per_node, -ratios[s.id]))
        why = f"same gpu {acc}" if acc else "closest catalog spelling"
        return best.id, {}, f"system {raw!r} is not in the catalog: modelled as {best.id!r} ({why})"
    canon = canonical_system(acc, per_node, catalog) if acc else None
    if canon:
        return canon, {}, (f"system {raw!r} is not in the catalog: modelled as {canon!r}, the catalog's system "
                           f"for gpu {acc}, with the row's GPUs per node and NIC columns")
    raise InputError(f"system {raw!r} is not in the catalog and no catalog system has gpu {acc or '(blank)'}",
                     suggestions=difflib.get_close_matches(n, list(catalog.systems), n=3, cutoff=0.4),
                     hint="use a catalog system id (`clustertwin catalog list systems`) or fill the gpu column")


# ------------------------------------------------------------------------------------------ scale-out
def is_no_scaleout(name: str) -> bool:
    """True for a scale_out value meaning "no scale-out network" (none, n/a, nvlink ...)."""
    n = normalize(name)
    return n in {normalize(x) for x in names_table().get("no_scaleout") or ()} or n.startswith("n/a")


# Scale-out names a row may use that the catalog spells differently: the family is read from the name,
# the line rate from the name or the `nic_gbps` column; the row's note says which entry was used. A name
# of no known family is modelled as a generic RDMA (RoCE-class) fabric at the row's line rate, with a note.
_FABRIC_FAMILIES = (
    (r"efa", "ethernet-efa"), (r"slingshot", "slingshot"), (r"tcpx", "gcp-tcpx"),
    (r"omni|opa\b|opa-", "omnipath"), (r"roce|spectrum|rdma", "roce"),
    (r"\bib\b|ib-|infiniband|[hnxe]dr|quantum", "infiniband"), (r"eth|tcp|gbe|gige", "ethernet"),
)
# InfiniBand generations a name may give instead of a line rate: (pattern, nominal Gb/s per port, catalog entry
# they select). IBTA / NVIDIA: EDR 100, HDR 200, NDR 400, XDR 800 Gb/s per 4x port; the Quantum switch families
# (Quantum HDR, Quantum-2 NDR, Quantum-X800 XDR). A port-rate suffix ("NDR200", "HDR100") or the row's nic_gbps
# sets the speed; the generation picks the entry (its latency and switch figures).
_IB_GENERATIONS = (
    (r"(?<![a-z])xdr|quantum-?x800", 800.0, "ib-xdr-800g"), (r"(?<![a-z])ndr|quantum-?2", 400.0, "ib-ndr-400g"),
    (r"(?<![a-z])hdr|quantum", 200.0, "ib-hdr-200g"), (r"(?<![a-z])edr", 100.0, "ib-edr-100g"),
)


def _fabric_family(f) -> str:
    fid = f.id.lower()
    for key, fam in (("efa", "ethernet-efa"), ("slingshot", "slingshot"), ("tcpx", "gcp-tcpx"),
                     ("omnipath", "omnipath")):
        if key in fid:
            return fam
    return "roce" if f.kind == "roce" else f.kind


def resolve_fabric(name: str, gbps: float, catalog) -> tuple[Any, str]:
    """(fabric, note) for a row's scale-out name: a catalog id passes with no note; another name is read
    for its family and line rate (else from ``gbps``, the row's nic_gbps)."""
    if name in catalog.scaleout:
        return catalog.fabric(name), ""
    text = name.lower()
    if normalize(name) in catalog.scaleout:
        return catalog.fabric(normalize(name)), ""
    m = re.search(r"(\d+(?:\.\d+)?)\s*g", text) or re.search(r"(?<![a-z])[hnxe]dr[-_ ]?(\d{2,3})\b", text)
    speed = float(m.group(1)) if m else (gbps or 0.0)
    fam = next((f for pat, f in _FABRIC_FAMILIES if re.search(pat, text)), None)
    generic = fam is None
    if generic:
        fam = "roce"  # an unknown fabric of a published run: a generic RDMA Ethernet class (assumed)
    cands = [f for f in catalog.scaleout.values() if _fabric_family(f) == fam]
    gen = next((g for g in _IB_GENERATIONS if re.search(g[0], text)), None) if fam == "infiniband" else None
    if gen is not None:
        speed = speed or gen[1]
        same = [f for f in cands if f.id == gen[2]]
        cands = same or cands
    if not cands:
        raise InputError(f"scale-out fabric {name!r}: no {fam} fabric in the catalog",
                         hint="add one with a user catalog (--catalog)")
    order = list(catalog.scaleout)  # ties: the catalog's order (the older / more common entry first)
    best = min(cands, key=lambda f: (abs(f.port_bw * 8 / 1e9 - speed) if speed else 0.0, order.index(f.id)))
    if generic:
        note = (f"scale-out {name!r} is not in the catalog and its kind is not in the name: modelled as a "
                f"generic RDMA fabric, {best.id!r}")
    else:
        note = f"scale-out {name!r} is not in the catalog: modelled as {best.id!r}"
    if speed and abs(best.port_bw * 8 / 1e9 - speed) > 0.5:
        from ..units import gbps_to_bytes_per_s

        best = replace(best, port_bw=gbps_to_bytes_per_s(speed))
        note += f" with {speed:g} Gb/s ports"
    return best, note


# ------------------------------------------------------------------------------------------ serving rows
def _squash(text: str) -> str:
    return re.sub(r"[^a-z0-9.]", "", text.lower())


def resolve_model_ref(ref: str, known) -> tuple[str, str]:
    """(zoo id, note) for a serving row's ``model_ref``; ``known``: the zoo ids. A zoo id passes with no note;
    otherwise a Hugging Face organisation prefix and checkpoint suffixes (-Instruct, -chat, -hf, -FP8,
    -v0.1, a -0528 date, MLPerf's -99 / -99.9 accuracy targets; names.yaml ``model_suffixes``) are dropped
    and the name is compared with the zoo ids without separators, or looked up in names.yaml ``models``
    (a checkpoint with the architecture of a zoo model). Raises ``UnknownNameError`` with suggestions."""
    raw = (ref or "").strip()
    ids = list(known)
    if raw in ids:
        return raw, ""
    table = names_table()
    aliases = table.get("models") or {}
    notes = table.get("model_notes") or {}
    n = normalize(re.sub(r"\s*\([^)]*\)\s*$", "", raw).split("/")[-1])  # "DeepSeek-V3 (w/o MTP)" -> deepseek-v3
    suffix = [re.compile(p) for p in table.get("model_suffixes") or ()]
    by_key = {_squash(i): i for i in ids}
    cand = n
    while True:
        if cand in ids:
            hit = cand
            break
        if cand in aliases and aliases[cand] in ids:
            hit = aliases[cand]
            break
        if _squash(cand) in by_key:
            hit = by_key[_squash(cand)]
            break
        nxt = cand
        for rx in suffix:
            nxt = rx.sub("", nxt).rstrip("-")
        if nxt == cand or not nxt:
            raise UnknownNameError("model", raw, ids,
                                   hint="use a zoo id (`clustertwin models list`) or add the model with --models FILE")
        cand = nxt
    why = notes.get(cand) or "same model; checkpoint, version and precision suffixes dropped (the row's dtype columns set the precision)"
    return hit, f"model {raw!r} is not a zoo id: modelled as {hit!r} ({why})"


def resolve_serving_dtype(text: str, what: str) -> tuple[str, str] | None:
    """(dtype, note) for a serving row's ``weights_dtype`` (``what="weights"``) or ``precision_kv_cache``
    (``what="kv"``) by the names.yaml ``serving_weights`` / ``serving_kv`` patterns; None if no pattern
    matches (the caller's default applies). A value that is its own dtype has no note."""
    raw = (text or "").strip()
    n = normalize(re.sub(r"[()\[\],;]", " ", raw))
    if not n:
        return None
    for entry in names_table().get("serving_weights" if what == "weights" else "serving_kv") or ():
        if re.search(entry["pattern"], n):
            dt = str(entry["dtype"])
            if (n == dt and dt in ("bf16", "fp16", "fp8", "int8", "nvfp4")) or not entry.get("note"):  # SERVING.md's
                return dt, ""
            return dt, f"{'weights dtype' if what == 'weights' else 'KV cache dtype'} {raw!r} modelled as {dt}: {entry['note']}"
    return None


_SCENARIO_KINDS = ("offline", "server", "interactive", "prefill", "decode", "prefill-latency", "latency-band",
                   "production", "estimate")


def resolve_scenario(kind: str, scenario: str = "") -> tuple[str, str]:
    """(kind, note) for a serving row's ``scenario_kind`` (SERVING.md kinds; spellings of names.yaml
    ``serving_scenarios``, any case); a blank kind is read from the leading words of the ``scenario`` column
    ("MLPerf Server ...", "Offline"). ("", "") when neither says (the caller's default applies)."""
    raw = (kind or "").strip()
    if raw in _SCENARIO_KINDS:
        return raw, ""
    table = names_table().get("serving_scenarios") or {}
    spell = {normalize(a): k for k, al in table.items() for a in (k, *al)}

    def lookup(text: str) -> str:
        n = normalize(text)
        if n in _SCENARIO_KINDS:
            return n
        return spell.get(n, "")

    if raw:
        k = lookup(raw)
        return (k, f"scenario_kind {raw!r} read as {k}") if k else (raw, "")
    words = re.findall(r"[a-z0-9]+", (scenario or "").lower())
    for i in range(min(len(words), 4)):
        for j in (3, 2, 1):
            k = lookup("-".join(words[i:i + j]))
            if k:
                return k, f"scenario_kind blank: read as {k} from the scenario column {scenario.strip()[:40]!r}"
    return "", ""


def resolve_target(name: str, known: tuple[str, ...]) -> tuple[str, str]:
    """(target, note) for a serving row's ``target_metric``: a SERVING.md target, or a spelling of one in
    names.yaml ``serving_targets``. Raises ``InputError`` naming the targets for anything else."""
    raw = (name or "").strip()
    if raw in known:
        return raw, ""
    n = normalize(raw)
    for key, al in (names_table().get("serving_targets") or {}).items():
        if key in known and n in {normalize(a) for a in (key, *al)}:
            return key, f"target_metric {raw!r} read as {key}"
    raise InputError(f"unknown target_metric {raw!r}", suggestions=difflib.get_close_matches(raw, list(known), n=3),
                     hint="targets: " + ", ".join(known))

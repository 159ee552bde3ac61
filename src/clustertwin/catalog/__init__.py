"""The hardware catalog: shipped YAML (every number sourced) plus user overlays.

>>> cat = load_catalog()
>>> cat.system("hgx-h100").accelerator.id
'h100-sxm'

User files come from ``--catalog FILE`` (repeatable) or ``CLUSTERTWIN_CATALOG`` (paths separated
by ``os.pathsep``). A user entry with a built-in id replaces the built-in one; errors name the file,
the entry and the field.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ..errors import InputError, UnknownNameError
from ..hardware import Accelerator, ScaleOutTech, ScaleUpTech, SystemSpec
from ..userfiles import read_yaml
from .schema import CatalogFile

ENV_VAR = "CLUSTERTWIN_CATALOG"
_ID_RE = re.compile(r"^[a-z0-9][a-z0-9.\-]*$")
SECTIONS = ("accelerators", "scaleup", "scaleout", "systems")


@dataclass(frozen=True)
class Catalog:
    accelerators: dict[str, Accelerator]
    scaleup: dict[str, ScaleUpTech]
    scaleout: dict[str, ScaleOutTech]
    systems: dict[str, SystemSpec]
    calibration: dict[str, dict[str, Any]] = field(default_factory=dict)
    version: str = ""
    files: tuple[str, ...] = ()

    def _get(self, kind: str, table: dict, name: str, hint: str):
        try:
            return table[name]
        except KeyError:
            raise UnknownNameError(kind, name, table, hint=hint) from None

    def accelerator(self, name: str) -> Accelerator:
        return self._get("accelerator", self.accelerators, name, "list them with `clustertwin catalog list accelerators`")

    def system(self, name: str) -> SystemSpec:
        return self._get("system", self.systems, name, "list them with `clustertwin catalog list systems`")

    def scaleup_tech(self, name: str) -> ScaleUpTech:
        return self._get("scale-up fabric", self.scaleup, name, "list them with `clustertwin catalog list fabrics`")

    def scaleout_tech(self, name: str) -> ScaleOutTech:
        return self._get("scale-out fabric", self.scaleout, name, "list them with `clustertwin catalog list fabrics`")

    def fabric(self, name: str) -> ScaleOutTech:
        """A scale-out fabric id as users write it on the command line (``--fabric ib-ndr-400g``)."""
        return self.scaleout_tech(name)

    def calibration_for(self, section: str, key: str) -> dict[str, Any] | None:
        return self.calibration.get(section, {}).get(key)


def _read_yaml(path: Path) -> dict:
    return read_yaml(path, "catalog file", hint="check the path given to --catalog or CLUSTERTWIN_CATALOG",
                     shape=f"sections {', '.join(SECTIONS)}")


def _parse(path_label: str, data: dict) -> CatalogFile:
    try:
        parsed = CatalogFile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = [str(p) for p in err["loc"]]
        where = ""
        if len(loc) >= 2 and loc[0] in SECTIONS:
            where = f" entry {loc[0]}.{loc[1]}"
            if len(loc) > 2:
                where += f", field {'.'.join(loc[2:])}"
        elif loc:
            where = f" at {'.'.join(loc)}"
        more = f" (and {len(exc.errors()) - 1} more problem(s))" if len(exc.errors()) > 1 else ""
        raise InputError(
            f"catalog file {path_label!r}{where}: {err['msg']}{more}",
            hint="see docs/catalog.md for the fields of each section; every entry needs `name` and `source`",
        ) from None
    for section in SECTIONS:
        for key in getattr(parsed, section):
            if not _ID_RE.match(key):
                raise InputError(
                    f"catalog file {path_label!r} entry {section}.{key}: ids are lower-case letters, digits, dots and dashes",
                    hint=f"rename it, e.g. {re.sub(r'[^a-z0-9.-]+', '-', key.lower())!r}",
                )
    return parsed


def _builtin_files() -> list[tuple[str, str]]:
    data_dir = resources.files("clustertwin.catalog") / "data"
    out = []
    for entry in sorted(data_dir.iterdir(), key=lambda p: p.name):
        if entry.name.endswith(".yaml"):
            out.append((f"<builtin>/{entry.name}", entry.read_text(encoding="utf-8")))
    return out


def user_catalog_paths(extra: Iterable[str | os.PathLike] = ()) -> list[Path]:
    paths = [Path(p) for p in os.environ.get(ENV_VAR, "").split(os.pathsep) if p.strip()]
    paths += [Path(p) for p in extra]
    return paths


def load_catalog(extra: Sequence[str | os.PathLike] = ()) -> Catalog:
    """Built-in catalog plus overlays from ``CLUSTERTWIN_CATALOG`` and ``extra`` (later wins)."""
    user = tuple(str(p) for p in user_catalog_paths(extra))
    # The cache key includes each overlay's modification time and size, so an overlay rewritten
    # in place (e.g. by `clustertwin calibrate`) is read again within the same process.
    stamps = tuple(_stamp(p) for p in user)
    return _load(user, stamps)


# Calibration sections whose entries are keyed by system id (``clustertwin calibrate`` writes these).
SYSTEM_KEYED_CALIBRATION = frozenset({"collectives"})
# every section an engine reads (collectives/params.py, sim/machine.py, workload/stacks.py, calibrate_gpu.py)
CALIBRATION_SECTIONS = frozenset({"collectives", "step_efficiency", "stack_efficiency", "gpu_profile"})


def _stamp(path: str) -> tuple[int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return (-1, -1)  # missing file: _load raises a clear InputError
    return (st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=16)
def _load(user_paths: tuple[str, ...], _stamps: tuple[tuple[int, int], ...]) -> Catalog:
    texts: list[tuple[str, dict]] = []
    digest = hashlib.sha256()
    for label, text in _builtin_files():
        digest.update(text.encode())
        try:
            texts.append((label, yaml.safe_load(text) or {}))
        except yaml.YAMLError as exc:  # a broken built-in file is our bug
            raise RuntimeError(f"built-in catalog {label} is not valid YAML: {exc}") from exc
    for p in user_paths:
        path = Path(p)
        data = _read_yaml(path)
        digest.update(repr(sorted(data.items(), key=lambda kv: kv[0])).encode())
        texts.append((str(path), data))

    raw: dict[str, dict[str, tuple[str, Any]]] = {s: {} for s in SECTIONS}
    calibration: dict[str, dict[str, Any]] = {}
    cal_origin: dict[tuple[str, str], str] = {}
    version = ""
    for label, data in texts:
        parsed = _parse(label, data)
        if parsed.version and label.startswith("<builtin>"):
            version = parsed.version
        for section in SECTIONS:
            for key, entry in getattr(parsed, section).items():
                raw[section][key] = (label, entry)
        for sec, entries in parsed.calibration.items():
            if sec not in CALIBRATION_SECTIONS:  # an unknown section would be silently ignored
                err = UnknownNameError("calibration section", sec, CALIBRATION_SECTIONS)
                raise InputError(f"catalog file {label!r}: calibration.{sec}: {err.message}", suggestions=err.suggestions,
                                 hint="sections: " + ", ".join(sorted(CALIBRATION_SECTIONS)))
            calibration.setdefault(sec, {}).update(entries)
            cal_origin.update({(sec, k): label for k in entries})

    accs = {k: e.to_spec(k) for k, (_, e) in raw["accelerators"].items()}
    ups = {k: e.to_spec(k) for k, (_, e) in raw["scaleup"].items()}
    outs = {k: e.to_spec(k) for k, (_, e) in raw["scaleout"].items()}
    systems: dict[str, SystemSpec] = {}
    for key, (label, entry) in raw["systems"].items():
        for ref, table, kind in ((entry.accelerator, accs, "accelerator"), (entry.scaleup, ups, "scaleup"), (entry.default_scaleout, outs, "default_scaleout")):
            if ref not in table:
                err = UnknownNameError(kind, ref, table)
                raise InputError(
                    f"catalog file {label!r} entry systems.{key}, field {kind if kind != 'scaleup' else 'scaleup'}: {err.message}",
                    suggestions=err.suggestions,
                    hint=f"define it in the `{ {'accelerator': 'accelerators', 'scaleup': 'scaleup', 'default_scaleout': 'scaleout'}[kind] }` section or use a known id",
                )
        systems[key] = entry.to_spec(key, accs[entry.accelerator], ups[entry.scaleup])
    # A calibration for a system the catalog does not know would be silently ignored: refuse it.
    for (sec, key), label in cal_origin.items():
        table = systems if sec in SYSTEM_KEYED_CALIBRATION else None
        if table is not None and key not in table:
            err = UnknownNameError("system", key, table)
            raise InputError(f"catalog file {label!r} entry calibration.{sec}.{key}: {err.message}",
                             suggestions=err.suggestions,
                             hint="a calibration applies to a system id of the catalog (`clustertwin catalog list systems`)")
    return Catalog(
        accelerators=accs,
        scaleup=ups,
        scaleout=outs,
        systems=systems,
        calibration=calibration,
        version=f"{version or 'dev'}+{digest.hexdigest()[:12]}",
        files=tuple(label for label, _ in texts),
    )

"""Small fabrics for fast checks."""

from __future__ import annotations

from dataclasses import replace

import pytest

from clustertwin import load_catalog
from clustertwin.fabric import make_fabric


@pytest.fixture(scope="session")
def cat():
    return load_catalog()


@pytest.fixture(scope="session")
def small(cat):
    """Factory: a fabric of ``gpus`` single-GPU hosts/domains on radix-``radix`` switches."""

    def _make(gpus: int, radix: int = 8, per_domain: int = 1, per_host: int = 1, nics: int = 1, **kw):
        base = cat.system("hgx-h100")
        sysm = replace(base, devices_per_domain=per_domain, devices_per_host=per_host, nics_per_host=nics)
        so = replace(cat.fabric(base.default_scaleout), switch_radix=radix)
        kw.setdefault("topology", "fat-tree")
        return make_fabric(sysm, so, gpus, **kw)

    return _make

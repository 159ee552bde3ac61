"""ClusterTwin: a digital twin of AI training clusters.

The public surface is listed in ``__all__``; everything else is internal.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .catalog import Catalog, load_catalog
from .errors import InputError, UnknownNameError
from .hardware import Accelerator, ScaleOutTech, ScaleUpTech, SystemSpec

__all__ = [
    "Accelerator",
    "Catalog",
    "InputError",
    "ScaleOutTech",
    "ScaleUpTech",
    "SystemSpec",
    "UnknownNameError",
    "__version__",
    "load_catalog",
]

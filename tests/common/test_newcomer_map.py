"""docs/architecture.md "Newcomer's map" stays true: every file it names exists and the functions and
registry entry points its steps use are where it says."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _section() -> str:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    start = text.index("## Newcomer's map")
    return text[start:text.index("\n## ", start + 1)]


def test_every_file_the_map_names_exists():
    paths = set(re.findall(r"`(src/clustertwin/[\w/.-]+|docs/[\w.-]+|tests/[\w/.-]+\.py)`", _section()))
    paths |= {f"src/clustertwin/{p}" for p in re.findall(r"`((?:sim|collectives|catalog|workload)/[\w/.-]+\.py)`",
                                                        _section())}
    assert len(paths) >= 10, paths
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert not missing, missing


def test_the_names_the_steps_use_exist():
    from clustertwin.collectives import Algorithm, CollectiveParams, register_algorithm  # noqa: F401
    from clustertwin.collectives.core import ALGORITHMS, AUTO
    from clustertwin.sim.analytical import _compose  # noqa: F401
    from clustertwin.sim.components.dp_comm import DPComm, dp_comm  # noqa: F401

    assert {"dp_ar_s", "dp_rs_s", "dp_ag_s", "dp_bucket_s"} <= set(DPComm._fields)
    assert hasattr(CollectiveParams, "scaleup_busbw") and hasattr(CollectiveParams, "scaleout_busbw_per_device")
    assert "ring" in ALGORITHMS["all_reduce"] and AUTO["all_reduce"]
    assert "# DP" in (ROOT / "src/clustertwin/sim/analytical.py").read_text(encoding="utf-8")

"""fabric simulations report progress (issue #18: long commands show a progress bar on stderr)."""

from __future__ import annotations


def test_collective_simulation_reports_phases(catalog):
    from clustertwin.fabric import make_fabric, simulate_collective

    sysm = catalog.system("hgx-h100")
    fab = make_fabric(sysm, catalog.fabric(sysm.default_scaleout), 64)
    calls = []
    run = simulate_collective(fab, "all_to_all", 1 << 20, progress=lambda d, t: calls.append((d, t)))
    assert run.time_s > 0 and calls
    total = calls[0][1]
    assert total >= 1 and all(t == total and 0 <= d < total for d, t in calls)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)

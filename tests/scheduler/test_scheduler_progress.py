"""schedule replay reports progress (issue #18: long commands show a progress bar on stderr)."""

from __future__ import annotations


def test_replay_reports_arrivals_up_to_the_total():
    from clustertwin.catalog import load_catalog
    from clustertwin.scheduler.inventory import build_inventory
    from clustertwin.scheduler.jobs import generate_llm_trace
    from clustertwin.scheduler.replay import replay

    inv = build_inventory("gb200-nvl72", 4, catalog=load_catalog())
    jobs = generate_llm_trace(200, cluster_gpus=inv.schedulable_gpus, gpus_per_node=4, seed=0)
    calls = []
    replay(jobs, inv, "fifo", progress=lambda done, total: calls.append((done, total)))
    assert calls and calls[-1] == (len(jobs), len(jobs))
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)

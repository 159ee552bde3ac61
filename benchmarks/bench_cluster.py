"""Build time and memory of large clusters (compact arrays, no networkx).

    python benchmarks/bench_cluster.py

Prints, per cluster: devices, nodes, links, build seconds (best of 3) and the bytes held by the
compact arrays plus the peak traced Python memory during one build.
"""

from __future__ import annotations

import time
import tracemalloc

from clustertwin.catalog import load_catalog
from clustertwin.cluster import bill_of_materials, build_cluster

CASES = [
    ("hgx-h100", 2048, "ib-ndr-400g", "rail"),  # 16,384 GPUs, 3-tier
    ("hgx-h100", 4096, "ib-ndr-400g", "rail"),  # 32,768 GPUs, 3-tier
    ("gb200-nvl72", 228, "ib-ndr-400g", "rail"),  # 16,416 GPUs
    ("hgx-b200", 4096, "roce-400g", "dual-plane"),  # 32,768 GPUs, 2 planes
    ("cloudmatrix-384", 86, "roce-400g", "rail"),  # 33,024 NPUs, UB Clos domains
]


def main() -> None:
    cat = load_catalog()
    print(f"{'cluster':44s} {'devices':>8s} {'nodes':>8s} {'links':>9s} {'build s':>8s} {'arrays MB':>9s} "
          f"{'peak MB':>8s} {'bom s':>6s}")
    for system, domains, fabric, topo in CASES:
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            c = build_cluster(system, domains, fabric, topology=topo, catalog=cat)
            t = c.topology_arrays()
            best = min(best, time.perf_counter() - t0)
        tracemalloc.start()
        c = build_cluster(system, domains, fabric, topology=topo, catalog=cat)
        t = c.topology_arrays()
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        t0 = time.perf_counter()
        bill_of_materials(c)
        tb = time.perf_counter() - t0
        name = f"{domains} x {system} on {fabric} ({topo}, {c.scaleout.tiers} tiers)"
        print(f"{name:44s} {c.num_devices:8d} {t.num_nodes:8d} {t.num_links:9d} {best:8.3f} "
              f"{t.nbytes() / 1e6:9.1f} {peak / 1e6:8.1f} {tb:6.3f}")


if __name__ == "__main__":
    main()

"""Fabric simulator at 10K-100K GPUs: ``fabric all_to_all`` (1 GiB per rank, defaults of the CLI:
32 sampled shift phases, PXN, rail-optimised fabric, 2 or 3 tiers) per routing, wall time and peak RSS
of each run in its own process, and the growth exponent of wall time from the smallest to the
largest size.

    python benchmarks/bench_fabric_scale.py [--sizes 16384,32768,65536,100000] [--routings ecmp,adaptive,spray]
                                            [--system hgx-h100] [--fabric ib-xdr-800g]

Targets (issue #15): at 100K GPUs ECMP and adaptive < 60 s, spray < 10 s, peak RSS < 2 GB,
growth exponent <= 1.2 from 16K to 100K. CPU s (user + system of the whole child process, imports
included) is printed beside the wall time because on a shared machine wall time varies ~3x.  The default fabric is the XDR one because a 3-tier
NDR fat-tree of 64-port switches holds only 65,536 endpoints.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys

_CHILD = r"""
import json, resource, sys, time
from clustertwin import load_catalog
from clustertwin.fabric import make_fabric, simulate_collective
system, fabric, gpus, routing = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
cat = load_catalog()
t0 = time.perf_counter()
fab = make_fabric(cat.system(system), cat.fabric(fabric), gpus)
run = simulate_collective(fab, "all_to_all", float(1 << 30), routing=routing)
wall = time.perf_counter() - t0
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime, "time_s": run.time_s, "eff": run.efficiency, "flows": run.n_flows,
                  "events": run.events, "tiers": fab.topo.shape.tiers, "kind": fab.topo.shape.kind,
                  "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="16384,32768,65536,100000")
    ap.add_argument("--routings", default="ecmp,adaptive,spray")
    ap.add_argument("--system", default="hgx-h100")
    ap.add_argument("--fabric", default="ib-xdr-800g")
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    print(f"fabric all_to_all 1 GiB/rank, {a.system} on {a.fabric} (each run in its own process)")
    print(f"{'GPUs':>7} {'routing':>8} {'topology':>12} {'wall s':>8} {'CPU s':>7} {'peak RSS MiB':>13} {'flows':>10} "
          f"{'events':>6} {'sim time':>10} {'eff':>6}")
    walls: dict[str, dict[int, float]] = {}
    for r in a.routings.split(","):
        for n in sizes:
            out = subprocess.run([sys.executable, "-c", _CHILD, a.system, a.fabric, str(n), r],
                                 capture_output=True, text=True, check=True)
            d = json.loads(out.stdout.strip().splitlines()[-1])
            walls.setdefault(r, {})[n] = d["wall_s"]
            print(f"{n:>7} {r:>8} {str(d['tiers']) + '-tier ' + d['kind']:>12} {d['wall_s']:8.2f} {d['cpu_s']:7.2f} {d['rss_mib']:13.0f} "
                  f"{d['flows']:>10,} {d['events']:>6} {d['time_s'] * 1e3:8.2f}ms {d['eff']:6.1%}", flush=True)
    if len(sizes) > 1:
        lo, hi = min(sizes), max(sizes)
        for r, w in walls.items():
            k = math.log(w[hi] / w[lo]) / math.log(hi / lo)
            print(f"growth exponent {r}: wall ~ N^{k:.2f} from {lo:,} to {hi:,} GPUs")


if __name__ == "__main__":
    main()

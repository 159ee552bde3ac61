"""Published all-reduce sweeps that are NOT in the validation set (checks only, nothing is fitted to
them): the collective model's busbw error per sweep and size band. Prints figures; not a test.

    python benchmarks/check_heldout_collectives.py [--rows]

Each sweep is the nccl-tests / rccl-tests table of its source, modelled from the same columns a
validation row has (system, GPUs, nodes, GPUs per node, fabric, algorithm, size) through
``predict_busbw_row``; the launch mode follows the row rule (one node: ``-g <gpus>``, several nodes:
one process per GPU), which is how these sweeps were run (commands in their sources).
"""

from __future__ import annotations

import argparse

from clustertwin.catalog import load_catalog
from clustertwin.collectives.validation import SIZE_BANDS, predict_busbw_row, size_band

AZURE = "github.com/Azure/AI-benchmarking-guide"
ISSUE_309 = "github.com/NVIDIA/nccl-tests/issues/309"


def _p2(lo: int, hi: int) -> list[int]:
    return [2**i for i in range(lo, hi + 1)]


# name -> (source, row columns, sizes, ("busbw", GB/s) or ("time", in-place us))
SWEEPS: dict[str, tuple[str, dict[str, str], list[int], tuple[str, list[float]]]] = {
    "ND GB200 v6, 4 GPUs, NCCL_ALGO=Ring, -g 4 (NCCL 2.25.1, Grace host)": (
        f"{AZURE} Azure_Results/ND_GB200_v6_results.md @2a370be",
        {"system": "gb200-nvl72", "num_gpus": "4", "num_nodes": "1", "gpus_per_node": "4", "algorithm": "ring"},
        _p2(10, 33),
        ("busbw", [0.10, 0.19, 0.38, 0.76, 1.46, 2.88, 5.71, 11.29, 22.41, 44.07, 80.48, 110.43, 146.27, 253.46,
                   331.09, 422.62, 550.73, 574.19, 593.53, 618.74, 646.87, 666.63, 673.06, 679.61]),
    ),
    "ND MI300X v5, 8 GPUs, -g 8 (RCCL 2.22.3)": (
        "github.com/yosoyjay/AI-benchmarking-guide Azure_Results/ND_MI300X_v5_results.md @a8263ef",
        {"system": "mi300x-8", "num_gpus": "8", "num_nodes": "1", "gpus_per_node": "8", "algorithm": "auto"},
        _p2(10, 33),
        ("busbw", [0.04, 0.07, 0.15, 0.29, 0.59, 1.13, 2.22, 4.18, 7.50, 13.01, 22.41, 43.41, 82.53, 131.57,
                   171.46, 230.35, 266.34, 290.81, 302.80, 308.89, 313.92, 315.06, 314.85, 316.82]),
    ),
    "GB200 NVL72, full rack (72 GPUs, 18 trays, MNNVL), one process per GPU": (
        "github.com/coreweave/nccl-tests/pull/43 (example output, full nvl72 rack run)",
        {"system": "gb200-nvl72", "num_gpus": "72", "num_nodes": "18", "gpus_per_node": "4", "algorithm": "auto"},
        _p2(29, 33),
        ("time", [1835.9, 2924.7, 5474.6, 10141, 20006]),
    ),
    "H100 x 2 nodes (16), 8x NDR 400G, NCCL 2.26.2, bare metal": (
        f"{ISSUE_309} (opening post, bm-h100-01/02)",
        {"num_gpus": "16", "num_nodes": "2"},
        _p2(3, 34),
        ("time", [24.70, 24.93, 25.02, 25.21, 25.62, 25.90, 26.31, 26.65, 28.22, 29.72, 31.67, 32.24, 33.47, 33.08,
                  38.12, 46.79, 70.33, 71.47, 76.62, 94.22, 131.4, 183.8, 267.7, 466.3, 749.2, 1276.0, 2355.1,
                  4470.2, 8717.2, 17284, 34365, 68668]),
    ),
    "H100 x 4 nodes (32), 8x NDR 400G, NCCL 2.26.2, VMs": (
        f"{ISSUE_309} (qoofyk, 2025-05-23)",
        {"num_gpus": "32", "num_nodes": "4"},
        _p2(3, 34),
        ("time", [34.75, 34.45, 35.55, 34.92, 35.04, 35.82, 36.72, 37.10, 40.03, 41.42, 45.55, 46.39, 46.79, 47.60,
                  55.06, 66.86, 72.78, 82.21, 132.2, 154.0, 202.4, 258.3, 370.3, 574.4, 1013.1, 1772.4, 3111.7,
                  5802.8, 11501, 22874, 45573, 91081]),
    ),
    "H100 x 2 nodes (16), 8x IB 400G (second cluster)": (
        f"{ISSUE_309} (gj-aion, 2025-06-18, 2 of 8 nodes)",
        {"num_gpus": "16", "num_nodes": "2"},
        _p2(20, 33),
        ("time", [82.98, 93.52, 111.9, 150.5, 202.7, 269.7, 469.6, 751.2, 1290.4, 2371.3, 4503.5, 8777.6, 17341,
                  34514]),
    ),
    "H100 x 4 nodes (32), 8x IB 400G (second cluster)": (
        f"{ISSUE_309} (gj-aion, 2025-06-18, 4 of 8 nodes)",
        {"num_gpus": "32", "num_nodes": "4"},
        _p2(20, 33),
        ("time", [93.26, 156.4, 174.2, 256.7, 286.3, 455.5, 615.5, 1043.6, 2204.7, 3617.5, 6532.2, 12840, 25537,
                  51350]),
    ),
    "H100 x 8 nodes (64), 8x IB 400G (second cluster)": (
        f"{ISSUE_309} (gj-aion, 2025-06-18, 8 nodes)",
        {"num_gpus": "64", "num_nodes": "8"},
        _p2(20, 33),
        ("time", [115.7, 143.3, 203.8, 321.4, 373.5, 508.2, 709.2, 1149.5, 2028.1, 3509.4, 7414.5, 13300, 26340,
                  52754]),
    ),
}

_H100_IB = {"system": "hgx-h100", "gpus_per_node": "8", "scale_out": "ib-ndr-400g", "nics_per_node": "8",
            "nic_gbps": "400", "algorithm": "auto"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", action="store_true", help="print every size's error")
    args = ap.parse_args()
    cat = load_catalog()
    every: list[float] = []
    print(f"{'sweep':66s} {'MAPE %':>7s} " + " ".join(f"{b:>9s}" for b in SIZE_BANDS))
    for name, (source, cols, sizes, (kind, values)) in SWEEPS.items():
        base = dict(_H100_IB) if "system" not in cols else {}
        base.update(cols)
        n = int(base["num_gpus"])
        errs: dict[str, list[float]] = {b: [] for b in SIZE_BANDS}
        line = []
        for s, v in zip(sizes, values, strict=True):
            row = dict(base, id=name, collective="all_reduce", size_bytes=str(s))
            meas = v if kind == "busbw" else s / (v * 1e-6) * 2 * (n - 1) / n / 1e9
            e = (predict_busbw_row(row, cat) - meas) / meas * 100
            errs[size_band(s)].append(abs(e))
            line.append(f"{e:+.0f}")
        flat = [x for b in SIZE_BANDS for x in errs[b]]
        every += flat
        bands = " ".join(f"{sum(x) / len(x):9.1f}" if x else f"{'-':>9s}" for x in errs.values())
        print(f"{name:66s} {sum(flat) / len(flat):7.1f} {bands}")
        if args.rows:
            print(f"    source: {source}\n    busbw error % by size: {' '.join(line)}")
    print(f"{'all held-out rows':66s} {sum(every) / len(every):7.1f}")


if __name__ == "__main__":
    main()

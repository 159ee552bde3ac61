"""Golden bill-of-materials figures against published values (sources in the catalog entries)."""

from __future__ import annotations

import pytest

from clustertwin.cluster import bill_of_materials, build_cluster


def bom_for(catalog, system, domains=1, **kw):
    return bill_of_materials(build_cluster(system, domains, catalog=catalog, **kw))


def test_cloudmatrix384_optics(catalog):
    # SemiAnalysis / Tom's HW: 6,912 400G LPO transceivers; NPU:module = 1:14 (UB) and ~1:4 (RDMA).
    # Rule: each NPU has 7 UB links (one per L1 switch of its node); the non-blocking L1->L2 tier has one
    # optical link per NPU link with a transceiver at each end: 384 x 7 x 2 = 5,376. RDMA plane: one
    # 400G NIC per NPU, NIC->leaf and leaf->spine optical, 2 ends each: 384 x 4 = 1,536.
    b = bom_for(catalog, "cloudmatrix-384")
    t = b.to_dict()["totals"]
    assert t["optical_transceivers_scaleup"] == 5376 == 384 * 14
    assert t["optical_transceivers_scaleout"] == 1536 == 384 * 4
    assert t["optical_transceivers"] == 6912
    assert b.count("accelerators") == 384 and b.count("CPUs") == 192
    assert b.count("hosts (compute trays / servers)") == 48
    assert b.count("scale-up switch chips") == 48 * 7
    assert b.published["optical_transceivers"]["published"] == 6912
    assert b.power_kw_systems == pytest.approx(559)  # published system power (910C TDP not published)


def test_gb200_nvl72_rack(catalog):
    b = bom_for(catalog, "gb200-nvl72")
    assert b.count("accelerators") == 72
    assert b.count("CPUs") == 36
    assert b.count("hosts (compute trays / servers)") == 18
    assert b.count("scale-up switch trays") == 9
    assert b.count("scale-up switch chips") == 18
    assert b.count("copper cables, scale-up") == 72 * 18  # one copper NVLink per GPU link
    agg = b.published["aggregate_scaleup_tbps"]
    assert agg["computed"] == pytest.approx(72 * 1.8) and agg["computed"] == pytest.approx(130, rel=0.01)
    assert b.power_kw_systems == pytest.approx(120, rel=0.05)  # NVIDIA OCP: ~120 kW per rack
    assert b.published["power_kw_per_system"]["published"] == 120


def test_gb300_nvl72_power_budget(catalog):
    b = bom_for(catalog, "gb300-nvl72")
    assert b.count("accelerators") * 1400 / 1e3 == pytest.approx(100.8)  # GPU TDP sum, NVL72 RA
    assert b.power_kw_systems == pytest.approx(135, rel=0.05)  # Mission Control budget 135 kW, max 142


def test_nvl576_is_eight_nvl72_racks(catalog):
    b576 = bom_for(catalog, "gb200-nvl576")
    b72 = bom_for(catalog, "gb200-nvl72", 8)
    assert b576.count("racks") == 8 == b72.count("racks")
    assert b576.count("accelerators") == 576 == b72.count("accelerators")
    assert b576.count("hosts (compute trays / servers)") == 8 * 18
    assert b576.count("CPUs") == 8 * 36
    # assumed non-blocking 2-tier NVLink: 576 x 18 links / 36 down ports + 576 x 18 / 72 = 288 + 144
    assert b576.count("scale-up switch chips") == 432


def test_hgx_scaleup_has_no_cables_and_power(catalog):
    b = bom_for(catalog, "hgx-h100", 4)
    assert b.total("copper cables, scale-up") == 0
    assert b.power_kw_systems == pytest.approx(4 * 10.2)  # ~10.2 kW per DGX H100 [U]


def test_superpod_b200_counts_in_bom(catalog):
    # DGX SuperPOD B200, 16 SU = 512 DGX B200: 128 leaf, 128 spine, 64 core, 4096 cables per tier.
    b = bom_for(catalog, "hgx-b200", 512, fabric="ib-ndr-400g")
    assert b.count("switches, scale-out leaf") == 128
    assert b.count("switches, scale-out spine") == 128
    assert b.count("switches, scale-out core") == 64
    assert b.count("optical transceivers, scale-out") == 2 * 3 * 4096


def test_fat_tree_uses_dac_to_the_leaf(catalog):
    b = bom_for(catalog, "hgx-h100", 16, topology="fat-tree")
    assert b.count("copper cables (DAC), scale-out NIC-leaf") == 128
    assert b.count("optical transceivers, scale-out") == 2 * 128  # leaf-spine only


def test_partition_shares_hardware(catalog):
    b = bom_for(catalog, "gb200-nvl72", 9, domain_size=8)
    assert b.count("racks") == 1 and b.count("accelerators") == 72

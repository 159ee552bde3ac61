"""Cluster model: scale-up domains x system + scale-out fabric (+ front-end network), addressing,
routes, topology arrays / graphs, and the bill of materials.

>>> from clustertwin.cluster import build_cluster
>>> build_cluster("gb200-nvl72", domains=2).num_devices
144
"""

from .bom import BillOfMaterials, BomLine, bill_of_materials
from .fattree import FatTreeSizing, check_oversubscription, max_endpoints, size_fat_tree
from .model import Cluster, Route, build_cluster, torus_dims
from .topology import CompactTopology, build_compact, graph_bisection

__all__ = [
    "BillOfMaterials",
    "BomLine",
    "bill_of_materials",
    "Cluster",
    "CompactTopology",
    "FatTreeSizing",
    "Route",
    "build_cluster",
    "build_compact",
    "check_oversubscription",
    "graph_bisection",
    "max_endpoints",
    "size_fat_tree",
    "torus_dims",
]

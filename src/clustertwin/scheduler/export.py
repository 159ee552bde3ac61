"""Topology of a catalog cluster for the real schedulers: Kueue ``Topology`` (+ ResourceFlavor and node
labels), Volcano ``HyperNode`` list, Slurm ``topology.yaml`` (topology/block plugin).

Node names are ``<prefix><index>`` (5 digits), nodes numbered as in ``clustertwin cluster`` (host-major,
GPU ``g`` sits on node ``g // devices_per_host``). Levels: NVLink domain (``nvidia.com/gpu.clique``,
the GPU operator's clique label; omitted when a domain is one host), leaf block and spine block
(``network.topology.nvidia.com/leaf|spine``, NVIDIA Topograph's keys), host.

API versions written: Kueue ``kueue.x-k8s.io/v1alpha1`` Topology and ``v1beta1`` ResourceFlavor
(Kueue 0.9 - 0.13 topology-aware scheduling), Volcano ``topology.volcano.sh/v1alpha1`` HyperNode
(Volcano 1.11+), Slurm ``topology.yaml`` with a ``block`` topology (Slurm 25.05+; 23.02+ read the
same blocks from topology.conf ``BlockName=... Nodes=...``).
"""

from __future__ import annotations

import numpy as np
import yaml

from ..errors import UnknownNameError
from .inventory import Inventory

FORMATS = ("kueue", "volcano", "slurm")
CLIQUE = "nvidia.com/gpu.clique"
LEAF = "network.topology.nvidia.com/leaf"
SPINE = "network.topology.nvidia.com/spine"
HOST = "kubernetes.io/hostname"


def _name(prefix: str, i: int) -> str:
    return f"{prefix}{i:05d}"


def hostlist(prefix: str, idx: np.ndarray) -> str:
    """Slurm hostlist expression: ``gb-[00000-00017,00020]``."""
    idx = np.sort(np.asarray(idx))
    if idx.size == 0:
        return ""
    runs, start, prev = [], int(idx[0]), int(idx[0])
    for v in idx[1:]:
        v = int(v)
        if v == prev + 1:
            prev = v
            continue
        runs.append((start, prev))
        start = prev = v
    runs.append((start, prev))
    parts = [f"{a:05d}" if a == b else f"{a:05d}-{b:05d}" for a, b in runs]
    if len(parts) == 1 and runs[0][0] == runs[0][1]:
        return f"{prefix}{parts[0]}"
    return f"{prefix}[{','.join(parts)}]"


def _domain_leaf(inv: Inventory) -> np.ndarray:
    """Leaf block of each NVLink domain: the one most of its nodes hang off (a tree needs one parent)."""
    out = np.zeros(inv.num_domains, np.int64)
    for d in range(inv.num_domains):
        leaves = inv.node_leaf[inv.node_domain == d]
        out[d] = np.bincount(leaves).argmax()
    return out


def export_topology(inv: Inventory, fmt: str, *, name: str = "clustertwin", node_prefix: str = "node-",
                    only_healthy: bool = True) -> str:
    if fmt not in FORMATS:
        raise UnknownNameError("export format", fmt, FORMATS)
    nodes = np.flatnonzero(inv.healthy) if only_healthy else np.arange(inv.num_nodes)
    multi_host_domain = inv.nodes_per_domain > 1
    header = (f"# {inv.system} x {inv.num_domains} NVLink domains, {inv.fabric} {inv.topology} "
              f"({inv.tiers}-tier), {len(nodes)} schedulable nodes of {inv.num_nodes}; written by clustertwin\n")
    if fmt == "kueue":
        levels = [{"nodeLabel": SPINE}, {"nodeLabel": LEAF}]
        if multi_host_domain:
            levels.append({"nodeLabel": CLIQUE})
        levels.append({"nodeLabel": HOST})
        topo = {"apiVersion": "kueue.x-k8s.io/v1alpha1", "kind": "Topology", "metadata": {"name": name},
                "spec": {"levels": levels}}
        flavor = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": name},
                  "spec": {"nodeLabels": {"clustertwin/cluster": name}, "topologyName": name}}
        items = []
        for n in nodes:
            labels = {"clustertwin/cluster": name, SPINE: f"spine-{int(inv.node_spine[n])}",
                      LEAF: f"leaf-{int(inv.node_leaf[n])}"}
            if multi_host_domain:
                labels[CLIQUE] = f"nvl-{int(inv.node_domain[n])}"
            items.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": _name(node_prefix, int(n)),
                                                                              "labels": labels}})
        node_list = {"apiVersion": "v1", "kind": "List", "items": items}
        return header + yaml.safe_dump_all([topo, flavor, node_list], sort_keys=False)
    if fmt == "volcano":
        docs = []
        dleaf = _domain_leaf(inv)
        tier = 1
        live = set(np.unique(inv.node_domain[nodes]).tolist())
        by_dom: dict[int, list[int]] = {}
        for n in nodes:
            by_dom.setdefault(int(inv.node_domain[n]), []).append(int(n))
        if multi_host_domain:
            for d in range(inv.num_domains):
                members = [{"type": "Node", "selector": {"exactMatch": {"name": _name(node_prefix, n)}}}
                           for n in by_dom.get(d, [])]
                if members:
                    docs.append({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
                                 "metadata": {"name": f"nvl-{d}"}, "spec": {"tier": tier, "members": members}})
            tier += 1
            for lf in range(inv.num_leaves):
                members = [{"type": "HyperNode", "selector": {"exactMatch": {"name": f"nvl-{d}"}}}
                           for d in range(inv.num_domains) if dleaf[d] == lf and d in live]
                if members:
                    docs.append({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
                                 "metadata": {"name": f"leaf-{lf}"}, "spec": {"tier": tier, "members": members}})
        else:
            for lf in range(inv.num_leaves):
                members = [{"type": "Node", "selector": {"exactMatch": {"name": _name(node_prefix, int(n))}}}
                           for n in nodes if inv.node_leaf[n] == lf]
                if members:
                    docs.append({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
                                 "metadata": {"name": f"leaf-{lf}"}, "spec": {"tier": tier, "members": members}})
        tier += 1
        if inv.num_spines > 1:
            leaf_spine = np.zeros(inv.num_leaves, np.int64)
            leaf_spine[inv.node_leaf] = inv.node_spine
            names = {d["metadata"]["name"] for d in docs}
            for s in range(inv.num_spines):
                members = [{"type": "HyperNode", "selector": {"exactMatch": {"name": f"leaf-{lf}"}}}
                           for lf in range(inv.num_leaves) if leaf_spine[lf] == s and f"leaf-{lf}" in names]
                if members:
                    docs.append({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
                                 "metadata": {"name": f"spine-{s}"}, "spec": {"tier": tier, "members": members}})
        note = ("# tier 1 = NVLink domain, tier 2 = leaf block (a domain goes under the leaf most of its nodes use), "
                "tier 3 = spine block\n" if multi_host_domain else "# tier 1 = leaf block, tier 2 = spine block\n")
        return header + note + yaml.safe_dump_all(docs, sort_keys=False)
    # slurm topology/block: a block is an NVLink domain (or, for one-host domains, a leaf block)
    unit = inv.node_domain if multi_host_domain else inv.node_leaf
    blocks = []
    for u in range(int(unit.max()) + 1):
        members = nodes[unit[nodes] == u]
        if members.size:
            blocks.append({"block": f"b{u:04d}", "nodes": hostlist(node_prefix, members)})
    base = int(np.bincount(unit[nodes]).max())
    sizes = [base]
    while sizes[-1] * 2 <= len(nodes) and len(sizes) < 4:
        sizes.append(sizes[-1] * 2)
    doc = [{"topology": name, "cluster_default": True, "block": {"block_sizes": sizes, "blocks": blocks}}]
    note = (f"# blocks = {'NVLink domains' if multi_host_domain else 'leaf blocks'}; base block {base} nodes; "
            "jobs ask for --segment to keep groups inside one block\n")
    return header + note + yaml.safe_dump(doc, sort_keys=False)

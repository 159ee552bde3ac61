"""Serving-engine presets (``serving/data/engines.yaml``): the per-framework constants of the serving twin.

An engine preset holds what differs between serving stacks and is the same for every run of that stack:
host time per scheduler iteration, the share of free device memory the engine gives the KV cache,
whether FP8 KV caches run FP8 attention kernels, and how much of the MoE all-to-all is hidden behind
compute (two-batch overlap). Every value is documented with its source or fit procedure in the YAML.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

from ..errors import InputError, closest


@dataclass(frozen=True, slots=True, kw_only=True)
class EnginePreset:
    id: str
    name: str
    step_overhead_s: float  # host/scheduler time per forward pass not hidden behind the GPU
    kv_memory_fraction: float  # share of device memory the KV cache may use (basis: kv_memory_basis)
    fp8_attention: bool  # FP8 KV cache => FP8 attention kernels (FP8 tensor-core peak)
    a2a_overlap: float  # fraction of the EP all-to-all hidden behind compute (two-batch overlap)
    default_max_num_tokens: int
    default_max_batch: int
    mixes_whole_prompts: bool = True  # without chunked prefill, whole prompts share a pass with decodes
    # what kv_memory_fraction is a share of: "free" = the memory left after weights and activations
    # (TensorRT-LLM free_gpu_memory_fraction), "total" = the whole device, weights included (vLLM
    # gpu_memory_utilization, SGLang mem_fraction_static); engines.yaml cites both
    kv_memory_basis: str = "free"
    # speculative decoding / MTP the stack runs in its published deployment, for a run that does not say
    # (draft tokens per step, per-draft acceptance); 0: none
    default_spec_tokens: int = 0
    default_acceptance: float = 0.0
    # DP-attention decode passes replay CUDA graphs captured at these per-rank batch sizes (ascending), a
    # decode-only pass padded up to the next one (engines.yaml adp_graph_batch_sizes); (): not modelled
    adp_graph_batch_sizes: tuple[int, ...] = ()
    # the stack places experts with an expert-parallel load balancer (EPLB: redundant experts, placement from
    # the observed load), which removes most of the hot-expert spread of the EP ranks' load (engines.yaml eplb)
    eplb: bool = False
    # fused-attention kernels the stack runs, per chip: executed FLOP/s / dense peak (prefill / GQA-MHA
    # decode) and of the absorbed MLA decode kernel; a chip not listed keeps its training value
    attention_efficiency: dict[str, float] = field(default_factory=dict)
    mla_decode_efficiency: dict[str, float] = field(default_factory=dict)
    # share of the catalog MAMF the stack's GEMM kernels reach, per chip (FITTED per engine on a chip
    # family, see engines.yaml); a chip not listed takes engines.yaml `chips`, else its training value
    gemm_mamf_scale: dict[str, float] = field(default_factory=dict)
    source: str = ""
    fitted: dict[str, str] = field(default_factory=dict)


@lru_cache(maxsize=1)
def _table() -> dict:
    text = (resources.files("clustertwin.serving") / "data" / "engines.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def engine_ids() -> list[str]:
    return sorted(_table()["engines"])


def _basis(key: str, value) -> str:
    v = str(value).strip().lower()
    if v not in ("free", "total"):
        raise InputError(f"engines.yaml engine {key!r}: kv_memory_basis {value!r} is not 'free' or 'total'",
                         hint="free: share of the memory left after weights (TensorRT-LLM); total: share of the "
                              "whole device (vLLM, SGLang)")
    return v


def get_engine(name: str) -> EnginePreset:
    table = _table()["engines"]
    key = (name or "generic").strip().lower()
    if key not in table:
        raise InputError(f"unknown serving engine {name!r}", suggestions=closest(key, table),
                         hint="engines: " + ", ".join(sorted(table)))
    d = dict(table[key])
    return EnginePreset(
        id=key, name=d.get("name", key), step_overhead_s=float(d["step_overhead_ms"]) * 1e-3,
        kv_memory_fraction=float(d["kv_memory_fraction"]), fp8_attention=bool(d["fp8_attention"]),
        a2a_overlap=float(d["a2a_overlap"]), default_max_num_tokens=int(d["default_max_num_tokens"]),
        default_max_batch=int(d["default_max_batch"]), mixes_whole_prompts=bool(d.get("mixes_whole_prompts", True)),
        kv_memory_basis=_basis(key, d.get("kv_memory_basis", "free")),
        default_spec_tokens=int(d.get("default_spec_tokens", 0)), default_acceptance=float(d.get("default_acceptance", 0.0)),
        eplb=bool(d.get("eplb", False)),
        adp_graph_batch_sizes=tuple(sorted(int(x) for x in (d.get("adp_graph_batch_sizes") or ()))),
        attention_efficiency={k: float(v) for k, v in (d.get("attention_efficiency") or {}).items()},
        mla_decode_efficiency={k: float(v) for k, v in (d.get("mla_decode_efficiency") or {}).items()},
        gemm_mamf_scale={k: float(v) for k, v in (d.get("gemm_mamf_scale") or {}).items()},
        source=str(d.get("source", "")),
        fitted={k: str(v) for k, v in (d.get("fitted") or {}).items()},
    )


def engine_for_framework(text: str) -> EnginePreset:
    """The preset for a framework as a source names it ("TensorRT-LLM (trtllm-bench ...)", "vLLM", "SGLang ...")."""
    t = (text or "").lower()
    for key, words in (("trtllm", ("tensorrt", "trt-llm", "trtllm")), ("vllm", ("vllm",)),
                       ("sglang", ("sglang",)), ("deepseek", ("deepseek",)), ("cloudmatrix-infer", ("cloudmatrix",))):
        if any(w in t for w in words):
            return get_engine(key)
    return get_engine("generic")


def _arch_of() -> dict[str, str]:
    """Architecture (catalog ``arch``: hopper, blackwell, blackwell-ultra, cdna3 ...) of every catalog chip id,
    from the loaded (cached) catalog rather than a second parse of its YAML."""
    from ..catalog import load_catalog

    return {k: str(a.arch or "") for k, a in load_catalog().accelerators.items()}


def family_value(values: Mapping[str, Any], acc_id: str, arch: str = "") -> Any | None:
    """The value a per-chip serving table gives a chip: its own entry, else its architecture family's.

    A chip the table does not list (GH200, H100 NVL / PCIe, H20 next to the listed H100 SXM / H200 / H800)
    takes the value every listed chip of the same ``arch`` shares: the serving constants here describe
    kernels (FlashAttention-3, FlashMLA, DeepGEMM / CUTLASS tile pipelines) that are built per SM
    architecture and run unchanged on every chip of it, while the chip's own peak, MAMF, bandwidth and
    memory come from the catalog. None when no chip of the family is listed or the listed ones differ."""
    if acc_id in values:
        return values[acc_id]
    if not arch:
        return None
    arch_of = _arch_of()
    fam = [v for k, v in values.items() if arch_of.get(k) == arch]
    if fam and all(v == fam[0] for v in fam[1:]):
        return fam[0]
    return None


def family_note(acc_id: str, arch: str) -> str:
    """The note a chip gets when its serving kernel constants come from its architecture family, else ""."""
    listed = set(_table().get("chips") or {}) | set((_table().get("low_precision_gemm") or {}).get("chips") or ())
    for eng in (_table().get("engines") or {}).values():
        for key in ("attention_efficiency", "mla_decode_efficiency", "gemm_mamf_scale"):
            listed |= set((eng or {}).get(key) or {})
    if acc_id in listed or not arch:
        return ""
    arch_of = _arch_of()
    peers = sorted(k for k in listed if arch_of.get(k) == arch)
    if not peers:
        return ""
    return (f"{acc_id}: serving kernel constants (attention / MLA-decode efficiency, GEMM scale, low-precision K "
            f"overhead) of its {arch} family ({', '.join(peers)}), assumed: same SM architecture, same kernels")


def serving_chip_constants(acc_id: str, arch: str = "") -> dict:
    """Per-chip serving overrides of the training efficiency constants (engines.yaml ``chips``; an unlisted
    chip takes its architecture family's, see ``family_value``)."""
    return dict(family_value(_table().get("chips") or {}, acc_id, arch) or {})


def low_precision_k_overhead(acc_id: str, arch: str = "") -> dict[str, float]:
    """Per-tile K overhead (K units) of the serving FP8 / NVFP4 GEMMs on a chip, by GEMM dtype
    (engines.yaml ``low_precision_gemm``); empty for a chip neither it nor its architecture family is
    listed for (training value kept)."""
    lp = _table().get("low_precision_gemm") or {}
    chips = tuple(lp.get("chips") or ())
    if family_value(dict.fromkeys(chips, True), acc_id, arch) is None:
        return {}
    return {k: float(v) for k, v in (lp.get("k_overhead") or {}).items()}


def low_precision_k_reference() -> float:
    """K of the shape the catalog MAMF was measured at (the overhead is normalised to keep MAMF there)."""
    return float((_table().get("low_precision_gemm") or {}).get("mamf_k", 8192))

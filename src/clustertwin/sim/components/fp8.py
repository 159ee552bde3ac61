"""Quantisation kernels of the low-precision GEMM recipes (FP8 tensorwise / rowwise, MXFP8, NVFP4): the
HBM-bound casts that every FP8/FP4 linear layer adds beside its GEMM. One function for dense layers
(``elementwise.py``) and expert GEMMs (``moe.py``).

A linear layer Y = X W^T needs each operand quantised in the two layouts its GEMMs read it in: X for
fprop (scaled along K) and, transposed, for wgrad (scaled along the tokens); the output gradient dY for
dgrad and, transposed, for wgrad; W for fprop and, transposed, for dgrad (Hopper's FP8 tensor cores take
only the TN layout; block scales run along the contraction axis, so block-scaled recipes need both
copies on every chip). Bytes per element of an operand, both copies together (``RECIPES``):

* ``tensorwise`` (``precision`` = fp8: per-tensor current scaling; TE ``Float8CurrentScaling``, torchao
  tensorwise dynamic scaling): the scale needs the tensor's amax before the cast, so one reduction pass
  (read BF16: 2 B) and a fused cast + transpose (read 2 B, write 1 + 1 B): 6 B, 2 kernels.
* ``rowwise`` (torchao rowwise): one scale per row of each layout, so no global pass, but the two layouts
  scale along different axes and cannot share data: two casts, each read 2 B + write 1 B: 6 B, 2 kernels.
  No ``precision`` value of the validation data names it (fp8 there is per-tensor scaling).
* ``mxfp8`` (OCP Microscaling v1.0: 32-element blocks, one E8M0 scale each; TE ``MXFP8BlockScaling``):
  block amax and cast in one kernel that writes both layouts: read 2 B, write 1 + 1 B + 2 x 1/32 B
  scales: 4.0625 B, 1 kernel.
* ``mxfp8-per-layout`` (torchao's MXFP8 training linear, stack ``mxfp8_cast_per_layout``: torchao/prototype/
  mx_formats/mx_linear.py ``mx_mm``): each layout is its own cast from the BF16 operand - X and W along K in the
  forward (``MXTensor.to_mx``, the Triton dim0 kernel), W, dY and the saved BF16 X along the other axis in the
  backward (``_to_mxfp8_dim1_kernel_wrapper``, the CUDA dim1 kernel), dY along K for dgrad: two reads of the BF16
  operand, each writing one FP8 copy + its 1/32 B scales: 2 x (2 + 1 + 1/32) = 6.0625 B, 2 kernels.
* ``nvfp4`` (16-element blocks with an E4M3 scale and one FP32 per-tensor scale; TE ``NVFP4BlockScaling``,
  Mishra et al. arXiv:2509.25149 Sec. 2-4; the random Hadamard transform of the wgrad operands is fused
  into the cast): the per-tensor scale needs a global amax pass (read 2 B), then one cast writing both
  layouts: read 2 B, write 0.5 + 0.5 B + 2 x 1/16 B scales: 5.125 B, 2 kernels.
* ``nvfp4-rht`` (Transformer Engine's NVFP4 recipe, stack ``nvfp4_rht``): the operands of the wgrad GEMM, X and
  dY, go through a 16-point random Hadamard transform in their columnwise (wgrad) copy only
  (``NVFP4BlockScaling``: ``fp4_quant_fwd_inp`` / ``fp4_quant_bwd_grad`` ``random_hadamard_transform=True``,
  "RHT is currently only applied to column-wise usage"; weights 2D-quantised without it). TE's
  ``NVFP4Quantizer::quantize_impl`` (pytorch/csrc/quantizer.cpp) then runs the amax pass (``nvte_hadamard_transform_
  amax``: the plain and the transformed amax in one read, 2 B), the rowwise cast on its own (``nvte_quantize_v2``:
  read 2 B, write 0.5 + 1/16 B) and the fused transform + columnwise cast (``nvte_hadamard_transform_cast_fusion_
  columnwise``: read 2 B, write 0.5 + 1/16 B): 7.125 B, 3 kernels. W keeps ``nvfp4``. torchtitan's torchao NVFP4
  recipe keeps ``nvfp4`` for every operand (its kernels were not read: no transform modelled).

Where they run: X's quantisation in the forward (the transposed copy is saved for wgrad), dY's in the
backward, W's once per micro-batch forward (torchao ``Float8Linear`` casts the weight in every forward;
Transformer Engine re-uses the first micro-batch's FP8 weights for the step: Megatron passes
``is_first_microbatch``, stack ``fp8_weight_cache``). ASSUMPTION: no cast is fused into a neighbouring
norm / activation kernel (TE fuses some for delayed scaling; current scaling needs the amax first).
"""

from __future__ import annotations

from typing import NamedTuple

from ... import xp as np  # numpy, or plain numbers for one plan (clustertwin/xp.py)
from ..kernels import mem_time


class Recipe(NamedTuple):
    name: str
    bytes_per_elem: float  # HBM bytes per operand element to produce both quantised layouts
    kernels: float  # kernels per operand


RECIPES: dict[str, Recipe] = {
    "tensorwise": Recipe("tensorwise", 2.0 + 2.0 + 2.0 * 1.0, 2.0),
    "rowwise": Recipe("rowwise", 2.0 * (2.0 + 1.0), 2.0),
    "mxfp8": Recipe("mxfp8", 2.0 + 2.0 * (1.0 + 1.0 / 32.0), 1.0),
    "mxfp8-per-layout": Recipe("mxfp8-per-layout", 2.0 * (2.0 + 1.0 + 1.0 / 32.0), 2.0),
    "nvfp4": Recipe("nvfp4", 2.0 + 2.0 + 2.0 * (0.5 + 1.0 / 16.0), 2.0),
    "nvfp4-rht": Recipe("nvfp4-rht", 2.0 + 2.0 * (2.0 + 0.5 + 1.0 / 16.0), 3.0),
}

# the recipe a step dtype runs (validation README: `precision` fp8 = per-tensor current scaling)
DTYPE_RECIPE = {"fp8": "tensorwise", "mxfp8": "mxfp8", "nvfp4": "nvfp4", "fp4": "nvfp4"}


def recipe_for(dtype: str) -> Recipe | None:
    """The quantisation recipe of a GEMM dtype (None for BF16/FP16: no casts)."""
    name = DTYPE_RECIPE.get(dtype)
    return RECIPES[name] if name else None


def quant_bytes(recipe: Recipe, elems):
    """HBM bytes to quantise ``elems`` operand elements into both layouts."""
    return recipe.bytes_per_elem * np.asarray(elems, dtype=float)


def quant_time(hw, dtype: str, *, x_elems, dy_elems, w_elems=0.0, operands: float = 1.0, weight_share=1.0,
               rht: bool = False, mx_per_layout: bool = False):
    """(forward, backward) seconds of the quantisation kernels of GEMMs with ``x_elems`` input, ``dy_elems``
    output-gradient and ``w_elems`` weight elements in total, issued as ``operands`` separately quantised
    tensors of each kind (kernel-launch count); ``weight_share`` is the share of micro-batches that cast the
    weights (1, or 1/m with TE's FP8 weight cache); ``rht``: NVFP4 X and dY take the ``nvfp4-rht`` recipe (W keeps
    ``nvfp4``); ``mx_per_layout``: MXFP8 operands take the ``mxfp8-per-layout`` recipe (torchao). Zero for
    BF16/FP16 steps."""
    r = recipe_for(dtype)
    if r is None:
        z = np.zeros_like(np.asarray(x_elems, dtype=float))
        return z, z
    if mx_per_layout and r.name == "mxfp8":
        r = RECIPES["mxfp8-per-layout"]
    a = RECIPES["nvfp4-rht"] if rht and r.name == "nvfp4" else r  # X and dY: the wgrad copy through the RHT
    fwd = mem_time(hw, quant_bytes(a, x_elems) + weight_share * quant_bytes(r, w_elems),
                   operands * (a.kernels + r.kernels * np.asarray(weight_share, dtype=float)))
    bwd = mem_time(hw, quant_bytes(a, dy_elems), a.kernels * operands)
    return fwd, bwd

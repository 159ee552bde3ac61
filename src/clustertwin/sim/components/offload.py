"""Host (CPU) offload: what moving model states or activations to host memory costs a step.

Interface: ``optimizer_offload_s(st, dp, offload) -> time_s`` replaces the GPU optimizer step when the
optimizer lives on the CPU, and ``activation_offload_s(st, n_layers, layer_bytes, t_fwd, t_bwd) -> time_s``
is the exposed part of the activation transfers. Memory is in workload/memory.py (``offload``,
``activation_offload_layers``); docs/modelling.md "CPU offload" says what each framework moves.

* Optimizer offload (DeepSpeed ZeRO-Offload, Megatron --optimizer-cpu-offload): every step the rank's
  gradient shard goes to the host, the CPU runs Adam over the shard, and the updated 16-bit parameters come
  back. Ren et al., ZeRO-Offload (USENIX ATC'21) Sec. 4: the CPU step sits on the critical path unless the
  one-step delayed update is on; Megatron-Bridge docs/training/cpu-offloading.md measures the step 4.2x
  slower at 100 % offload (3.9x with overlap_cpu_optimizer_d2h_h2d) on Qwen3-30B-A3B and finds the CPU Adam,
  not the transfers, dominant. Modelled serially: transfers at the host link rate + Adam's ~30 B per
  parameter read and written (as on the GPU, MODELLING.md 6) at the host memory bandwidth each GPU of the
  host gets (HOST_MEMORY_GBPS / GPUs per host).
* "params" offload (ZeRO-3 offload_param, FSDP CPUOffload): in addition each micro-batch moves the 16-bit
  parameter shard to the GPU for every gather pass and the gradient shard back: exposed (ASSUMPTION: the
  copies are not pipelined with the prefetched all-gathers).
* Activation offload (Megatron-Core cpu_offloading: TE's offload context): layer i's saved activations go to
  the host while layer i+1 runs forward and come back while layer i+1 runs backward, so each offloaded layer
  exposes max(0, transfer - one layer's compute) in each direction.
"""

from __future__ import annotations

from ... import xp as np  # numpy, or plain numbers for one plan (clustertwin/xp.py)
from .dp_comm import DPComm
from .stage import Stage

# GPU <-> host link per direction (GB/s). PCIe: PCI-SIG signalling rates (Gen4 x16 31.5, Gen5 x16 63, as the
# catalog's pcie4/pcie5 fabrics); Grace-based superchips: NVLink-C2C 900 GB/s bidirectional per superchip
# (shared/hardware/README.md [U]) -> 450 per direction on GH200; GB200/GB300 share one Grace between two GPUs,
# so 225 per GPU and direction (ASSUMPTION: an even split). First match on the accelerator id wins.
HOST_LINK_GBPS = (("gh200", 450.0), ("gb200", 225.0), ("gb300", 225.0), ("a100", 31.5), ("v100", 15.75),
                  ("mi250", 31.5))
HOST_LINK_DEFAULT_GBPS = 63.0  # PCIe Gen5 x16 (H100 / H200 / B200 / B300 HGX, MI300X)
# host memory bandwidth per host shared by its GPUs (GB/s). ASSUMPTION: a two-socket x86 host with 8 DDR5-4800
# channels per socket (2 x 307 GB/s peak) sustains about half of its peak in a streaming CPU Adam (~300 GB/s);
# no published per-host figure for the benchmark hosts is in the shared reference
HOST_MEMORY_GBPS = 300.0
ADAM_BYTES_PER_PARAM = 30.0  # read + written per parameter by an Adam step (MODELLING.md 6, as on the GPU)


def host_link_bps(st: Stage) -> float:
    acc = str(getattr(st.hw.system.accelerator, "id", "") or "").lower()
    for key, gbps in HOST_LINK_GBPS:
        if key in acc:
            return gbps * 1e9
    return HOST_LINK_DEFAULT_GBPS * 1e9


def _shard(st: Stage, dp: DPComm):
    return np.where(st.zero >= 1, dp.dense_params / dp.n_dp + dp.expert_params / dp.n_edp,
                    dp.dense_params + dp.expert_params)


def optimizer_offload_s(st: Stage, dp: DPComm, offload, grad_bytes: float):
    """Step time of an optimizer in host memory (``offload`` code >= 1), 0 where the optimizer is on the GPU."""
    off = np.asarray(offload)
    shard = _shard(st, dp)
    link = host_link_bps(st)
    per_host = float(max(1, int(getattr(st.hw.system, "devices_per_host", 8) or 8)))
    cpu_adam = ADAM_BYTES_PER_PARAM * shard / (HOST_MEMORY_GBPS * 1e9 / per_host)
    transfers = (float(grad_bytes) + 2.0) * shard / link
    # "params": every micro-batch gathers from host memory (16-bit shard up per gather pass: forward,
    # backward and the recompute forward) and sends its gradient shard back
    passes = np.where(st.rc == 2, 3.0, 2.0)
    per_mb = (2.0 * passes + float(grad_bytes)) * shard / link
    return np.where(off >= 1, cpu_adam + transfers, 0.0) + np.where(off == 2, st.m * per_mb, 0.0)


def activation_offload_s(st: Stage, n_layers, layer_bytes, t_fwd, t_bwd):
    """Exposed activation-offload transfers per step: each of the ``n_layers`` offloaded layers moves
    ``layer_bytes`` to the host behind one layer's forward ``t_fwd`` and back behind one layer's backward
    ``t_bwd``, every micro-batch."""
    n = np.asarray(n_layers, dtype=float)
    t_x = np.asarray(layer_bytes, dtype=float) / host_link_bps(st)
    per_layer = np.maximum(t_x - t_fwd, 0.0) + np.maximum(t_x - t_bwd, 0.0)
    return np.where(n > 0, st.m * n * per_layer, 0.0)

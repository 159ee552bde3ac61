"""A tiny fake evaluator used only in tests: cheap closed-form step time and memory.

It is not a performance model of anything; it only has the shape the planner relies on (numpy in,
numpy out, a breakdown whose parts sum to the step time, memory that falls with sharding).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import numpy as np

from clustertwin.planner.evaluator import Evaluation
from clustertwin.planner.space import ModelShape
from clustertwin.workload.rules import memory_fits


@dataclass(frozen=True)
class FakeEvaluator:
    params: float = 7e9
    hidden: int = 4096
    layers: int = 32
    num_gpus: int = 64
    global_batch: int = 256
    seq_len: int = 4096
    hbm_bytes: float = 80e9
    peak_flops: float = 1e15
    delay_s: float = 0.0  # sleep per evaluate() call (to slow a sweep down in tests)
    memory_margin_gb: float = 2.0  # the planner's default fit margin

    @property
    def memory_capacity_bytes(self) -> float:
        return self.hbm_bytes

    def memory_bytes(self, plans):
        tp, pp, dp, cp = (plans[k].astype(float) for k in ("tp", "pp", "dp", "cp"))
        zero, mb, rc = plans["zero"], plans["micro_batch"].astype(float), plans["recompute"]
        shard = self.params / (tp * pp)
        states = shard * np.select([zero == 0, zero == 1, zero == 2], [18.0, 6 + 12 / dp, 2 + 16 / dp], 18 / dp)
        act_per_layer = self.seq_len * mb * self.hidden * 34.0 / (tp * cp)
        act_per_layer = act_per_layer * np.select([rc == 0, rc == 1], [1.0, 0.7], 2.0 / 34.0)
        return states + act_per_layer * self.layers

    def evaluate(self, plans):
        if self.delay_s:
            time.sleep(self.delay_s)
        tp, pp, dp, cp = (plans[k].astype(float) for k in ("tp", "pp", "dp", "cp"))
        vpp, mb, rc = plans["vpp"].astype(float), plans["micro_batch"].astype(float), plans["recompute"]
        tokens = self.global_batch * self.seq_len
        flops = 6 * self.params * tokens / self.num_gpus
        eff = 0.6 * (1 - 0.05 * np.log2(tp)) * (1 - 0.1 / mb)
        compute = flops / (self.peak_flops * eff) * np.select([rc == 0, rc == 1], [1.0, 1.03], 1.33)
        m = self.global_batch / (mb * dp)
        bubble = compute * (pp - 1) / (vpp * m)
        tp_comm = compute * 0.02 * (tp - 1)
        dp_comm = 2 * self.params / (tp * pp) * 2 / 50e9 * (dp > 1)
        cp_comm = compute * 0.03 * (cp - 1)
        step = compute + bubble + tp_comm + dp_comm + cp_comm
        mem = self.memory_bytes(plans)
        mfu = flops / step / self.peak_flops
        bd = {"compute": compute, "pp_bubble": bubble, "tp_comm": tp_comm, "dp_comm": dp_comm, "cp_comm": cp_comm}
        names = np.asarray(sorted(bd), dtype=object)
        return Evaluation(
            metrics={
                "step_time_s": step,
                "tokens_per_s": tokens / step,
                "mfu": mfu,
                "hfu": mfu * np.select([rc == 0, rc == 1], [1.0, 1.03], 1.33),
                "tflops_per_gpu": flops / step / 1e12,
                "memory_gb_per_gpu": mem / 1e9,
            },
            fits_memory=memory_fits(mem, self.hbm_bytes, self.memory_margin_gb),  # the one memory rule
            breakdown=bd,
            bottleneck=names[np.argmax(np.stack([bd[k] for k in sorted(bd)]), axis=0)],
        )


SHAPE = ModelShape(name="fake-7b", num_layers=32, num_attention_heads=32, num_kv_heads=8)


def resolve(name):
    return SHAPE


def fake_factory(job, catalog=None):
    """An evaluator factory for sweeps: (model, evaluator) sized by the job."""
    return SHAPE, FakeEvaluator(num_gpus=job.num_gpus, global_batch=job.global_batch, seq_len=job.seq_len,
                         delay_s=float(job.extra.get("delay_s", 0.0)) if job.extra else 0.0)


STALL_ENV = "CLUSTERTWIN_TEST_STALL_AFTER"  # "DIR:K": jobs after the K-th (across processes) never finish


def _stall_gate() -> None:
    """Test-only gate of the kill/resume test: each job takes a numbered ticket (an exclusively created
    file, so the count is exact across worker processes); ticket K and later block until the process is
    killed. The sweep then stops at a known point whatever the machine's load."""
    spec = os.environ.get(STALL_ENV)
    if not spec:
        return
    folder, k = spec.rsplit(":", 1)
    i = 0
    while True:
        try:
            os.close(os.open(os.path.join(folder, f"ticket-{i}"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            break
        except FileExistsError:
            i += 1
    while i >= int(k):
        time.sleep(1.0)


def fake_cost(job, catalog=None):
    """Cost and power that grow with the GPU count and fall with oversubscription (test only)."""
    _stall_gate()
    return 30_000.0 * job.num_gpus * (1.0 + 0.1 / job.oversubscription), 1_000.0 * job.num_gpus


def picky_factory(job, catalog=None):
    """Like fake_factory, but refuses A100 designs the way an engine refuses a precision (test only)."""
    from clustertwin.errors import InputError

    if job.system == "dgx-a100":
        raise InputError("NVIDIA A100 has no fp8 tensor-core peak in the catalog")
    return fake_factory(job, catalog)

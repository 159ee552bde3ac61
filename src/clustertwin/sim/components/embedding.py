"""Output layer and loss on the last pipeline stage, one micro-batch: the logits GEMM (vocabulary
split by TP, BF16) and the FP32 cross-entropy kernels (40 % forward, 60 % backward of 16 B per logit).
Multi-token prediction (``mtp_depth``) repeats the head per depth; the embedding lookup is not costed
(a gather, negligible).

Interface: ``logits(st) -> (fwd_s, bwd_s)``.
"""

from __future__ import annotations

from ..kernels import gemm_train_time, mem_time
from .stage import Stage


def logits(st: Stage):
    model, hw, t, tok = st.model, st.hw, st.t, st.tok
    h, V = float(model.hidden_size), float(model.vocab_size)
    lf, lb = gemm_train_time(hw, tok, V / t, h, in_bytes=st.act_bytes)  # BF16 (FP32 in a TF32 / FP32 step)
    ce = mem_time(hw, tok * V / t * 16.0, 4)
    logits_f = lf + 0.4 * ce
    logits_b = lb + 0.6 * ce
    if model.mtp_depth:
        logits_f = logits_f * (1 + model.mtp_depth)
        logits_b = logits_b * (1 + model.mtp_depth)
    return logits_f, logits_b

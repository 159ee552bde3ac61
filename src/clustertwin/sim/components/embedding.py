"""Output layer and loss on the last pipeline stage, one micro-batch: the logits GEMM (vocabulary
split by TP; BF16 inputs, at the step dtype's tensor-core rate where the stack converts the output layer
(``output_layer_low_precision``: a torchao conversion of every nn.Linear), else at the BF16 rate (torchtitan and
llm-foundry skip the LM head in their FP8 / MX / NVFP4 recipes, workload/stacks.py): Megatron-Core keeps the
output layer out of TE's FP8 region) and the FP32 cross-entropy kernels (40 % forward, 60 % backward of
16 B per logit).
Multi-token prediction (``mtp_depth``) repeats the head per depth; the embedding lookup is not costed
(a gather, negligible).

Interface: ``logits(st) -> (fwd_s, bwd_s)``.
"""

from __future__ import annotations

from ..kernels import gemm_time, gemm_train_time, mem_time
from ..machine import mamf_for
from .stage import FP4_DTYPES, FP8_DTYPES, Stage

LOW_PRECISION = FP8_DTYPES + FP4_DTYPES


def logits(st: Stage):
    model, hw, t, tok = st.model, st.hw, st.t, st.tok
    h, V = float(model.hidden_size), float(model.vocab_size)
    if hw.dtype in LOW_PRECISION and not st.logits_low_precision:  # BF16 output layer in an FP8/FP4 step
        pk, mf = hw.peak_bf16, mamf_for(hw.eff.mamf_fraction, "bf16") * hw.eff.gemm_mamf_scale
        N = V / t
        lf = gemm_time(hw, tok, N, h, peak=pk, mamf=mf)
        lb = gemm_time(hw, tok, h, N, peak=pk, mamf=mf) + gemm_time(hw, h, N, tok, peak=pk, mamf=mf)
    else:
        lf, lb = gemm_train_time(hw, tok, V / t, h, in_bytes=st.act_bytes)  # (FP32 in a TF32 / FP32 step)
    ce = mem_time(hw, tok * V / t * 16.0, 4)
    logits_f = lf + 0.4 * ce
    logits_b = lb + 0.6 * ce
    if model.mtp_depth:
        logits_f = logits_f * (1 + model.mtp_depth)
        logits_b = logits_b * (1 + model.mtp_depth)
    return logits_f, logits_b

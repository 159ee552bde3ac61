"""Cost components of one pipeline stage of a training step, one module each, composed by
``clustertwin.sim.costs.stage_costs``.

Every component is a pure, vectorised function of a ``stage.Stage`` (the plan degrees broadcast once,
plus the model and the ``Hardware``) and returns arrays of per-rank seconds (and bytes where a later
component needs them). Interfaces are listed in each module's docstring:

    stage.py        Stage + stage_inputs: the shared inputs (degrees, tokens per rank, dtype bytes)
    attention.py    QKV/output projections (standard, GQA, MLA) and the attention core (+ CP ring merge)
    mlp.py          dense MLP GEMMs
    moe.py          router, routed + shared expert GEMMs, permutation kernels, all-to-all bytes
    elementwise.py  norms, residuals, activation, RoPE, FP8 casts
    fp8.py          FP8/FP4 recipe quantisation bytes and time (tensorwise/rowwise/MXFP8/NVFP4), dense + experts
    embedding.py    output layer + cross-entropy (+ multi-token prediction)
    tp_comm.py      TP / SP collectives
    cp_comm.py      CP K,V exchange (ring or all-gather)
    ep_comm.py      EP all-to-all (dispatch + combine)
    pp_comm.py      pipeline P2P
    dp_comm.py      DP / ZeRO / FSDP gradient and parameter collectives
    optimizer.py    optimizer step and per-step overhead

To add a cost: put it in the component it belongs to (or a new module here), add its field to
``STAGE_COST_FIELDS`` in ``sim/costs.py`` and use it in both engines (``sim/analytical.py`` and
``sim/event/adapter.py``). Overlap/exposure is the engines' decision, never a component's.
"""

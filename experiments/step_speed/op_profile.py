"""Where a step's time goes: trace a few calls with the TF profiler and sum the time of its
TensorFlow op events by op type.

The trace is TensorFlow's own (``tf.profiler.experimental``, the XPlane that TensorBoard's
profile plugin reads); this module only aggregates it. An op event lies on one of the
executor's ``tf_Compute`` lines of the host plane, named ``scope/name:OpType`` with the op
type as its display name; work that
an op hands to the intra-op (Eigen) pool is inside its event, so summing the op events counts
each op once. Ops that run in parallel on two executor threads both count, so the total can
exceed the wall time. A step compiled by XLA runs as one executable, counted as the op type
``XlaExecutable`` (its HLO thunks run on the intra-op pool and are not split out here).
"""
from __future__ import annotations

import glob
import os
import tempfile
import time
from collections import defaultdict
from typing import Callable, Dict, Mapping, Optional

XLA_EVENT, XLA_OP = "CpuExecutable::ExecuteAsyncOnStream", "XlaExecutable"
MATMUL_TYPES = ("MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "_MklMatMul",
                "_FusedMatMul", "_MklFusedMatMul", "_MklBatchMatMul", "_MklBatchMatMulV2",
                "_MklNativeBatchMatMulV2", "_MklNativeFusedMatMul", "_MklNativeMatMul",
                "_MklFusedBatchMatMulV2", "_MklNativeFusedBatchMatMulV2")


def op_time_by_type(xplane_path: str) -> Dict[str, float]:
    """Seconds of TF op events per op type in one ``*.xplane.pb`` trace (host plane).

    TensorFlow's executor runs a step's ops on ``tf_Compute`` threads (an XLA cluster there is one
    ``CpuExecutable`` event). A step compiled whole (Keras 3's ``jit_compile=True``) runs as one
    XLA function called from the Python thread instead, with no executor: then its
    ``__inference_...`` calls on that thread are the XLA op's time."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    with open(xplane_path, "rb") as f:
        space.ParseFromString(f.read())
    totals: Dict[str, float] = defaultdict(float)
    whole_functions = 0.0
    for plane in space.planes:
        if not plane.name.startswith("/host:"):
            continue
        for line in plane.lines:
            executor = line.name.startswith("tf_Compute")
            if not executor and line.name != "python":
                continue
            for event in line.events:
                meta = plane.event_metadata[event.metadata_id]
                seconds = event.duration_ps * 1e-12
                if not executor:
                    if meta.display_name.startswith("__inference_"):
                        whole_functions += seconds
                elif meta.name == XLA_EVENT:
                    totals[XLA_OP] += seconds
                elif meta.display_name:  # not executor bookkeeping (ExecutorState::Process ...)
                    totals[meta.display_name] += seconds
    if not totals and whole_functions:
        totals[XLA_OP] = whole_functions
    if not totals:
        raise ValueError(f"{xplane_path}: no TensorFlow op events on the host plane")
    return dict(totals)


def trace(step: Callable[[], None], steps: int, logdir: Optional[str] = None) -> Dict[str, object]:
    """Call ``step`` ``steps`` times under the TF profiler.

    Returns ``{"wall_s_per_step", "op_s_per_step": {op type: seconds per step}}``. The trace is
    written under ``logdir`` (a temporary directory, removed afterwards, when None).
    """
    import tensorflow as tf

    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    with tempfile.TemporaryDirectory(prefix="op-profile-") as tmp:
        target = logdir or tmp
        tf.profiler.experimental.start(target)
        start = time.perf_counter()
        try:
            for _ in range(steps):
                step()
            wall = time.perf_counter() - start
        finally:
            tf.profiler.experimental.stop()
        found = sorted(glob.glob(os.path.join(target, "plugins", "profile", "*", "*.xplane.pb")),
                       key=os.path.getmtime)
        if not found:
            raise RuntimeError(f"the TF profiler wrote no trace under {target}")
        totals = op_time_by_type(found[-1])
    return {"wall_s_per_step": wall / steps,
            "op_s_per_step": {k: v / steps for k, v in totals.items()}}


def summarise_ops(op_s: Mapping[str, float], top: int = 12) -> Dict[str, object]:
    """Op time per step, the matmuls' share of it, and the ``top`` op types by time."""
    total = sum(op_s.values())
    matmul = sum(v for k, v in op_s.items() if k in MATMUL_TYPES)
    ranked = sorted(op_s.items(), key=lambda kv: -kv[1])
    return {"op_s_per_step": total, "matmul_share": matmul / total if total else 0.0,
            "top": [{"op": k, "s_per_step": v, "share": v / total} for k, v in ranked[:top]]}

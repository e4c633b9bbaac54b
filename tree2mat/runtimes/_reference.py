"""onnx's reference evaluator (``onnx.reference``) as a runtime, its ``GatherElements`` fixed."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx

from tree2mat.errors import VerificationError
from tree2mat.runtimes._common import Extra, Run, _failed, feeds


def _gather_elements_op() -> type:
    """onnx's reference ``GatherElements`` as fixed upstream (onnx pull request 8444, merged
    2026-09, in no release yet): ``numpy.take_along_axis`` on the data cut to the indices'
    extent. The released one (1.23.2) picks values with ``numpy.choose``, which takes at most 64
    choices: past 64 entries on the gathered axis it raises, or returns the first index of each
    row for every element of it."""
    from onnx.reference.op_run import OpRun

    class GatherElements(OpRun):
        def _run(self, data, indices, axis=None):
            axis = 0 if axis is None else int(axis)
            axis = axis % data.ndim
            cut = tuple(slice(None) if k == axis else slice(0, n) for k, n in enumerate(indices.shape))
            return (np.take_along_axis(data[cut], indices.astype(np.int64), axis=axis),)

    return GatherElements


def _reference(model: onnx.ModelProto, outputs: Sequence[str], device: str = "cpu") -> Run:
    from onnx.reference import ReferenceEvaluator

    try:
        ref = ReferenceEvaluator(model, new_ops=[_gather_elements_op()])
    except Exception as exc:
        raise _failed("the onnx reference evaluator", "cannot load the graph", exc) from exc
    feed = feeds(model)

    def run(X: np.ndarray, extra: Extra | None = None) -> dict[str, np.ndarray]:
        try:
            got = ref.run(list(outputs), feed(X, extra))
        except VerificationError:  # (an extra input missing or unknown: feeds says which)
            raise
        except Exception as exc:
            raise _failed("the onnx reference evaluator", "failed to run the graph", exc) from exc
        return {n: np.asarray(v) for n, v in zip(outputs, got)}

    return run


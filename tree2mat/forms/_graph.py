"""A small deterministic ONNX graph builder on top of ``onnx.helper`` (standard domain only)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from numpy.typing import DTypeLike
from onnx import TensorProto, helper, numpy_helper

from tree2mat import __version__
from tree2mat.errors import UnsupportedModelError

#: Default opset: the newest the pinned onnxruntime (1.31) runs (a test checks that it still does).
DEFAULT_OPSET = 26
#: Oldest opset the builder supports (ReduceSum/Unsqueeze take axes as inputs from 13 on).
MIN_OPSET = 13
#: Largest single constant: protobuf cannot hold a tensor of 2 GiB or more, in a file or as
#: external data (graphs past 2 GiB in all are written as external data, one tensor at a time).
MAX_TENSOR_BYTES = 2**31 - 2**20


@dataclass(frozen=True)
class GraphOptions:
    """How to emit a graph. ``dtype`` is the input dtype (and of float outputs); ``raw`` exports
    the margin before the link; ``leaves`` adds a ``leaves`` [N, T] int64 output (leaf ids)."""

    dtype: np.dtype = np.dtype(np.float32)
    opset: int = DEFAULT_OPSET
    raw: bool = False
    leaves: bool = False
    #: soft forms only: the temperature (None: the form's default).
    temperature: float | None = None
    #: exact matrix forms only: element type of the path-matching MatMul (float32, float16, int8).
    matmul: str = "float32"


ONNX_TYPE = {
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.float64): TensorProto.DOUBLE,
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.bool_): TensorProto.BOOL,
}


class GraphBuilder:
    """Collects nodes and initializers with unique, deterministic names."""

    def __init__(self, opset: int) -> None:
        self.opset = opset
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._used: dict[str, int] = {}

    def fresh(self, hint: str) -> str:
        n = self._used.get(hint, 0)
        self._used[hint] = n + 1
        return hint if n == 0 else f"{hint}_{n}"

    def const(self, array: np.ndarray | Sequence[object], hint: str) -> str:
        arr = np.asarray(array)
        if arr.nbytes > MAX_TENSOR_BYTES:
            raise UnsupportedModelError(
                f"the graph's constant {hint} would need {arr.nbytes / 2**30:.2f} GiB; ONNX holds at most "
                "2 GiB in one tensor; train with fewer trees or leaves"
            )
        if arr.dtype.kind in "US" or arr.dtype == object:
            tensor = helper.make_tensor(
                # (a STRING tensor takes a list of bytes, which onnx's annotation of vals leaves out)
                self.fresh(hint), TensorProto.STRING, arr.shape, [str(v).encode() for v in arr.ravel()],  # type: ignore[misc]
            )
        else:
            tensor = numpy_helper.from_array(np.ascontiguousarray(arr), self.fresh(hint))
        self.initializers.append(tensor)
        return tensor.name

    def op(self, op_type: str, inputs: Sequence[str], hint: str | None = None, out: str | None = None, **attrs: Any) -> str:
        name = out or self.fresh(hint or op_type.lower())
        self.nodes.append(
            helper.make_node(op_type, list(inputs), [name], name=self.fresh(f"n_{name}"), **attrs)
        )
        return name

    def reduce_sum(self, x: str, axes: Sequence[int], keepdims: bool, hint: str) -> str:
        return self.op(
            "ReduceSum", [x, self.const(np.asarray(axes, np.int64), f"{hint}_axes")], hint,
            keepdims=int(keepdims),
        )

    def reduce_max(self, x: str, axes: Sequence[int], keepdims: bool, hint: str) -> str:
        """ReduceMax (axes an input from opset 18 on, an attribute before)."""
        if self.opset >= 18:
            return self.op("ReduceMax", [x, self.const(np.asarray(axes, np.int64), f"{hint}_axes")], hint, keepdims=int(keepdims))
        return self.op("ReduceMax", [x], hint, axes=list(axes), keepdims=int(keepdims))

    def unsqueeze(self, x: str, axes: Sequence[int], hint: str) -> str:
        return self.op("Unsqueeze", [x, self.const(np.asarray(axes, np.int64), f"{hint}_axes")], hint)

    def slice_cols(self, x: str, start: int, stop: int, hint: str) -> str:
        """``x[:, start:stop]``."""
        return self.op(
            "Slice",
            [
                x,
                self.const(np.asarray([start], np.int64), f"{hint}_start"),
                self.const(np.asarray([stop], np.int64), f"{hint}_stop"),
                self.const(np.asarray([1], np.int64), f"{hint}_axis"),
            ],
            hint,
        )

    def model(
        self,
        inputs: Sequence[onnx.ValueInfoProto],
        outputs: Sequence[onnx.ValueInfoProto],
        doc: str,
        metadata: dict[str, str],
    ) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, "tree2mat", list(inputs), list(outputs), self.initializers)
        opsets = [helper.make_opsetid("", self.opset)]
        model = helper.make_model(
            graph,
            opset_imports=opsets,
            producer_name="tree2mat",
            producer_version=__version__,
            doc_string=doc,
        )
        model.ir_version = helper.find_min_ir_version_for(opsets)
        for key in sorted(metadata):
            entry = model.metadata_props.add()
            entry.key, entry.value = key, metadata[key]
        return model


def softplus(g: GraphBuilder, m: str, hint: str, dtype: DTypeLike = np.float64) -> str:
    """log(1 + exp(m)) as max(m, 0) + log(1 + exp(-|m|)): no overflow (``m`` of ``dtype``)."""
    dt = np.dtype(dtype).type
    neg = g.op("Neg", [g.op("Abs", [m], f"{hint}_abs")], f"{hint}_neg_abs")
    tail = g.op("Log", [g.op("Add", [g.const(dt(1), f"{hint}_one"), g.op("Exp", [neg], f"{hint}_exp")], f"{hint}_one_plus")], f"{hint}_log")
    return g.op("Add", [g.op("Max", [m, g.const(dt(0), f"{hint}_zero")], f"{hint}_pos"), tail], hint)


def tensor_info(name: str, dtype: DTypeLike, shape: Sequence[int | str]) -> onnx.ValueInfoProto:
    elem = TensorProto.STRING if dtype == "string" else ONNX_TYPE[np.dtype(dtype)]
    return helper.make_tensor_value_info(name, elem, list(shape))

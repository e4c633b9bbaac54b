"""A small deterministic ONNX graph builder on top of ``onnx.helper`` (the standard domain, and
``ai.onnx.ml`` for the ``treeensemble`` form's one node)."""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from numpy.typing import DTypeLike
from onnx import TensorProto, helper, numpy_helper

from tree2mat._version import __version__
from tree2mat.errors import UnsupportedModelError

#: Default opset: the newest onnxruntime 1.16 runs (opset 19, IR 9), the oldest onnxruntime the
#: default graph is tested on (README; tests/runtimes/test_floor.py): a newer opset's IR version
#: is refused there at load ("Unsupported model IR version"), whatever the graph holds.
DEFAULT_OPSET = 19
#: Newest opset: the newest the pinned onnxruntime (1.31) runs (a test checks that it still does).
NEWEST_OPSET = 26
#: Oldest opset the builder supports (ReduceSum/Unsqueeze take axes as inputs from 13 on).
MIN_OPSET = 13
#: Largest single constant: protobuf cannot hold a tensor of 2 GiB or more, in a file or as
#: external data (graphs past 2 GiB in all are written as external data, one tensor at a time).
MAX_TENSOR_BYTES = 2**31 - 2**20
#: Constants of a branch up to this size are the branch's own (:attr:`GraphBuilder.local`).
LOCAL_BYTES = 64
#: The operators tree2mat's graphs are made of (every form, head and option; the attention
#: forests' graphs): what ``verify`` runs without ``--foreign-graph``. No loops, no custom
#: domains: a graph of these runs in time bounded by its size and its rows' (tests/forms/
#: test_graph.py checks that every graph tree2mat writes keeps to them).
OPERATORS = frozenset({
    "Abs", "Add", "And", "ArgMax", "Cast", "Ceil", "Clip", "Concat", "Constant", "ConstantOfShape", "CumSum", "Div",
    "Equal", "Exp", "Expand", "Floor", "Gather", "GatherElements", "Greater", "GreaterOrEqual", "Identity", "If", "IsInf",
    "IsNaN", "Less", "LessOrEqual", "Log", "MatMul", "MatMulInteger", "Max", "Min", "Mul", "Neg", "Not", "Or", "Pad",
    "Pow", "ReduceMax", "ReduceSum", "Reshape", "Shape", "Sigmoid", "Sign", "Slice", "Softmax", "Split", "Squeeze", "Sub",
    "Tanh", "Tile", "Transpose", "Unsqueeze", "Where", "Xor",
})
#: The ``ai.onnx.ml`` domain, and the operators of it tree2mat's graphs use (their work bounded
#: by their nodes and the rows, as the standard ones above), each with the version of the domain
#: a graph of it imports: the ``treeensemble`` form's. Version 3's ``TreeEnsembleRegressor``
#: (float outputs; onnxruntime has run it since 1.5), which version 5 drops for ``TreeEnsemble``
#: (outputs of the input's type: double sums).
ML_DOMAIN = "ai.onnx.ml"
ML_OPSETS = {"TreeEnsembleRegressor": 3, "TreeEnsemble": 5}
ML_OPERATORS = frozenset(ML_OPSETS)
#: The oldest standard opset a graph importing ai.onnx.ml 5 may have (onnx 1.16 brought both).
ML5_MIN_OPSET = 21


#: The tree mask's input (:attr:`GraphOptions.tree_mask`) and its kinds: the input's shape for T trees.
TREE_MASK = "tree_mask"
TREE_MASK_SHAPES: dict[str, Callable[[int], list[int | str]]] = {"request": lambda T: [T], "rows": lambda T: ["N", T]}


@dataclass(frozen=True)
class GraphOptions:
    """How to emit a graph. ``dtype`` is the input dtype (and of float outputs); ``raw`` exports
    the margin before the link; ``leaves`` adds a ``leaves`` [N, T] int64 output (leaf ids);
    ``proximity``, the reference rows' leaf ids [R, T] (int64, the IR's numbering), adds a
    ``proximity`` [N, R] output: the fraction of trees in which each row and each reference row
    share a leaf."""

    dtype: np.dtype = np.dtype(np.float32)
    opset: int = DEFAULT_OPSET
    raw: bool = False
    leaves: bool = False
    #: exact forms only: the reference rows' leaf ids [R, T] (:func:`tree2mat.forms._exit.proximity_output`).
    proximity: np.ndarray | None = field(default=None, compare=False)
    #: soft forms only: the temperature (None: the form's default).
    temperature: float | None = None
    #: exact matrix forms only: element type of the path-matching MatMul (float32, float16, int8).
    matmul: str = "float32"
    #: exact forms only: a head in place of the model's, ``head(g, exit)`` from where the rows
    #: exit (a ``tree2mat.forms._exit.Exit``: its index and layout) to the value infos of the
    #: outputs it wrote (in every branch of a form that walks two ways); e.g. tree2mat.attention's.
    head: Callable[[GraphBuilder, Any], list[onnx.ValueInfoProto]] | None = None
    #: The newest ai.onnx.ml version the graph may import (a skl2onnx pipeline's graph: 3, the
    #: newest skl2onnx 1.20 writes).
    ml_opset: int = 5
    #: A second graph input :data:`TREE_MASK` (bool) that keeps (True) or drops trees: one mask
    #: for the whole request (``"request"``: [T]) or one per row (``"rows"``: [N, T]); None: none.
    tree_mask: str | None = None


ONNX_TYPE = {
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.float64): TensorProto.DOUBLE,
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.int32): TensorProto.INT32,
    np.dtype(np.bool_): TensorProto.BOOL,
}


class GraphBuilder:
    """Collects nodes and initializers with unique, deterministic names. A constant asked for
    twice under one hint, with the same contents, is one initializer; an operator asked for
    twice on the same inputs with the same attributes, one node."""

    def __init__(self, opset: int) -> None:
        self.opset = opset
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._used: dict[str, int] = {}
        self._made: dict[tuple[str, str, tuple[int, ...], bytes], str] = {}
        #: A :meth:`branch`'s own small constants (shapes, axes, bounds: shape inference reads
        #: a constant's value only in its own graph), and their names.
        self.local: list[onnx.TensorProto] | None = None
        self._local_made: dict[tuple[str, str, tuple[int, ...], bytes], str] = {}
        #: What each operator computed, by its type, inputs and attributes (:meth:`op` makes
        #: one node for the same computation asked for twice).
        self._computed: dict[tuple[str, tuple[str, ...], str], str] = {}
        #: A :meth:`branch`'s tag, and what became of the names its nodes were asked to write
        #: (``out=``: a graph output's name; in a branch, a fresh name ending in the tag).
        self.tag: str | None = None
        self.renamed: dict[str, str] = {}

    def fresh(self, hint: str) -> str:
        n = self._used.get(hint, 0)
        self._used[hint] = n + 1
        return hint if n == 0 else f"{hint}_{n}"

    def const(self, array: np.ndarray | Sequence[object], hint: str) -> str:
        arr = np.asarray(array)
        key = None
        local = self.local is not None and arr.nbytes <= LOCAL_BYTES
        made = self._local_made if local else self._made
        if arr.dtype.kind in "biuf":
            key = (hint, arr.dtype.str, arr.shape, hashlib.blake2b(np.ascontiguousarray(arr).tobytes(), digest_size=16).digest())
            if key in made:
                return made[key]
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
        (self.local if local and self.local is not None else self.initializers).append(tensor)
        if key is not None:
            made[key] = tensor.name
        return tensor.name

    def scalar(self, value: np.generic, hint: str) -> str:
        """A 0-d constant (:meth:`const` gives one-element constants shape [1]), for inputs the
        spec requires scalar (e.g. ``CumSum``'s axis)."""
        tensor = numpy_helper.from_array(np.asarray(value).reshape(()), self.fresh(hint))
        (self.initializers if self.local is None else self.local).append(tensor)
        return tensor.name

    def branch(self, tag: str) -> GraphBuilder:
        """A builder for a branch of :meth:`if_`: nodes of its own; names and constants shared
        with this graph, so that it reads this graph's tensors by name and its constants are
        this graph's initializers (runtimes fold them once), but for the small ones
        (:attr:`local`). Names asked for with ``out=`` are
        made fresh ending in ``tag`` (:attr:`renamed`): the ``If`` writes the graph's outputs."""
        sub = GraphBuilder(self.opset)
        sub.initializers, sub._used, sub._made, sub.tag = self.initializers, self._used, self._made, tag
        sub.local = []
        sub._computed = dict(self._computed)  # (this graph's tensors are visible in the branch)
        return sub

    def if_(self, cond: str, then: GraphBuilder, other: GraphBuilder, outputs: Sequence[onnx.ValueInfoProto]) -> None:
        """``If(cond)`` writing ``outputs``, which each branch (a :meth:`branch`) wrote under
        the name it gave them (:attr:`renamed`)."""
        graphs = []
        for b in (then, other):
            outs = []
            for v in outputs:
                out = onnx.ValueInfoProto()
                out.CopyFrom(v)
                out.name = b.renamed[v.name]
                outs.append(out)
            graphs.append(helper.make_graph(b.nodes, f"{b.tag}_walk", [], outs, b.local))
        names = [v.name for v in outputs]
        if self.tag is not None:  # (an If in a branch: it writes the branch's outputs, named as the branch's)
            for n in names:
                if n not in self.renamed:
                    self.renamed[n] = self.fresh(f"{n}_{self.tag}")
            names = [self.renamed[n] for n in names]
        for n in names:
            self._used.setdefault(n, 1)
        self.nodes.append(
            helper.make_node("If", [cond], names, name=self.fresh("n_if"), then_branch=graphs[0], else_branch=graphs[1])
        )

    def op(self, op_type: str, inputs: Sequence[str], hint: str | None = None, out: str | None = None, domain: str = "", **attrs: Any) -> str:
        key = (f"{domain}.{op_type}", tuple(inputs), repr(sorted(attrs.items())))
        if out is None and key in self._computed:  # the same operator on the same tensors: once
            return self._computed[key]
        if out is not None and self.tag is not None:
            name = self.renamed[out] = self.fresh(f"{out}_{self.tag}")
        elif out is not None:
            name = out
            self._used.setdefault(out, 1)  # (a later hint of the same name gets a fresh one)
        else:
            name = self.fresh(hint or op_type.lower())
        self.nodes.append(
            helper.make_node(op_type, list(inputs), [name], name=self.fresh(f"n_{name}"), domain=domain or None, **attrs)
        )
        self._computed[key] = name
        return name

    def reduce_sum(self, x: str, axes: Sequence[int], keepdims: bool, hint: str) -> str:
        return self.op(
            "ReduceSum", [x, self.const(np.asarray(axes, np.int64), f"{hint}_axes")], hint,
            keepdims=int(keepdims),
        )

    def reduce_max(self, x: str, axes: Sequence[int], keepdims: bool, hint: str, op_type: str = "ReduceMax") -> str:
        """ReduceMax, or ``op_type`` ReduceMin (axes an input from opset 18 on, an attribute before)."""
        if self.opset >= 18:
            return self.op(op_type, [x, self.const(np.asarray(axes, np.int64), f"{hint}_axes")], hint, keepdims=int(keepdims))
        return self.op(op_type, [x], hint, axes=list(axes), keepdims=int(keepdims))

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
        ml = {ML_OPSETS[n.op_type] for n in all_nodes(graph) if n.domain == ML_DOMAIN}
        if len(ml) > 1:
            raise ValueError(f"a graph imports one version of {ML_DOMAIN}; these nodes need {sorted(ml)}")
        opsets += [helper.make_opsetid(ML_DOMAIN, version) for version in ml]
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


def all_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """Every node of ``graph``, and of its subgraphs (an ``If``'s branches), depth first."""
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from all_nodes(attr.g)


def reads(node: onnx.NodeProto) -> set[str]:
    """The tensors ``node`` reads: its inputs, and those its subgraphs read from outside them."""
    names = {i for i in node.input if i}
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            inner = {o for n in attr.g.node for o in n.output} | {t.name for t in attr.g.initializer} | {i.name for i in attr.g.input}
            names |= {r for n in attr.g.node for r in reads(n)} - inner
    return names


def prune(graph: onnx.GraphProto) -> None:
    """Drop the nodes of ``graph`` (not of its subgraphs) whose outputs nothing reads: a runtime
    runs every node it is given (the shared input preparation makes a missing mask that a form
    reading NaN itself does not use)."""
    needed = {o.name for o in graph.output}
    keep: list[onnx.NodeProto] = []
    for node in reversed(graph.node):
        if any(o in needed for o in node.output):
            keep.append(node)
            needed |= reads(node)
    if len(keep) == len(graph.node):
        return
    used = needed | {i.name for i in graph.input}
    initializers = [t for t in graph.initializer if t.name in used]
    del graph.node[:], graph.initializer[:]
    graph.node.extend(reversed(keep))
    graph.initializer.extend(initializers)


def sort_nodes(graph: onnx.GraphProto) -> None:
    """Put ``graph``'s nodes in an order where each comes after what it reads, counting what an
    ``If``'s branches read (skl2onnx orders a graph by the nodes' inputs only), else as they were."""
    nodes = list(graph.node)
    known = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    produced = {o for n in nodes for o in n.output}
    waiting = [{r for r in reads(n) if r in produced and r not in known} for n in nodes]
    readers: dict[str, list[int]] = {}
    for k, names in enumerate(waiting):
        for r in names:
            readers.setdefault(r, []).append(k)
    ready = [k for k, names in enumerate(waiting) if not names]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        k = heapq.heappop(ready)
        order.append(k)
        for o in nodes[k].output:
            for reader in readers.get(o, ()):
                waiting[reader].discard(o)
                if not waiting[reader]:
                    heapq.heappush(ready, reader)
    if len(order) != len(nodes) or order == sorted(order):  # (a cycle: the checker names it)
        return
    copies = [onnx.NodeProto() for _ in order]
    for copy, k in zip(copies, order):
        copy.CopyFrom(nodes[k])
    del graph.node[:]
    graph.node.extend(copies)


def tensor_info(name: str, dtype: DTypeLike, shape: Sequence[int | str]) -> onnx.ValueInfoProto:
    elem = TensorProto.STRING if dtype == "string" else ONNX_TYPE[np.dtype(dtype)]
    return helper.make_tensor_value_info(name, elem, list(shape))

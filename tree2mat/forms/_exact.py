"""The skeleton every exact form shares: decision bits in, exit leaf out, then leaf values and
the head. A form supplies only how the exit leaf is found from the decision bits."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx

from tree2mat.forms import _heads, _layout
from tree2mat.forms._graph import GraphBuilder, GraphOptions, tensor_info
from tree2mat.errors import UnsupportedModelError
from tree2mat.ir.core import Ensemble

#: ``exit_leaf(g, ens, st, x, opts)``: from the compared input ``x`` [N, F] to the leaf ids
#: [T, N] int64, named ``_layout.LEAF_TENSOR``.
ExitLeaf = Callable[[GraphBuilder, Ensemble, _layout.Stacked, str, GraphOptions], str]


def padded_matrices(ens: Ensemble, st: _layout.Stacked, matrix: Callable, pad_row: float) -> np.ndarray:
    """A per-tree [L, I] matrix of the papers stacked and transposed, float32 [T, I, L]; padding
    leaves get ``pad_row`` everywhere, padding nodes 0."""
    out = np.zeros((st.n_trees, st.n_internal, st.n_leaves), np.float32)
    for t, tree in enumerate(ens.trees):
        out[t, :, tree.n_leaves :] = pad_row
        out[t, : tree.n_internal, : tree.n_leaves] = matrix(tree).T
    return out


def dense_constant_bytes(ens: Ensemble) -> int:
    """Bytes of a dense form's large constants (one [T, I, L] float32 matrix and the leaf
    values), without building them."""
    T, I, L = _layout.padded_sizes(ens)
    return T * I * L * 4 + T * L * ens.n_outputs * 8


def dense_bytes_per_row(ens: Ensemble) -> int:
    """Runtime memory per input row of a dense form's largest intermediates."""
    T, I, L = _layout.padded_sizes(ens)
    return T * (I * 4 * 3 + L * 4 * 2 + ens.n_outputs * 8) + _layout.categorical_bytes_per_row(ens)


def trees_first(g: GraphBuilder, st: _layout.Stacked, bits: str, hint: str) -> str:
    """A per-node tensor [N, T * I] as [T, N, I] (one matrix per tree for a batched MatMul)."""
    shape = g.const(np.asarray([0, st.n_trees, st.n_internal], np.int64), f"{hint}_shape")
    return g.op("Transpose", [g.op("Reshape", [bits, shape], f"{hint}_rows")], f"{hint}_trees", perm=[1, 0, 2])


#: Element types of the path-matching MatMul, and the largest integer each holds exactly. Only
#: integers pass through it (entries -1, 0, 1; sums bounded by the depth or the node count).
MATMUL_DTYPES = {"float32": 2**24, "float16": 2**11, "int8": 2**31 - 1}


def path_scores(g: GraphBuilder, st: _layout.Stacked, indicator: str, matrix: np.ndarray, matmul: str, bound: int, hint: str) -> str:
    """``indicator`` [N, T * I] (float32, entries -1/0/1) times ``matrix`` [T, I, L] per tree,
    as float32 [T, N, L], with the MatMul in ``matmul``: float32, float16 (MatMul), or int8
    (MatMulInteger, int32 accumulation). ``bound``: the largest |partial sum| the product can
    reach; refused where ``matmul`` cannot hold it exactly."""
    if bound > MATMUL_DTYPES[matmul]:
        raise UnsupportedModelError(
            f"--matmul {matmul} holds integers up to {MATMUL_DTYPES[matmul]} exactly; this model's "
            f"path sums reach {bound}; use --matmul float32 or int8"
        )
    rows = trees_first(g, st, indicator, hint)
    if matmul == "float32":
        return g.op("MatMul", [rows, g.const(matrix.astype(np.float32), f"{hint}_matrix")], f"{hint}_scores")
    if matmul == "float16":
        rows16 = g.op("Cast", [rows], f"{hint}_f16", to=onnx.TensorProto.FLOAT16)
        scores = g.op("MatMul", [rows16, g.const(matrix.astype(np.float16), f"{hint}_matrix")], f"{hint}_scores_f16")
    else:
        rows8 = g.op("Cast", [rows], f"{hint}_i8", to=onnx.TensorProto.INT8)
        scores = g.op("MatMulInteger", [rows8, g.const(matrix.astype(np.int8), f"{hint}_matrix")], f"{hint}_scores_i32")
    return g.op("Cast", [scores], f"{hint}_scores", to=onnx.TensorProto.FLOAT)


def build(
    ens: Ensemble, opts: GraphOptions, name: str, exit_leaf: ExitLeaf,
    constant_bytes: Callable[[Ensemble], int] = dense_constant_bytes, layout: str = "dense",
) -> onnx.ModelProto:
    _layout.check_size(f"{layout} {name} layout", name, constant_bytes(ens))
    st = _layout.stack(ens, opts.dtype)
    g = GraphBuilder(opts.opset)
    x = _layout.compared_input(g, ens, opts)
    leaf = exit_leaf(g, ens, st, x, opts)
    m = _layout.leaf_margin(g, ens, st, leaf, x)
    return finish(g, ens, m, opts, f"tree2mat {name} form of {ens.source}", leaf=leaf if opts.leaves else None)


def finish(
    g: GraphBuilder, ens: Ensemble, m: str, opts: GraphOptions, doc: str,
    metadata: dict[str, str] | None = None, leaf: str | None = None,
) -> onnx.ModelProto:
    """Every form's tail: from the margin ``m`` to the graph contract's outputs (and, given the
    leaf ids ``leaf``, the ``leaves`` output), then the model."""
    outputs = _heads.emit(g, ens, m, opts)
    if leaf is not None:
        _layout.leaves_output(g, leaf)
        outputs.append(tensor_info("leaves", np.int64, ["N", ens.n_trees]))
    inputs = [tensor_info("input", opts.dtype, ["N", ens.n_features])]
    return g.model(inputs, outputs, doc=doc, metadata=metadata or {})

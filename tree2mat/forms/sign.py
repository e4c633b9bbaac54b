"""The ``sign`` form (Decision Machines, eq. 5, 8, 9): the default, exact.

Per tree: h = sgn(Sx - t) in {-1, +1}^I with sgn(0) = -1 (built from a comparison, never from
``Sign``), template scores B h, and the exit leaf is the unique one with B h = depth, found as
``ArgMax(B h - depth)``. All trees run as one batched MatMul: h is [T, N, I], B^T is [T, I, L].
Only integers (entries of h and B, sums bounded by the depth) pass through MatMul, so the result is
exact in fp32, TF32 and fp16 alike.
"""

from __future__ import annotations

import numpy as np
import onnx

from tree2mat.forms import _heads, _layout
from tree2mat.forms._graph import GraphBuilder, GraphOptions, tensor_info
from tree2mat.ir.core import Ensemble
from tree2mat.ir.matrices import template_matrix


def template_tensors(ens: Ensemble, st: _layout.Stacked) -> tuple[np.ndarray, np.ndarray]:
    """B^T stacked, float32 [T, I, L], and the depths [T, 1, L]; padding leaves get depth 1 and
    an all-zero row, so their score (-1) is never the maximum (0)."""
    bt = np.zeros((st.n_trees, st.n_internal, st.n_leaves), np.float32)
    depth = np.ones((st.n_trees, 1, st.n_leaves), np.float32)
    for t, tree in enumerate(ens.trees):
        b = template_matrix(tree)
        bt[t, : tree.n_internal, : tree.n_leaves] = b.T
        depth[t, 0, : tree.n_leaves] = np.count_nonzero(b, axis=1)
    return bt, depth


def constant_bytes(ens: Ensemble) -> int:
    """Bytes of the graph's large constants (B^T and the leaf values), without building them."""
    T = ens.n_trees
    I = max(1, max(t.n_internal for t in ens.trees))
    L = max(t.n_leaves for t in ens.trees)
    return T * I * L * 4 + T * L * ens.n_outputs * 8


def bytes_per_row(ens: Ensemble) -> int:
    """Runtime memory per input row of the largest intermediates (h, scores, values)."""
    T = ens.n_trees
    I = max(1, max(t.n_internal for t in ens.trees))
    L = max(t.n_leaves for t in ens.trees)
    return T * (I * 4 * 3 + L * 4 * 2 + ens.n_outputs * 8) + _layout.categorical_bytes_per_row(ens)


def build(ens: Ensemble, opts: GraphOptions) -> onnx.ModelProto:
    _layout.check_size("dense sign layout", constant_bytes(ens))
    st = _layout.stack(ens, opts.dtype)
    g = GraphBuilder(opts.opset)
    x = _layout.compared_input(g, ens, opts)
    left = _layout.decision_bits(g, ens, st, x)
    # h = sgn(Sx - t) with sgn(0) = -1: -1 where x <= t holds (go left), +1 where it fails.
    h = g.op("Where", [left, g.const(np.float32(-1), "minus1"), g.const(np.float32(1), "plus1")], "h")
    shape = g.const(np.asarray([0, st.n_trees, st.n_internal], np.int64), "h_shape")
    h3 = g.op("Transpose", [g.op("Reshape", [h, shape], "h_rows")], "h_trees", perm=[1, 0, 2])
    bt, depth = template_tensors(ens, st)
    scores = g.op("MatMul", [h3, g.const(bt, "template_T")], "template_scores")
    delta = g.op("Sub", [scores, g.const(depth, "depth")], "score_minus_depth")
    leaf = g.op("ArgMax", [delta], out=_layout.LEAF_TENSOR, axis=2, keepdims=0)
    m = _layout.leaf_margin(g, ens, st, leaf, x)
    outputs = _heads.emit(g, ens, m, opts)
    if opts.leaves:
        _layout.leaves_output(g, leaf)
        outputs.append(tensor_info("leaves", np.int64, ["N", ens.n_trees]))
    inputs = [tensor_info("input", opts.dtype, ["N", ens.n_features])]
    return g.model(inputs, outputs, doc=f"tree2mat sign form of {ens.source}", metadata={})

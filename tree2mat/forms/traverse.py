"""The ``traverse`` form: exact, for trees of any size.

Instead of testing every node against every leaf (the matrix forms' T x I x L), each row walks
each tree from the root, one level per step, all trees at once: the current node's feature is
gathered (``GatherElements``), tested exactly as the matrix forms test it (same thresholds,
missing-value fill, zero band, categorical codes), and the row moves to the left or right child.
A row that reached a leaf stays there. Constants grow with the nodes (T x I), runtime memory per
row with the trees (T), work with the depth: deep random forests and large LightGBM models fit.
"""

from __future__ import annotations

import numpy as np
import onnx

from tree2mat.forms import _exact, _layout
from tree2mat.forms._graph import GraphBuilder, GraphOptions
from tree2mat.ir.core import Ensemble


def _tables(ens: Ensemble, st: _layout.Stacked) -> dict[str, np.ndarray]:
    """Per flat node t * I + i: children as flat node ids (>= 0) or leaves (-1 - j), and the
    categorical node each categorical node is (-1 for numeric ones)."""
    T, I = st.n_trees, st.n_internal
    left = np.full(T * I, -1, np.int64)
    right = np.full(T * I, -1, np.int64)
    for t, tree in enumerate(ens.trees):
        for side, out in ((tree.left, left), (tree.right, right)):
            out[t * I : t * I + tree.n_internal] = np.where(side >= 0, side + t * I, side)
    cat = np.full(T * I, -1, np.int64)
    cat[st.cat_position] = np.arange(st.cat_position.size)
    return {"left": left, "right": right, "cat": cat}


def exit_leaf(g: GraphBuilder, ens: Ensemble, st: _layout.Stacked, x: str, opts: GraphOptions) -> str:
    T, I = st.n_trees, st.n_internal
    shape = g.op("Shape", [x], "x_shape")
    n = g.op("Slice", [shape, g.const(np.asarray([0], np.int64), "n_start"), g.const(np.asarray([1], np.int64), "n_stop")], "n_rows")
    ones = g.op("ConstantOfShape", [g.op("Concat", [n, g.const(np.asarray([1], np.int64), "one_col")], "ones_shape", axis=0)],
                "ones_col", value=onnx.helper.make_tensor("one", onnx.TensorProto.INT64, [1], [1]))
    if all(t.n_internal == 0 for t in ens.trees):  # single leaves: leaf 0 everywhere
        leaf0 = g.op("Mul", [ones, g.const(np.zeros((1, T), np.int64), "single_leaves")], "leaf_rows")
        return g.op("Transpose", [leaf0], out=_layout.LEAF_TENSOR, perm=[1, 0])
    tab = _tables(ens, st)
    flat = T * I
    feature = g.const(st.feature.reshape(flat), "node_feature")
    threshold = g.const(st.threshold.reshape(flat), "threshold")
    nan_fill = g.const(st.nan_fill.reshape(flat), "nan_fill")
    left_child, right_child = g.const(tab["left"], "left_child"), g.const(tab["right"], "right_child")
    zero_missing = None if st.zero_missing is None else g.const(st.zero_missing, "zero_missing")
    cat_left = None
    if st.cat_position.size:
        cat_left = g.op("Cast", [_layout.categorical_left(g, ens, st, x)], "cat_left_i", to=onnx.TensorProto.INT64)
        cat_of = g.const(np.maximum(tab["cat"], 0), "node_cat")
        is_cat = g.const(tab["cat"] >= 0, "node_is_cat")
    zero_i = g.const(np.int64(0), "zero_i64")
    # Rows x trees: the current flat node (>= 0) or leaf (-1 - j); all trees start at their root
    # (a single-leaf tree at its leaf).
    roots = np.asarray([t * I if tree.n_internal else -1 for t, tree in enumerate(ens.trees)], np.int64)
    cur = g.op("Mul", [ones, g.const(roots[None, :], "roots")], "node0")
    depth = ens.max_depth()
    for d in range(depth):
        inside = g.op("GreaterOrEqual", [cur, zero_i], f"inside{d}")
        node = g.op("Max", [cur, zero_i], f"node{d}")  # any valid index where the row is at a leaf
        xv = g.op("GatherElements", [x, g.op("Gather", [feature, node], f"feat{d}", axis=0)], f"xv{d}", axis=1)
        missing = g.op("IsNaN", [xv], f"isnan{d}")
        if zero_missing is not None:
            zero = g.op("Equal", [xv, g.const(st.threshold.dtype.type(0), "zero_cmp")], f"iszero{d}")
            zero = g.op("And", [zero, g.op("Gather", [zero_missing, node], f"zm{d}", axis=0)], f"zeromissing{d}")
            missing = g.op("Or", [missing, zero], f"missing{d}")
        filled = g.op("Where", [missing, g.op("Gather", [nan_fill, node], f"fill{d}", axis=0), xv], f"filled{d}")
        go_left = g.op("LessOrEqual", [filled, g.op("Gather", [threshold, node], f"thr{d}", axis=0)], f"left{d}")
        if cat_left is not None:
            picked = g.op("GatherElements", [cat_left, g.op("Gather", [cat_of, node], f"catidx{d}", axis=0)], f"catpick{d}", axis=1)
            cat_go = g.op("Cast", [picked], f"catleft{d}", to=onnx.TensorProto.BOOL)
            here = g.op("Gather", [is_cat, node], f"iscat{d}", axis=0)  # (Where has no bool kernel)
            go_left = g.op("Or", [g.op("And", [here, cat_go], f"catpart{d}"),
                                  g.op("And", [g.op("Not", [here], f"numeric{d}"), go_left], f"numpart{d}")], f"leftc{d}")
        nxt = g.op("Where", [go_left, g.op("Gather", [left_child, node], f"lc{d}", axis=0),
                             g.op("Gather", [right_child, node], f"rc{d}", axis=0)], f"next{d}")
        cur = g.op("Where", [inside, nxt, cur], f"cur{d + 1}")
    leaf = g.op("Sub", [g.const(np.int64(-1), "minus1_i64"), cur], "leaf_rows")  # -1 - ref
    return g.op("Transpose", [leaf], out=_layout.LEAF_TENSOR, perm=[1, 0])


def constant_bytes(ens: Ensemble) -> int:
    """Per node feature, threshold, fill, two children, flags; per leaf its values."""
    T, I, L = _layout.padded_sizes(ens)
    return T * I * (8 * 5 + 2) + T * L * ens.n_outputs * 8


def bytes_per_row(ens: Ensemble) -> int:
    """A few [N, T] tensors per level, alive one level at a time, and the leaf values."""
    return ens.n_trees * (8 * 12 + ens.n_outputs * 8) + _layout.categorical_bytes_per_row(ens)


def build(ens: Ensemble, opts: GraphOptions) -> onnx.ModelProto:
    return _exact.build(ens, opts, "traverse", exit_leaf, constant_bytes=constant_bytes, layout="node-table")

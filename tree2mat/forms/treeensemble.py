"""The ``treeensemble`` form: exact, one ``ai.onnx.ml`` ``TreeEnsembleRegressor`` node finds
every tree's exit leaf.

The runtimes that have the operator (onnxruntime on every platform, the reference evaluator)
walk the trees in one fused kernel, where the other forms spend several operators a level. The
node is built from tree2mat's own thresholds (``x <= t'``, :func:`_layout.stack`, exact for the
library's ``<`` or ``<=`` at the dtype it compares in, the node's input type), and
its NaN rule from the library's default directions (``nodes_missing_value_tracks_true``); what
the operator cannot say is said in its input columns first:

- the library's own missing value, and LightGBM's zero band, by the input preparation every
  form shares (:func:`_layout.compared_input`), the missing cells then NaN;
- LightGBM's missing-type-Zero nodes read a copy of their column with 0 as NaN;
- categorical nodes read a column of their own, 0 where the node sends the row left and 1 where
  right (:func:`_layout.categorical_left`, the other forms' categories), against 0.5;
- oblique nodes read the projections the input preparation appends.

The node's leaf weights are not the model's values: each tree writes its exit leaf's number to
a target of its own ([N, T], exact: leaf numbers are small integers), and the values, sums and
head are every exact form's (:func:`_exact.build`), so the margins and labels are as exact as
theirs, and ``verify`` proves the routing tree by tree from that output.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from tree2mat.forms import _exact, _layout
from tree2mat.forms._graph import ML_DOMAIN, GraphBuilder, GraphOptions, prune
from tree2mat.forms._spec import FormSpec
from tree2mat.ir.core import Ensemble

#: Where the form is proven (the runtime matrix): the runtimes with an ``ai.onnx.ml``
#: ``TreeEnsembleRegressor`` kernel. OpenVINO, tract and IREE refuse the domain.
PROVEN_ON = ("onnxruntime", "reference", "onnxruntime-node", "onnxruntime-web")


def _columns(g: GraphBuilder, ens: Ensemble, st: _layout.Stacked, x: _layout.Compared) -> tuple[str, dict[str, int]]:
    """The node's input [N, C] (compare dtype): the compared columns with missing cells NaN, then
    per zero-missing column the same with 0 as NaN, then per categorical node its direction (0:
    left, 1: right); and the first column of each block."""
    value = x.value
    if not np.isnan(ens.missing_value):  # (else ``missing`` is where ``value`` is NaN already)
        value = g.op("Where", [x.missing, g.const(x.dtype.type(np.nan), "te_nan"), value], "te_value")
    blocks, offset, width = [value], {"x": 0}, ens.n_columns
    if st.zero_missing is not None:
        zero = g.op("Equal", [value, g.const(x.dtype.type(0), "te_zero")], "te_is_zero")
        blocks.append(g.op("Where", [zero, g.const(x.dtype.type(np.nan), "te_nan"), value], "te_zero_nan"))
        offset["w"], width = width, width + ens.n_columns
    if st.cat_position.size:
        right = g.op("Not", [_layout.categorical_left(g, ens, st, x)], "te_cat_right")  # [M, N]
        rows = g.op("Transpose", [right], "te_cat_rows", perm=[1, 0])
        blocks.append(g.op("Cast", [rows], "te_cat", to=onnx.helper.np_dtype_to_tensor_dtype(x.dtype)))
        offset["cat"] = width
    return (blocks[0] if len(blocks) == 1 else g.op("Concat", blocks, "te_input", axis=1)), offset


def node_attributes(ens: Ensemble, st: _layout.Stacked, offset: dict[str, int]) -> dict[str, Any]:
    """The ``TreeEnsembleRegressor``'s attributes: tree t's internal nodes numbered as the IR's,
    its leaf j as node ``I_t + j``, writing j to target t."""
    ids, tree_ids, features, modes, values, true_ids, false_ids, tracks = [], [], [], [], [], [], [], []
    target_ids, target_nodes, target_trees, weights = [], [], [], []
    zero = np.zeros((st.n_trees, st.n_internal), bool) if st.zero_missing is None else st.zero_missing.reshape(st.n_trees, st.n_internal)
    cat_node = dict(zip(st.cat_position.tolist(), range(st.cat_position.size)))
    for t, tree in enumerate(ens.trees):
        n = tree.n_internal

        def node_id(child: int) -> int:
            return int(child) if child >= 0 else n + (-1 - int(child))  # noqa: B023 (used at once)

        for i in range(n):
            m = cat_node.get(t * st.n_internal + i)
            ids.append(i)
            modes.append("BRANCH_LEQ")
            true_ids.append(node_id(tree.left[i]))  # (x <= t' goes left)
            false_ids.append(node_id(tree.right[i]))
            if m is not None:  # its own column: 0 left, 1 right, never NaN
                features.append(offset["cat"] + m)
                values.append(0.5)
                tracks.append(0)
            else:
                features.append(offset["w" if zero[t, i] else "x"] + int(st.feature[t, i]))
                values.append(float(st.threshold[t, i]))
                tracks.append(int(st.nan_left[t, i]))
        for j in range(tree.n_leaves):
            ids.append(n + j)
            modes.append("LEAF")
            features.append(0)
            values.append(0.0)
            true_ids.append(0)
            false_ids.append(0)
            tracks.append(0)
            target_ids.append(t)
            target_nodes.append(n + j)
            target_trees.append(t)
            weights.append(float(j))
        tree_ids += [t] * (n + tree.n_leaves)
    out: dict[str, Any] = {
        "n_targets": ens.n_trees, "aggregate_function": "SUM", "post_transform": "NONE",
        "nodes_treeids": tree_ids, "nodes_nodeids": ids, "nodes_featureids": features, "nodes_modes": modes,
        "nodes_truenodeids": true_ids, "nodes_falsenodeids": false_ids, "nodes_missing_value_tracks_true": tracks,
        "nodes_hitrates": [1.0] * len(ids),
        "target_ids": target_ids, "target_nodeids": target_nodes, "target_treeids": target_trees,
    }
    # onnxruntime's thresholds and weights are of the input's type: doubles only for double input
    if st.threshold.dtype == np.float64:
        out["nodes_values_as_tensor"] = onnx.numpy_helper.from_array(np.asarray(values, np.float64), "nodes_values")
        out["target_weights_as_tensor"] = onnx.numpy_helper.from_array(np.asarray(weights, np.float64), "target_weights")
    else:
        out["nodes_values"], out["target_weights"] = values, weights
    return out


def exit_leaf(g: GraphBuilder, ens: Ensemble, st: _layout.Stacked, x: _layout.Compared, opts: GraphOptions) -> _layout.Exit:
    """Each tree's exit leaf [T, N] (int64, leaf ids) from one ``TreeEnsembleRegressor``."""
    columns, offset = _columns(g, ens, st, x)
    leaves = g.op("TreeEnsembleRegressor", [columns], "te_leaves", domain=ML_DOMAIN, **node_attributes(ens, st, offset))
    index = g.op("Transpose", [g.op("Cast", [leaves], "te_leaf_ids", to=onnx.TensorProto.INT64)], "exit_leaf", perm=[1, 0])
    return _layout.Exit(index, *exit_layout(ens))


def exit_layout(ens: Ensemble, dtype: np.dtype | None = None) -> tuple[np.ndarray, np.ndarray, np.dtype]:
    """The exit is the leaf ids, trees in order."""
    T, _, L = _layout.padded_sizes(ens)
    return np.arange(T, dtype=np.int64), np.broadcast_to(np.arange(L, dtype=np.int64), (T, L)), np.dtype(np.int64)


#: The node's attributes live in the graph itself, which protobuf caps at 2 GiB (external data
#: holds initializers only); the leaf values besides.
MAX_NODE_BYTES = 2**30


def constant_limit() -> int:
    return MAX_NODE_BYTES


def build(ens: Ensemble, opts: GraphOptions) -> onnx.ModelProto:
    model = _exact.build(
        ens, opts, "treeensemble", exit_leaf, constant_bytes, layout="node", constant_limit=constant_limit(),
        size_hint="use --form traverse (its constants can be stored as external data), or train with fewer trees or leaves",
    )
    prune(model.graph)
    return model


def constant_bytes(ens: Ensemble) -> int:
    """The node's attributes (about 64 bytes a node) and the leaf values (up to four float32
    digits, or float64)."""
    T, _, L = _layout.padded_sizes(ens)
    nodes = sum(2 * t.n_internal + 1 for t in ens.trees)
    return nodes * 64 + T * L * ens.n_outputs * 16


def bytes_per_row(ens: Ensemble) -> int:
    """Per row: the node's input (the columns twice with zero-missing nodes, and one per
    categorical node) and its [T] output, the leaf ids and each tree's values."""
    columns = 2 * ens.n_columns + sum(t.cat_nodes.size for t in ens.trees)
    return columns * 8 + ens.n_trees * (4 + 8 + 8 * ens.n_outputs) + _layout.input_bytes_per_row(ens)


FORM = FormSpec(
    name="treeensemble",
    build=build,
    exact=True,
    summary="one ai.onnx.ml TreeEnsembleRegressor finds the exit leaves (onnxruntime's fused kernel); values and head as every exact form's",
    constant_bytes=constant_bytes,
    bytes_per_row=bytes_per_row,
    constant_limit=constant_limit,
    exit_layout=exit_layout,
    proven_on=PROVEN_ON,
    devices=("cpu",),  # (onnxruntime's CUDA provider has no TreeEnsemble kernel: the CPU runs it)
)

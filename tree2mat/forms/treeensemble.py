"""The ``treeensemble`` form: exact, one ``ai.onnx.ml`` node walks every tree.

The runtimes that have the operator (onnxruntime on every platform, the reference evaluator)
walk the trees in one fused kernel, where the other forms spend several operators a level. The
nodes are tree2mat's own: thresholds ``x <= t'`` (:func:`_stack.stack`, exact for the library's
``<`` or ``<=`` at the dtype it compares in), NaN where the library sends it
(``nodes_missing_value_tracks_true``); what the operator cannot say is said in its input
columns first (:func:`_columns`):

- the library's own missing value, and LightGBM's zero band, by the input preparation every
  form shares (:func:`_nodes.compared_input`), the missing cells then NaN;
- LightGBM's missing-type-Zero nodes read a copy of their column with 0 as NaN;
- categorical nodes read a column of their own, 0 where the node sends the row left and 1 where
  right (:func:`_nodes.categorical_left`, the other forms' categories), against 0.5;
- oblique nodes read the projections the input preparation appends.

Then, where the library sums in float64 and each leaf holds one value
(:func:`sums_in_the_node`), ml opset 5's ``TreeEnsemble`` takes the columns as doubles and sums
the leaf values itself (:func:`_summed`; ``verify`` proves its routing by a copy of the node that writes leaf ids,
:func:`tree2mat.contract.leaf_twin`).
Elsewhere, ml opset 3's ``TreeEnsembleRegressor`` writes each tree's exit leaf number to a
target of its own ([N, T], exact: small integers), and the values, sums and head are every
exact form's (:func:`_exact.build`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from tree2mat.contract import TWIN_KEY
from tree2mat.forms import _exact, _exit, _nodes, _stack, _sums, costs
from tree2mat.forms._graph import ML5_MIN_OPSET, ML_DOMAIN, GraphBuilder, GraphOptions, prune
from tree2mat.forms._spec import FormSpec
from tree2mat.ir.core import Ensemble, Task

#: Where the form is proven (the runtime matrix): the runtimes with ``ai.onnx.ml`` tree ensemble
#: kernels. OpenVINO, tract and IREE refuse the domain.
PROVEN_ON = ("onnxruntime", "reference", "onnxruntime-node", "onnxruntime-web")


def _columns(g: GraphBuilder, ens: Ensemble, st: _stack.Stacked, x: _nodes.Compared) -> tuple[str, dict[str, int]]:
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
        right = g.op("Not", [_nodes.categorical_left(g, ens, st, x)], "te_cat_right")  # [M, N]
        rows = g.op("Transpose", [right], "te_cat_rows", perm=[1, 0])
        blocks.append(g.op("Cast", [rows], "te_cat", to=onnx.helper.np_dtype_to_tensor_dtype(x.dtype)))
        offset["cat"] = width
    return (blocks[0] if len(blocks) == 1 else g.op("Concat", blocks, "te_input", axis=1)), offset


def node_tests(ens: Ensemble, st: _stack.Stacked, offset: dict[str, int]) -> list[tuple[list[int], list[float], list[int]]]:
    """Per tree, each internal node's input column, threshold (``x <= t'``: the true branch, left)
    and whether NaN takes the true branch (a categorical node reads its own column against 0.5,
    never NaN)."""
    zero = np.zeros((st.n_trees, st.n_internal), bool) if st.zero_missing is None else st.zero_missing.reshape(st.n_trees, st.n_internal)
    cat_node = dict(zip(st.cat_position.tolist(), range(st.cat_position.size)))
    out = []
    for t, tree in enumerate(ens.trees):
        features, values, tracks = [], [], []
        for i in range(tree.n_internal):
            m = cat_node.get(t * st.n_internal + i)
            if m is not None:
                features.append(offset["cat"] + m)
                values.append(0.5)
                tracks.append(0)
            else:
                features.append(offset["w" if zero[t, i] else "x"] + int(st.feature[t, i]))
                values.append(float(st.threshold[t, i]))
                tracks.append(int(st.nan_left[t, i]))
        out.append((features, values, tracks))
    return out


def node_attributes(ens: Ensemble, st: _stack.Stacked, offset: dict[str, int]) -> dict[str, Any]:
    """The ``TreeEnsembleRegressor``'s attributes: tree t's internal nodes numbered as the IR's,
    its leaf j as node ``I_t + j``, writing j to target t."""
    ids, tree_ids, features, modes, values, true_ids, false_ids, tracks = [], [], [], [], [], [], [], []
    target_ids, target_nodes, target_trees, weights = [], [], [], []
    for t, (tree, (column, threshold, nan_true)) in enumerate(zip(ens.trees, node_tests(ens, st, offset))):
        n = tree.n_internal
        ids += list(range(n + tree.n_leaves))
        tree_ids += [t] * (n + tree.n_leaves)
        modes += ["BRANCH_LEQ"] * n + ["LEAF"] * tree.n_leaves
        features += column + [0] * tree.n_leaves
        values += threshold + [0.0] * tree.n_leaves
        tracks += nan_true + [0] * tree.n_leaves
        true_ids += [int(c) if c >= 0 else n + (-1 - int(c)) for c in tree.left] + [0] * tree.n_leaves
        false_ids += [int(c) if c >= 0 else n + (-1 - int(c)) for c in tree.right] + [0] * tree.n_leaves
        target_ids += [t] * tree.n_leaves
        target_nodes += list(range(n, n + tree.n_leaves))
        target_trees += [t] * tree.n_leaves
        weights += [float(j) for j in range(tree.n_leaves)]
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


def exit_leaf(g: GraphBuilder, ens: Ensemble, st: _stack.Stacked, x: _nodes.Compared, opts: GraphOptions) -> _exit.Exit:
    """Each tree's exit leaf [T, N] (int64, leaf ids) from one ``TreeEnsembleRegressor``."""
    columns, offset = _columns(g, ens, st, x)
    leaves = g.op("TreeEnsembleRegressor", [columns], "te_leaves", domain=ML_DOMAIN, **node_attributes(ens, st, offset))
    index = g.op("Transpose", [g.op("Cast", [leaves], "te_leaf_ids", to=onnx.TensorProto.INT64)], "exit_leaf", perm=[1, 0])
    return _exit.Exit(index, *exit_layout(ens))


def sums_in_the_node(ens: Ensemble, opts: GraphOptions) -> bool:
    """Whether the node sums the leaf values itself (ml opset 5's ``TreeEnsemble``, doubles in,
    double sums out): for a library that sums in float64 (not XGBoost's float32 sums, which the
    node's threads would add in another order), one value per leaf (one output, or one class per
    tree), no linear leaves, no ``--leaves``, ``--proximity`` or other head on the leaves, no tree
    mask (the node sums every tree), an opset with ml 5."""
    return (
        opts.opset >= ML5_MIN_OPSET and opts.ml_opset >= 5 and not opts.leaves and opts.proximity is None and opts.head is None
        and opts.tree_mask is None
        and np.dtype(ens.accumulate_dtype) == np.float64 and not any(t.is_linear for t in ens.trees)
        and (ens.n_outputs == 1 or _stack.one_class_per_tree(ens))
    )


def ensemble_attributes(ens: Ensemble, st: _stack.Stacked, offset: dict[str, int]) -> dict[str, Any]:
    """The ``TreeEnsemble``'s attributes: tree t's internal node i at ``base_t + i``, its leaf j
    at ``P + leaf_base_t + j`` (P: the number of nodes; the first P leaves are never reached)
    holding its value for its output (the base score folded into each output's first tree
    where the trees are summed, :func:`_stack.stack`). No node and leaf share an index:
    onnxruntime before 1.2x took a root whose two children had one index for a leaf, whatever
    their leaf flags (onnxruntime issue 24679). A tree of one leaf is a node ``x <= +inf``, NaN
    true, whose true branch is the leaf and whose false branch, never taken, a copy of it: onnx
    1.23's reference evaluator reads a root whose two branches reach one leaf as a leaf of the
    root's index."""
    features: list[int] = []
    splits: list[float] = []
    tracks: list[int] = []
    true_ids: list[int] = []
    true_leaf: list[int] = []
    false_ids: list[int] = []
    false_leaf: list[int] = []
    roots: list[int] = []
    n_nodes = sum(max(tree.n_internal, 1) for tree in ens.trees)
    targets: list[int] = [0] * n_nodes
    weights: list[float] = [0.0] * n_nodes
    node_base = 0
    for t, (tree, (column, threshold, nan_true)) in enumerate(zip(ens.trees, node_tests(ens, st, offset))):
        n, k = tree.n_internal, max(int(ens.output_index[t]), 0)
        values = st.values[t * st.n_leaves : t * st.n_leaves + tree.n_leaves, k].astype(np.float64).tolist()
        leaf_base = len(targets)
        roots.append(node_base)
        if n == 0:
            column, threshold, nan_true = [0], [np.inf], [1]
            left, right = np.asarray([-1]), np.asarray([-2])
            values = values * 2
        else:
            left, right = tree.left, tree.right
        features += column
        splits += threshold
        tracks += nan_true
        for child, ids, leafs in ((left, true_ids, true_leaf), (right, false_ids, false_leaf)):
            ids += [leaf_base + (-1 - int(c)) if c < 0 else node_base + int(c) for c in child]
            leafs += [int(c < 0) for c in child]
        targets += [k] * len(values)
        weights += values
        node_base += len(column)
    return {
        "n_targets": ens.n_outputs, "aggregate_function": 1, "post_transform": 0, "tree_roots": roots,  # (1: SUM, 0: NONE)
        "nodes_modes": onnx.numpy_helper.from_array(np.zeros(len(features), np.uint8), "nodes_modes"),  # (0: BRANCH_LEQ)
        "nodes_featureids": features, "nodes_splits": onnx.numpy_helper.from_array(np.asarray(splits, np.float64), "nodes_splits"),
        "nodes_truenodeids": true_ids, "nodes_trueleafs": true_leaf, "nodes_falsenodeids": false_ids,
        "nodes_falseleafs": false_leaf, "nodes_missing_value_tracks_true": tracks,
        "leaf_targetids": targets, "leaf_weights": onnx.numpy_helper.from_array(np.asarray(weights, np.float64), "leaf_weights"),
    }


def _summed(ens: Ensemble, opts: GraphOptions) -> onnx.ModelProto:
    """The graph whose node sums the leaf values (:func:`sums_in_the_node`): input columns as
    doubles (exact), the node's [N, K] sums, averaged and with the base score (MEAN), the head
    in float64. Its routing is proven by :func:`tree2mat.contract.leaf_twin`."""
    st = _stack.stack(ens, opts.dtype)
    g = GraphBuilder(opts.opset)
    x = _nodes.compared_input(g, ens, opts)
    columns, offset = _columns(g, ens, st, x)
    if x.dtype != np.float64:
        columns = g.op("Cast", [columns], "te_input_f64", to=onnx.TensorProto.DOUBLE)
    f64 = np.dtype(np.float64)
    total = g.op("TreeEnsemble", [columns], "te_sums", domain=ML_DOMAIN, **ensemble_attributes(ens, st, offset))
    margin = _sums.finish_sum(g, ens, st, total, f64, f64)
    return _exact.finish(g, ens, margin, opts, f"tree2mat treeensemble form of {ens.source}", {TWIN_KEY: total})


def exit_layout(ens: Ensemble, dtype: np.dtype | None = None) -> tuple[np.ndarray, np.ndarray, np.dtype]:
    """The exit is the leaf ids, trees in order."""
    T, _, L = _stack.padded_sizes(ens)
    return np.arange(T, dtype=np.int64), np.broadcast_to(np.arange(L, dtype=np.int64), (T, L)), np.dtype(np.int64)


#: The node's attributes live in the graph itself, which protobuf caps at 2 GiB (external data
#: holds initializers only); the leaf values besides, and ``verify`` adds a copy of the node
#: (:func:`tree2mat.contract.leaf_twin`).
MAX_NODE_BYTES = 2**29


def constant_limit() -> int:
    return MAX_NODE_BYTES


def build(ens: Ensemble, opts: GraphOptions) -> onnx.ModelProto:
    hint = "use --form traverse (its constants can be stored as external data), or train with fewer trees or leaves"
    if sums_in_the_node(ens, opts):
        _stack.check_size("node treeensemble layout", constant_bytes(ens), constant_limit(), hint)
        model = _summed(ens, opts)
    else:
        model = _exact.build(ens, opts, "treeensemble", exit_leaf, constant_bytes, layout="node", constant_limit=constant_limit(), size_hint=hint)
    prune(model.graph)
    return model


def constant_bytes(ens: Ensemble) -> int:
    """The node's attributes (about 64 bytes a node) and the leaf values (up to four float32
    digits, or float64)."""
    T, _, L = _stack.padded_sizes(ens)
    nodes = sum(2 * t.n_internal + 1 for t in ens.trees)
    return nodes * 64 + T * L * ens.n_outputs * 16


def bytes_per_row(ens: Ensemble) -> int:
    """Per row: the node's input (the columns twice with zero-missing nodes, and one per
    categorical node) and its [T] output, the leaf ids and each tree's values."""
    columns = 2 * ens.n_columns + sum(t.cat_nodes.size for t in ens.trees)
    return columns * 8 + ens.n_trees * (4 + 8 + 8 * ens.n_outputs) + _stack.input_bytes_per_row(ens)


#: Cost model per row (microseconds; ``benchmarks/form_speed.py --forms treeensemble,traverse
#: --fit``: benchmarks/form_speed_treeensemble.json): per tree level, per tree, per node of the
#: padded trees (the node's tables outgrow the caches), one set where the node sums and one where
#: its leaves write their numbers (one target a tree). On traverse's scale (that run's traverse
#: times against traverse's own model), so that auto compares the two (how well it then picks:
#: benchmarks/RESULTS.md, "Measurements cited by the code").
PER_ROW_US = {
    True: costs.of("treeensemble", "sums_per_level_us", "sums_per_tree_us", "sums_per_node_us"),
    False: costs.of("treeensemble", "leaf_numbers_per_level_us", "leaf_numbers_per_tree_us", "leaf_numbers_per_node_us"),
}
#: One row's run (microseconds; the one-row p50s of the same run, on traverse's latency model's
#: scale likewise): per run, per run of a classifier (its head), per tree level, per tree of leaf
#: numbers, per node.
CALL_US, CLASSIFIER_CALL_US, CALL_PER_LEVEL_US, CALL_PER_LEAF_NUMBER_TREE_US, CALL_PER_NODE_US = costs.of(
    "treeensemble", "call_us", "classifier_call_us", "call_per_level_us", "call_per_leaf_number_tree_us", "call_per_node_us")


def _sizes(ens: Ensemble, opts: GraphOptions | None) -> tuple[bool, int, int]:
    """(whether the node sums under ``opts``, None: the defaults; tree levels; nodes of the
    padded trees)."""
    T, I, _ = _stack.padded_sizes(ens)
    return sums_in_the_node(ens, opts or GraphOptions()), _stack.tree_levels(ens), T * I


def us_per_row(ens: Ensemble, opts: GraphOptions | None = None) -> float:
    sums, levels, nodes = _sizes(ens, opts)
    per_level, per_tree, per_node = PER_ROW_US[sums]
    return per_level * levels + per_tree * ens.n_trees + per_node * nodes


def call_us(ens: Ensemble, opts: GraphOptions | None = None) -> float:
    sums, levels, nodes = _sizes(ens, opts)
    return (CALL_US + CLASSIFIER_CALL_US * (ens.task is Task.CLASSIFICATION) + CALL_PER_LEVEL_US * levels
            + CALL_PER_LEAF_NUMBER_TREE_US * ens.n_trees * (not sums) + CALL_PER_NODE_US * nodes)


FORM = FormSpec(
    name="treeensemble",
    build=build,
    exact=True,
    summary="one ai.onnx.ml node walks the trees (onnxruntime's fused kernel), with tree2mat's thresholds: double sums in the node, "
            "or leaf numbers and every exact form's sums",
    constant_bytes=constant_bytes,
    bytes_per_row=bytes_per_row,
    constant_limit=constant_limit,
    us_per_row=us_per_row,
    call_us=call_us,
    cost_takes_options=True,
    exit_layout=exit_layout,
    proven_on=PROVEN_ON,
    devices=("cpu",),  # (onnxruntime's CUDA provider has no TreeEnsemble kernel: the CPU runs it)
    node_tests=None,
    faster_from=(ML5_MIN_OPSET, "onnxruntime 1.21 or newer, or onnx 1.16's reference evaluator"),  # (1.20 refuses the node)
)

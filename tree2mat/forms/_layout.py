"""Pieces every exact form shares: trees stacked into padded 3-D tensors, the decision bits
(which nodes send a row right) and the leaf-value aggregation.

Decision bits follow DESIGN.md's exactness rules: features are selected with ``Gather`` (exact,
NaN/inf-safe), thresholds come from :mod:`tree2mat.ir.thresholds`, and one ``LessOrEqual`` decides
each node — so no ``Sign(0)`` ever appears. A NaN is first replaced by -inf at nodes that send it
left and kept where it goes right (``NaN <= t`` is false), which stays exact for +-inf thresholds
(sklearn splits NaN from everything else with ``t = +inf``). Leaf values are gathered by leaf id
in float64, never multiplied.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tree2mat.errors import UnsupportedModelError
from tree2mat.forms._graph import GraphBuilder, GraphOptions
from tree2mat.ir.core import Aggregation, Ensemble
from tree2mat.ir.thresholds import FLOAT32, compare_dtype, graph_categories, graph_thresholds

#: Name of the internal leaf-id tensor [T, N] (int64) in every exact form; ``verify`` exposes it
#: to check routing exactly.
LEAF_TENSOR = "leaf"

#: Largest graph initializers we build without external data (protobuf's 2 GiB limit, with room).
MAX_INITIALIZER_BYTES = 1_800_000_000


@dataclass(frozen=True)
class Stacked:
    """All trees padded to ``I`` internal nodes and ``L`` leaves. Padding nodes test feature 0
    and touch no leaf; padding leaves are never selected."""

    n_trees: int
    n_internal: int
    n_leaves: int
    feature: np.ndarray  # int64 [T, I]
    threshold: np.ndarray  # compare dtype [T, I]
    nan_fill: np.ndarray  # compare dtype [T, I]: -inf where NaN goes left, NaN where it goes right
    leaf_count: np.ndarray  # int64 [T]
    values: np.ndarray  # float64 [T * L, K]: tree t's leaf j at row t * L + j, 0 elsewhere
    cat_position: np.ndarray  # int64 [M]: flat position t * I + i of categorical nodes
    cat_feature: np.ndarray  # int64 [M]
    cat_values: np.ndarray  # compare dtype [M, C] (NaN-padded)
    cat_direction: np.ndarray  # float32 [M, C]: +1 right, -1 left, 0 padding
    cat_bias: np.ndarray  # float32 [M]: +0.5 if unmatched values go right, else -0.5


def stack(ens: Ensemble, dtype: np.dtype) -> Stacked:
    """Pad and stack the trees for a graph whose input is ``dtype``."""
    cmp = compare_dtype(ens.source_dtype, dtype)
    T = ens.n_trees
    I = max(1, max(t.n_internal for t in ens.trees))
    L = max(t.n_leaves for t in ens.trees)
    K = ens.n_outputs
    feature = np.zeros((T, I), np.int64)
    threshold = np.zeros((T, I), cmp)
    nan_fill = np.zeros((T, I), cmp)
    values = np.zeros((T * L, K), np.float64)
    cat_pos, cat_feat, cat_vals, cat_left, cat_dl = [], [], [], [], []
    for t, tree in enumerate(ens.trees):
        n = tree.n_internal
        feature[t, :n] = tree.feature
        threshold[t, :n] = graph_thresholds(tree.threshold, ens.comparison, cmp)
        nan_fill[t, :n] = np.where(tree.default_left, -np.inf, np.nan)
        k = int(ens.output_index[t])
        rows = slice(t * L, t * L + tree.n_leaves)
        if k == -1:
            values[rows] = tree.value
        else:
            values[rows, k] = tree.value[:, 0]
        for m, node in enumerate(tree.cat_nodes):
            cat_pos.append(t * I + int(node))
            cat_feat.append(int(tree.feature[node]))
            cat_vals.append(tree.cat_values[m])
            cat_left.append(tree.cat_left[m])
            cat_dl.append(bool(tree.default_left[node]))
    width = max((len(v) for v in cat_vals), default=0)
    M = len(cat_pos)
    cv = np.full((M, width), np.nan)
    direction = np.zeros((M, width), np.float32)
    for m in range(M):
        w = len(cat_vals[m])
        cv[m, :w] = cat_vals[m]
        present = ~np.isnan(cat_vals[m])
        direction[m, :w] = np.where(present, np.where(cat_left[m], -1.0, 1.0), 0.0)
    return Stacked(
        n_trees=T,
        n_internal=I,
        n_leaves=L,
        feature=feature,
        threshold=threshold,
        nan_fill=nan_fill,
        leaf_count=np.asarray([t.n_leaves for t in ens.trees], np.int64),
        values=values,
        cat_position=np.asarray(cat_pos, np.int64),
        cat_feature=np.asarray(cat_feat, np.int64),
        cat_values=graph_categories(cv, cmp),
        cat_direction=direction,
        cat_bias=np.where(np.asarray(cat_dl, bool), -0.5, 0.5).astype(np.float32),
    )


def check_size(what: str, n_bytes: int) -> None:
    if n_bytes > MAX_INITIALIZER_BYTES:
        raise UnsupportedModelError(
            f"the {what} needs {n_bytes / 2**30:.1f} GiB of constants, over the "
            f"{MAX_INITIALIZER_BYTES / 2**30:.1f} GiB an ONNX file holds without external data; "
            "train with fewer leaves (max_depth / max_leaf_nodes) or fewer trees"
        )


def compared_input(g: GraphBuilder, ens: Ensemble, opts: GraphOptions) -> str:
    """The graph input, cast to the dtype the comparisons run in (sklearn trees cast float64
    input to float32 before comparing; so does the graph)."""
    cmp = compare_dtype(ens.source_dtype, opts.dtype)
    if cmp == np.dtype(opts.dtype):
        return "input"
    return g.op("Cast", ["input"], "x_cmp", to=1 if cmp == FLOAT32 else 11)


def decision_bits(g: GraphBuilder, ens: Ensemble, st: Stacked, x: str) -> str:
    """Bool [N, T * I]: True where the node sends the row left (the test ``x <= t`` holds)."""
    flat = st.n_trees * st.n_internal
    gathered = g.op("Gather", [x, g.const(st.feature.reshape(flat), "node_feature")], "x_nodes", axis=1)
    isnan = g.op("IsNaN", [gathered], "x_isnan")
    filled = g.op("Where", [isnan, g.const(st.nan_fill.reshape(flat), "nan_fill"), gathered], "x_filled")
    left = g.op("LessOrEqual", [filled, g.const(st.threshold.reshape(flat), "threshold")], "go_left")
    if st.cat_position.size == 0:
        return left
    # Categorical nodes: -1 per matched left-going category, +1 per right-going one (each value
    # matches at most one category); unmatched values (NaN, unseen) follow the node's default.
    xc = g.op("Gather", [x, g.const(st.cat_feature, "cat_feature")], "x_cat", axis=1)
    xc3 = g.unsqueeze(xc, [2], "x_cat3")
    eq = g.op("Equal", [xc3, g.const(st.cat_values, "cat_values")], "cat_eq")
    eqf = g.op("Cast", [eq], "cat_eqf", to=1)
    weighted = g.op("Mul", [eqf, g.const(st.cat_direction, "cat_direction")], "cat_weighted")
    score = g.reduce_sum(weighted, [2], keepdims=False, hint="cat_score")
    biased = g.op("Add", [score, g.const(st.cat_bias, "cat_bias")], "cat_biased")
    cat_left = g.op("Less", [biased, g.const(np.float32(0), "zero_f32")], "cat_left")
    both = g.op("Concat", [left, cat_left], "left_all", axis=1)
    perm = np.arange(flat, dtype=np.int64)
    perm[st.cat_position] = flat + np.arange(st.cat_position.size)
    return g.op("Gather", [both, g.const(perm, "cat_perm")], "go_left_cat", axis=1)


def leaf_margin(g: GraphBuilder, ens: Ensemble, st: Stacked, leaf: str) -> str:
    """From leaf ids [T, N] (int64) to the margin [N, K] float64: gather values, aggregate,
    add the base score."""
    offsets = (np.arange(st.n_trees, dtype=np.int64) * st.n_leaves)[:, None]
    gidx = g.op("Add", [leaf, g.const(offsets, "leaf_offset")], "leaf_global")
    vals = g.op("Gather", [g.const(st.values, "leaf_values"), gidx], "tree_values", axis=0)
    total = g.reduce_sum(vals, [0], keepdims=False, hint="margin_sum")
    if ens.aggregation is Aggregation.MEAN:
        total = g.op("Div", [total, g.const(np.float64(ens.n_trees), "n_trees")], "margin_mean")
    return g.op("Add", [total, g.const(ens.base_score, "base_score")], "margin")


def leaves_output(g: GraphBuilder, leaf: str) -> str:
    return g.op("Transpose", [leaf], out="leaves", perm=[1, 0])

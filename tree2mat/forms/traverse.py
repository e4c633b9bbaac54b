"""The ``traverse`` form: exact, for trees of any size.

Instead of testing every node against every leaf (the matrix forms' T x I x L), each row walks
each tree from the root, one level per step, all trees at once (:func:`exit_leaf`). Every node
is one test ``value > threshold`` on a column of an augmented input, routing exactly as the
matrix forms (same thresholds, NaN directions, zero band, missing-type Zero, categorical codes;
:func:`node_table` says how), and the next node is ``first + (value > threshold)``. A leaf
points at itself. Constants grow with the nodes, runtime memory per row with the trees, work
with the summed depths: deep random forests and large LightGBM models fit.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np
import onnx

from tree2mat.forms import _exact, _layout
from tree2mat.forms._graph import GraphBuilder, GraphOptions
from tree2mat.ir.core import Ensemble


#: Columns of the augmented input, in this order; each present only when some node reads it.
#: F columns each, except ``cat`` (one per categorical node: 1 where that node sends the row right).
BLOCKS = ("x", "negx", "w", "negw", "nanx", "nanw", "cat")


@dataclass
class NodeTable:
    """Every tree's nodes, internal and leaves, numbered breadth-first so that the two children
    of a node are neighbours: ``first`` (where a row goes when the node's test is false) and
    ``first + 1`` (where ``value > threshold``). Per node [T, P]: the ``column`` of the augmented
    input it reads, its ``threshold`` and ``first``; ``leaf``: each leaf node's leaf index.
    A leaf points at itself with threshold +inf, so a row that reached it stays there."""

    column: np.ndarray  # int32 [T, P]
    threshold: np.ndarray  # compare dtype [T, P]
    first: np.ndarray  # int32 [T, P]
    leaf: np.ndarray  # int64 [T, P]
    blocks: tuple[str, ...]  # the augmented input's blocks, in column order
    order: np.ndarray  # int64 [T]: the table's trees, deepest first (the ensemble's tree of each row)
    depth: np.ndarray  # int64 [T]: each row's tree depth (non-increasing)


def node_table(ens: Ensemble, st: _layout.Stacked) -> NodeTable:
    """Each test as one ``value > threshold``, NaN going where the library sends it.

    A node that sends NaN left reads x and goes right where ``x > t``. One that sends NaN right
    reads -x and goes left where ``-x > -nextup(t)``, that is ``x <= t`` (its children swap
    places so that NaN, false in both, lands on its side); with ``t = +inf`` (NaN apart from
    everything) it reads IsNaN(x) instead. LightGBM's missing-type-Zero nodes read ``w``: x with 0
    made NaN. Categorical nodes read their own column."""
    T, I, F = st.n_trees, st.n_internal, ens.n_features
    cmp = st.threshold.dtype.type
    P = max(2 * t.n_internal + 1 for t in ens.trees)
    block = np.zeros((T, P), np.int8)
    index = np.zeros((T, P), np.int64)
    threshold = np.full((T, P), np.inf, st.threshold.dtype)
    first = np.zeros((T, P), np.int32)
    leaf = np.zeros((T, P), np.int64)
    cat_of = {int(p): m for m, p in enumerate(st.cat_position)}
    code = {b: i for i, b in enumerate(BLOCKS)}
    half, inf = cmp(0.5), cmp(np.inf)
    for t, tree in enumerate(ens.trees):
        queue, next_id = deque([(0 if tree.n_internal else -1, 0)]), 1
        while queue:
            ref, me = queue.popleft()
            if ref < 0:
                leaf[t, me], first[t, me] = -1 - ref, me
                continue
            flat = t * I + ref
            thr, f, swap = st.threshold[t, ref], int(st.feature[t, ref]), False
            zero = "w" if st.zero_missing is not None and st.zero_missing[flat] else "x"
            if flat in cat_of:
                b, f, thr = "cat", cat_of[flat], half
            elif np.isneginf(st.nan_fill[t, ref]):  # NaN goes left
                b = zero
            elif thr == inf:  # everything left but NaN
                b, thr = "nan" + zero, half
            else:
                with np.errstate(over="ignore"):  # nextup(max) = inf: -x > -inf, right
                    b, thr, swap = "neg" + zero, -np.nextafter(thr, inf), True
            block[t, me], index[t, me], threshold[t, me], first[t, me] = code[b], f, thr, next_id
            kids = (tree.right[ref], tree.left[ref]) if swap else (tree.left[ref], tree.right[ref])
            queue.extend(((int(kids[0]), next_id), (int(kids[1]), next_id + 1)))
            next_id += 2
    width = [st.cat_position.size if b == "cat" else F for b in BLOCKS]
    used = sorted({int(c) for c in np.unique(block)} | {0})
    offset = np.zeros(len(BLOCKS), np.int64)
    offset[used] = np.cumsum([0] + [width[c] for c in used])[:-1]
    column = (offset[block] + index).astype(np.int32)
    depth = ens.tree_depths()
    order = np.argsort(-depth, kind="stable")
    return NodeTable(column[order], threshold[order], first[order], leaf[order],
                     tuple(BLOCKS[c] for c in used), order, depth[order])


def augmented_input(g: GraphBuilder, ens: Ensemble, st: _layout.Stacked, x: str, blocks: tuple[str, ...]) -> str:
    """[N, C]: the columns the node table reads (see :data:`BLOCKS`)."""
    cmp = st.threshold.dtype
    to = onnx.helper.np_dtype_to_tensor_dtype(cmp)
    made: dict[str, str] = {"x": x}
    if {"w", "negw", "nanw"} & set(blocks):
        is_zero = g.op("Equal", [x, g.const(cmp.type(0), "zero_cmp")], "x_is_zero")
        made["w"] = g.op("Where", [is_zero, g.const(cmp.type(np.nan), "nan_cmp"), x], "w")
    for b in blocks:
        if b.startswith("neg"):
            made[b] = g.op("Neg", [made[b[3:]]], b)
        elif b.startswith("nan"):
            made[b] = g.op("Cast", [g.op("IsNaN", [made[b[3:]]], f"{b}_bool")], b, to=to)
        elif b == "cat":
            right = g.op("Not", [_layout.categorical_left(g, ens, st, x)], "cat_right")
            made[b] = g.op("Cast", [right], "cat_right_cmp", to=to)
    parts = [made[b] for b in blocks]
    return parts[0] if len(parts) == 1 else g.op("Concat", parts, "x_augmented", axis=1)


def exit_leaf(g: GraphBuilder, ens: Ensemble, st: _layout.Stacked, x: str, opts: GraphOptions) -> str:
    """Rows walk every tree level by level, all trees at once. Each step is three
    ``GatherElements`` from the node table (trees x rows, last axis), one from the augmented
    input (rows x trees, last axis: the fast layout of both), a ``Greater``, and the next node
    ``first + (value > threshold)``."""
    tab = node_table(ens, st)
    xa = augmented_input(g, ens, st, x, tab.blocks)
    int32 = onnx.TensorProto.INT32
    # Level 0: every row at every root; rows x trees (GatherElements of the expanded root
    # columns: a Gather on axis 1 is several times slower).
    n_rows = g.op("Slice", [g.op("Shape", [x], "x_shape"), g.const(np.asarray([0], np.int64), "n_start"),
                            g.const(np.asarray([1], np.int64), "n_stop")], "n_rows")
    rows_trees = g.op("Concat", [n_rows, g.const(np.asarray([st.n_trees], np.int64), "n_trees_1d")], "rows_trees", axis=0)
    roots = g.op("Expand", [g.const(tab.column[None, :, 0], "root_column"), rows_trees], "root_columns")
    xv = g.op("GatherElements", [xa, roots], "xv0", axis=1)
    step = g.op("Cast", [g.op("Greater", [xv, g.const(tab.threshold[:, 0], "root_threshold")], "right0")], "step0", to=int32)
    cur = g.op("Transpose", [g.op("Add", [step, g.const(tab.first[:, 0], "root_first")], "node1_rows")], "node1", perm=[1, 0])
    # Trees deepest first: level d walks only the trees deeper than d (the first rows of the
    # tables: GatherElements takes indices smaller than the data), the others are set aside.
    done: list[str] = []
    active = st.n_trees
    if tab.depth[0] > 1:
        column, threshold = g.const(tab.column, "node_column"), g.const(tab.threshold, "node_threshold")
        first = g.const(tab.first, "node_first")
    for d in range(1, int(tab.depth[0])):  # trees x rows
        keep = int(np.count_nonzero(tab.depth > d))
        if keep < active:
            done.append(_rows(g, cur, keep, active, f"done{d}"))
            cur, active = _rows(g, cur, 0, keep, f"node{d}_deep"), keep
        cols = g.op("Transpose", [g.op("GatherElements", [column, cur], f"col{d}", axis=1)], f"col{d}_rows", perm=[1, 0])
        xv = g.op("Transpose", [g.op("GatherElements", [xa, cols], f"xv{d}_rows", axis=1)], f"xv{d}", perm=[1, 0])
        right = g.op("Greater", [xv, g.op("GatherElements", [threshold, cur], f"thr{d}", axis=1)], f"right{d}")
        base = g.op("GatherElements", [first, cur], f"first{d}", axis=1)
        cur = g.op("Add", [base, g.op("Cast", [right], f"step{d}", to=int32)], f"node{d + 1}")
    if done:
        cur = g.op("Concat", [cur, *reversed(done)], "exit_node_sorted", axis=0)
    leaf_table = tab.leaf
    if np.any(tab.order != np.arange(st.n_trees)):
        position = np.empty_like(tab.order)
        position[tab.order] = np.arange(st.n_trees)
        cur = g.op("Gather", [cur, g.const(position, "tree_position")], "exit_node", axis=0)
        leaf_table = tab.leaf[position]
    return g.op("GatherElements", [g.const(leaf_table, "node_leaf"), cur], out=_layout.LEAF_TENSOR, axis=1)


def _rows(g: GraphBuilder, x: str, start: int, stop: int, hint: str) -> str:
    """Rows ``start:stop`` of ``x`` (axis 0)."""
    bounds = [g.const(np.asarray([v], np.int64), f"{hint}_{k}") for k, v in (("start", start), ("stop", stop), ("axis", 0))]
    return g.op("Slice", [x, *bounds], hint)


def constant_bytes(ens: Ensemble) -> int:
    """The node table (column, first and leaf index per node, threshold up to 8 bytes) over the
    widest tree's 2 I + 1 nodes, and the leaf values."""
    T, I, L = _layout.padded_sizes(ens)
    return T * (2 * I + 1) * (4 + 4 + 8 + 8) + T * L * ens.n_outputs * 8


def bytes_per_row(ens: Ensemble) -> int:
    """Per tree, the few [T, N] tensors of one level (alive one level at a time), the leaf ids
    and values (and their indices with several outputs); the augmented input (at most six
    blocks of the features)."""
    K = ens.n_outputs
    per_tree = 48 + 8 + (K * 8 if K == 1 else K * 24)
    return ens.n_trees * per_tree + 6 * ens.n_features * 8 + _layout.categorical_bytes_per_row(ens)


def build(ens: Ensemble, opts: GraphOptions) -> onnx.ModelProto:
    return _exact.build(ens, opts, "traverse", exit_leaf, constant_bytes=constant_bytes, layout="node-table")

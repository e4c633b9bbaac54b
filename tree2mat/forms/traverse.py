"""The ``traverse`` form: exact, for trees of any size.

Instead of testing every node against every leaf (the matrix forms' T x I x L), each row walks
each tree from the root, one level per step, all trees at once (:func:`exit_leaf`). Every node
is one test ``value > threshold`` on a column of an augmented input, routing exactly as the
matrix forms (same thresholds, NaN directions, zero band, missing-type Zero, categorical codes;
:func:`_layout.node_tests` says how), and the next node is ``first + (value > threshold)``. A leaf
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
from tree2mat.forms._spec import ALL_RUNTIMES, FormSpec
from tree2mat.ir.core import Ensemble


@dataclass
class NodeTable:
    """Every tree's nodes, internal and leaves, numbered breadth-first so that the two children
    of a node are neighbours: ``first`` (where a row goes when the node's test is false) and
    ``first + 1`` (where ``value > threshold``). Per node [T, P]: the ``column`` of the augmented
    input it reads, its ``threshold`` and ``first``; ``leaf``: each leaf node's leaf index.
    A leaf points at itself and holds a test that never holds (``_layout.NEVER``), so a row that
    reached it stays there."""

    column: np.ndarray  # int32 [T, P]
    threshold: np.ndarray  # compare dtype [T, P]
    first: np.ndarray  # int32 [T, P]
    leaf: np.ndarray  # int64 [T, P]: the leaf at each leaf node, -1 at internal and padding nodes
    blocks: tuple[str, ...]  # the augmented input's blocks, in column order
    order: np.ndarray  # int64 [T]: the table's trees, deepest first (the ensemble's tree of each row)
    depth: np.ndarray  # int64 [T]: each row's tree depth (non-increasing)
    width: int  # the augmented input's columns


def node_table(ens: Ensemble, st: _layout.Stacked) -> NodeTable:
    """Each node's test (:func:`_layout.node_tests`) at its breadth-first place; a swap node's
    children change places, so that ``value > threshold`` leads to ``first + 1`` everywhere."""
    never, never_threshold = _layout.NEVER
    tests = _layout.node_tests(ens, st, extra=(never,))
    T = st.n_trees
    P = max(2 * t.n_internal + 1 for t in ens.trees)
    column = np.full((T, P), tests.offset[never], np.int32)
    threshold = np.full((T, P), never_threshold, st.threshold.dtype)
    first = np.zeros((T, P), np.int32)
    leaf = np.full((T, P), -1, np.int64)
    for t, tree in enumerate(ens.trees):
        queue, next_id = deque([(0 if tree.n_internal else -1, 0)]), 1
        while queue:
            ref, me = queue.popleft()
            if ref < 0:
                leaf[t, me], first[t, me] = -1 - ref, me
                continue
            column[t, me], threshold[t, me], first[t, me] = tests.column[t, ref], tests.threshold[t, ref], next_id
            kids = (tree.right[ref], tree.left[ref]) if tests.swap[t, ref] else (tree.left[ref], tree.right[ref])
            queue.extend(((int(kids[0]), next_id), (int(kids[1]), next_id + 1)))
            next_id += 2
    depth = ens.tree_depths()
    order = np.argsort(-depth, kind="stable")
    return NodeTable(column[order], threshold[order], first[order], leaf[order], tests.blocks, order, depth[order], tests.width)


#: Copies of the node table the walk may add (see :func:`cuts`): this many times the table, or
#: CUT_BYTES if that is more; and the least walking a cut must save per row it copies.
CUT_FACTOR = 1
CUT_BYTES = 256 * 2**10
CUT_VALUE = 1.0


def cuts(depth: np.ndarray, row_bytes: int) -> list[int]:
    """The levels at which the walk sets finished trees aside (``depth``: the trees' depths,
    non-increasing). ``GatherElements`` takes data and indices of the same size on every axis
    but the gathered one, so each such level slices the node tables to the trees still walking:
    copies (constants a runtime folds once) that cost time at small batches, as larger constants
    do. Of the levels where some tree finishes, a cut is kept where the walking it saves (trees
    set aside times the levels to the next cut) is at least ``CUT_VALUE`` times the rows it
    copies, while the copies stay within ``CUT_FACTOR`` times the table (or ``CUT_BYTES``): the
    cuts that save the least walking per byte go first. Measured (onnxruntime 1.31, batch 1, 2
    threads): LGBMRegressor(500, 255 leaves) with copies of 12 times its table took 2.3 times as
    long as without copies, and 1.2 times walking every tree to the deepest level."""
    T = depth.size
    keep = [int(np.count_nonzero(depth > d)) for d in range(int(depth[0]) + 1)]
    chosen = [d for d in range(1, int(depth[0])) if keep[d] < keep[d - 1]]
    budget = max(CUT_FACTOR * T * row_bytes, CUT_BYTES)

    def saving(i: int) -> float:  # walking saved by cut i over the rows it copies
        before = keep[chosen[i - 1]] if i else T
        after = chosen[i + 1] if i + 1 < len(chosen) else int(depth[0])
        return (before - keep[chosen[i]]) * (after - chosen[i]) / max(keep[chosen[i]], 1)

    while chosen and (min(saving(i) for i in range(len(chosen))) < CUT_VALUE or sum(keep[d] for d in chosen) * row_bytes > budget):
        chosen.pop(min(range(len(chosen)), key=saving))
    return chosen


#: The walk's exit index: the node reached (int32, as the node tables).
INDEX_DTYPE = np.dtype(np.int32)

#: Batches of up to FLAT_ELEMENTS // T rows (at least one) walk the flat tables
#: (:func:`_walk_flat`), larger ones the trees x rows tables (:func:`_walk_wide`). Measured
#: (benchmarks/walk_speed.py, onnxruntime 1.31, 2 threads, six of suite.py's workloads): the
#: flat walk takes 0.40-0.76 of the wide walk's time at one row; at 100 rows it is ahead on five
#: of six, at 1 000 rows ahead or even on the 100-tree models and behind on the 500-tree ones,
#: at 4 000 rows behind on four of six.
FLAT_ELEMENTS = 8192


def flat_rows_max(width: int) -> int:
    """The most rows the flat walk can take: every offset into the flat input (rows x
    ``width`` columns) an int32."""
    return max(1, (2**31 - 1) // max(width, 1))


def flat_rows(n_trees: int, width: int) -> int:
    """The most rows the graph walks flat: FLAT_ELEMENTS trees x rows, at least one row."""
    return min(max(1, FLAT_ELEMENTS // n_trees), flat_rows_max(width))


@dataclass
class _Tables:
    """Names of the node table's three [T, P] constants."""

    column: str
    threshold: str
    first: str


def exit_leaf(g: GraphBuilder, ens: Ensemble, st: _layout.Stacked, x: _layout.Compared, opts: GraphOptions) -> _layout.Exit | _layout.Walks:
    """Rows walk every tree level by level, all trees at once (the exit: the node reached, trees
    deepest first, see :class:`_layout.Exit`); each step reads a node's column, threshold and
    ``first`` and moves to ``first + (value > threshold)``. The root level is one walk; from
    level 1 on, two walks of the same tables (:class:`_layout.Walks`): up to :func:`flat_rows`
    rows, :func:`_walk_flat` (few operators, nothing copied: at a few rows the operators'
    overhead is the time); above, :func:`_walk_wide` (operators a runtime spreads over its
    threads)."""
    tab = node_table(ens, st)
    xa = _layout.augmented_input(g, ens, st, x, tab.blocks)
    int32 = onnx.TensorProto.INT32
    # Level 0: every row at every root, trees x rows: the roots' columns are rows of the
    # transposed input (a Gather on axis 0: whole rows copied).
    columns = g.op("Transpose", [xa], "x_columns", perm=[1, 0])
    xv = g.op("Gather", [columns, g.const(tab.column[:, 0].astype(np.int64), "root_column")], "xv0", axis=0)
    step = g.op("Cast", [g.op("Greater", [xv, g.const(tab.threshold[:, :1], "root_threshold")], "right0")], "step0", to=int32)
    node1 = g.op("Add", [step, g.const(tab.first[:, :1], "root_first")], "node1")
    if tab.depth[0] <= 1:
        return _layout.Exit(node1, tab.order, tab.leaf, INDEX_DTYPE)
    tables = _Tables(g.const(tab.column, "node_column"), g.const(tab.threshold, "node_threshold"), g.const(tab.first, "node_first"))
    row_bytes = tab.column.shape[1] * (4 + 4 + tab.threshold.dtype.itemsize)
    cut_levels = cuts(tab.depth, row_bytes)
    most = flat_rows(st.n_trees, tab.width)
    limit = g.const(np.asarray([most], np.int64), "flat_rows")
    # (the rows counted on node1, which both walks read: a graph ordered by the nodes' explicit
    # inputs, as skl2onnx orders one, puts the If after it)
    small = g.op("LessOrEqual", [_rows_of(g, node1), limit], "flat_batch")
    return _layout.Walks(
        small, limit, most, flat_rows_max(tab.width),
        lambda b: _layout.Exit(_walk_flat(g, b, tab, xa, columns, node1, tables, cut_levels), tab.order, tab.leaf, INDEX_DTYPE),
        lambda b: _layout.Exit(_walk_wide(g, b, tab, xa, node1, tables, cut_levels), tab.order, tab.leaf, INDEX_DTYPE),
    )


def _rows_of(g: GraphBuilder, node: str) -> str:
    """[1] int64: the rows of ``node`` [T, N] (Shape's ``start``/``end`` from opset 15 on)."""
    if g.opset >= 15:
        return g.op("Shape", [node], "batch_rows", start=1, end=2)
    bounds = [g.const(np.asarray([v], np.int64), f"batch_rows_{k}") for k, v in (("start", 1), ("stop", 2))]
    return g.op("Slice", [g.op("Shape", [node], "node1_shape"), *bounds], "batch_rows")


def _walk_wide(g: GraphBuilder, b: GraphBuilder, tab: NodeTable, xa: str, cur: str, tables: _Tables, cut_levels: list[int]) -> str:
    """From level 1 on (``cur``: [T, N], the nodes of level 1), in ``b``: per step three
    ``GatherElements`` from the node table (trees x rows, last axis), one from the augmented
    input (rows x trees, last axis: the fast layout of both), a ``Greater``, and the next node.
    Every ``GatherElements`` takes data and indices of the same size on the other axis (the ONNX
    rule OpenVINO enforces): at the ``cut_levels`` the tables are sliced to the trees still
    walking (copies, made in ``g``, where runtimes fold them once); the trees set aside are
    concatenated back at the end, deepest first."""
    int32 = onnx.TensorProto.INT32
    column, threshold, first = tables.column, tables.threshold, tables.first
    done: list[str] = []
    active = tab.depth.size
    for d in range(1, int(tab.depth[0])):  # trees x rows
        if d in cut_levels:
            keep = int(np.count_nonzero(tab.depth > d))
            done.append(_rows(b, cur, keep, active, f"done{d}"))
            cur = _rows(b, cur, 0, keep, f"node{d}_deep")
            # (a Gather of the first rows, not a Slice: OpenVINO 2026.4 drops a Slice of a
            # constant that feeds GatherElements, then refuses the shapes)
            rows = g.const(np.arange(keep, dtype=np.int64), f"trees_{keep}")
            column, threshold, first = (g.op("Gather", [t, rows], f"{t}_{keep}", axis=0) for t in (column, threshold, first))
            active = keep
        cols = b.op("Transpose", [b.op("GatherElements", [column, cur], f"col{d}", axis=1)], f"col{d}_rows", perm=[1, 0])
        xv = b.op("Transpose", [b.op("GatherElements", [xa, cols], f"xv{d}_rows", axis=1)], f"xv{d}", perm=[1, 0])
        right = b.op("Greater", [xv, b.op("GatherElements", [threshold, cur], f"thr{d}", axis=1)], f"right{d}")
        base = b.op("GatherElements", [first, cur], f"first{d}", axis=1)
        cur = b.op("Add", [base, b.op("Cast", [right], f"step{d}", to=int32)], f"node{d + 1}")
    return b.op("Concat", [cur, *reversed(done)], "exit_node_sorted", axis=0) if done else cur


def _walk_flat(
    g: GraphBuilder, b: GraphBuilder, tab: NodeTable, xa: str, columns: str, cur: str, tables: _Tables, cut_levels: list[int],
) -> str:
    """:func:`_walk_wide`'s walk on one-dimensional tensors, in ``b``: the node tables flat
    (``first`` holding t P + node, made in ``g``, where runtimes fold them once), the nodes
    reached a vector of trees x rows, the input flat (row r's column c at r C + c); per step
    four ``GatherElements`` (on one axis any number of indices is within the rule: no copies
    where trees are set aside), the column's offset, a ``Greater`` and the next node. The same
    ``cut_levels``; the exit as :func:`_walk_wide`'s."""
    int32 = onnx.TensorProto.INT32
    T, P = tab.column.shape
    width = tab.width
    flat = g.const(np.asarray([-1], np.int64), "flat_shape")
    tree_start = g.const((np.arange(T, dtype=np.int32) * P)[:, None], "tree_start")
    column, threshold = (g.op("Reshape", [t, flat], f"{t}_flat") for t in (tables.column, tables.threshold))
    first = g.op("Reshape", [g.op("Add", [tables.first, tree_start], "node_first_global"), flat], "node_first_flat")
    # Row r's offset r C, per tree: [T, N] (counted along the rows: the augmented input is
    # NaN-free, so a value equals itself; tract 0.23 evaluates no Range or Slice of a Shape
    # inside an If).
    row = b.op("Gather", [columns, b.const(np.zeros(1, np.int64), "row_column")], "row_values", axis=0)
    count = b.op("CumSum", [b.op("Cast", [b.op("Equal", [row, row], "row_present")], "row_one", to=int32), b.scalar(np.int64(1), "row_axis")], "row_count")
    offsets = b.op(
        "Add", [b.op("Mul", [count, b.const(np.int32(width), "row_width")], "row_end"), b.const(np.full((T, 1), -width, np.int32), "row_start")],
        "row_offsets",
    )
    offset = b.op("Reshape", [offsets, flat], "row_offset")
    xflat = b.op("Reshape", [xa, flat], "x_flat")
    cur = b.op("Reshape", [b.op("Add", [cur, tree_start], "node1_global"), flat], "node1_flat")
    done: list[str] = []
    active = T
    for d in range(1, int(tab.depth[0])):
        if d in cut_levels:
            keep = int(np.count_nonzero(tab.depth > d))
            grid = b.op("Reshape", [cur, b.const(np.asarray([active, -1], np.int64), f"flat{d}_grid_shape")], f"flat{d}_grid")
            done.append(_rows(b, grid, keep, active, f"flat_done{d}"))
            cur = b.op("Reshape", [_rows(b, grid, 0, keep, f"flat{d}_deep_grid"), flat], f"flat{d}_deep")
            offset = b.op("Reshape", [_rows(b, offsets, 0, keep, f"row_offset{d}_grid"), flat], f"row_offset{d}")
            active = keep
        col = b.op("GatherElements", [column, cur], f"flat_col{d}", axis=0)
        xv = b.op("GatherElements", [xflat, b.op("Add", [col, offset], f"flat_x{d}")], f"flat_xv{d}", axis=0)
        right = b.op("Greater", [xv, b.op("GatherElements", [threshold, cur], f"flat_thr{d}", axis=0)], f"flat_right{d}")
        base = b.op("GatherElements", [first, cur], f"flat_first{d}", axis=0)
        cur = b.op("Add", [base, b.op("Cast", [right], f"flat_step{d}", to=int32)], f"flat_node{d + 1}")
    cur = b.op("Reshape", [cur, b.const(np.asarray([active, -1], np.int64), "flat_exit_shape")], "flat_exit_grid")
    if done:
        cur = b.op("Concat", [cur, *reversed(done)], "flat_exit_sorted", axis=0)
    return b.op("Sub", [cur, tree_start], "flat_exit")


def exit_layout(ens: Ensemble, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray, np.dtype]:
    """The walk's exit for a graph of input ``dtype`` (which nodes swap children depends on the
    thresholds in the compare dtype; see :class:`_layout.Exit`): the node reached, trees deepest
    first; -1 where a node is no leaf (a row there has not finished: a broken graph)."""
    tab = node_table(ens, _layout.stack(ens, np.dtype(dtype)))
    return tab.order, tab.leaf, INDEX_DTYPE


def _rows(g: GraphBuilder, x: str, start: int, stop: int, hint: str) -> str:
    """Rows ``start:stop`` of ``x`` (axis 0)."""
    bounds = [g.const(np.asarray([v], np.int64), f"{hint}_{k}") for k, v in (("start", start), ("stop", stop), ("axis", 0))]
    return g.op("Slice", [x, *bounds], hint)


def constant_bytes(ens: Ensemble) -> int:
    """The node table (column and first per node, threshold up to 8 bytes) over the widest
    tree's 2 I + 1 nodes, its copies at the cuts (at most its size, or CUT_BYTES), the flat
    walk's (its size: a runtime folds the reshaped tables into copies), and the leaf values per
    node (up to four float32 digits, or float64)."""
    T, I, L = _layout.padded_sizes(ens)
    table = T * (2 * I + 1) * (4 + 4 + 8)
    return 3 * table + CUT_BYTES + T * (2 * I + 1) * ens.n_outputs * 16


def bytes_per_row(ens: Ensemble) -> int:
    """Per tree, the few [T, N] tensors of one level (alive one level at a time), the exit index
    and values (and their indices with several outputs); the augmented input and its transpose
    (a few blocks of the features, a bound)."""
    K = 1 if _layout.one_class_per_tree(ens) else ens.n_outputs
    per_tree = 48 + 8 + (K * 8 if K == 1 else K * 24)
    return ens.n_trees * per_tree + 6 * ens.n_columns * 8 + _layout.input_bytes_per_row(ens)


def build(ens: Ensemble, opts: GraphOptions) -> onnx.ModelProto:
    return _exact.build(
        ens, opts, "traverse", exit_leaf, constant_bytes=constant_bytes, layout="node-table",
        constant_limit=constant_limit(), size_hint="train with fewer trees or leaves",
    )


#: Largest node table: beyond protobuf's 2 GiB the graph is written as ONNX external data; this
#: cap only stops a model no machine could score.
MAX_NODE_TABLE_BYTES = 32 * 2**30


def constant_limit() -> int:
    return MAX_NODE_TABLE_BYTES


#: Cost model (microseconds; benchmarks/form_speed.py fits them): per level walked, per tree.
PER_LEVEL_US, PER_TREE_US = 0.00324, 0.00192


def tree_levels(ens: Ensemble) -> int:
    """The levels the walk takes: every tree's depth (at least 1), summed."""
    return int(np.maximum(ens.tree_depths(), 1).sum())


def us_per_row(ens: Ensemble) -> float:
    return PER_LEVEL_US * tree_levels(ens) + PER_TREE_US * ens.n_trees


FORM = FormSpec(
    name="traverse",
    build=build,
    exact=True,
    summary="root-to-leaf walk, one level per step for all trees at once (GatherElements); memory grows with nodes, not nodes x leaves",
    constant_bytes=constant_bytes,
    bytes_per_row=bytes_per_row,
    constant_limit=constant_limit,
    us_per_row=us_per_row,
    exit_layout=exit_layout,
    proven_on=ALL_RUNTIMES,
)

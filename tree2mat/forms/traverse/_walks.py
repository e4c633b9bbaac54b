"""The walks a batch of rows takes through every tree at once, one level per step (which one:
:func:`tree2mat.forms.traverse.exit_leaf`; what they cost: :mod:`._cost`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx

from tree2mat.forms import _walk
from tree2mat.forms._graph import GraphBuilder

#: The least walking a cut must save (trees set aside times the levels to the next cut) per tree
#: it copies (see :func:`cuts`).
CUT_VALUE = 0.5


def cuts(depth: np.ndarray, multiple: int = 1) -> list[int]:
    """The levels at which the wide walk sets finished trees aside (``depth``: the trees' depths,
    non-increasing): each such level slices the trees still walking (a copy of them) and walks
    only those on. Of the levels where some tree finishes, a cut is kept where the walking it
    saves (trees set aside times the levels to the next cut) is at least ``CUT_VALUE`` times the
    trees it copies; the cuts that save the least go first. The trees kept walking are a multiple
    of ``multiple`` (see :func:`replicas`): a few finished ones walk on, in place at their leaf."""
    T = depth.size
    keep = [kept(depth, d, multiple) for d in range(int(depth[0]) + 1)]
    chosen = [d for d in range(1, int(depth[0])) if keep[d] < keep[d - 1]]

    def saving(i: int) -> float:  # walking saved by cut i per tree it copies
        before = keep[chosen[i - 1]] if i else T
        after = chosen[i + 1] if i + 1 < len(chosen) else int(depth[0])
        return (before - keep[chosen[i]]) * (after - chosen[i]) / before

    while chosen and min(saving(i) for i in range(len(chosen))) < CUT_VALUE:
        chosen.pop(min(range(len(chosen)), key=saving))
    return chosen


def kept(depth: np.ndarray, level: int, multiple: int = 1) -> int:
    """The trees walking on at a cut at ``level``: those deeper than it, rounded up to a multiple
    of ``multiple`` (at most all; ``depth`` non-increasing, so they are the first ones)."""
    return min(depth.size, -(-int(np.count_nonzero(depth > level)) // multiple) * multiple)


#: The wide walk gathers from copies of the flat node tables, [S, trees x nodes], by the nodes
#: reached as [S, rows x trees / S]: a runtime spreads a GatherElements over its outer axis
#: (onnxruntime on one axis runs one thread: benchmarks/RESULTS.md, "Measurements cited by the
#: code"). S is at most MAX_REPLICAS and a divisor of the trees (padded to a multiple of it),
#: and the copies at most REPLICA_BYTES (or one).
MAX_REPLICAS = 8
REPLICA_BYTES = 256 * 2**20


def replicas(n_trees: int, table_bytes: int) -> int:
    """S (see :data:`MAX_REPLICAS`): a power of two, at most an eighth of the trees."""
    s = 1
    while 2 * s <= MAX_REPLICAS and 2 * s * 8 <= n_trees and 2 * s * table_bytes <= REPLICA_BYTES:
        s *= 2
    return s



@dataclass
class Tables:
    """Names of the node table's three [T, P] constants, of each tree's start t P ([T, 1]) and
    of ``first`` as global ids (t P + first): every walk reads them."""

    column: str
    threshold: str
    first: str
    tree_start: str
    global_first: str


def walk_decided(g: GraphBuilder, b: GraphBuilder, tab: _walk.NodeTable, xa: str, rows: str, tables: Tables) -> str:
    """The fewest rows, in ``b``: every node's test of every row at once ([N, T P]: a
    ``GatherElements`` from the input by the nodes' columns broadcast to the rows, a
    ``Greater``), each node's next node from it (``first`` + the test, ids t P + node: a leaf's
    is itself), then one gather per level follows them from the roots ([N, T]: a ``Gather`` of
    the roots' next nodes, then ``GatherElements`` on axis 1). Few operators, each over all the
    nodes: it wins where the trees are deep for their nodes (leaf-wise). The exit as the flat
    walk's. (A ``Gather`` of the columns on axis 1 would copy element by element: tried, slower;
    benchmarks/RESULTS.md, "Measurements cited by the code".)"""
    T, P = tab.column.shape
    vector, row_shape = g.const(np.asarray([-1], np.int64), "decided_vector"), g.const(np.asarray([1, -1], np.int64), "decided_row_shape")
    # (made in ``g``, where runtimes fold them once)
    column, threshold, first = (
        g.op("Reshape", [t, row_shape], f"decided_{h}") for t, h in ((tables.column, "column"), (tables.threshold, "threshold"), (tables.global_first, "first"))
    )
    roots = g.op("Reshape", [tables.tree_start, vector], "decided_roots")
    grid = b.op("Concat", [rows, b.const(np.ones(1, np.int64), "decided_one")], "decided_grid", axis=0)  # [N, 1]
    xv = b.op("GatherElements", [xa, b.op("Expand", [column, grid], "decided_columns")], "decided_xv", axis=1)
    right = b.op("Greater", [xv, threshold], "decided_right")
    nxt = b.op("Add", [b.op("Cast", [right], "decided_step", to=onnx.TensorProto.INT32), first], "decided_next")
    cur = b.op("Gather", [nxt, roots], "decided_node1", axis=1)
    for d in range(1, int(tab.depth[0])):
        cur = b.op("GatherElements", [nxt, cur], f"decided_node{d + 1}", axis=1)
    local = b.op("Sub", [cur, g.op("Reshape", [tables.tree_start, row_shape], "decided_tree_start")], "decided_exit_rows")
    return b.op("Transpose", [local], "decided_exit", perm=[1, 0])


def root_level(g: GraphBuilder, tab: _walk.NodeTable, xa: str) -> tuple[str, str]:
    """The input transposed [C, N], and the nodes of level 1 [T, N]: every row at every root,
    trees x rows (the roots' columns are rows of the transposed input: a Gather on axis 0, whole
    rows copied)."""
    columns = g.op("Transpose", [xa], "x_columns", perm=[1, 0])
    xv = g.op("Gather", [columns, g.const(tab.column[:, 0].astype(np.int64), "root_column")], "xv0", axis=0)
    step = g.op("Cast", [g.op("Greater", [xv, g.const(tab.threshold[:, :1], "root_threshold")], "right0")], "step0", to=onnx.TensorProto.INT32)
    return columns, g.op("Add", [step, g.const(tab.first[:, :1], "root_first")], "node1")


def walk_wide(g: GraphBuilder, b: GraphBuilder, tab: _walk.NodeTable, xa: str, rows: str, tables: Tables) -> str:
    """In ``b``, rows x trees: the nodes reached are global ids (t P + node) [N, T'] (the trees
    padded to T', a multiple of S = :func:`replicas`, with trees of one leaf), and per level:
    three ``GatherElements`` from S copies of the flat tables by the nodes as [S, N T' / S] (made
    in ``g``, where runtimes fold them once), one from the input [N, C] by the columns as
    [N, T'] (no transpose: the last axis of both, onnxruntime's fast layout), a ``Greater``, a
    ``Cast`` and the next node. At the :func:`cuts` the trees still walking are sliced; the
    trees set aside are concatenated back at the end, deepest first, and the exit is [T, N]."""
    int32 = onnx.TensorProto.INT32
    T, P = tab.column.shape
    row_bytes = P * (4 + 4 + tab.threshold.dtype.itemsize)
    S = replicas(T, (T + MAX_REPLICAS) * row_bytes)
    Tp = -(-T // S) * S
    start = (np.arange(Tp, dtype=np.int32) * P)[None, :]
    column, threshold, first = _wide_tables(g, tab, tables, Tp, S, start)
    never_column, never_threshold = tab.never
    grid = b.const(np.asarray([S, -1], np.int64), "wide_grid")
    rows_of = {}

    def by_rows(active: int) -> str:  # [N, active] (N from the input's shape: its GatherElements provably fits it)
        if active not in rows_of:
            rows_of[active] = b.op("Concat", [rows, b.const(np.asarray([active], np.int64), f"wide_trees_{active}")], f"wide_rows_{active}", axis=0)
        return rows_of[active]

    # Level 0: the roots' columns broadcast to [N, T'] (a Gather of them on axis 1 copies
    # element by element: 3 times as long), thresholds and first broadcast.
    roots = np.concatenate([tab.column[:, 0], np.full(Tp - T, never_column, np.int32)])[None, :]
    xv = b.op("GatherElements", [xa, b.op("Expand", [b.const(roots, "wide_root_column"), by_rows(Tp)], "wide_col0")], "wide_xv0", axis=1)
    root_thr = np.concatenate([tab.threshold[:, 0], np.full(Tp - T, never_threshold, tab.threshold.dtype)])[None, :]
    root_first = start + np.concatenate([tab.first[:, 0], np.zeros(Tp - T, np.int32)])[None, :]
    right = b.op("Greater", [xv, b.const(root_thr, "wide_root_threshold")], "wide_right0")
    cur = b.op("Add", [b.op("Cast", [right], "wide_step0", to=int32), b.const(root_first, "wide_root_first")], "wide_node1")
    done: list[str] = []
    active = Tp
    depth = np.concatenate([tab.depth, np.zeros(Tp - T, tab.depth.dtype)])
    cut_levels = cuts(depth, S)
    for d in range(1, int(tab.depth[0])):
        if d in cut_levels:
            keep = kept(depth, d, S)
            done.append(_slice(b, cur, keep, active, 1, f"wide_done{d}"))
            cur = _slice(b, cur, 0, keep, 1, f"wide_node{d}_deep")
            active = keep
        at = b.op("Reshape", [cur, grid], f"wide_at{d}")
        col = b.op("Reshape", [b.op("GatherElements", [column, at], f"wide_col{d}", axis=1), by_rows(active)], f"wide_col{d}_rows")
        xv = b.op("Reshape", [b.op("GatherElements", [xa, col], f"wide_xv{d}_rows", axis=1), grid], f"wide_xv{d}")
        right = b.op("Greater", [xv, b.op("GatherElements", [threshold, at], f"wide_thr{d}", axis=1)], f"wide_right{d}")
        base = b.op("GatherElements", [first, at], f"wide_first{d}", axis=1)
        cur = b.op("Reshape", [b.op("Add", [base, b.op("Cast", [right], f"wide_step{d}", to=int32)], f"wide_next{d}"), by_rows(active)], f"wide_node{d + 1}")
    if done:
        cur = b.op("Concat", [cur, *reversed(done)], "wide_exit_global", axis=1)
    local = b.op("Sub", [cur, b.const(start, "wide_tree_start")], "wide_exit_rows")
    exit_sorted = b.op("Transpose", [local], "wide_exit_padded", perm=[1, 0])
    return _slice(b, exit_sorted, 0, T, 0, "exit_node_sorted") if Tp > T else exit_sorted


def _wide_tables(g: GraphBuilder, tab: _walk.NodeTable, tables: Tables, Tp: int, S: int, start: np.ndarray) -> tuple[str, str, str]:
    """In ``g`` (where runtimes fold them once): S copies of the flat column, threshold and
    global-first tables, [S, T' P] each, the T' - T padding trees of one leaf added."""
    T, P = tab.column.shape
    copies = g.const(np.asarray([S, 1], np.int64), "table_copies")

    def flat(table: str, pad: np.ndarray, hint: str) -> str:  # [S, T' P]: the T' - T trees of one leaf ``pad`` added
        padded = g.op("Concat", [table, g.const(pad, f"pad_{hint}")], f"padded_{hint}", axis=0) if Tp > T else table
        return g.op("Tile", [g.op("Reshape", [padded, g.const(np.asarray([1, -1], np.int64), "one_row")], f"flat_{hint}"), copies], f"wide_{hint}")

    never_column, never_threshold = tab.never
    pad = (Tp - T, P)
    column = flat(tables.column, np.full(pad, never_column, np.int32), "column")
    threshold = flat(tables.threshold, np.full(pad, never_threshold, tab.threshold.dtype), "threshold")
    # (a padding tree's nodes point at its root, which points at itself)
    first = flat(tables.global_first, np.repeat(start[0, T:, None], P, axis=1), "first")
    return column, threshold, first


def walk_flat(
    g: GraphBuilder, b: GraphBuilder, tab: _walk.NodeTable, xa: str, tables: Tables, cut_levels: list[int],
) -> str:
    """:func:`walk_wide`'s walk on one-dimensional tensors, in ``b``: the node tables flat
    (``first`` holding t P + node, made in ``g``, where runtimes fold them once), the nodes
    reached a vector of trees x rows, the input flat (row r's column c at r C + c); per step
    four ``GatherElements`` (on one axis any number of indices is within the rule: no copies
    where trees are set aside), the column's offset, a ``Greater`` and the next node. The same
    ``cut_levels``; the exit as :func:`walk_wide`'s."""
    int32 = onnx.TensorProto.INT32
    T, P = tab.column.shape
    width = tab.width
    columns, cur = root_level(b, tab, xa)
    flat = g.const(np.asarray([-1], np.int64), "flat_shape")
    tree_start = tables.tree_start
    column, threshold = (g.op("Reshape", [t, flat], f"{t}_flat") for t in (tables.column, tables.threshold))
    first = g.op("Reshape", [tables.global_first, flat], "node_first_flat")
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
            keep = kept(tab.depth, d)
            grid = b.op("Reshape", [cur, b.const(np.asarray([active, -1], np.int64), f"flat{d}_grid_shape")], f"flat{d}_grid")
            done.append(_slice(b, grid, keep, active, 0, f"flat_done{d}"))
            cur = b.op("Reshape", [_slice(b, grid, 0, keep, 0, f"flat{d}_deep_grid"), flat], f"flat{d}_deep")
            offset = b.op("Reshape", [_slice(b, offsets, 0, keep, 0, f"row_offset{d}_grid"), flat], f"row_offset{d}")
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


def _slice(g: GraphBuilder, x: str, start: int, stop: int, axis: int, hint: str) -> str:
    """``start:stop`` of ``x`` on ``axis``."""
    bounds = [g.const(np.asarray([v], np.int64), f"{hint}_{k}") for k, v in (("start", start), ("stop", stop), ("axis", axis))]
    return g.op("Slice", [x, *bounds], hint)

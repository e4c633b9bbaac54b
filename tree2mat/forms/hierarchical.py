"""The ``hierarchical`` form (a hierarchical decision machine): exact.

Each tree is cut into blocks: the top k levels from the root (a block of 2^k - 1 node tests), then
the top k levels below each node where a block ends, and so on. Every block is padded to the
perfect tree of depth k (a missing node tests a column that never holds, so a row that reached a
leaf goes on left and stays at it), so every block is the same decision machine: the bitvector
machine of the perfect tree (QuickScorer's matrix, :func:`template`), one [2^k, 2^k - 1] constant
shared by all blocks of all trees. A row's walk through a tree is then ceil(D / k) stages instead
of D levels; per stage, all trees at once: the current block's columns and thresholds (a
``Gather`` of whole rows of the block tables), the input's values there, the tests, their
products with the template summed per leaf (``Mul``, ``ReduceSum``: through a ``MatMul`` of the
same, OpenVINO's CPU plugin at its default bf16 misrouted rows), its ``ArgMax`` (the block's exit,
the first maximum) and the block or leaf that exit leads to (a table, ``after``). A leaf is a block of its own, of tests that never hold, whose
every exit leads back to it.

Per stage about a dozen operators replace k levels of the walk's seven or eight: at a few rows,
where each operator's overhead is the time, the form runs faster than ``traverse``; at large
batches its 2^k - 1 tests and 2^k scores a stage cost more than k levels of the walk (``auto``
weighs both, with ``--batch-hint``). Only the integers 0 and 1 and their sums up to 2^k - 1 pass
through the products: exact in any float type.

The node tests are the walk's (:func:`_walk.node_table`: one ``value > threshold`` on the
NaN-free augmented input, children swapped where the test holds for the left one), and the exit
is its: the node reached, in the node table's layout.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx

from tree2mat.forms import _exact, _exit, _nodes, _stack, _walk, costs
from tree2mat.forms._graph import GraphBuilder, GraphOptions
from tree2mat.forms._spec import ALL_RUNTIMES, FormSpec
from tree2mat.ir.core import Ensemble


def template(k: int) -> np.ndarray:
    """The perfect tree of depth ``k``'s bitvector matrix Q, float32 [2^k, 2^k - 1], nodes in
    heap order (node j's children 2j + 1, where the test fails, and 2j + 2): Q[l, j] = 0 iff leaf
    l lies in node j's left subtree. With z the tests that hold, the exit is the first maximum of
    Q z (see the bitvector form)."""
    K = 2**k - 1
    q = np.ones((K + 1, K), np.float32)
    for leaf in range(K + 1):
        p = K + leaf
        while p:
            parent = (p - 1) // 2
            if p == 2 * parent + 1:
                q[leaf, parent] = 0
            p = parent
    return q


@dataclass(frozen=True)
class Blocks:
    """The block tables of all trees (the node table's trees, deepest first). Rows 0..B-1 are
    blocks; row B + j the j-th leaf of the node table (row-major), a block of its own whose
    tests never hold. ``column`` [R, K] and ``threshold`` [R, K]: the tests in heap order;
    ``after`` [R, 2^k]: the row each exit leads to; ``leaf_node`` [R - B]: each leaf row's node
    in its tree's row of the node table; ``roots`` [T]: each tree's first row."""

    k: int
    column: np.ndarray  # int32 [R, K]
    threshold: np.ndarray  # compare dtype [R, K]
    after: np.ndarray  # int64 [R, 2^k]
    leaf_node: np.ndarray  # int64 [R - B]
    roots: np.ndarray  # int64 [T]
    n_blocks: int  # B


def blocks(tab: _walk.NodeTable, k: int) -> Blocks:
    """The node table ``tab`` cut into blocks of depth ``k`` (see :class:`Blocks`)."""
    T, P = tab.column.shape
    K = 2**k - 1
    never_column, never_threshold = tab.never
    trees, nodes = np.nonzero(tab.leaf >= 0)  # the leaves, row-major: leaf row B + j
    leaf_index = {(int(t), int(p)): j for j, (t, p) in enumerate(zip(trees, nodes))}
    # (tree, root node) of each block, in order: the trees' roots first (a tree of one leaf
    # needs no block), then the blocks below, as the blocks above reach them.
    B_rows: list[tuple[int, int]] = [(t, 0) for t in range(T) if tab.leaf[t, 0] < 0]
    index = {r: i for i, r in enumerate(B_rows)}
    column, threshold, after = [], [], []
    i = 0
    while i < len(B_rows):
        t, root = B_rows[i]
        i += 1
        col = np.full(K, never_column, np.int32)
        thr = np.full(K, never_threshold, tab.threshold.dtype)
        heap = [root] + [-1] * (2 * K)
        for j in range(K):
            node = heap[j]
            if tab.leaf[t, node] < 0:  # internal: its test; children first (fails), first + 1
                col[j], thr[j] = tab.column[t, node], tab.threshold[t, node]
                heap[2 * j + 1], heap[2 * j + 2] = int(tab.first[t, node]), int(tab.first[t, node]) + 1
            else:  # a leaf (or padding below one): never holds, stays at the leaf
                heap[2 * j + 1] = heap[2 * j + 2] = node
        out = []
        for node in heap[K:]:
            if tab.leaf[t, node] >= 0:
                out.append(-1 - leaf_index[(t, node)])  # a leaf row: B + j, once B is known
            else:
                if (t, node) not in index:
                    index[(t, node)] = len(B_rows)
                    B_rows.append((t, node))
                out.append(index[(t, node)])
        column.append(col)
        threshold.append(thr)
        after.append(out)
    B, n_leaves = len(B_rows), trees.size
    after_a = np.asarray(after, np.int64).reshape(B, K + 1)
    after_a = np.where(after_a < 0, B + (-1 - after_a), after_a)
    leaf_rows = B + np.arange(n_leaves, dtype=np.int64)
    roots = np.asarray([index[(t, 0)] if (t, 0) in index else B + leaf_index[(t, 0)] for t in range(T)], np.int64)
    return Blocks(
        k,
        np.concatenate([np.asarray(column, np.int32).reshape(B, K), np.full((n_leaves, K), never_column, np.int32)]),
        np.concatenate([np.asarray(threshold, tab.threshold.dtype).reshape(B, K), np.full((n_leaves, K), never_threshold, tab.threshold.dtype)]),
        np.concatenate([after_a, np.repeat(leaf_rows[:, None], K + 1, axis=1)]),
        nodes.astype(np.int64), roots, B,
    )


#: Block depths the form may use; :func:`block_depth` picks one by the cost per stage.
DEPTHS = (2, 3, 4)
#: Latency model at one row (microseconds): the run's operators around the stages, per stage, and
#: per test cell of a stage (trees x (2^k - 1)). Fitted to one-row p50s of 18 models
#: (benchmarks/latency_fit.json), within 12 %.
CALL_US, STAGE_US, PER_CELL_US = costs.of("hierarchical", "call_us", "stage_us", "per_cell_us")
#: Cost model per row (microseconds per stage and tree, and per product of a stage's test bits
#: with the template: trees x 2^k x (2^k - 1)), fitted to runs of 10 000 rows of 18 models
#: (benchmarks/latency_fit_rows.json; within 56 %), small ones among them: a fit on large models
#: alone put small ones far too fast, and auto picked this form where it was the slowest
#: (benchmarks/RESULTS.md, "Measurements cited by the code").
PER_STAGE_TREE_US, PER_TEMPLATE_PRODUCT_US = costs.of("hierarchical", "per_stage_tree_us", "per_template_product_us")


def stages(ens: Ensemble, k: int) -> int:
    """ceil(D / k): the stages of the deepest tree, with blocks of depth ``k``."""
    return max(1, -(-int(ens.tree_depths().max()) // k))


def block_depth(ens: Ensemble) -> int:
    """The block depth with the least estimated time at one row: stages x (operators + cells)."""
    return min(DEPTHS, key=lambda k: (stages(ens, k) * (STAGE_US + PER_CELL_US * ens.n_trees * (2**k - 1)), k))


def exit_leaf(g: GraphBuilder, ens: Ensemble, st: _stack.Stacked, x: _nodes.Compared, opts: GraphOptions) -> _exit.Exit:
    """The stages (see the module doc), rows x trees; the exit: the node reached [T, N], in the
    node table's layout."""
    tab = _walk.node_table(ens, st)
    xa = _nodes.augmented_input(g, ens, st, x, tab.blocks)
    bl = blocks(tab, block_depth(ens))
    T, P = tab.column.shape
    K = 2**bl.k - 1
    column, threshold = g.const(bl.column, "block_column"), g.const(bl.threshold, "block_threshold")
    after = g.const(bl.after.reshape(-1), "block_after")
    q = g.const(template(bl.k), "block_template")  # [2^k, K]
    width = g.const(np.int64(K + 1), "block_exits")
    rows = _walk.batch_rows(g, xa)
    flat_shape = g.op("Concat", [rows, g.const(np.asarray([T * K], np.int64), "block_cells")], "block_flat_shape", axis=0)
    cube = g.const(np.asarray([0, T, K], np.int64), "block_cube")
    here = g.op("Expand", [g.const(bl.roots[None, :], "block_roots"),
                           g.op("Concat", [rows, g.const(np.asarray([T], np.int64), "block_trees")], "block_grid", axis=0)], "block0")
    for s in range(stages(ens, bl.k)):
        cols = g.op("Reshape", [g.op("Gather", [column, here], f"block{s}_columns", axis=0), flat_shape], f"block{s}_columns_flat")
        values = g.op("Reshape", [g.op("GatherElements", [xa, cols], f"block{s}_values_flat", axis=1), cube], f"block{s}_values")
        holds = g.op("Greater", [values, g.op("Gather", [threshold, here], f"block{s}_thresholds", axis=0)], f"block{s}_tests")
        # (Mul and ReduceSum, not a MatMul: OpenVINO's CPU plugin at its default bf16 misrouted
        # 51 of 2 000 rows through the MatMul, none through these)
        bits = g.unsqueeze(g.op("Cast", [holds], f"block{s}_bits", to=onnx.TensorProto.FLOAT), [2], f"block{s}_bits4")
        scores = g.reduce_sum(g.op("Mul", [bits, q], f"block{s}_products"), [3], False, f"block{s}_scores")
        exit_ = g.op("ArgMax", [scores], f"block{s}_exit", axis=2, keepdims=0)
        here = g.op("Gather", [after, g.op("Add", [g.op("Mul", [here, width], f"block{s}_base"), exit_], f"block{s}_at")], f"block{s + 1}", axis=0)
    # (every row ends at a leaf row B + j, j < the leaves: the node of leaf j in its tree)
    leaf = g.op("Sub", [here, g.const(np.int64(bl.n_blocks), "block_leaf_rows")], "block_exit_leaf")
    node = g.op("Gather", [g.const(bl.leaf_node, "block_leaf_node"), leaf], "block_exit_node", axis=0)
    return _exit.Exit(g.op("Transpose", [node], "exit_node_sorted", perm=[1, 0]), tab.order, tab.leaf, np.dtype(np.int64))


def exit_layout(ens: Ensemble, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray, np.dtype]:
    """The exit: the node reached, as the walk's (:func:`_walk.exit_layout`), int64."""
    order, leaf, _ = _walk.exit_layout(ens, dtype)
    return order, leaf, np.dtype(np.int64)


def build(ens: Ensemble, opts: GraphOptions) -> onnx.ModelProto:
    return _exact.build(
        ens, opts, "hierarchical", exit_leaf, constant_bytes=constant_bytes, layout="block",
        constant_limit=_walk.constant_limit(), size_hint="train with fewer trees or leaves, or use --form traverse",
    )


def constant_bytes(ens: Ensemble) -> int:
    """The block tables: a row per block (at most one per internal node) and per leaf, 2^k
    cells a row (column int32, threshold up to 8 bytes, after int64; a bound), and the leaf
    values per node (up to four float32 digits, or float64)."""
    T, I, _ = _stack.padded_sizes(ens)
    rows = sum(t.n_internal + t.n_leaves for t in ens.trees)
    return rows * 2 ** block_depth(ens) * 20 + T * (2 * I + 1) * ens.n_outputs * 16


def bytes_per_row(ens: Ensemble) -> int:
    """Per tree, a stage's cells (columns, values, thresholds, tests, bits: 2^k - 1 each), their
    products with the template (2^k (2^k - 1)) and scores (2^k), the exit and its leaf values (K
    of them: :func:`tree2mat.forms._stack.exit_values_bytes_per_row`); the augmented input."""
    k = block_depth(ens)
    cells = ens.n_trees * ((2**k - 1) * 32 + 2**k * (2**k - 1) * 4 + 2**k * 4 + 48)
    return cells + _stack.exit_values_bytes_per_row(ens) + _stack.input_bytes_per_row(ens)


def us_per_row(ens: Ensemble) -> float:
    k = block_depth(ens)
    return stages(ens, k) * ens.n_trees * (PER_STAGE_TREE_US + PER_TEMPLATE_PRODUCT_US * 2**k * (2**k - 1))


def call_us(ens: Ensemble) -> float:
    k = block_depth(ens)
    return CALL_US + stages(ens, k) * (STAGE_US + PER_CELL_US * ens.n_trees * (2**k - 1))


FORM = FormSpec(
    name="hierarchical", build=build, exact=True,
    summary="hierarchical decision machine: trees cut into blocks of depth k, each the perfect tree's bitvector machine; ceil(D/k) stages of a dozen operators",
    constant_bytes=constant_bytes, bytes_per_row=bytes_per_row, constant_limit=_walk.constant_limit,
    us_per_row=us_per_row, call_us=call_us, matmul=("float32",), exit_layout=exit_layout, proven_on=ALL_RUNTIMES,
    node_tests=_walk.node_tests,
)

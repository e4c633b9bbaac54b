"""The ``traverse`` form: exact, for trees of any size.

Instead of testing every node against every leaf (the matrix forms' T x I x L), each row walks
each tree from the root, one level per step, all trees at once (:func:`exit_leaf`). Every node
is one test ``value > threshold`` on a column of an augmented input, routing exactly as the
matrix forms (same thresholds, NaN directions, zero band, missing-type Zero, categorical codes;
:func:`_nodes.node_tests` says how), and the next node is ``first + (value > threshold)``. A leaf
points at itself. Constants grow with the nodes, runtime memory per row with the trees, work
with the summed depths: deep random forests and large LightGBM models fit.
"""

from __future__ import annotations

import numpy as np
import onnx

from tree2mat.errors import UnsupportedModelError
from tree2mat.forms import _exact, _exit, _nodes, _stack, _walk
from tree2mat.forms._graph import GraphBuilder, GraphOptions
from tree2mat.forms._spec import ALL_RUNTIMES, FormSpec
from tree2mat.forms.traverse._cost import (
    FLAT_ELEMENTS,
    call_us,
    decided_rows,
    decided_rows_max,
    flat_call_us,
    flat_rows,
    flat_rows_max,
    run_us,
    tree_levels,
    us_per_row,
)
from tree2mat.forms.traverse._walks import CUT_VALUE, MAX_REPLICAS, REPLICA_BYTES, Tables, cuts, kept, replicas, root_level, walk_decided, walk_flat, walk_wide
from tree2mat.ir.core import Ensemble

#: What tests and benchmarks read of the walk (its batch limits, cuts and cost models).
__all__ = [
    "CUT_VALUE", "FLAT_ELEMENTS", "FORM", "REPLICA_BYTES", "call_us", "cuts", "decided_rows", "flat_call_us", "kept", "replicas", "run_us",
    "tree_levels", "us_per_row",
]


def exit_leaf(g: GraphBuilder, ens: Ensemble, st: _stack.Stacked, x: _nodes.Compared, opts: GraphOptions) -> _exit.Exit | _walk.Walks:
    """Rows walk every tree level by level, all trees at once (the exit: the node reached, trees
    deepest first, see :class:`_exit.Exit`); each step reads a node's column, threshold and
    ``first`` and moves to ``first + (value > threshold)``. A tree of depth 1 is one step; deeper
    trees, two or three walks of the same tables (:class:`_walk.Walks`): up to :func:`flat_rows`
    rows, :func:`walk_flat` (few operators, nothing copied: at a few rows the operators' overhead
    is the time); above, :func:`walk_wide` (operators a runtime spreads over its threads); and
    where :func:`decided_rows` says so, the fewest rows :func:`walk_decided` (every node's test
    at once, then one operator a level)."""
    tab = _walk.node_table(ens, st)
    xa = _nodes.augmented_input(g, ens, st, x, tab.blocks)
    if tab.depth[0] <= 1:
        return _exit.Exit(root_level(g, tab, xa)[1], tab.order, tab.leaf, _walk.INDEX_DTYPE)
    T, P = tab.column.shape
    if -(-T // MAX_REPLICAS) * MAX_REPLICAS * P > 2**31 - 1:  # (the walks' ids are int32; the wide walk pads the trees)
        raise UnsupportedModelError(f"the node table has {T * P} nodes, past int32's range; train with fewer trees or leaves")
    first = g.const(tab.first, "node_first")
    start = g.const((np.arange(T, dtype=np.int32) * P)[:, None], "tree_start")
    tables = Tables(
        g.const(tab.column, "node_column"), g.const(tab.threshold, "node_threshold"), first, start, g.op("Add", [first, start], "node_first_global"),
    )
    most = flat_rows(st.n_trees, tab.width)
    limit = g.const(np.asarray([most], np.int64), "flat_rows")
    rows = _walk.batch_rows(g, xa)
    small = g.op("LessOrEqual", [rows, limit], "flat_batch")
    few = None
    if fewest := decided_rows(T, P, int(tab.depth[0]), tree_levels(ens), tab.width):
        few_limit = g.const(np.asarray([fewest], np.int64), "decided_rows")
        few = _walk.FewWalk(
            g.op("LessOrEqual", [rows, few_limit], "decided_batch"), few_limit, fewest, decided_rows_max(T, P),
            lambda b: _exit.Exit(walk_decided(g, b, tab, xa, rows, tables), tab.order, tab.leaf, _walk.INDEX_DTYPE),
        )
    return _walk.Walks(
        small, limit, most, flat_rows_max(tab.width),
        lambda b: _exit.Exit(walk_flat(g, b, tab, xa, tables, cuts(tab.depth)), tab.order, tab.leaf, _walk.INDEX_DTYPE),
        lambda b: _exit.Exit(walk_wide(g, b, tab, xa, rows, tables), tab.order, tab.leaf, _walk.INDEX_DTYPE),
        few,
    )


def constant_bytes(ens: Ensemble) -> int:
    """The node table (column and first per node, threshold up to 8 bytes) over the widest
    tree's 2 I + 1 nodes and what runtimes fold from it once (``first`` as global ids, the flat
    walk's reshaped tables, the wide walk's padded ones: a table each, a bound), the wide walk's
    copies (:func:`replicas`: at most REPLICA_BYTES, or one), and the leaf values per node (up to
    four float32 digits, or float64)."""
    T, I, L = _stack.padded_sizes(ens)
    table = (T + MAX_REPLICAS) * (2 * I + 1) * (4 + 4 + 8)
    return 4 * table + max(table, min(MAX_REPLICAS * table, REPLICA_BYTES)) + T * (2 * I + 1) * ens.n_outputs * 16


def bytes_per_row(ens: Ensemble) -> int:
    """Per tree, the few [T, N] tensors of one level (alive one level at a time), the exit index
    and values (and their indices with several outputs); the augmented input and its transpose
    (a few blocks of the features, a bound)."""
    return ens.n_trees * (48 + 8) + _stack.exit_values_bytes_per_row(ens) + 6 * ens.n_columns * 8 + _stack.input_bytes_per_row(ens)


def build(ens: Ensemble, opts: GraphOptions) -> onnx.ModelProto:
    return _exact.build(
        ens, opts, "traverse", exit_leaf, constant_bytes=constant_bytes, layout="node-table",
        constant_limit=_walk.constant_limit(), size_hint="train with fewer trees or leaves",
    )




FORM = FormSpec(
    name="traverse",
    build=build,
    exact=True,
    summary="root-to-leaf walk, one level per step for all trees at once (GatherElements); memory grows with nodes, not nodes x leaves",
    constant_bytes=constant_bytes,
    bytes_per_row=bytes_per_row,
    constant_limit=_walk.constant_limit,
    us_per_row=us_per_row,
    call_us=call_us,
    run_us=run_us,
    exit_layout=_walk.exit_layout,
    proven_on=ALL_RUNTIMES,
    node_tests=_walk.node_tests,
    hummingbird=("tree_trav", "perf_tree_trav"),
)

"""The walk's node table, which ``traverse`` walks level by level and ``hierarchical`` cuts into
blocks: every tree's nodes numbered breadth-first, children side by side, each node's test on
the augmented input (:func:`_nodes.node_tests`), and the exit the walk reaches (the node, mapped
to its leaf); and traverse's walks per batch size, assembled into one graph (:class:`Walks`)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx

from tree2mat.contract import exit_metadata
from tree2mat.forms import _exit, _nodes, _stack
from tree2mat.forms._graph import GraphBuilder, tensor_info
from tree2mat.ir.core import Ensemble

#: The walk's exit index: the node reached (int32, as the node tables).
INDEX_DTYPE = np.dtype(np.int32)


@dataclass
class NodeTable:
    """Every tree's nodes, internal and leaves, numbered breadth-first so that the two children
    of a node are neighbours: ``first`` (where a row goes when the node's test is false) and
    ``first + 1`` (where ``value > threshold``). Per node [T, P]: the ``column`` of the augmented
    input it reads, its ``threshold`` and ``first``; ``leaf``: each leaf node's leaf index.
    A leaf points at itself and holds a test that never holds (``_nodes.NEVER``), so a row that
    reached it stays there."""

    column: np.ndarray  # int32 [T, P]
    threshold: np.ndarray  # compare dtype [T, P]
    first: np.ndarray  # int32 [T, P]
    leaf: np.ndarray  # int64 [T, P]: the leaf at each leaf node, -1 at internal and padding nodes
    blocks: tuple[str, ...]  # the augmented input's blocks, in column order
    order: np.ndarray  # int64 [T]: the table's trees, deepest first (the ensemble's tree of each row)
    depth: np.ndarray  # int64 [T]: each row's tree depth (non-increasing)
    width: int  # the augmented input's columns

    @property
    def never(self) -> tuple[int, np.generic]:
        """The column and threshold of a test that never holds (a leaf's)."""
        at = np.argwhere(self.leaf >= 0)[0]
        return int(self.column[tuple(at)]), self.threshold[tuple(at)]


def table_nodes(ens: Ensemble) -> int:
    """P: the node table's nodes per tree (the largest tree's, internal and leaves)."""
    return max(2 * t.n_internal + 1 for t in ens.trees)


def node_tests(ens: Ensemble, st: _stack.Stacked) -> _nodes.NodeTests:
    """The tests the node table holds: every node's (:func:`_nodes.node_tests`) and the leaves'
    test that never holds (a block of its own)."""
    return _nodes.node_tests(ens, st, extra=(_nodes.NEVER[0],))


def node_table(ens: Ensemble, st: _stack.Stacked) -> NodeTable:
    """Each node's test (:func:`_nodes.node_tests`) at its breadth-first place; a swap node's
    children change places, so that ``value > threshold`` leads to ``first + 1`` everywhere."""
    never, never_threshold = _nodes.NEVER
    tests = node_tests(ens, st)
    T = st.n_trees
    P = table_nodes(ens)
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


def batch_rows(g: GraphBuilder, x: str) -> str:
    """[1] int64: the rows of ``x`` [N, C] (Shape's ``start``/``end`` from opset 15 on)."""
    if g.opset >= 15:
        return g.op("Shape", [x], "batch_rows", start=0, end=1)
    bounds = [g.const(np.asarray([v], np.int64), f"batch_rows_{k}") for k, v in (("start", 0), ("stop", 1))]
    return g.op("Slice", [g.op("Shape", [x], "x_shape"), *bounds], "batch_rows")


def exit_layout(ens: Ensemble, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray, np.dtype]:
    """The walk's exit for a graph of input ``dtype`` (which nodes swap children depends on the
    thresholds in the compare dtype; see :class:`_exit.Exit`): the node reached, trees deepest
    first; -1 where a node is no leaf (a row there has not finished: a broken graph)."""
    tab = node_table(ens, _stack.stack(ens, np.dtype(dtype)))
    return tab.order, tab.leaf, INDEX_DTYPE


#: Largest node table: beyond protobuf's 2 GiB the graph is written as ONNX external data; this
#: cap only stops a model no machine could score.
MAX_NODE_TABLE_BYTES = 32 * 2**30


def constant_limit() -> int:
    return MAX_NODE_TABLE_BYTES


@dataclass(frozen=True)
class Walks:
    """Two or three ways a form finds the exit, chosen per batch by an ``If`` on its rows:
    ``small`` (``If`` true: the batch has at most ``rows``, the [1] int64 constant ``limit``,
    rows) or ``large``; each builds its :class:`_exit.Exit` in the branch builder it is given.
    ``few``: a third walk for the fewest rows, taken first (an outer ``If`` whose other branch
    holds the ``If`` above), or None. Everything after the exit is built in every branch, so the
    ``If`` writes the graph's outputs (OpenVINO 2026.4 misreads a tensor an ``If`` computes and
    the graph reads on). ``small`` takes at most ``most`` rows (its offsets' range). ``verify``
    runs every row every way (``tree2mat.walk_rows_tensor``, ``tree2mat.walk_rows``,
    ``tree2mat.walk_rows_max``, and ``tree2mat.walk_few*`` for ``few``)."""

    cond: str
    limit: str
    rows: int
    most: int
    small: Callable[[GraphBuilder], _exit.Exit]
    large: Callable[[GraphBuilder], _exit.Exit]
    few: FewWalk | None = None

    def assemble(self, g: GraphBuilder, ens: Ensemble, tail: _exit.Tail) -> tuple[list[onnx.ValueInfoProto], np.dtype, dict[str, str]]:
        """Each walk with the tail after it, in the branches of the ``If`` s (everything after
        the exit in every branch: the ``If`` writes the graph's outputs), one exit index for all
        (so one exit map: the walks must agree on it); :class:`_exit.Branches`."""
        outer = g.branch("rest") if self.few is not None else g
        small, large = outer.branch("small"), outer.branch("large")
        walks = [(small, self.small), (large, self.large)]
        if self.few is not None:
            walks.append((g.branch("few"), self.few.walk))
        exits = []
        for b, walk in walks:
            exits.append(walk(b))
            outs, dtype = tail(b, exits[-1])
        exit = exits[-1]
        if not all(e.index_dtype == exit.index_dtype and np.array_equal(e.order, exit.order) and np.array_equal(e.slots, exit.slots) for e in exits):
            raise RuntimeError("the walks' exits differ in layout, which one exit index and its map cannot say")  # (a form's bug)
        index = g.fresh("exit_node")
        for (b, _), e in zip(walks, exits):
            b.renamed[index] = e.index
        T = ens.n_trees
        written = [*outs, tensor_info(index, exit.index_dtype, [T, "N"])]
        outer.if_(self.cond, small, large, written)
        metadata = {
            **exit_metadata(index, exit.exit_map),
            "tree2mat.walk_rows_tensor": self.limit, "tree2mat.walk_rows": str(self.rows), "tree2mat.walk_rows_max": str(self.most),
        }
        if self.few is not None:
            g.if_(self.few.cond, walks[2][0], outer, written)
            metadata.update({"tree2mat.walk_few_tensor": self.few.limit, "tree2mat.walk_few": str(self.few.rows),
                             "tree2mat.walk_few_max": str(self.few.most)})
        return outs, dtype, metadata


@dataclass(frozen=True)
class FewWalk:
    """The walk of :class:`Walks` for batches of at most ``rows`` rows (``cond``: the batch's
    rows <= ``limit``, the [1] int64 constant holding ``rows``); it takes at most ``most`` rows.
    ``verify`` runs every row through it too (``tree2mat.walk_few_tensor``,
    ``tree2mat.walk_few``, ``tree2mat.walk_few_max``)."""

    cond: str
    limit: str
    rows: int
    most: int
    walk: Callable[[GraphBuilder], _exit.Exit]

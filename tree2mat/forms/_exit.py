"""The exit, what an exact form's third pass finds: where every row ends in every tree
(:class:`Exit`, its layout, the leaf ids it maps to), or ways of finding it chosen per batch
(:class:`Branches`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import onnx

from tree2mat.contract import EXIT_LEAVES, ExitMap
from tree2mat.forms._graph import GraphBuilder
from tree2mat.ir.core import Ensemble


@dataclass(frozen=True)
class Exit:
    """Where every row ends in every tree, as an exact form finds it: ``index`` [T, N] (int64,
    or int32: ``index_dtype``), its row r for tree ``order[r]``, holding positions in that
    tree's row of ``slots`` [T, S] (the leaf at each position). Leaf values are gathered by
    ``index`` from tables laid out so (see :meth:`per_slot`), with no reordering; the leaf ids
    themselves (:meth:`leaf_ids`) are computed only where the graph needs them (``--leaves``,
    linear leaves): ``verify`` maps the index to leaf ids by the same layout, which the graph
    carries (:attr:`exit_map`, :mod:`tree2mat.contract`)."""

    index: str
    order: np.ndarray  # int64 [T]
    slots: np.ndarray  # int64 [T, S] (-1: a position that is no leaf)
    index_dtype: np.dtype = np.dtype(np.int64)

    def per_slot(self, table: np.ndarray, n_leaves: int) -> np.ndarray:
        """A [T * L, K] table of per-leaf rows (:class:`Stacked`'s layout) as [T, S, K] rows of
        ``index``'s trees and positions (0 at positions that are no leaf)."""
        per_tree = table.reshape(-1, n_leaves, table.shape[1])
        out = per_tree[self.order[:, None], np.maximum(self.slots, 0)]
        out[self.slots < 0] = 0
        return out

    @property
    def position(self) -> np.ndarray:
        """int64 [T]: each ensemble tree's row of ``index`` (the inverse of ``order``)."""
        position = np.empty_like(self.order)
        position[self.order] = np.arange(self.order.size)
        return position

    @property
    def exit_map(self) -> ExitMap:
        return ExitMap(self.order, self.slots, self.index_dtype)

    def leaf_ids(self, g: GraphBuilder, name: str | None = None) -> str:
        """The leaf ids [T, N] int64, trees in the ensemble's order (``name``: the tensor's)."""
        if self.exit_map.layout == EXIT_LEAVES:
            return self.index if name is None else g.op("Identity", [self.index], out=name)
        # The index's rows put in tree order first, then the leaf at each position (the slots
        # reordered alike). Gathering the leaves first and their rows after, IREE 3.13 fused the
        # two gathers into one dispatch and refused it ("expected no unbounded stack allocations").
        index = g.op("Gather", [self.index, g.const(self.position, "tree_position")], "exit_in_tree_order", axis=0)
        return g.op("GatherElements", [g.const(self.slots[self.position], "node_leaf"), index], "leaf_ids", out=name, axis=1)


#: ``tail(g, exit)``: everything after the exit (leaf values, sums, head), built in ``g``; the
#: outputs' value infos and the margin's dtype.
Tail = Callable[[GraphBuilder, Exit], tuple[list[onnx.ValueInfoProto], np.dtype]]


class Branches(Protocol):
    """Ways a form finds the exit, chosen per batch (traverse's walks, :class:`_walk.Walks`),
    which assemble themselves: ``assemble(g, ens, tail)`` builds each way with the ``tail``
    after it and returns the outputs' value infos, the margin's dtype and the graph's metadata
    (the contract's keys of its exit index, and how verify takes each way)."""

    def assemble(self, g: GraphBuilder, ens: Ensemble, tail: Tail) -> tuple[list[onnx.ValueInfoProto], np.dtype, dict[str, str]]: ...


def leaves_output(g: GraphBuilder, exit: Exit) -> str:
    """The ``leaves`` output [N, T] (``--leaves``): each row's leaf id per tree."""
    return g.op("Transpose", [exit.leaf_ids(g)], out="leaves", perm=[1, 0])


#: The most reference rows x trees a ``proximity`` output compares (:func:`proximity_output`):
#: the graph holds one int64 leaf id per pair (8 MiB at the bound) and, per input row, a bool
#: and a float32 per pair ([T, N, R]: 5 MiB a row at the bound, 5 GiB for a batch of 1 000).
MAX_PROXIMITY_PAIRS = 2**20


def proximity_output(g: GraphBuilder, exit: Exit, reference: np.ndarray, dtype: np.dtype) -> str:
    """The ``proximity`` output [N, R] (``dtype``, the graph's float outputs'): for each row and
    each reference row, the fraction of the T trees in which the two reach the same leaf (the
    random-forest kernel: Decision Machines eq. 6's delta, averaged over the trees). ``reference``:
    the reference rows' leaf ids [R, T] (int64), numbered as :meth:`Exit.leaf_ids`. The count of
    equal leaves is an integer at most T (``Equal``, ``Cast``, ``ReduceSum``: exact in float32
    below 2**24, in any order), which picks its quotient c / T from a table of the T + 1 of them,
    each correctly rounded here: OpenVINO's ``Div`` by T is not (9 / 20 gave 0.45000002)."""
    R, T = reference.shape
    ids = g.op("Unsqueeze", [exit.leaf_ids(g), g.const(np.asarray([2], np.int64), "proximity_axis")], "proximity_ids")  # [T, N, 1]
    ref = g.const(np.ascontiguousarray(reference.T.reshape(T, 1, R), np.int64), "proximity_reference")  # [T, 1, R]
    same = g.op("Cast", [g.op("Equal", [ids, ref], "proximity_same")], "proximity_ones", to=onnx.TensorProto.FLOAT)
    count = g.op("ReduceSum", [same, g.const(np.asarray([0], np.int64), "proximity_trees")], "proximity_count", keepdims=0)
    quotients = np.arange(T + 1, dtype=dtype) / dtype.type(T)  # (IEEE division: correctly rounded)
    index = g.op("Cast", [count], "proximity_index", to=onnx.TensorProto.INT64)
    return g.op("Gather", [g.const(quotients, "proximity_quotients"), index], out="proximity", axis=0)

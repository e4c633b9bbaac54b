"""A model's sizes as its file declares them, checked before anything of it is built.

A reader learns how large a model is long before it builds it: the trees' node counts, the
outputs per leaf, the categories a bitset holds are all written down first. A hostile or
mistaken file declares sizes that would take minutes and gigabytes to build (a 345 KB LightGBM
text whose categorical splits name a million categories each; an 8 MB IR file with a million
outputs). Each reader sums what it read into a :class:`Declared` and hands it to
:func:`declare` before it allocates; the command that reads (``convert``, ``verify``, ...)
installs the check, with :func:`checking`, that weighs it against its memory budget (what the
forms need at least: ``tree2mat.forms._stack.floor_bytes``). Outside such a block nothing is
checked here.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from tree2mat.errors import UnsupportedModelError
from tree2mat.ir.core import Ensemble


@dataclass(frozen=True)
class Declared:
    """What a model's file says it holds (all trees together)."""

    trees: int = 0
    #: Internal nodes and leaves, all trees together.
    internal: int = 0
    leaves: int = 0
    #: Values per leaf (K, the margin's columns: classes, targets).
    outputs: int = 1
    #: Categorical nodes, the category entries they list (each node's count, summed), the input
    #: columns they test and the most categories one column has (all its nodes' together).
    categorical_nodes: int = 0
    category_entries: int = 0
    widest_node: int = 0
    categorical_columns: int = 0
    widest_column: int = 0

    #: The bytes of the file's text (JSON, model text) that reading parses whole.
    text_bytes: int = 0
    #: The bytes of what reading takes in as it is stored (a ``.skops`` file's arrays).
    stored_bytes: int = 0

    def ir_bytes(self) -> int:
        """Bytes that reading the model takes: the IR's arrays once built (per internal node its
        feature, threshold, direction and children: 33 bytes; per leaf its K values and source
        id; per categorical node its categories padded to the widest: value and direction, 9
        bytes each, a bound), or parsing the file's text (Python's objects of a JSON document or
        a model text's lines take about 8 bytes per byte of it; stored arrays, read and then
        built, 2), whichever is most."""
        arrays = 33 * self.internal + self.leaves * (8 * self.outputs + 16) + 9 * self.categorical_nodes * self.widest_node
        return max(arrays, 8 * self.text_bytes, 2 * self.stored_bytes)

    @staticmethod
    def of(ens: Ensemble) -> Declared:
        """The sizes of an ensemble already built (what its file would have declared); computed
        once per ensemble (every form's memory estimate asks)."""
        known = _OF.get(id(ens))
        if known is not None and known[0]() is ens:
            return known[1]
        sizes, key = Declared._count(ens), id(ens)
        _OF[key] = (weakref.ref(ens, lambda _: _OF.pop(key, None)), sizes)
        return sizes

    @staticmethod
    def _count(ens: Ensemble) -> Declared:
        columns, sets = [], []
        for tree in ens.trees:
            columns += tree.feature[tree.cat_nodes].tolist()
            sets += [np.unique(v[~np.isnan(v)]) for v in tree.cat_values]
        return Declared(
            trees=ens.n_trees, internal=sum(t.n_internal for t in ens.trees), leaves=sum(t.n_leaves for t in ens.trees),
            outputs=ens.n_outputs, **category_sizes(np.asarray(columns, np.int64), sets),
        )

    def describe(self) -> str:
        """The sizes, as a message names them."""
        if not self.trees:
            return f"a text of {self.text_bytes:,} bytes to parse" if self.text_bytes else f"{self.stored_bytes:,} bytes of stored data"
        parts = [f"{self.trees:,} trees", f"{self.internal + self.leaves:,} nodes"]
        if self.outputs > 1:
            parts.append(f"{self.outputs:,} outputs per leaf")
        if self.categorical_nodes:
            parts.append(f"{self.categorical_nodes:,} categorical splits listing {self.category_entries:,} categories "
                         f"({self.widest_column:,} in the widest column)")
        return ", ".join(parts)


#: :meth:`Declared.of` of the ensembles alive, by id (an ``Ensemble`` holds arrays: no hash).
_OF: dict[int, tuple[weakref.ref, Declared]] = {}

#: The check a reader's :func:`declare` calls (None: none).
_CHECK: ContextVar[Callable[[Declared, str], None] | None] = ContextVar("tree2mat_declared_check", default=None)


@contextmanager
def checking(check: Callable[[Declared, str], None]) -> Iterator[None]:
    """Within the block, every reader's :func:`declare` calls ``check(sizes, name)``, which
    raises to refuse the model."""
    token = _CHECK.set(check)
    try:
        yield
    finally:
        _CHECK.reset(token)


def declare(sizes: Declared, name: str) -> None:
    """A reader's sizes of the model ``name``, before it builds anything: refused here when the
    check in force says so (none in force: :func:`check_reading`)."""
    check = _CHECK.get()
    (check or check_reading)(sizes, name)


def check_reading(sizes: Declared, name: str) -> None:
    """Refuse a model whose reading (:meth:`Declared.ir_bytes`) would take over half this
    machine's memory."""
    held, limit = sizes.ir_bytes(), physical_memory() // 2
    if held > limit:
        raise UnsupportedModelError(
            f"{name}: declares {sizes.describe()}: reading it takes about {held / 2**30:.2f} GiB, over half this machine's "
            f"memory ({limit / 2**30:.2f} GiB); refused before anything of it was built"
        )


#: Where a reader reports the trees it has read (None: nowhere).
_REPORT: ContextVar[Callable[[int, int], None] | None] = ContextVar("tree2mat_reading_report", default=None)

T = TypeVar("T")


@contextmanager
def reporting(report: Callable[[int, int], None]) -> Iterator[None]:
    """Within the block, readers call ``report(trees_read, trees)`` as they read a model's
    trees: at the start, at every further tenth of them, and at the end."""
    token = _REPORT.set(report)
    try:
        yield
    finally:
        _REPORT.reset(token)


def trees_read(trees: Sequence[T]) -> Iterator[T]:
    """The items of ``trees`` (what a reader builds a tree from, one each), reported as they are
    read (:func:`reporting`)."""
    report, n = _REPORT.get(), len(trees)
    tenth = max(1, n // 10)
    for i, item in enumerate(trees):
        if report is not None and i % tenth == 0:
            report(i, n)
        yield item
    if report is not None:
        report(n, n)


def physical_memory() -> int:
    """This machine's memory in bytes (4 GiB where the system does not say)."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return 4 * 2**30


def category_sizes(columns: np.ndarray, sets: list[np.ndarray]) -> dict[str, int]:
    """The categorical fields of :class:`Declared` for categorical nodes testing ``columns``,
    node m listing the sorted distinct codes ``sets[m]`` (a column's categories: its nodes'
    together)."""
    per_column: dict[int, list[np.ndarray]] = {}
    for column, codes in zip(columns.tolist(), sets):
        per_column.setdefault(column, []).append(codes)
    widest = max((np.unique(np.concatenate(codes)).size for codes in per_column.values()), default=0)  # (one sort a column)
    return {
        "categorical_nodes": len(sets), "category_entries": int(sum(s.size for s in sets)),
        "widest_node": max((s.size for s in sets), default=0),
        "categorical_columns": len(per_column), "widest_column": widest,
    }

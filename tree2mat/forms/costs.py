"""The forms' cost models' inputs: their fitted constants and the model sizes they read.

The constants (microseconds) are data, not code: ``costs.json`` beside this module holds every
form's, read once here. benchmarks/form_speed.py (``--fit --write``) and benchmarks/latency_fit.py
(``--write``) fit them on measured runs and write them there; each form reads its own with
:func:`of` (a matrix form its whole :class:`~tree2mat.forms._exact.DenseCost` with :func:`dense`).
:func:`sizes` gives those scripts the model sizes the cost models are linear in.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tree2mat.forms import _exact, _stack, _walk
from tree2mat.ir.core import Ensemble

#: The constants' file, shipped with the package (package data).
PATH = Path(__file__).with_name("costs.json")

_FITTED: dict[str, dict[str, float]] = json.loads(PATH.read_text(encoding="utf-8"))["constants"]


def of(form: str, *names: str) -> tuple[float, ...]:
    """The constants ``names`` of ``form``'s cost model, in that order."""
    fitted = _FITTED[form]
    return tuple(float(fitted[name]) for name in names)


def dense(form: str) -> _exact.DenseCost:
    """A matrix form's cost model: per row, per padded node and per matrix entry; one row's run."""
    per_node, per_product, call, call_per_node, call_per_product, call_per_tree = of(
        form, "per_node_us", "per_product_us", "call_us", "call_per_node_us", "call_per_product_us", "call_per_tree_us")
    return _exact.DenseCost(per_node, per_product, (call, call_per_node, call_per_product, call_per_tree))


@dataclass(frozen=True)
class Sizes:
    """The sizes of a model the forms' cost models are linear in (what the fitting scripts fit on)."""

    trees: int
    #: Internal nodes and leaves of every tree once padded (the matrix forms' [T, I, L]).
    internal: int
    leaves: int
    #: The matrix forms' work per row, their trees padded in size groups: nodes and leaves
    #: (sum of T_g (I_g + L_g)) and matrix entries (sum of T_g I_g L_g).
    nodes: int
    products: int
    #: The walks' node table: nodes per tree (the largest tree's, internal and leaves).
    table_nodes: int
    #: The levels a walk of every tree takes (every tree's depth, at least 1, summed), and the
    #: deepest tree's depth (at least 1).
    levels: int
    depth: int


def sizes(ens: Ensemble) -> Sizes:
    """``ens``'s :class:`Sizes`."""
    trees, internal, leaves = _stack.padded_sizes(ens)
    nodes, products = _exact.padded_work(ens)
    return Sizes(trees, internal, leaves, nodes, products, _walk.table_nodes(ens), _stack.tree_levels(ens), max(ens.max_depth(), 1))

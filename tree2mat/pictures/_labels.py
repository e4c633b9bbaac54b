"""The text of a tree's picture and the measures it is laid out in: the font, a character's width,
the colours of left and right; the boxes' labels (a node's test, a leaf's value) and the title."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tree2mat.errors import OptionError
from tree2mat.inspect import matrices_of
from tree2mat.ir.core import Comparison, Ensemble, Tree

#: Trees with up to this many leaves are drawn in full, every matrix cell labelled.
DETAIL_LEAVES = 16
FONT = 7.5  # points
CHAR = 0.058  # inches: a character of DejaVu Sans at FONT points, on average
LEFT, RIGHT = "#4575b4", "#d73027"


def feature_labels(ens: Ensemble, feature_names: Sequence[str] | None = None) -> list[str]:
    """``feature_names``, else the model's feature names, else ``x1..`` (as ``inspect`` prints)."""
    names = feature_names if feature_names is not None else ens.feature_names
    if names is None:
        return [f"x{f + 1}" for f in range(ens.n_features)]
    if len(names) != ens.n_features:
        raise OptionError(f"{len(names)} feature names for a model of {ens.n_features} features")
    return [str(n) for n in names]


def node_labels(ens: Ensemble, tree: int, feature_names: Sequence[str] | None = None) -> tuple[list[str], list[str]]:
    """The labels :func:`draw_tree` writes into tree ``tree``'s boxes (below the names ``n1``,
    ``v1``): per internal node, breadth-first, its test as two lines, the feature name then
    ``≤ 0.8`` (``<`` for XGBoost), or ``in {..}`` / ``not in {..}`` (categories that go left)
    for a categorical node; per leaf, left to right, its value (up to three: ``[1, 0, 0]``; more:
    ``argmax <class or output>: <its value>``)."""
    matrices_of(ens, tree)  # checks the index
    t = ens.trees[tree]
    names = feature_labels(ens, feature_names)
    cat_row = {int(node): m for m, node in enumerate(t.cat_nodes)}
    op = "≤" if ens.comparison is Comparison.LE else "<"
    nodes = [
        f"{_short(names[int(t.feature[i])]) if t.feature[i] < ens.n_features else 'W x'}\n"
        + (_categorical_test(t, cat_row[i]) if i in cat_row else f"{op} {_num(t.threshold[i])}")
        for i in range(t.n_internal)
    ]
    outputs = _output_names(ens, t.n_outputs)
    return nodes, [_leaf_text(t, j, outputs) for j in range(t.n_leaves)]


def _num(v: float, digits: int = 4) -> str:
    text = f"{v:.{digits}g}"
    return f"{v:.0f}" if "e+" in text and abs(v) < 1e6 else text  # 16384, not 1.638e+04


def _short(name: str, most: int = 24) -> str:
    return name if len(name) <= most else name[: most - 1] + "…"


def _categorical_test(t: Tree, m: int) -> str:
    """A categorical node's test for going left (NaN goes as default_left says, not shown)."""
    vals, left = t.cat_values[m], t.cat_left[m]
    listed = ~np.isnan(vals)
    if t.other_left[m]:  # left unless listed as going right
        return f"not in {_set(vals[listed & ~left])}"
    return f"in {_set(vals[listed & left])}"


def _set(vals: np.ndarray, most: int = 5) -> str:
    items = [_num(v) for v in np.sort(vals)]
    if len(items) > most:
        items = items[: most - 1] + [f"+{len(items) - most + 1} more"]
    return "{" + ", ".join(items) + "}"


def _leaf_text(t: Tree, j: int, outputs: list[str]) -> str:
    if t.linear_const is not None and t.linear_feature is not None:
        terms = int(np.count_nonzero(t.linear_feature[j] >= 0))
        return f"{_num(t.linear_const[j])}\n+ {terms} linear terms" if terms else _num(t.linear_const[j])
    row = t.value[j]
    if row.size == 1:
        return _num(row[0])
    if row.size <= 3:
        return "[" + ", ".join(_num(v, 3) for v in row) + "]"
    top = int(np.argmax(row))
    return f"argmax {outputs[top]}: {_num(row[top], 3)}"


def _output_names(ens: Ensemble, k: int) -> list[str]:
    if len(ens.classes) == 1 and len(ens.classes[0]) == k:
        return [str(c) for c in ens.classes[0].tolist()]
    return [f"k{i}" for i in range(k)]


def _title(ens: Ensemble, index: int, t: Tree, mats: dict[str, np.ndarray], model_name: str | None, cut: int) -> str:
    depth = int(mats["depth"].max(initial=0))
    head = f"{model_name} ({ens.source})" if model_name else ens.source or "model"
    line = (f"{head}: tree {index} (0-based, of {ens.n_trees}) · {t.n_internal} internal nodes (n1.. breadth-first), "
            f"{t.n_leaves} leaves (v1.. left to right), depth {depth}, {ens.n_features} features")
    notes = [f"tree drawn down to level {cut}, each deeper subtree one box"] if cut else []
    if t.n_leaves > DETAIL_LEAVES:
        notes.append("matrices without cell values, labels thinned")
    return line + ("\n" + "; ".join(notes) if notes else "")


def _text_width(text: str) -> float:
    return CHAR * max(len(line) for line in text.split("\n"))

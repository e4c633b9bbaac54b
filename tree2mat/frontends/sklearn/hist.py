"""scikit-learn's ``HistGradientBoosting*``: predictors of its own node arrays (not ``Tree``
objects), compared in float64, over columns its ``_preprocessor`` may reorder and encode (its
categories: raw values or the codes of named ones)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tree2mat.errors import UnsupportedModelError
from tree2mat.frontends._sklearn_api import _class_groups, _common, _name
from tree2mat.ir.build import tree_from_nodes
from tree2mat.ir.core import Aggregation, Comparison, Ensemble, LabelRule, Link, Task, Tree

F64 = np.dtype(np.float64)


Labels = tuple[tuple[int, tuple[str | int | float, ...]], ...]


def _hgb_columns(model: Any) -> tuple[np.ndarray, dict[int, np.ndarray], Labels]:
    """Map HGB's internal columns to input columns; the values the graph takes for each
    internal categorical column's categories (in its encoder's order); the labels of input
    columns with non-numeric categories, whose values are then the codes (positions)."""
    n = int(model.n_features_in_)
    pre = getattr(model, "_preprocessor", None)
    if pre is None:
        return np.arange(n), {}, ()
    order = np.zeros(n, np.int64)
    cats: dict[int, np.ndarray] = {}
    labels: list[tuple[int, tuple[str | int | float, ...]]] = []
    for name, trans, cols in pre.transformers_:
        if name == "remainder":
            continue
        src = np.flatnonzero(cols) if np.asarray(cols).dtype == bool else np.asarray(cols, np.int64)
        out = np.arange(n)[pre.output_indices_[name]]
        order[out] = src
        if name == "encoder":
            for j, values in zip(out, trans.categories_):
                values = np.asarray(values)
                if values.dtype.kind in "iuf":
                    values = values.astype(np.float64)
                    cats[int(j)] = values[~np.isnan(values)]
                    continue
                # NaN is no category (its code is NaN); None, in an object column, is one: refused below
                known = [v for v in values.tolist() if not (isinstance(v, float) and np.isnan(v))]
                if not all(isinstance(v, str) for v in known):
                    raise UnsupportedModelError(
                        f"{_name(model)}: categorical column {int(order[j])} has categories of mixed or "
                        f"unsupported types ({sorted({type(v).__name__ for v in known})}); strings or numbers are supported"
                    )
                # The graph takes the code (position) of a category named by a string.
                cats[int(j)] = np.arange(len(known), dtype=np.float64)
                labels.append((int(order[j]), tuple(known)))
    return order, cats, tuple(sorted(labels))



def _hgb_tree(model: Any, predictor: Any, order: np.ndarray, cats: dict[int, np.ndarray]) -> Tree:
    nodes = predictor.nodes
    bitsets = predictor.raw_left_cat_bitsets
    categories = {}
    for i in np.flatnonzero(nodes["is_categorical"] & ~nodes["is_leaf"].astype(bool)):
        col = int(nodes["feature_idx"][i])
        values = cats[col]
        codes = np.arange(values.size)
        row = bitsets[int(nodes["bitset_idx"][i])]
        goes_left = ((row[codes // 32] >> (codes % 32).astype(np.uint32)) & 1).astype(bool)
        categories[int(i)] = (values, goes_left)
    is_leaf = nodes["is_leaf"].astype(bool)
    return tree_from_nodes(
        nodes["left"], nodes["right"], is_leaf, order[nodes["feature_idx"].astype(np.int64)],
        nodes["num_threshold"], nodes["missing_go_to_left"].astype(bool), nodes["value"],
        categories=categories, where=_name(model),
    )


def _hist_gradient_boosting(model: Any) -> Ensemble:
    name = _name(model)
    order, cats, labels = _hgb_columns(model)
    trees, index = [], []
    for iteration in model._predictors:
        for j, predictor in enumerate(iteration):
            trees.append(_hgb_tree(model, predictor, order, cats))
            index.append(j)
    k = int(model.n_trees_per_iteration_)
    base = np.asarray(model._baseline_prediction, np.float64).reshape(k)
    link_name = type(model._loss.link).__name__
    links = {"IdentityLink": Link.IDENTITY, "LogLink": Link.EXP, "LogitLink": Link.LOGISTIC,
             "MultinomialLogit": Link.SOFTMAX}
    if link_name not in links:
        raise UnsupportedModelError(f"{name} with loss {model.loss!r} ({link_name}) is not supported")
    # Its OrdinalEncoder refuses +-inf in categorical columns (numeric ones take it).
    finite = tuple(sorted(int(order[j]) for j in cats))
    common = dict(_common(model), accepts_nan=True, accepts_inf=True, finite_features=finite, category_labels=labels)
    is_clf = hasattr(model, "classes_")
    return Ensemble(
        trees=tuple(trees), n_outputs=k, output_index=np.asarray(index), comparison=Comparison.LE,
        source_dtype=F64, aggregation=Aggregation.SUM, base_score=base, link=links[link_name],
        task=Task.CLASSIFICATION if is_clf else Task.REGRESSION,
        classes=_class_groups(model) if is_clf else (),
        label_rule=LabelRule.POSITIVE if is_clf and k == 1 else LabelRule.ARGMAX, **common,
    ).validate()

"""treeple frontend: oblique decision trees and forests (``w . x <= t``) to the IR.

Semantics followed (treeple 0.10, its scikit-learn fork's ``Tree`` and ``ObliqueTree``):
- an oblique node's value is ``s = 0; s += x[j] * w`` over its terms in float32 (the input cast
  to float32, float32 weights: +-1 from treeple's splitters, so each product is exact and only
  the sums round), compared with ``s <= threshold`` (float64); a NaN ``s`` goes where
  ``missing_go_to_left`` says (predict refuses NaN and +-inf: the oblique estimators' tags say
  ``allow_nan=False``);
- the terms are summed in the order of the tree's own vectors, which treeple's Python API does
  not expose: ``get_projection_matrix()`` gives a node's weights by feature. A tree loaded from a
  pickle (or joblib) file has its vectors rebuilt in ascending feature order, the order the IR
  takes; a tree still in memory after ``fit`` sums in the order its splitter drew the terms, so
  a row within float32 rounding of a hyperplane of 3 or more terms may go the other way there.
- a node whose projection is one term of weight 1 is the axis-aligned test ``x[j] <= t`` (``0 +
  x * 1`` is ``x``, NaN included) and stays one; every other node tests a projection of its own.

treeple imports only with scikit-learn 1.6 (see docs/models.md); this module never imports it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tree2mat.errors import ModelFileError, UnsupportedModelError
from tree2mat.frontends import _sklearn_api as sk
from tree2mat.frontends._spec import FrontendSpec
from tree2mat.frontends._support import SupportRow
from tree2mat.ir.build import tree_from_nodes
from tree2mat.ir.core import Aggregation, Comparison, Ensemble, LabelRule, Link, Projections, Task, Tree

#: A projection's terms: the features (ascending) and their weights.
Terms = tuple[np.ndarray, np.ndarray]


def _oblique_tree(est: Any, values: np.ndarray, n_features: int, projections: list[Terms]) -> Tree:
    """A treeple ``ObliqueTree`` with leaf values [n_nodes, K] to an IR tree; each oblique node's
    projection is appended to ``projections`` (the node tests column ``n_features + m``)."""
    t = est.tree_
    if type(t).__name__ != "ObliqueTree":
        raise UnsupportedModelError(f"treeple {type(est).__name__} with a {type(t).__name__} tree is not supported (ObliqueTree only)")
    is_leaf = t.children_left == -1
    weights = np.asarray(t.get_projection_matrix(), np.float64)
    feature = np.zeros(t.node_count, np.int64)
    for node in np.flatnonzero(~is_leaf):
        cols = np.flatnonzero(weights[node])
        if cols.size == 0:
            raise ModelFileError(f"treeple {type(est).__name__}: split node {node} has no projection weights")
        if cols.size == 1 and weights[node, cols[0]] == 1.0:
            feature[node] = cols[0]
            continue
        feature[node] = n_features + len(projections)
        projections.append((cols, weights[node, cols]))
    return tree_from_nodes(
        t.children_left, t.children_right, is_leaf, feature, t.threshold,
        np.asarray(t.missing_go_to_left, bool), values, where=type(est).__name__,
    )


def _ensemble(model: Any, estimators: list[Any], aggregation: Aggregation) -> Ensemble:
    # predict refuses NaN and +-inf (allow_nan=False in every oblique estimator's tags)
    common = dict(sk._common(model), source=f"treeple.{type(model).__name__}", accepts_nan=False, accepts_inf=False)
    values: Callable[[Any], np.ndarray]
    head: dict[str, Any]
    if hasattr(model, "classes_"):
        classes = sk._class_groups(model)
        n_classes = tuple(len(c) for c in classes)
        k, head = sum(n_classes), {"task": Task.CLASSIFICATION, "classes": classes, "label_rule": LabelRule.ARGMAX}
        values = lambda e: sk._classifier_values(e, n_classes)  # noqa: E731
    else:
        k, head = int(model.n_outputs_), {"task": Task.REGRESSION}
        values = lambda e: e.tree_.value[:, :, 0]  # noqa: E731
    terms: list[Terms] = []
    trees = tuple(_oblique_tree(e, values(e), common["n_features"], terms) for e in estimators)
    return Ensemble(
        trees=trees, n_outputs=k, output_index=np.full(len(trees), -1), comparison=Comparison.LE,
        source_dtype=np.dtype(np.float32), aggregation=aggregation, base_score=np.zeros(k), link=Link.IDENTITY,
        projections=Projections.from_terms(terms) if terms else None, **head, **common,
    ).validate()


def _single_tree(model: Any) -> Ensemble:
    return _ensemble(model, [model], Aggregation.SUM)


def _forest(model: Any) -> Ensemble:
    if getattr(model, "max_bins", None) is not None:
        raise UnsupportedModelError(f"treeple {type(model).__name__} with max_bins={model.max_bins} (binned input) is not supported")
    return _ensemble(model, list(model.estimators_), Aggregation.MEAN)


_MISSING = "no (treeple refuses NaN and +-inf)"
_CLS = "oblique splits (w . x <= t, float32 sums); int or str labels; multi-output"
_REG = "oblique splits (w . x <= t, float32 sums); multi-output"
_FOREST_REG = _REG + "; treeple 0.10.3 itself cannot fit or predict them (its ForestRegressor tags fail on scikit-learn 1.6)"

@dataclass(frozen=True)
class EstimatorSpec(SupportRow):
    """One supported estimator: its converter and what the README's support table says of it."""

    convert: Callable[[Any], Ensemble] = _single_tree


ESTIMATORS: dict[str, EstimatorSpec] = {
    f"{kind}DecisionTree{task}": EstimatorSpec(what, _MISSING, notes, _single_tree)
    for kind in ("Oblique", "PatchOblique", "ExtraOblique")
    for task, what, notes in (("Classifier", "classification", _CLS), ("Regressor", "regression", _REG))
} | {
    f"{kind}RandomForest{task}": EstimatorSpec(what, _MISSING, notes, _forest)
    for kind in ("Oblique", "PatchOblique", "ExtraOblique")
    for task, what, notes in (("Classifier", "classification", _CLS), ("Regressor", "regression", _FOREST_REG))
}


def handles(model: Any) -> bool:
    return type(model).__module__.split(".")[0] == "treeple"


def to_ensemble(model: Any) -> Ensemble:
    name = type(model).__name__
    if name not in ESTIMATORS:
        raise UnsupportedModelError(f"treeple {name} is not supported; supported: {', '.join(ESTIMATORS)}")
    if not hasattr(model, "n_features_in_"):
        raise UnsupportedModelError(f"treeple {name} is not fitted")
    return ESTIMATORS[name].convert(model)


SPEC = FrontendSpec(
    name="treeple",
    library="treeple",
    handles=handles,
    to_ensemble=to_ensemble,
    # treeple's estimators are scikit-learn's (predict, predict_proba, the forest's mean of them)
    reference_outputs=lambda model, X, raw, ens: sk.estimator_outputs(model, X, raw),
    estimators=ESTIMATORS,
)

"""What the frontends of estimators of scikit-learn's API share (scikit-learn's own and treeple's,
which are independent of each other): an estimator's name, its classes, its ``Tree`` objects as
IR trees, the fields of ``_common``, and its own predictions under the graph's output names
(:func:`estimator_outputs`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tree2mat.errors import UnsupportedModelError
from tree2mat.frontends._support import normalize_classes
from tree2mat.ir.build import tree_from_nodes
from tree2mat.ir.core import Tree


def _name(model: Any) -> str:
    return type(model).__name__


def _class_groups(model: Any) -> tuple[np.ndarray, ...]:
    classes = model.classes_
    groups = list(classes) if isinstance(classes, list) else [classes]
    groups = [normalize_classes(c, _name(model)) for c in groups]
    if any(len(g) < 2 for g in groups):
        raise UnsupportedModelError(f"{_name(model)} was fitted on a single class; there is nothing to convert")
    if len({g.dtype.kind for g in groups}) > 1:
        raise UnsupportedModelError(f"{_name(model)}: targets mix string and integer labels")
    return tuple(groups)


def _sk_tree(est: Any, values: np.ndarray, feature_map: np.ndarray | None = None) -> Tree:
    """An sklearn ``Tree`` object with leaf values [n_nodes, K] to an IR tree."""
    t = est.tree_
    is_leaf = t.children_left == -1
    feature = np.where(is_leaf, 0, t.feature).astype(np.int64)
    if feature_map is not None:
        feature = np.asarray(feature_map, np.int64)[feature]
    missing_left = getattr(t, "missing_go_to_left", np.zeros(t.node_count, np.uint8))
    return tree_from_nodes(
        t.children_left, t.children_right, is_leaf, feature, t.threshold,
        np.asarray(missing_left, bool), values, where=_name(est),
    )


def _classifier_values(est: Any, n_classes: tuple[int, ...]) -> np.ndarray:
    """Per node, the class fractions of every target side by side: [n_nodes, sum(C)]."""
    v = est.tree_.value
    return np.concatenate([v[:, k, :c] for k, c in enumerate(n_classes)], axis=1)


def _tags(model: Any) -> tuple[bool, bool]:
    """(accepts NaN, accepts inf) at predict time."""
    try:
        allow_nan = bool(model.__sklearn_tags__().input_tags.allow_nan)
    except AttributeError:  # pragma: no cover - older scikit-learn
        allow_nan = False
    return allow_nan, False


def _common(model: Any) -> dict[str, Any]:
    names = getattr(model, "feature_names_in_", None)
    nan, inf = _tags(model)
    return {
        "n_features": int(model.n_features_in_),
        "feature_names": tuple(str(n) for n in names) if names is not None else None,
        "source": f"sklearn.{_name(model)}",
        "accepts_nan": nan,
        "accepts_inf": inf,
    }


def _stack_proba(proba: Any) -> np.ndarray:
    if not isinstance(proba, list):
        return np.asarray(proba)
    width = max(p.shape[1] for p in proba)
    out = np.zeros((proba[0].shape[0], len(proba), width))
    for j, p in enumerate(proba):
        out[:, j, : p.shape[1]] = p
    return out


def estimator_outputs(model: Any, X: Any, raw: bool) -> dict[str, np.ndarray]:
    """A classifier's or regressor's own predictions under the graph's output names: ``label``
    and ``probabilities`` (``raw``: the margin, ``variable``), or ``variable``."""
    n = X.shape[0]
    if hasattr(model, "classes_"):
        out = {"label": np.asarray(model.predict(X))}
        if not raw:
            out["probabilities"] = _stack_proba(model.predict_proba(X))
        elif hasattr(model, "decision_function"):
            out["variable"] = np.asarray(model.decision_function(X)).reshape(n, -1)
        else:  # forests: the margin is the averaged class fractions, targets side by side
            proba = model.predict_proba(X)
            out["variable"] = np.concatenate(proba if isinstance(proba, list) else [proba], axis=1)
        return out
    return {"variable": np.asarray(model.predict(X)).reshape(n, -1)}

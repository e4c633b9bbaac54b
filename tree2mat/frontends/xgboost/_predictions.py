"""XGBoost's own predictions and leaves of a model object, for ``verify`` (xgboost needed)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tree2mat.ir.core import Ensemble, Link, Task


def reference_outputs(model: Any, X: np.ndarray, raw: bool, ens: Ensemble) -> dict[str, np.ndarray]:
    """XGBoost's own outputs (``ens``: the model's IR): a wrapper's predict / predict_proba; for a
    Booster, what XGBClassifier would make of its predictions. Multi-label classifiers (one binary column per
    target): predict_proba's p per target becomes [1 - p, p], the graph contract's [N, G, 2]."""
    n = X.shape[0]
    if type(model).__name__ != "Booster":
        if not hasattr(model, "classes_"):
            return {"variable": np.asarray(model.predict(X, output_margin=raw)).reshape(n, -1)}
        label = np.asarray(model.predict(X))  # multi-label: float 0/1 per target
        out = {"label": label.astype(np.int64) if label.ndim == 2 else label}
        if raw:
            out["variable"] = np.asarray(model.predict(X, output_margin=True)).reshape(n, -1)
        else:
            probs = np.asarray(model.predict_proba(X))
            out["probabilities"] = np.stack([1 - probs, probs], axis=2) if label.ndim == 2 else probs
        return out
    data = _dmatrix(model, X)
    margin = model.predict(data, output_margin=True).reshape(n, -1)
    pred = model.predict(data)
    if ens.task is not Task.CLASSIFICATION:
        return {"variable": margin if raw else pred.reshape(n, -1)}
    if ens.link is Link.SOFTMAX:  # multi:softprob predicts probabilities, multi:softmax the class
        from scipy.special import softmax

        probs = pred if pred.ndim == 2 else softmax(margin, axis=1)  # as XGBClassifier.predict_proba
        label = np.argmax(probs, axis=1) if pred.ndim == 2 else pred.astype(np.int64)
    else:  # binary, one column per target: p is the sigmoid, the margin (logitraw) or 0/1 (hinge)
        p = pred.reshape(n, -1)
        probs, label = np.stack([1 - p, p], axis=2), (p > 0.5).astype(np.int64)
        if p.shape[1] == 1:
            probs, label = probs[:, 0], label[:, 0]
    return {"label": label, ("variable" if raw else "probabilities"): margin if raw else probs}


def reference_leaves(model: Any, X: np.ndarray, ens: Ensemble) -> np.ndarray:
    """XGBoost's own leaf of each row and tree (``pred_leaf``: node ids, the IR's
    ``leaf_source_id``), [N, trees]: a Booster's on the rows its predictions above were made of;
    a wrapper's as its ``apply`` (its ``missing``, its best iteration), with the booster's
    feature names, which a model fitted on a DataFrame asks of the rows (``apply`` gives none)."""
    if type(model).__name__ == "Booster":
        return np.asarray(model.predict(_dmatrix(model, X), pred_leaf=True)).reshape(X.shape[0], -1)
    booster = model.get_booster()
    leaves = booster.predict(_dmatrix(booster, X, model.missing), pred_leaf=True, iteration_range=model._get_iteration_range(None))
    return np.asarray(leaves).reshape(X.shape[0], -1)


def _dmatrix(booster: Any, X: Any, missing: float | None = None) -> Any:
    """The rows as a Booster's predictions take them (``missing``: a wrapper's)."""
    import xgboost as xgb

    if isinstance(X, np.ndarray):
        return xgb.DMatrix(X, missing=missing, feature_names=booster.feature_names, feature_types=booster.feature_types, enable_categorical=True)
    return xgb.DMatrix(X, missing=missing, enable_categorical=True)  # a DataFrame with named categories: XGBoost codes them itself

"""scikit-learn frontend: fitted estimators to the IR, and their own predictions for ``verify``.

Semantics followed (scikit-learn 1.5 - 1.9):
- ``DecisionTree*``/``ExtraTree*``, forests, ``GradientBoosting*``, ``IsolationForest`` cast the
  input to float32 and go left when ``x <= threshold`` (float64); NaN by ``missing_go_to_left``.
- ``HistGradientBoosting*`` compare float64 input with ``<=``; categorical features pass through an
  internal ``OrdinalEncoder`` (exact value -> code; unseen values and NaN count as missing), so a
  categorical node is a set of raw category values.

The package: :mod:`~tree2mat.frontends.sklearn.hist` (``HistGradientBoosting*``, whose trees are
node arrays of their own); :mod:`tree2mat.frontends._sklearn_api` holds what this frontend
shares with treeple's (an estimator's classes, trees and predictions); here, the estimators made of ``Tree`` objects, the registry, the estimators' own
predictions and the SPEC.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tree2mat.errors import UnsupportedModelError
from tree2mat.frontends._sklearn_api import _class_groups, _classifier_values, _common, _name, _sk_tree, estimator_outputs
from tree2mat.frontends._spec import FrontendSpec
from tree2mat.frontends._support import SupportRow, labelled_frame
from tree2mat.frontends.sklearn.hist import _hist_gradient_boosting
from tree2mat.ir.core import (
    Aggregation,
    Comparison,
    Ensemble,
    LabelRule,
    Link,
    OutlierParams,
    Task,
)

F32 = np.dtype(np.float32)


# ------------------------------------------------------------------------- trees and forests


def _tree_ensemble(model: Any, estimators: list[Any], aggregation: Aggregation) -> Ensemble:
    common = _common(model)
    if hasattr(model, "classes_"):
        classes = _class_groups(model)
        n_classes = tuple(len(c) for c in classes)
        trees = tuple(_sk_tree(e, _classifier_values(e, n_classes)) for e in estimators)
        return Ensemble(
            trees=trees, n_outputs=sum(n_classes), output_index=np.full(len(trees), -1),
            comparison=Comparison.LE, source_dtype=F32, aggregation=aggregation,
            base_score=np.zeros(sum(n_classes)), link=Link.IDENTITY, task=Task.CLASSIFICATION,
            classes=classes, label_rule=LabelRule.ARGMAX, **common,
        ).validate()
    k = int(model.n_outputs_)
    trees = tuple(_sk_tree(e, e.tree_.value[:, :, 0]) for e in estimators)
    return Ensemble(
        trees=trees, n_outputs=k, output_index=np.full(len(trees), -1), comparison=Comparison.LE,
        source_dtype=F32, aggregation=aggregation, base_score=np.zeros(k), link=Link.IDENTITY,
        task=Task.REGRESSION, **common,
    ).validate()


def _single_tree(model: Any) -> Ensemble:
    return _tree_ensemble(model, [model], Aggregation.SUM)


def _forest(model: Any) -> Ensemble:
    return _tree_ensemble(model, list(model.estimators_), Aggregation.MEAN)


# --------------------------------------------------------------------------- gradient boosting


#: GradientBoosting's losses: the IR's link, and the scikit-learn link whose ``link`` turns the
#: init estimator's prediction into the starting score (``_init_raw_predictions``).
_GB_LINKS = {
    "HalfBinomialLoss": (Link.LOGISTIC, "LogitLink"), "ExponentialLoss": (Link.LOGISTIC_2X, "HalfLogitLink"),
    "HalfMultinomialLoss": (Link.SOFTMAX, "MultinomialLogit"),
    "HalfSquaredError": (Link.IDENTITY, None), "AbsoluteError": (Link.IDENTITY, None),
    "HuberLoss": (Link.IDENTITY, None), "PinballLoss": (Link.IDENTITY, None),
}


def _gb_init_scores(model: Any, k: int) -> np.ndarray:
    """What ``_raw_predict_init`` gives every row, computed from the fitted arrays as scikit-learn
    computes it, without calling any method of the model or of what it holds (a file's
    ``init_`` could be anything its reader accepts: only 'zero' and the dummy estimators that
    ``init=None`` fits are read)."""
    from sklearn._loss import link as links
    from sklearn.dummy import DummyClassifier, DummyRegressor

    name, init, loss = _name(model), model.init_, type(model._loss).__name__
    if loss not in _GB_LINKS:
        raise UnsupportedModelError(f"{name} with loss {model.loss!r} is not supported")
    if isinstance(init, str) and init == "zero":
        return np.zeros(k)
    classifier = hasattr(model, "classes_")
    if type(init) is (DummyClassifier if classifier else DummyRegressor) and getattr(init, "n_outputs_", None) == 1:
        if classifier and getattr(init, "_strategy", None) == "prior":
            # predict_proba: ones((n, 1)) * class_prior_; the positive class alone for two
            prior = np.ones((1, 1)) * np.asarray(init.class_prior_, np.float64).reshape(1, -1)
            if prior.shape[1] != max(k, 2):
                raise UnsupportedModelError(f"{name}: its init estimator has {prior.shape[1]} classes, not {max(k, 2)}")
            eps = np.finfo(np.float64).eps
            scores = np.clip(prior if k > 1 else prior[:, 1], eps, 1 - eps, dtype=np.float64)
            link = getattr(links, str(_GB_LINKS[loss][1]))()
            return np.asarray(link.link(scores), np.float64).reshape(k)
        if not classifier:
            constant = np.asarray(init.constant_)  # predict: full((n, 1), constant_), as float64
            if constant.size == 1 and k == 1:
                return np.full(1, constant.reshape(()), dtype=constant.dtype).astype(np.float64)
    raise UnsupportedModelError(
        f"{name} with a custom init estimator ({_name(init)}) is not supported; use init=None or init='zero'"
    )


def _gradient_boosting(model: Any) -> Ensemble:
    name = _name(model)
    if model.init not in (None, "zero"):
        raise UnsupportedModelError(
            f"{name} with a custom init estimator ({_name(model.init)}) is not supported; "
            "use init=None or init='zero'"
        )
    stages = model.estimators_  # [n_stages, K] of DecisionTreeRegressor
    k = stages.shape[1]
    lr = float(model.learning_rate)
    trees, index = [], []
    for stage in stages:
        for j, est in enumerate(stage):
            trees.append(_sk_tree(est, lr * est.tree_.value[:, 0, 0]))
            index.append(j)
    base = _gb_init_scores(model, k)
    common = _common(model)
    if hasattr(model, "classes_"):
        link = _GB_LINKS[type(model._loss).__name__][0]
        return Ensemble(
            trees=tuple(trees), n_outputs=k, output_index=np.asarray(index), comparison=Comparison.LE,
            source_dtype=F32, aggregation=Aggregation.SUM, base_score=base, link=link,
            task=Task.CLASSIFICATION, classes=_class_groups(model),
            label_rule=LabelRule.ARGMAX if link is Link.SOFTMAX else LabelRule.NON_NEGATIVE,
            **common,
        ).validate()
    return Ensemble(
        trees=tuple(trees), n_outputs=k, output_index=np.asarray(index), comparison=Comparison.LE,
        source_dtype=F32, aggregation=Aggregation.SUM, base_score=base, link=Link.IDENTITY,
        task=Task.REGRESSION, **common,
    ).validate()


# ------------------------------------------------------------------------------ isolation forest


def _isolation_forest(model: Any) -> Ensemble:
    from sklearn.ensemble._iforest import _average_path_length

    subsample = model._max_features != model.n_features_in_
    trees = []
    for t, (est, feats) in enumerate(zip(model.estimators_, model.estimators_features_)):
        lengths = model._decision_path_lengths[t] + model._average_path_length_per_tree[t] - 1.0
        trees.append(_sk_tree(est, lengths, feature_map=feats if subsample else None))
    denominator = len(model.estimators_) * float(_average_path_length([model._max_samples])[0])
    return Ensemble(
        trees=tuple(trees), n_outputs=1, output_index=np.full(len(trees), -1),
        comparison=Comparison.LE, source_dtype=F32, aggregation=Aggregation.SUM,
        base_score=np.zeros(1), link=Link.ISOLATION, task=Task.OUTLIER,
        outlier=OutlierParams(denominator=denominator, offset=float(model.offset_)),
        **dict(_common(model), accepts_nan=True, accepts_inf=True),
    ).validate()


# ------------------------------------------------------------------------------------ registry

@dataclass(frozen=True)
class EstimatorSpec(SupportRow):
    """One supported estimator: its converter and what the README's support table says of it."""

    convert: Callable[[Any], Ensemble] = _single_tree


_CLS_NOTES = "int or str labels; multi-output"
_REG_NOTES = "multi-output"
_GB_CLS = "log_loss (binary, multiclass), exponential; init None or 'zero'"
_GB_REG = "squared_error, absolute_error, huber, quantile; init None or 'zero'"
_NAN = "NaN (missing_go_to_left)"

ESTIMATORS: dict[str, EstimatorSpec] = {
    "DecisionTreeClassifier": EstimatorSpec("classification", _NAN, _CLS_NOTES, _single_tree),
    "DecisionTreeRegressor": EstimatorSpec("regression", _NAN, _REG_NOTES, _single_tree),
    "ExtraTreeClassifier": EstimatorSpec("classification", _NAN, _CLS_NOTES, _single_tree),
    "ExtraTreeRegressor": EstimatorSpec("regression", _NAN, _REG_NOTES, _single_tree),
    "RandomForestClassifier": EstimatorSpec("classification", _NAN, _CLS_NOTES, _forest),
    "RandomForestRegressor": EstimatorSpec("regression", _NAN, _REG_NOTES, _forest),
    "ExtraTreesClassifier": EstimatorSpec("classification", _NAN, _CLS_NOTES, _forest),
    "ExtraTreesRegressor": EstimatorSpec("regression", _NAN, _REG_NOTES, _forest),
    "GradientBoostingClassifier": EstimatorSpec("classification", "no (sklearn refuses NaN)", _GB_CLS, _gradient_boosting),
    "GradientBoostingRegressor": EstimatorSpec("regression", "no (sklearn refuses NaN)", _GB_REG, _gradient_boosting),
    "HistGradientBoostingClassifier": EstimatorSpec(
        "classification", "NaN, +-inf",
        "log_loss (binary, multiclass); categorical features (numbers, or strings of a pandas category column)", _hist_gradient_boosting,
    ),
    "HistGradientBoostingRegressor": EstimatorSpec(
        "regression", "NaN, +-inf",
        "squared_error, absolute_error, gamma, poisson, quantile; categorical features (numbers, or strings of a pandas category column)",
        _hist_gradient_boosting,
    ),
    "IsolationForest": EstimatorSpec(
        "outlier detection", "NaN, +-inf",
        "predict, decision_function, score_samples; max_features < 1", _isolation_forest,
    ),
}


def handles(model: Any) -> bool:
    return type(model).__module__.startswith("sklearn.")


def is_pipeline(model: Any) -> bool:
    """Whether ``model`` is a scikit-learn ``Pipeline`` (converted whole by tree2mat.pipelines)."""
    return type(model).__name__ == "Pipeline" and type(model).__module__.startswith("sklearn.") and hasattr(model, "steps")


def describe_pipeline(pipeline: Any) -> str:
    return "Pipeline(" + ", ".join(f"{name}={type(step).__name__}" for name, step in pipeline.steps) + ")"


def to_ensemble(model: Any) -> Ensemble:
    name = _name(model)
    if is_pipeline(model):
        raise UnsupportedModelError(
            f"scikit-learn {describe_pipeline(model)}: convert and verify take a whole pipeline (through "
            "skl2onnx, the pipelines extra); this command takes a tree model, such as its tree step pipeline[-1]"
        )
    if name not in ESTIMATORS:
        raise UnsupportedModelError(
            f"scikit-learn {name} is not supported; supported: {', '.join(ESTIMATORS)}"
        )
    if not hasattr(model, "n_features_in_"):
        raise UnsupportedModelError(f"scikit-learn {name} is not fitted")
    return ESTIMATORS[name].convert(model)


# ------------------------------------------------------------------------- reference outputs


def reference_outputs(model: Any, X: np.ndarray, raw: bool, ens: Ensemble) -> dict[str, np.ndarray]:
    """The model's own predictions, under the graph's output names (``ens``: its IR; a model
    with named categories reads codes as the names they stand for)."""
    if ens.category_labels and isinstance(X, np.ndarray):
        X = labelled_frame(ens, X)
    name = _name(model)
    if name == "IsolationForest":
        out = {"label": np.asarray(model.predict(X))}
        samples = np.asarray(model.score_samples(X))
        if raw:
            ens_den = to_ensemble(model).outlier.denominator  # type: ignore[union-attr]
            out["variable"] = (-np.log2(-samples) * ens_den)[:, None]
        else:
            out["scores"] = np.asarray(model.decision_function(X))[:, None]
            out["score_samples"] = samples[:, None]
        return out
    if raw and name.startswith("HistGradientBoosting") and not hasattr(model, "classes_"):
        return {"variable": np.asarray(model._raw_predict(X)).reshape(X.shape[0], -1)}
    return estimator_outputs(model, X, raw)


def reference_leaves(model: Any, X: np.ndarray, ens: Ensemble) -> np.ndarray | None:
    """scikit-learn's own leaf of each row and tree: ``apply``'s node ids, estimators then
    outputs (GradientBoosting's [N, estimators, K]) as the IR orders its trees; None for models
    without ``apply`` (HistGradientBoosting), IsolationForest (its trees see a subset of the
    features) and named categories."""
    if not hasattr(model, "apply") or _name(model) == "IsolationForest" or ens.category_labels:
        return None
    return np.asarray(model.apply(X)).reshape(X.shape[0], -1)


SPEC = FrontendSpec(
    name="sklearn",
    library="scikit-learn",
    handles=handles,
    to_ensemble=to_ensemble,
    reference_outputs=reference_outputs,
    estimators=ESTIMATORS,
    reference_leaves=reference_leaves,
    pipeline_steps={
        "sklearn.tree": ("DecisionTreeClassifier", "DecisionTreeRegressor", "ExtraTreeClassifier", "ExtraTreeRegressor"),
        # (IsolationForest is left to skl2onnx in a pipeline: its output layout is not a tree2mat graph's)
        "sklearn.ensemble": (
            "RandomForestClassifier", "RandomForestRegressor", "ExtraTreesClassifier", "ExtraTreesRegressor",
            "GradientBoostingClassifier", "GradientBoostingRegressor",
            "HistGradientBoostingClassifier", "HistGradientBoostingRegressor",
        ),
    },
    peer="skl2onnx",
    is_pipeline=is_pipeline,
)

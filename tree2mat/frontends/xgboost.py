"""XGBoost frontend: the model's JSON document, parsed field by field (xgboost not needed), and
the library's own predictions for ``verify`` (xgboost needed).

Semantics followed (XGBoost 2.x - 3.x): inputs are float32; a node goes left when
``x < split_condition`` (float32), a missing value (NaN, or the wrapper's ``missing``) by
``default_left``; a leaf's value is its ``split_conditions`` entry (times the DART weight); each
tree adds to output group ``tree_info[t]``; margins start at the base score mapped to margin space
(logit or log, per objective) and sum tree by tree in float32; a wrapper with early stopping
predicts with the trees up to ``best_iteration``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from tree2mat.errors import ModelFileError, UnsupportedModelError
from tree2mat.frontends._support import SupportRow
from tree2mat.ir.build import tree_from_nodes
from tree2mat.ir.core import Aggregation, Comparison, Ensemble, LabelRule, Link, Task, Tree

F32 = np.dtype(np.float32)


@dataclass(frozen=True)
class Objective:
    task: Task
    link: Link
    base: str  # how base_score maps to margin space: "identity", "logit", "log"
    notes: str = ""


_REG = Objective(Task.REGRESSION, Link.IDENTITY, "identity")
_EXP = Objective(Task.REGRESSION, Link.EXP, "log")
_RANK = Objective(Task.REGRESSION, Link.IDENTITY, "identity")

OBJECTIVES: dict[str, Objective] = {
    "reg:squarederror": _REG,
    "reg:squaredlogerror": _REG,
    "reg:pseudohubererror": _REG,
    "reg:absoluteerror": _REG,
    "reg:logistic": Objective(Task.REGRESSION, Link.SIGMOID, "logit"),
    "count:poisson": _EXP,
    "reg:gamma": _EXP,
    "reg:tweedie": _EXP,
    "binary:logistic": Objective(Task.CLASSIFICATION, Link.LOGISTIC, "logit"),
    "multi:softprob": Objective(Task.CLASSIFICATION, Link.SOFTMAX, "identity"),
    "multi:softmax": Objective(Task.CLASSIFICATION, Link.SOFTMAX, "identity"),
    "rank:pairwise": _RANK,
    "rank:ndcg": _RANK,
    "rank:map": _RANK,
}


def _field(obj: Any, key: str, where: str) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise ModelFileError(f"{where}: ill-formed XGBoost model: need {key}")
    return obj[key]


def _floats(text: Any, where: str) -> np.ndarray:
    """``"5E-1"`` or ``"[5E-1,2E0]"`` (how XGBoost writes base_score) as float32."""
    if not isinstance(text, str):
        raise ModelFileError(f"{where}: ill-formed XGBoost model: base_score must be a string")
    try:
        return np.asarray([float(v) for v in text.strip("[]").split(",") if v.strip()], F32)
    except ValueError as exc:
        raise ModelFileError(f"{where}: ill-formed XGBoost model: base_score {text!r}") from exc


def _margin_base(base: np.ndarray, how: str) -> np.ndarray:
    """XGBoost's ProbToMargin in float32 (``-logf(1.0f / p - 1.0f)``, ``logf(p)``), with a
    correctly rounded logf (numpy's float32 log may be an ulp off)."""
    def logf(x: np.float32) -> np.float32:
        return np.float32(math.log(float(x))) if x > 0 else np.float32(np.nan)

    out = []
    for p in base.astype(F32):
        if how == "logit":
            out.append(-logf(np.float32(np.float32(1) / p - np.float32(1))) if 0 < p < 1 else np.float32(np.nan))
        elif how == "log":
            out.append(logf(p))
        else:
            out.append(p)
    result = np.asarray(out, F32)
    if not np.all(np.isfinite(result)):
        raise UnsupportedModelError(f"base_score {base.tolist()} has no finite margin")
    return result


def _tree(doc: Any, weight: float | None, where: str) -> Tree:
    try:
        left = np.asarray(_field(doc, "left_children", where), np.int64)
        right = np.asarray(_field(doc, "right_children", where), np.int64)
        feature = np.asarray(_field(doc, "split_indices", where), np.int64)
        cond = np.asarray(_field(doc, "split_conditions", where), F32)
        default_left = np.asarray(_field(doc, "default_left", where), np.int64).astype(bool)
        split_type = np.asarray(doc.get("split_type", [0] * left.size), np.int64)
        leaf_size = int(_field(_field(doc, "tree_param", where), "size_leaf_vector", where))
    except (TypeError, ValueError, OverflowError) as exc:
        raise ModelFileError(f"{where}: ill-formed XGBoost model: {exc}") from exc
    n = left.size
    if any(a.shape != (n,) for a in (right, feature, cond, default_left, split_type)) or n == 0:
        raise ModelFileError(f"{where}: ill-formed XGBoost model: node arrays differ in length")
    if split_type.any():
        raise UnsupportedModelError(f"{where}: categorical splits in XGBoost models are not supported yet")
    if leaf_size > 1:
        raise UnsupportedModelError(f"{where}: multi-target trees (vector leaves) are not supported yet")
    is_leaf = left == -1
    values = cond.copy()
    if weight is not None:  # DART: predictions scale each tree by its weight, in float32
        values = (F32.type(weight) * values).astype(F32)
    return tree_from_nodes(
        left, right, is_leaf, np.where(is_leaf, 0, feature), cond.astype(np.float64),
        default_left, values.astype(np.float64), where=where,
    )


def from_document(
    doc: Any,
    name: str = "XGBoost model",
    *,
    missing: float = float("nan"),
    classes: np.ndarray | None = None,
    iteration_limit: int | None = None,
) -> Ensemble:
    """The IR of an XGBoost JSON document (``Booster.save_raw("json")`` or a saved ``.json``).

    ``iteration_limit``: use the trees of the first so many boosting rounds (a wrapper's
    ``best_iteration + 1``); by default the document's ``best_iteration`` attribute decides.
    """
    learner = _field(doc, "learner", name)
    objective = _field(_field(learner, "objective", name), "name", name)
    if objective not in OBJECTIVES:
        raise UnsupportedModelError(
            f"{name}: XGBoost objective {objective!r} is not supported yet; supported: {', '.join(OBJECTIVES)}"
        )
    obj = OBJECTIVES[objective]
    params = _field(learner, "learner_model_param", name)
    try:
        n_features = int(_field(params, "num_feature", name))
        num_class = int(params.get("num_class", "0"))
        num_target = int(params.get("num_target", "1"))
    except (TypeError, ValueError) as exc:
        raise ModelFileError(f"{name}: ill-formed XGBoost model: {exc}") from exc
    if num_target > 1:
        raise UnsupportedModelError(f"{name}: XGBoost models with {num_target} targets are not supported yet")
    booster = _field(learner, "gradient_booster", name)
    kind = _field(booster, "name", name)
    weights = None
    if kind == "dart":
        weights = [float(w) for w in _field(booster, "weight_drop", name)]
        model = _field(_field(booster, "gbtree", name), "model", name)
    elif kind == "gbtree":
        model = _field(booster, "model", name)
    else:
        raise UnsupportedModelError(f"{name}: XGBoost booster {kind!r} is not supported (trees only)")
    trees_doc = _field(model, "trees", name)
    tree_info = np.asarray(_field(model, "tree_info", name), np.int64)
    k = max(num_class, 1)
    if not isinstance(trees_doc, list) or len(trees_doc) != tree_info.size or not trees_doc:
        raise ModelFileError(f"{name}: ill-formed XGBoost model: trees and tree_info differ, or no trees")
    limit = _iteration_limit(learner, model, k, len(trees_doc), iteration_limit, name)
    trees = tuple(
        _tree(t, None if weights is None else weights[i], f"{name}: tree {i}") for i, t in enumerate(trees_doc[:limit])
    )
    base = _floats(_field(params, "base_score", name), name)
    base = np.broadcast_to(base, (k,)) if base.size in (1, k) else base
    if base.size != k:
        raise ModelFileError(f"{name}: ill-formed XGBoost model: base_score has {base.size} values for {k} outputs")
    margin_base = _margin_base(base, obj.base).astype(np.float64)
    names = learner.get("feature_names") or None
    common: dict[str, Any] = dict(
        trees=trees, n_features=n_features, output_index=tree_info[:limit] if k > 1 else np.zeros(limit, np.int64),
        comparison=Comparison.LT, source_dtype=F32, aggregation=Aggregation.SUM,
        base_score=margin_base, link=obj.link, task=obj.task, n_outputs=k,
        feature_names=tuple(names) if names else None, source=f"xgboost {objective}",
        accepts_nan=True, accepts_inf=False, accumulate_dtype=F32, missing_value=missing,  # XGBoost refuses inf
    )
    if obj.task is Task.CLASSIFICATION:
        n_classes = 2 if objective == "binary:logistic" else k
        labels = np.arange(n_classes) if classes is None else np.asarray(classes).astype(np.int64)
        common.update(classes=(labels,))
        if objective == "binary:logistic":
            common.update(label_rule=LabelRule.NON_NEGATIVE, label_cutoff=binary_cutoff())
    return Ensemble(**common).validate()


def _iteration_limit(learner: dict, model: dict, k: int, n_trees: int, limit: int | None, name: str) -> int:
    """How many trees the prediction uses."""
    if limit is None:
        best = learner.get("attributes", {}).get("best_iteration")
        if best is None:
            return n_trees
        limit = int(best) + 1
    indptr = model.get("iteration_indptr")
    if isinstance(indptr, list) and len(indptr) > limit:
        return int(indptr[limit])
    return min(n_trees, limit * k)


def binary_cutoff() -> float:
    """The smallest float32 margin whose XGBoost probability ``1 / (1 + exp(-m))`` (float32)
    exceeds 0.5: XGBClassifier labels 1 exactly there. Near 0 the float32 sigmoid rounds to 0.5
    for margins up to about 1.2e-7."""
    def positive(bits: int) -> bool:
        m = np.asarray(bits, np.int32).view(np.float32)
        with np.errstate(over="ignore"):
            return bool(np.float32(1) / (np.float32(1) + np.exp(-m)) > np.float32(0.5))

    lo, hi = 0, int(np.asarray(np.float32(1), np.float32).view(np.int32))  # bits of 0.0 and 1.0
    while hi - lo > 1:  # positive float32 bit patterns sort as the values: bisect them
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if positive(mid) else (mid, hi)
    return float(np.asarray(hi, np.int32).view(np.float32))


# ------------------------------------------------------------------------- library objects


def handles(model: Any) -> bool:
    return type(model).__module__.split(".")[0] == "xgboost"


_OBJ_REG = "reg:squarederror, squaredlogerror, pseudohubererror, absoluteerror, logistic; count:poisson, reg:gamma, reg:tweedie"
_NAN = "NaN and `missing` (default_left)"
SUPPORT: dict[str, SupportRow] = {
    "XGBClassifier": SupportRow("classification", _NAN, "binary:logistic, multi:softprob, multi:softmax; DART; best_iteration"),
    "XGBRegressor": SupportRow("regression", _NAN, f"{_OBJ_REG}; DART; best_iteration"),
    "XGBRanker": SupportRow("ranking", _NAN, "rank:pairwise, rank:ndcg, rank:map"),
    "XGBRFClassifier": SupportRow("classification", _NAN, "binary:logistic, multi:softprob"),
    "XGBRFRegressor": SupportRow("regression", _NAN, "reg:squarederror"),
    "Booster": SupportRow("any of the above", _NAN, "also native .json files, converted without xgboost installed"),
}
WRAPPERS = tuple(SUPPORT)


def _booster_document(booster: Any) -> dict:
    return json.loads(bytes(booster.save_raw("json")))


def to_ensemble(model: Any) -> Ensemble:
    name = type(model).__name__
    if name not in WRAPPERS:
        raise UnsupportedModelError(f"xgboost {name} is not supported; supported: {', '.join(WRAPPERS)}")
    if name == "Booster":
        return from_document(_booster_document(model), "xgboost Booster")
    booster = model.get_booster()
    missing = float(model.missing) if model.missing is not None else math.nan
    best = getattr(model, "best_iteration", None) if _early_stopped(model) else None
    classes = getattr(model, "classes_", None)
    return from_document(
        _booster_document(booster), f"xgboost {name}", missing=missing, classes=classes,
        iteration_limit=None if best is None else int(best) + 1,
    )


def _early_stopped(model: Any) -> bool:
    try:
        return model.get_booster().attr("best_iteration") is not None
    except Exception:
        return False


def reference_outputs(model: Any, X: np.ndarray, raw: bool) -> dict[str, np.ndarray]:
    import xgboost as xgb

    n = X.shape[0]
    if type(model).__name__ == "Booster":
        margin = model.predict(xgb.DMatrix(X), output_margin=True)
        pred = model.predict(xgb.DMatrix(X))
        ens = from_document(_booster_document(model))
        out: dict[str, np.ndarray] = {}
        if ens.task is Task.CLASSIFICATION:
            probs = pred if pred.ndim == 2 else np.stack([1 - pred, pred], axis=1)
            out["label"] = np.argmax(probs, axis=1) if pred.ndim == 2 else (pred > 0.5).astype(np.int64)
            out["variable" if raw else "probabilities"] = margin.reshape(n, -1) if raw else probs
        else:
            out["variable"] = (margin if raw else pred).reshape(n, -1)
        return out
    if hasattr(model, "classes_"):
        out = {"label": np.asarray(model.predict(X))}
        if raw:
            out["variable"] = np.asarray(model.predict(X, output_margin=True)).reshape(n, -1)
        else:
            out["probabilities"] = np.asarray(model.predict_proba(X))
        return out
    return {"variable": np.asarray(model.predict(X, output_margin=raw)).reshape(n, -1)}

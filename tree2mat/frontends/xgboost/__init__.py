"""XGBoost frontend: the model's JSON document, parsed field by field (xgboost not needed), and
the library's own predictions for ``verify`` (xgboost needed).

Semantics followed (XGBoost 2.x - 3.x): inputs are float32; a node goes left when
``x < split_condition`` (float32), a missing value (NaN, or the wrapper's ``missing``) by
``default_left``; a leaf's value is its ``split_conditions`` entry (times the DART weight); each
tree adds to output ``tree_info[t]`` (class or target), or, for multi-target trees
(``multi_strategy="multi_output_tree"``), a vector leaf to every target; margins start at the base
score (one per output) mapped to margin space (logit or log, per objective) and sum tree by tree in
float32; a wrapper with early stopping predicts with the trees up to ``best_iteration``.
XGBClassifier labels class 1 where its prediction (the sigmoid, the margin itself, or hinge's 0/1)
exceeds 0.5, and its ``predict_proba`` is ``[1 - prediction, prediction]``.

Here: the library's objects (which it handles, the estimators supported, a model object to the
IR) and the frontend's ``SPEC``; the document to the IR in ``_document`` (its objective in
``_objectives``, its trees in ``_trees``, typed fields in ``_fields``); the native files in
``_formats``; the library's own predictions in ``_predictions``.
"""

from __future__ import annotations

import json
import math
from typing import Any

from tree2mat.errors import UnsupportedModelError
from tree2mat.frontends._spec import FrontendSpec
from tree2mat.frontends._support import SupportRow
from tree2mat.frontends.xgboost._document import from_document, stored_categories
from tree2mat.frontends.xgboost._formats import DOCUMENT, LEGACY_BINARY, is_legacy_binary, model_document, native_model, refuse_legacy_binary, xgboost_document
from tree2mat.frontends.xgboost._objectives import OBJECTIVES, Objective, binary_cutoff
from tree2mat.frontends.xgboost._predictions import reference_leaves, reference_outputs
from tree2mat.ir.core import Ensemble

__all__ = [
    "DOCUMENT", "LEGACY_BINARY", "OBJECTIVES", "SPEC", "SUPPORT", "WRAPPERS", "Objective", "binary_cutoff", "from_document",
    "handles", "is_legacy_binary", "model_document", "native_model", "reference_leaves", "reference_outputs",
    "refuse_legacy_binary", "stored_categories", "to_ensemble", "xgboost_document",
]


def handles(model: Any) -> bool:
    return type(model).__module__.split(".")[0] == "xgboost"


_OBJ_REG = (
    "reg:squarederror, squaredlogerror, pseudohubererror, absoluteerror, quantileerror (a column per quantile), "
    "logistic; count:poisson, reg:gamma, reg:tweedie, survival:cox"
)
_MULTI = "multi_output_tree, one_output_per_tree"
_NAN = "NaN and `missing` (default_left)"
SUPPORT: dict[str, SupportRow] = {
    "XGBClassifier": SupportRow(
        "classification", _NAN,
        "binary:logistic, logitraw, hinge (see below), reg:logistic (read as binary:logistic, as XGBClassifier does); multi:softprob, multi:softmax; "
        f"multi-label ({_MULTI}); DART; best_iteration",
    ),
    "XGBRegressor": SupportRow("regression", _NAN, f"{_OBJ_REG}; multi-target ({_MULTI}); DART; best_iteration"),
    "XGBRanker": SupportRow("ranking", _NAN, "rank:pairwise, rank:ndcg, rank:map"),
    "XGBRFClassifier": SupportRow("classification", _NAN, "binary:logistic, multi:softprob"),
    "XGBRFRegressor": SupportRow("regression", _NAN, "reg:squarederror"),
    "Booster": SupportRow(
        "any of the above", _NAN, "also survival:aft; native .json and .ubj files, converted without xgboost installed"
    ),
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


SPEC = FrontendSpec(
    name="xgboost",
    library="XGBoost",
    handles=handles,
    to_ensemble=to_ensemble,
    reference_outputs=reference_outputs,
    estimators=SUPPORT,
    reference_leaves=reference_leaves,
    formats=(DOCUMENT, LEGACY_BINARY),
    native_model=native_model,
    pipeline_steps={"xgboost": ("XGBClassifier", "XGBRegressor", "XGBRFClassifier", "XGBRFRegressor", "XGBRanker")},
    peer="onnxmltools",
    peer_call="convert_xgboost",
)

"""LightGBM frontend: the model text (``Booster.save_model`` / ``model_to_string``), parsed field
by field (lightgbm not needed), and the library's own predictions for ``verify`` (lightgbm needed).

Semantics followed (LightGBM 4.x, ``include/LightGBM/tree.h``): inputs are float64, and values
within 1e-35 of zero become 0 before prediction; a numeric node goes left when ``x <= threshold``
(float64). Its ``decision_type`` says where missing values go: missing type None sends NaN where
0 goes, Zero sends 0 (and NaN) by ``default_left``, NaN sends NaN by ``default_left``. A
categorical node goes left when ``int(x)`` is in its bitset; NaN, negative codes and codes outside
the bitset go right. Linear leaves output ``const + sum coef * x`` unless a used feature is NaN.
Trees add in order in float64 into class ``t % num_class``; ``average_output`` (boosting ``rf``)
divides by the number of iterations.

The package: ``_text`` (the model text's header, tree blocks and fields, as LightGBM's loader
reads them), ``_trees`` (a tree block to an IR tree; the sizes a text declares), ``_ensemble``
(the objective and the whole model to the IR), ``_files`` (the model text file); here, the
library's objects, its own predictions, and the frontend's ``SPEC``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tree2mat.errors import UnsupportedModelError
from tree2mat.frontends._spec import FrontendSpec
from tree2mat.frontends._support import SupportRow
from tree2mat.frontends.lightgbm._ensemble import OBJECTIVES, ZERO_THRESHOLD, Objective, binary_cutoff, from_text, pandas_categories
from tree2mat.frontends.lightgbm._files import TEXT, is_model_text, load_text, native_model
from tree2mat.frontends.lightgbm._text import ModelText, parse_text
from tree2mat.ir.core import Aggregation, Ensemble, Task

__all__ = [
    "OBJECTIVES", "SPEC", "SUPPORT", "TEXT", "WRAPPERS", "ZERO_THRESHOLD", "ModelText", "Objective", "binary_cutoff", "from_text",
    "handles", "is_model_text", "load_text", "native_model", "pandas_categories", "parse_text", "reference_leaves", "reference_outputs",
    "to_ensemble",
]


def handles(model: Any) -> bool:
    return type(model).__module__.split(".")[0] == "lightgbm"


_MISSING = "NaN, zero_as_missing and missing types None/Zero/NaN (default_left)"
_REG_OBJ = "regression, regression_l1, huber, fair, quantile, mape, poisson, gamma, tweedie, cross_entropy, cross_entropy_lambda"
_BOOSTING = "gbdt, dart, goss, rf; categorical splits; linear_tree; best_iteration"
SUPPORT: dict[str, SupportRow] = {
    "LGBMClassifier": SupportRow("classification", _MISSING, f"binary, multiclass, multiclassova; {_BOOSTING}"),
    "LGBMRegressor": SupportRow("regression", _MISSING, f"{_REG_OBJ}; {_BOOSTING}"),
    "LGBMRanker": SupportRow("ranking", _MISSING, f"lambdarank, rank_xendcg; {_BOOSTING}"),
    "Booster": SupportRow("any of the above", _MISSING, "also native model text (.txt), converted without lightgbm installed"),
}
WRAPPERS = tuple(SUPPORT)


def to_ensemble(model: Any) -> Ensemble:
    name = type(model).__name__
    if name not in WRAPPERS:
        raise UnsupportedModelError(f"lightgbm {name} is not supported; supported: {', '.join(WRAPPERS)}")
    booster = model if name == "Booster" else model.booster_
    if callable(getattr(model, "objective", None)):
        raise UnsupportedModelError(f"lightgbm {name} with a custom objective function is not supported")
    # model_to_string() keeps the trees up to best_iteration, as predict uses them.
    return from_text(
        booster.model_to_string(), f"lightgbm {name}", classes=getattr(model, "classes_", None),
        wrapper=None if name == "Booster" else name,
    )


def _raw_margin(model: Any, X: np.ndarray, ens: Ensemble) -> np.ndarray:
    """LightGBM's ``raw_score`` as the IR's margin: for boosting ``rf`` LightGBM's raw score is
    the sum before averaging, so it is divided by the iteration count, as its own predict does
    before the link."""
    raw = np.asarray(model.predict(X, raw_score=True)).reshape(X.shape[0], -1)
    return raw / ens.trees_per_output() if ens.aggregation is Aggregation.MEAN else raw


def reference_outputs(model: Any, X: np.ndarray, raw: bool, ens: Ensemble) -> dict[str, np.ndarray]:
    """LightGBM's own outputs under the graph's names (``ens``: the model's IR)."""
    n = X.shape[0]
    out: dict[str, np.ndarray] = {}
    if ens.task is Task.CLASSIFICATION:
        if hasattr(model, "classes_"):
            out["label"] = np.asarray(model.predict(X))
            probs = np.asarray(model.predict_proba(X))
        else:
            pred = np.asarray(model.predict(X))
            probs = pred if pred.ndim == 2 else np.stack([1.0 - pred, pred], axis=1)
            out["label"] = np.argmax(probs, axis=1)
        if not raw:
            out["probabilities"] = probs
    if raw:
        out["variable"] = _raw_margin(model, X, ens)
    elif ens.task is not Task.CLASSIFICATION:
        out["variable"] = np.asarray(model.predict(X)).reshape(n, -1)
    return out


def reference_leaves(model: Any, X: np.ndarray, ens: Ensemble) -> np.ndarray:
    """LightGBM's own leaf of each row and tree (``pred_leaf``: leaf indices, the IR's
    ``leaf_source_id``), [N, trees]."""
    return np.asarray(model.predict(X, pred_leaf=True)).reshape(X.shape[0], -1)


SPEC = FrontendSpec(
    name="lightgbm",
    library="LightGBM",
    handles=handles,
    to_ensemble=to_ensemble,
    reference_outputs=reference_outputs,
    estimators=SUPPORT,
    reference_leaves=reference_leaves,
    formats=(TEXT,),
    native_model=native_model,
    pipeline_steps={"lightgbm": ("LGBMClassifier", "LGBMRegressor", "LGBMRanker")},
    peer="onnxmltools",
    peer_call="convert_lightgbm",
    peer_zipmap=True,
)

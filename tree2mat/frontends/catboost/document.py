"""A CatBoost JSON document (``save_model(path, format="json")``) as the IR, read field by field
without catboost: what the model's loss makes of the raw value, its classes, ``scale_and_bias``
and probability threshold around the trees that ``trees`` lowers."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from tree2mat.errors import ModelFileError, UnsupportedModelError
from tree2mat.frontends._support import normalize_classes
from tree2mat.frontends.catboost.fields import _ILL, _field, _ill, _number, _values
from tree2mat.frontends.catboost.trees import _declared, _features, _non_symmetric, _oblivious, _refuse_features
from tree2mat.frontends.loading import MALFORMED
from tree2mat.ir.core import Aggregation, Comparison, Ensemble, LabelRule, Link, Task
from tree2mat.ir.limits import declare, trees_read

F32 = np.dtype(np.float32)


@dataclass(frozen=True)
class Objective:
    task: Task
    link: Link
    multiclass: bool = False  # one margin column per class


_REG = Objective(Task.REGRESSION, Link.IDENTITY)
_EXP = Objective(Task.REGRESSION, Link.EXP)
_BINARY = Objective(Task.CLASSIFICATION, Link.LOGISTIC)
#: Loss function -> what CatBoost's ``predict`` / ``predict_proba`` make of the raw value.
OBJECTIVES: dict[str, Objective] = {
    "Logloss": _BINARY,
    "CrossEntropy": _BINARY,
    "MultiClass": Objective(Task.CLASSIFICATION, Link.SOFTMAX, multiclass=True),
    "MultiClassOneVsAll": Objective(Task.CLASSIFICATION, Link.SIGMOID, multiclass=True),
    "RMSE": _REG,
    "MAE": _REG,
    "Quantile": _REG,
    "MAPE": _REG,
    "Huber": _REG,
    "Expectile": _REG,
    "Poisson": _EXP,
    "Tweedie": _EXP,
    "YetiRank": _REG,
    "PairLogit": _REG,
    "QueryRMSE": _REG,
    "QuerySoftMax": _REG,
}


def _objective(model_info: Any, where: str) -> tuple[str, Objective]:
    params = _field(model_info, "params", where)
    loss = _field(_field(params, "loss_function", where), "type", where)
    if not isinstance(loss, str):
        raise _ill(where, "loss_function type must be a string")
    if loss not in OBJECTIVES:
        raise UnsupportedModelError(
            f"{where}: CatBoost loss function {loss!r} is not supported yet; supported: {', '.join(OBJECTIVES)}"
        )
    return loss, OBJECTIVES[loss]


def _classes(model_info: dict, dim: int, where: str) -> np.ndarray:
    params = model_info.get("class_params") or {}
    names = params.get("class_names") if isinstance(params, dict) else None
    if not names:
        return np.arange(max(dim, 2))
    if not isinstance(names, list) or len(names) != max(dim, 2):
        raise _ill(where, f"class_names must list {max(dim, 2)} classes")
    what = f"{where}: CatBoost classifier"
    if all(isinstance(v, str) for v in names):
        return normalize_classes(np.asarray(names, dtype=str), what)
    if all(isinstance(v, bool) for v in names):  # (a classifier fitted on a bool y)
        return normalize_classes(np.asarray(names, dtype=bool), what)
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in names):
        raise _ill(where, "class_names must be all strings, all numbers or all true/false")
    return normalize_classes(np.asarray(names), what)


def _dimension(model_info: dict, obj: Objective, where: str) -> int:
    if not obj.multiclass:
        return 1
    params = model_info.get("class_params") or {}
    names = params.get("class_names") if isinstance(params, dict) else None
    count = params.get("classes_count", 0) if isinstance(params, dict) else 0
    dim = len(names) if isinstance(names, list) and names else count
    if not isinstance(dim, int) or not 2 <= dim <= 1_000_000:
        raise _ill(where, "a multiclass model needs class_names or classes_count")
    return dim


def _scale_and_bias(doc: dict, dim: int, where: str) -> tuple[float, np.ndarray]:
    pair = doc.get("scale_and_bias", [1.0, [0.0] * dim])
    if not isinstance(pair, list) or len(pair) != 2:
        raise _ill(where, "scale_and_bias must be [scale, bias]")
    scale = _number(pair[0], "scale", where)
    bias = _values(pair[1], "bias", where)
    if bias.size == 1 and dim > 1:
        bias = np.full(dim, bias[0])
    if bias.size != dim or not math.isfinite(scale):
        raise _ill(where, f"scale_and_bias needs a finite scale and {dim} biases")
    return scale, bias


def _label_cutoff(model_info: dict, where: str) -> float:
    """The raw value binary labels must exceed: CatBoost's ``-log(1 / t - 1)`` of the model's
    ``binclass_probability_threshold`` ``t`` (metadata; 0.5 when unset)."""
    text = model_info.get("binclass_probability_threshold")
    if text is None:
        return 0.0
    try:
        t = float(text)
    except (TypeError, ValueError) as exc:
        raise _ill(where, f"binclass_probability_threshold {text!r}") from exc
    if t in (0.0, 1.0):
        raise UnsupportedModelError(
            f"{where}: probability threshold {t:g}: CatBoost then labels every row {int(t == 0.0)}; tree2mat's binary "
            "label compares the margin with a finite cutoff: set a threshold inside (0, 1)"
        )
    if not 0 < t < 1:
        raise _ill(where, f"binclass_probability_threshold {t} outside (0, 1)")
    return -math.log(1 / t - 1)


def from_document(doc: Any, name: str = "CatBoost model") -> Ensemble:
    """The IR of a CatBoost JSON document (``save_model(path, format="json")``)."""
    info = _field(doc, "features_info", name)
    if not isinstance(info, dict):
        raise _ill(name, "features_info must be an object")
    _refuse_features(info, name)
    model_info = _field(doc, "model_info", name)
    loss, obj = _objective(model_info, name)
    features, borders, n_features, names = _features(info, name)
    dim = _dimension(model_info, obj, name)
    if "oblivious_trees" in doc:
        trees_doc, lower = doc["oblivious_trees"], _oblivious
    else:
        trees_doc, lower = _field(doc, "trees", name), _non_symmetric
    if not isinstance(trees_doc, list) or not trees_doc:
        raise _ill(name, "no trees")
    declare(_declared(trees_doc, dim), name)
    trees = [lower(t, features, borders, dim, f"{name}: tree {i}") for i, t in trees_read(list(enumerate(trees_doc)))]
    scale, bias = _scale_and_bias(doc, dim, name)
    if scale != 1.0:  # scale * sum(v) as sum(scale * v): the same up to rounding of the values
        trees = [dataclasses.replace(t, value=t.value * scale) for t in trees]
    common: dict[str, Any] = dict(
        trees=tuple(trees), n_features=n_features, n_outputs=dim,
        output_index=np.full(len(trees), -1 if dim > 1 else 0, np.int64),
        comparison=Comparison.LE, source_dtype=F32, aggregation=Aggregation.SUM, base_score=bias,
        link=obj.link, task=obj.task, feature_names=names, source=f"catboost {loss}",
        accepts_nan=True, accepts_inf=True, accumulate_dtype=np.dtype(np.float64),
    )
    if obj.task is Task.CLASSIFICATION:
        common.update(classes=(_classes(model_info, dim, name),))
        if not obj.multiclass:
            common.update(label_rule=LabelRule.POSITIVE, label_cutoff=_label_cutoff(model_info, name))
    return Ensemble(**common).validate()


def model_document(doc: Any, name: str) -> Ensemble | None:
    """The IR of a decoded JSON document that is a CatBoost model (None for any other)."""
    if not (isinstance(doc, dict) and "features_info" in doc and ("oblivious_trees" in doc or "trees" in doc)):
        return None
    try:
        return from_document(doc, name)
    except MALFORMED as exc:
        raise ModelFileError(f"{name}: {_ILL}: {type(exc).__name__}: {exc}") from exc

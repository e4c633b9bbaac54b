"""CatBoost frontend: the model's JSON export (``save_model(path, format="json")``), parsed field
by field (catboost not needed); the binary ``.cbm`` and model objects through catboost; and the
library's own predictions for ``verify`` (catboost needed).

Semantics followed (CatBoost 1.2, ``catboost/libs/model/cpu/quantization.h``): inputs are float32;
a float feature is binarized against its float32 borders as ``x > border``, so a node goes right
exactly when ``x > border`` (left when ``x <= border``; ``+inf`` right of every finite border,
``-inf`` left). NaN is replaced before comparing only for a feature with ``has_nans`` whose
``nan_value_treatment`` is ``AsFalse`` (``nan_mode`` Min: by -inf, so left) or ``AsTrue``
(``nan_mode`` Max: by +inf, so right); otherwise (``AsIs``, every feature of a ``Forbidden``
model, features without NaN at fit) NaN stays NaN and ``NaN > border`` is false: left.
A split's border is the one its ``split_index`` numbers among the float features' ``borders``
(feature by feature, each ascending), as CatBoost reads it; a split whose own ``border`` or
``float_feature_index`` says otherwise is refused.
A symmetric (oblivious) tree of depth D tests ``splits[d]`` at every node of level D - 1 - d and
its leaf is ``sum_d 2^d [split d true]`` (``leaf_values`` leaf-major, ``dim`` values per leaf);
a non-symmetric tree (``grow_policy`` Depthwise, Lossguide) is nested ``split``/``left``/``right``
with ``left`` where the split is false. Trees add in order in float64; then
``scale * sum + bias`` (``scale_and_bias``). Binary labels: class 1 iff the raw value exceeds the
border ``-log(1 / t - 1)`` of the model's probability threshold ``t`` (0.5 unless set: border 0);
multiclass labels: the first maximal raw value. Poisson and Tweedie predict ``exp`` of the raw
value. Categorical, text and embedding features are refused (see ``_refuse_features``).

The package: :mod:`~tree2mat.frontends.catboost.document` (the JSON document to the IR, without
catboost), :mod:`~tree2mat.frontends.catboost.trees` (its features, borders, splits and trees),
:mod:`~tree2mat.frontends.catboost.fields` (a field read, or refused in one line) and
:mod:`~tree2mat.frontends.catboost.library` (what goes through catboost: model objects, their
predictions, ``.cbm`` files); here, the file formats, the support table's rows and the SPEC.
"""

from __future__ import annotations

from tree2mat.frontends._spec import FileFormat, FrontendSpec
from tree2mat.frontends._support import SupportRow
from tree2mat.frontends.catboost.document import OBJECTIVES, Objective, from_document, model_document
from tree2mat.frontends.catboost.library import (
    CHECK_TIMEOUT_S,
    WRAPPERS,
    handles,
    is_cbm,
    load_cbm,
    model_json,
    native_model,
    onnx_export,
    reference_outputs,
    to_ensemble,
)
from tree2mat.frontends.catboost.trees import MAX_DEPTH

__all__ = [
    "BINARY", "CHECK_TIMEOUT_S", "DOCUMENT", "MAX_DEPTH", "OBJECTIVES", "SPEC", "SUPPORT", "WRAPPERS", "Objective", "from_document",
    "handles", "is_cbm", "load_cbm", "model_document", "model_json", "native_model", "onnx_export", "reference_outputs", "to_ensemble",
]

DOCUMENT = FileFormat("CatBoost model JSON", (".json",), document=model_document, expects="a CatBoost model", key="features_info")
BINARY = FileFormat("CatBoost binary model", (".cbm",), sniff=is_cbm, load=load_cbm)

_NAN = "NaN (nan_mode Min, Max, Forbidden per feature)"
_TREES = "symmetric and non-symmetric trees (Depthwise, Lossguide); scale_and_bias; numeric features only"
SUPPORT: dict[str, SupportRow] = {
    "CatBoostClassifier": SupportRow(
        "classification", _NAN, f"Logloss, CrossEntropy, MultiClass, MultiClassOneVsAll; int or str labels; {_TREES}"
    ),
    "CatBoostRegressor": SupportRow(
        "regression", _NAN, f"RMSE, MAE, Quantile, MAPE, Huber, Expectile, Poisson, Tweedie; {_TREES}"
    ),
    "CatBoostRanker": SupportRow("ranking", _NAN, f"YetiRank, PairLogit, QueryRMSE, QuerySoftMax; {_TREES}"),
    "CatBoost": SupportRow(
        "any of the above", _NAN, "native JSON export converted without catboost installed; .cbm through catboost"
    ),
}

SPEC = FrontendSpec(
    name="catboost",
    library="CatBoost",
    handles=handles,
    to_ensemble=to_ensemble,
    reference_outputs=reference_outputs,
    estimators=SUPPORT,
    formats=(DOCUMENT, BINARY),
    native_model=native_model,
    peer="catboost",
    peer_convert=onnx_export,
)

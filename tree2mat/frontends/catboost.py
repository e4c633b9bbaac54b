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
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tree2mat.errors import ModelFileError, UnsupportedModelError, missing
from tree2mat.frontends._spec import FileFormat, FrontendSpec
from tree2mat.frontends._support import SupportRow, normalize_classes
from tree2mat.frontends.loading import JSON, MALFORMED, file_kind, read_document, read_head
from tree2mat.ir.build import tree_from_nodes
from tree2mat.ir.core import Aggregation, Comparison, Ensemble, LabelRule, Link, Task, Tree, leaf_ref
from tree2mat.ir.limits import Declared, declare, trees_read

F32 = np.dtype(np.float32)
#: Deepest symmetric tree CatBoost grows (its ``depth`` is at most 16); a document claiming more
#: is damaged (its leaf table would need 2^depth entries).
MAX_DEPTH = 16
_ILL = "ill-formed CatBoost model"


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


def _ill(where: str, what: str) -> ModelFileError:
    return ModelFileError(f"{where}: {_ILL}: {what}")


def _field(obj: Any, key: str, where: str) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise _ill(where, f"need {key}")
    return obj[key]


def _number(value: Any, key: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _ill(where, f"{key} must be a number")
    return float(value)


def _float32(value: Any, key: str, where: str) -> float:
    """A border as CatBoost holds it: the float32 nearest the document's number (not NaN, and
    within float32's range unless infinite in the document)."""
    x = _number(value, key, where)
    with np.errstate(over="ignore"):
        f = np.float32(x)
    if math.isnan(x) or (np.isinf(f) and not math.isinf(x)):
        raise _ill(where, f"{key} {x!r} is no float32 border")
    return float(f)


def _values(value: Any, key: str, where: str) -> np.ndarray:
    """Leaf values (finite numbers), float64, flat."""
    values = value if isinstance(value, list) else [value]
    out = np.asarray([_number(v, key, where) for v in values], np.float64)
    if not np.all(np.isfinite(out)):
        raise _ill(where, f"{key} must be finite")
    return out


# ---------------------------------------------------------------------------------- document


@dataclass(frozen=True)
class _Feature:
    column: int  # the input column (flat_feature_index)
    nan_right: bool  # NaN becomes +inf: right of every border


def _refuse_features(info: dict, where: str) -> None:
    """Only float features: CatBoost hashes category strings (CityHash) and turns categories into
    counter statistics (CTRs) the model carries; a graph over numbers cannot take either."""
    if info.get("categorical_features"):
        raise UnsupportedModelError(
            f"{where}: CatBoost categorical features (cat_features) are not supported: CatBoost hashes the category "
            "strings and splits on one-hot hashes or CTR statistics it computes from them, which a graph over numeric "
            "inputs cannot reproduce; encode the categories as numbers (ordinal or one-hot columns) before fitting"
        )
    for key, what in (("text_features", "text"), ("embedding_features", "embedding")):
        if info.get(key):
            raise UnsupportedModelError(f"{where}: CatBoost {what} features ({key}) are not supported; numeric features only")


#: The model's borders by ``split_index``: (float feature index, float32 border) each.
Borders = list[tuple[int, float]]


def _features(info: dict, where: str) -> tuple[dict[int, _Feature], Borders, int, tuple[str, ...] | None]:
    """The float features by ``feature_index``; the model's borders by ``split_index`` (each
    feature's ``borders`` in turn, as CatBoost numbers them); the input's width; its feature
    names (when every column has one)."""
    floats = info.get("float_features", [])
    if not isinstance(floats, list):
        raise _ill(where, "float_features must be a list")
    features: dict[int, _Feature] = {}
    borders: Borders = []
    names: dict[int, str] = {}
    columns: set[int] = set()
    for f in floats:
        index, column = _field(f, "feature_index", where), f.get("flat_feature_index", f.get("feature_index"))
        if not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1_000_000 for v in (index, column)):
            raise _ill(where, "feature_index and flat_feature_index must be small non-negative integers")
        if index in features or column in columns:
            raise _ill(where, f"float feature {index} (column {column}) listed twice")
        if features and index < max(features):  # (CatBoost's evaluator crashes on such a model)
            raise _ill(where, f"float feature {index} listed after float feature {max(features)}: CatBoost numbers the borders in feature order")
        borders += [(index, border) for border in _feature_borders(f, index, where)]
        columns.add(column)
        treatment = f.get("nan_value_treatment", "AsIs")
        if treatment not in ("AsIs", "AsFalse", "AsTrue"):
            raise _ill(where, f"nan_value_treatment {treatment!r}")
        features[index] = _Feature(column, bool(f.get("has_nans", False)) and treatment == "AsTrue")
        if isinstance(f.get("feature_id"), str) and f["feature_id"]:
            names[column] = f["feature_id"]
    if not features:
        raise _ill(where, "no float features")
    n = max(g.column for g in features.values()) + 1
    full = len(names) == n and len(set(names.values())) == n
    return features, borders, n, tuple(names[j] for j in range(n)) if full else None


def _feature_borders(feature: dict, index: int, where: str) -> list[float]:
    """A float feature's borders (float32), ascending: CatBoost bins a value by the number of
    borders it exceeds, which is the split's test only when they ascend (measured: reversed, it
    routed 2 919 of 3 000 rows elsewhere than its splits say)."""
    values = feature.get("borders", [])
    if not isinstance(values, list):
        raise _ill(where, f"float feature {index}: borders must be a list")
    out = [_float32(v, "border", where) for v in values]
    if any(a >= b for a, b in zip(out, out[1:])):
        raise _ill(where, f"float feature {index}: borders must ascend, each once")
    return out


def _split(split: Any, features: dict[int, _Feature], borders: Borders, where: str) -> tuple[int, float, bool]:
    """A split's input column, border and whether NaN goes left. CatBoost reads a split by its
    ``split_index`` alone, the border of that number (measured with catboost 1.2.10: its
    ``float_feature_index`` and ``border`` edited, CatBoost's leaves stay the same; its index
    edited, they change): the border is read there, and a split whose own feature or border
    disagrees with it is refused (a damaged or hand-edited document means one or the other)."""
    kind = _field(split, "split_type", where)
    if kind != "FloatFeature":
        raise UnsupportedModelError(f"{where}: CatBoost split type {kind!r} is not supported (float features only)")
    stated = split.get("float_feature_index")
    if "float_feature_index" in split and (not isinstance(stated, int) or stated not in features):
        raise _ill(where, f"split on unknown float feature {stated!r}")
    border = _float32(split["border"], "border", where) if "border" in split else None
    at = _field(split, "split_index", where)
    if isinstance(at, bool) or not isinstance(at, int) or not 0 <= at < len(borders):
        raise _ill(where, f"split_index {at!r} names none of the model's {len(borders)} borders")
    index, value = borders[at]
    if stated not in (None, index) or border not in (None, value):
        raise _ill(
            where, f"a split of float feature {stated} at border {border!r} disagrees with its split_index {at}, "
            f"which is float feature {index}'s border {value!r} (CatBoost reads the split by its index)",
        )
    feature = features[index]
    return feature.column, value, not feature.nan_right


def _oblivious(doc: Any, features: dict[int, _Feature], borders: Borders, dim: int, where: str) -> Tree:
    """A symmetric tree as an IR tree: level ``l`` (2^l nodes, breadth-first) tests
    ``splits[D - 1 - l]``; leaf ``j`` (left to right) is CatBoost's leaf index ``j``."""
    splits = doc.get("splits") if isinstance(doc, dict) else None
    splits = [] if splits is None else splits
    if not isinstance(splits, list) or len(splits) > MAX_DEPTH:
        raise _ill(where, f"splits must be a list of at most {MAX_DEPTH}")
    tests = [_split(s, features, borders, where) for s in splits]
    depth = len(tests)
    values = _values(_field(doc, "leaf_values", where), "leaf_values", where)
    if values.size != dim << depth:
        raise _ill(where, f"{values.size} leaf values for depth {depth} and {dim} values per leaf")
    n_int = (1 << depth) - 1
    level = np.repeat(np.arange(depth), 1 << np.arange(depth)) if depth else np.zeros(0, np.int64)
    column, border, nan_left = (np.asarray([tests[depth - 1 - lv][k] for lv in level]) for k in range(3))
    first = np.arange(n_int)
    child = 2 * first + 1  # breadth-first: node i's children are 2i + 1 and 2i + 2
    left = np.where(child < n_int, child, leaf_ref(child - n_int))
    right = np.where(child + 1 < n_int, child + 1, leaf_ref(child + 1 - n_int))
    return Tree(
        feature=column.astype(np.int64).reshape(n_int), threshold=border.astype(np.float64).reshape(n_int),
        default_left=nan_left.astype(bool).reshape(n_int), left=np.asarray(left, np.int64), right=np.asarray(right, np.int64),
        value=values.reshape(1 << depth, dim), leaf_source_id=np.arange(1 << depth, dtype=np.int64),
    )


def _non_symmetric(doc: Any, features: dict[int, _Feature], borders: Borders, dim: int, where: str) -> Tree:
    """A non-symmetric tree (nested ``split``/``left``/``right``, leaves ``value``), walked
    without recursion; ``left`` is where the split is false."""
    nodes: list[Any] = [doc]
    left: list[int] = []
    right: list[int] = []
    tests: list[tuple[int, float, bool]] = []
    leaf_values: list[np.ndarray] = []
    for i in range(1 << 20):
        if i == len(nodes):
            break
        node = nodes[i]
        if not isinstance(node, dict):
            raise _ill(where, "a tree node must be an object")
        if "split" in node:
            children = [_field(node, "left", where), _field(node, "right", where)]
            tests.append(_split(node["split"], features, borders, where))
            left.append(len(nodes))
            right.append(len(nodes) + 1)
            nodes += children
            leaf_values.append(np.zeros(dim))
        else:
            value = _values(_field(node, "value", where), "value", where)
            if value.size != dim:
                raise _ill(where, f"a leaf holds {value.size} values, expected {dim}")
            tests.append((0, 0.0, True))
            left.append(-1)
            right.append(-1)
            leaf_values.append(value)
    else:
        raise _ill(where, "more than 2^20 nodes")
    is_leaf = np.asarray(left) < 0
    column, border, nan_left = (np.asarray([t[k] for t in tests]) for k in range(3))
    return tree_from_nodes(
        np.asarray(left, np.int64), np.asarray(right, np.int64), is_leaf, column.astype(np.int64),
        border.astype(np.float64), nan_left.astype(bool), np.stack(leaf_values), where=where,
    )


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


def _declared(trees: list[Any], dim: int) -> Declared:
    """The sizes the trees declare before any is lowered: a symmetric tree of D splits has
    2^D leaves; a non-symmetric one at least one (its nodes are counted as it is walked)."""
    depths = [len(t["splits"]) if isinstance(t, dict) and isinstance(t.get("splits"), list) else 0 for t in trees]
    leaves = sum(1 << min(d, MAX_DEPTH + 1) for d in depths)
    return Declared(trees=len(trees), internal=leaves - len(trees), leaves=leaves, outputs=dim)


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


# ------------------------------------------------------------------------- library objects


WRAPPERS = ("CatBoostClassifier", "CatBoostRegressor", "CatBoostRanker", "CatBoost")


def handles(model: Any) -> bool:
    return type(model).__module__.split(".")[0] == "catboost"


def model_json(model: Any) -> dict:
    """The JSON document of a fitted CatBoost model object (written by CatBoost itself)."""
    with tempfile.TemporaryDirectory(prefix="tree2mat-catboost-") as tmp:
        path = Path(tmp) / "model.json"
        try:
            with _native_stderr_silenced():
                model.save_model(str(path), format="json")
        except Exception as exc:  # CatBoostError: not fitted, or a model JSON cannot hold
            raise UnsupportedModelError(f"catboost {type(model).__name__}: cannot export it as JSON: {exc}") from exc
        return json.loads(path.read_text(encoding="utf-8"))


def to_ensemble(model: Any) -> Ensemble:
    name = type(model).__name__
    if name not in WRAPPERS:
        raise UnsupportedModelError(f"catboost {name} is not supported; supported: {', '.join(WRAPPERS)}")
    if not model.is_fitted():
        raise UnsupportedModelError(f"catboost {name} is not fitted")
    return from_document(model_json(model), f"catboost {name}")


def reference_outputs(model: Any, X: np.ndarray, raw: bool, ens: Ensemble) -> dict[str, np.ndarray]:
    """CatBoost's own outputs under the graph's names (``ens``: the model's IR), asked for by
    prediction type, so a plain ``CatBoost`` object read from a file predicts as its wrapper."""
    n = X.shape[0]
    out: dict[str, np.ndarray] = {}

    # CatBoost's own predict (CatBoostRanker's takes no prediction type; its base class's does)
    base: Any = next(c for c in type(model).__mro__ if c.__name__ == "CatBoost")

    def predict(kind: str) -> np.ndarray:
        return np.asarray(base.predict(model, X, prediction_type=kind, thread_count=1))

    if raw:
        out["variable"] = predict("RawFormulaVal").reshape(n, -1)
    if ens.task is Task.CLASSIFICATION:
        label = predict("Class").reshape(n)
        out["label"] = label.astype(str) if ens.classes[0].dtype.kind == "U" else label.astype(np.int64)
        if not raw:
            out["probabilities"] = predict("Probability").reshape(n, -1)
    elif not raw:
        out["variable"] = predict("Exponent" if ens.link is Link.EXP else "RawFormulaVal").reshape(n, -1)
    return out


# ---------------------------------------------------------------------------------------- files


def is_cbm(head: bytes) -> bool:
    """Whether a file's first bytes are CatBoost's binary model (``CBM1``)."""
    return head.startswith(b"CBM1")


@contextlib.contextmanager
def _native_stderr_silenced() -> Iterator[None]:
    """CatBoost's C++ code writes warnings ("There are invalid params ...") straight to the
    process's stderr; while it loads or writes a model, they go nowhere (errors come back as
    exceptions, which tree2mat reports in one line)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _catboost() -> Any:
    try:
        import catboost
    except ImportError:
        return None
    return catboost


def load_cbm(path: Path) -> Any:
    """The CatBoost model object of a ``.cbm`` file (catboost needed)."""
    catboost = _catboost()
    if catboost is None:
        raise missing(
            f"{path}: reading CatBoost's binary .cbm", "catboost",
            "or export the model as JSON (save_model('model.json', format='json')), which tree2mat reads without it",
        )
    _check_in_a_process(path, "cbm")
    model = catboost.CatBoost()
    try:
        with _native_stderr_silenced():
            model.load_model(str(path), format="cbm")
    except Exception as exc:  # CatBoostError on a damaged file
        raise ModelFileError(f"{path}: not a readable CatBoost .cbm model: {exc}") from exc
    return model


#: Seconds CatBoost may take to load a file and write it as JSON in the checking process.
CHECK_TIMEOUT_S = 120


def _check_in_a_process(path: Path, fmt: str) -> None:
    """A ModelFileError unless CatBoost loads ``path`` and writes it as JSON in a process of its
    own: its loader can crash (a segmentation fault) or hang on a damaged file (measured on
    truncated and byte-flipped .cbm files), which must not take tree2mat with it."""
    import subprocess
    import sys

    code = (
        "import sys, tempfile, catboost\n"
        "m = catboost.CatBoost(); m.load_model(sys.argv[1], format=sys.argv[2])\n"
        "with tempfile.TemporaryDirectory() as d: m.save_model(d + '/m.json', format='json')\n"
    )
    try:
        done = subprocess.run([sys.executable, "-c", code, str(path), fmt], capture_output=True, text=True, timeout=CHECK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise ModelFileError(f"{path}: not a readable CatBoost .{fmt} model: CatBoost did not finish reading it in {CHECK_TIMEOUT_S} s") from None
    if done.returncode != 0:
        lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
        why = lines[-1][:300] if lines else f"CatBoost's loader crashed (signal {-done.returncode})" if done.returncode < 0 else "CatBoost failed"
        raise ModelFileError(f"{path}: not a readable CatBoost .{fmt} model: {why}")


def native_model(path: Path, ens: Ensemble) -> Any:
    """CatBoost's own model of a native file (None without catboost, or for a file CatBoost does
    not read: an IR document naming CatBoost as its source). A CatBoost JSON document CatBoost
    refuses is refused (ModelFileError, CatBoost's reason): verify would otherwise compare the
    graph with tree2mat's own reading of a file its library does not read at all."""
    if not ens.source.startswith("catboost"):
        return None
    catboost = _catboost()
    if catboost is None:
        return None
    fmt = "cbm" if is_cbm(read_head(path)) else "json" if file_kind(path) == JSON else None
    if fmt is None:
        return None
    if fmt == "json":  # (a .cbm was checked when it was read: load_cbm)
        try:
            _check_in_a_process(path, fmt)
        except ModelFileError:
            doc = read_document(path)
            if not (isinstance(doc, dict) and "features_info" in doc):  # an IR naming CatBoost as its source
                return None
            raise
    model = catboost.CatBoost()
    try:
        model.load_model(str(path), format=fmt)
    except Exception as exc:  # (CatBoostError; it loaded the file in the checking process)
        raise ModelFileError(f"{path}: CatBoost itself cannot load this model: {exc}") from exc
    return model


def onnx_export(model: Any, n_features: int) -> tuple[Any, dict[str, Any]]:
    """CatBoost's own ONNX export (``save_model(format="onnx")``: an ``ai.onnx.ml`` TreeEnsemble
    graph, input ``features``; symmetric trees only), for ``tree2mat bench``: the graph and the
    call that made it. Its regressors output the raw score (for Poisson and Tweedie, before exp)."""
    import onnx

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.onnx"
        model.save_model(str(path), format="onnx")
        onx = onnx.load(str(path))
    return onx, {"call": "model.save_model(path, format='onnx')", "opset_import": {o.domain or "ai.onnx": o.version for o in onx.opset_import}}


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

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
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tree2mat.errors import ModelFileError, UnsupportedModelError
from tree2mat.frontends._spec import FileFormat, FrontendSpec
from tree2mat.frontends._support import SupportRow
from tree2mat.frontends.loading import MALFORMED, read_document
from tree2mat.ir.build import tree_from_nodes
from tree2mat.ir.core import Aggregation, CategoryCodes, Comparison, Ensemble, LabelRule, Link, Task, Tree
from tree2mat.ir.evaluate import first_float
from tree2mat.ir.limits import Declared, declare, trees_read

F32 = np.dtype(np.float32)


def binary_cutoff() -> float:
    """The smallest float32 margin whose XGBoost probability ``1 / (1 + exp(-m))`` (float32)
    exceeds 0.5: XGBClassifier labels 1 exactly there. Near 0 the float32 sigmoid rounds to 0.5
    for margins up to about 1.2e-7."""
    def positive(m: float) -> bool:
        with np.errstate(over="ignore"):
            return bool(np.float32(1) / (np.float32(1) + np.exp(-np.float32(m))) > np.float32(0.5))

    return first_float(positive, 0.0, 1.0, np.float32)


@dataclass(frozen=True)
class Objective:
    task: Task
    link: Link
    base: str  # how base_score maps to margin space: "identity", "logit", "log"
    label: tuple[LabelRule, float] | None = None  # binary: class 1 iff margin > (>=) the cutoff


_REG = Objective(Task.REGRESSION, Link.IDENTITY, "identity")
_EXP = Objective(Task.REGRESSION, Link.EXP, "log")

OBJECTIVES: dict[str, Objective] = {
    "reg:squarederror": _REG,
    "reg:squaredlogerror": _REG,
    "reg:pseudohubererror": _REG,
    "reg:absoluteerror": _REG,
    "reg:quantileerror": _REG,
    "reg:logistic": Objective(Task.REGRESSION, Link.SIGMOID, "logit"),
    "count:poisson": _EXP,
    "reg:gamma": _EXP,
    "reg:tweedie": _EXP,
    "survival:cox": _EXP,
    "survival:aft": _EXP,
    # XGBClassifier: class 1 where sigmoid(m) (float32) > 0.5, where m > 0.5, where m > 0.
    "binary:logistic": Objective(Task.CLASSIFICATION, Link.LOGISTIC, "logit", (LabelRule.NON_NEGATIVE, binary_cutoff())),
    "binary:logitraw": Objective(Task.CLASSIFICATION, Link.MARGIN, "identity", (LabelRule.POSITIVE, 0.5)),
    "binary:hinge": Objective(Task.CLASSIFICATION, Link.STEP, "identity", (LabelRule.POSITIVE, 0.0)),
    "multi:softprob": Objective(Task.CLASSIFICATION, Link.SOFTMAX, "identity"),
    "multi:softmax": Objective(Task.CLASSIFICATION, Link.SOFTMAX, "identity"),
    "rank:pairwise": _REG,
    "rank:ndcg": _REG,
    "rank:map": _REG,
}


def _field(obj: Any, key: str, where: str) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise ModelFileError(f"{where}: ill-formed XGBoost model: need {key}")
    return obj[key]


def _float32s(value: Any, key: str, where: str) -> np.ndarray:
    """An array of float32 numbers from the document; one beyond float32's range (XGBoost
    writes float32 numbers: only a damaged file has one) is an error, not inf."""
    try:
        wide = np.asarray(value, np.float64)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ModelFileError(f"{where}: ill-formed XGBoost model: {key}: {exc}") from exc
    with np.errstate(over="ignore"):
        out = wide.astype(F32)
    if np.any(np.isinf(out) & ~np.isinf(wide)):
        raise ModelFileError(f"{where}: ill-formed XGBoost model: {key} holds a number beyond float32's range")
    return out


def _int64s(value: Any, key: str, where: str) -> np.ndarray:
    """An array of integers from the document; a fraction or a string is an error, not cut."""
    arr = np.asarray(value)
    if arr.dtype.kind not in "iub" or arr.dtype == object:
        raise ModelFileError(f"{where}: ill-formed XGBoost model: {key} must hold integers")
    try:
        return arr.astype(np.int64)
    except OverflowError as exc:
        raise ModelFileError(f"{where}: ill-formed XGBoost model: {key}: {exc}") from exc


def _count(value: Any, key: str, where: str) -> int:
    """A count the document declares (XGBoost writes them as decimal text: ``"11"``)."""
    try:
        number = float(value) if isinstance(value, str) else value
        if isinstance(number, bool) or not isinstance(number, (int, float)) or number != int(number):
            raise ValueError(f"{value!r} is no integer")
        return int(number)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ModelFileError(f"{where}: ill-formed XGBoost model: {key}: {exc}") from exc


def _floats(text: Any, where: str) -> np.ndarray:
    """``"5E-1"`` or ``"[5E-1,2E0]"`` (how XGBoost writes base_score) as float32."""
    if not isinstance(text, str):
        raise ModelFileError(f"{where}: ill-formed XGBoost model: base_score must be a string")
    try:
        values = [float(v) for v in text.strip("[]").split(",") if v.strip()]
    except ValueError as exc:
        raise ModelFileError(f"{where}: ill-formed XGBoost model: base_score {text!r}") from exc
    return _float32s(values, "base_score", where)


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
        left = _int64s(_field(doc, "left_children", where), "left_children", where)
        right = _int64s(_field(doc, "right_children", where), "right_children", where)
        feature = _int64s(_field(doc, "split_indices", where), "split_indices", where)
        cond = _float32s(_field(doc, "split_conditions", where), "split_conditions", where)
        default_left = _int64s(_field(doc, "default_left", where), "default_left", where).astype(bool)
        split_type = _int64s(doc.get("split_type", [0] * left.size), "split_type", where)
        leaf_size = int(_field(_field(doc, "tree_param", where), "size_leaf_vector", where))
    except (TypeError, ValueError, OverflowError) as exc:
        raise ModelFileError(f"{where}: ill-formed XGBoost model: {exc}") from exc
    n = left.size
    if any(a.shape != (n,) for a in (right, feature, cond, default_left, split_type)) or n == 0:
        raise ModelFileError(f"{where}: ill-formed XGBoost model: node arrays differ in length")
    _check_node_count(doc, n, leaf_size, where)
    is_leaf = left == -1
    values = _leaf_vectors(doc, is_leaf, right, leaf_size, where) if leaf_size > 1 else cond.copy()
    if weight is not None:  # DART: predictions scale each tree by its weight, in float32
        values = (F32.type(weight) * values).astype(F32)
    categories = _categories(doc, split_type, is_leaf, where)
    tree = tree_from_nodes(
        left, right, is_leaf, np.where(is_leaf, 0, feature), np.where(split_type == 1, 0, cond).astype(np.float64),
        default_left, values.astype(np.float64), categories=categories, where=where,
    )
    # A category outside the node's set (unseen, negative) goes left; only NaN follows default_left.
    return dataclasses.replace(tree, cat_other_left=np.ones(tree.cat_nodes.size, bool)) if categories else tree


#: A tree's per-node arrays XGBoost's loader checks against ``num_nodes`` (the statistics, of
#: a tree with scalar leaves: a vector-leaf tree keeps ``base_weights`` per node and target).
_NODE_ARRAYS = ("left_children", "right_children", "parents", "split_indices", "split_conditions", "default_left")
_STAT_ARRAYS = ("loss_changes", "sum_hessian", "base_weights")


def _check_node_count(doc: dict, n: int, leaf_size: int, where: str) -> None:
    """A ModelFileError unless the tree's ``tree_param`` ``num_nodes`` is its node count ``n``
    and every per-node array present holds that many: XGBoost refuses such a tree ("Check
    failed: loss_changes.size() == n_nodes"), so the file would convert and verify against
    tree2mat's own reading of it alone."""
    declared = _count(_field(doc["tree_param"], "num_nodes", where), "num_nodes", where)
    if declared != n:
        raise ModelFileError(f"{where}: ill-formed XGBoost model: tree_param num_nodes is {declared}, the node arrays hold {n}")
    for key in _NODE_ARRAYS + (_STAT_ARRAYS if leaf_size <= 1 else ()):
        if isinstance(doc.get(key), list) and len(doc[key]) != n:
            raise ModelFileError(f"{where}: ill-formed XGBoost model: {key} holds {len(doc[key])} values for num_nodes {n}")


def _categories(doc: Any, split_type: np.ndarray, is_leaf: np.ndarray, where: str) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Categorical nodes' category sets (the categories that go right)."""
    if not np.any(split_type[~is_leaf] == 1):
        return {}
    if np.any((split_type != 0) & (split_type != 1)):
        raise ModelFileError(f"{where}: ill-formed XGBoost model: split_type must be 0 or 1")
    try:
        cats = _int64s(_field(doc, "categories", where), "categories", where)
        nodes = _int64s(_field(doc, "categories_nodes", where), "categories_nodes", where)
        starts = _int64s(_field(doc, "categories_segments", where), "categories_segments", where)
        sizes = _int64s(_field(doc, "categories_sizes", where), "categories_sizes", where)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ModelFileError(f"{where}: ill-formed XGBoost model: categories: {exc}") from exc
    expected = set(np.flatnonzero((split_type == 1) & ~is_leaf).tolist())
    if (
        nodes.ndim != 1 or nodes.shape != starts.shape or nodes.shape != sizes.shape
        or set(nodes.tolist()) != expected or nodes.size != len(expected)
        or np.any(sizes < 0) or np.any(starts < 0) or np.any(starts + sizes > cats.size)
        or (cats.size and cats.min() < 0)
    ):
        raise ModelFileError(f"{where}: ill-formed XGBoost model: categories_nodes/segments/sizes do not match the categorical splits")
    out = {}
    for node, start, size in zip(nodes, starts, sizes):
        vals = np.unique(cats[start : start + size]).astype(np.float64)
        out[int(node)] = (vals, np.zeros(vals.size, bool))
    return out


def _declared(trees: list[Any], k: int) -> Declared:
    """The sizes the trees declare (node arrays' lengths, categories' sizes), before any is
    parsed; what is not of the expected shape counts as empty here (parsing refuses it by name).
    A column's categories are counted as its largest node's (a bound from below of their union)."""
    nodes, columns, sizes = 0, set(), []
    for t in trees:
        left = t.get("left_children") if isinstance(t, dict) else None
        n = len(left) if isinstance(left, list) else 0
        nodes += n
        split = t.get("split_indices") if isinstance(t, dict) else None
        listed = [t.get(key) for key in ("categories_nodes", "categories_sizes")] if isinstance(t, dict) else [None, None]
        nodes_at, sizes_at = listed
        if isinstance(split, list) and isinstance(nodes_at, list) and isinstance(sizes_at, list) and len(nodes_at) == len(sizes_at):
            for node, size in zip(nodes_at, sizes_at):
                if type(node) is int and 0 <= node < len(split) and type(size) is int and size >= 0:
                    columns.add(split[node] if type(split[node]) is int else -1)
                    sizes.append(size)
    internal = max(0, nodes - len(trees)) // 2  # (a tree of n nodes: (n - 1) / 2 splits)
    return Declared(
        trees=len(trees), internal=internal, leaves=internal + len(trees), outputs=k,
        categorical_nodes=len(sizes), category_entries=sum(sizes), widest_node=max(sizes, default=0),
        categorical_columns=len(columns), widest_column=max(sizes, default=0),
    )


def _leaf_vectors(doc: Any, is_leaf: np.ndarray, right: np.ndarray, k: int, where: str) -> np.ndarray:
    """Leaf values [nodes, k] of a multi-target tree: XGBoost 3.x keeps them in ``leaf_weights``,
    row ``right_children[leaf]``; 2.x in ``base_weights``, row = node id."""
    key = "leaf_weights" if "leaf_weights" in doc else "base_weights"
    try:
        table = _float32s(_field(doc, key, where), key, where)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ModelFileError(f"{where}: ill-formed XGBoost model: {key}: {exc}") from exc
    rows = np.where(is_leaf, right, 0) if key == "leaf_weights" else np.arange(is_leaf.size)
    if table.ndim != 1 or table.size % k or rows.min() < 0 or rows.max() >= table.size // k:
        raise ModelFileError(f"{where}: ill-formed XGBoost model: {key} does not hold {k} values per leaf")
    return table.reshape(-1, k)[rows]


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
    ``best_iteration + 1``); by default all trees, as ``Booster.predict`` does even after early
    stopping.
    """
    learner = _field(doc, "learner", name)
    objective = _field(_field(learner, "objective", name), "name", name)
    if not isinstance(objective, str):
        raise ModelFileError(f"{name}: ill-formed XGBoost model: objective name must be a string")
    if objective not in OBJECTIVES:
        raise UnsupportedModelError(
            f"{name}: XGBoost objective {objective!r} is not supported yet; supported: {', '.join(OBJECTIVES)}"
        )
    obj = OBJECTIVES[objective]
    if classes is not None and obj.task is Task.REGRESSION:
        # XGBClassifier reads any objective's predictions as binary:logistic's: predict_proba is
        # [1 - p, p] and predict is p > 0.5. Only reg:logistic's p is a probability.
        if objective != "reg:logistic":
            raise UnsupportedModelError(f"{name}: a classifier with the regression objective {objective!r} predicts no probabilities; not supported")
        obj = OBJECTIVES["binary:logistic"]
    params = _field(learner, "learner_model_param", name)
    try:
        n_features = int(_field(params, "num_feature", name))
        num_class = int(params.get("num_class", "0"))
        num_target = int(params.get("num_target", "1"))
    except (TypeError, ValueError, OverflowError) as exc:
        raise ModelFileError(f"{name}: ill-formed XGBoost model: {exc}") from exc
    # (XGBoost refuses them: "value -5 for Parameter num_class should be greater equal to 0")
    for key, count, least in (("num_class", num_class, 0), ("num_target", num_target, 1)):
        if count < least:
            raise ModelFileError(f"{name}: ill-formed XGBoost model: learner_model_param {key} is {count}; it must be {least} or more")
    if num_class > 1 and num_target > 1:
        raise UnsupportedModelError(f"{name}: XGBoost models with {num_class} classes and {num_target} targets are not supported")
    k = max(num_class, num_target, 1)  # margin columns: classes, or targets (quantiles, labels)
    booster = _field(learner, "gradient_booster", name)
    kind = _field(booster, "name", name)
    weights = None
    if kind == "dart":
        weights = [float(w) for w in _field(booster, "weight_drop", name)]
        model = _field(_field(booster, "gbtree", name), "model", name)
        if len(weights) != len(_field(model, "trees", name)):
            raise ModelFileError(f"{name}: ill-formed XGBoost model: weight_drop needs one weight per tree")
    elif kind == "gbtree":
        model = _field(booster, "model", name)
    else:
        raise UnsupportedModelError(f"{name}: XGBoost booster {kind!r} is not supported (trees only)")
    trees_doc = _field(model, "trees", name)
    tree_info = _int64s(_field(model, "tree_info", name), "tree_info", name)
    if not isinstance(trees_doc, list) or len(trees_doc) != tree_info.size or not trees_doc:
        raise ModelFileError(f"{name}: ill-formed XGBoost model: trees and tree_info differ, or no trees")
    _check_tree_count(model, len(trees_doc), name)
    limit = len(trees_doc) if iteration_limit is None else _round_trees(model, iteration_limit, name)
    declare(_declared(trees_doc[:limit], k), name)
    trees = tuple(
        _tree(t, None if weights is None else weights[i], f"{name}: tree {i}") for i, t in trees_read(list(enumerate(trees_doc[:limit])))
    )
    base = _floats(_field(params, "base_score", name), name)
    base = np.broadcast_to(base, (k,)) if base.size in (1, k) else base
    if base.size != k:
        raise ModelFileError(f"{name}: ill-formed XGBoost model: base_score has {base.size} values for {k} outputs")
    margin_base = _margin_base(base, obj.base).astype(np.float64)
    names = learner.get("feature_names") or None
    if names is not None and (
        not isinstance(names, list) or len(names) != n_features or not all(isinstance(v, str) for v in names)
    ):
        raise ModelFileError(f"{name}: ill-formed XGBoost model: feature_names must be {n_features} strings")
    vector = np.asarray([t.n_outputs > 1 for t in trees])  # multi-target trees add to every output
    common: dict[str, Any] = dict(
        trees=trees, n_features=n_features, output_index=np.where(vector, -1, tree_info[:limit]),
        comparison=Comparison.LT, source_dtype=F32, aggregation=Aggregation.SUM,
        base_score=margin_base, link=obj.link, task=obj.task, n_outputs=k,
        feature_names=tuple(names) if names else None, source=f"xgboost {objective}",
        accepts_nan=True, accepts_inf=False, accumulate_dtype=F32, missing_value=missing,  # XGBoost refuses inf
        category_codes=CategoryCodes.NONNEGATIVE_TRUNCATE,
        category_labels=stored_categories(model, n_features, doc.get("version")),
    )
    if obj.task is Task.CLASSIFICATION:  # binary: one margin column per target (multi-label)
        labels = np.arange(2 if obj.label else k) if classes is None else np.asarray(classes).astype(np.int64)
        common.update(classes=(labels,) * (k if obj.label else 1))
        if obj.label:
            common.update(label_rule=obj.label[0], label_cutoff=obj.label[1])
    return Ensemble(**common).validate()


def stored_categories(model: Any, n_features: int, version: Any) -> tuple[tuple[int, tuple[str | int | float, ...]], ...]:
    """The categories XGBoost (3.1 on) stores for the pandas ``category`` columns a model was
    fitted on (``model.cats``): per feature, names as UTF-8 bytes cut by ``offsets``, or numbers
    in ``values``; a category's code in the trees is its position (the dtype's order at fit).
    Nothing for older models, for features without categories, or, for the whole model, where
    some names cannot be trusted (XGBoost reads names for all its category columns or none):
    XGBoost 3.2.0 and earlier cut non-ASCII names at character, not byte, counts (fixed in later
    versions). The graph then takes XGBoost's codes."""
    cats = model.get("cats") if isinstance(model, dict) else None
    enc = cats.get("enc") if isinstance(cats, dict) else None
    if not isinstance(enc, list) or len(enc) != n_features:
        return ()
    old = not (isinstance(version, list) and [v for v in version if isinstance(v, int)] > [3, 2, 0])
    out: list[tuple[int, tuple[str | int | float, ...]]] = []
    for j, entry in enumerate(enc):
        if not isinstance(entry, dict):
            return ()
        try:
            values, offsets = (np.asarray(entry.get(key, [])) for key in ("values", "offsets"))
            values, offsets = (a if a.size else np.zeros(0, np.int64) for a in (values, offsets))
        except (TypeError, ValueError, OverflowError):
            return ()
        if values.dtype.kind not in "iu" or offsets.dtype.kind not in "iu" or values.ndim != 1 or offsets.ndim != 1:
            return ()  # not what XGBoost writes (integers: bytes of names, or integer categories)
        if not values.size:
            continue
        if not offsets.size:  # numbers
            labels: tuple[str | int | float, ...] = tuple(int(v) for v in values)
        else:
            if old and np.any(values < 0):  # a non-ASCII byte: names cut at the wrong places; and
                return ()  # XGBoost reads names for all its category columns or for none
            data = (values & 0xFF).astype(np.uint8).tobytes()
            if offsets[0] != 0 or offsets[-1] != len(data) or np.any(np.diff(offsets) < 0):
                return ()
            try:
                labels = tuple(data[a:b].decode("utf-8") for a, b in zip(offsets[:-1], offsets[1:]))
            except UnicodeDecodeError:
                return ()
        if len(set(labels)) != len(labels):
            return ()
        out.append((j, labels))
    return tuple(out)


def _check_tree_count(model: dict, n: int, name: str) -> None:
    """A ModelFileError unless the model's declared tree count (``gbtree_model_param``
    ``num_trees``), its trees' ``id`` and its ``iteration_indptr`` (when present) agree with its
    ``n`` trees, as XGBoost's loader requires (it refuses "trees_json.size() == param.num_trees
    (3 vs. 100)"; a tree's ``id`` places it, so ids out of order would reorder the trees)."""
    declared = _count(_field(_field(model, "gbtree_model_param", name), "num_trees", name), "num_trees", name)
    if declared != n:
        raise ModelFileError(f"{name}: ill-formed XGBoost model: gbtree_model_param num_trees is {declared}, the model holds {n} trees")
    for i, tree in enumerate(model["trees"]):
        if isinstance(tree, dict) and "id" in tree and tree["id"] != i:
            raise ModelFileError(f"{name}: tree {i}: ill-formed XGBoost model: id {tree['id']!r}, not its position {i}")
    indptr = model.get("iteration_indptr")
    if indptr is not None and not (
        isinstance(indptr, list) and indptr and all(isinstance(v, int) and not isinstance(v, bool) for v in indptr)
        and indptr[0] == 0 and indptr[-1] == n and all(a <= b for a, b in zip(indptr, indptr[1:]))
    ):
        raise ModelFileError(f"{name}: ill-formed XGBoost model: iteration_indptr {indptr!r:.60} does not rise from 0 to the {n} trees")


def _round_trees(model: dict, rounds: int, name: str) -> int:
    """How many trees the first ``rounds`` boosting rounds hold (classes x parallel trees each)."""
    indptr = _field(model, "iteration_indptr", name)
    try:
        if not isinstance(indptr, list) or not indptr or rounds < 0:
            raise ValueError(f"{rounds} rounds of {indptr!r:.40}")
        return min(len(_field(model, "trees", name)), int(indptr[min(rounds, len(indptr) - 1)]))
    except (TypeError, ValueError) as exc:
        raise ModelFileError(f"{name}: ill-formed XGBoost model: iteration_indptr: {exc}") from exc


# ------------------------------------------------------------------------- library objects


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
        f"binary:logistic, logitraw, hinge (see below), reg:logistic (read as binary:logistic, as XGBClassifier does); multi:softprob, multi:softmax; multi-label ({_MULTI}); DART; best_iteration",
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


# ---------------------------------------------------------------------------------------- files


def model_document(doc: Any, name: str) -> Ensemble | None:
    """The IR of a decoded ``.json`` / ``.ubj`` document that is an XGBoost model (None for any
    other document)."""
    if not (isinstance(doc, dict) and "learner" in doc):
        return None
    try:
        return from_document(doc, name)
    except MALFORMED as exc:
        raise ModelFileError(f"{name}: ill-formed XGBoost model: {type(exc).__name__}: {exc}") from exc


def xgboost_document(path: Path) -> dict:
    """An XGBoost model document from a native ``.json`` or ``.ubj`` file (xgboost not needed)."""
    doc = read_document(path)
    if not isinstance(doc, dict) or "learner" not in doc:
        raise ModelFileError(f"{path}: not an XGBoost model (no 'learner' key)")
    return doc


def is_legacy_binary(head: bytes) -> bool:
    """Whether a file's first bytes are XGBoost's legacy binary model: the ``binf`` magic older
    XGBoost writes, or (as XGBoost 0.90 to 1.0 wrote it) the learner's parameters (136 bytes),
    then the objective's name (e.g. ``reg:squarederror``) and the booster's (``gbtree``,
    ``gblinear`` or ``dart``), each after a uint64 length. XGBoost4J-Spark writes 4 bytes, the
    class count, before the booster's own bytes."""
    return any(head[at:].startswith(b"binf") or _legacy_layout(head[at:]) for at in (0, 4))


def _legacy_layout(head: bytes) -> bool:
    at = 136
    if len(head) < at + 8:
        return False
    n = int.from_bytes(head[at : at + 8], "little")
    objective = head[at + 8 : at + 8 + n]
    if not 0 < n <= 64 or b":" not in objective or not objective.isascii():
        return False
    at += 8 + n
    m = int.from_bytes(head[at : at + 8], "little")
    return head[at + 8 : at + 8 + m] in (b"gbtree", b"gblinear", b"dart")


def refuse_legacy_binary(path: Path) -> Any:
    raise UnsupportedModelError(
        f"{path}: this is XGBoost's legacy binary model format (deprecated in XGBoost 1.6; XGBoost 3.1 and later "
        "no longer read it either), which tree2mat does not read; load it with xgboost 3.0 or older and "
        "save_model('model.json'), then convert model.json"
    )


DOCUMENT = FileFormat("XGBoost model", (".json", ".ubj"), document=model_document, expects="an XGBoost model", key="learner")
LEGACY_BINARY = FileFormat("legacy XGBoost binary", sniff=is_legacy_binary, load=refuse_legacy_binary)


def native_model(path: Path, ens: Ensemble) -> Any:
    """XGBoost's own Booster of a native file (None without xgboost, or for a file XGBoost does
    not read: an IR document naming XGBoost as its source). A model file XGBoost refuses is
    refused (ModelFileError, XGBoost's reason): verify would otherwise compare the graph with
    tree2mat's own reading of a file its library does not read at all."""
    if not ens.source.startswith("xgboost"):
        return None
    try:
        import xgboost
    except ImportError:
        return None
    if any(t.n_outputs > 1 for t in ens.trees) and int(xgboost.__version__.split(".")[0]) >= 3:
        try:  # XGBoost 3 crashes (segfault) loading a 2.x file with vector leaves: read its writer first
            if _writer_major(xgboost_document(path)) < 3:
                return None
        except ModelFileError:  # not XGBoost's file (an IR naming it its source)
            return None
    try:
        data = bytearray(path.read_bytes())
    except OSError as exc:
        raise ModelFileError(f"{path}: cannot read: {exc}") from exc
    try:  # (from its bytes, XGBoost tells JSON from UBJSON by them, as tree2mat does, not by the name)
        return xgboost.Booster(model_file=data)
    except xgboost.core.XGBoostError as exc:
        try:
            xgboost_document(path)
        except ModelFileError:  # not XGBoost's file after all (an IR naming it its source)
            return None
        raise ModelFileError(f"{path}: XGBoost itself cannot load this model: {_reason(exc)}") from exc


def _reason(exc: Exception) -> str:
    """An XGBoostError's message in one line: its first, without the native stack trace, nor
    the time and source line it starts with ("[23:01:31] .../tree_model.cc:1071: Check failed:
    ...")."""
    text = str(exc).split("Stack trace:")[0].strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    return re.sub(r"^\[[\d:]+\]\s+\S+:\d+:\s*", "", first).rstrip(" :") or first


def _writer_major(document: dict) -> int:
    """The major version of the XGBoost that wrote a model document (its ``version`` field)."""
    version = document.get("version", [0])
    return int(version[0]) if isinstance(version, list) and version and isinstance(version[0], int) else 0


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

"""A LightGBM model text to the IR ``Ensemble``: its objective (and what the sklearn wrapper
makes of it), its trees, its features and the labels of its pandas category columns."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from math import inf
from typing import Any

import numpy as np

from tree2mat.errors import ModelFileError, UnsupportedModelError
from tree2mat.frontends._support import normalize_classes
from tree2mat.frontends.lightgbm._text import FLOAT, ModelText, parse_text, read_int, split_list
from tree2mat.frontends.lightgbm._trees import declared_sizes, read_tree
from tree2mat.ir.core import Aggregation, CategoryCodes, Comparison, Ensemble, LabelRule, Link, Task
from tree2mat.ir.evaluate import first_float, sigmoid
from tree2mat.ir.limits import declare, trees_read

#: LightGBM's kZeroThreshold (a float32 1e-35, compared in float64).
ZERO_THRESHOLD = float(np.float32(1e-35))


@dataclass(frozen=True)
class Objective:
    task: Task
    link: Link


_REG = Objective(Task.REGRESSION, Link.IDENTITY)
_EXP = Objective(Task.REGRESSION, Link.EXP)
OBJECTIVES: dict[str, Objective] = {
    "regression": _REG,
    "regression_l1": _REG,
    "huber": _REG,
    "fair": _REG,
    "quantile": _REG,
    "mape": _REG,
    "poisson": _EXP,
    "gamma": _EXP,
    "tweedie": _EXP,
    "binary": Objective(Task.CLASSIFICATION, Link.LOGISTIC),
    "multiclass": Objective(Task.CLASSIFICATION, Link.SOFTMAX),
    "multiclassova": Objective(Task.CLASSIFICATION, Link.SIGMOID),
    "cross_entropy": Objective(Task.REGRESSION, Link.SIGMOID),
    "cross_entropy_lambda": Objective(Task.REGRESSION, Link.SOFTPLUS),
    "lambdarank": _REG,
    "rank_xendcg": _REG,
}



def _objective(spec: str, name: str) -> tuple[str, Objective, dict[str, str]]:
    tokens = spec.split()
    if not tokens:
        raise ModelFileError(f"{name}: ill-formed LightGBM model: empty objective")
    kind, params = tokens[0], dict(t.partition(":")[::2] for t in tokens[1:])
    if kind not in OBJECTIVES:
        raise UnsupportedModelError(
            f"{name}: LightGBM objective {kind!r} is not supported; supported: {', '.join(OBJECTIVES)}"
        )
    if "sqrt" in params:
        raise UnsupportedModelError(f"{name}: LightGBM objective {kind!r} with reg_sqrt is not supported")
    sigmoid = params.get("sigmoid", "1")
    if kind in ("binary", "multiclassova") and not (FLOAT.fullmatch(sigmoid) and float(sigmoid) == 1.0):
        raise UnsupportedModelError(f"{name}: LightGBM {kind} with sigmoid {sigmoid} (not 1) is not supported")
    return kind, OBJECTIVES[kind], params


def _as_wrapper(kind: str, obj: Objective, wrapper: str | None, name: str) -> Objective:
    """What the sklearn wrapper makes of the objective: LGBMClassifier reads cross_entropy's
    probability as the positive class's, LGBMRegressor returns binary's probability as a value."""
    if wrapper == "LGBMClassifier" and obj.task is not Task.CLASSIFICATION:
        if kind == "cross_entropy":
            return OBJECTIVES["binary"]
        raise UnsupportedModelError(f"{name}: LGBMClassifier with the {kind!r} objective is not supported")
    if wrapper in ("LGBMRegressor", "LGBMRanker") and obj.task is Task.CLASSIFICATION:
        if kind == "binary":
            return OBJECTIVES["cross_entropy"]
        raise UnsupportedModelError(f"{name}: {wrapper} with the {kind!r} objective is not supported")
    return obj


def from_text(
    text: str | bytes, name: str = "LightGBM model", classes: np.ndarray | None = None, wrapper: str | None = None
) -> Ensemble:
    """The IR of a LightGBM model text; ``wrapper``: the sklearn class that holds it, if any."""
    model = parse_text(text, name)
    header = model.header
    n_features = read_int(header, "max_feature_idx", name) + 1
    k = read_int(header, "num_tree_per_iteration" if "num_tree_per_iteration" in header else "num_class", name)
    if "objective" in header:
        kind, obj, _ = _objective(header["objective"], name)
    else:  # LightGBM predicts the raw score of a model text without an objective
        kind, obj = "without objective", _REG
    obj = _as_wrapper(kind, obj, wrapper, name)
    if k < 1 or len(model.trees) % k or not model.trees:
        raise ModelFileError(
            f"{name}: ill-formed LightGBM model: {len(model.trees)} trees for {k} trees per iteration"
        )
    if (obj.link is Link.LOGISTIC and k != 1) or (obj.task is Task.CLASSIFICATION and obj.link is not Link.LOGISTIC and k < 2):
        raise ModelFileError(f"{name}: ill-formed LightGBM model: {kind} with {k} trees per iteration")
    declare(declared_sizes(model, k, name), name)
    trees = tuple(read_tree(block, f"{name}: tree {t}") for t, block in trees_read(list(enumerate(model.trees))))
    names = split_list(header["feature_names"])  # on spaces alone, as LightGBM (a name may hold a tab)
    for key, values in (("feature_names", names), ("feature_infos", split_list(header["feature_infos"]))):
        if len(values) != n_features:  # LightGBM: "Wrong size of ..."
            raise ModelFileError(f"{name}: ill-formed LightGBM model: {len(values)} {key} for {n_features} features")
    common: dict[str, Any] = dict(
        trees=trees, n_features=n_features, n_outputs=k, category_labels=pandas_categories(model),
        output_index=np.arange(len(trees), dtype=np.int64) % k,
        comparison=Comparison.LE, source_dtype=np.dtype(np.float64),
        aggregation=Aggregation.MEAN if "average_output" in header else Aggregation.SUM,
        base_score=np.zeros(k), link=obj.link, task=obj.task,
        feature_names=tuple(names), source=f"lightgbm {kind}", zero_band=ZERO_THRESHOLD, category_codes=CategoryCodes.TRUNCATE,
    )
    if obj.task is Task.CLASSIFICATION:
        n_classes = 2 if obj.link is Link.LOGISTIC else k
        labels = np.arange(n_classes) if classes is None else normalize_classes(classes, name)
        common.update(classes=(labels,))
        if obj.link is Link.LOGISTIC:
            common.update(label_rule=LabelRule.NON_NEGATIVE, label_cutoff=binary_cutoff())
    return Ensemble(**common).validate()


def pandas_categories(model: ModelText) -> tuple[tuple[int, tuple[str | int | float, ...]], ...]:
    """The category labels of the pandas ``category`` columns a model was fitted on: the text's
    last line ``pandas_categorical:`` (JSON, written by LightGBM's Python package: per category
    column in DataFrame order, its categories; a value's code is its position) laid on the
    categorical features its ``[categorical_feature: ...]`` parameter lists. Where the two do not
    pair up one to one (categorical features besides the pandas ones) there are no labels: the
    graph still takes LightGBM's codes."""
    line = next((ln for ln in model.rest.splitlines() if ln.startswith("pandas_categorical:")), None)
    if line is None:
        return ()
    try:
        lists = json.loads(line[len("pandas_categorical:") :])
    except ValueError as exc:
        raise ModelFileError(f"{model.name}: ill-formed LightGBM model: pandas_categorical is not JSON ({exc})") from exc
    if lists is None:
        return ()
    params = re.search(r"(?m)^\[categorical_feature: ([0-9,]*)\]\s*$", model.rest)
    columns = [int(c) for c in params.group(1).split(",") if c] if params else []
    if not isinstance(lists, list) or len(columns) != len(lists) or not all(isinstance(v, list) and v for v in lists):
        return ()
    infos = split_list(model.header.get("feature_infos", ""))
    for column, values in zip(columns, lists):  # booleans, NaN and the like: no names (the graph takes codes)
        if any(isinstance(v, bool) or not isinstance(v, (str, int, float)) or v != v or v in (inf, -inf) for v in values):
            return ()
        if len(set(values)) != len(values) or not _codes_below(infos, column, len(values)):
            return ()
    return tuple((c, tuple(v)) for c, v in zip(columns, lists))


def _codes_below(infos: list[str], column: int, n: int) -> bool:
    """Whether feature ``column``'s ``feature_infos`` is a category list (``a:b:c``, not a
    ``[min:max]`` range) of codes below ``n``: a check that the pandas column paired with it by
    position is the one LightGBM split on (an ordered pandas category column is coded but not
    categorical, and ``categorical_feature`` may name integer columns too)."""
    if not 0 <= column < len(infos) or infos[column].startswith("["):
        return False
    try:
        codes = [int(c) for c in infos[column].split(":") if c]
    except ValueError:
        return False
    return all(c < n for c in codes)


def binary_cutoff() -> float:
    """The smallest margin LGBMClassifier labels 1: its probability ``p = 1 / (1 + exp(-m))``
    (float64) must beat ``1 - p`` (argmax over ``[1 - p, p]``; a tie is class 0)."""
    def positive(m: float) -> bool:
        p = sigmoid(m)
        return p > 1.0 - p

    return first_float(positive, 0.0, 1.0)


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
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from tree2mat.errors import ModelFileError, UnsupportedModelError
from tree2mat.frontends._support import SupportRow, normalize_classes
from tree2mat.ir.build import tree_from_nodes
from tree2mat.ir.core import (
    Aggregation,
    CategoryCodes,
    Comparison,
    Ensemble,
    LabelRule,
    Link,
    Task,
    Tree,
)
from tree2mat.ir.evaluate import first_float, sigmoid

#: LightGBM's kZeroThreshold (a float32 1e-35, compared in float64).
ZERO_THRESHOLD = float(np.float32(1e-35))
#: Largest category bitsets read (words of 32 categories per tree): LightGBM's own splits stay far
#: below (max_cat_threshold), and the graph's categorical tables grow with the categories.
MAX_BITSET_WORDS = 2048
_CATEGORICAL, _DEFAULT_LEFT = 1, 2
_MISSING_NONE, _MISSING_ZERO, _MISSING_NAN = 0, 1, 2


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


# ----------------------------------------------------------------------------- model text


@dataclass
class ModelText:
    header: dict[str, str]
    trees: list[dict[str, str]]
    name: str
    block_sizes: list[int]  # characters of each "Tree=" block, as tree_sizes counts them


def parse_text(text: str, name: str = "LightGBM model") -> ModelText:
    """Split a model text into its header and per-tree ``key=value`` blocks (strictly). LightGBM
    itself finds the tree blocks by ``tree_sizes``; a file whose blocks do not have those sizes
    would read differently there, so it is refused."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "tree":
        raise ModelFileError(f"{name}: not a LightGBM model text (first line is not 'tree')")
    header: dict[str, str] = {}
    trees: list[dict[str, str]] = []
    starts: list[int] = []  # character offset of each Tree= line, then of "end of trees"
    current = header
    offset = len(lines[0])
    for number, raw in enumerate(lines[1:], start=2):
        line = raw.strip()
        offset += len(raw)
        if line == "end of trees":
            starts.append(offset - len(raw))
            break
        if not line:
            continue
        key, sep, value = line.partition("=")
        if key == "Tree":
            starts.append(offset - len(raw))
            if value != str(len(trees)):
                raise ModelFileError(f"{name}: line {number}: expected Tree={len(trees)}, found {line[:40]!r}")
            current = {}
            trees.append(current)
        elif sep:
            current[key] = value
        elif current is header:
            header[key] = ""  # flags such as average_output
        else:
            raise ModelFileError(
                f"{name}: line {number}: expected key=value or 'end of trees', found {line[:40]!r}"
            )
    else:
        raise ModelFileError(f"{name}: truncated LightGBM model text (no 'end of trees')")
    return ModelText(header, trees, name, [b - a for a, b in zip(starts, starts[1:])])


def _check_tree_sizes(model: ModelText) -> None:
    """LightGBM finds the tree blocks by ``tree_sizes``: a file whose blocks have other sizes
    reads differently there, so it is refused (after the blocks themselves parsed)."""
    sizes = model.header.get("tree_sizes")
    if sizes is not None and sizes.split() != [str(n) for n in model.block_sizes]:
        raise ModelFileError(
            f"{model.name}: ill-formed LightGBM model: tree_sizes does not match the tree blocks "
            "(LightGBM reads the trees by these sizes)"
        )


def _get(block: dict[str, str], key: str, where: str) -> str:
    if key not in block:
        raise ModelFileError(f"{where}: ill-formed LightGBM model: need {key}")
    return block[key]


#: Numbers as LightGBM writes and reads them (ASCII only: Python alone would also take "1_000"
#: or non-ASCII digits, which LightGBM reads differently).
_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|nan)", re.IGNORECASE)


def _int(block: dict[str, str], key: str, where: str) -> int:
    value = _get(block, key, where)
    if not _INT.fullmatch(value) or len(value) > 18:
        raise ModelFileError(f"{where}: ill-formed LightGBM model: {key} is not an integer")
    return int(value)


def _numbers(block: dict[str, str], key: str, where: str, n: int, dtype: type) -> np.ndarray:
    text = _get(block, key, where).split()
    if len(text) != n:
        raise ModelFileError(f"{where}: ill-formed LightGBM model: {key} has {len(text)} values, expected {n}")
    pattern = _INT if dtype is int else _FLOAT
    bad = next((v for v in text if not pattern.fullmatch(v) or (dtype is int and len(v) > 18)), None)
    if bad is not None:
        raise ModelFileError(f"{where}: ill-formed LightGBM model: {key}: {bad[:30]!r} is not a number")
    return np.asarray([dtype(v) for v in text], np.int64 if dtype is int else np.float64)


def _bitset_values(words: np.ndarray) -> np.ndarray:
    """The positions of the set bits of uint32 ``words`` (LightGBM's category bitsets)."""
    bits = (words[:, None] >> np.arange(32, dtype=np.int64)) & 1
    return np.flatnonzero(bits.ravel()).astype(np.float64)


def _tree(block: dict[str, str], where: str) -> Tree:
    n_leaves = _int(block, "num_leaves", where)
    if n_leaves < 1:
        raise ModelFileError(f"{where}: ill-formed LightGBM model: num_leaves {n_leaves}")
    n_int = n_leaves - 1
    leaf_value = _numbers(block, "leaf_value", where, n_leaves, float)
    if n_int == 0:
        return Tree(
            feature=np.zeros(0, np.int64), threshold=np.zeros(0), default_left=np.zeros(0, bool),
            left=np.zeros(0, np.int64), right=np.zeros(0, np.int64), value=leaf_value[:, None],
            leaf_source_id=np.zeros(1, np.int64),
        )
    feature = _numbers(block, "split_feature", where, n_int, int)
    threshold = _numbers(block, "threshold", where, n_int, float)
    dtype = _numbers(block, "decision_type", where, n_int, int)
    left = _numbers(block, "left_child", where, n_int, int)
    right = _numbers(block, "right_child", where, n_int, int)
    if np.any((dtype < 0) | (dtype > 127)):
        raise ModelFileError(f"{where}: ill-formed LightGBM model: decision_type outside [0, 127]")
    missing = (dtype >> 2) & 3
    if np.any(missing == 3):
        raise ModelFileError(f"{where}: ill-formed LightGBM model: unknown missing type 3")
    is_cat = (dtype & _CATEGORICAL) > 0
    default_left = (dtype & _DEFAULT_LEFT) > 0
    with np.errstate(invalid="ignore"):
        # Missing type None: NaN is replaced by 0, which then meets the threshold.
        default_left = np.where(missing == _MISSING_NONE, 0.0 <= threshold, default_left)
    default_left[is_cat] = False  # categorical: NaN (and anything not in the set) goes right
    categories = _categories(block, where, threshold, is_cat)
    # Node space for tree_from_nodes: internal nodes 0..I-1, leaf j at I + j.
    n = n_int + n_leaves
    ref = lambda c: np.where(c >= 0, c, n_int + (-1 - c))  # noqa: E731
    if np.any((left < -n_leaves) | (left >= n_int) | (right < -n_leaves) | (right >= n_int)):
        raise ModelFileError(f"{where}: ill-formed LightGBM model: a child index is out of range")
    pad = np.zeros(n_leaves, np.int64)
    zero = (missing == _MISSING_ZERO) & ~is_cat
    tree = tree_from_nodes(
        np.concatenate([ref(left), pad]), np.concatenate([ref(right), pad]),
        np.arange(n) >= n_int, np.concatenate([feature, pad]),
        np.concatenate([np.where(is_cat, 0.0, threshold), np.zeros(n_leaves)]),
        np.concatenate([default_left, np.zeros(n_leaves, bool)]),
        np.concatenate([np.zeros(n_int), leaf_value]),
        categories={node: (vals, np.ones(vals.size, bool)) for node, vals in categories.items()},
        zero_missing=np.concatenate([zero, np.zeros(n_leaves, bool)]) if zero.any() else None,
        where=where,
    )
    if tree.n_internal != n_int or tree.n_leaves != n_leaves:
        raise ModelFileError(f"{where}: ill-formed LightGBM model: some nodes are not reachable from the root")
    assert tree.leaf_source_id is not None  # (tree_from_nodes numbers the leaves)
    order = tree.leaf_source_id - n_int  # LightGBM's leaf index of each IR leaf
    extras: dict[str, Any] = {"leaf_source_id": order}
    linear = block.get("is_linear", "0")
    if linear not in ("0", "1"):
        raise ModelFileError(f"{where}: ill-formed LightGBM model: is_linear must be 0 or 1")
    if linear == "1":
        extras.update(_linear(block, where, n_leaves, order))
    return dataclasses.replace(tree, **extras)


def _categories(block: dict[str, str], where: str, threshold: np.ndarray, is_cat: np.ndarray) -> dict[int, np.ndarray]:
    n_cat = _int(block, "num_cat", where) if "num_cat" in block else 0
    if not is_cat.any():
        return {}
    bounds = _numbers(block, "cat_boundaries", where, n_cat + 1, int)
    if bounds[0] != 0 or np.any(np.diff(bounds) < 0):
        raise ModelFileError(f"{where}: ill-formed LightGBM model: cat_boundaries must rise from 0")
    if bounds[-1] > MAX_BITSET_WORDS:
        raise UnsupportedModelError(
            f"{where}: categorical bitsets of {bounds[-1]} words ({32 * bounds[-1]} categories); "
            f"at most {MAX_BITSET_WORDS} words are supported"
        )
    words = _numbers(block, "cat_threshold", where, int(bounds[-1]), int)
    if np.any((words < 0) | (words >= 2**32)):
        raise ModelFileError(f"{where}: ill-formed LightGBM model: cat_threshold words must be uint32")
    out = {}
    for node in np.flatnonzero(is_cat):
        idx = threshold[node]
        if not (np.isfinite(idx) and idx == int(idx) and 0 <= idx < n_cat):
            raise ModelFileError(f"{where}: ill-formed LightGBM model: node {node} names bitset {idx}")
        out[int(node)] = _bitset_values(words[bounds[int(idx)] : bounds[int(idx) + 1]])
    return out


def _linear(block: dict[str, str], where: str, n_leaves: int, order: np.ndarray) -> dict[str, np.ndarray]:
    const = _numbers(block, "leaf_const", where, n_leaves, float)
    counts = _numbers(block, "num_features", where, n_leaves, int)
    if np.any(counts < 0):
        raise ModelFileError(f"{where}: ill-formed LightGBM model: num_features must be >= 0")
    total = int(counts.sum())
    feats = _numbers(block, "leaf_features", where, total, int) if total else np.zeros(0, np.int64)
    coefs = _numbers(block, "leaf_coeff", where, total, float) if total else np.zeros(0)
    width = int(counts.max(initial=0))
    feature = np.full((n_leaves, width), -1, np.int64)
    coef = np.zeros((n_leaves, width))
    start = 0
    for j, c in enumerate(counts):
        feature[j, :c] = feats[start : start + c]
        coef[j, :c] = coefs[start : start + c]
        start += c
    if feats.size and feats.min() < 0:
        raise ModelFileError(f"{where}: ill-formed LightGBM model: negative leaf feature")
    return {"linear_const": const[order], "linear_feature": feature[order], "linear_coef": coef[order]}


# ----------------------------------------------------------------------------- ensemble


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
    if kind in ("binary", "multiclassova") and not (_FLOAT.fullmatch(sigmoid) and float(sigmoid) == 1.0):
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
    text: str, name: str = "LightGBM model", classes: np.ndarray | None = None, wrapper: str | None = None
) -> Ensemble:
    """The IR of a LightGBM model text; ``wrapper``: the sklearn class that holds it, if any."""
    model = parse_text(text, name)
    header = model.header
    n_features = _int(header, "max_feature_idx", name) + 1
    k = _int(header, "num_tree_per_iteration", name)
    kind, obj, _ = _objective(_get(header, "objective", name), name)
    obj = _as_wrapper(kind, obj, wrapper, name)
    if k < 1 or len(model.trees) % k or not model.trees:
        raise ModelFileError(
            f"{name}: ill-formed LightGBM model: {len(model.trees)} trees for {k} trees per iteration"
        )
    if (obj.link is Link.LOGISTIC and k != 1) or (obj.task is Task.CLASSIFICATION and obj.link is not Link.LOGISTIC and k < 2):
        raise ModelFileError(f"{name}: ill-formed LightGBM model: {kind} with {k} trees per iteration")
    trees = tuple(_tree(block, f"{name}: tree {t}") for t, block in enumerate(model.trees))
    _check_tree_sizes(model)
    names = header.get("feature_names", "").split() or None
    if names is not None and len(names) != n_features:
        raise ModelFileError(f"{name}: ill-formed LightGBM model: {len(names)} feature_names for {n_features} features")
    common: dict[str, Any] = dict(
        trees=trees, n_features=n_features, n_outputs=k,
        output_index=np.arange(len(trees), dtype=np.int64) % k,
        comparison=Comparison.LE, source_dtype=np.dtype(np.float64),
        aggregation=Aggregation.MEAN if "average_output" in header else Aggregation.SUM,
        base_score=np.zeros(k), link=obj.link, task=obj.task,
        feature_names=tuple(names) if names else None,
        source=f"lightgbm {kind}", zero_band=ZERO_THRESHOLD, category_codes=CategoryCodes.TRUNCATE,
    )
    if obj.task is Task.CLASSIFICATION:
        n_classes = 2 if obj.link is Link.LOGISTIC else k
        labels = np.arange(n_classes) if classes is None else normalize_classes(classes, name)
        common.update(classes=(labels,))
        if obj.link is Link.LOGISTIC:
            common.update(label_rule=LabelRule.NON_NEGATIVE, label_cutoff=binary_cutoff())
    return Ensemble(**common).validate()


def binary_cutoff() -> float:
    """The smallest margin LGBMClassifier labels 1: its probability ``p = 1 / (1 + exp(-m))``
    (float64) must beat ``1 - p`` (argmax over ``[1 - p, p]``; a tie is class 0)."""
    def positive(m: float) -> bool:
        p = sigmoid(m)
        return p > 1.0 - p

    return first_float(positive, 0.0, 1.0)


# ------------------------------------------------------------------------- library objects


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

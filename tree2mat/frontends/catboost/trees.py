"""A CatBoost document's trees: its float features and their borders, the splits that read
them, and both layouts lowered to IR trees (symmetric, and non-symmetric: Depthwise, Lossguide).
The package's docstring says how CatBoost compares, and where NaN goes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tree2mat.errors import UnsupportedModelError
from tree2mat.frontends.catboost.fields import _field, _float32, _ill, _values
from tree2mat.ir.build import tree_from_nodes
from tree2mat.ir.core import Tree, leaf_ref
from tree2mat.ir.limits import Declared

#: Deepest symmetric tree CatBoost grows (its ``depth`` is at most 16); a document claiming more
#: is damaged (its leaf table would need 2^depth entries).
MAX_DEPTH = 16


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



def _declared(trees: list[Any], dim: int) -> Declared:
    """The sizes the trees declare before any is lowered: a symmetric tree of D splits has
    2^D leaves; a non-symmetric one at least one (its nodes are counted as it is walked)."""
    depths = [len(t["splits"]) if isinstance(t, dict) and isinstance(t.get("splits"), list) else 0 for t in trees]
    leaves = sum(1 << min(d, MAX_DEPTH + 1) for d in depths)
    return Declared(trees=len(trees), internal=leaves - len(trees), leaves=leaves, outputs=dim)

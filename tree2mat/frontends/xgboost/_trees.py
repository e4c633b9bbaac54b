"""An XGBoost model's trees: each one's node arrays, categorical splits and leaf vectors to an IR
tree; their count checked against what the model declares, and their sizes declared before any
is parsed."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from tree2mat.errors import ModelFileError
from tree2mat.frontends.xgboost._fields import F32, _count, _field, _float32s, _int64s
from tree2mat.ir.build import tree_from_nodes
from tree2mat.ir.core import Tree
from tree2mat.ir.limits import Declared, declare, trees_read


def _read_trees(model: Any, weights: list[float] | None, k: int, iteration_limit: int | None, name: str) -> tuple[tuple[Tree, ...], np.ndarray]:
    """The model's trees of the first ``iteration_limit`` rounds (all by default), parsed one by
    one (``weights``: DART's), and the output each adds to (``tree_info``); their count checked
    against the model's declarations and their sizes declared (:func:`declare`) before any is
    parsed."""
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
    return trees, tree_info[:limit]


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

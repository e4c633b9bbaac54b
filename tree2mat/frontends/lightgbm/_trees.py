"""LightGBM's trees to the IR: one tree block to a ``Tree`` (numeric and categorical nodes,
missing types, linear leaves), and the sizes a model text declares, read before any tree is built."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from tree2mat.errors import ModelFileError
from tree2mat.frontends.lightgbm._text import ModelText, read_int, read_numbers
from tree2mat.ir.build import tree_from_nodes
from tree2mat.ir.core import Tree
from tree2mat.ir.limits import Declared, declare

_CATEGORICAL, _DEFAULT_LEFT = 1, 2
_MISSING_NONE, _MISSING_ZERO, _MISSING_NAN = 0, 1, 2


def _bitset_values(words: np.ndarray) -> np.ndarray:
    """The positions of the set bits of uint32 ``words`` (LightGBM's category bitsets), read
    from the nonzero words only."""
    nonzero = np.flatnonzero(words)
    bits = (words[nonzero, None] >> np.arange(32, dtype=np.int64)) & 1
    word, bit = np.nonzero(bits)
    return (nonzero[word] * 32 + bit).astype(np.float64)


def read_tree(block: dict[str, str], where: str) -> Tree:
    n_leaves = read_int(block, "num_leaves", where)
    if n_leaves < 1:
        raise ModelFileError(f"{where}: ill-formed LightGBM model: num_leaves {n_leaves}")
    n_int = n_leaves - 1
    n_cat = read_int(block, "num_cat", where)  # LightGBM needs it in every tree
    leaf_value = read_numbers(block, "leaf_value", where, n_leaves, float)
    if n_int == 0:
        tree = Tree(
            feature=np.zeros(0, np.int64), threshold=np.zeros(0), default_left=np.zeros(0, bool),
            left=np.zeros(0, np.int64), right=np.zeros(0, np.int64), value=leaf_value[:, None],
        )
        return _with_leaf_extras(tree, block, where, np.zeros(1, np.int64))
    feature = read_numbers(block, "split_feature", where, n_int, int)
    threshold = read_numbers(block, "threshold", where, n_int, float)
    dtype, is_cat = _node_kinds(block, where, n_int)
    left = read_numbers(block, "left_child", where, n_int, int)
    right = read_numbers(block, "right_child", where, n_int, int)
    missing = (dtype >> 2) & 3
    if np.any(missing == 3):
        raise ModelFileError(f"{where}: ill-formed LightGBM model: unknown missing type 3")
    default_left = (dtype & _DEFAULT_LEFT) > 0
    with np.errstate(invalid="ignore"):
        # Missing type None: NaN is replaced by 0, which then meets the threshold.
        default_left = np.where(missing == _MISSING_NONE, 0.0 <= threshold, default_left)
    default_left[is_cat] = False  # categorical: NaN (and anything not in the set) goes right
    categories = _categories(block, where, n_cat, threshold, is_cat)
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
    return _with_leaf_extras(tree, block, where, tree.leaf_source_id - n_int)


def _with_leaf_extras(tree: Tree, block: dict[str, str], where: str, order: np.ndarray) -> Tree:
    """``tree`` with LightGBM's leaf index of each IR leaf (``order``) and its linear leaves, if
    any (a one-leaf linear tree too: LightGBM predicts its constant and terms)."""
    extras: dict[str, Any] = {"leaf_source_id": order}
    linear = block.get("is_linear", "0")
    if linear not in ("0", "1"):
        raise ModelFileError(f"{where}: ill-formed LightGBM model: is_linear must be 0 or 1")
    if linear == "1":
        extras.update(_linear(block, where, tree.n_leaves, order))
    return dataclasses.replace(tree, **extras)


def _categories(
    block: dict[str, str], where: str, n_cat: int, threshold: np.ndarray, is_cat: np.ndarray
) -> dict[int, np.ndarray]:
    """Per categorical node, the category codes its bitset holds (only the set bits are kept:
    a bitset spanning millions of codes costs what its set bits cost)."""
    values: dict[int, np.ndarray] = {}  # (per bitset: many nodes may name one)
    out = {}
    for node, (idx, words) in _bitsets(block, where, n_cat, threshold, is_cat).items():
        out[node] = values[idx] if idx in values else values.setdefault(idx, _bitset_values(words))
    return out


def _bitsets(block: dict[str, str], where: str, n_cat: int, threshold: np.ndarray, is_cat: np.ndarray) -> dict[int, tuple[int, np.ndarray]]:
    """Per categorical node, the index of the bitset it names and its uint32 words (views of one
    array)."""
    if not is_cat.any():
        return {}
    bounds = read_numbers(block, "cat_boundaries", where, n_cat + 1, int)
    if bounds[0] != 0 or np.any(np.diff(bounds) < 0):
        raise ModelFileError(f"{where}: ill-formed LightGBM model: cat_boundaries must rise from 0")
    words = read_numbers(block, "cat_threshold", where, int(bounds[-1]), int)
    if np.any((words < 0) | (words >= 2**32)):
        raise ModelFileError(f"{where}: ill-formed LightGBM model: cat_threshold words must be uint32")
    nodes = np.flatnonzero(is_cat)
    named = threshold[nodes]
    # (checked at once: a file may hold hundreds of thousands of categorical nodes)
    bad = ~(np.isfinite(named) & (named >= 0) & (named < n_cat))
    bad[~bad] = named[~bad] != np.floor(named[~bad])
    if bad.any():
        first = int(np.argmax(bad))
        raise ModelFileError(f"{where}: ill-formed LightGBM model: node {nodes[first]} names bitset {named[first]}")
    starts, stops = bounds[:-1].tolist(), bounds[1:].tolist()
    return {node: (idx, words[starts[idx] : stops[idx]]) for node, idx in zip(nodes.tolist(), named.astype(np.int64).tolist())}


def _set_bits(words: np.ndarray) -> int:
    """How many bits of the uint32 ``words`` are set (numpy 1.26 has no ``bitwise_count``)."""
    return int(np.unpackbits(np.ascontiguousarray(words, np.uint32).view(np.uint8)).sum())


def _node_kinds(block: dict[str, str], where: str, n_int: int) -> tuple[np.ndarray, np.ndarray]:
    """Each internal node's ``decision_type`` (left out: 0, numeric) and whether it is
    categorical."""
    # decision_type may be left out (LightGBM reads 0: numeric, missing type None, right)
    dtype = read_numbers(block, "decision_type", where, n_int, int) if "decision_type" in block else np.zeros(n_int, np.int64)
    if np.any((dtype < 0) | (dtype > 127)):
        raise ModelFileError(f"{where}: ill-formed LightGBM model: decision_type outside [0, 127]")
    return dtype, (dtype & _CATEGORICAL) > 0


def declared_sizes(model: ModelText, k: int, name: str) -> Declared:
    """The sizes the model text declares, read from its numbers of leaves and its bitsets (the
    set bits counted, never listed), before any tree is built."""
    leaves = [read_int(block, "num_leaves", f"{name}: tree {t}") for t, block in enumerate(model.trees)]
    if min(leaves) < 1:
        raise ModelFileError(f"{name}: ill-formed LightGBM model: num_leaves {min(leaves)}")
    nodes = Declared(trees=len(leaves), internal=sum(leaves) - len(leaves), leaves=sum(leaves), outputs=k)
    declare(nodes, name)  # (before a list of that many numbers is looked for)
    counts: list[int] = []
    columns: dict[int, np.ndarray] = {}  # per column, its nodes' bitsets OR-ed
    merged: set[tuple[int, int, int]] = set()  # (column, tree, bitset) already OR-ed in
    for t, block in enumerate(model.trees):
        where = f"{name}: tree {t}"
        if leaves[t] < 2 or read_int(block, "num_cat", where) == 0:
            continue
        _, is_cat = _node_kinds(block, where, leaves[t] - 1)
        if not is_cat.any():
            continue
        feature = read_numbers(block, "split_feature", where, leaves[t] - 1, int)
        threshold = read_numbers(block, "threshold", where, leaves[t] - 1, float)
        set_bits: dict[int, int] = {}  # (per bitset, and each once per column: many nodes may name one)
        for node, (idx, words) in _bitsets(block, where, read_int(block, "num_cat", where), threshold, is_cat).items():
            if idx not in set_bits:
                set_bits[idx] = _set_bits(words)
            counts.append(set_bits[idx])
            column = int(feature[node])
            if (column, t, idx) in merged:
                continue
            merged.add((column, t, idx))
            bits = words.astype(np.uint32)
            seen = columns.get(column, np.zeros(0, np.uint32))
            if seen.size < bits.size:
                seen = np.concatenate([seen, np.zeros(bits.size - seen.size, np.uint32)])
            seen[: bits.size] |= bits
            columns[column] = seen
    return dataclasses.replace(
        nodes, categorical_nodes=len(counts), category_entries=sum(counts), widest_node=max(counts, default=0),
        categorical_columns=len(columns), widest_column=max((_set_bits(c) for c in columns.values()), default=0),
    )


def _linear(block: dict[str, str], where: str, n_leaves: int, order: np.ndarray) -> dict[str, np.ndarray]:
    const = read_numbers(block, "leaf_const", where, n_leaves, float)
    counts = read_numbers(block, "num_features", where, n_leaves, int)
    if np.any(counts < 0):
        raise ModelFileError(f"{where}: ill-formed LightGBM model: num_features must be >= 0")
    total = int(counts.sum())
    feats = read_numbers(block, "leaf_features", where, total, int) if total else np.zeros(0, np.int64)
    coefs = read_numbers(block, "leaf_coeff", where, total, float) if total else np.zeros(0)
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

"""Build IR trees from a source library's node arrays (any node order)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from tree2mat.errors import InvalidTreeError
from tree2mat.ir.core import Tree


def tree_from_nodes(
    children_left: np.ndarray,
    children_right: np.ndarray,
    is_leaf: np.ndarray,
    feature: np.ndarray,
    threshold: np.ndarray,
    default_left: np.ndarray,
    leaf_values: np.ndarray,
    *,
    root: int = 0,
    categories: Mapping[int, tuple[np.ndarray, np.ndarray]] | None = None,
    zero_missing: np.ndarray | None = None,
    where: str = "tree",
) -> Tree:
    """Renumber a tree given as parallel arrays over source node ids.

    ``leaf_values[node]`` is a leaf's value vector; ``categories[node] = (values, goes_left)`` marks
    a categorical split; ``zero_missing[node]`` (optional) a node where 0 counts as missing.
    Internal nodes come out breadth-first, leaves left to right, as the IR requires. Cycles and
    shared children are refused.
    """
    n_nodes = int(is_leaf.shape[0])
    if not 0 <= root < n_nodes:
        raise InvalidTreeError(f"{where}: root {root} outside [0, {n_nodes})")
    internal = _internal_breadth_first(children_left, children_right, is_leaf, root, where)
    leaves = _leaves_left_to_right(children_left, children_right, is_leaf, root)

    int_id = {node: i for i, node in enumerate(internal)}
    leaf_id = {node: j for j, node in enumerate(leaves)}

    def ref(node: int) -> int:
        return -1 - leaf_id[node] if is_leaf[node] else int_id[node]

    idx = np.asarray(internal, np.int64)
    cat_nodes, cat_values, cat_left = _categorical_arrays(categories or {}, int_id)
    values = np.asarray(leaf_values, np.float64)[np.asarray(leaves, np.int64)]
    if values.ndim == 1:
        values = values[:, None]
    return Tree(
        feature=np.asarray(feature, np.int64)[idx] if idx.size else np.zeros(0, np.int64),
        threshold=np.asarray(threshold, np.float64)[idx] if idx.size else np.zeros(0),
        default_left=np.asarray(default_left, bool)[idx] if idx.size else np.zeros(0, bool),
        left=np.asarray([ref(int(children_left[n])) for n in internal], np.int64),
        right=np.asarray([ref(int(children_right[n])) for n in internal], np.int64),
        value=values,
        leaf_source_id=np.asarray(leaves, np.int64),
        cat_nodes=cat_nodes,
        cat_values=cat_values,
        cat_left=cat_left,
        zero_missing=np.zeros(0, bool) if zero_missing is None or not idx.size else np.asarray(zero_missing, bool)[idx],
    )


def _internal_breadth_first(
    children_left: np.ndarray, children_right: np.ndarray, is_leaf: np.ndarray, root: int, where: str
) -> list[int]:
    """The source ids of the internal nodes below ``root``, breadth-first (the IR's numbering).
    Every node is reached once: a child id out of range, a cycle or a shared child is refused
    here, so the walks that follow end."""
    n_nodes = int(is_leaf.shape[0])
    seen = np.zeros(n_nodes, bool)

    def visit(node: int) -> int:
        if not 0 <= node < n_nodes:
            raise InvalidTreeError(f"{where}: child id {node} outside [0, {n_nodes})")
        if seen[node]:
            raise InvalidTreeError(f"{where}: node {node} is reached twice (cycle or shared child)")
        seen[node] = True
        return node

    internal: list[int] = []
    level = [visit(root)]
    while level:
        nxt: list[int] = []
        for node in level:
            if is_leaf[node]:
                continue
            internal.append(node)
            nxt.append(visit(int(children_left[node])))
            nxt.append(visit(int(children_right[node])))
        level = nxt
    return internal


def _leaves_left_to_right(children_left: np.ndarray, children_right: np.ndarray, is_leaf: np.ndarray, root: int) -> list[int]:
    """The source ids of the leaves below ``root``, left to right (the IR's numbering); the tree
    is one already walked by :func:`_internal_breadth_first`."""
    leaves: list[int] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if is_leaf[node]:
            leaves.append(node)
        else:
            stack.append(int(children_right[node]))
            stack.append(int(children_left[node]))
    return leaves


def _categorical_arrays(
    categories: Mapping[int, tuple[np.ndarray, np.ndarray]], int_id: Mapping[int, int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    items = sorted((int_id[node], vals) for node, vals in categories.items() if node in int_id)
    width = max((len(v[0]) for _, v in items), default=0)
    nodes = np.asarray([i for i, _ in items], np.int64)
    values = np.full((len(items), width), np.nan)
    left = np.zeros((len(items), width), bool)
    for row, (_, (vals, goes_left)) in enumerate(items):
        values[row, : len(vals)] = vals
        left[row, : len(vals)] = goes_left
    return nodes, values, left

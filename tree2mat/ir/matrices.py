"""The matrices of the decision-machine papers for one tree (docs/architecture.md, "The matrices").

With I internal nodes (breadth-first), L = I + 1 leaves (left to right), F features:

- ``S``  {0,1}^{I x F}: one-hot feature selection; ``t`` the thresholds. A tree with oblique
  nodes has ``W`` in R^{I x F} instead: each node's weights (Decision Machines' ``Wx - b``).
- ``B``  {-1,0,+1}^{L x I}: template matrix; -1 if the leaf lies in the node's left subtree,
  +1 in its right subtree, 0 off the leaf's path.
- ``bitvector`` {0,1}^{L x I}: QuickScorer's bit-vector matrix; 0 iff the leaf lies in the
  node's left subtree.
- ``depth`` [L]: nonzeros of each row of ``B``; ``v`` [L, K]: leaf values.

The exit leaf of ``h = sgn(Sx - t)`` (with sgn(0) = -1) is the unique leaf with ``B h = depth``.
"""

from __future__ import annotations

import numpy as np

from tree2mat.ir.core import Projections, Tree


def leaf_paths(tree: Tree) -> list[list[tuple[int, int]]]:
    """For each leaf, the (internal node, direction) pairs from the root; direction -1 = left."""
    paths: list[list[tuple[int, int]]] = [[] for _ in range(tree.n_leaves)]
    if tree.n_internal == 0:
        return paths
    stack: list[tuple[int, list[tuple[int, int]]]] = [(0, [])]
    while stack:
        ref, path = stack.pop()
        if ref < 0:
            paths[-1 - ref] = path
            continue
        stack.append((int(tree.right[ref]), path + [(ref, 1)]))
        stack.append((int(tree.left[ref]), path + [(ref, -1)]))
    return paths


def template_matrix(tree: Tree) -> np.ndarray:
    """B, int8 [L, I]."""
    b = np.zeros((tree.n_leaves, tree.n_internal), np.int8)
    for leaf, path in enumerate(leaf_paths(tree)):
        for node, direction in path:
            b[leaf, node] = direction
    return b


def bitvector_matrix(tree: Tree) -> np.ndarray:
    """QuickScorer's bit-vector matrix, int8 [L, I]: 0 iff the leaf is in the node's left subtree."""
    return (template_matrix(tree) != -1).astype(np.int8)


def selection_matrix(tree: Tree, n_features: int) -> np.ndarray:
    """S, int8 [I, F] (an oblique node's row: 0; see :func:`weight_matrix`)."""
    s = np.zeros((tree.n_internal, n_features), np.int8)
    axis = tree.feature < n_features
    s[np.flatnonzero(axis), tree.feature[axis]] = 1
    return s


def weight_matrix(tree: Tree, n_features: int, projections: Projections) -> np.ndarray:
    """W, float64 [I, F]: per node the weights of the features it sums (Decision Machines' W x - b
    for oblique splits; an axis-aligned node's row is S's, a 1 at its feature)."""
    w = selection_matrix(tree, n_features).astype(np.float64) if tree.n_internal else np.zeros((0, n_features))
    for i in np.flatnonzero(tree.feature >= n_features):
        feats, weights = projections.terms(int(tree.feature[i]) - n_features)
        w[i] = 0.0
        np.add.at(w[i], feats, weights)
    return w


def paper_matrices(tree: Tree, n_features: int, projections: Projections | None = None) -> dict[str, np.ndarray]:
    """``S`` (or, for a tree with oblique nodes, ``W``: :func:`weight_matrix`), ``t``, ``B``,
    ``bitvector``, ``v``, ``depth`` as named in the papers."""
    b = template_matrix(tree)
    oblique = projections is not None and bool((tree.feature >= n_features).any())
    return {
        **({"W": weight_matrix(tree, n_features, projections)} if oblique and projections is not None
           else {"S": selection_matrix(tree, n_features)}),
        "t": tree.threshold.copy(),
        "B": b,
        "bitvector": (b != -1).astype(np.int8),
        "v": tree.value.copy(),
        "depth": np.count_nonzero(b, axis=1).astype(np.int64),
    }


#: The deepest oblivious tree whose leaf index float32 holds exactly (2^24 leaves).
MAX_LEVELS = 24


def oblivious_levels(tree: Tree) -> np.ndarray | None:
    """The node that stands for each level of an oblivious tree (the level's leftmost, 2^d - 1),
    int64 [D]; None for a tree that is not oblivious: one whose leaves are not all at depth D
    (2^D of them), whose nodes of a level test different columns, thresholds or missing
    directions, that has categorical nodes, or that is deeper than :data:`MAX_LEVELS`."""
    if tree.n_internal == 0:
        return np.zeros(0, np.int64)
    depths = tree.leaf_depths()
    D = int(depths.max())
    if D > MAX_LEVELS or tree.n_leaves != 2**D or (depths != D).any() or tree.has_categorical:
        return None
    zero = tree.zero_missing if tree.zero_missing.size else np.zeros(tree.n_internal, bool)
    for d in range(D):
        level = np.arange(2**d - 1, 2 ** (d + 1) - 1)
        for a in (tree.feature, tree.threshold, tree.default_left, zero):
            if not (a[level] == a[level[0]]).all():
                return None
    return 2 ** np.arange(D, dtype=np.int64) - 1


def level_arrays(tree: Tree) -> dict[str, np.ndarray]:
    """An oblivious tree's levels (none for another tree, or a single leaf): the feature and
    threshold each level tests, and the power of two its leaf index adds for a right turn there
    (what the oblivious form sums)."""
    levels = oblivious_levels(tree)
    if levels is None or not levels.size:
        return {}
    return {
        "level_feature": tree.feature[levels].copy(),
        "level_threshold": tree.threshold[levels].copy(),
        "level_power": 2 ** np.arange(levels.size - 1, -1, -1, dtype=np.int64),
    }

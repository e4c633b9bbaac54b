"""Decision Machines' template matrices, which two forms read: ``sign`` finds the exit leaf as
``ArgMax(B h - depth)`` (:func:`exit_leaf`; ``oblivious`` so for its trees that are not
oblivious), and the soft forms weigh the leaves by the same B and depth (:func:`template_tensors`).
h = sgn(Sx - t) in {-1, +1}^I with sgn(0) = -1 (built from a comparison, never from ``Sign``)."""

from __future__ import annotations

import numpy as np

from tree2mat.forms import _exact, _exit, _nodes, _stack, costs
from tree2mat.forms._graph import GraphBuilder, GraphOptions
from tree2mat.ir.core import Ensemble, Tree
from tree2mat.ir.matrices import template_matrix


def template_tensors(ens: Ensemble, st: _stack.Stacked) -> tuple[np.ndarray, np.ndarray]:
    """B stacked, float32 [T, L, I], and the depths [T, L] (the soft forms' padded layout);
    padding leaves get depth 1 and an all-zero row, so their score (-1) is never the maximum (0)."""
    b = _exact.padded_matrices(ens, st, template_matrix)
    depth = np.ones((st.n_trees, st.n_leaves), np.float32)
    for t, tree in enumerate(ens.trees):
        depth[t, : tree.n_leaves] = np.count_nonzero(template_matrix(tree), axis=1)
    return b, depth


def template_scores(tree: Tree) -> tuple[np.ndarray, np.ndarray]:
    """h = 2r - 1 (r = 1 where the row goes right), so B h - depth = 2 B r - (B 1 + depth):
    integers, 0 at the exit leaf and negative elsewhere (padding leaves: -1, depth 1, B row 0)."""
    b = template_matrix(tree)
    return 2 * b, -(b.sum(axis=1) + np.count_nonzero(b, axis=1))


def exit_leaf(g: GraphBuilder, ens: Ensemble, st: _stack.Stacked, x: _nodes.Compared, opts: GraphOptions) -> _exit.Exit:
    return _exact.exit_by_scores(g, ens, st, x, template_scores, -1.0, opts.matmul, "template")


#: Cost model of the template exit, the sign form's (microseconds per padded node and leaf, per
#: matrix entry; one row's run: benchmarks/latency_fit.json, within 34 % on 13 models).
COST = costs.dense("sign")

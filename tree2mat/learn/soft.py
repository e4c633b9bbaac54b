"""The probabilistic tree of :mod:`tree2mat.learn` (Hehn et al., section 2.1-2.3): its start from
an IR tree, its paths' probabilities, its predictions, the split objective's gradient and the
per-split feature subsets (section 2.7); the E- and M-steps are :mod:`tree2mat.learn.em`'s."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tree2mat.ir.core import Ensemble, Task, Tree
from tree2mat.ir.matrices import template_matrix


@dataclass(eq=False)
class SoftTree:
    """One probabilistic tree in standardized space: ``weight`` [I, F] (w), ``offset`` [I] (t),
    ``leaves`` [L, K] (a classifier's pi, a regressor's Gaussian means m), and its template
    matrix's sides ``right`` / ``left`` bool [L, I] (leaf l lies right / left of node i);
    ``feature`` [I]: each node's feature at the start. ``variance``: a regression tree's Gaussian
    leaves' sigma^2 (None: a classification tree). ``allowed`` bool [I, F]: the features each
    split may weigh (None: all)."""

    weight: np.ndarray
    offset: np.ndarray
    leaves: np.ndarray
    right: np.ndarray
    left: np.ndarray
    feature: np.ndarray
    variance: float | None = None
    allowed: np.ndarray | None = None

    @property
    def n_internal(self) -> int:
        return int(self.offset.shape[0])


def log_sigmoid(v: np.ndarray) -> np.ndarray:
    """``log sigma(v)``, without overflow."""
    return -np.logaddexp(0.0, -v)


def sigmoid(v: np.ndarray) -> np.ndarray:
    out = np.empty_like(v)
    pos = v >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-v[pos]))
    e = np.exp(v[~pos])
    out[~pos] = e / (1.0 + e)
    return out


def log_paths(tree: SoftTree, Z: np.ndarray, gamma: float) -> np.ndarray:
    """``log mu_l(z)`` [N, L] (eq. 1 with eq. 5): the log-probability of each leaf's path."""
    if tree.n_internal == 0:
        return np.zeros((Z.shape[0], 1))
    f = gamma * (Z @ tree.weight.T - tree.offset)  # [N, I]
    return log_sigmoid(f) @ tree.right.T.astype(np.float64) + log_sigmoid(-f) @ tree.left.T.astype(np.float64)


def split_objective(tree: SoftTree, Z: np.ndarray, h: np.ndarray, gamma: float) -> tuple[float, np.ndarray, np.ndarray]:
    """Eq. 14, ``J = sum_n sum_l h[n, l] log mu_l(z_n)``, and its gradient in ``weight`` [I, F]
    and ``offset`` [I]."""
    f = gamma * (Z @ tree.weight.T - tree.offset)  # [N, I]
    R = h @ tree.right.astype(np.float64)  # [N, I]: responsibility right of each node
    L = h @ tree.left.astype(np.float64)
    J = float(np.sum(R * log_sigmoid(f) + L * log_sigmoid(-f)))
    G = gamma * (R - (R + L) * sigmoid(f))  # dJ/d(w . z - t)
    return J, G.T @ Z, -G.sum(axis=0)


def tree_proba(tree: SoftTree, Z: np.ndarray, gamma: float) -> np.ndarray:
    """The probabilistic tree's prediction ``sum_l mu_l pi_l`` (eq. 2), [N, K]: its class
    probabilities, or a regression tree's expected targets."""
    return np.exp(log_paths(tree, Z, gamma)) @ tree.leaves


def standardization(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The fitting rows' mean and standard deviation per feature (1 for a constant feature)."""
    mean = X.mean(axis=0)
    scale = X.std(axis=0)
    return mean, np.where(scale > 0, scale, 1.0)


def start_tree(tree: Tree, ens: Ensemble, mean: np.ndarray, scale: np.ndarray) -> SoftTree:
    """The probabilistic tree of an axis-aligned IR tree: ``w_i = e_f``, ``t_i = (c - mean_f) /
    scale_f``, ``pi_l`` the leaf's values normalized to a distribution (a regressor's: its values,
    the Gaussian means; its ``variance`` is left to :func:`tree2mat.learn.em.start_variance`)."""
    I, F = tree.n_internal, ens.n_features
    weight = np.zeros((I, F))
    weight[np.arange(I), tree.feature] = 1.0
    offset = (np.clip(tree.threshold, -1e300, 1e300) - mean[tree.feature]) / scale[tree.feature]
    if ens.task is Task.REGRESSION:
        leaves = tree.value.astype(np.float64)
    else:
        value = np.clip(tree.value, 0.0, None)
        total = value.sum(axis=1, keepdims=True)
        leaves = np.where(total > 0, value / np.where(total > 0, total, 1.0), 1.0 / value.shape[1])
    B = template_matrix(tree)
    return SoftTree(weight, offset, leaves, B == 1, B == -1, tree.feature.copy())


def forest_proba(trees: list[SoftTree], Z: np.ndarray, gamma: float) -> np.ndarray:
    """The probabilistic forest's prediction: its trees' (eq. 2) averaged, [N, K]."""
    return np.mean([tree_proba(t, Z, gamma) for t in trees], axis=0)


def feature_subsets(tree: SoftTree, k: int, rng: np.random.Generator) -> np.ndarray:
    """bool [I, F]: the features each split may weigh (section 2.7), ``k`` of them: the node's own
    feature at the start (so that the start is kept) and ``k - 1`` of the others, drawn uniformly
    without replacement, node by node."""
    I, F = tree.weight.shape
    keys = rng.random((I, F))
    keys[np.arange(I), tree.feature] = -1.0  # (sorts first: always chosen)
    allowed = np.zeros((I, F), bool)
    np.put_along_axis(allowed, np.argsort(keys, axis=1)[:, :k], True, axis=1)
    return allowed

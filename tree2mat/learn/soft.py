"""The probabilistic tree of :mod:`tree2mat.learn` (Hehn et al., section 2.1-2.3): its start from
an IR tree, its paths' probabilities, the E-step's responsibilities, the M-step's leaves and the
split objective's gradient."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tree2mat.ir.core import Ensemble, Tree
from tree2mat.ir.matrices import template_matrix


@dataclass(eq=False)
class SoftTree:
    """One probabilistic tree in standardized space: ``weight`` [I, F] (w), ``offset`` [I] (t),
    ``leaves`` [L, C] (pi), and its template matrix's sides ``right`` / ``left`` bool [L, I]
    (leaf l lies right / left of node i); ``feature`` [I]: each node's feature at the start."""

    weight: np.ndarray
    offset: np.ndarray
    leaves: np.ndarray
    right: np.ndarray
    left: np.ndarray
    feature: np.ndarray

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


def responsibilities(log_mu: np.ndarray, leaves: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The E-step's ``h[n, l]`` (eq. 10): ``pi_l[y_n] mu_l(x_n)`` normalized over the leaves
    (``y``: class indices). A row whose class no leaf holds (every ``pi_l[y_n] = 0``) takes its
    routing ``mu_l`` alone (eq. 10's ratio is 0 / 0 there)."""
    with np.errstate(divide="ignore"):
        logits = log_mu + np.log(leaves[:, y].T)
    none = ~np.isfinite(logits.max(axis=1))
    logits[none] = log_mu[none]
    logits -= logits.max(axis=1, keepdims=True)
    h = np.exp(logits)
    return h / h.sum(axis=1, keepdims=True)


def leaf_update(h: np.ndarray, y: np.ndarray, n_classes: int, previous: np.ndarray) -> np.ndarray:
    """The M-step's leaves (eq. 13): ``pi_l[k] = sum_n 1(y_n = k) h[n, l] / sum_n h[n, l]``; a
    leaf with no responsibility keeps ``previous``."""
    counts = np.zeros((h.shape[1], n_classes))
    np.add.at(counts.T, y, h)
    total = counts.sum(axis=1, keepdims=True)
    return np.where(total > 0, counts / np.where(total > 0, total, 1.0), previous)


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
    """The probabilistic tree's class probabilities (eq. 2), [N, C]."""
    return np.exp(log_paths(tree, Z, gamma)) @ tree.leaves


def standardization(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The fitting rows' mean and standard deviation per feature (1 for a constant feature)."""
    mean = X.mean(axis=0)
    scale = X.std(axis=0)
    return mean, np.where(scale > 0, scale, 1.0)


def start_tree(tree: Tree, ens: Ensemble, mean: np.ndarray, scale: np.ndarray) -> SoftTree:
    """The probabilistic tree of an axis-aligned IR tree: ``w_i = e_f``, ``t_i = (c - mean_f) /
    scale_f``, ``pi_l`` the leaf's values normalized to a distribution."""
    I, F = tree.n_internal, ens.n_features
    weight = np.zeros((I, F))
    weight[np.arange(I), tree.feature] = 1.0
    offset = (np.clip(tree.threshold, -1e300, 1e300) - mean[tree.feature]) / scale[tree.feature]
    value = np.clip(tree.value, 0.0, None)
    total = value.sum(axis=1, keepdims=True)
    leaves = np.where(total > 0, value / np.where(total > 0, total, 1.0), 1.0 / value.shape[1])
    B = template_matrix(tree)
    return SoftTree(weight, offset, leaves, B == 1, B == -1, tree.feature.copy())


def forest_proba(trees: list[SoftTree], Z: np.ndarray, gamma: float) -> np.ndarray:
    """The probabilistic forest's class probabilities: its trees' (eq. 2) averaged, [N, C]."""
    return np.mean([tree_proba(t, Z, gamma) for t in trees], axis=0)

"""The E- and M-steps of :mod:`tree2mat.learn` for its two leaf models: a classification leaf's
class distribution ``pi_l`` (the paper's eq. 10 and 13) and a regression leaf's Gaussian
``N(y; m_l, sigma^2 I)``.

The Gaussian leaf model (the paper's EM with the class distribution replaced, after Jordan &
Jacobs' mixtures of experts). Leaf l generates the K targets of a row as ``N(y; m_l, sigma^2 I)``,
one variance ``sigma^2`` per tree. The complete-data log-likelihood (eq. 6's analogue) is
``sum_n sum_l z[n, l] (log N(y_n; m_l, sigma^2 I) + log mu_l(x_n))``. E-step (eq. 10's analogue),
the normalization ``(2 pi sigma^2)^(-K/2)`` cancelling as the variance is shared:

    h[n, l] = mu_l(x_n) exp(-|y_n - m_l|^2 / (2 sigma^2)) / sum_l' (the same for l').

M-step: ``Q = sum_n sum_l h[n, l] (-K/2 log(2 pi sigma^2) - |y_n - m_l|^2 / (2 sigma^2)) +
sum_n sum_l h[n, l] log mu_l(x_n)``. Its last sum is eq. 14 unchanged: the splits take the same
Adam steps as a classifier's. ``dQ/dm_l = sum_n h[n, l] (y_n - m_l) / sigma^2 = 0`` gives

    m_l = sum_n h[n, l] y_n / sum_n h[n, l],

the responsibility-weighted mean of the targets (eq. 13 is this formula for one-hot targets), and
``dQ/dsigma^2 = 0`` at those means ``sigma^2 = sum_n sum_l h[n, l] |y_n - m_l|^2 / (N K)`` — the
expected squared error per target. Both closed forms together are Q's maximum over the leaves.
The variance starts as that expected error with ``h = mu`` (the start's routing at the starting
steepness), and never falls below ``1e-12`` of the targets' variance (a tree that fits its rows
exactly would make it 0 and the E-step 0 / 0).
"""

from __future__ import annotations

import numpy as np

from tree2mat.learn.soft import SoftTree, log_paths

#: The Gaussian leaves' variance is at least this share of the targets' own (and positive).
VARIANCE_FLOOR = 1e-12


def _normalized(logits: np.ndarray, log_mu: np.ndarray) -> np.ndarray:
    """``exp(logits)`` normalized over the leaves; a row where every leaf's is 0 (``-inf``) takes
    its routing ``mu`` alone."""
    none = ~np.isfinite(logits.max(axis=1))
    logits[none] = log_mu[none]
    logits -= logits.max(axis=1, keepdims=True)
    h = np.exp(logits)
    return h / h.sum(axis=1, keepdims=True)


def responsibilities(log_mu: np.ndarray, leaves: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The E-step's ``h[n, l]`` (eq. 10): ``pi_l[y_n] mu_l(x_n)`` normalized over the leaves
    (``y``: class indices). A row whose class no leaf holds (every ``pi_l[y_n] = 0``) takes its
    routing ``mu_l`` alone (eq. 10's ratio is 0 / 0 there)."""
    with np.errstate(divide="ignore"):
        logits = log_mu + np.log(leaves[:, y].T)
    return _normalized(logits, log_mu)


def gaussian_responsibilities(log_mu: np.ndarray, means: np.ndarray, Y: np.ndarray, variance: float) -> np.ndarray:
    """The E-step of Gaussian leaves: ``h[n, l]`` proportional to ``mu_l(x_n) exp(-|y_n - m_l|^2 /
    (2 sigma^2))`` (``means`` [L, K], ``Y`` [N, K])."""
    with np.errstate(over="ignore"):
        logits = log_mu - _squared_errors(means, Y) / (2.0 * variance)
    return _normalized(logits, log_mu)


def leaf_means(h: np.ndarray, targets: np.ndarray, previous: np.ndarray) -> np.ndarray:
    """The M-step's leaves: ``sum_n h[n, l] t_n / sum_n h[n, l]`` [L, K] for targets ``t`` [N, K]
    (eq. 13 for one-hot classes; the Gaussian leaves' means); a leaf with no responsibility keeps
    ``previous``."""
    total = h.sum(axis=0)[:, None]
    return np.where(total > 0, (h.T @ targets) / np.where(total > 0, total, 1.0), previous)


def leaf_update(h: np.ndarray, y: np.ndarray, n_classes: int, previous: np.ndarray) -> np.ndarray:
    """The M-step's leaves (eq. 13): ``pi_l[k] = sum_n 1(y_n = k) h[n, l] / sum_n h[n, l]``; a
    leaf with no responsibility keeps ``previous``."""
    return leaf_means(h, np.eye(n_classes)[y], previous)


def leaf_variance(h: np.ndarray, means: np.ndarray, Y: np.ndarray) -> float:
    """The M-step's variance of Gaussian leaves: ``sum_n sum_l h[n, l] |y_n - m_l|^2 / (N K)``,
    at least :data:`VARIANCE_FLOOR` of the targets' variance."""
    floor = max(VARIANCE_FLOOR * float(Y.var(axis=0).mean()), float(np.finfo(np.float64).tiny))
    return max(float(np.sum(h * _squared_errors(means, Y))) / Y.size, floor)


def _squared_errors(means: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """``|y_n - m_l|^2`` [N, L], summed target by target (never an [N, L, K] array)."""
    out = np.zeros((Y.shape[0], means.shape[0]))
    for k in range(Y.shape[1]):
        out += (Y[:, k, None] - means[None, :, k]) ** 2
    return out


def start_variance(tree: SoftTree, Z: np.ndarray, Y: np.ndarray, gamma: float) -> float:
    """A regression tree's first variance: :func:`leaf_variance` with ``h = mu`` at steepness ``gamma``."""
    return leaf_variance(np.exp(log_paths(tree, Z, gamma)), tree.leaves, Y)


def log_likelihood(tree: SoftTree, Z: np.ndarray, y: np.ndarray, gamma: float) -> float:
    """Eq. 4, the objective EM climbs: ``sum_n log p(y_n | z_n) = sum_n log sum_l pi_l[y_n] mu_l(z_n)``
    at steepness ``gamma`` (class indices ``y`` [N]); Gaussian leaves (``tree.variance`` set, targets
    ``y`` [N, K]): ``sum_n log sum_l mu_l(z_n) N(y_n; m_l, sigma^2 I)``. ``-inf`` where a row's class
    no leaf holds. Summed over the leaves in the log domain: a steep tree's ``mu_l`` underflow."""
    log_mu = log_paths(tree, Z, gamma)
    with np.errstate(divide="ignore"):
        if tree.variance is None:
            logits = log_mu + np.log(tree.leaves[:, y].T)
        else:
            density = -0.5 * y.shape[1] * np.log(2.0 * np.pi * tree.variance)
            logits = log_mu - _squared_errors(tree.leaves, y) / (2.0 * tree.variance) + density
    return float(np.sum(np.logaddexp.reduce(logits, axis=1)))


def e_step(tree: SoftTree, log_mu: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The tree's responsibilities for its leaf model: class indices ``y`` [N] (a classification
    tree) or targets [N, K] (a regression tree, ``tree.variance`` set)."""
    if tree.variance is None:
        return responsibilities(log_mu, tree.leaves, y)
    return gaussian_responsibilities(log_mu, tree.leaves, y, tree.variance)


def m_step(tree: SoftTree, h: np.ndarray, y: np.ndarray) -> None:
    """The tree's leaves (and a regression tree's variance) in closed form from ``h`` of every row."""
    if tree.variance is None:
        tree.leaves = leaf_update(h, y, tree.leaves.shape[1], tree.leaves)
        return
    tree.leaves = leaf_means(h, y, tree.leaves)
    tree.variance = leaf_variance(h, tree.leaves, y)

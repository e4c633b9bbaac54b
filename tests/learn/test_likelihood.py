"""Hehn et al.'s eq. 4, the log-likelihood ``sum_n log p(y_n | x_n)`` of the probabilistic tree
(tree2mat.learn.log_likelihood): against the formula written out here on a three-leaf tree with
hand-picked numbers (sigma(ln 3) = 3/4, so every path probability is a fraction), and EM's
defining property on fitted trees: at a fixed steepness, no EM step lowers it.

The EM steps tested are the pure ones: the E-step (eq. 10; Gaussian leaves: its analogue) and the
leaves' M-step in closed form (eq. 13; Gaussian leaves: the weighted means and the variance), the
splits held fixed. tree2mat's epochs also take Adam steps on the splits (eq. 14) at a fixed step
size and anneal the steepness between epochs: neither is an exact maximization, and neither is
promised to keep the likelihood from falling, so they are not part of this test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.datasets import make_classification, make_friedman1
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

import tree2mat
from tree2mat import learn


def _three_leaves(leaves: np.ndarray, variance: float | None = None) -> learn.SoftTree:
    """The root splits on z_0 (leaf 0 on its left), its right child on z_1 (leaves 1 and 2)."""
    right = np.array([[False, False], [True, False], [True, True]])
    left = np.array([[True, False], [False, True], [False, False]])
    return learn.SoftTree(np.eye(2), np.zeros(2), leaves, right, left, np.arange(2), variance)


LN3 = math.log(3.0)


def test_eq_4_by_hand_on_a_three_leaf_tree():
    """mu_0 = 1 - s_0, mu_1 = s_0 (1 - s_1), mu_2 = s_0 s_1 with s_i = sigma(gamma z_i); at z = (ln 3,
    -ln 3) and gamma = 1: s = (3/4, 1/4), mu = (1/4, 9/16, 3/16); at z = 0: mu = (1/2, 1/4, 1/4);
    at gamma = 2, z = (ln 3, -ln 3): s = (9/10, 1/10), mu = (1/10, 81/100, 9/100)."""
    pi = np.array([[0.5, 0.5], [1.0, 0.0], [0.25, 0.75]])
    tree = _three_leaves(pi)
    Z = np.array([[LN3, -LN3], [LN3, -LN3], [0.0, 0.0]])
    y = np.array([0, 1, 1])
    p = [1 / 4 * 1 / 2 + 9 / 16 * 1 + 3 / 16 * 1 / 4,  # 47/64
         1 / 4 * 1 / 2 + 9 / 16 * 0 + 3 / 16 * 3 / 4,  # 17/64
         1 / 2 * 1 / 2 + 1 / 4 * 0 + 1 / 4 * 3 / 4]  # 7/16
    assert p == pytest.approx([47 / 64, 17 / 64, 7 / 16], rel=1e-15)
    assert learn.log_likelihood(tree, Z, y, 1.0) == pytest.approx(sum(math.log(v) for v in p), rel=1e-13)
    steep = [1 / 10 * 1 / 2 + 81 / 100 * 1 + 9 / 100 * 1 / 4, 1 / 10 * 1 / 2 + 9 / 100 * 3 / 4]
    assert learn.log_likelihood(tree, Z[:2], y[:2], 2.0) == pytest.approx(sum(math.log(v) for v in steep), rel=1e-13)
    # A class no leaf on the row's paths can give: log 0.
    assert learn.log_likelihood(_three_leaves(np.array([[1.0, 0.0]] * 3)), Z[:1], np.array([1]), 1.0) == -math.inf


def test_eq_4_of_gaussian_leaves_by_hand():
    """sum_n log sum_l mu_l N(y_n; m_l, sigma^2 I), two targets, sigma^2 = 0.5."""
    means = np.array([[0.0, 1.0], [2.0, -1.0], [1.0, 1.0]])
    tree = _three_leaves(means, variance=0.5)
    Z = np.array([[LN3, -LN3], [0.0, 0.0]])
    Y = np.array([[1.0, 0.5], [0.0, 0.0]])
    mu = [[1 / 4, 9 / 16, 3 / 16], [1 / 2, 1 / 4, 1 / 4]]

    def density(y, m):  # N(y; m, 0.5 I) in two dimensions: exp(-|y - m|^2) / pi
        return math.exp(-sum((a - b) ** 2 for a, b in zip(y, m))) / math.pi

    expected = sum(math.log(sum(mu[n][l] * density(Y[n], means[l]) for l in range(3))) for n in range(2))
    assert learn.log_likelihood(tree, Z, Y, 1.0) == pytest.approx(expected, rel=1e-13)


def _em_steps(tree: learn.SoftTree, Z: np.ndarray, y: np.ndarray, gamma: float, steps: int) -> list[float]:
    """The likelihood before and after each pure EM step (E-step, then the leaves in closed form)."""
    seen = [learn.log_likelihood(tree, Z, y, gamma)]
    for _ in range(steps):
        h = learn.e_step(tree, learn.log_paths(tree, Z, gamma), y)
        learn.m_step(tree, h, y)
        seen.append(learn.log_likelihood(tree, Z, y, gamma))
    return seen


def _start(model, X: np.ndarray, spread: float) -> tuple[learn.SoftTree, np.ndarray]:
    """The model's first probabilistic tree with its splits moved off the axes (so that the start's
    leaves are no maximum at any steepness) and the standardized rows."""
    ens = tree2mat.load(model)
    mean, scale = learn.standardization(X)
    tree = learn.start_tree(ens.trees[0], ens, mean, scale)
    rng = np.random.default_rng(1)
    tree.weight += spread * rng.normal(size=tree.weight.shape)
    tree.offset += spread * rng.normal(size=tree.offset.shape)
    return tree, (X - mean) / scale


@pytest.mark.parametrize("gamma", [0.5, 1.0, 4.0])
def test_em_steps_never_lower_eq_4_of_a_classification_tree(gamma):
    X, y = make_classification(300, 5, n_informative=3, n_classes=3, random_state=0)
    tree, Z = _start(DecisionTreeClassifier(max_depth=4, random_state=0).fit(X, y), X, 0.4)
    seen = _em_steps(tree, Z, y, gamma, 12)
    steps = np.diff(seen)
    assert np.all(steps >= -1e-10 * abs(seen[0])), steps
    assert seen[-1] - seen[0] > 1e-3 * abs(seen[0])  # (EM moved: the start was no fixed point)
    assert np.isfinite(seen).all()


@pytest.mark.parametrize("gamma", [0.5, 2.0])
def test_em_steps_never_lower_eq_4_of_a_regression_tree(gamma):
    X, y = make_friedman1(300, 5, noise=1.0, random_state=0)
    tree, Z = _start(DecisionTreeRegressor(max_depth=4, random_state=0).fit(X, y), X, 0.4)
    Y = y[:, None]
    tree.variance = learn.start_variance(tree, Z, Y, gamma)
    seen = _em_steps(tree, Z, Y, gamma, 12)
    steps = np.diff(seen)
    assert np.all(steps >= -1e-10 * abs(seen[0])), steps
    assert seen[-1] - seen[0] > 1e-3 * abs(seen[0])
    assert np.isfinite(seen).all()

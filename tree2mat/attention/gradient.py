"""ABRF-2 and ABRF-3: the tree scales v and feature weights z (and ABRF-3's w) by L-BFGS-B on the
L2 loss, with analytic gradients."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tree2mat.attention.model import FAR, AttentionForest
from tree2mat.attention.solvers import _on_simplex, _weights

#: ABRF-2/3: L-BFGS iterations per round, and rounds (ABRF-3: w solved again before each).
GRADIENT_ITERATIONS = 100
GRADIENT_ROUNDS = 4


def _fit_gradient(start: AttentionForest, X: np.ndarray, y: np.ndarray, leaves: np.ndarray, variant: int) -> AttentionForest:
    """ABRF-2/3 (eq. 23, 24): ``v`` and ``z`` minimizing the L2 loss, from ``start`` (ABRF-1:
    its softmax is the first point: ``v`` uniform, ``z^2 = T / tau``), by L-BFGS-B over
    ``v = softmax(theta)`` (on the simplex) and ``z = exp(phi)`` (> 0), with analytic gradients
    (:func:`_gradient_problem`); ABRF-3 alternates: ``w`` by the quadratic program, then ``v``
    and ``z``."""
    from scipy.optimize import minimize

    T, F = start.n_trees, start.ensemble.n_features
    eps = start.epsilon if variant == 3 else 0.0
    w = start.weights
    params = np.concatenate([np.zeros(T), np.full(F, 0.5 * math.log(T / start.tau))])
    bounds = [(-20.0, 20.0)] * (T + F)  # (v, z within e^-20..e^20 of each other: float32 holds the distances)
    problem, B = _gradient_problem(start, X, y, leaves, eps)  # (the rows' distances and values: once)
    for _ in range(GRADIENT_ROUNDS if variant == 3 else 1):
        if variant == 3 and eps > 0.0:
            w = _weights(eps, B, _gradient_model(start, params, w, variant).softmax_weights(X, leaves), y, "l2")
        params = minimize(problem, params, args=(w,), jac=True, method="L-BFGS-B", bounds=bounds,
                          options={"maxiter": GRADIENT_ITERATIONS}).x
    return _gradient_model(start, params, w, variant)


def _gradient_problem(start: AttentionForest, X: np.ndarray, y: np.ndarray, leaves: np.ndarray, eps: float) -> tuple[Any, np.ndarray]:
    """``f(params, w) -> (loss, gradient)``: the L2 loss of ABRF-2/3 over the rows (``y``: [N, K]
    targets) at ``params = (theta [T], phi [F])`` (``v = softmax(theta)``, ``z = exp(phi)``),
    ``w`` and ``eps`` fixed, and its gradient; and the rows' tree values B [N, T, K]."""
    T, F = start.n_trees, start.ensemble.n_features
    B = start.tree_values(X, leaves)  # [N, T, K]
    squares = np.empty((X.shape[0], T, F))  # (x - A)^2 where both hold a value, else 0
    reached = np.empty((X.shape[0], T), bool)
    for k in range(T):
        diff = X - start.leaf_means[k][leaves[:, k]]
        squares[:, k] = np.where(np.isnan(diff), 0.0, diff * diff)
        reached[:, k] = start.leaf_counts[k][leaves[:, k]] > 0

    def loss_and_gradient(params: np.ndarray, w: np.ndarray) -> tuple[float, np.ndarray]:
        theta, phi = params[:T], params[T:]
        v = np.exp(theta - theta.max())
        v /= v.sum()
        z2 = np.exp(2.0 * phi)
        q = squares @ z2  # [N, T]: ||(x - A) o z||^2
        part = reached & (q <= FAR)
        c = v / 2.0
        s = np.where(part, q * c, FAR)
        e = np.where(part, np.exp(-(s - s.min(axis=1, keepdims=True))), 0.0)
        none = ~part.any(axis=1)
        e[none] = 1.0
        D = e / e.sum(axis=1, keepdims=True)
        error = np.einsum("nt,ntk->nk", (1.0 - eps) * D + eps * w[None, :], B) - y
        G = 2.0 * (1.0 - eps) * np.einsum("nk,ntk->nt", error, B)  # dL/dD
        dS = -D * (G - np.sum(D * G, axis=1, keepdims=True))  # dL/ds (s: the softmax's argument, negated)
        dS[none] = 0.0
        dv = np.sum(dS * q, axis=0) / 2.0
        dz2 = np.einsum("nt,ntf->f", dS * c[None, :], squares)
        return float(np.sum(error**2)), np.concatenate([v * (dv - np.dot(v, dv)), 2.0 * z2 * dz2])

    return loss_and_gradient, B


def _gradient_model(start: AttentionForest, params: np.ndarray, w: np.ndarray, variant: int) -> AttentionForest:
    """The ABRF-2/3 of ``start`` at the optimizer's parameters (``theta``, ``phi``)."""
    T = start.n_trees
    v = np.exp(params[:T] - params[:T].max())
    return AttentionForest(
        start.ensemble, start.leaf_means, start.leaf_counts, start.epsilon if variant == 3 else 0.0, start.tau, w, "l2",
        variant, _on_simplex(v), np.exp(params[T:]),
    )

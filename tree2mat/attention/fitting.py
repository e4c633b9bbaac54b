"""Fitting an attention forest: its inputs checked, epsilon and tau chosen by cross-validation
(``"auto"``), ABRF-1's w by the programs of :mod:`~tree2mat.attention.solvers`, ABRF-2/3 by
:mod:`~tree2mat.attention.gradient`; and the scores the fit and ``attend`` report."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tree2mat import frontends
from tree2mat.attention.gradient import _fit_gradient
from tree2mat.attention.model import LOSSES, VARIANTS, AttentionForest, _check_forest, _rows, _softmax_weights, leaf_means
from tree2mat.attention.solvers import _weights
from tree2mat.data import one_hot
from tree2mat.errors import DataError, OptionError
from tree2mat.ir import evaluate
from tree2mat.ir.core import Ensemble, Task

#: What ``epsilon`` and ``tau`` take: a value, ``"auto"`` (a grid), or values to choose from.
Choice = float | str | Sequence[float]
#: ``epsilon="auto"`` tries these (the paper's Fig. 2 grid).
EPSILON_GRID = (0.0, 0.25, 0.5, 0.75, 1.0)
#: ``tau="auto"`` tries these multiples of the fitting rows' median ``||x - A_k(x)||^2 / 2`` (the
#: scale at which the softmax's argument is about 1).
TAU_FACTORS = (0.01, 0.1, 1.0, 10.0, 100.0)


def fit(
    model: Any, X: np.ndarray, y: np.ndarray, *, epsilon: Choice = "auto", tau: Choice = "auto", loss: str = "l2",
    folds: int = 5, seed: int = 0, variant: int = 1,
) -> AttentionForest:
    """Fit an ABRF on the rows ``X``, ``y`` (the rows whose leaf means the attention uses), for a
    fitted forest ``model`` (an object or a file tree2mat reads).

    ABRF-1 (``variant=1``): the tree weights ``w``, by the quadratic or linear program.
    ``epsilon`` / ``tau``: a value, or ``"auto"``: the pair of :data:`EPSILON_GRID` and
    :data:`TAU_FACTORS` with the lowest ``folds``-fold cross-validated loss (:func:`select`), or
    a sequence of values to choose from so.

    ABRF-2 and ABRF-3 (``variant=2|3``, L2 loss only): the tree scales ``v`` and feature weights
    ``z`` (and for ABRF-3 ``w``), by L-BFGS with analytic gradients
    (:func:`~tree2mat.attention.gradient._fit_gradient`), from ABRF-1's softmax at ``tau`` (chosen
    as for ABRF-1 when ``"auto"``; ABRF-2 with ``epsilon`` 0). ABRF-3's ``epsilon`` is ABRF-1's
    (chosen as for ABRF-1 when ``"auto"``): cross-validating the gradient fit at every grid point
    would take the fit's time 25 x ``folds`` times."""
    epsilon = check_variant(variant, epsilon, loss)
    ens, X, y = _inputs(model, X, y, loss)
    leaves = evaluate.apply(ens, X)  # (the forest is fixed: every fit reuses the rows' leaves)
    if not (_single(epsilon) and _single(tau)):
        chosen = _select(ens, X, y, leaves, epsilon, tau, loss, folds, seed)
        epsilon, tau = chosen.epsilon, chosen.tau
    first = _fit(ens, X, y, _epsilon(epsilon), _tau(tau), loss, leaves)
    return first if variant == 1 else _fit_gradient(first, X, y, leaves, variant)


def check_variant(variant: Any, epsilon: Choice, loss: str) -> Choice:
    """``epsilon`` as the variant takes it (ABRF-2: 0), or an OptionError naming what the
    variant refuses."""
    if variant not in VARIANTS:
        raise OptionError(f"--variant {variant!r}: choose one of {', '.join(map(str, VARIANTS))}")
    if variant != 1 and loss != "l2":
        raise OptionError(f"--loss {loss}: ABRF-{variant} is fitted by gradients on the L2 loss (--loss l2)")
    if variant == 2:
        if not (_is_auto(epsilon) or (_single(epsilon) and _epsilon(epsilon) == 0.0)):
            raise OptionError("--epsilon: ABRF-2 has no contamination (epsilon 0; ABRF-3 has one)")
        return 0.0
    return epsilon


def held_out(
    model: Any, X: np.ndarray, y: np.ndarray, *, epsilon: Choice = "auto", tau: Choice = "auto", variant: int = 1, loss: str = "l2",
    folds: int = 5, seed: int = 0,
) -> np.ndarray:
    """Each row's prediction by the ABRF fitted (:func:`fit`, with these ``epsilon`` and ``tau``:
    ``"auto"`` chooses them within each fit, on its rows alone: nested cross-validation) on the
    other folds (the rows shuffled by ``seed``, as :func:`select` splits them): [N], a
    classifier's probabilities [N, C]."""
    ens, X, _ = _inputs(model, X, y, loss)
    y = np.asarray(y)
    out = None
    for rows in _folds(X.shape[0], folds, seed):
        keep = np.setdiff1d(np.arange(X.shape[0]), rows)
        fitted = fit(ens, X[keep], y[keep], epsilon=epsilon, tau=tau, variant=variant, loss=loss, folds=min(folds, keep.size), seed=seed)
        got = fitted.outputs(X[rows])
        out = np.empty((X.shape[0], got.shape[1])) if out is None else out
        out[rows] = got
    assert out is not None
    return out if ens.task is Task.CLASSIFICATION else out[:, 0]


def _single(value: Any) -> bool:
    """A value, not ``"auto"`` or a sequence of values to choose from."""
    return not (_is_auto(value) or isinstance(value, (list, tuple, np.ndarray)))


@dataclass(frozen=True)
class Selection:
    """What ``"auto"`` chose, and the cross-validated loss (mean squared or absolute error on the
    held-out rows) of every pair tried and of the forest itself."""

    epsilon: float
    tau: float
    scores: dict[tuple[float, float], float]
    forest_score: float
    #: The chosen pair's prediction of each row from the folds that held it out [N].
    held_out: np.ndarray
    #: The forest's own prediction of each row [N] (the forest is not refitted).
    forest_predictions: np.ndarray


def select(
    model: Any, X: np.ndarray, y: np.ndarray, *, epsilon: Choice = "auto", tau: Choice = "auto", loss: str = "l2",
    folds: int = 5, seed: int = 0,
) -> Selection:
    """ε and τ by ``folds``-fold cross-validation over the rows (shuffled by ``seed``): for each
    pair, the leaf means and ``w`` are fitted on the other folds and the loss measured on the
    held-out one; the pair with the lowest mean wins (ties: the first in grid order). A value
    given for one of them is kept, a sequence of values tried in place of its grid; the forest
    itself is not refitted."""
    ens, X, y = _inputs(model, X, y, loss)
    return _select(ens, X, y, evaluate.apply(ens, X), epsilon, tau, loss, folds, seed)


def _inputs(model: Any, X: Any, y: Any, loss: str) -> tuple[Ensemble, np.ndarray, np.ndarray]:
    """The forest's IR and the rows, checked (and the loss's name)."""
    if loss not in LOSSES:
        raise OptionError(f"--loss {loss!r}: choose one of {', '.join(LOSSES)}")
    ens = frontends.load_model(model)[1]
    _check_forest(ens)
    X = _rows(X, ens.n_features)
    if np.isinf(X).any():
        raise DataError("X holds +-inf: the leaf means are means of the fitting rows' values (NaN is a missing value; +-inf has no mean)")
    return ens, X, _targets(y, X.shape[0], ens)


def _select(
    ens: Ensemble, X: np.ndarray, y: np.ndarray, leaves: np.ndarray, epsilon: Any, tau: Any, loss: str,
    folds: int, seed: int,
) -> Selection:
    held = _folds(X.shape[0], folds, seed)
    epsilons = _candidates(epsilon, EPSILON_GRID, _epsilon)
    taus = tuple(f * _distance_scale(ens, X, leaves) for f in TAU_FACTORS) if _is_auto(tau) else _candidates(tau, (), _tau)
    error = (lambda e: float(np.mean(np.sum(e**2, axis=1)))) if loss == "l2" else (lambda e: float(np.mean(np.sum(np.abs(e), axis=1))))
    predictions = {(e, t): np.empty(y.shape) for e in epsilons for t in taus}
    for out in held:  # per fold the leaf means and values once, per tau the softmax once, per pair w
        keep = np.setdiff1d(np.arange(X.shape[0]), out)
        means, counts = leaf_means(ens, X[keep], leaves[keep])
        model = AttentionForest(ens, means, counts, 0.0, 1.0, np.full(ens.n_trees, 1.0 / ens.n_trees), loss)
        B_keep, B_out = model.tree_values(X[keep], leaves[keep]), model.tree_values(X[out], leaves[out])
        for t in taus:
            D_keep = _softmax_weights(X[keep], leaves[keep], means, counts, 1.0 / (2.0 * t))
            D_out = _softmax_weights(X[out], leaves[out], means, counts, 1.0 / (2.0 * t))
            for e in epsilons:
                w = _weights(e, B_keep, D_keep, y[keep], loss)
                predictions[(e, t)][out] = np.einsum("nt,ntk->nk", (1.0 - e) * D_out + e * w[None, :], B_out)
    scores = {pair: error(y - pred) for pair, pred in predictions.items()}
    best = min(scores, key=lambda k: scores[k])
    forest = evaluate.margin(ens, X, leaves)
    flat = (lambda a: a) if ens.task is Task.CLASSIFICATION else (lambda a: a[:, 0])
    return Selection(best[0], best[1], scores, error(y - forest), flat(predictions[best]), flat(forest))


def _folds(n: int, folds: Any, seed: int) -> list[np.ndarray]:
    """The held-out rows of each fold: ``n`` rows shuffled by ``seed``, split in ``folds``
    (:func:`select` and :func:`held_out` split alike)."""
    if not (isinstance(folds, int) and 2 <= folds <= n):
        raise OptionError(f"--folds must be an integer from 2 to the number of rows ({n}), got {folds}")
    return np.array_split(np.random.default_rng(seed).permutation(n), folds)


def _fit(ens: Ensemble, X: np.ndarray, y: np.ndarray, epsilon: float, tau: float, loss: str, leaves: np.ndarray | None = None) -> AttentionForest:
    leaves = evaluate.apply(ens, X) if leaves is None else leaves
    means, counts = leaf_means(ens, X, leaves)
    forest = AttentionForest(ens, means, counts, epsilon, tau, np.full(ens.n_trees, 1.0 / ens.n_trees), loss)
    B = forest.tree_values(X, leaves)
    return AttentionForest(ens, means, counts, epsilon, tau, _weights(epsilon, B, forest.softmax_weights(X, leaves), y, loss), loss)


def _is_auto(value: Any) -> bool:
    return isinstance(value, str) and value == "auto"


def _candidates(value: Any, grid: tuple[float, ...], check: Any) -> tuple[float, ...]:
    """The values to try: the grid for ``"auto"``, each of a sequence, or the one value."""
    if _is_auto(value):
        return grid
    if isinstance(value, (list, tuple, np.ndarray)):
        if len(value) == 0:
            raise OptionError("give at least one value to try")
        return tuple(dict.fromkeys(check(v) for v in value))
    return (check(value),)


def _distance_scale(ens: Ensemble, X: np.ndarray, leaves: np.ndarray) -> float:
    """The median over the rows and trees of ``||x - A_k(x)||^2 / 2`` (the rows' own leaf
    means), or 1 where that is 0."""
    means, _ = leaf_means(ens, X, leaves)
    d = np.stack([np.nansum((X - means[k][leaves[:, k]]) ** 2, axis=1) for k in range(ens.n_trees)], axis=1) / 2.0
    scale = float(np.median(d))
    return scale if scale > 0 else 1.0


def _epsilon(value: Any) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)) or not 0.0 <= value <= 1.0:
        raise OptionError(f"--epsilon must be auto or a number in [0, 1], got {value!r}")
    return float(value)


def _tau(value: Any) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)) or not (math.isfinite(value) and value > 0):
        raise OptionError(f"--tau must be auto or a finite number > 0, got {value!r}")
    return float(value)


def _targets(y: Any, n: int, ens: Ensemble) -> np.ndarray:
    """The targets as the fit takes them, [N, K]: a regressor's values; a classifier's labels as
    one-hot rows of its classes."""
    y = np.asarray(y).reshape(-1)
    if y.shape[0] != n:
        raise DataError(f"y has {y.shape[0]} values for {n} rows")
    if ens.task is Task.CLASSIFICATION:
        classes = ens.classes[0]
        hot = one_hot(y, classes)
        unknown = ~hot.any(axis=1)
        if unknown.any():
            raise DataError(f"y holds {str(y[np.flatnonzero(unknown)[0]])!r:.40}, which is none of the forest's classes ({', '.join(map(str, classes[:10]))})")
        return hot.astype(np.float64)
    if y.dtype.kind not in "biuf" or not np.isfinite(y.astype(np.float64)).all():
        raise DataError("y must hold finite numbers (the forest is a regressor)")
    return y.astype(np.float64)[:, None]


def scores(y: np.ndarray, predictions: np.ndarray, classes: np.ndarray | None = None) -> dict[str, float]:
    """R^2 and the mean absolute error of a regressor's ``predictions`` of the targets ``y``;
    with ``classes``, the accuracy and log-loss of a classifier's probabilities [N, C] of the
    labels ``y`` (probabilities clipped to float64's epsilon, as scikit-learn's ``log_loss``)."""
    if classes is not None:
        proba = np.asarray(predictions, np.float64)
        truth = np.argmax(one_hot(y, classes), axis=1)
        eps = float(np.finfo(np.float64).eps)
        chosen = np.clip(proba[np.arange(len(truth)), truth], eps, 1.0)
        return {"accuracy": float(np.mean(np.argmax(proba, axis=1) == truth)), "log_loss": float(-np.mean(np.log(chosen)))}
    y, predictions = np.asarray(y, np.float64), np.asarray(predictions, np.float64)
    spread = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - float(np.sum((y - predictions) ** 2)) / spread if spread > 0 else float("nan")
    return {"r2": r2, "mae": float(np.mean(np.abs(y - predictions)))}


def objective(forest: AttentionForest, X: np.ndarray, y: np.ndarray, weights: np.ndarray | None = None) -> float:
    """The training objective of ``forest`` (or of it with other tree weights ``w``): the sum of
    squared errors (L2, eq. 15; a classifier's over its one-hot targets, eq. 30) or of absolute
    errors (L1, eq. 18)."""
    model = forest if weights is None else replace(forest, weights=np.asarray(weights, np.float64))
    error = _targets(y, np.asarray(y).shape[0], forest.ensemble) - model.outputs(X)
    return float(np.sum(error**2) if forest.loss == "l2" else np.sum(np.abs(error)))

"""The fine-tuning of :mod:`tree2mat.learn`: EM per epoch and tree (Adam on the splits, the leaves
in closed form) with the steepness annealed, each epoch's accuracies (a regressor's mean squared
errors) measured on the hardened model."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tree2mat import frontends
from tree2mat.data import one_hot
from tree2mat.errors import OptionError
from tree2mat.ir import evaluate
from tree2mat.ir.core import Ensemble, Task
from tree2mat.learn.checks import _check_model, _check_subset, _rows, check_options
from tree2mat.learn.em import start_variance
from tree2mat.learn.growth import Growth, GrowthStep
from tree2mat.learn.growth import grow as grow_trees
from tree2mat.learn.hardening import harden
from tree2mat.learn.soft import SoftTree, feature_subsets, forest_proba, standardization, start_tree
from tree2mat.learn.steps import _Adam, _check_finite, _epoch, _Schedule

#: Defaults (docs/learn.md says how they were chosen): Adam's step and batch size.
LEARNING_RATE = 0.01
BATCH_SIZE = 256
EPOCHS = 50
#: The paper's schedule: gamma starts at 1 and grows by 0.1 per epoch.
STEEPNESS = 1.0
STEEPNESS_INCREASE = 0.1


@dataclass(frozen=True)
class Epoch:
    """Accuracies (a regressor's mean squared errors: :attr:`Learned.metric`) after one epoch
    (epoch 0: the start) at steepness ``gamma``: the probabilistic model's (eq. 2, trees
    averaged) and the hardened deterministic one's (the IR, by the reference evaluator), on the
    fitting rows and the held-out rows (None without any)."""

    epoch: int
    steepness: float
    train_probabilistic: float
    train_deterministic: float
    held_out_probabilistic: float | None
    held_out_deterministic: float | None
    seconds: float


@dataclass(frozen=True, eq=False)
class Learned:
    """What :func:`learn` returns: the hardened IR, the start (the model's own IR), the per-epoch
    figures, and the start's deterministic model's; ``metric``: what the figures are,
    ``"accuracy"`` (a classifier's, higher is better) or ``"mse"`` (a regressor's mean squared
    error over rows and targets, lower is better); ``soft``: the probabilistic trees as the last
    epoch left them (standardized space, :class:`SoftTree`); ``growth``: greedy growth's steps
    (:class:`GrowthStep`; empty without ``grow``)."""

    ensemble: Ensemble
    initial: Ensemble
    history: tuple[Epoch, ...]
    initial_train: float
    initial_held_out: float | None
    rows: int
    held_out_rows: int
    metric: str = "accuracy"
    soft: tuple[SoftTree, ...] = ()
    growth: tuple[GrowthStep, ...] = ()

    @property
    def final(self) -> Epoch:
        return self.history[-1]


def learn(
    model: Any, X: Any, y: Any, *, epochs: int = EPOCHS, steepness: float = STEEPNESS, steepness_increase: float = STEEPNESS_INCREASE,
    oblique: bool = True, held_out: float = 0.0, seed: int = 0, learning_rate: float = LEARNING_RATE, batch_size: int = BATCH_SIZE,
    features_per_split: int | None = None, grow: Growth | None = None, progress: Callable[[Epoch], None] | None = None,
) -> Learned:
    """Fine-tune ``model`` (a fitted scikit-learn DecisionTree, RandomForest or ExtraTrees
    Classifier or Regressor, an object or any file tree2mat reads) on the rows ``X`` and labels
    (a regressor's targets) ``y`` end to end (:mod:`tree2mat.learn`), ``epochs`` epochs from
    steepness ``steepness`` growing by ``steepness_increase`` per epoch, and harden it.
    ``held_out``: the fraction of the rows (drawn by ``seed``) kept out of the fit and only
    measured on; ``seed`` also shuffles the batches and draws the feature subsets.
    ``features_per_split``: each oblique split weighs only its own feature and that many minus
    one others, drawn per split (section 2.7; None: every feature). ``grow``: first grow the
    trees greedily (section 2.5, :class:`Growth`; epoch 0 is then the grown tree). ``progress``
    is called with each epoch's figures (epoch 0: the start)."""
    check_options(epochs, steepness, steepness_increase, held_out, learning_rate, batch_size, features_per_split, oblique)
    if grow is not None:
        grow.check(oblique)
    start = frontends.load_model(model)[1]
    _check_model(start)
    _check_subset(features_per_split, start)
    if grow is not None:
        grow.check_model(start)
    rng = np.random.default_rng(seed)
    d = _Rows.of(*_rows(X, y, start), held_out, rng)
    schedule = _Schedule(float(steepness), float(steepness_increase), float(learning_rate), int(batch_size))
    trees = _start(start, d.mean, d.scale, d.Zf, d.yf, schedule.steepness, features_per_split, rng)
    ens, steps = start, list[GrowthStep]()
    if grow is not None:
        ens, trees, steps = grow_trees(start, trees, d.Zf, d.yf, grow, schedule, features_per_split, rng)
    score = _Score(ens.task is Task.REGRESSION)
    began = time.perf_counter()

    def measure(epoch: int, gamma: float) -> Epoch:
        hard = harden(ens, trees, d.mean, d.scale, oblique, d.Zf, d.yf, gamma)
        return Epoch(
            epoch, gamma, score.probabilistic(forest_proba(trees, d.Zf, gamma), d.yf), score.deterministic(hard, d.Xf, d.yf),
            None if d.Zo is None else score.probabilistic(forest_proba(trees, d.Zo, gamma), d.yo),
            None if d.Xo is None else score.deterministic(hard, d.Xo, d.yo), time.perf_counter() - began,
        )

    gamma = schedule.steepness
    history = [measure(0, gamma)]
    if progress is not None:
        progress(history[0])
    states = [_Adam(t.weight.shape) for t in trees]
    for epoch in range(1, epochs + 1):
        _epoch_of_forest(trees, states, d.Zf, d.yf, gamma, oblique, schedule, epoch, rng)
        gamma += steepness_increase
        history.append(measure(epoch, gamma))
        if progress is not None:
            progress(history[-1])
    hard = harden(ens, trees, d.mean, d.scale, oblique, d.Zf, d.yf, gamma)
    return Learned(
        hard, start, tuple(history), score.deterministic(start, d.Xf, d.yf), None if d.Xo is None else score.deterministic(start, d.Xo, d.yo),
        d.n_fit, d.n_out, score.metric, tuple(trees), tuple(steps),
    )


def _epoch_of_forest(
    trees: list[SoftTree], states: list[_Adam], Z: np.ndarray, y: np.ndarray, gamma: float, oblique: bool, schedule: _Schedule, epoch: int,
    rng: np.random.Generator,
) -> None:
    """One epoch of every tree (each on every fitting row, independently: section 2.7)."""
    for tree, adam in zip(trees, states):
        if tree.n_internal:
            with np.errstate(over="ignore", invalid="ignore"):
                _epoch(tree, adam, Z, y, gamma, oblique, schedule.rate, schedule.batch, rng)
            _check_finite(tree, epoch, gamma, schedule.rate)


@dataclass(frozen=True, eq=False)
class _Rows:
    """The fitting rows (``Xf``, labels or targets ``yf``, standardized ``Zf``) and the held-out
    ones (None without any), the fitting rows' ``mean`` and ``scale``, and how many of each."""

    Xf: np.ndarray
    yf: np.ndarray
    Zf: np.ndarray
    Xo: np.ndarray | None
    yo: np.ndarray | None
    Zo: np.ndarray | None
    mean: np.ndarray
    scale: np.ndarray
    n_fit: int
    n_out: int

    @classmethod
    def of(cls, X: np.ndarray, y: np.ndarray, held_out: float, rng: np.random.Generator) -> _Rows:
        fit_rows, out_rows = _split(X.shape[0], held_out, rng)
        Xf = X[fit_rows]
        mean, scale = standardization(Xf)
        Xo = X[out_rows] if out_rows.size else None
        return cls(Xf, y[fit_rows], (Xf - mean) / scale, Xo, y[out_rows] if out_rows.size else None, None if Xo is None else (Xo - mean) / scale,
                   mean, scale, int(fit_rows.size), int(out_rows.size))


def _start(
    ens: Ensemble, mean: np.ndarray, scale: np.ndarray, Z: np.ndarray, y: np.ndarray, gamma: float, features_per_split: int | None,
    rng: np.random.Generator,
) -> list[SoftTree]:
    """The probabilistic trees of the model: a regressor's with its first variance, each split's
    feature subset drawn where ``features_per_split`` asks for one."""
    trees = [start_tree(t, ens, mean, scale) for t in ens.trees]
    for tree in trees:
        if ens.task is Task.REGRESSION:
            tree.variance = start_variance(tree, Z, y, gamma)
        if features_per_split is not None:
            tree.allowed = feature_subsets(tree, features_per_split, rng)
    return trees


def _split(n: int, held_out: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The fitting rows and the held-out rows (``held_out`` of the ``n`` rows, drawn by ``rng``),
    each in the rows' order."""
    order = rng.permutation(n)
    n_out = int(round(held_out * n))
    if held_out > 0 and not (1 <= n_out < n):
        raise OptionError(f"--held-out {held_out}: keeps {n_out} of {n} rows out; leave at least one row on each side")
    return np.sort(order[n_out:]), np.sort(order[:n_out])


class _Score:
    """The figures of :class:`Epoch`: a classifier's accuracy (the first of equal largest
    probabilities is the label) or a regressor's mean squared error (``metric``)."""

    def __init__(self, regression: bool) -> None:
        self.regression = regression
        self.metric = "mse" if regression else "accuracy"

    def probabilistic(self, prediction: np.ndarray, y: np.ndarray | None) -> float:
        assert y is not None
        if self.regression:
            return float(np.mean((prediction - y) ** 2))
        return float(np.mean(np.argmax(prediction, axis=1) == y))

    def deterministic(self, ens: Ensemble, X: np.ndarray, y: np.ndarray | None) -> float:
        """The IR's figure, by the reference evaluator."""
        assert y is not None
        if self.regression:
            return float(np.mean((evaluate.predict(ens, X)["variable"] - y) ** 2))
        return float(np.mean(np.argmax(one_hot(evaluate.predict(ens, X)["label"], ens.classes[0]), axis=1) == y))

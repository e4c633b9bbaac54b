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
from tree2mat.learn.em import e_step, m_step, start_variance
from tree2mat.learn.hardening import harden
from tree2mat.learn.soft import SoftTree, feature_subsets, forest_proba, log_paths, split_objective, standardization, start_tree

#: The paper's Adam (section 3: alpha 0.001, beta1 0.9, beta2 0.999, epsilon 1e-8; batch 1000).
ADAM_BETAS = (0.9, 0.999)
ADAM_EPSILON = 1e-8
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
    epoch left them (standardized space, :class:`SoftTree`)."""

    ensemble: Ensemble
    initial: Ensemble
    history: tuple[Epoch, ...]
    initial_train: float
    initial_held_out: float | None
    rows: int
    held_out_rows: int
    metric: str = "accuracy"
    soft: tuple[SoftTree, ...] = ()

    @property
    def final(self) -> Epoch:
        return self.history[-1]


def learn(
    model: Any, X: Any, y: Any, *, epochs: int = EPOCHS, steepness: float = STEEPNESS, steepness_increase: float = STEEPNESS_INCREASE,
    oblique: bool = True, held_out: float = 0.0, seed: int = 0, learning_rate: float = LEARNING_RATE, batch_size: int = BATCH_SIZE,
    features_per_split: int | None = None, progress: Callable[[Epoch], None] | None = None,
) -> Learned:
    """Fine-tune ``model`` (a fitted scikit-learn DecisionTree, RandomForest or ExtraTrees
    Classifier or Regressor, an object or any file tree2mat reads) on the rows ``X`` and labels
    (a regressor's targets) ``y`` end to end (:mod:`tree2mat.learn`), ``epochs`` epochs from
    steepness ``steepness`` growing by ``steepness_increase`` per epoch, and harden it.
    ``held_out``: the fraction of the rows (drawn by ``seed``) kept out of the fit and only
    measured on; ``seed`` also shuffles the batches and draws the feature subsets.
    ``features_per_split``: each oblique split weighs only its own feature and that many minus
    one others, drawn per split (section 2.7; None: every feature). ``progress`` is called with
    each epoch's figures (epoch 0: the start)."""
    check_options(epochs, steepness, steepness_increase, held_out, learning_rate, batch_size, features_per_split, oblique)
    ens = frontends.load_model(model)[1]
    _check_model(ens)
    _check_subset(features_per_split, ens)
    X, yi = _rows(X, y, ens)
    rng = np.random.default_rng(seed)
    fit_rows, out_rows = _split(X.shape[0], held_out, rng)
    Xf, yf = X[fit_rows], yi[fit_rows]
    Xo, yo = (X[out_rows], yi[out_rows]) if out_rows.size else (None, None)
    mean, scale = standardization(Xf)
    Zf = (Xf - mean) / scale
    Zo = None if Xo is None else (Xo - mean) / scale
    gamma = float(steepness)
    trees = _start(ens, mean, scale, Zf, yf, gamma, features_per_split, rng)
    score = _Score(ens.task is Task.REGRESSION)
    began = time.perf_counter()

    def measure(epoch: int) -> Epoch:
        hard = harden(ens, trees, mean, scale, oblique, Zf, yf, gamma)
        return Epoch(
            epoch, gamma, score.probabilistic(forest_proba(trees, Zf, gamma), yf), score.deterministic(hard, Xf, yf),
            None if Zo is None else score.probabilistic(forest_proba(trees, Zo, gamma), yo),
            None if Xo is None else score.deterministic(hard, Xo, yo), time.perf_counter() - began,
        )

    history = [measure(0)]
    if progress is not None:
        progress(history[0])
    states = [_Adam(t.weight.shape) for t in trees]
    for epoch in range(1, epochs + 1):
        for tree, adam in zip(trees, states):
            if tree.n_internal:
                with np.errstate(over="ignore", invalid="ignore"):
                    _epoch(tree, adam, Zf, yf, gamma, oblique, learning_rate, batch_size, rng)
                _check_finite(tree, epoch, gamma, learning_rate)
        gamma += steepness_increase
        history.append(measure(epoch))
        if progress is not None:
            progress(history[-1])
    hard = harden(ens, trees, mean, scale, oblique, Zf, yf, gamma)
    return Learned(
        hard, ens, tuple(history), score.deterministic(ens, Xf, yf), None if Xo is None else score.deterministic(ens, Xo, yo),
        int(fit_rows.size), int(out_rows.size), score.metric, tuple(trees),
    )


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


def _check_finite(tree: SoftTree, epoch: int, gamma: float, rate: float) -> None:
    """An OptionError where an epoch took the tree's parameters past float64's range (the steps
    overflowed: they run with float errors ignored), naming the options that set the step."""
    if not (np.isfinite(tree.weight).all() and np.isfinite(tree.offset).all() and np.isfinite(tree.leaves).all()):
        raise OptionError(
            f"fine-tuning diverged in epoch {epoch} (split parameters past float64's range at steepness {gamma:g}, "
            f"--learning-rate {rate:g}): lower --learning-rate or --steepness"
        )


def _epoch(
    tree: SoftTree, adam: _Adam, Z: np.ndarray, y: np.ndarray, gamma: float, oblique: bool, rate: float, batch: int,
    rng: np.random.Generator,
) -> None:
    """One epoch of one tree: Adam on eq. 14 over shuffled batches (E-step per batch), then the
    leaves (eq. 13; Gaussian leaves: their means and variance) from every row's responsibilities."""
    order = rng.permutation(Z.shape[0])
    for start in range(0, Z.shape[0], batch):
        rows = order[start : start + batch]
        Zb = Z[rows]
        h = e_step(tree, log_paths(tree, Zb, gamma), y[rows])
        _, dW, dt = split_objective(tree, Zb, h, gamma)
        if not oblique:  # the node's own feature's weight stays 1: the threshold alone moves
            dW = np.zeros_like(dW)
        elif tree.allowed is not None:  # (Adam's moments stay 0 there: the weights stay exactly 0)
            dW = np.where(tree.allowed, dW, 0.0)
        step_w, step_t = adam.step(dW / rows.size, dt / rows.size, rate)
        tree.weight += step_w  # (ascent: eq. 14 is maximized)
        tree.offset += step_t
    m_step(tree, e_step(tree, log_paths(tree, Z, gamma), y), y)


class _Adam:
    """Adam (Kingma & Ba) for one tree's (weight, offset), ascending."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.m = [np.zeros(shape), np.zeros(shape[0])]
        self.v = [np.zeros(shape), np.zeros(shape[0])]
        self.t = 0

    def step(self, dW: np.ndarray, dt: np.ndarray, rate: float) -> tuple[np.ndarray, np.ndarray]:
        b1, b2 = ADAM_BETAS
        self.t += 1
        out = []
        for k, g in enumerate((dW, dt)):
            self.m[k] = b1 * self.m[k] + (1 - b1) * g
            self.v[k] = b2 * self.v[k] + (1 - b2) * g * g
            m_hat, v_hat = self.m[k] / (1 - b1**self.t), self.v[k] / (1 - b2**self.t)
            out.append(rate * m_hat / (np.sqrt(v_hat) + ADAM_EPSILON))
        return out[0], out[1]


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

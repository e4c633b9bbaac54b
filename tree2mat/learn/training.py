"""The fine-tuning of :mod:`tree2mat.learn`: EM per epoch and tree (Adam on the splits, the leaves
in closed form) with the steepness annealed, each epoch's accuracies measured on the hardened
model."""

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
from tree2mat.ir.core import Ensemble
from tree2mat.learn.checks import _check_model, _rows, check_options
from tree2mat.learn.hardening import harden
from tree2mat.learn.soft import SoftTree, forest_proba, leaf_update, log_paths, responsibilities, split_objective, standardization, start_tree

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
    """Accuracies after one epoch (epoch 0: the start) at steepness ``gamma``: the probabilistic
    model's (eq. 2, trees averaged) and the hardened deterministic one's (the IR, by the
    reference evaluator), on the fitting rows and the held-out rows (None without any)."""

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
    accuracies, and the accuracies of the start's deterministic model."""

    ensemble: Ensemble
    initial: Ensemble
    history: tuple[Epoch, ...]
    initial_train: float
    initial_held_out: float | None
    rows: int
    held_out_rows: int

    @property
    def final(self) -> Epoch:
        return self.history[-1]


def learn(
    model: Any, X: Any, y: Any, *, epochs: int = EPOCHS, steepness: float = STEEPNESS, steepness_increase: float = STEEPNESS_INCREASE,
    oblique: bool = True, held_out: float = 0.0, seed: int = 0, learning_rate: float = LEARNING_RATE, batch_size: int = BATCH_SIZE,
    progress: Callable[[Epoch], None] | None = None,
) -> Learned:
    """Fine-tune ``model`` (a fitted scikit-learn DecisionTreeClassifier, RandomForestClassifier
    or ExtraTreesClassifier, an object or any file tree2mat reads) on the rows ``X`` and labels
    ``y`` end to end (:mod:`tree2mat.learn`), ``epochs`` epochs from steepness ``steepness``
    growing by ``steepness_increase`` per epoch, and harden it. ``held_out``: the fraction of the
    rows (drawn by ``seed``) kept out of the fit and only measured on; ``seed`` also shuffles the
    batches. ``progress`` is called with each epoch's accuracies (epoch 0: the start)."""
    check_options(epochs, steepness, steepness_increase, held_out, learning_rate, batch_size)
    ens = frontends.load_model(model)[1]
    _check_model(ens)
    X, yi = _rows(X, y, ens)
    rng = np.random.default_rng(seed)
    fit_rows, out_rows = _split(X.shape[0], held_out, rng)
    Xf, yf = X[fit_rows], yi[fit_rows]
    Xo, yo = (X[out_rows], yi[out_rows]) if out_rows.size else (None, None)
    mean, scale = standardization(Xf)
    Zf = (Xf - mean) / scale
    Zo = None if Xo is None else (Xo - mean) / scale
    trees = [start_tree(t, ens, mean, scale) for t in ens.trees]
    C = len(ens.classes[0])
    gamma = float(steepness)
    began = time.perf_counter()

    def measure(epoch: int) -> Epoch:
        hard = harden(ens, trees, mean, scale, oblique, Zf, yf, gamma)
        return Epoch(
            epoch, gamma, _accuracy(forest_proba(trees, Zf, gamma), yf), _hits(_hard_labels(hard, Xf), yf),
            None if Zo is None else _accuracy(forest_proba(trees, Zo, gamma), yo),
            None if Xo is None else _hits(_hard_labels(hard, Xo), yo), time.perf_counter() - began,
        )

    history = [measure(0)]
    if progress is not None:
        progress(history[0])
    states = [_Adam(t.weight.shape) for t in trees]
    for epoch in range(1, epochs + 1):
        for tree, adam in zip(trees, states):
            if tree.n_internal:
                with np.errstate(over="ignore", invalid="ignore"):
                    _epoch(tree, adam, Zf, yf, C, gamma, oblique, learning_rate, batch_size, rng)
                _check_finite(tree, epoch, gamma, learning_rate)
        gamma += steepness_increase
        history.append(measure(epoch))
        if progress is not None:
            progress(history[-1])
    hard = harden(ens, trees, mean, scale, oblique, Zf, yf, gamma)
    return Learned(
        hard, ens, tuple(history), _hits(_hard_labels(ens, Xf), yf), None if Xo is None else _hits(_hard_labels(ens, Xo), yo),
        int(fit_rows.size), int(out_rows.size),
    )


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
    tree: SoftTree, adam: _Adam, Z: np.ndarray, y: np.ndarray, C: int, gamma: float, oblique: bool, rate: float, batch: int,
    rng: np.random.Generator,
) -> None:
    """One epoch of one tree: Adam on eq. 14 over shuffled batches (E-step per batch), then the
    leaves by eq. 13 from every row's responsibilities."""
    order = rng.permutation(Z.shape[0])
    for start in range(0, Z.shape[0], batch):
        rows = order[start : start + batch]
        Zb = Z[rows]
        h = responsibilities(log_paths(tree, Zb, gamma), tree.leaves, y[rows])
        _, dW, dt = split_objective(tree, Zb, h, gamma)
        if not oblique:  # the node's own feature's weight stays 1: the threshold alone moves
            dW = np.zeros_like(dW)
        step_w, step_t = adam.step(dW / rows.size, dt / rows.size, rate)
        tree.weight += step_w  # (ascent: eq. 14 is maximized)
        tree.offset += step_t
    h = responsibilities(log_paths(tree, Z, gamma), tree.leaves, y)
    tree.leaves = leaf_update(h, y, C, tree.leaves)


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


def _hard_labels(ens: Ensemble, X: np.ndarray) -> np.ndarray:
    """The deterministic model's labels as class indices, by the reference evaluator."""
    return np.argmax(one_hot(evaluate.predict(ens, X)["label"], ens.classes[0]), axis=1)


def _accuracy(proba: np.ndarray, y: np.ndarray | None) -> float:
    """The share of rows whose largest probability (the first of equal ones) is their class."""
    assert y is not None
    return float(np.mean(np.argmax(proba, axis=1) == y))


def _hits(labels: np.ndarray, y: np.ndarray | None) -> float:
    assert y is not None
    return float(np.mean(labels == y))

"""End-to-end fine-tuning of decision trees and forests (Hehn, Kooij, Hamprecht, "End-to-End
Learning of Decision Trees and Forests", section 2): a fitted scikit-learn classification tree or
forest is made probabilistic, its splits and leaves are tuned together by EM with the splits'
steepness annealed, and the result is hardened back into a deterministic tree2mat IR.

The probabilistic tree (section 2.1-2.2). Node i of a tree computes ``f_i(z) = w_i . z - t_i``
on the standardized row ``z = (x - mean) / scale`` (the fitting rows' mean and standard
deviation; a constant feature's scale is 1) and sends the row right with probability
``sigma(gamma f_i)`` — the paper's eq. 3 and 5 with ``beta_i = (w_i, -t_i)``; right, so that
``gamma -> infinity`` goes left iff ``w_i . z <= t_i``, the IR's test. A leaf's path probability
``mu_l`` is the product over its path (eq. 1), the tree's class probabilities
``sum_l pi_l mu_l`` (eq. 2), a forest's their mean (section 2.7).

Training (section 2.3), per epoch and tree: the E-step's responsibilities ``h[n, l]`` (eq. 10);
the split parameters by Adam steps on shuffled batches of eq. 14, ``sum_n sum_l h[n, l] log
mu_l(x_n)``, with ``h`` of the batch at the epoch's parameters; then the leaves in closed form
(eq. 13) from ``h`` of every fitting row; then ``gamma += steepness_increase``. The gradient of
eq. 14 is analytic (:func:`split_objective`): with ``R[n, i]`` and ``L[n, i]`` the responsibility
of the leaves right and left of node i, ``dJ/df[n, i] = gamma (R - (R + L) sigma(gamma f))``.

Start: the scikit-learn model's tree (its structure is kept: no node is added or removed), each
split ``x_f <= c`` as ``w_i = e_f``, ``t_i = (c - mean_f) / scale_f``, each leaf's class
distribution as ``pi_l`` (the paper starts from its own greedy tree; section 2.5).
``oblique=True`` tunes every weight of ``w_i`` (the splits become oblique);
``oblique=False`` keeps ``w_i = e_f`` and tunes ``t_i`` alone (axis-aligned).

Hardening (``gamma -> infinity``, :func:`harden`): the scaling is folded back in — the weights
``a = w / scale`` rounded to float32, the threshold from those rounded weights ``c = t + sum_f
a_f mean_f``, stored as the largest float32 at most ``c`` (a float32 sum ``s`` has ``s <= c``
exactly when ``s <=`` that float32) — into an IR whose source dtype is float32: oblique nodes test
a projection of the non-zero float32 weights (summed term by term in float32, as the IR defines);
axis-aligned nodes their feature. The leaves hold the tuned ``pi_l``, averaged over the trees
(MEAN: a random forest's aggregation; a leaf with no responsibility keeps its distribution). The
deterministic model is measured as hardened, by the IR's reference evaluator, never assumed to
equal the probabilistic one.

Decided where the paper is silent or differs: the rows must be finite (no NaN or +-inf: the model
was not fitted for missing values; the IR says ``accepts_nan=False``); a NaN projection (``inf -
inf`` on an infinite row) goes to the side with more training responsibility (``default_left``).
Classification only: regressors are refused (the paper's leaves are class distributions).
A forest's trees are tuned each on all fitting rows, independently (section 2.7), on every feature
(the paper samples a feature subset per split).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tree2mat import frontends
from tree2mat.data import one_hot
from tree2mat.errors import DataError, OptionError, UnsupportedModelError
from tree2mat.ir import evaluate
from tree2mat.ir.core import Aggregation, Ensemble, Link, Projections, Task, Tree
from tree2mat.ir.matrices import template_matrix
from tree2mat.ir.thresholds import largest_float32_at_most

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


# ------------------------------------------------------------------------------------ the model


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


# -------------------------------------------------------------------------------------- results


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


# ------------------------------------------------------------------------------------- learning


def learn(
    model: Any, X: Any, y: Any, *, epochs: int = EPOCHS, steepness: float = STEEPNESS, steepness_increase: float = STEEPNESS_INCREASE,
    oblique: bool = True, held_out: float = 0.0, seed: int = 0, learning_rate: float = LEARNING_RATE, batch_size: int = BATCH_SIZE,
    progress: Callable[[Epoch], None] | None = None,
) -> Learned:
    """Fine-tune ``model`` (a fitted scikit-learn DecisionTreeClassifier, RandomForestClassifier
    or ExtraTreesClassifier, an object or any file tree2mat reads) on the rows ``X`` and labels
    ``y`` end to end (module docstring), ``epochs`` epochs from steepness ``steepness`` growing by
    ``steepness_increase`` per epoch, and harden it. ``held_out``: the fraction of the rows (drawn
    by ``seed``) kept out of the fit and only measured on; ``seed`` also shuffles the batches.
    ``progress`` is called with each epoch's accuracies (epoch 0: the start)."""
    check_options(epochs, steepness, steepness_increase, held_out, learning_rate, batch_size)
    ens = frontends.load_model(model)[1]
    _check_model(ens)
    X, yi = _rows(X, y, ens)
    rng = np.random.default_rng(seed)
    order = rng.permutation(X.shape[0])
    n_out = int(round(held_out * X.shape[0]))
    if held_out > 0 and not (1 <= n_out < X.shape[0]):
        raise OptionError(f"--held-out {held_out}: keeps {n_out} of {X.shape[0]} rows out; leave at least one row on each side")
    fit_rows, out_rows = np.sort(order[n_out:]), np.sort(order[:n_out])
    Xf, yf = X[fit_rows], yi[fit_rows]
    Xo, yo = (X[out_rows], yi[out_rows]) if n_out else (None, None)
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
                if not (np.isfinite(tree.weight).all() and np.isfinite(tree.offset).all() and np.isfinite(tree.leaves).all()):
                    raise OptionError(
                        f"fine-tuning diverged in epoch {epoch} (split parameters past float64's range at steepness {gamma:g}, "
                        f"--learning-rate {learning_rate:g}): lower --learning-rate or --steepness"
                    )
        gamma += steepness_increase
        history.append(measure(epoch))
        if progress is not None:
            progress(history[-1])
    hard = harden(ens, trees, mean, scale, oblique, Zf, yf, gamma)
    return Learned(
        hard, ens, tuple(history), _hits(_hard_labels(ens, Xf), yf), None if Xo is None else _hits(_hard_labels(ens, Xo), yo),
        int(fit_rows.size), int(n_out),
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


# ------------------------------------------------------------------------------------ hardening


def harden(
    ens: Ensemble, trees: list[SoftTree], mean: np.ndarray, scale: np.ndarray, oblique: bool, Z: np.ndarray, y: np.ndarray,
    gamma: float,
) -> Ensemble:
    """The deterministic IR of the probabilistic trees (``gamma -> infinity``; module
    docstring): float32 weights and thresholds, the tuned leaves, MEAN over the trees;
    ``default_left`` where more of the responsibility of the rows ``Z`` (labels ``y``) went."""
    F = ens.n_features
    out: list[Tree] = []
    rows_f: list[np.ndarray] = []
    rows_w: list[np.ndarray] = []
    for soft, tree in zip(trees, ens.trees):
        I = soft.n_internal
        feature, threshold = tree.feature.copy(), np.zeros(I)
        if I:
            h = responsibilities(log_paths(soft, Z, gamma), soft.leaves, y)
            default_left = (h @ soft.left.astype(np.float64)).sum(axis=0) >= (h @ soft.right.astype(np.float64)).sum(axis=0)
        else:
            default_left = np.zeros(0, bool)
        for i in range(I):
            if not oblique:
                f = int(soft.feature[i])
                threshold[i] = float(largest_float32_at_most(np.array([mean[f] + scale[f] * soft.offset[i]]))[0])
                continue
            a = (soft.weight[i] / scale).astype(np.float32).astype(np.float64)
            used = np.flatnonzero(a)
            c = float(soft.offset[i] + np.dot(a, mean))
            if used.size == 0:  # no weight left: the test is 0 <= c, one side always (NaN too; but with
                # c < 0, x_f <= -inf still sends x_f = -inf left: the IR has no constant test)
                feature[i], threshold[i] = soft.feature[i], math.inf if c >= 0 else -math.inf
                default_left[i] = c >= 0
                continue
            feature[i] = F + len(rows_f)
            rows_f.append(used)
            rows_w.append(a[used])
            threshold[i] = float(largest_float32_at_most(np.array([c]))[0])
        out.append(dataclasses.replace(tree, feature=feature, threshold=threshold, default_left=np.asarray(default_left, bool),
                                       value=soft.leaves.copy(), zero_missing=np.zeros(0, bool)))
    projections = Projections.from_terms(list(zip(rows_f, rows_w))) if rows_f else None
    kind = "oblique" if oblique else "axis-aligned"
    return dataclasses.replace(
        ens, trees=tuple(out), source_dtype=np.dtype(np.float32), aggregation=Aggregation.MEAN, link=Link.IDENTITY,
        base_score=np.zeros(ens.n_outputs), output_index=np.full(len(out), -1, np.int64), projections=projections,
        accepts_nan=False, accepts_inf=True, finite_features=(), source=f"tree2mat learn ({kind}, from {ens.source})",
    ).validate()


# ---------------------------------------------------------------------------------------- checks


def check_options(epochs: Any, steepness: Any, increase: Any, held_out: Any, rate: Any, batch: Any) -> None:
    """An OptionError naming the first option out of its range."""
    def number(v: Any) -> bool:
        return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_)) and math.isfinite(v)

    if not (isinstance(epochs, (int, np.integer)) and not isinstance(epochs, bool) and epochs >= 0):
        raise OptionError(f"--epochs must be an integer >= 0, got {epochs!r}")
    if not (number(steepness) and steepness > 0):
        raise OptionError(f"--steepness must be a finite number > 0, got {steepness!r}")
    if not (number(increase) and increase >= 0):
        raise OptionError(f"--steepness-increase must be a finite number >= 0, got {increase!r}")
    if not (number(held_out) and 0 <= held_out < 1):
        raise OptionError(f"--held-out must be a fraction in [0, 1), got {held_out!r}")
    if not (number(rate) and rate > 0):
        raise OptionError(f"--learning-rate must be a finite number > 0, got {rate!r}")
    if not (isinstance(batch, (int, np.integer)) and not isinstance(batch, bool) and batch >= 1):
        raise OptionError(f"--batch-size must be an integer >= 1, got {batch!r}")


def _check_model(ens: Ensemble) -> None:
    if ens.task is not Task.CLASSIFICATION:
        raise UnsupportedModelError(
            f"{ens.source}: tree2mat learn fine-tunes classifiers (the paper's leaves are class distributions); "
            f"this model's task is {ens.task.value}"
        )
    if not (len(ens.classes) == 1 and ens.n_outputs == len(ens.classes[0]) and (ens.output_index == -1).all()
            and ens.link is Link.IDENTITY and ens.aggregation in (Aggregation.MEAN, Aggregation.SUM) and not ens.base_score.any()):
        raise UnsupportedModelError(
            f"{ens.source}: tree2mat learn takes a scikit-learn classification tree or forest of one target (DecisionTreeClassifier, "
            "RandomForestClassifier, ExtraTreesClassifier): leaves of class distributions, averaged; boosted models add margins"
        )
    if ens.aggregation is Aggregation.SUM and ens.n_trees != 1:
        raise UnsupportedModelError(f"{ens.source}: a sum of trees is a boosted model, not a tree or forest of class distributions")
    if ens.is_oblique or any(t.has_categorical or t.is_linear or t.zero_missing.any() for t in ens.trees):
        raise UnsupportedModelError(f"{ens.source}: tree2mat learn starts from axis-aligned numeric splits (no categorical, oblique or linear nodes)")
    if ens.n_features < 1:
        raise UnsupportedModelError(f"{ens.source}: the model has no features")


def _rows(X: Any, y: Any, ens: Ensemble) -> tuple[np.ndarray, np.ndarray]:
    """The rows as float64 [N, F] and the labels as class indices [N], checked."""
    X = np.asarray(X)
    if X.ndim != 2 or X.shape[1] != ens.n_features or X.shape[0] < 2:
        raise DataError(f"X has shape {X.shape}; the model takes [N, {ens.n_features}] with N >= 2")
    if X.dtype.kind not in "biuf":
        raise DataError("X must hold numbers")
    X = X.astype(np.float64)
    if not np.isfinite(X).all():
        raise DataError("X holds NaN or +-inf: tree2mat learn fits finite rows (no missing values)")
    y = np.asarray(y).reshape(-1)
    if y.shape[0] != X.shape[0]:
        raise DataError(f"y has {y.shape[0]} labels for {X.shape[0]} rows")
    classes = ens.classes[0]
    hot = one_hot(y, classes)
    unknown = ~hot.any(axis=1)
    if unknown.any():
        raise DataError(f"y holds {str(y[np.flatnonzero(unknown)[0]])!r:.40}, which is none of the model's classes ({', '.join(map(str, classes[:10]))})")
    return X, np.argmax(hot, axis=1)


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

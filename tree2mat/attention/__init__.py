"""Attention-based random forests (ABRF-1, -2, -3: Utkin & Konstantinov, "Attention-based Random
Forest and Contamination Model", sections 3-5): a forest whose trees are weighted per row.

For tree k a row x falls into one leaf. ``A_k(x)`` is the mean of the training rows (the rows
given to :func:`fit`) that fall into that leaf (eq. 5), ``B_k(x)`` the leaf's value, the tree's
own prediction (eq. 6). The prediction is ``sum_k alpha_k(x) B_k(x)`` with (eq. 14, 16)

    alpha_k(x) = (1 - epsilon) softmax_k(-||x - A_k(x)||^2 / (2 tau)) + epsilon w_k,

``w`` on the unit simplex, fitted to the training rows by the quadratic program (15) (L2 loss)
or the linear program (20)-(22) (L1 loss). The paper prints the softmax's argument without the
minus sign; its text (nearer leaves weigh more) needs it, and so it is here. ABRF-2 (eq. 23)
replaces tau and w by tree scales v (simplex) and feature weights z: softmax_k(-||(x - A_k(x)) o
z||^2 v_k / 2); ABRF-3 (eq. 24) mixes it with epsilon w; both by gradients. A classifier's
``B_k(x)`` is the leaf's class-probability vector and its targets one-hot (section 5, eq. 30).

Decided where the paper is silent:
- A missing coordinate (NaN, in the row or in a leaf's mean) adds nothing to the distance: the
  sum runs over the coordinates both hold. The leaf means are means of the values present.
- A leaf no training row reached has no mean: its tree takes no part in the softmax for the rows
  that reach that leaf (the others share it). So does a tree whose squared distance to the row
  is beyond float32's largest number, :data:`FAR` (a coordinate at +-inf, or some 1e19 from the
  mean: where float32, which the graph computes in, overflows). Where no tree of a row takes
  part, the softmax weighs all trees alike. The contamination part ``epsilon w`` is unaffected.

This module is the reference: the model in numpy, fitted with Clarabel (the L2 programs), HiGHS
(the L1 ones) and scipy's L-BFGS-B (ABRF-2/3). Supported: scikit-learn's
random-forest and extra-trees regressors and classifiers (forests that average one output or one
target's class probabilities). Its ONNX graph: :mod:`tree2mat.attention.graph`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from tree2mat import frontends
from tree2mat._files import atomic_write
from tree2mat.data import one_hot
from tree2mat.errors import DataError, ModelFileError, OptionError, UnsupportedModelError, require
from tree2mat.frontends.loading import ATTENTION_KEY, MALFORMED, AttentionDocument
from tree2mat.ir import evaluate
from tree2mat.ir.core import Aggregation, Ensemble, Link, Task
from tree2mat.ir.io import ensemble_from_dict, ensemble_to_dict

LOSSES = ("l2", "l1")
#: ABRF-1 (the contamination model, w by a quadratic or linear program), ABRF-2 (a softmax with
#: trainable tree scales v and feature weights z, by gradients), ABRF-3 (both).
VARIANTS = (1, 2, 3)
#: A squared distance beyond this (float32's largest number) is infinite: the tree takes no part
#: in the row's softmax.
FAR = float(np.finfo(np.float32).max)
#: The saved file's format version (its key ``tree2mat_attention``; docs/attention.md).
FORMAT_VERSION = 1


@dataclass(frozen=True, eq=False)
class AttentionForest:
    """An ABRF model: the forest's IR, the training rows' leaf means, and the attention's
    parameters (ABRF-1: ``epsilon``, ``tau``, ``weights``; ABRF-2/3: ``tree_scales`` and
    ``feature_weights`` in place of ``tau``, see :func:`fit`)."""

    ensemble: Ensemble
    #: Per tree, the mean training row of each leaf [L, F] (NaN where no training row holds a
    #: value, all NaN for a leaf no training row reached).
    leaf_means: tuple[np.ndarray, ...]
    #: Per tree, the training rows in each leaf [L].
    leaf_counts: tuple[np.ndarray, ...]
    epsilon: float
    tau: float
    #: w, on the unit simplex [T].
    weights: np.ndarray
    loss: str = "l2"
    #: 1, 2 or 3 (ABRF-1: eq. 14, 16; ABRF-2: eq. 23; ABRF-3: eq. 24).
    variant: int = 1
    #: ABRF-2/3: v, on the unit simplex [T]: tree k's softmax argument is ``-d_k v_k / 2``.
    tree_scales: np.ndarray | None = None
    #: ABRF-2/3: z >= 0 [F]: the distance is ``||(x - A_k(x)) o z||^2``.
    feature_weights: np.ndarray | None = None

    @property
    def n_trees(self) -> int:
        return self.ensemble.n_trees

    @property
    def is_classifier(self) -> bool:
        return self.ensemble.task is Task.CLASSIFICATION

    @property
    def classes(self) -> np.ndarray | None:
        """A classifier's class labels [C] (None for a regressor)."""
        return self.ensemble.classes[0] if self.is_classifier else None

    def tree_values(self, X: np.ndarray, leaves: np.ndarray | None = None) -> np.ndarray:
        """B: each tree's prediction for each row, [N, T, K] (K = 1 for a regressor; a
        classifier's K class probabilities)."""
        leaves = evaluate.apply(self.ensemble, X) if leaves is None else leaves
        return np.stack([t.value[leaves[:, k]] for k, t in enumerate(self.ensemble.trees)], axis=1)

    @property
    def scale(self) -> float | np.ndarray:
        """The softmax's scale: ``1 / (2 tau)`` (ABRF-1), or per tree ``v / 2`` [T] (ABRF-2/3)."""
        return 1.0 / (2.0 * self.tau) if self.tree_scales is None else self.tree_scales / 2.0

    def softmax_weights(self, X: np.ndarray, leaves: np.ndarray | None = None) -> np.ndarray:
        """D: the softmax over trees of ``-||x - A_k(x)||^2 / (2 tau)`` (ABRF-2/3:
        ``-||(x - A_k(x)) o z||^2 v_k / 2``), [N, T] (see the module docstring for missing
        values and leaves without a mean)."""
        X = np.asarray(X, np.float64)
        leaves = evaluate.apply(self.ensemble, X) if leaves is None else leaves
        return _softmax_weights(X, leaves, self.leaf_means, self.leaf_counts, self.scale, self.feature_weights)

    def nearest(self, X: np.ndarray, leaves: np.ndarray | None = None) -> np.ndarray:
        """The softmax's smallest argument per row over the trees that take part (0 where none
        does), [N]: ``min_k ||x - A_k(x)||^2 / (2 tau)`` (ABRF-2/3: with z and v), how far the
        row is from every leaf mean it reaches (a float32 graph's weights round in proportion)."""
        X = np.asarray(X, np.float64)
        leaves = evaluate.apply(self.ensemble, X) if leaves is None else leaves
        d, part = _distances(X, leaves, self.leaf_means, self.leaf_counts, self.feature_weights)
        s = d * self.scale
        return np.where(part.any(axis=1), np.where(part, s, np.inf).min(axis=1), 0.0)

    def attention(self, X: np.ndarray, leaves: np.ndarray | None = None) -> np.ndarray:
        """alpha: each tree's weight for each row, [N, T]; every row's weights sum to 1."""
        return (1.0 - self.epsilon) * self.softmax_weights(X, leaves) + self.epsilon * self.weights[None, :]

    def outputs(self, X: np.ndarray, leaves: np.ndarray | None = None) -> np.ndarray:
        """``sum_k alpha_k(x) B_k(x)``, [N, K] (``leaves``: the rows' leaf ids [N, T], if known)."""
        X = _rows(X, self.ensemble.n_features)
        leaves = evaluate.apply(self.ensemble, X) if leaves is None else leaves
        return np.einsum("nt,ntk->nk", self.attention(X, leaves), self.tree_values(X, leaves))

    def predict(self, X: np.ndarray, leaves: np.ndarray | None = None) -> np.ndarray:
        """The ABRF's prediction, [N]: a regressor's value; a classifier's label (the class of
        the largest probability, the first of equal ones, as scikit-learn's ``argmax``)."""
        out = self.outputs(X, leaves)
        if self.is_classifier:
            return self.ensemble.classes[0][np.argmax(out, axis=1)]
        return out[:, 0]

    def predict_proba(self, X: np.ndarray, leaves: np.ndarray | None = None) -> np.ndarray:
        """A classifier's class probabilities, [N, C]."""
        if not self.is_classifier:
            raise UnsupportedModelError("predict_proba: an attention forest over a regressor has no class probabilities")
        return self.outputs(X, leaves)

    def get_params(self) -> dict[str, Any]:
        return {"variant": self.variant, "epsilon": self.epsilon, "tau": self.tau, "loss": self.loss}

    def to_dict(self) -> dict[str, Any]:
        """The saved file's document (JSON; a missing mean is null)."""
        return {
            ATTENTION_KEY: FORMAT_VERSION,
            "variant": self.variant,
            "loss": self.loss,
            "epsilon": self.epsilon,
            "tau": self.tau,
            "weights": self.weights.tolist(),
            "tree_scales": None if self.tree_scales is None else self.tree_scales.tolist(),
            "feature_weights": None if self.feature_weights is None else self.feature_weights.tolist(),
            "leaf_means": [[[None if math.isnan(v) else v for v in row] for row in m.tolist()] for m in self.leaf_means],
            "leaf_counts": [c.tolist() for c in self.leaf_counts],
            "forest": ensemble_to_dict(self.ensemble),
        }

    def save(self, path: str | Path) -> int:
        """Write the model to ``path`` (JSON, atomically); the bytes written."""
        return atomic_write(path, (json.dumps(self.to_dict(), separators=(",", ":")) + "\n").encode())


def load(path: str | Path) -> AttentionForest:
    """A model :meth:`AttentionForest.save` wrote (JSON: no pickle, safe to read from anyone);
    a ModelFileError names what is wrong with any other file."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ModelFileError(f"{path}: not a readable attention forest file: {exc}") from exc
    return _checked_document(doc, str(path))


def as_forest(obj: Any) -> AttentionForest | None:
    """``obj`` as an attention forest: itself, or the model of an attention forest's file that
    tree2mat's loader read (:class:`~tree2mat.frontends.loading.AttentionDocument`); None for
    anything else."""
    if isinstance(obj, AttentionForest):
        return obj
    if isinstance(obj, AttentionDocument):
        return _checked_document(obj.doc, obj.name)
    return None


def _checked_document(doc: Any, name: str) -> AttentionForest:
    try:
        return from_dict(doc, name)
    except MALFORMED as exc:
        raise ModelFileError(f"{name}: ill-formed attention forest file: {exc}") from exc


def from_dict(doc: Any, name: str = "attention forest") -> AttentionForest:
    """The model of a document :meth:`AttentionForest.to_dict` wrote, every field checked."""
    if not isinstance(doc, dict) or doc.get(ATTENTION_KEY) != FORMAT_VERSION:
        raise ModelFileError(f"{name}: not a tree2mat attention forest of format {FORMAT_VERSION} (key 'tree2mat_attention')")
    variant = doc.get("variant")
    if variant not in VARIANTS:
        raise UnsupportedModelError(f"{name}: variant {variant!r:.20} is none of ABRF-{', ABRF-'.join(map(str, VARIANTS))}")
    ens = ensemble_from_dict(doc["forest"], name=name)
    _check_forest(ens)
    T, F = ens.n_trees, ens.n_features
    epsilon, tau, loss = doc["epsilon"], doc["tau"], doc["loss"]
    if not (isinstance(epsilon, (int, float)) and 0.0 <= epsilon <= 1.0):
        raise ValueError(f"epsilon must be a number in [0, 1], got {epsilon!r:.40}")
    if not (isinstance(tau, (int, float)) and math.isfinite(tau) and tau > 0):
        raise ValueError(f"tau must be a finite number > 0, got {tau!r:.40}")
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {', '.join(LOSSES)}, got {loss!r:.40}")
    weights = _numbers(doc["weights"], "weights", (T,))
    if (weights < 0).any() or abs(weights.sum() - 1.0) > 1e-9:
        raise ValueError("weights must be >= 0 and sum to 1")
    means, counts = doc["leaf_means"], doc["leaf_counts"]
    if not (isinstance(means, list) and isinstance(counts, list) and len(means) == T and len(counts) == T):
        raise ValueError(f"leaf_means and leaf_counts must hold one entry per tree ({T})")
    leaf_means = tuple(_numbers(m, f"leaf_means[{k}]", (t.n_leaves, F), missing=True) for k, (m, t) in enumerate(zip(means, ens.trees)))
    leaf_counts = tuple(_counts(c, f"leaf_counts[{k}]", t.n_leaves) for k, (c, t) in enumerate(zip(counts, ens.trees)))
    scales = features = None
    if variant == 1 and (doc["tree_scales"] is not None or doc["feature_weights"] is not None):
        raise ValueError("ABRF-1 has no tree_scales or feature_weights (null)")
    if variant != 1:
        scales, features = _numbers(doc["tree_scales"], "tree_scales", (T,)), _numbers(doc["feature_weights"], "feature_weights", (F,))
        if (scales < 0).any() or abs(scales.sum() - 1.0) > 1e-9 or (features < 0).any():
            raise ValueError("tree_scales must be >= 0 and sum to 1, feature_weights >= 0")
        if variant == 2 and epsilon != 0:
            raise ValueError("ABRF-2 has no contamination: epsilon must be 0")
    return AttentionForest(ens, leaf_means, leaf_counts, float(epsilon), float(tau), weights, loss, variant, scales, features)


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
    ``z`` (and for ABRF-3 ``w``), by L-BFGS with analytic gradients (:func:`_fit_gradient`),
    from ABRF-1's softmax at ``tau`` (chosen as for ABRF-1 when ``"auto"``; ABRF-2 with
    ``epsilon`` 0). ABRF-3's ``epsilon`` is ABRF-1's (chosen as for ABRF-1 when ``"auto"``):
    cross-validating the gradient fit at every grid point would take the fit's time 25 x
    ``folds`` times."""
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


def _weights(epsilon: float, B: np.ndarray, D: np.ndarray, y: np.ndarray, loss: str) -> np.ndarray:
    """w for the rows' tree values ``B`` [N, T, K], softmax weights ``D`` [N, T] and targets
    ``y`` [N, K] (uniform where ``epsilon`` is 0: w plays no part). A classifier's K class
    probabilities are K rows of the program each (the paper's eq. 30: one-hot targets)."""
    if epsilon == 0.0:
        return np.full(B.shape[1], 1.0 / B.shape[1])
    residual = y - (1.0 - epsilon) * np.einsum("nt,ntk->nk", D, B)
    solve = _least_squares_on_simplex if loss == "l2" else _least_absolute_on_simplex
    return solve(epsilon * B.transpose(0, 2, 1).reshape(-1, B.shape[1]), residual.reshape(-1))


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


def leaf_means(ens: Ensemble, X: np.ndarray, leaves: np.ndarray | None = None) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    """Per tree, the mean of the rows of ``X`` in each leaf [L, F] (over the values present; NaN
    where there are none) and the rows in each leaf [L]."""
    X = np.asarray(X, np.float64)
    leaves = evaluate.apply(ens, X) if leaves is None else leaves
    present = ~np.isnan(X)
    values = np.where(present, X, 0.0)
    means, counts = [], []
    for k, tree in enumerate(ens.trees):
        L = tree.n_leaves
        sums = np.zeros((L, X.shape[1]))
        seen = np.zeros((L, X.shape[1]))
        np.add.at(sums, leaves[:, k], values)
        np.add.at(seen, leaves[:, k], present)
        with np.errstate(invalid="ignore", divide="ignore"):
            means.append(np.where(seen > 0, sums / np.maximum(seen, 1), np.nan))
        counts.append(np.bincount(leaves[:, k], minlength=L))
    return tuple(means), tuple(counts)


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


# ---------------------------------------------------------------------------------------- inside


def _numbers(value: Any, what: str, shape: tuple[int, ...], missing: bool = False) -> np.ndarray:
    """A float array of ``shape`` from nested lists of numbers (and nulls, read as NaN, where
    ``missing``)."""
    def walk(v: Any, depth: int) -> Any:
        if depth == len(shape):
            if v is None and missing:
                return math.nan
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"{what} must hold finite numbers" + (" or null" if missing else ""))
            return float(v)
        if not isinstance(v, list) or len(v) != shape[depth]:
            raise ValueError(f"{what} must have the shape {list(shape)}")
        return [walk(x, depth + 1) for x in v]

    return np.asarray(walk(value, 0), np.float64).reshape(shape)


def _counts(value: Any, what: str, n: int) -> np.ndarray:
    if not (isinstance(value, list) and len(value) == n and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)):
        raise ValueError(f"{what} must be {n} counts (integers >= 0)")
    return np.asarray(value, np.int64)


def _check_forest(ens: Ensemble) -> None:
    averaged = ens.aggregation is Aggregation.MEAN and ens.link is Link.IDENTITY
    regressor = ens.task is Task.REGRESSION and ens.n_outputs == 1
    classifier = ens.task is Task.CLASSIFICATION and len(ens.classes) == 1 and ens.n_outputs == len(ens.classes[0])
    if not (averaged and (regressor or classifier)):
        raise UnsupportedModelError(
            f"{ens.source}: attention weighs the trees of a forest that averages one output or one target's class "
            "probabilities (scikit-learn's RandomForestRegressor/Classifier, ExtraTreesRegressor/Classifier); "
            "boosted models add trees, which is not this model"
        )
    if any(t.is_linear for t in ens.trees):
        raise UnsupportedModelError(f"{ens.source}: trees with linear leaves are not supported by attention")


def _rows(X: Any, n_features: int) -> np.ndarray:
    X = np.asarray(X, np.float64)
    if X.ndim != 2 or X.shape[1] != n_features or X.shape[0] == 0:
        raise DataError(f"X has shape {X.shape}; the forest takes [N, {n_features}] with N >= 1")
    return X


def _distances(
    X: np.ndarray, leaves: np.ndarray, means: tuple[np.ndarray, ...], counts: tuple[np.ndarray, ...], z: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``||(x - A_k(x)) o z||^2`` (z = 1 unless given) over the coordinates both hold [N, T], and
    whether tree k takes part in the row's softmax (its leaf has a mean, the distance is within
    :data:`FAR`) [N, T]."""
    n, T = leaves.shape
    d = np.empty((n, T))
    part = np.empty((n, T), bool)
    for k in range(T):
        diff = X - means[k][leaves[:, k]]  # [N, F]
        with np.errstate(over="ignore", invalid="ignore"):
            if z is not None:
                diff = diff * z
            d[:, k] = np.nansum(diff * diff, axis=1)
        part[:, k] = (counts[k][leaves[:, k]] > 0) & (d[:, k] <= FAR)
    return d, part


def _softmax_weights(
    X: np.ndarray, leaves: np.ndarray, means: tuple[np.ndarray, ...], counts: tuple[np.ndarray, ...], scale: float | np.ndarray,
    z: np.ndarray | None = None,
) -> np.ndarray:
    """The softmax over the trees that take part of ``-d_k scale_k``; ``scale``: ``1 / (2 tau)``,
    applied after the nearest is subtracted (no overflow however small tau), or per tree [T]
    (``v / 2 <= 1/2``, applied first)."""
    d, part = _distances(X, leaves, means, counts, z)
    per_tree = np.ndim(scale) == 1
    s = d * scale if per_tree else d
    nearest = np.where(part, s, FAR).min(axis=1, keepdims=True)
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.where(part, np.exp(-(np.where(part, s, nearest) - nearest) * (1.0 if per_tree else scale)), 0.0)
    e[~part.any(axis=1)] = 1.0  # no tree of the row takes part: all alike
    return e / e.sum(axis=1, keepdims=True)


def _least_squares_on_simplex(M: np.ndarray, r: np.ndarray) -> np.ndarray:
    """argmin ||r - M w||^2 over the unit simplex: the QP of eq. (15), ``1/2 w' (2 M'M) w -
    (2 M'r)' w`` with ``w >= 0``, ``sum(w) = 1``, by Clarabel's interior-point solver (the
    attention extra). HiGHS's active-set QP solver (1.16) did not end on some of these programs
    (rank-deficient M'M: more trees than rows; one of Friedman 3's in benchmarks/abrf_paper.py,
    which Clarabel solves in 9 ms); benchmarks/abrf_solvers.py times Clarabel against scipy's
    SLSQP."""
    clarabel = require("clarabel", "solving the L2 weights (Clarabel's QP solver)")
    from scipy import sparse

    T = M.shape[1]
    P = sparse.triu(sparse.csc_matrix(2.0 * (M.T @ M))).tocsc()
    A = sparse.vstack([sparse.csc_matrix(np.ones((1, T))), -sparse.identity(T)]).tocsc()  # sum(w) = 1; -w <= 0
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = QP_TOLERANCE
    solution = clarabel.DefaultSolver(
        P, -2.0 * (M.T @ r), A, np.concatenate([[1.0], np.zeros(T)]), [clarabel.ZeroConeT(1), clarabel.NonnegativeConeT(T)], settings,
    ).solve()
    if str(solution.status) not in ("Solved", "AlmostSolved"):
        raise UnsupportedModelError(f"the L2 weights' quadratic program did not solve: {solution.status}")
    return _on_simplex(np.asarray(solution.x))


#: Clarabel's gap and feasibility tolerances for the L2 weights.
QP_TOLERANCE = 1e-10


def _least_absolute_on_simplex(M: np.ndarray, r: np.ndarray) -> np.ndarray:
    """argmin sum |r - M w| over the unit simplex: the LP of eq. (20)-(22) in (w, G), by HiGHS."""
    from scipy import sparse
    from scipy.optimize import linprog

    n, T = M.shape
    cost = np.concatenate([np.zeros(T), np.ones(n)])
    eye = sparse.identity(n, format="csr")
    # G >= r - M w  ->  -M w - G <= -r ;  G >= M w - r  ->  M w - G <= r
    A_ub = sparse.vstack([sparse.hstack([sparse.csr_matrix(-M), -eye]), sparse.hstack([sparse.csr_matrix(M), -eye])], format="csr")
    b_ub = np.concatenate([-r, r])
    A_eq = np.concatenate([np.ones(T), np.zeros(n)])[None, :]
    res = linprog(cost, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=[1.0], bounds=[(0, None)] * (T + n), method="highs")
    if res.status != 0:
        raise UnsupportedModelError(f"the L1 weights' linear program did not solve: {res.message}")
    return _on_simplex(res.x[:T])


def _on_simplex(w: np.ndarray) -> np.ndarray:
    """``w`` with a solver's round-off removed: no negative entry, a sum of 1."""
    w = np.clip(np.asarray(w, np.float64), 0.0, None)
    return w / w.sum()

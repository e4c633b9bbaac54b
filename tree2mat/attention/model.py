"""The attention forest in numpy (the reference: :mod:`tree2mat.attention` says what it computes):
the model, the leaf means it is fitted to, and the softmax over its trees."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tree2mat._files import atomic_write
from tree2mat.errors import DataError, UnsupportedModelError
from tree2mat.frontends.loading import ATTENTION_KEY
from tree2mat.ir import evaluate
from tree2mat.ir.core import Aggregation, Ensemble, Link, Task
from tree2mat.ir.io import ensemble_to_dict

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
    ``feature_weights`` in place of ``tau``, see :func:`~tree2mat.attention.fitting.fit`)."""

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
        ``-||(x - A_k(x)) o z||^2 v_k / 2``), [N, T] (see :mod:`tree2mat.attention` for missing
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
        """alpha, the per-row tree weights: how much each tree counts in each row's prediction,
        [N, T] (trees in the forest's order), ``(1 - epsilon) softmax + epsilon w`` (ABRF-2:
        the softmax alone); each row's weights are >= 0 and sum to 1. What :meth:`predict` and
        :meth:`predict_proba` weigh the trees by, and what a graph converted with
        ``tree_weights=True`` outputs as ``tree_weights``."""
        X = _rows(X, self.ensemble.n_features)
        return (1.0 - self.epsilon) * self.softmax_weights(X, leaves) + self.epsilon * self.weights[None, :]

    def outputs(self, X: np.ndarray, leaves: np.ndarray | None = None) -> np.ndarray:
        """``sum_k alpha_k(x) B_k(x)``, [N, K] (``leaves``: the rows' leaf ids [N, T], if known;
        alpha: :meth:`attention`)."""
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

"""What :func:`tree2mat.learn.learn` takes: its options' ranges, the model (a scikit-learn
classification or regression tree or forest) and the rows and their labels or targets."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tree2mat.data import one_hot
from tree2mat.errors import DataError, OptionError, UnsupportedModelError
from tree2mat.ir.core import Aggregation, Ensemble, Link, Task


def check_options(
    epochs: Any, steepness: Any, increase: Any, held_out: Any, rate: Any, batch: Any, features_per_split: Any = None, oblique: bool = True,
) -> None:
    """An OptionError naming the first option out of its range (``features_per_split``: also
    one given with axis-aligned splits, whose single weight it cannot restrict)."""
    def number(v: Any) -> bool:
        return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_)) and math.isfinite(v)

    def integer(v: Any) -> bool:
        return isinstance(v, (int, np.integer)) and not isinstance(v, bool)

    if not (integer(epochs) and epochs >= 0):
        raise OptionError(f"--epochs must be an integer >= 0, got {epochs!r}")
    if not (number(steepness) and steepness > 0):
        raise OptionError(f"--steepness must be a finite number > 0, got {steepness!r}")
    if not (number(increase) and increase >= 0):
        raise OptionError(f"--steepness-increase must be a finite number >= 0, got {increase!r}")
    if not (number(held_out) and 0 <= held_out < 1):
        raise OptionError(f"--held-out must be a fraction in [0, 1), got {held_out!r}")
    if not (number(rate) and rate > 0):
        raise OptionError(f"--learning-rate must be a finite number > 0, got {rate!r}")
    if not (integer(batch) and batch >= 1):
        raise OptionError(f"--batch-size must be an integer >= 1, got {batch!r}")
    if features_per_split is None:
        return
    if not (integer(features_per_split) and features_per_split >= 1):
        raise OptionError(f"--features-per-split must be an integer >= 1, got {features_per_split!r}")
    if not oblique:
        raise OptionError("--features-per-split restricts oblique splits' weights; an axis-aligned split weighs its own feature alone")


def _check_subset(features_per_split: int | None, ens: Ensemble) -> None:
    if features_per_split is not None and features_per_split > ens.n_features:
        raise OptionError(f"--features-per-split {features_per_split}: the model has {ens.n_features} features")


def _check_model(ens: Ensemble) -> None:
    if ens.task not in (Task.CLASSIFICATION, Task.REGRESSION):
        raise UnsupportedModelError(
            f"{ens.source}: tree2mat learn fine-tunes classifiers and regressors (leaves of class distributions or of "
            f"target values); this model's task is {ens.task.value}"
        )
    one_target = len(ens.classes) == 1 and ens.n_outputs == len(ens.classes[0]) if ens.task is Task.CLASSIFICATION else not ens.classes
    if not (one_target and (ens.output_index == -1).all() and ens.link is Link.IDENTITY and ens.aggregation in (Aggregation.MEAN, Aggregation.SUM)
            and not ens.base_score.any()):
        raise UnsupportedModelError(
            f"{ens.source}: tree2mat learn takes a scikit-learn tree or forest (DecisionTree, RandomForest or ExtraTrees, "
            "Classifier of one target or Regressor): leaves of class distributions or target values, averaged; boosted models add margins"
        )
    if ens.aggregation is Aggregation.SUM and ens.n_trees != 1:
        raise UnsupportedModelError(f"{ens.source}: a sum of trees is a boosted model, not a tree or forest of averaged leaves")
    if ens.is_oblique or any(t.has_categorical or t.is_linear or t.zero_missing.any() for t in ens.trees):
        raise UnsupportedModelError(f"{ens.source}: tree2mat learn starts from axis-aligned numeric splits (no categorical, oblique or linear nodes)")
    if ens.n_features < 1:
        raise UnsupportedModelError(f"{ens.source}: the model has no features")


def _rows(X: Any, y: Any, ens: Ensemble) -> tuple[np.ndarray, np.ndarray]:
    """The rows as float64 [N, F] and the labels as class indices [N] (a regressor's targets as
    float64 [N, K]), checked."""
    X = np.asarray(X)
    if X.ndim != 2 or X.shape[1] != ens.n_features or X.shape[0] < 2:
        raise DataError(f"X has shape {X.shape}; the model takes [N, {ens.n_features}] with N >= 2")
    if X.dtype.kind not in "biuf":
        raise DataError("X must hold numbers")
    X = X.astype(np.float64)
    if not np.isfinite(X).all():
        raise DataError("X holds NaN or +-inf: tree2mat learn fits finite rows (no missing values)")
    if ens.task is Task.REGRESSION:
        return X, _targets(y, X.shape[0], ens.n_outputs)
    y = np.asarray(y).reshape(-1)
    if y.shape[0] != X.shape[0]:
        raise DataError(f"y has {y.shape[0]} labels for {X.shape[0]} rows")
    classes = ens.classes[0]
    hot = one_hot(y, classes)
    unknown = ~hot.any(axis=1)
    if unknown.any():
        raise DataError(f"y holds {str(y[np.flatnonzero(unknown)[0]])!r:.40}, which is none of the model's classes ({', '.join(map(str, classes[:10]))})")
    return X, np.argmax(hot, axis=1)


def _targets(y: Any, n: int, k: int) -> np.ndarray:
    """A regressor's targets as float64 [N, K], checked (K = 1 takes [N] too)."""
    y = np.asarray(y)
    if y.shape != (n, k) and not (k == 1 and y.shape == (n,)):
        raise DataError(f"y has shape {y.shape}; the model's {n} rows take targets of shape [{n}, {k}]" + (f" or [{n}]" if k == 1 else ""))
    y = y.reshape(n, k)
    if y.dtype.kind not in "biuf":
        raise DataError(f"y must hold numbers (the model is a regressor), got {y.dtype}")
    y = y.astype(np.float64)
    if not np.isfinite(y).all():
        raise DataError("y holds NaN or +-inf: a regressor's targets must be finite")
    return y

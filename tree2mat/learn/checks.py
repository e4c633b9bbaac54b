"""What :func:`tree2mat.learn.learn` takes: its options' ranges, the model (a scikit-learn
classification tree or forest) and the rows and labels."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tree2mat.data import one_hot
from tree2mat.errors import DataError, OptionError, UnsupportedModelError
from tree2mat.ir.core import Aggregation, Ensemble, Link, Task


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

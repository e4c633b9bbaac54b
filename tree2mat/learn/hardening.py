"""Hardening the probabilistic trees of :mod:`tree2mat.learn` (``gamma -> infinity``) into a
deterministic IR of float32 weights and thresholds."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from tree2mat.ir.core import Aggregation, Ensemble, Link, Projections, Tree
from tree2mat.ir.thresholds import largest_float32_at_most
from tree2mat.learn.em import e_step
from tree2mat.learn.soft import SoftTree, log_paths


def harden(
    ens: Ensemble, trees: list[SoftTree], mean: np.ndarray, scale: np.ndarray, oblique: bool, Z: np.ndarray, y: np.ndarray,
    gamma: float,
) -> Ensemble:
    """The deterministic IR of the probabilistic trees (``gamma -> infinity``;
    :mod:`tree2mat.learn`): float32 weights and thresholds, the tuned leaves, MEAN over the trees;
    ``default_left`` where more of the responsibility of the rows ``Z`` (labels or targets ``y``)
    went. The task, classes and outputs stay the model's."""
    F = ens.n_features
    out: list[Tree] = []
    rows_f: list[np.ndarray] = []
    rows_w: list[np.ndarray] = []
    for soft, tree in zip(trees, ens.trees):
        I = soft.n_internal
        feature, threshold = tree.feature.copy(), np.zeros(I)
        if I:
            h = e_step(soft, log_paths(soft, Z, gamma), y)
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

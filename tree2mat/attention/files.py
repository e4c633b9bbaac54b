"""An attention forest's file (JSON, docs/attention.md): reading it back, every field checked
(:meth:`AttentionForest.save <tree2mat.attention.model.AttentionForest.save>` writes it)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from tree2mat.attention.model import FORMAT_VERSION, LOSSES, VARIANTS, AttentionForest, _check_forest
from tree2mat.errors import ModelFileError, UnsupportedModelError
from tree2mat.frontends.loading import ATTENTION_KEY, MALFORMED, AttentionDocument
from tree2mat.ir.io import ensemble_from_dict


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

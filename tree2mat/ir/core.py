"""The intermediate representation: an ``Ensemble`` of ``Tree`` objects.

Every frontend lowers its model to this IR, every form builds its graph from it, and the
reference evaluator (``tree2mat.ir.evaluate``) defines what the graph must compute.

This module holds the ensemble and its checks; the tree (``tree.py``), the projections of
oblique nodes (``projections.py``) and the settings' enums (``enums.py``) live beside it, and
every name of the IR is importable from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tree2mat.errors import InvalidTreeError
from tree2mat.ir.enums import (
    BINARY_LINKS,
    Aggregation,
    CategoryCodes,
    Comparison,
    LabelRule,
    Link,
    Task,
    category_codes,
    named_codes,
)
from tree2mat.ir.projections import Projections
from tree2mat.ir.tree import Tree, leaf_ref, ref_is_leaf, ref_leaf_index

__all__ = [
    "BINARY_LINKS",
    "MAX_FEATURES",
    "MAX_OUTPUTS",
    "Aggregation",
    "CategoryCodes",
    "Comparison",
    "Ensemble",
    "LabelRule",
    "Link",
    "OutlierParams",
    "Projections",
    "Task",
    "Tree",
    "category_codes",
    "leaf_ref",
    "named_codes",
    "ref_is_leaf",
    "ref_leaf_index",
]

#: Widest input accepted (synthesizing verification rows needs rows x features of memory).
MAX_FEATURES = 1_000_000
#: Most margin columns an ensemble may have (classes, targets).
MAX_OUTPUTS = 1_000_000


@dataclass(frozen=True, eq=False)
class OutlierParams:
    """IsolationForest scoring: ``score_samples = -2 ** (-margin / denominator)``,
    ``decision_function = score_samples - offset``, label -1 where decision < 0."""

    denominator: float
    offset: float


@dataclass(frozen=True, eq=False)
class Ensemble:
    """Trees plus how their outputs combine into the model's prediction.

    - ``n_features``: width of the input.
    - ``n_outputs`` (``K``): margin columns. Each tree adds its ``value`` row into column
      ``output_index[t]`` (then its leaves have 1 value) or, when ``output_index[t] == -1``, into
      all K columns (leaves have K values).
    - ``source_dtype``: the dtype the source library casts inputs to before comparing
      (sklearn trees: float32; HistGradientBoosting, LightGBM: float64).
    - margin = aggregation(tree outputs) + ``base_score``; output = ``link(margin)``.
    - ``classes``: per output group (one per target), the class labels; a classifier's margin
      (or probability) columns are these groups laid side by side.
    - ``accumulate_dtype``: the dtype the library sums tree outputs in, tree by tree from the base
      score (scikit-learn: float64; XGBoost: float32); ``missing_value``: an input value the
      library treats as missing besides NaN (XGBoost's ``missing``); ``label_cutoff``: the margin
      the binary label rules compare with.
    - ``zero_band``: inputs with ``|x| <= zero_band`` become 0 before anything else (LightGBM
      drops values within 1e-35 of zero); 0 for none. ``category_codes``: how categorical nodes
      map values to category codes.
    - ``category_labels``: per categorical input column whose categories the model knows by
      name (a pandas ``category`` column of strings, as scikit-learn, LightGBM and XGBoost
      encode it), ``(column, labels)``: category ``labels[c]`` is code ``c``, the number the
      trees (and the graph) take; any other value, and NaN, is no known category.
    - ``projections``: the linear combinations oblique nodes test (see :class:`Projections`);
      a node tests projection ``m`` as column ``n_features + m`` (:attr:`n_columns` in all).
    - ``accepts_nan`` / ``accepts_inf``: whether the source model accepts such inputs, and
      ``finite_features``: features where it refuses +-inf even so (``verify`` only feeds the
      source what it accepts).
    """

    trees: tuple[Tree, ...]
    n_features: int
    n_outputs: int
    output_index: np.ndarray
    comparison: Comparison
    source_dtype: np.dtype
    aggregation: Aggregation
    base_score: np.ndarray
    link: Link
    task: Task
    classes: tuple[np.ndarray, ...] = ()
    label_rule: LabelRule = LabelRule.ARGMAX
    outlier: OutlierParams | None = None
    feature_names: tuple[str, ...] | None = None
    source: str = ""
    accepts_nan: bool = True
    accepts_inf: bool = True
    finite_features: tuple[int, ...] = ()
    accumulate_dtype: np.dtype = np.dtype(np.float64)
    missing_value: float = float("nan")
    label_cutoff: float = 0.0
    zero_band: float = 0.0
    category_codes: CategoryCodes = CategoryCodes.EXACT
    category_labels: tuple[tuple[int, tuple[str | int | float, ...]], ...] = ()
    projections: Projections | None = None

    @property
    def n_trees(self) -> int:
        return len(self.trees)

    @property
    def n_columns(self) -> int:
        """The columns nodes may test: the input's features, then the projections."""
        return self.n_features + (0 if self.projections is None else self.projections.n_projections)

    @property
    def is_oblique(self) -> bool:
        """Whether a node tests a projection (an oblique split)."""
        return any(bool((t.feature >= self.n_features).any()) for t in self.trees)

    def category_table(self) -> list[dict[str, Any]]:
        """The codes the graph takes for named categories: per such input column, its index,
        name and categories (the code of each is its position; anything else, and NaN, is no
        known category). The graph's metadata holds it as ``tree2mat.categories`` (JSON);
        ``convert --json`` and ``inspect`` show it."""
        return [
            {"column": j, "name": self.feature_names[j] if self.feature_names else None, "categories": list(labels)}
            for j, labels in self.category_labels
        ]

    def tree_depths(self) -> np.ndarray:
        """Each tree's depth, its deepest leaf's (0 for a single leaf), int64 [T]."""
        return np.asarray([t.leaf_depths().max(initial=0) for t in self.trees], np.int64)

    def max_depth(self) -> int:
        """Depth of the deepest leaf of any tree (0 for single leaves)."""
        return int(self.tree_depths().max())

    def trees_per_output(self) -> np.ndarray:
        """How many trees add into each margin column (what a mean divides by), int64 [K]."""
        counts = np.bincount(self.output_index[self.output_index >= 0], minlength=self.n_outputs)
        return counts[: self.n_outputs] + int(np.count_nonzero(self.output_index == -1))

    @property
    def n_classes(self) -> tuple[int, ...]:
        return tuple(len(c) for c in self.classes)

    def validate(self) -> Ensemble:
        """Raise :class:`InvalidTreeError` naming the first broken invariant; return self."""
        if not self.trees:
            raise InvalidTreeError("the ensemble has no trees")
        if not 1 <= self.n_features <= MAX_FEATURES:
            raise InvalidTreeError(f"n_features must be between 1 and {MAX_FEATURES}, got {self.n_features}")
        if not 1 <= self.n_outputs <= MAX_OUTPUTS:
            raise InvalidTreeError(f"n_outputs must be between 1 and {MAX_OUTPUTS}, got {self.n_outputs}")
        if self.feature_names is not None and len(self.feature_names) != self.n_features:
            raise InvalidTreeError(f"{len(self.feature_names)} feature names for {self.n_features} features")
        if any(not 0 <= f < self.n_features for f in self.finite_features):
            raise InvalidTreeError("finite_features must be feature indices")
        self._validate_labels()
        if self.output_index.shape != (self.n_trees,):
            raise InvalidTreeError(f"output_index must have shape ({self.n_trees},)")
        if self.base_score.shape != (self.n_outputs,) or not np.all(np.isfinite(self.base_score)):
            raise InvalidTreeError(f"base_score must be {self.n_outputs} finite numbers")
        floats = (np.dtype(np.float32), np.dtype(np.float64))
        if np.dtype(self.source_dtype) not in floats or np.dtype(self.accumulate_dtype) not in floats:
            raise InvalidTreeError("source_dtype and accumulate_dtype must be float32 or float64")
        if np.isinf(self.missing_value) or not np.isfinite(self.label_cutoff):
            raise InvalidTreeError("missing_value must be NaN or finite; label_cutoff finite")
        if not (np.isfinite(self.zero_band) and 0 <= self.zero_band < 1e-30):
            raise InvalidTreeError("zero_band must be a tiny non-negative number (LightGBM: 1e-35)")
        self._validate_projections()
        for t, tree in enumerate(self.trees):
            tree.validate(self.n_columns, where=f"tree {t}", n_inputs=self.n_features)
            if self.category_codes is not CategoryCodes.EXACT and tree.has_categorical:
                vals = tree.cat_values[~np.isnan(tree.cat_values)]
                if np.any((vals < 0) | (vals != np.trunc(vals))):
                    raise InvalidTreeError(f"tree {t}: integer category codes must be non-negative integers")
            if self.comparison is Comparison.LT and np.isneginf(tree.threshold).any():
                raise InvalidTreeError(f"tree {t}: threshold -inf with '<' sends every value right")
            k = int(self.output_index[t])
            if k == -1:
                if tree.n_outputs != self.n_outputs:
                    raise InvalidTreeError(
                        f"tree {t}: leaves hold {tree.n_outputs} values, expected {self.n_outputs}"
                    )
            elif not 0 <= k < self.n_outputs or tree.n_outputs != 1:
                raise InvalidTreeError(
                    f"tree {t}: output_index {k} needs one value per leaf and 0 <= k < "
                    f"{self.n_outputs}"
                )
        self._validate_oblique_nodes()
        self._validate_head()
        return self

    def _validate_projections(self) -> None:
        if self.projections is None:
            return
        self.projections.validate(self.n_features, np.dtype(self.source_dtype))
        if not np.isnan(self.missing_value) or self.zero_band:
            raise InvalidTreeError("oblique nodes take NaN as the only missing value (no missing_value, no zero_band)")

    def _validate_oblique_nodes(self) -> None:
        """(After each tree's own checks: its categorical and zero-missing nodes are in range.)"""
        for t, tree in enumerate(self.trees):
            oblique = tree.feature >= self.n_features
            if oblique[tree.cat_nodes].any() or (tree.zero_missing.size and (tree.zero_missing & oblique).any()):
                raise InvalidTreeError(f"tree {t}: an oblique node can be neither categorical nor zero-missing")

    def _validate_labels(self) -> None:
        columns = [f for f, _ in self.category_labels]
        if len(set(columns)) != len(columns) or any(not 0 <= f < self.n_features for f in columns):
            raise InvalidTreeError("category_labels must name distinct feature indices")
        for f, labels in self.category_labels:
            kinds = {type(v) for v in labels}
            if not labels or not kinds <= {str, int, float} or len(set(labels)) != len(labels):
                raise InvalidTreeError(f"category labels of feature {f} must be distinct strings or numbers")
            if any(isinstance(v, float) and not np.isfinite(v) for v in labels):
                raise InvalidTreeError(f"category labels of feature {f} must be finite")

    def _validate_head(self) -> None:
        if self.task is Task.CLASSIFICATION:
            if not self.classes or any(len(c) < 2 for c in self.classes):
                raise InvalidTreeError("a classifier needs at least two classes per output")
            for c in self.classes:
                if c.ndim != 1 or c.dtype.kind not in "iU" or np.unique(c).size != c.size:
                    raise InvalidTreeError("class labels must be distinct integers or strings, one list per output")
            if len({c.dtype.kind for c in self.classes}) > 1:
                raise InvalidTreeError("class labels mix integers and strings across outputs")
            n_prob = sum(self.n_classes)
            binary = self.link in BINARY_LINKS
            expected = len(self.classes) if binary else n_prob
            if binary and set(self.n_classes) != {2}:
                raise InvalidTreeError(f"{self.link.value} link needs exactly two classes per output")
            if self.n_outputs != expected:
                raise InvalidTreeError(
                    f"a classifier with classes {self.n_classes} and link {self.link.value} "
                    f"needs {expected} margin columns, has {self.n_outputs}"
                )
            if self.link in (Link.EXP, Link.SOFTPLUS, Link.ISOLATION):
                raise InvalidTreeError(f"a classifier cannot use the {self.link.value} link")
            if self.link in (Link.SOFTMAX, Link.SIGMOID) and len(self.classes) != 1:
                raise InvalidTreeError("softmax link needs a single output group")
            if binary and self.label_rule is LabelRule.ARGMAX:
                raise InvalidTreeError(f"{self.link.value} link needs label rule positive or non_negative")
            if self.label_rule is not LabelRule.ARGMAX and (
                set(self.n_classes) != {2} or self.n_outputs != len(self.classes)
            ):
                raise InvalidTreeError(
                    f"label rule {self.label_rule.value} needs one margin column per output of two classes"
                )
        elif self.task is Task.OUTLIER:
            if self.link is not Link.ISOLATION or self.outlier is None or self.n_outputs != 1:
                raise InvalidTreeError("an outlier model needs the isolation link and 1 output")
        elif self.link in BINARY_LINKS + (Link.SOFTMAX, Link.ISOLATION):
            raise InvalidTreeError(f"a regressor cannot use the {self.link.value} link")

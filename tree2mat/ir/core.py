"""The intermediate representation: an ``Ensemble`` of ``Tree`` objects.

Every frontend lowers its model to this IR, every form builds its graph from it, and the
reference evaluator (``tree2mat.ir.evaluate``) defines what the graph must compute.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tree2mat.errors import InvalidTreeError


class Comparison(enum.Enum):
    """How the source library compares a feature value ``x`` with a threshold ``t`` to go left."""

    LE = "<="  # scikit-learn, LightGBM
    LT = "<"  # XGBoost


class Aggregation(enum.Enum):
    """How per-tree outputs are combined."""

    SUM = "sum"  # boosting, isolation forests
    MEAN = "mean"  # random forests


class Link(enum.Enum):
    """Applied to the aggregated margin (after the base score) to get the model output."""

    IDENTITY = "identity"
    SIGMOID = "sigmoid"  # y = sigmoid(m) (XGBoost reg:logistic); classifiers: one-vs-all p per column
    LOGISTIC = "logistic"  # binary: p = sigmoid(m); probabilities [1 - p, p]
    LOGISTIC_2X = "logistic_2x"  # binary, exponential loss: p = sigmoid(2 m)
    MARGIN = "margin"  # binary: p = m itself (XGBoost binary:logitraw's predict_proba)
    STEP = "step"  # binary: p = 1 if m > 0 else 0 (XGBoost binary:hinge)
    SOFTMAX = "softmax"
    EXP = "exp"
    SOFTPLUS = "softplus"  # regression: y = log(1 + exp(m)) (LightGBM cross_entropy_lambda)
    ISOLATION = "isolation"  # score_samples = -2 ** (-m / denominator)


#: Links of binary classifiers: one margin column per output of two classes; probabilities
#: [1 - p, p] with p from the margin as each link says.
BINARY_LINKS = (Link.LOGISTIC, Link.LOGISTIC_2X, Link.MARGIN, Link.STEP)


class Task(enum.Enum):
    REGRESSION = "regression"
    CLASSIFICATION = "classification"
    OUTLIER = "outlier"


class LabelRule(enum.Enum):
    """How a classifier's label follows from its margin (after the base score, before the link)."""

    ARGMAX = "argmax"  # first maximal column per output group
    POSITIVE = "positive"  # binary, one margin column per output: class 1 iff m > cutoff
    NON_NEGATIVE = "non_negative"  # binary, one margin column per output: class 1 iff m >= cutoff


class CategoryCodes(enum.Enum):
    """How a categorical node turns an input value into the category code it looks up."""

    EXACT = "exact"  # scikit-learn: the value itself; it matches a category equal to it
    TRUNCATE = "truncate"  # LightGBM: int(x) (toward zero); a negative result matches nothing
    NONNEGATIVE_TRUNCATE = "nonnegative_truncate"  # XGBoost: x < 0 matches nothing, else int(x)


def category_codes(x: np.ndarray, rule: CategoryCodes) -> np.ndarray:
    """The codes ``rule`` gives float values ``x`` (NaN stays NaN; -1 for a value that matches
    no category)."""
    if rule is CategoryCodes.EXACT:
        return x
    with np.errstate(invalid="ignore"):
        invalid = x <= -1 if rule is CategoryCodes.TRUNCATE else x < 0
        return np.where(invalid, -1.0, np.trunc(x) + 0.0)  # + 0.0: -0.0 becomes 0.0


def named_codes(x: np.ndarray, rule: CategoryCodes, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The codes ``rule`` gives float values ``x`` of a column of ``n`` named categories, and
    where each names one (a whole code from 0 to n - 1)."""
    codes = category_codes(np.asarray(x, np.float64), rule)
    with np.errstate(invalid="ignore"):
        return codes, (codes >= 0) & (codes < n) & (codes == np.trunc(codes))


#: Widest input accepted (synthesizing verification rows needs rows x features of memory).
MAX_FEATURES = 1_000_000
#: Most margin columns an ensemble may have (classes, targets).
MAX_OUTPUTS = 1_000_000


def leaf_ref(j: int | np.ndarray) -> int | np.ndarray:
    """Encode leaf index ``j`` as a child reference (negative: ``-1 - j``)."""
    return -1 - j


def ref_is_leaf(ref: int | np.ndarray) -> bool | np.ndarray:
    return ref < 0


def ref_leaf_index(ref: int | np.ndarray) -> int | np.ndarray:
    """Inverse of :func:`leaf_ref`."""
    return -1 - ref


@dataclass(frozen=True, eq=False)
class Tree:
    """One binary decision tree, struct-of-arrays.

    With ``I`` internal nodes and ``L = I + 1`` leaves and ``K`` outputs:

    - ``feature``      int64 [I]   feature index tested at each internal node
    - ``threshold``    float64 [I] threshold as the source stores it (not NaN; +-inf allowed)
    - ``default_left`` bool [I]    where a missing value (NaN) goes
    - ``left``/``right`` int64 [I] child references: an internal node index ``>= 0``, or a leaf
      ``j`` encoded as ``-1 - j`` (see :func:`leaf_ref`)
    - ``value``        float64 [L, K] leaf outputs
    - ``leaf_source_id`` int64 [L] the source library's node id of each leaf (for ``apply``)
    - categorical splits: ``cat_nodes`` int64 [M] (internal node indices), ``cat_values`` float64
      [M, C] (category values, NaN-padded) and ``cat_left`` bool [M, C]. A categorical node sends a
      value equal to one of its listed categories left or right as ``cat_left`` says; any other
      value (NaN, unseen categories) goes where ``default_left`` says. ``threshold`` is unused there.
      Values are first mapped to codes by the ensemble's ``category_codes`` rule. Optional
      ``cat_other_left`` bool [M]: where a non-missing value that matches no listed category goes
      (XGBoost: left), when that differs from where NaN goes.
    - ``zero_missing`` bool [I] (or empty: none): numeric nodes where the value 0 counts as missing too
      (LightGBM's missing type Zero), so it goes where ``default_left`` says.
    - linear leaves (LightGBM ``linear_tree``; K = 1): ``linear_const`` float64 [L],
      ``linear_feature`` int64 [L, P] (-1 pads) and ``linear_coef`` float64 [L, P]. Leaf ``j``
      outputs ``linear_const[j] + sum_p linear_coef[j, p] * x[linear_feature[j, p]]``, added in
      order in float64, unless one of those features is NaN: then it outputs ``value[j]``.

    Invariants (checked by :meth:`validate`): internal nodes are numbered breadth-first (root 0,
    each level left to right), leaves left to right; every node but the root has exactly one
    parent; children of node ``i`` are numbered after ``i``.
    """

    feature: np.ndarray
    threshold: np.ndarray
    default_left: np.ndarray
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray
    leaf_source_id: np.ndarray | None = None
    cat_nodes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    cat_values: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float64))
    cat_left: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), bool))
    cat_other_left: np.ndarray | None = None
    zero_missing: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    linear_const: np.ndarray | None = None
    linear_feature: np.ndarray | None = None
    linear_coef: np.ndarray | None = None

    @property
    def other_left(self) -> np.ndarray:
        """Per categorical node, where a value that matches no listed category goes."""
        return self.default_left[self.cat_nodes] if self.cat_other_left is None else self.cat_other_left

    @property
    def is_linear(self) -> bool:
        return self.linear_const is not None

    @property
    def n_internal(self) -> int:
        return int(self.feature.shape[0])

    @property
    def n_leaves(self) -> int:
        return int(self.value.shape[0])

    @property
    def n_outputs(self) -> int:
        return int(self.value.shape[1])

    @property
    def has_categorical(self) -> bool:
        return self.cat_nodes.shape[0] > 0

    def leaf_depths(self) -> np.ndarray:
        """Depth of each leaf (number of internal nodes on its path)."""
        depth = np.zeros(self.n_leaves, np.int64)
        node_depth = np.zeros(max(self.n_internal, 1), np.int64)
        for i in range(self.n_internal):  # BFS order: parents before children
            for child in (self.left[i], self.right[i]):
                if child < 0:
                    depth[-1 - child] = node_depth[i] + 1
                else:
                    node_depth[child] = node_depth[i] + 1
        return depth

    def validate(self, n_features: int, where: str = "tree", n_inputs: int | None = None) -> None:
        """Raise :class:`InvalidTreeError` naming the first broken invariant. Nodes may test
        columns below ``n_features``; linear leaves read inputs below ``n_inputs`` (default:
        the same)."""
        n_int, n_leaves = self.n_internal, self.n_leaves
        arrays = {
            "feature": (self.feature, np.integer, (n_int,)),
            "threshold": (self.threshold, np.floating, (n_int,)),
            "default_left": (self.default_left, np.bool_, (n_int,)),
            "left": (self.left, np.integer, (n_int,)),
            "right": (self.right, np.integer, (n_int,)),
        }
        for name, (arr, kind, shape) in arrays.items():
            if not isinstance(arr, np.ndarray) or not np.issubdtype(arr.dtype, kind):
                raise InvalidTreeError(f"{where}: {name} must be a numpy array of {kind.__name__}")
            if arr.shape != shape:
                raise InvalidTreeError(f"{where}: {name} has shape {arr.shape}, expected {shape}")
        if self.value.ndim != 2 or self.value.shape[0] != n_int + 1 or self.value.shape[1] < 1:
            raise InvalidTreeError(
                f"{where}: value has shape {self.value.shape}, expected ({n_int + 1}, K>=1) "
                f"for {n_int} internal nodes"
            )
        if not np.all(np.isfinite(self.value)):
            raise InvalidTreeError(f"{where}: leaf values must be finite")
        if n_int and (self.feature.min() < 0 or self.feature.max() >= n_features):
            bad = int(np.flatnonzero((self.feature < 0) | (self.feature >= n_features))[0])
            raise InvalidTreeError(
                f"{where}: node {bad} tests feature {int(self.feature[bad])}, "
                f"outside [0, {n_features})"
            )
        self._validate_categorical(where, n_int)
        self._validate_extras(where, n_features if n_inputs is None else n_inputs)
        numeric = np.ones(n_int, bool)
        numeric[self.cat_nodes] = False
        if np.isnan(self.threshold[numeric]).any():
            bad = int(np.flatnonzero(numeric & np.isnan(self.threshold))[0])
            raise InvalidTreeError(f"{where}: node {bad} has a NaN threshold")
        self._validate_structure(where, n_int, n_leaves)
        if self.leaf_source_id is not None and self.leaf_source_id.shape != (n_leaves,):
            raise InvalidTreeError(f"{where}: leaf_source_id must have shape ({n_leaves},)")

    def _validate_structure(self, where: str, n_int: int, n_leaves: int) -> None:
        children = np.concatenate([self.left, self.right]) if n_int else np.zeros(0, np.int64)
        internal = children[children >= 0]
        leaves = -1 - children[children < 0]
        if internal.size != max(n_int - 1, 0) or leaves.size != (n_leaves if n_int else 0):
            raise InvalidTreeError(
                f"{where}: {n_int} internal nodes need {max(n_int - 1, 0)} internal and "
                f"{n_leaves} leaf children, found {internal.size} and {leaves.size}"
            )
        if internal.size and (
            internal.max() >= n_int or np.unique(internal).size != internal.size or 0 in internal
        ):
            raise InvalidTreeError(
                f"{where}: internal child references must be distinct, in [1, {n_int}) "
                "and never the root (cycle or shared child)"
            )
        if leaves.size and (leaves.max() >= n_leaves or np.unique(leaves).size != leaves.size):
            raise InvalidTreeError(f"{where}: every leaf must be referenced exactly once")
        # Breadth-first internal numbering and left-to-right leaves.
        bfs, leaf_order = _bfs_and_leaf_order(self.left, self.right)
        if bfs != list(range(n_int)):
            raise InvalidTreeError(f"{where}: internal nodes are not in breadth-first order")
        if leaf_order != list(range(n_leaves if n_int else 0)):
            raise InvalidTreeError(f"{where}: leaves are not numbered left to right")

    def _validate_categorical(self, where: str, n_int: int) -> None:
        m = self.cat_nodes.shape[0]
        if self.cat_values.ndim != 2 or self.cat_values.shape[0] != m:
            raise InvalidTreeError(f"{where}: cat_values must have shape ({m}, C)")
        if self.cat_left.shape != self.cat_values.shape:
            raise InvalidTreeError(f"{where}: cat_left must have the shape of cat_values")
        if m and (self.cat_nodes.min() < 0 or self.cat_nodes.max() >= n_int):
            raise InvalidTreeError(f"{where}: categorical node index out of range")
        if m and np.unique(self.cat_nodes).size != m:
            raise InvalidTreeError(f"{where}: a node is listed twice as categorical")
        for row in self.cat_values:
            vals = row[~np.isnan(row)]
            if np.unique(vals).size != vals.size or np.isinf(vals).any():
                raise InvalidTreeError(f"{where}: category values must be distinct and finite")
        other = self.cat_other_left
        if other is not None and (not isinstance(other, np.ndarray) or other.dtype != bool or other.shape != (m,)):
            raise InvalidTreeError(f"{where}: cat_other_left must be a bool array of shape ({m},)")

    def _validate_extras(self, where: str, n_features: int) -> None:
        zm = self.zero_missing
        if not isinstance(zm, np.ndarray) or zm.dtype != bool or zm.shape not in ((0,), (self.n_internal,)):
            raise InvalidTreeError(f"{where}: zero_missing must be a bool array of shape (0,) or ({self.n_internal},)")
        if zm.size and zm[self.cat_nodes].any():
            raise InvalidTreeError(f"{where}: zero_missing applies to numeric nodes only")
        arrays = (self.linear_const, self.linear_feature, self.linear_coef)
        if all(a is None for a in arrays):
            return
        const, feat, coef = arrays
        L = self.n_leaves
        if (
            not isinstance(const, np.ndarray) or not isinstance(feat, np.ndarray) or not isinstance(coef, np.ndarray)
            or const.shape != (L,) or feat.ndim != 2 or feat.shape[0] != L or coef.shape != feat.shape
            or not np.issubdtype(feat.dtype, np.integer) or self.n_outputs != 1
        ):
            raise InvalidTreeError(
                f"{where}: linear leaves need linear_const [{L}], linear_feature and linear_coef [{L}, P] "
                "and one output"
            )
        if not (np.all(np.isfinite(const)) and np.all(np.isfinite(coef))):
            raise InvalidTreeError(f"{where}: linear leaf coefficients must be finite")
        if feat.size and (feat.min() < -1 or feat.max() >= n_features):
            raise InvalidTreeError(f"{where}: a linear leaf uses a feature outside [0, {n_features})")


def _bfs_and_leaf_order(left: np.ndarray, right: np.ndarray) -> tuple[list[int], list[int]]:
    """Internal node ids in breadth-first order and leaf ids left to right, from the root."""
    if left.shape[0] == 0:
        return [], []
    bfs: list[int] = []
    queue = [0]
    while queue:
        nxt: list[int] = []
        for node in queue:
            bfs.append(node)
            nxt.extend(int(c) for c in (left[node], right[node]) if c >= 0)
        queue = nxt
    leaves: list[int] = []
    _collect_leaves(left, right, leaves)
    return bfs, leaves


def _collect_leaves(left: np.ndarray, right: np.ndarray, out: list[int]) -> None:
    stack: list[int] = [0]  # references (internal >= 0, leaves < 0)
    while stack:
        ref = stack.pop()
        if ref < 0:
            out.append(-1 - ref)
        else:
            stack.append(int(right[ref]))
            stack.append(int(left[ref]))


@dataclass(frozen=True, eq=False)
class Projections:
    """The linear combinations of the input that oblique nodes test (``w . x <= t``).

    ``M`` projections of up to ``P`` terms each:

    - ``feature`` int64 [M, P]: the input feature of each term; ``-1`` pads a row after its terms
    - ``weight`` float64 [M, P]: each term's weight (finite, non-zero; 0 at pads)

    A tree node tests projection ``m`` by naming column ``n_features + m`` as its ``feature``; it
    compares the projection's value with its threshold as any node compares a feature value.

    The value is defined as a float sum in the ensemble's ``source_dtype``, in the order of the
    terms: ``s = 0; s = s + w_p * x_p`` for p = 0, 1, ..., each product and each sum rounded to
    ``source_dtype`` (no fused multiply-add), with the weights as values of that dtype (validation
    refuses a weight it cannot hold). treeple sums so (float32, in its stored order); so does the
    graph, with elementwise ``Mul`` and ``Add`` (never a ``MatMul``: its order is the runtime's, and
    CUDA's TF32 rounds ``x`` to 10 bits). A NaN input in a term makes ``s`` NaN, and a NaN ``s``
    (also ``inf - inf``) counts as missing: the node sends the row where ``default_left`` says.
    """

    feature: np.ndarray
    weight: np.ndarray

    @classmethod
    def from_terms(cls, terms: Sequence[tuple[Any, Any]]) -> Projections:
        """The projections of ``terms``: per projection its features and weights (equal lengths,
        in summation order), padded to the longest with feature -1 and weight 0. (Checked by
        :meth:`validate`, not here.)"""
        rows = [(np.asarray(f, np.int64).reshape(-1), np.asarray(w, np.float64).reshape(-1)) for f, w in terms]
        width = max([f.size for f, _ in rows] + [1])
        feature = np.full((len(rows), width), -1, np.int64)
        weight = np.zeros((len(rows), width))
        for m, (f, w) in enumerate(rows):
            feature[m, : f.size], weight[m, : w.size] = f, w
        return cls(feature, weight)

    @property
    def n_projections(self) -> int:
        return int(self.feature.shape[0])

    def terms(self, m: int) -> tuple[np.ndarray, np.ndarray]:
        """Projection ``m``'s features and weights, in summation order."""
        used = self.feature[m] >= 0
        return self.feature[m][used], self.weight[m][used]

    def validate(self, n_features: int, dtype: np.dtype) -> None:
        """Raise :class:`InvalidTreeError` naming the first broken invariant (the terms of
        projections over ``n_features`` inputs, summed in ``dtype``)."""
        f, w = self.feature, self.weight
        if (
            not isinstance(f, np.ndarray) or not isinstance(w, np.ndarray) or not np.issubdtype(f.dtype, np.integer)
            or not np.issubdtype(w.dtype, np.floating) or f.ndim != 2 or w.shape != f.shape or f.shape[1] < 1
        ):
            raise InvalidTreeError("projections need feature (integers) and weight (numbers) of one shape [M, P], P >= 1")
        used = f >= 0
        if f.size and (f.min() < -1 or f.max() >= n_features):
            raise InvalidTreeError(f"a projection term names a feature outside [0, {n_features})")
        if (used[:, 1:] & ~used[:, :-1]).any() or not used[:, 0].all():
            raise InvalidTreeError("every projection needs a term, and its padding (-1) after its terms")
        if not np.all(np.isfinite(w)) or (w[used] == 0).any() or (w[~used] != 0).any():
            raise InvalidTreeError("projection weights must be finite and non-zero (0 at padding)")
        with np.errstate(over="ignore"):
            held = w.astype(dtype).astype(np.float64)
        if (held != w).any():
            m, p = (int(v[0]) for v in np.nonzero(held != w))
            raise InvalidTreeError(
                f"projection {m}'s weight {float(w[m, p])!r} is no {np.dtype(dtype).name} number (the projections sum in the "
                "model's source dtype: store the weights as values of it)"
            )

    def products(self, X: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Per term position p, in summation order: which projections have a term there (bool
        [M]) and the products ``w_p * x_p`` of rows ``X`` [N, M], in ``X``'s dtype (each rounded
        to it; anything at a padding position)."""
        w = self.weight.astype(X.dtype)
        with np.errstate(invalid="ignore", over="ignore"):
            for p in range(self.feature.shape[1]):
                yield self.feature[:, p] >= 0, X[:, np.maximum(self.feature[:, p], 0)] * w[:, p]

    def values(self, X: np.ndarray) -> np.ndarray:
        """The projections of rows ``X`` (in the sum dtype, NaN-coded), [N, M] in ``X``'s dtype,
        summed as the class says."""
        s = np.zeros((X.shape[0], self.n_projections), X.dtype)
        with np.errstate(invalid="ignore", over="ignore"):
            for used, term in self.products(X):
                s = np.where(used, s + term, s)
        return s


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

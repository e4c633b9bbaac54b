"""One decision tree of the IR (:class:`Tree`, struct-of-arrays) and its checks, with the
child references that encode its leaves."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tree2mat.errors import InvalidTreeError


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


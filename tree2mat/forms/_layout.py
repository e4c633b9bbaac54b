"""Pieces every exact form shares: trees stacked into padded 3-D tensors, the nodes' tests
(which nodes send a row right) and the leaf-value aggregation.

Tests follow the exactness rules (docs/exactness.md) and the graph contract: every node is one
``value > threshold`` with a finite threshold on a column of an augmented input in which no cell
is NaN (:func:`node_tests`: x with missing cells at -max or +max by where the node sends them,
0/1 flags of missing, +inf or -inf cells for the thresholds at the ends of the range, the same on
x with 0 counted as missing for missing-type Zero, one column per categorical node), thresholds
come from :mod:`tree2mat.ir.thresholds`, values are picked by ``Gather`` / ``GatherElements`` —
so no ``Sign(0)`` ever appears and no decision depends on how a runtime compares NaN. Leaf values
are gathered by the exit index (:class:`Exit`), never multiplied, and summed exactly
(:mod:`_digits`) or in the library's own dtype and order."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypedDict

import numpy as np
import onnx

from tree2mat.contract import EXIT_LEAVES, EXIT_MAPPED, ExitMap
from tree2mat.errors import UnsupportedModelError
from tree2mat.forms import _digits
from tree2mat.forms._graph import GraphBuilder, GraphOptions
from tree2mat.forms._heads import Margin
from tree2mat.ir.core import Aggregation, CategoryCodes, Comparison, Ensemble, Link, Projections
from tree2mat.ir.limits import Declared
from tree2mat.ir.thresholds import FLOAT32, compare_dtype, graph_categories, graph_thresholds


@dataclass(frozen=True)
class Exit:
    """Where every row ends in every tree, as an exact form finds it: ``index`` [T, N] (int64,
    or int32: ``index_dtype``), its row r for tree ``order[r]``, holding positions in that
    tree's row of ``slots`` [T, S] (the leaf at each position). Leaf values are gathered by
    ``index`` from tables laid out so (see :meth:`per_slot`), with no reordering; the leaf ids
    themselves (:meth:`leaf_ids`) are computed only where the graph needs them (``--leaves``,
    linear leaves): ``verify`` maps the index to leaf ids by the same layout, which the graph
    carries (:attr:`exit_map`, :mod:`tree2mat.contract`)."""

    index: str
    order: np.ndarray  # int64 [T]
    slots: np.ndarray  # int64 [T, S] (-1: a position that is no leaf)
    index_dtype: np.dtype = np.dtype(np.int64)

    def per_slot(self, table: np.ndarray, n_leaves: int) -> np.ndarray:
        """A [T * L, K] table of per-leaf rows (:class:`Stacked`'s layout) as [T, S, K] rows of
        ``index``'s trees and positions (0 at positions that are no leaf)."""
        per_tree = table.reshape(-1, n_leaves, table.shape[1])
        out = per_tree[self.order[:, None], np.maximum(self.slots, 0)]
        out[self.slots < 0] = 0
        return out

    @property
    def position(self) -> np.ndarray:
        """int64 [T]: each ensemble tree's row of ``index`` (the inverse of ``order``)."""
        position = np.empty_like(self.order)
        position[self.order] = np.arange(self.order.size)
        return position

    @property
    def exit_map(self) -> ExitMap:
        return ExitMap(self.order, self.slots, self.index_dtype)

    @property
    def layout(self) -> str:
        """:data:`EXIT_LEAVES` where the index is the leaf ids, trees in order; else :data:`EXIT_MAPPED`."""
        T, S = self.slots.shape
        same = np.array_equal(self.order, np.arange(T)) and np.array_equal(self.slots, np.broadcast_to(np.arange(S), (T, S)))
        return EXIT_LEAVES if same and self.index_dtype == np.int64 else EXIT_MAPPED

    def leaf_ids(self, g: GraphBuilder, name: str | None = None) -> str:
        """The leaf ids [T, N] int64, trees in the ensemble's order (``name``: the tensor's)."""
        if self.layout == EXIT_LEAVES:
            return self.index if name is None else g.op("Identity", [self.index], out=name)
        # The index's rows put in tree order first, then the leaf at each position (the slots
        # reordered alike). Gathering the leaves first and their rows after, IREE 3.13 fused the
        # two gathers into one dispatch and refused it ("expected no unbounded stack allocations").
        index = g.op("Gather", [self.index, g.const(self.position, "tree_position")], "exit_in_tree_order", axis=0)
        return g.op("GatherElements", [g.const(self.slots[self.position], "node_leaf"), index], "leaf_ids", out=name, axis=1)


@dataclass(frozen=True)
class Walks:
    """Two or three ways a form finds the exit, chosen per batch by an ``If`` on its rows:
    ``small`` (``If`` true: the batch has at most ``rows``, the [1] int64 constant ``limit``,
    rows) or ``large``; each builds its :class:`Exit` in the branch builder it is given.
    ``few``: a third walk for the fewest rows, taken first (an outer ``If`` whose other branch
    holds the ``If`` above), or None. Everything after the exit is built in every branch, so the
    ``If`` writes the graph's outputs (OpenVINO 2026.4 misreads a tensor an ``If`` computes and
    the graph reads on). ``small`` takes at most ``most`` rows (its offsets' range). ``verify``
    runs every row every way (``tree2mat.walk_rows_tensor``, ``tree2mat.walk_rows``,
    ``tree2mat.walk_rows_max``, and ``tree2mat.walk_few*`` for ``few``)."""

    cond: str
    limit: str
    rows: int
    most: int
    small: Callable[[GraphBuilder], Exit]
    large: Callable[[GraphBuilder], Exit]
    few: FewWalk | None = None


@dataclass(frozen=True)
class FewWalk:
    """The walk of :class:`Walks` for batches of at most ``rows`` rows (``cond``: the batch's
    rows <= ``limit``, the [1] int64 constant holding ``rows``); it takes at most ``most`` rows.
    ``verify`` runs every row through it too (``tree2mat.walk_few_tensor``,
    ``tree2mat.walk_few``, ``tree2mat.walk_few_max``)."""

    cond: str
    limit: str
    rows: int
    most: int
    walk: Callable[[GraphBuilder], Exit]


#: Largest dense constants a form builds. Beyond this the dense layout is impractical (memory and
#: work per row grow with trees x nodes x leaves): a 20 000-leaf tree needs 1.5 GiB and hours of
#: verification. Such models are refused by the dense forms; the traverse form takes them.
MAX_INITIALIZER_BYTES = 512 * 2**20


@dataclass(frozen=True)
class Stacked:
    """All trees padded to ``I`` internal nodes and ``L`` leaves. Padding nodes test feature 0
    and touch no leaf; padding leaves are never selected."""

    n_trees: int
    n_internal: int
    n_leaves: int
    feature: np.ndarray  # int64 [T, I]
    threshold: np.ndarray  # compare dtype [T, I]
    nan_left: np.ndarray  # bool [T, I]: where a missing value goes left
    values: np.ndarray  # accumulate dtype [T * L, K]: tree t's leaf j at row t * L + j, 0 elsewhere
    base_rest: np.ndarray  # accumulate dtype [K]: base score not folded into a tree's values
    # Categorical nodes (M of them) on categorical features (slots, F_c of them):
    cat_position: np.ndarray  # int64 [M]: flat position t * I + i of each categorical node
    cat_slot: np.ndarray  # int64 [M]: the node's feature slot
    cat_features: np.ndarray  # int64 [F_c]: input column of each slot
    cat_values: np.ndarray  # compare dtype [F_c, C]: the slot's category values (padding: any value)
    cat_rank: np.ndarray  # float32 [F_c, C]: 1 + each value's index (0: padding, or not representable)
    cat_direction: np.ndarray  # float32 [M * (C + 1)]: node m, code c (0: no category) -> -1 left, +1 right
    cat_nan_left: np.ndarray | None  # bool [M]: where NaN goes, when that differs from code 0 somewhere
    zero_missing: np.ndarray | None  # bool [T * I]: nodes where 0 counts as missing (None: none)
    # Linear leaves, padded to P terms (None without linear trees):
    linear: tuple[np.ndarray, np.ndarray, np.ndarray] | None  # const [T*L], feature [T*L, P], coef [T*L, P]


def tree_levels(ens: Ensemble) -> int:
    """The levels a walk of every tree takes: every tree's depth (at least 1), summed."""
    return int(np.maximum(ens.tree_depths(), 1).sum())


def padded_sizes(ens: Ensemble) -> tuple[int, int, int]:
    """``(T, I, L)``: trees, and internal nodes and leaves of every tree once padded."""
    return ens.n_trees, max(1, max(t.n_internal for t in ens.trees)), max(t.n_leaves for t in ens.trees)


def stack(ens: Ensemble, dtype: np.dtype) -> Stacked:
    """Pad and stack the trees for a graph whose input is ``dtype``.

    With summed trees, the base score is folded into the leaf values of the first tree of each
    output column (``fl(base + v)``, the first addition scikit-learn makes), so that summing the
    trees in order repeats the library's float64 additions one by one.
    """
    cmp = compare_dtype(ens.source_dtype, dtype)
    T, I, L = padded_sizes(ens)
    K = ens.n_outputs
    feature = np.zeros((T, I), np.int64)
    threshold = np.zeros((T, I), cmp)
    nan_left = np.zeros((T, I), bool)
    acc = np.dtype(ens.accumulate_dtype)
    base = ens.base_score.astype(acc)
    values = np.zeros((T * L, K), acc)
    pending = np.ones(K, bool) if ens.aggregation is Aggregation.SUM else np.zeros(K, bool)
    for t, tree in enumerate(ens.trees):
        n = tree.n_internal
        feature[t, :n] = tree.feature
        threshold[t, :n] = graph_thresholds(tree.threshold, ens.comparison, cmp)
        nan_left[t, :n] = tree.default_left
        k = int(ens.output_index[t])
        rows = slice(t * L, t * L + tree.n_leaves)
        cols = np.arange(K) if k == -1 else np.asarray([k])
        values[rows, cols] = tree.value.astype(acc)
        fold = cols[pending[cols]]
        values[rows, fold] = base[fold] + values[rows, fold]
        pending[fold] = False
    base_rest = np.where(pending, base, 0) if ens.aggregation is Aggregation.SUM else base
    zero_missing: np.ndarray | None = None
    if any(t.zero_missing.size for t in ens.trees):
        zero_missing = np.zeros((T, I), bool)
        for t, tree in enumerate(ens.trees):
            zero_missing[t, : tree.zero_missing.size] = tree.zero_missing
        zero_missing = zero_missing.reshape(T * I)
    return Stacked(
        n_trees=T, n_internal=I, n_leaves=L, feature=feature, threshold=threshold,
        nan_left=nan_left, values=values, base_rest=base_rest.astype(acc),
        zero_missing=zero_missing, linear=_linear(ens, L), **_categorical(ens, I, cmp),
    )


def _linear(ens: Ensemble, L: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Linear-leaf tables over all trees' leaves (global leaf id t * L + j); a tree without
    linear leaves gets its plain values as constants and no terms."""
    if not any(t.is_linear for t in ens.trees):
        return None
    if np.any(ens.base_score):  # linear outputs are not folded with a base score (LightGBM has none)
        raise UnsupportedModelError("linear leaves with a nonzero base score are not supported")
    P = max(t.linear_feature.shape[1] for t in ens.trees if t.is_linear)  # type: ignore[union-attr]
    T = ens.n_trees
    const = np.zeros(T * L)
    feature = np.full((T * L, P), -1, np.int64)
    coef = np.zeros((T * L, P))
    for t, tree in enumerate(ens.trees):
        rows = slice(t * L, t * L + tree.n_leaves)
        if tree.is_linear:
            p = tree.linear_feature.shape[1]  # type: ignore[union-attr]
            const[rows] = tree.linear_const
            feature[rows, :p] = tree.linear_feature
            coef[rows, :p] = tree.linear_coef
        else:
            const[rows] = tree.value[:, 0]
    return const, feature, coef


class _Categorical(TypedDict):
    """:class:`Stacked`'s categorical fields."""

    cat_position: np.ndarray
    cat_slot: np.ndarray
    cat_features: np.ndarray
    cat_values: np.ndarray
    cat_rank: np.ndarray
    cat_direction: np.ndarray
    cat_nan_left: np.ndarray | None


def _categorical(ens: Ensemble, I: int, cmp: np.dtype) -> _Categorical:
    """Per categorical feature the sorted union of its category values; per categorical node a
    direction for each code (0 = a value that is no category of the feature, or NaN)."""
    per_feature = _category_sets(ens)
    features = sorted(per_feature)
    slot = {f: i for i, f in enumerate(features)}
    width = max((len(v) for v in per_feature.values()), default=0)
    values = np.full((len(features), width), np.nan)
    for f, vals in per_feature.items():
        values[slot[f], : len(vals)] = sorted(vals)
    position, slots, directions, nan_left, other_left = [], [], [], [], []
    for t, tree in enumerate(ens.trees):
        nan_left += tree.default_left[tree.cat_nodes].tolist()
        other_left += tree.other_left.tolist()
        for m, node in enumerate(tree.cat_nodes):
            f = int(tree.feature[node])
            row = np.full(width + 1, -1.0 if tree.other_left[m] else 1.0, np.float32)
            for v, goes_left in zip(tree.cat_values[m], tree.cat_left[m]):
                if not np.isnan(v):
                    code = 1 + int(np.searchsorted(values[slot[f], : len(per_feature[f])], v))
                    row[code] = -1.0 if goes_left else 1.0
            position.append(t * I + int(node))
            slots.append(slot[f])
            directions.append(row)
    graph_values = graph_categories(values, cmp)  # NaN: padding, or a value cmp cannot hold
    present = ~np.isnan(graph_values)
    rank = np.where(present, np.arange(1, width + 1, dtype=np.float32)[None, :], np.float32(0))
    return {
        "cat_position": np.asarray(position, np.int64),
        "cat_slot": np.asarray(slots, np.int64),
        "cat_features": np.asarray(features, np.int64),
        "cat_values": np.where(present, graph_values, 0).astype(cmp),
        "cat_rank": rank.astype(np.float32),
        "cat_direction": np.concatenate(directions) if directions else np.zeros(0, np.float32),
        "cat_nan_left": np.asarray(nan_left, bool) if nan_left != other_left else None,
    }


def _category_sets(ens: Ensemble) -> dict[int, set[float]]:
    """Per categorical feature, the union of the category values its nodes list."""
    per_feature: dict[int, set[float]] = {}
    for tree in ens.trees:
        for m, node in enumerate(tree.cat_nodes):
            vals = tree.cat_values[m]
            per_feature.setdefault(int(tree.feature[node]), set()).update(vals[~np.isnan(vals)].tolist())
    return per_feature


def input_bytes_per_row(ens: Ensemble) -> int:
    """Runtime bytes per row of what the nodes read besides the input itself: the categorical
    intermediates (:func:`categorical_bytes_per_row`) and, for oblique nodes, the projections
    (per projection its running sum, term, product and copies in the input's columns: 33 bytes)."""
    projections = 0 if ens.projections is None else 33 * ens.projections.n_projections
    return categorical_bytes_per_row(ens) + projections


def categorical_bytes_per_row(ens: Ensemble) -> int:
    """Runtime bytes per row of the categorical intermediates ([N, F_c, C] and [N, M])."""
    return _categorical_row_bytes(Declared.of(ens))


def _categorical_row_bytes(sizes: Declared) -> int:
    """:func:`categorical_bytes_per_row` of a model of these sizes: per categorical column each
    of the widest column's categories compared, ranked and summed (13 bytes), per categorical
    node its code, offset, direction and test (29 bytes)."""
    return sizes.categorical_columns * sizes.widest_column * 13 + sizes.categorical_nodes * 29


def exit_values_bytes_per_row(ens: Ensemble) -> int:
    """Per row, the leaf values of every tree's exit as a walk gathers them: one float64 where a
    tree adds into one column, else K of them gathered, stacked and summed (24 bytes each)."""
    K = 1 if one_class_per_tree(ens) else ens.n_outputs
    return ens.n_trees * (K * 8 if K == 1 else K * 24)


def floor_bytes(sizes: Declared, rows: int) -> int:
    """The least memory any form's graph of a model of ``sizes`` takes, constants and ``rows``
    rows of intermediates (what every form's ``constant_bytes + rows x bytes_per_row`` is at
    least: tests/hostile/test_bounded.py holds it against them): a threshold and a column per internal
    node, a value per leaf; per row the categorical intermediates every form's input preparation
    makes, the exit of every tree and the K outputs."""
    return 8 * sizes.internal + 4 * sizes.leaves + rows * (_categorical_row_bytes(sizes) + 8 * sizes.trees + 4 * sizes.outputs)


#: What to do about a dense [T, I, L] layout over its limit.
DENSE_SIZE_HINT = (
    "use --form traverse (memory grows with the nodes, not nodes x leaves), or train with fewer leaves "
    "(max_depth / max_leaf_nodes) or fewer trees"
)


def check_size(what: str, n_bytes: int, limit: int | None = None, hint: str = DENSE_SIZE_HINT) -> None:
    """Refuse a layout over ``limit`` bytes of constants (default MAX_INITIALIZER_BYTES, the
    dense layouts' limit)."""
    limit = MAX_INITIALIZER_BYTES if limit is None else limit
    if n_bytes <= limit:
        return
    raise UnsupportedModelError(
        f"the {what} needs {n_bytes / 2**30:.2f} GiB of constants, over the {limit / 2**30:.2f} GiB "
        f"limit of its graph's constants; {hint}"
    )


@dataclass(frozen=True)
class Compared:
    """The input as the trees compare it: ``value`` [N, F] in the compare dtype and ``missing``
    [N, F] bool (NaN, or the library's own missing value). Where ``missing`` holds, ``value`` is
    anything (NaN): every use of it is masked by ``missing`` (the graph contract: no decision
    depends on how a runtime compares NaN)."""

    value: str
    missing: str
    dtype: np.dtype


def compared_input(g: GraphBuilder, ens: Ensemble, opts: GraphOptions, dtype: np.dtype | None = None) -> Compared:
    """The graph input cast to the dtype the comparisons run in (sklearn trees cast float64 input
    to float32 before comparing; so does the graph), or to ``dtype`` if given, with its missing
    mask. Runtimes disagree on comparisons with NaN (OpenVINO's CPU plugin has ``Greater(NaN, c)``
    true), so NaN is found by ``IsNaN`` once and masked wherever a value is used."""
    cmp = compare_dtype(ens.source_dtype, opts.dtype) if dtype is None else np.dtype(dtype)
    value = "input" if cmp == np.dtype(opts.dtype) else g.op("Cast", ["input"], "x_cmp", to=1 if cmp == FLOAT32 else 11)
    missing = g.op("IsNaN", [value], "x_isnan")
    src_missing = np.float64(np.dtype(ens.source_dtype).type(ens.missing_value))
    with np.errstate(over="ignore"):
        exact = np.float64(cmp.type(src_missing)) == src_missing
    if not np.isnan(ens.missing_value) and exact:
        # A value the library treats as missing (XGBoost's `missing`, finite). (One that the
        # compared dtype cannot hold, e.g. 1e-200 for a float64 model fed float32 rows, is
        # equal to no input the library sees: nothing to do.)
        is_missing = g.op("Equal", [value, g.const(cmp.type(src_missing), "missing_value")], "x_is_missing")
        missing = g.op("Or", [missing, is_missing], "x_missing")
    if ens.zero_band:
        # |x| <= band becomes 0 (LightGBM); the band is rounded down to cmp exactly as thresholds.
        band = graph_thresholds(np.asarray([ens.zero_band]), Comparison.LE, cmp)[0]
        tiny = g.op("LessOrEqual", [g.op("Abs", [value], "x_abs"), g.const(band, "zero_band")], "x_tiny")
        value = g.op("Where", [tiny, g.const(cmp.type(0), "zero_value"), value], "x_banded")
    if ens.projections is not None:
        if dtype is None and cmp != np.dtype(ens.source_dtype) and ens.is_oblique:
            raise UnsupportedModelError(
                f"this model's oblique nodes sum in {np.dtype(ens.source_dtype).name}: convert it with "
                f"--dtype {np.dtype(ens.source_dtype).name} (a {cmp.name} sum rounds differently)"
            )
        value, missing = _with_projections(g, ens.projections, ens.n_features, value, missing, cmp)
    return Compared(value, missing, cmp)


def _with_projections(g: GraphBuilder, pr: Projections, n_features: int, value: str, missing: str, cmp: np.dtype) -> tuple[str, str]:
    """The input's columns and missing mask [N, F] with the projections appended, [N, F + M]:
    each summed term by term in ``cmp`` as :class:`~tree2mat.ir.core.Projections` defines (per
    term a ``Gather`` of the input's columns and a ``Mul`` by the weights, then, with more than
    one term, the product again as ``|p| x sign(p)`` and an ``Add``: IEEE operations, each
    rounded; a padding term reads an appended row of zeros, so that an infinite input cannot turn
    it into NaN). A projection is missing where its sum is NaN (a NaN input, or ``inf - inf``)."""
    P = pr.feature.shape[1]
    columns = g.op("Transpose", [value], "x_by_column", perm=[1, 0])  # [F, N]
    if (pr.feature < 0).any():
        shape = g.op("Concat", [g.const(np.asarray([1], np.int64), "zero_row_count"), row_count(g)], "zero_row_shape", axis=0)
        zeros = g.op("ConstantOfShape", [shape], "zero_row", value=onnx.numpy_helper.from_array(np.zeros(1, cmp)))
        columns = g.op("Concat", [columns, zeros], "x_by_column_padded", axis=0)
    total = ""
    for p in range(P):
        index = np.where(pr.feature[:, p] >= 0, pr.feature[:, p], n_features)  # (row F: the zeros)
        term = g.op("Gather", [columns, g.const(index, f"projection_feature{p}")], f"projection_x{p}", axis=0)
        term = g.op("Mul", [term, g.const(pr.weight[:, p].astype(cmp)[:, None], f"projection_weight{p}")], f"projection_term{p}")
        if P > 1:  # the rounded product again, as |p| x sign(p): exact, so a fused multiply-add of it adds the same
            term = g.op("Mul", [g.op("Abs", [term], f"projection_abs{p}"), g.op("Sign", [term], f"projection_sign{p}")], f"projection_exact{p}")
        total = term if p == 0 else g.op("Add", [total, term], f"projection_sum{p}")
    sums = g.op("Transpose", [total], "projections", perm=[1, 0])  # [N, M]
    value = g.op("Concat", [value, sums], "x_with_projections", axis=1)
    missing = g.op("Concat", [missing, g.op("IsNaN", [sums], "projections_nan")], "x_missing_with_projections", axis=1)
    return value, missing


def gather_columns(g: GraphBuilder, x: str, columns: str, hint: str) -> str:
    """Columns ``columns`` of ``x`` [N, F], node-major: [len(columns), N]. (A ``Gather`` on axis
    0 of the transposed input: OpenVINO 2026.4's ``Gather`` on axis 1 returns wrong values once
    the output passes about 3e7 elements.)"""
    return g.op("Gather", [g.op("Transpose", [x], f"{hint}_by_column", perm=[1, 0]), columns], hint, axis=0)


def node_values(g: GraphBuilder, st: Stacked, x: Compared) -> tuple[str, str]:
    """Each node's feature value [T * I, N] (node-major; NaN-free, see :class:`Compared`), and
    where it counts as missing (bool): a missing input, or 0 at LightGBM's missing-type-Zero
    nodes."""
    feature = g.const(st.feature.reshape(st.n_trees * st.n_internal), "node_feature")
    gathered = gather_columns(g, x.value, feature, "x_nodes")
    missing = gather_columns(g, x.missing, feature, "x_nodes_missing")
    if st.zero_missing is not None:
        zero = g.op("Equal", [gathered, g.const(x.dtype.type(0), "zero_cmp")], "x_zero")
        zero = g.op("And", [zero, g.const(st.zero_missing[:, None], "zero_missing")], "x_zero_missing")
        missing = g.op("Or", [missing, zero], "x_missing_node")
    return gathered, missing


#: Columns of the augmented input (:func:`augmented_input`), in this order; each present only
#: when some node reads it. ``x``: the value with missing cells at -max; ``xhi``: with them at
#: +max; ``nanx``: 1 where missing, else 0 (never above 1: also the column of tests that never
#: hold); ``hix``: 1 where missing or +inf; ``lox``: 1 where missing or -inf; ``ninfx``: 1 at
#: -inf (not missing); the ``w`` blocks: the same for x with 0 counted as missing (LightGBM's
#: missing type Zero). F columns each; ``cat``: one per categorical node, 1 where that node sends
#: the row right.
BLOCKS = ("x", "xhi", "w", "whi", "x2", "xhi2", "w2", "whi2", "xs", "xhis", "ws", "whis", "nanx", "nanw", "hix", "hiw", "lox", "low", "ninfx", "ninfw", "cat")
#: The halved twins of the value blocks (``x2``: ``x / 2``, missing cells at ``-max / 2``; ...),
#: read by the nodes whose graph threshold is at or beyond bfloat16's largest number (about
#: 3.39e38, e.g. CatBoost's -+FLT_MAX borders), against half the threshold: exact (a halving of a
#: float32 that large is exact, and a small one's rounding cannot change its order against it).
#: With the other blocks' missing cells at -+bfloat16's largest number (beyond their thresholds),
#: no constant of an exact form's node tests passes bfloat16's range. OpenVINO's CPU plugin, in
#: its default bf16 precision, clamps such a constant to bfloat16's largest number and compares
#: in float32: ``x > FLT_MAX`` held for ``x = FLT_MAX`` (measured 2026-11-25).
HALVED = {"x2": "x", "xhi2": "xhi", "w2": "w", "whi2": "whi"}
#: The scaled-up twins (``xs``: ``x * 2**64``, ...), read by the nodes whose graph threshold is
#: subnormal (XGBoost's ``x < 0`` is ``x > -1.4e-45``), against the threshold times 2**64, a
#: normal number: exact (a power-of-two scaling keeps every order, an overflow to inf included)
#: where a runtime reads a subnormal constant as 0 (IREE, OpenVINO, WebGPU flush subnormals:
#: ``x > -0`` sent x = 0 left, 2026-11-29), for 0 and every normal input. (Such a runtime reads
#: a subnormal input as 0 as well, which no float operation can undo.)
UPSCALED = {"xs": "x", "xhis": "xhi", "ws": "w", "whis": "whi"}
#: 2**64: the subnormals of float32 and float64 times it are normal.
UPSCALE = 2.0**64
#: The twins' value block.
TWIN_OF = {**HALVED, **UPSCALED}
#: bfloat16's largest finite number.
BF16_MAX = float(np.float32(np.uint32(0x7F7F0000).view(np.float32)))
#: The column and threshold of a test that never holds (``nanx`` is 0 or 1).
NEVER = ("nanx", 1.0)


@dataclass(frozen=True)
class NodeTests:
    """Every node's test as one ``value > threshold`` on a column of the augmented input, [T, I]
    in :func:`stack`'s order. The test holds where the row goes right, except at ``swap`` nodes,
    where it holds where the row goes left. Thresholds are finite."""

    column: np.ndarray  # int64 [T, I]
    threshold: np.ndarray  # compare dtype [T, I]
    swap: np.ndarray  # bool [T, I]
    blocks: tuple[str, ...]  # the augmented input's blocks, in column order
    offset: dict[str, int]  # the first column of each block
    width: int  # the augmented input's columns


def node_tests(ens: Ensemble, st: Stacked, extra: tuple[str, ...] = ()) -> NodeTests:
    """Each test as one ``value > threshold`` on a NaN-free column, with a finite threshold, the
    missing values going where the library sends them (``extra``: blocks to include even when no
    node reads them).

    Per node, with t' the graph threshold (``x <= t'`` goes left) and m = max:
    - missing goes left: ``x > t'`` on ``x`` (missing is -m, never above t'); with t' = +inf every
      row goes left (``nanx > 1``, never); with t' = -inf only -inf and missing go left
      (``lox > 0.5``, a swap node: the test holds where the row goes left);
    - missing goes right: ``x > t'`` on ``xhi`` (missing is m, above every t' < m); with t' = m,
      ``hix > 0.5`` (missing or +inf); with t' = +inf only missing goes right (``nanx > 0.5``);
      with t' = -inf only -inf goes left (``ninfx > 0.5``, a swap node).
    LightGBM's missing-type-Zero nodes read the ``w`` blocks instead. Categorical nodes read
    their own column. Padding nodes read column 0 against 0 (matrix forms ignore them)."""
    T, I, F = st.n_trees, st.n_internal, ens.n_columns
    t = st.threshold
    dt = t.dtype.type
    top = np.finfo(t.dtype).max
    valid = np.arange(I)[None, :] < np.asarray([tree.n_internal for tree in ens.trees])[:, None]
    zero = np.zeros((T, I), bool) if st.zero_missing is None else st.zero_missing.reshape(T, I)
    cat: np.ndarray = np.zeros(T * I, bool)
    cat[st.cat_position] = True
    cat = cat.reshape(T, I)
    left = st.nan_left
    src = np.where(zero, "w", "x")
    cases = [  # (condition, block kind, suffix, threshold, swap), first match wins
        (left & (t == np.inf), "never", "", dt(NEVER[1]), False),
        (left & (t == -np.inf), "lo", "", dt(0.5), True),
        (left, "", "", t, False),
        (t == np.inf, "nan", "", dt(0.5), False),
        (t == top, "hi", "", dt(0.5), False),
        (t == -np.inf, "ninf", "", dt(0.5), True),
        (np.ones_like(left), "", "hi", t, False),
    ]
    block = np.full((T, I), "", object)
    threshold = np.zeros((T, I), t.dtype)
    swap = np.zeros((T, I), bool)
    todo = valid & ~cat
    for cond, kind, suffix, thr, sw in cases:
        hit = todo & cond
        block[hit] = kind if kind == "never" else np.char.add(np.char.add(kind, src[hit].astype(str)), suffix)
        threshold[hit] = np.broadcast_to(thr, (T, I))[hit]
        swap[hit] = sw
        todo &= ~hit
    huge = valid & ~cat & np.isin(block, list(HALVED.values())) & (np.abs(threshold.astype(np.float64)) >= BF16_MAX) & np.isfinite(threshold)
    block[huge] = np.char.add(block[huge].astype(str), "2")
    threshold[huge] = threshold[huge] / dt(2)  # (exact: a power-of-two scaling of a number this large)
    tiny = valid & ~cat & np.isin(block, list(UPSCALED.values())) & (threshold != 0) & (np.abs(threshold) < np.finfo(t.dtype).tiny)
    block[tiny] = np.char.add(block[tiny].astype(str), "s")
    threshold[tiny] = threshold[tiny] * dt(UPSCALE)  # (exact: a subnormal scaled by a power of two)
    block[cat] = "cat"
    threshold[cat] = dt(0.5)
    index = st.feature.copy()
    index.reshape(-1)[st.cat_position] = np.arange(st.cat_position.size)
    index[block == "never"] = 0  # (column 0 of NEVER's block)
    used = {NEVER[0] if b == "never" else str(b) for b in np.unique(block[valid])} | set(extra)
    blocks = tuple(b for b in BLOCKS if b in used) or ("x",)  # (padding nodes read column 0)
    width = {b: st.cat_position.size if b == "cat" else F for b in blocks}
    offset = dict(zip(blocks, np.cumsum([0] + [width[b] for b in blocks])[:-1].tolist()))
    offset_of = {**offset, "never": offset.get(NEVER[0], 0)}
    start = np.vectorize(lambda b: offset_of.get(b, 0), otypes=[np.int64])(np.where(valid, block, blocks[0]))
    index[~valid] = 0
    return NodeTests(start + index, threshold, swap, blocks, offset, sum(width.values()))


def augmented_input(g: GraphBuilder, ens: Ensemble, st: Stacked, x: Compared, blocks: tuple[str, ...]) -> str:
    """[N, C]: the columns the node tests read (see :data:`BLOCKS`), NaN-free."""
    cmp = st.threshold.dtype
    to = onnx.helper.np_dtype_to_tensor_dtype(cmp)
    top = np.finfo(cmp).max
    missing = {"x": x.missing}
    if any(TWIN_OF.get(b, b).endswith(("w", "whi")) for b in blocks):
        is_zero = g.op("Equal", [x.value, g.const(cmp.type(0), "zero_cmp")], "x_is_zero")  # (NaN: set anyway)
        missing["w"] = g.op("Or", [x.missing, is_zero], "w_missing")
    made: dict[str, str] = {}
    for b in blocks:
        if b == "cat":
            right = g.op("Transpose", [g.op("Not", [categorical_left(g, ens, st, x)], "cat_right_nodes")], "cat_right", perm=[1, 0])
            made[b] = g.op("Cast", [right], "cat_right_cmp", to=to)
            continue
        base = TWIN_OF.get(b, b)
        src = "w" if base.endswith(("w", "whi")) else "x"
        if base in ("x", "w", "xhi", "whi"):
            high, half = base.endswith("hi"), b in HALVED
            if half:
                value = _halved(g, x.value, cmp)
            elif b in UPSCALED:
                value = g.op("Mul", [x.value, g.const(cmp.type(UPSCALE), "upscale")], "x_upscaled")
            else:
                value = x.value
            # The missing cells' place, beyond every threshold of the block: the others' are below
            # bfloat16's largest number, the halved blocks' at most half the dtype's largest.
            edge = cmp.type(top / 2) if half else cmp.type(BF16_MAX)
            sentinel = g.const(cmp.type(edge if high else -edge), f"missing_{'high' if high else 'low'}{'_half' if half else ''}")
            made[b] = g.op("Where", [missing[src], sentinel, value], b)
            continue
        if b.startswith("nan"):
            made[b] = g.op("Cast", [missing[src]], b, to=to)
            continue
        # +-inf found as x / 2 beyond -+max / 2 (for float32 a constant inside bfloat16's range;
        # the missing cells' NaN is above nothing), then set to 1 (or 0 for ninf) where missing,
        # as the value blocks' Where does: no IsInf, Or or And of the infinities, which
        # onnxruntime-web's JSEP runs on its CPU kernels, and whose bool result a Cast there read
        # without its +inf cells (a symmetric CatBoost model; docs/runtimes.md).
        x_half = _halved(g, x.value, cmp)
        pos = b.startswith("hi")
        bound = g.const(cmp.type(top / 2 if pos else -top / 2), f"{'pos' if pos else 'neg'}_inf_half")
        beyond = g.op("Greater" if pos else "Less", [x_half, bound], f"{b}_inf")
        on_missing = g.const(cmp.type(0 if b.startswith("ninf") else 1), "zero_flag" if b.startswith("ninf") else "one_flag")
        made[b] = g.op("Where", [missing[src], on_missing, g.op("Cast", [beyond], f"{b}_inf_flag", to=to)], b)
    parts = [made[b] for b in blocks]
    return parts[0] if len(parts) == 1 else g.op("Concat", parts, "x_augmented", axis=1)


def _halved(g: GraphBuilder, value: str, cmp: np.dtype) -> str:
    """``value / 2`` (one node however many blocks read it: the builder merges equal nodes)."""
    return g.op("Mul", [value, g.const(cmp.type(0.5), "half")], "x_half")


def row_count(g: GraphBuilder) -> str:
    """The number of rows, as a 1-D int64 tensor of one element (for shapes): the graph input's
    rather than a computed tensor's, as onnxruntime-web's JSEP misrouted rows of the sign graph
    of a LightGBM model that took the Shape of the zero band's Where (docs/runtimes.md)."""
    start, stop = g.const(np.asarray([0], np.int64), "n_start"), g.const(np.asarray([1], np.int64), "n_stop")
    return g.op("Slice", [g.op("Shape", ["input"], "x_shape"), start, stop], "n_rows")


def test_bits(
    g: GraphBuilder, ens: Ensemble, st: Stacked, x: Compared, tests: NodeTests,
    groups: list[tuple[np.ndarray, int]], right: bool, ones: bool,
) -> list[str]:
    """Per group of trees ``(trees, I_g)`` a bool [T_g, I_g, N] (``I_g + 1`` with ``ones``): True
    where the node's test (:func:`node_tests`) holds, or with ``right`` where the row goes right
    (the swap nodes' tests negated); with ``ones``, a last node per tree that is always True (a
    bias column for a MatMul). Nodes past I_g in a group are padding and left out.

    The augmented input is transposed to [C, N] so that the nodes' values are whole rows of it
    (a ``Gather`` on axis 0: contiguous copies, onnxruntime's fast case; a ``Gather`` on axis 1
    is over ten times slower) and each test is a row against one threshold."""
    xa = augmented_input(g, ens, st, x, tests.blocks)
    columns = g.op("Transpose", [xa], "x_columns", perm=[1, 0])
    if ones:
        n_rows = row_count(g)
        true = onnx.helper.make_tensor("true", onnx.TensorProto.BOOL, [1], [True])
    out = []
    for k, (trees, n) in enumerate(groups):  # (one Gather each: no Slice of a [nodes, N] tensor,
        pick = (trees[:, None], np.arange(n)[None, :])  # which onnxruntime fuses into a Split
        values = g.op("Gather", [columns, g.const(tests.column[pick].reshape(-1), f"node_column{k}")], f"node_values{k}", axis=0)
        threshold = g.const(tests.threshold[pick].reshape(-1, 1), f"node_threshold{k}")
        holds = g.op("Greater", [values, threshold], f"node_test{k}")  # that fails past 2**31 elements)
        swap = tests.swap[pick].reshape(-1, 1)
        if right and swap.any():
            holds = g.op("Xor", [holds, g.const(swap, f"node_swap{k}")], f"node_right{k}")
        bits = g.op("Reshape", [holds, g.const(np.asarray([trees.size, n, -1], np.int64), f"node_bits{k}_shape")], f"node_bits{k}")
        if ones:
            shape = g.op("Concat", [g.const(np.asarray([trees.size, 1], np.int64), f"ones{k}_trees"), n_rows], f"ones{k}_shape", axis=0)
            row = g.op("ConstantOfShape", [shape], f"node_ones{k}", value=true)
            bits = g.op("Concat", [bits, row], f"node_bits{k}_ones", axis=1)
        out.append(bits)
    return out


def merge_categorical(g: GraphBuilder, st: Stacked, numeric: str, categorical: str, hint: str) -> str:
    """A node-major tensor [T * I, N] with the categorical nodes' entries taken from
    ``categorical`` [M, N] (``st.cat_position`` order) instead of ``numeric``."""
    flat = st.n_trees * st.n_internal
    both = g.op("Concat", [numeric, categorical], f"{hint}_all", axis=0)
    perm = np.arange(flat, dtype=np.int64)
    perm[st.cat_position] = flat + np.arange(st.cat_position.size)
    return g.op("Gather", [both, g.const(perm, "cat_perm")], f"{hint}_cat", axis=0)


def categorical_left(g: GraphBuilder, ens: Ensemble, st: Stacked, x: Compared) -> str:
    """Bool [M, N] (node-major): True where categorical node m (``st.cat_position`` order) sends
    the row left.

    Each categorical feature's value becomes a code (1 + index among the feature's categories,
    0 for anything else: missing, unseen values) by exact equality; each node then looks its
    direction up by code."""
    features = g.const(st.cat_features, "cat_features")
    x_cat = gather_columns(g, x.value, features, "x_cat")  # [F_c, N]
    missing = gather_columns(g, x.missing, features, "x_cat_missing")
    x_cat = _category_codes(g, ens.category_codes, x_cat, st.threshold.dtype)
    xc = g.unsqueeze(x_cat, [1], "x_cat3")  # [F_c, 1, N] against values [F_c, C, 1]
    eq = g.op("Cast", [g.op("Equal", [xc, g.const(st.cat_values[:, :, None], "cat_values")], "cat_eq")], "cat_eqf", to=1)
    ranked = g.op("Mul", [eq, g.const(st.cat_rank[:, :, None], "cat_rank")], "cat_ranked")
    code = g.reduce_sum(ranked, [1], keepdims=False, hint="cat_code_f")
    code = g.op("Where", [missing, g.const(np.float32(0), "cat_code_missing"), code], "cat_code_present")
    codes = g.op("Cast", [code], "cat_code", to=7)
    slot = g.const(st.cat_slot, "cat_slot")
    node_codes = g.op("Gather", [codes, slot], "cat_node_code", axis=0)  # [M, N]
    width = st.cat_values.shape[1]
    offsets = np.arange(st.cat_slot.size, dtype=np.int64)[:, None] * (width + 1)
    index = g.op("Add", [node_codes, g.const(offsets, "cat_offset")], "cat_index")
    direction = g.op("Gather", [g.const(st.cat_direction, "cat_direction"), index], "cat_dir", axis=0)
    cat_left = g.op("Less", [direction, g.const(np.float32(0), "zero_f32")], "cat_left")
    if st.cat_nan_left is not None:  # missing goes elsewhere than unknown categories (XGBoost)
        node_missing = g.op("Gather", [missing, slot], "cat_node_missing", axis=0)
        nan_part = g.op("And", [node_missing, g.const(st.cat_nan_left[:, None], "cat_nan_left")], "cat_nan_goes_left")
        rest = g.op("And", [g.op("Not", [node_missing], "cat_present"), cat_left], "cat_value_goes_left")
        cat_left = g.op("Or", [nan_part, rest], "cat_left_nan")
    return cat_left


def _category_codes(g: GraphBuilder, rule: CategoryCodes, x: str, dtype: np.dtype) -> str:
    """The category codes of values ``x`` (``dtype``) under ``rule`` (see
    :func:`tree2mat.ir.core.category_codes`): -1 for values that match nothing (``x`` holds no
    NaN: missing cells are masked by the caller)."""
    if rule is CategoryCodes.EXACT:
        return x
    minus1, zero = g.const(dtype.type(-1), "cat_invalid"), g.const(dtype.type(0), "cat_zero")
    floor = g.op("Floor", [x], "cat_floor")
    if rule is CategoryCodes.TRUNCATE:  # int(x) toward zero: (-1, 0) -> 0, <= -1 -> negative
        floor = g.op("Where", [g.op("Less", [x, zero], "cat_negative"), zero, floor], "cat_trunc")
        invalid = g.op("LessOrEqual", [x, minus1], "cat_invalid_x")
    else:
        invalid = g.op("Less", [x, zero], "cat_invalid_x")
    return g.op("Where", [invalid, minus1, floor], "cat_code_x")


def _linear_values(g: GraphBuilder, ens: Ensemble, st: Stacked, gidx: str, vals: str, x: Compared) -> str:
    """Tree outputs [T, N, K] with linear leaves: constant plus coefficient times feature, added
    term by term in float64 as LightGBM does; the plain value where a used feature is missing. Each
    tree's output lands in its own column (``output_index``)."""
    assert st.linear is not None
    const, feature, coef = st.linear
    P = feature.shape[1]
    out = g.op("Gather", [g.const(const, "linear_const"), gidx], "lin_acc", axis=0)  # [T, N]
    if P:
        x64 = x.value if x.dtype == np.float64 else g.op("Cast", [x.value], "x_f64", to=11)
        # Per tree and row, the leaf's feature ids [N, T * P] and the values there (GatherElements).
        feats = g.op("Gather", [g.const(np.maximum(feature, 0), "linear_feature"), gidx], "lin_feat", axis=0)
        used = g.op("Gather", [g.const(feature >= 0, "linear_used"), gidx], "lin_used", axis=0)
        coefs = g.op("Gather", [g.const(coef, "linear_coef"), gidx], "lin_coef", axis=0)
        rows_first = g.op("Transpose", [feats], "lin_feat_rows", perm=[1, 0, 2])
        flat = g.op("Reshape", [rows_first, g.const(np.asarray([0, -1], np.int64), "lin_flat_shape")], "lin_feat_flat")
        xs = g.op("GatherElements", [x64, flat], "lin_x_flat", axis=1)
        shape = g.const(np.asarray([-1, st.n_trees, P], np.int64), "lin_shape")
        xs = g.op("Transpose", [g.op("Reshape", [xs, shape], "lin_x_rows")], "lin_x", perm=[1, 0, 2])
        flags = g.op("GatherElements", [g.op("Cast", [x.missing], "x_missing_f64", to=11), flat], "lin_missing_flat", axis=1)
        flags = g.op("Transpose", [g.op("Reshape", [flags, shape], "lin_missing_rows")], "lin_missing", perm=[1, 0, 2])
        missing = g.op("Greater", [flags, g.const(np.float64(0.5), "lin_half")], "lin_is_missing")
        nan = g.op("And", [used, missing], "lin_nan")
        n_nan = g.reduce_sum(g.op("Cast", [nan], "lin_nan_f", to=1), [2], keepdims=False, hint="lin_nan_count")
        any_nan = g.op("Greater", [n_nan, g.const(np.float32(0), "lin_zero_f32")], "lin_nan_any")
        terms = g.op("Where", [used, g.op("Mul", [xs, coefs], "lin_prod"), g.const(np.float64(0), "lin_zero")], "lin_terms")
        squeeze = g.const(np.asarray([2], np.int64), "lin_squeeze")
        for p in range(P):  # in order, one addition at a time
            term = g.op("Gather", [terms, g.const(np.asarray([p], np.int64), f"lin_p{p}")], f"lin_term{p}", axis=2)
            out = g.op("Add", [out, g.op("Squeeze", [term, squeeze], f"lin_term{p}_2d")], f"lin_acc{p}")
        # The plain value: the tree's one nonzero column (adding zeros is exact).
        plain = g.reduce_sum(vals, [2], keepdims=False, hint="lin_plain")
        out = g.op("Where", [any_nan, plain, out], "lin_value")
    out = g.unsqueeze(g.op("Cast", [out], "lin_value_acc", to=1 if st.values.dtype == np.float32 else 11), [2], "lin_value3")
    columns = np.zeros((st.n_trees, 1, ens.n_outputs), bool)
    for t, k in enumerate(ens.output_index):
        columns[t, 0, :] = k == -1
        if k >= 0:
            columns[t, 0, k] = True
    zero = g.const(st.values.dtype.type(0), "lin_zero_acc")
    return g.op("Where", [g.const(columns, "lin_columns"), out, zero], "tree_values_linear")


def one_class_per_tree(ens: Ensemble) -> bool:
    """Boosted multiclass: tree t adds to class t % K only (XGBoost, LightGBM, scikit-learn)."""
    K, T = ens.n_outputs, ens.n_trees
    return K > 1 and T % K == 0 and np.array_equal(ens.output_index, np.arange(T) % K)


def internal_dtype(ens: Ensemble, opts: GraphOptions) -> np.dtype:
    """The dtype of the graph's margin and head: float32 (the graph contract: no float64 tensor)
    unless the graph takes float64 (``--dtype float64``) or the model has linear leaves (LightGBM
    multiplies inputs by float64 coefficients, which float32 cannot repeat)."""
    if np.dtype(opts.dtype) == np.float64 or any(t.is_linear for t in ens.trees):
        return np.dtype(np.float64)
    return np.dtype(np.float32)


def _tree_values(g: GraphBuilder, ens: Ensemble, st: Stacked, exit: Exit, table: np.ndarray, ordered: bool, hint: str) -> tuple[str, bool]:
    """Each tree's values where the rows exit (``exit``) from ``table`` [T * L, K]
    (:class:`Stacked`'s layout): [T, N] (one output: summed to [N]), or (the flag: class rows)
    [T, K, N], or for boosted multiclass [rounds, K, N]. The trees come in the exit's order unless ``ordered``
    (a sum whose rounding depends on the order) or boosted multiclass.

    Values are picked per tree with ``GatherElements`` on the last axis of a [T, S * K] table
    (onnxruntime's fast layout; a ``Gather`` from the flat table by global id is several times
    slower)."""
    K = table.shape[1]
    T = st.n_trees
    slotted = exit.per_slot(table, st.n_leaves)  # [T, S, K]

    def in_order(vals: str) -> str:
        if np.array_equal(exit.order, np.arange(T)):
            return vals
        return g.op("Gather", [vals, g.const(exit.position, f"{hint}_tree_position")], f"{hint}_in_order", axis=0)

    if one_class_per_tree(ens):
        # One tree per class and round (boosted multiclass): each tree's own class value only,
        # [rounds, K, N] summed over the rounds, instead of K values per tree (K - 1 of them 0).
        own = slotted[np.arange(T), :, exit.order % K]
        vals = g.op("GatherElements", [g.const(own, f"{hint}_own"), exit.index], f"{hint}_tree_own", axis=1)
        shape = g.const(np.asarray([T // K, K, -1], np.int64), f"{hint}_rounds_shape")
        return g.op("Reshape", [in_order(vals), shape], f"{hint}_tree_rounds"), True
    if K == 1:  # [T, N], summed to [N]
        vals = g.op("GatherElements", [g.const(slotted.reshape(T, -1), hint), exit.index], f"{hint}_tree", axis=1)
        return (in_order(vals) if ordered else vals), False
    # Each output's values gathered on their own ([T, N] each, the fast layout), stacked as
    # [T, K, N] (class rows): an index leaf K + k over [T, N, K] costs a Mul and an Add that
    # broadcast over the short last axis, measured (onnxruntime 1.31, 2 threads) at 38 % of a
    # binary random forest's run.
    per_output = [
        g.unsqueeze(g.op("GatherElements", [g.const(np.ascontiguousarray(slotted[:, :, k]), f"{hint}_{k}"), exit.index], f"{hint}_output{k}", axis=1), [1], f"{hint}_output{k}_row")
        for k in range(K)
    ]
    vals = g.op("Concat", per_output, f"{hint}_tree", axis=1)
    return (in_order(vals) if ordered else vals), True


def _reduce_trees(g: GraphBuilder, vals: str, class_rows: bool, hint: str) -> str:
    """Per-tree outputs ([T, N], [T, N, K], or with ``class_rows`` [T, K, N] or [rounds, K, N])
    summed over the trees: [N] or [N, K]."""
    total = g.reduce_sum(vals, [0], keepdims=False, hint=hint)
    return g.op("Transpose", [total], f"{hint}_rows", perm=[1, 0]) if class_rows else total


def digit_plan(ens: Ensemble, st: Stacked) -> _digits.Plan:
    """The grids of a float32 graph's exact sums: margins are at most S = max over outputs of
    the sum over trees of their largest |value| (plus what of the base score is not folded)."""
    T, L, K = st.n_trees, st.n_leaves, st.values.shape[1]
    peak = np.abs(st.values.astype(np.float64)).reshape(T, L, K).max(axis=1)  # [T, K]
    scale = float((peak.sum(axis=0) + np.abs(st.base_rest.astype(np.float64))).max())
    touches = np.zeros((T, K), bool)
    for t, k in enumerate(ens.output_index):
        touches[t, :] = k == -1
        if k >= 0:
            touches[t, k] = True
    divisor = float(ens.trees_per_output().min()) if ens.aggregation is Aggregation.MEAN else 1.0
    return _digits.plan(max(scale, 2.0**-99), int(touches.sum(axis=0).max()) + 1, divisor)


def leaf_margin(g: GraphBuilder, ens: Ensemble, st: Stacked, exit: Exit, x: Compared, internal: np.dtype) -> Margin:
    """From where the rows exit (``exit``) to the margin [N, K] (``internal``, see :func:`internal_dtype`):
    gather values, sum the trees (the base score is already in the first tree's values, see
    :func:`stack`), average (MEAN). ``x``: the compared input (for linear leaves).

    float64: summed in the library's accumulation dtype, in order (onnxruntime's ``ReduceSum``
    adds along the first axis in order): bit-identical to the libraries. float32 for a library
    that sums in float32 (XGBoost): likewise. float32 for one that sums in float64: exact sums of
    :mod:`_digits`, whose normalized digits decide the labels."""
    if st.linear is not None:
        offsets = (np.arange(st.n_trees, dtype=np.int64) * st.n_leaves)[:, None]
        gidx = g.op("Add", [exit.leaf_ids(g), g.const(offsets, "leaf_offset")], "leaf_global")
        vals = g.op("Gather", [g.const(st.values, "leaf_values"), gidx], "tree_values", axis=0)
        total = _reduce_trees(g, _linear_values(g, ens, st, gidx, vals, x), False, "margin_sum")
        return finish_sum(g, ens, st, total, st.values.dtype, internal)
    return _summed(g, ens, st, internal, lambda table, ordered, hint: _tree_values(g, ens, st, exit, table, ordered, hint), False)


def weighted_margin(g: GraphBuilder, ens: Ensemble, st: Stacked, weights: str, internal: np.dtype) -> Margin:
    """From leaf weights [T, N, L] (``internal``, summing to 1 per tree and row: the soft forms)
    to the margin [N, K]: each tree's weighted leaf values, summed as :func:`leaf_margin` sums.
    Labels follow the value (the forms are approximations: no exact digits)."""

    def weighted(table: np.ndarray, ordered: bool, hint: str) -> tuple[str, bool]:
        values = table.astype(internal).reshape(st.n_trees, st.n_leaves, -1)
        return g.op("MatMul", [weights, g.const(values, f"{hint}_T")], f"{hint}_tree"), False

    return _summed(g, ens, st, internal, weighted, True)


def _summed(
    g: GraphBuilder, ens: Ensemble, st: Stacked, internal: np.dtype,
    tree_values: Callable[[np.ndarray, bool, str], tuple[str, bool]], approximate: bool,
) -> Margin:
    """The margin from ``tree_values(table, ordered, hint)``: per-tree outputs from a [T * L, K]
    table of leaf values (see :func:`_tree_values`), in the ensemble's order if ``ordered``
    (plain sums, in the library's order; exact digit sums need no order). ``approximate``: a soft form (its products are not
    exact, so its labels follow the value). One output gathered as [T, N] is summed to [N] (one
    column less to carry through the digits) and made [N, 1] once at the end."""
    acc = np.dtype(ens.accumulate_dtype)
    flat = not approximate and st.values.shape[1] == 1 and not one_class_per_tree(ens)
    if internal == np.float64 or acc == np.float32:
        dtype = internal if approximate else acc
        total = _reduce_trees(g, *tree_values(st.values.astype(dtype), True, "leaf_values"), "margin_sum")
        return finish_sum(g, ens, st, total if not flat else g.unsqueeze(total, [1], "margin_sum_2d"), dtype, internal)
    p = digit_plan(ens, st)
    base = _digits.split(st.base_rest, p)
    sums = []
    for k, table in enumerate(_digits.split(st.values, p)):
        total = _reduce_trees(g, *tree_values(table, False, f"leaf_digits{k}"), f"digit_sum{k}")
        if np.any(base[k]):
            total = g.op("Add", [total, g.const(base[k], f"base_digit{k}")], f"digit_sum{k}_base")
        sums.append(total)
    mean = ens.aggregation is Aggregation.MEAN
    if mean and len(set(ens.trees_per_output().tolist())) > 1:
        raise UnsupportedModelError("an averaged ensemble with a different number of trees per output needs --dtype float64")
    value, residual = _digits.fold(g, sums, p, "margin_digits", residual=ens.link is Link.EXP and not mean,
                                   divisor=ens.trees_per_output() if mean else None)
    if flat:
        value = g.unsqueeze(value, [1], "margin")
        residual = None if residual is None else g.unsqueeze(residual, [1], "margin_residual")
    if approximate:
        return Margin(value, np.dtype(np.float32), residual=residual)
    return Margin(value, np.dtype(np.float32), sums, p, residual, flat=flat)


def finish_sum(g: GraphBuilder, ens: Ensemble, st: Stacked, total: str, acc: np.dtype, internal: np.dtype) -> Margin:
    """A plain sum over the trees [N, K] (``acc``) averaged (MEAN), plus the base score not
    folded into the values, as ``internal``."""
    if ens.aggregation is Aggregation.MEAN:
        total = g.op("Div", [total, g.const(ens.trees_per_output().astype(acc), "n_trees")], "margin_mean")
    if np.any(st.base_rest):
        total = g.op("Add", [total, g.const(st.base_rest.astype(acc), "base_score")], "margin_base")
    if acc == internal:
        return Margin(g.op("Identity", [total], "margin"), internal)
    return Margin(g.op("Cast", [total], "margin", to=onnx.helper.np_dtype_to_tensor_dtype(internal)), internal)


def leaves_output(g: GraphBuilder, exit: Exit) -> str:
    """The ``leaves`` output [N, T] (``--leaves``): each row's leaf id per tree."""
    return g.op("Transpose", [exit.leaf_ids(g)], out="leaves", perm=[1, 0])

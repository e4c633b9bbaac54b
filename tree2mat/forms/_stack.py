"""The first pass of the exact forms: the trees stacked into padded tensors (:class:`Stacked`:
every tree's tests, thresholds per dtype, leaf values, categories and linear leaves, padded to
the largest tree), and the sizes the forms budget their memory with."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

import numpy as np

from tree2mat.errors import UnsupportedModelError
from tree2mat.ir.core import Aggregation, Ensemble
from tree2mat.ir.limits import Declared
from tree2mat.ir.thresholds import compare_dtype, graph_categories, graph_thresholds

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
    base_tree: np.ndarray  # int64 [K]: the tree each output's base score is folded into (-1: none)
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
    base_tree = np.full(K, -1, np.int64)
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
        base_tree[fold] = t
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
        nan_left=nan_left, values=values, base_rest=base_rest.astype(acc), base_tree=base_tree,
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


def one_class_per_tree(ens: Ensemble) -> bool:
    """Boosted multiclass: tree t adds to class t % K only (XGBoost, LightGBM, scikit-learn)."""
    K, T = ens.n_outputs, ens.n_trees
    return K > 1 and T % K == 0 and np.array_equal(ens.output_index, np.arange(T) % K)

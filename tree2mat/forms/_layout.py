"""Pieces every exact form shares: trees stacked into padded 3-D tensors, the nodes' tests
(which nodes send a row right) and the leaf-value aggregation.

Tests follow DESIGN.md's exactness rules: every node is one ``value > threshold`` on a column
of an augmented input (:func:`node_tests`: x, -x for nodes that send NaN right, IsNaN for
``t = +inf`` splits, x with 0 made NaN for missing-type Zero, one column per categorical node),
thresholds come from :mod:`tree2mat.ir.thresholds`, values are picked by ``Gather`` /
``GatherElements`` (exact, NaN/inf-safe) — so no ``Sign(0)`` ever appears. Leaf values are
gathered by leaf id in float64, never multiplied."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

import numpy as np
import onnx

from tree2mat.errors import UnsupportedModelError
from tree2mat.forms._graph import GraphBuilder, GraphOptions
from tree2mat.ir.core import Aggregation, CategoryCodes, Comparison, Ensemble
from tree2mat.ir.thresholds import FLOAT32, compare_dtype, graph_categories, graph_thresholds

#: Name of the internal leaf-id tensor [T, N] (int64) in every exact form; ``verify`` exposes it
#: to check routing exactly.
LEAF_TENSOR = "leaf"

#: Largest dense constants a form builds. Beyond this the dense layout is impractical (memory and
#: work per row grow with trees x nodes x leaves): a 20 000-leaf tree needs 1.5 GiB and hours of
#: verification. Sparse layouts for such trees are planned; until then such models are refused.
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
    nan_fill: np.ndarray  # compare dtype [T, I]: -inf where NaN goes left, NaN where it goes right
    values: np.ndarray  # accumulate dtype [T * L, K]: tree t's leaf j at row t * L + j, 0 elsewhere
    base_rest: np.ndarray  # accumulate dtype [K]: base score not folded into a tree's values
    # Categorical nodes (M of them) on categorical features (slots, F_c of them):
    cat_position: np.ndarray  # int64 [M]: flat position t * I + i of each categorical node
    cat_slot: np.ndarray  # int64 [M]: the node's feature slot
    cat_features: np.ndarray  # int64 [F_c]: input column of each slot
    cat_values: np.ndarray  # compare dtype [F_c, C]: the slot's category values, NaN-padded
    cat_direction: np.ndarray  # float32 [M * (C + 1)]: node m, code c (0: no category) -> -1 left, +1 right
    cat_nan_left: np.ndarray | None  # bool [M]: where NaN goes, when that differs from code 0 somewhere
    zero_missing: np.ndarray | None  # bool [T * I]: nodes where 0 counts as missing (None: none)
    # Linear leaves, padded to P terms (None without linear trees):
    linear: tuple[np.ndarray, np.ndarray, np.ndarray] | None  # const [T*L], feature [T*L, P], coef [T*L, P]


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
    nan_fill = np.zeros((T, I), cmp)
    acc = np.dtype(ens.accumulate_dtype)
    base = ens.base_score.astype(acc)
    values = np.zeros((T * L, K), acc)
    pending = np.ones(K, bool) if ens.aggregation is Aggregation.SUM else np.zeros(K, bool)
    for t, tree in enumerate(ens.trees):
        n = tree.n_internal
        feature[t, :n] = tree.feature
        threshold[t, :n] = graph_thresholds(tree.threshold, ens.comparison, cmp)
        nan_fill[t, :n] = np.where(tree.default_left, -np.inf, np.nan)
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
        nan_fill=nan_fill, values=values, base_rest=base_rest.astype(acc),
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
    return {
        "cat_position": np.asarray(position, np.int64),
        "cat_slot": np.asarray(slots, np.int64),
        "cat_features": np.asarray(features, np.int64),
        "cat_values": graph_categories(values, cmp),
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


def categorical_bytes_per_row(ens: Ensemble) -> int:
    """Runtime bytes per row of the categorical intermediates ([N, F_c, C] and [N, M])."""
    features = _category_sets(ens)
    width = max((len(v) for v in features.values()), default=0)
    n_nodes = sum(tree.cat_nodes.size for tree in ens.trees)
    return len(features) * width * 13 + n_nodes * 29


#: Largest node table (traverse form): beyond protobuf's 2 GiB the graph is written as ONNX
#: external data; this cap only stops a model no machine could score.
MAX_NODE_TABLE_BYTES = 32 * 2**30


def constant_limit(form: str) -> int:
    """The largest constants a form may build: the node table of ``traverse`` grows with the
    nodes only; the dense forms' [T, I, L] matrices are impractical long before."""
    return MAX_NODE_TABLE_BYTES if form == "traverse" else MAX_INITIALIZER_BYTES


def check_size(what: str, form: str, n_bytes: int) -> None:
    limit = constant_limit(form)
    if n_bytes <= limit:
        return
    hint = (
        "train with fewer trees or leaves" if form == "traverse" else
        "use --form traverse (memory grows with the nodes, not nodes x leaves), or train with "
        "fewer leaves (max_depth / max_leaf_nodes) or fewer trees"
    )
    raise UnsupportedModelError(
        f"the {what} needs {n_bytes / 2**30:.2f} GiB of constants, over the {limit / 2**30:.2f} GiB "
        f"limit of its graph's constants; {hint}"
    )


def compared_input(g: GraphBuilder, ens: Ensemble, opts: GraphOptions, dtype: np.dtype | None = None) -> str:
    """The graph input, cast to the dtype the comparisons run in (sklearn trees cast float64
    input to float32 before comparing; so does the graph), or to ``dtype`` if given."""
    cmp = compare_dtype(ens.source_dtype, opts.dtype) if dtype is None else np.dtype(dtype)
    x = "input" if cmp == np.dtype(opts.dtype) else g.op("Cast", ["input"], "x_cmp", to=1 if cmp == FLOAT32 else 11)
    src_missing = np.float64(np.dtype(ens.source_dtype).type(ens.missing_value))
    with np.errstate(over="ignore"):
        exact = np.float64(cmp.type(src_missing)) == src_missing
    if not np.isnan(ens.missing_value) and exact:
        # A value the library treats as missing (XGBoost's `missing`) becomes NaN. (One that the
        # compared dtype cannot hold, e.g. 1e-200 for a float64 model fed float32 rows, is
        # equal to no input the library sees: nothing to replace.)
        missing = g.op("Equal", [x, g.const(cmp.type(src_missing), "missing_value")], "is_missing")
        x = g.op("Where", [missing, g.const(cmp.type(np.nan), "nan_value"), x], "x_missing")
    if ens.zero_band:
        # |x| <= band becomes 0 (LightGBM); the band is rounded down to cmp exactly as thresholds.
        band = graph_thresholds(np.asarray([ens.zero_band]), Comparison.LE, cmp)[0]
        tiny = g.op("LessOrEqual", [g.op("Abs", [x], "x_abs"), g.const(band, "zero_band")], "x_tiny")
        x = g.op("Where", [tiny, g.const(cmp.type(0), "zero_value"), x], "x_banded")
    return x


def node_values(g: GraphBuilder, st: Stacked, x: str, dtype: np.dtype) -> tuple[str, str]:
    """Each node's feature value [N, T * I] (``x``, of ``dtype``), and where it counts as
    missing (bool): NaN, or 0 at LightGBM's missing-type-Zero nodes."""
    flat = st.n_trees * st.n_internal
    gathered = g.op("Gather", [x, g.const(st.feature.reshape(flat), "node_feature")], "x_nodes", axis=1)
    missing = g.op("IsNaN", [gathered], "x_isnan")
    if st.zero_missing is not None:
        zero = g.op("Equal", [gathered, g.const(np.dtype(dtype).type(0), "zero_cmp")], "x_zero")
        zero = g.op("And", [zero, g.const(st.zero_missing, "zero_missing")], "x_zero_missing")
        missing = g.op("Or", [missing, zero], "x_missing_node")
    return gathered, missing


#: Columns of the augmented input (:func:`augmented_input`), in this order; each present only
#: when some node reads it. F columns each, except ``cat`` (one per categorical node: 1 where that
#: node sends the row right).
BLOCKS = ("x", "negx", "w", "negw", "nanx", "nanw", "cat")


@dataclass(frozen=True)
class NodeTests:
    """Every node's test as one ``value > threshold`` on a column of the augmented input, [T, I]
    in :func:`stack`'s order. The test holds where the row goes right, except at ``swap`` nodes,
    where it holds where the row goes left (NaN, false in every test, goes right there)."""

    column: np.ndarray  # int64 [T, I]
    threshold: np.ndarray  # compare dtype [T, I]
    swap: np.ndarray  # bool [T, I]
    blocks: tuple[str, ...]  # the augmented input's blocks, in column order


def node_tests(ens: Ensemble, st: Stacked) -> NodeTests:
    """Each test as one ``value > threshold``, NaN going where the library sends it.

    A node that sends NaN left reads x and goes right where ``x > t``. One that sends NaN right
    reads -x and goes left where ``-x > -nextup(t)``, that is ``x <= t`` (a swap node); with
    ``t = +inf`` (NaN apart from everything) it reads IsNaN(x) instead and goes right where it is
    1. LightGBM's missing-type-Zero nodes read ``w``: x with 0 made NaN. Categorical nodes read
    their own column. Padding nodes read column 0 against +inf (never true)."""
    T, I, F = st.n_trees, st.n_internal, ens.n_features
    inf = st.threshold.dtype.type(np.inf)
    valid = np.arange(I)[None, :] < np.asarray([t.n_internal for t in ens.trees])[:, None]
    zero = np.zeros((T, I), bool) if st.zero_missing is None else st.zero_missing.reshape(T, I)
    cat: np.ndarray = np.zeros(T * I, bool)
    cat[st.cat_position] = True
    cat = cat.reshape(T, I)
    nan_left = np.isneginf(st.nan_fill)
    nan_apart = ~nan_left & (st.threshold == inf)
    swap = valid & ~cat & ~nan_left & ~nan_apart
    code = np.where(nan_left, 2 * zero, np.where(nan_apart, 4 + zero, 2 * zero + 1))
    code = np.where(cat, 6, np.where(valid, code, 0))
    with np.errstate(over="ignore"):  # nextup(max) = inf: -x > -inf, left unless NaN
        negated = -np.nextafter(st.threshold, inf)
    half = st.threshold.dtype.type(0.5)
    threshold = np.where(nan_left, st.threshold, np.where(nan_apart, half, negated))
    threshold = np.where(cat, half, np.where(valid, threshold, inf)).astype(st.threshold.dtype)
    index = st.feature.copy()
    index.reshape(-1)[st.cat_position] = np.arange(st.cat_position.size)
    index[~valid] = 0
    width = [st.cat_position.size if b == "cat" else F for b in BLOCKS]
    used = sorted({int(c) for c in np.unique(code)} | {0})
    offset = np.zeros(len(BLOCKS), np.int64)
    offset[used] = np.cumsum([0] + [width[c] for c in used])[:-1]
    return NodeTests(offset[code] + index, threshold, swap, tuple(BLOCKS[c] for c in used))


def augmented_input(g: GraphBuilder, ens: Ensemble, st: Stacked, x: str, blocks: tuple[str, ...]) -> str:
    """[N, C]: the columns the node tests read (see :data:`BLOCKS`)."""
    cmp = st.threshold.dtype
    to = onnx.helper.np_dtype_to_tensor_dtype(cmp)
    made: dict[str, str] = {"x": x}
    if {"w", "negw", "nanw"} & set(blocks):
        is_zero = g.op("Equal", [x, g.const(cmp.type(0), "zero_cmp")], "x_is_zero")
        made["w"] = g.op("Where", [is_zero, g.const(cmp.type(np.nan), "nan_cmp"), x], "w")
    for b in blocks:
        if b.startswith("neg"):
            made[b] = g.op("Neg", [made[b[3:]]], b)
        elif b.startswith("nan"):
            made[b] = g.op("Cast", [g.op("IsNaN", [made[b[3:]]], f"{b}_bool")], b, to=to)
        elif b == "cat":
            right = g.op("Not", [categorical_left(g, ens, st, x)], "cat_right")
            made[b] = g.op("Cast", [right], "cat_right_cmp", to=to)
    parts = [made[b] for b in blocks]
    return parts[0] if len(parts) == 1 else g.op("Concat", parts, "x_augmented", axis=1)


def row_count(g: GraphBuilder, x: str) -> str:
    """The number of rows of ``x``, as a 1-D int64 tensor of one element (for shapes)."""
    start, stop = g.const(np.asarray([0], np.int64), "n_start"), g.const(np.asarray([1], np.int64), "n_stop")
    return g.op("Slice", [g.op("Shape", [x], "x_shape"), start, stop], "n_rows")


def test_bits(
    g: GraphBuilder, ens: Ensemble, st: Stacked, x: str, tests: NodeTests,
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
        n_rows = row_count(g, x)
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
    """A per-node tensor [N, T * I] with the categorical nodes' entries taken from
    ``categorical`` [N, M] (``st.cat_position`` order) instead of ``numeric``."""
    flat = st.n_trees * st.n_internal
    both = g.op("Concat", [numeric, categorical], f"{hint}_all", axis=1)
    perm = np.arange(flat, dtype=np.int64)
    perm[st.cat_position] = flat + np.arange(st.cat_position.size)
    return g.op("Gather", [both, g.const(perm, "cat_perm")], f"{hint}_cat", axis=1)


def categorical_left(g: GraphBuilder, ens: Ensemble, st: Stacked, x: str) -> str:
    """Bool [N, M]: True where categorical node m (``st.cat_position`` order) sends the row left.

    Each categorical feature's value becomes a code (1 + index among the feature's categories,
    0 for anything else: NaN, unseen values) by exact equality; each node then looks its direction
    up by code."""
    x_cat = g.op("Gather", [x, g.const(st.cat_features, "cat_features")], "x_cat", axis=1)
    x_cat = _category_codes(g, ens.category_codes, x_cat, st.threshold.dtype)
    xc = g.unsqueeze(x_cat, [2], "x_cat3")
    eq = g.op("Cast", [g.op("Equal", [xc, g.const(st.cat_values, "cat_values")], "cat_eq")], "cat_eqf", to=1)
    width = st.cat_values.shape[1]
    ranks = g.const(np.arange(1, width + 1, dtype=np.float32), "cat_rank")
    code = g.reduce_sum(g.op("Mul", [eq, ranks], "cat_ranked"), [2], keepdims=False, hint="cat_code_f")
    codes = g.op("Cast", [code], "cat_code", to=7)
    node_codes = g.op("Gather", [codes, g.const(st.cat_slot, "cat_slot")], "cat_node_code", axis=1)
    offsets = np.arange(st.cat_slot.size, dtype=np.int64) * (width + 1)
    index = g.op("Add", [node_codes, g.const(offsets, "cat_offset")], "cat_index")
    direction = g.op("Gather", [g.const(st.cat_direction, "cat_direction"), index], "cat_dir", axis=0)
    cat_left = g.op("Less", [direction, g.const(np.float32(0), "zero_f32")], "cat_left")
    if st.cat_nan_left is not None:  # NaN goes elsewhere than unknown categories (XGBoost)
        node_x = g.op("Gather", [x_cat, g.const(st.cat_slot, "cat_slot_x")], "cat_node_x", axis=1)
        isnan = g.op("IsNaN", [node_x], "cat_isnan")
        nan_part = g.op("And", [isnan, g.const(st.cat_nan_left, "cat_nan_left")], "cat_nan_goes_left")
        rest = g.op("And", [g.op("Not", [isnan], "cat_notnan"), cat_left], "cat_value_goes_left")
        cat_left = g.op("Or", [nan_part, rest], "cat_left_nan")
    return cat_left


def _category_codes(g: GraphBuilder, rule: CategoryCodes, x: str, dtype: np.dtype) -> str:
    """The category codes of values ``x`` (``dtype``) under ``rule`` (see
    :func:`tree2mat.ir.core.category_codes`): -1 for values that match nothing, NaN stays NaN
    (every comparison with NaN is false, and Floor keeps it)."""
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


def _linear_values(g: GraphBuilder, ens: Ensemble, st: Stacked, gidx: str, vals: str, x: str) -> str:
    """Tree outputs [T, N, K] with linear leaves: constant plus coefficient times feature, added
    term by term in float64 as LightGBM does; the plain value where a used feature is NaN. Each
    tree's output lands in its own column (``output_index``)."""
    assert st.linear is not None
    const, feature, coef = st.linear
    P = feature.shape[1]
    out = g.op("Gather", [g.const(const, "linear_const"), gidx], "lin_acc", axis=0)  # [T, N]
    if P:
        x64 = x if st.threshold.dtype == np.float64 else g.op("Cast", [x], "x_f64", to=11)
        # Per tree and row, the leaf's feature ids [N, T * P] and the values there (GatherElements).
        feats = g.op("Gather", [g.const(np.maximum(feature, 0), "linear_feature"), gidx], "lin_feat", axis=0)
        used = g.op("Gather", [g.const(feature >= 0, "linear_used"), gidx], "lin_used", axis=0)
        coefs = g.op("Gather", [g.const(coef, "linear_coef"), gidx], "lin_coef", axis=0)
        rows_first = g.op("Transpose", [feats], "lin_feat_rows", perm=[1, 0, 2])
        flat = g.op("Reshape", [rows_first, g.const(np.asarray([0, -1], np.int64), "lin_flat_shape")], "lin_feat_flat")
        xs = g.op("GatherElements", [x64, flat], "lin_x_flat", axis=1)
        shape = g.const(np.asarray([-1, st.n_trees, P], np.int64), "lin_shape")
        xs = g.op("Transpose", [g.op("Reshape", [xs, shape], "lin_x_rows")], "lin_x", perm=[1, 0, 2])
        nan = g.op("And", [used, g.op("IsNaN", [xs], "lin_isnan")], "lin_nan")
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


def leaf_margin(g: GraphBuilder, ens: Ensemble, st: Stacked, leaf: str, x: str) -> str:
    """From leaf ids [T, N] (int64) to the margin [N, K] float64: gather values, sum the trees in
    order in the library's accumulation dtype (the base score is already in the first tree's
    values, see :func:`stack`). ``x``: the compared input (for linear leaves).

    Values are picked per tree with ``GatherElements`` on the last axis of a [T, L * K] table
    (onnxruntime's fast layout; a ``Gather`` from the flat table by global id is several times
    slower)."""
    if st.linear is not None:
        offsets = (np.arange(st.n_trees, dtype=np.int64) * st.n_leaves)[:, None]
        gidx = g.op("Add", [leaf, g.const(offsets, "leaf_offset")], "leaf_global")
        vals = g.op("Gather", [g.const(st.values, "leaf_values"), gidx], "tree_values", axis=0)
        return _sum_trees(g, ens, st, _linear_values(g, ens, st, gidx, vals, x), st.values.dtype)
    K = st.values.shape[1]
    T = st.n_trees
    if one_class_per_tree(ens):
        # One tree per class and round (boosted multiclass): each tree's own class value only,
        # [rounds, K, N] summed over the rounds, instead of K values per tree (K - 1 of them 0).
        own = st.values.reshape(T, st.n_leaves, K)[np.arange(T), :, np.arange(T) % K]
        vals = g.op("GatherElements", [g.const(own, "leaf_values"), leaf], "tree_values_own", axis=1)
        rounds = g.op("Reshape", [vals, g.const(np.asarray([T // K, K, -1], np.int64), "rounds_shape")], "tree_values_rounds")
        return _sum_trees(g, ens, st, rounds, st.values.dtype, class_rows=True)
    table = g.const(st.values.reshape(T, st.n_leaves * K), "leaf_values")
    if K == 1:
        vals = g.unsqueeze(g.op("GatherElements", [table, leaf], "tree_values_2d", axis=1), [2], "tree_values")
    else:
        leaf3 = g.unsqueeze(leaf, [2], "leaf_3d")
        idx = g.op("Add", [g.op("Mul", [leaf3, g.const(np.int64(K), "n_outputs_i64")], "leaf_k"),
                           g.const(np.arange(K, dtype=np.int64), "output_k")], "leaf_value_index")
        flat_shape = g.const(np.asarray([0, -1], np.int64), "per_tree_shape")
        picked = g.op("GatherElements", [table, g.op("Reshape", [idx, flat_shape], "leaf_value_flat")], "tree_values_flat", axis=1)
        vals = g.op("Reshape", [picked, g.const(np.asarray([0, -1, K], np.int64), "tree_values_shape")], "tree_values")
    return _sum_trees(g, ens, st, vals, st.values.dtype)


def weighted_margin(g: GraphBuilder, ens: Ensemble, st: Stacked, weights: str) -> str:
    """From leaf weights [T, N, L] (float64, summing to 1 per tree and row: the soft forms) to
    the margin [N, K] float64: each tree's weighted leaf values, summed as :func:`leaf_margin` sums."""
    values = st.values.astype(np.float64).reshape(st.n_trees, st.n_leaves, -1)
    vals = g.op("MatMul", [weights, g.const(values, "leaf_values_T")], "tree_values")
    return _sum_trees(g, ens, st, vals, np.dtype(np.float64))


def _sum_trees(g: GraphBuilder, ens: Ensemble, st: Stacked, vals: str, acc: np.dtype, class_rows: bool = False) -> str:
    """Per-tree outputs [T, N, K] (``acc``; with ``class_rows``, [rounds, K, N]) summed over the
    trees, averaged (MEAN), plus the base score not folded into the values; float64 [N, K]."""
    total = g.reduce_sum(vals, [0], keepdims=False, hint="margin_sum")
    if class_rows:
        total = g.op("Transpose", [total], "margin_sum_rows", perm=[1, 0])
    if ens.aggregation is Aggregation.MEAN:
        total = g.op("Div", [total, g.const(ens.trees_per_output().astype(acc), "n_trees")], "margin_mean")
    if np.any(st.base_rest):
        total = g.op("Add", [total, g.const(st.base_rest.astype(acc), "base_score")], "margin_base")
    if acc == np.float64:
        return g.op("Identity", [total], "margin")
    return g.op("Cast", [total], "margin", to=11)


def leaves_output(g: GraphBuilder, leaf: str) -> str:
    return g.op("Transpose", [leaf], out="leaves", perm=[1, 0])

"""The exact forms' last pass: the leaf values of the exit (:class:`_exit.Exit`) gathered, never
multiplied, and summed exactly (:mod:`_digits`) or in the library's own dtype and order (linear
leaves computed from the input); the margin the head reads."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx

from tree2mat.errors import UnsupportedModelError
from tree2mat.forms import _digits, _exit, _nodes, _stack
from tree2mat.forms._graph import TREE_MASK, GraphBuilder, GraphOptions
from tree2mat.forms._heads import Margin
from tree2mat.ir.core import Aggregation, Ensemble, Link


def _linear_values(g: GraphBuilder, ens: Ensemble, st: _stack.Stacked, gidx: str, vals: str, x: _nodes.Compared) -> str:
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


#: A form's leaf values [T * L, K] and each tree's value where a tree mask drops it [T, K]
#: (:func:`dropped_values`), in one dtype or as one digit of each (:mod:`_digits`).
Tables = tuple[np.ndarray, np.ndarray]


def tree_mask(g: GraphBuilder, ens: Ensemble, kind: str | None) -> str | None:
    """The graph input :data:`TREE_MASK` of ``kind`` (:attr:`GraphOptions.tree_mask`) as bool
    [T, N] or [T, 1], trees in the ensemble's order; None without one. Refused for an averaged
    ensemble, whose mean over the kept trees would need a count known only at run time."""
    if kind is None:
        return None
    if ens.aggregation is Aggregation.MEAN:
        raise UnsupportedModelError(
            "--tree-mask drops trees from a sum (boosting: staged predictions); this model averages its trees, "
            "whose mean over the kept ones the exact sums cannot divide by"
        )
    if kind == "request":
        return g.unsqueeze(TREE_MASK, [1], "tree_mask_trees")
    return g.op("Transpose", [TREE_MASK], "tree_mask_trees", perm=[1, 0])


def dropped_values(st: _stack.Stacked, base: np.ndarray) -> np.ndarray:
    """[T, K]: what a tree adds where a tree mask drops it: 0, or for the tree each output's base
    score is folded into (:func:`_stack.stack`) that base score, so that the kept trees add up in
    the library's order after it."""
    out = np.zeros((st.n_trees, st.values.shape[1]), st.values.dtype)
    folded = np.flatnonzero(st.base_tree >= 0)
    out[st.base_tree[folded], folded] = np.asarray(base, np.float64)[folded]
    return out


def _in_exit_order(g: GraphBuilder, exit: _exit.Exit, mask: str | None) -> str | None:
    """The tree mask (:func:`tree_mask`) with the trees in the exit's order."""
    if mask is None or np.array_equal(exit.order, np.arange(exit.order.size)):
        return mask
    return g.op("Gather", [mask, g.const(exit.order, "tree_mask_order")], "tree_mask_exit", axis=0)


def internal_dtype(ens: Ensemble, opts: GraphOptions) -> np.dtype:
    """The dtype of the graph's margin and head: float32 (the graph contract: no float64 tensor)
    unless the graph takes float64 (``--dtype float64``) or the model has linear leaves (LightGBM
    multiplies inputs by float64 coefficients, which float32 cannot repeat)."""
    if np.dtype(opts.dtype) == np.float64 or any(t.is_linear for t in ens.trees):
        return np.dtype(np.float64)
    return np.dtype(np.float32)


def _tree_values(
    g: GraphBuilder, ens: Ensemble, st: _stack.Stacked, exit: _exit.Exit, tables: Tables, ordered: bool, hint: str, mask: str | None = None,
) -> tuple[str, bool]:
    """Each tree's values where the rows exit (``exit``) from ``table`` [T * L, K]
    (:class:`Stacked`'s layout): [T, N] (one output: summed to [N]), or (the flag: class rows)
    [T, K, N], or for boosted multiclass [rounds, K, N]. The trees come in the exit's order unless ``ordered``
    (a sum whose rounding depends on the order) or boosted multiclass.

    Values are picked per tree with ``GatherElements`` on the last axis of a [T, S * K] table
    (onnxruntime's fast layout; a ``Gather`` from the flat table by global id is several times
    slower). ``tables``: the leaf values and each tree's value where the ``mask`` [T, N or 1]
    (trees in the ensemble's order, see :func:`tree_mask`) drops it."""
    table, dropped = tables
    K = table.shape[1]
    T = st.n_trees
    slotted = exit.per_slot(table, st.n_leaves)  # [T, S, K]
    in_exit = _in_exit_order(g, exit, mask)

    def kept(vals: str, column: np.ndarray, name: str) -> str:  # [T, N], the dropped trees' values [T] in the exit's order
        if in_exit is None:
            return vals
        return g.op("Where", [in_exit, vals, g.const(np.ascontiguousarray(column[:, None]), f"{name}_dropped")], f"{name}_kept")

    def in_order(vals: str) -> str:
        if np.array_equal(exit.order, np.arange(T)):
            return vals
        return g.op("Gather", [vals, g.const(exit.position, f"{hint}_tree_position")], f"{hint}_in_order", axis=0)

    if _stack.one_class_per_tree(ens):
        # One tree per class and round (boosted multiclass): each tree's own class value only,
        # [rounds, K, N] summed over the rounds, instead of K values per tree (K - 1 of them 0).
        own = slotted[np.arange(T), :, exit.order % K]
        vals = g.op("GatherElements", [g.const(own, f"{hint}_own"), exit.index], f"{hint}_tree_own", axis=1)
        vals = kept(vals, dropped[exit.order, exit.order % K], f"{hint}_own")
        shape = g.const(np.asarray([T // K, K, -1], np.int64), f"{hint}_rounds_shape")
        return g.op("Reshape", [in_order(vals), shape], f"{hint}_tree_rounds"), True
    if K == 1:  # [T, N], summed to [N]
        vals = g.op("GatherElements", [g.const(slotted.reshape(T, -1), hint), exit.index], f"{hint}_tree", axis=1)
        vals = kept(vals, dropped[exit.order, 0], hint)
        return (in_order(vals) if ordered else vals), False
    # Each output's values gathered on their own ([T, N] each, the fast layout), stacked as
    # [T, K, N] (class rows): an index leaf K + k over [T, N, K] costs a Mul and an Add that
    # broadcast over the short last axis, a large part of a run (benchmarks/RESULTS.md,
    # "Measurements cited by the code").
    per_output = [
        g.unsqueeze(kept(g.op("GatherElements", [g.const(np.ascontiguousarray(slotted[:, :, k]), f"{hint}_{k}"), exit.index], f"{hint}_output{k}", axis=1),
                         dropped[exit.order, k], f"{hint}_output{k}"),
                    [1], f"{hint}_output{k}_row")
        for k in range(K)
    ]
    vals = g.op("Concat", per_output, f"{hint}_tree", axis=1)
    return (in_order(vals) if ordered else vals), True


def _reduce_trees(g: GraphBuilder, vals: str, class_rows: bool, hint: str) -> str:
    """Per-tree outputs ([T, N], [T, N, K], or with ``class_rows`` [T, K, N] or [rounds, K, N])
    summed over the trees: [N] or [N, K]."""
    total = g.reduce_sum(vals, [0], keepdims=False, hint=hint)
    return g.op("Transpose", [total], f"{hint}_rows", perm=[1, 0]) if class_rows else total


def digit_plan(ens: Ensemble, st: _stack.Stacked, dropped: np.ndarray | float = 0.0) -> _digits.Plan:
    """The grids of a float32 graph's exact sums: margins are at most S = max over outputs of
    the sum over trees of their largest |value| (plus what of the base score is not folded, and
    ``dropped`` [K]: what a tree mask's dropped trees add, see :func:`dropped_values`)."""
    T, L, K = st.n_trees, st.n_leaves, st.values.shape[1]
    peak = np.abs(st.values.astype(np.float64)).reshape(T, L, K).max(axis=1)  # [T, K]
    scale = float((peak.sum(axis=0) + np.abs(st.base_rest.astype(np.float64)) + dropped).max())
    touches = np.zeros((T, K), bool)
    for t, k in enumerate(ens.output_index):
        touches[t, :] = k == -1
        if k >= 0:
            touches[t, k] = True
    divisor = float(ens.trees_per_output().min()) if ens.aggregation is Aggregation.MEAN else 1.0
    return _digits.plan(max(scale, 2.0**-99), int(touches.sum(axis=0).max()) + 1, divisor)


def leaf_margin(
    g: GraphBuilder, ens: Ensemble, st: _stack.Stacked, exit: _exit.Exit, x: _nodes.Compared, internal: np.dtype, mask: str | None = None,
) -> Margin:
    """From where the rows exit (``exit``) to the margin [N, K] (``internal``, see :func:`internal_dtype`):
    gather values, sum the trees (the base score is already in the first tree's values, see
    :func:`stack`), average (MEAN). ``x``: the compared input (for linear leaves).

    float64: summed in the library's accumulation dtype, in order (onnxruntime's ``ReduceSum``
    adds along the first axis in order): bit-identical to the libraries. float32 for a library
    that sums in float32 (XGBoost): likewise. float32 for one that sums in float64: exact sums of
    :mod:`_digits`, whose normalized digits decide the labels. ``mask``: a kind of tree mask
    (:func:`tree_mask`), which drops trees before the sum."""
    trees = tree_mask(g, ens, mask)
    if st.linear is not None:
        offsets = (np.arange(st.n_trees, dtype=np.int64) * st.n_leaves)[:, None]
        gidx = g.op("Add", [exit.leaf_ids(g), g.const(offsets, "leaf_offset")], "leaf_global")
        vals = g.op("Gather", [g.const(st.values, "leaf_values"), gidx], "tree_values", axis=0)
        linear = _linear_values(g, ens, st, gidx, vals, x)  # (no base score: nothing folded to keep)
        if trees is not None:
            linear = g.op("Where", [g.unsqueeze(trees, [2], "tree_mask_linear"), linear, g.const(st.values.dtype.type(0), "lin_zero_acc")],
                          "tree_values_kept")
        total = _reduce_trees(g, linear, False, "margin_sum")
        return finish_sum(g, ens, st, total, st.values.dtype, internal)
    return _summed(g, ens, st, internal, lambda tables, ordered, hint: _tree_values(g, ens, st, exit, tables, ordered, hint, trees), False,
                   trees is not None)


def weighted_margin(g: GraphBuilder, ens: Ensemble, st: _stack.Stacked, weights: str, internal: np.dtype, mask: str | None = None) -> Margin:
    """From leaf weights [T, N, L] (``internal``, summing to 1 per tree and row: the soft forms)
    to the margin [N, K]: each tree's weighted leaf values, summed as :func:`leaf_margin` sums
    (``mask``: as there). Labels follow the value (the forms are approximations: no exact digits)."""
    trees = tree_mask(g, ens, mask)

    def weighted(tables: Tables, ordered: bool, hint: str) -> tuple[str, bool]:
        values = tables[0].astype(internal).reshape(st.n_trees, st.n_leaves, -1)
        vals = g.op("MatMul", [weights, g.const(values, f"{hint}_T")], f"{hint}_tree")
        if trees is not None:
            dropped = g.const(tables[1].astype(internal)[:, None, :], f"{hint}_dropped")
            vals = g.op("Where", [g.unsqueeze(trees, [2], "tree_mask_weighted"), vals, dropped], f"{hint}_kept")
        return vals, False

    return _summed(g, ens, st, internal, weighted, True, trees is not None)


def _summed(
    g: GraphBuilder, ens: Ensemble, st: _stack.Stacked, internal: np.dtype,
    tree_values: Callable[[Tables, bool, str], tuple[str, bool]], approximate: bool, masked: bool = False,
) -> Margin:
    """The margin from ``tree_values(tables, ordered, hint)``: per-tree outputs from a [T * L, K]
    table of leaf values and the [T, K] values of dropped trees (see :func:`_tree_values`;
    ``masked``: some may be), in the ensemble's order if ``ordered``
    (plain sums, in the library's order; exact digit sums need no order). ``approximate``: a soft form (its products are not
    exact, so its labels follow the value). One output gathered as [T, N] is summed to [N] (one
    column less to carry through the digits) and made [N, 1] once at the end."""
    acc = np.dtype(ens.accumulate_dtype)
    dropped = dropped_values(st, ens.base_score) if masked else np.zeros((st.n_trees, st.values.shape[1]), st.values.dtype)
    flat = not approximate and st.values.shape[1] == 1 and not _stack.one_class_per_tree(ens)
    if internal == np.float64 or acc == np.float32:
        dtype = internal if approximate else acc
        total = _reduce_trees(g, *tree_values((st.values.astype(dtype), dropped.astype(dtype)), True, "leaf_values"), "margin_sum")
        return finish_sum(g, ens, st, total if not flat else g.unsqueeze(total, [1], "margin_sum_2d"), dtype, internal)
    p = digit_plan(ens, st, np.abs(dropped.astype(np.float64)).sum(axis=0))
    base = _digits.split(st.base_rest, p)
    sums = []
    for k, tables in enumerate(zip(_digits.split(st.values, p), _digits.split(dropped, p))):
        total = _reduce_trees(g, *tree_values(tables, False, f"leaf_digits{k}"), f"digit_sum{k}")
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


def finish_sum(g: GraphBuilder, ens: Ensemble, st: _stack.Stacked, total: str, acc: np.dtype, internal: np.dtype) -> Margin:
    """A plain sum over the trees [N, K] (``acc``) averaged (MEAN), plus the base score not
    folded into the values, as ``internal``."""
    if ens.aggregation is Aggregation.MEAN:
        total = g.op("Div", [total, g.const(ens.trees_per_output().astype(acc), "n_trees")], "margin_mean")
    if np.any(st.base_rest):
        total = g.op("Add", [total, g.const(st.base_rest.astype(acc), "base_score")], "margin_base")
    if acc == internal:
        return Margin(g.op("Identity", [total], "margin"), internal)
    return Margin(g.op("Cast", [total], "margin", to=onnx.helper.np_dtype_to_tensor_dtype(internal)), internal)

"""An attention forest's ONNX graph: an exact form's graph of the forest (any exact form, auto by
default) with the attention in place of the forest's head (``GraphOptions.head``), in standard
operators, trees first as the form's exit index [T, N] comes:

    idx      = exit index + tree offsets                              [T, N]  (one table for all trees)
    A, B     = Gather(leaf means, idx), Gather(leaf values, idx)      [T, N, F], [T, N]
    d        = ReduceSum(Where(both present, (x - A)^2, 0), axis 2)   [T, N]
    part     = reached(idx) and not d > float32 max                   [T, N]
    softmax  = Exp(-(d - min over part) / (2 tau)) where part, all 1 where no tree takes part; / its sum
    alpha    = (1 - epsilon) softmax + epsilon w
    variable = ReduceSum(alpha B, axis 0), transposed                 [N, 1]

as :mod:`tree2mat.attention` defines the model. The tables are laid out as the form's exit index
is (its trees' order, its positions), as the form's own leaf values are: nothing is reordered.
Asked for (``ConvertOptions.tree_weights``), alpha itself is the output ``tree_weights`` [N, T],
its trees put in the forest's order (:meth:`AttentionForest.attention
<tree2mat.attention.AttentionForest.attention>`).
Within the graph contract: the input's dtype throughout (float32 by default), no +-inf or NaN
constant (missing coordinates of the leaf means are a 0/1 table, the input's found once by
``IsNaN``), ``Gather`` on axis 0 only. The routing is exact (``verify`` checks the leaf ids); the
weights round in float32 (see :func:`default_atol` and :func:`weights_bound`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import replace
from typing import NamedTuple

import numpy as np
import onnx

from tree2mat.attention import FAR, AttentionForest
from tree2mat.attention.model import _distances as _distances_model
from tree2mat.build import DTYPES, ConvertOptions, Progress, build_graph, quiet, stamp
from tree2mat.errors import OptionError, UnsupportedModelError
from tree2mat.forms import auto
from tree2mat.forms._exit import Exit
from tree2mat.forms._graph import ONNX_TYPE, GraphBuilder, tensor_info
from tree2mat.forms._heads import label_dtype
from tree2mat.ir import evaluate


def constant_bytes(forest: AttentionForest, dtype: np.dtype = np.dtype(np.float32)) -> int:
    """Bytes of the attention's constants, a bound: the leaf means (and their 0/1 presence
    table, where a mean lacks a coordinate; none where epsilon is 1), leaf values (K wide: a
    classifier's classes) and reached flags, per tree at each position of the form's exit (at
    most 2L: a walk's exit is a node), and the offsets."""
    T, L, K = forest.n_trees, _max_leaves(forest), forest.ensemble.n_outputs
    return (_mean_tables(forest) * forest.ensemble.n_features + K + 1) * T * 2 * L * dtype.itemsize + 8 * T


def bytes_per_row(forest: AttentionForest, dtype: np.dtype = np.dtype(np.float32), tree_weights: bool = False) -> int:
    """Runtime memory per row of the attention's largest intermediates: the gathered means, the
    differences and their squares [T, F] (the presence table's too, where there is one), the
    gathered and weighted values [T, K], and a dozen [T] vectors (``tree_weights``: two more,
    the weights in the forest's order and the output)."""
    T, F, K = forest.n_trees, forest.ensemble.n_features, forest.ensemble.n_outputs
    return ((_mean_tables(forest) + 2) * T * F * dtype.itemsize * (forest.epsilon < 1.0) + 2 * T * K * dtype.itemsize + 12 * T * 8
            + 2 * T * dtype.itemsize * tree_weights)


def _mean_tables(forest: AttentionForest) -> int:
    """The [T, L, F] tables the graph holds: the means and, where a mean lacks a coordinate,
    their presence; none where epsilon is 1 (no softmax)."""
    return 0 if forest.epsilon == 1.0 else 2 if _has_missing(forest) else 1


def build(forest: AttentionForest, options: ConvertOptions, progress: Progress = quiet) -> onnx.ModelProto:
    """The checked ONNX graph of ``forest`` under ``options`` (the forest's form, dtype, opset,
    ``leaves``, ``tree_weights``, ``max_memory``; its attention is budgeted first, the forest's
    form within what is left)."""
    if options.raw:
        raise OptionError("--raw does not apply to an attention forest: its output is the weighted sum of its trees, no link")
    if options.form is not None and not options.form.exact:
        raise OptionError(f"an attention forest needs each tree's leaf: choose an exact form, not {options.form.name}")
    dtype = DTYPES[options.dtype or "float32"]
    own = constant_bytes(forest, dtype) + bytes_per_row(forest, dtype, options.tree_weights) * auto.BUDGET_ROWS
    if own >= options.max_memory:
        least = min(auto.estimate(spec, forest.ensemble).memory_bytes for spec in auto.candidates(options.target))
        raise UnsupportedModelError(
            f"the attention needs about {auto.gib(own)} (leaf means of {forest.n_trees} trees x {_max_leaves(forest)} leaves x "
            f"{forest.ensemble.n_features} features, and intermediates for {auto.BUDGET_ROWS} rows), over --max-memory "
            f"{auto.gib(options.max_memory)}; with the forest's smallest exact graph it needs {auto.gib(own + least)}: raise --max-memory"
        )
    scale = dtype.type(1.0 / (2.0 * forest.tau))
    if forest.tree_scales is None and not (np.isfinite(scale) and scale > 0):
        raise UnsupportedModelError(f"tau {forest.tau:g}: 1 / (2 tau) is not a positive finite {dtype.name}")
    try:
        model = build_graph(forest.ensemble, replace(options, max_memory=options.max_memory - own), progress,
                            head=lambda g, exit: _head(g, exit, forest, dtype, options.tree_weights))
    except UnsupportedModelError as exc:  # (its --max-memory is what the attention left)
        raise UnsupportedModelError(f"{exc} (--max-memory less the attention's {auto.gib(own)})") from exc
    for entry in model.metadata_props:
        if entry.key == "tree2mat.source":
            entry.value = f"attention forest over {entry.value}"
    stamp(model, {"tree2mat.attention": f"ABRF-{forest.variant}"})
    model.doc_string = f"tree2mat attention forest (ABRF-{forest.variant}, epsilon {forest.epsilon:g}) over {forest.ensemble.source}"
    return model


def default_atol(forest: AttentionForest, arithmetic: str = "float32") -> float:
    """``verify``'s default absolute tolerance for an attention graph, per unit of a row's
    distance: a row whose smallest softmax argument is ``z`` (``d / (2 tau)``; ABRF-2/3: ``d v_k
    / 2``; :meth:`AttentionForest.nearest`) is held to ``atol x (1 + z)``. Each distance rounds to
    about ``F eps`` of itself in the graph's ``arithmetic`` (F coordinates summed), so each
    weight to about ``F eps z``: ``atol = 2 (F + 1) eps (1 + max |leaf value|)``.
    tests/attention/test_abrf_graph.py holds the largest error below half of ``(F + 1) eps (1 +
    z) scale`` on random, threshold, NaN and extreme rows, with tau from 1e-4 to 100 times the
    distance scale and four scales of features. Routing is checked exactly."""
    eps = float(np.finfo(np.float32 if arithmetic == "float32" else np.float64).eps)
    scale = 1.0 + max(float(np.abs(t.value).max()) for t in forest.ensemble.trees)
    return 2.0 * (forest.ensemble.n_features + 1) * eps * scale


def weights_bound(forest: AttentionForest, X: np.ndarray, arithmetic: str = "float32", leaves: np.ndarray | None = None) -> np.ndarray:
    """How far a graph's ``tree_weights`` in ``arithmetic`` may lie from the model's
    (:meth:`AttentionForest.attention`) on each row of ``X``, [N] (``leaves``: the rows' leaf
    ids [N, T], if known): a first-order bound on the graph's rounding (``verify``'s default
    tolerance for them; docs/attention.md).

    With ``u = eps / 2``, the graph rounds each coordinate's difference ``(x - c) - (A - c)``
    (``c``: :func:`_center`) by ``u (|x - c| + |A - c| + |x - A|)``, then its product with z, its
    square and the sum of F of them: tree k's softmax argument ``s_k`` by ``eps sigma_k``, with
    ``sigma_k = scale_k sum_j z_j^2 (|x_j - A_j| (|x_j - c_j| + |A_j - c_j|) + (F + 5) / 2 (x_j -
    A_j)^2)``. A softmax weight moves by ``softmax_k (ds_k - sum_i softmax_i ds_i)``, so none by
    more than ``2 eps sum_i softmax_i sigma_i``; ``Exp``, the sum over T trees, the division and
    the mixing with ``epsilon w`` add at most ``(T + 4) u``. The bound is ``(1 - epsilon) 2 eps
    sum_i softmax_i sigma_i + (T + 4) u``. Its cross term ``|x - A| (|x - c| + |A - c|)`` is why
    it is not, as :func:`default_atol`'s, in proportion to the distances alone: where large
    feature weights z (ABRF-2/3) meet a row near its leaf mean but away from ``c``, the distance
    rounds to many times ``F eps`` of itself. A row whose bound reaches 1 has weights float32
    cannot tell. tests/attention/test_tree_weights.py holds the largest error below half of it
    (ABRF-1, -2 and -3, sharp and flat softmaxes, random, threshold, NaN, +-inf and extreme rows)."""
    eps = float(np.finfo(np.float32 if arithmetic == "float32" else np.float64).eps)
    return (1.0 - forest.epsilon) * 2.0 * eps * _distance_rounding(forest, X, leaves) + (forest.n_trees + 4) * eps / 2


def values_bound(forest: AttentionForest, X: np.ndarray, arithmetic: str = "float32", leaves: np.ndarray | None = None) -> np.ndarray:
    """How far a graph's values (a regressor's ``variable``, a classifier's ``probabilities``) in
    ``arithmetic`` may lie from the model's on each row of ``X``, [N]: a first-order bound, the
    one :func:`weights_bound` gives the weights carried through ``sum_k alpha_k B_k``. With
    ``u = eps / 2`` and ``b = max |leaf value|``: the softmax's weights move by at most ``2 eps
    sum_i softmax_i sigma_i`` in all (the sum over k of :func:`weights_bound`'s ``softmax_k
    (ds_k - sum_i softmax_i ds_i)``), ``Exp``, the sum over T trees, the division and the mixing
    with ``epsilon w`` each weight by ``(T + 4) u`` of itself, a leaf value rounds to float32 by
    ``u`` of itself, and the weighted sum of T terms by ``T u b``. The bound is ``b ((1 - epsilon)
    2 eps sum_i softmax_i sigma_i + (2 T + 5) u)``. ``verify`` holds the values to the larger of
    it and :func:`default_atol`'s ``atol (1 + z)``: the latter alone missed the cross term
    (:func:`weights_bound`) of ABRF-2's large feature weights, and failed a right graph."""
    eps = float(np.finfo(np.float32 if arithmetic == "float32" else np.float64).eps)
    b = max(float(np.abs(t.value).max()) for t in forest.ensemble.trees)
    rounding = _distance_rounding(forest, X, leaves)
    return b * ((1.0 - forest.epsilon) * 2.0 * eps * rounding + (2 * forest.n_trees + 5) * eps / 2)


def _distance_rounding(forest: AttentionForest, X: np.ndarray, leaves: np.ndarray | None) -> np.ndarray:
    """``sum_i softmax_i sigma_i`` per row of ``X`` [N] (see :func:`weights_bound`): the
    softmax's arguments' rounding in units of eps, weighed by the softmax."""
    X = np.asarray(X, np.float64)
    leaves = evaluate.apply(forest.ensemble, X) if leaves is None else leaves
    soft = forest.softmax_weights(X, leaves)
    part = _distances_model(X, leaves, forest.leaf_means, forest.leaf_counts, forest.feature_weights)[1]
    T, F = forest.n_trees, forest.ensemble.n_features
    center = _center(forest)
    z2 = np.ones(F) if forest.feature_weights is None else forest.feature_weights**2
    scale = np.broadcast_to(forest.scale, (T,))
    sigma = np.zeros_like(soft)
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(T):
            A = forest.leaf_means[k][leaves[:, k]]  # [N, F]
            diff = np.abs(X - A)
            terms = z2 * (diff * (np.abs(X - center) + np.abs(A - center)) + (F + 5) / 2 * diff * diff)
            sigma[:, k] = scale[k] * np.where(np.isnan(diff), 0.0, terms).sum(axis=1)
        return np.where(part, soft * sigma, 0.0).sum(axis=1)  # (a tree that takes no part: no rounding to carry)


def value_span(forest: AttentionForest) -> float:
    """The range the graph's values lie in: a regressor's leaf values', a classifier's
    probabilities' (1)."""
    if forest.is_classifier:
        return 1.0
    values = np.concatenate([t.value[:, 0] for t in forest.ensemble.trees])
    return float(values.max() - values.min())


# ---------------------------------------------------------------------------------------- inside

def _max_leaves(forest: AttentionForest) -> int:
    return max(t.n_leaves for t in forest.ensemble.trees)


def _center(forest: AttentionForest) -> np.ndarray:
    """Per feature, the median of the leaf means' coordinates (0 where none holds one): the graph
    subtracts it from the rows and holds the means less it, so that float32 rounds the
    differences to their own size, not to the features' (a feature of 1000 +- 0.01 would lose
    its digits to the 1000)."""
    held = np.concatenate([m[c > 0] for m, c in zip(forest.leaf_means, forest.leaf_counts)], axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (a feature no mean holds)
        center = np.nanmedian(held, axis=0) if held.size else np.zeros(forest.ensemble.n_features)
    return np.nan_to_num(center, nan=0.0)


def _has_missing(forest: AttentionForest) -> bool:
    """Whether a reached leaf's mean lacks a coordinate (the graph then needs a presence table)."""
    return any(bool(np.isnan(m[c > 0]).any()) for m, c in zip(forest.leaf_means, forest.leaf_counts))


class _Tables(NamedTuple):
    """The attention's per-leaf tables, [T * L, ...] (tree k's leaves from row k L on, as
    :meth:`Exit.per_slot` takes them), in the graph's dtype."""

    #: The leaf means less :func:`_center` [T * L, F] (0 where a mean lacks a coordinate).
    means: np.ndarray
    #: 1 where a leaf's mean holds the coordinate [T * L, F].
    present: np.ndarray
    #: The leaf values [T * L, K].
    values: np.ndarray
    #: 1 where a training row reached the leaf (its mean exists) [T * L, 1].
    reached: np.ndarray
    #: Per feature, what the rows and the means are taken less [F].
    center: np.ndarray


def _tables(forest: AttentionForest, dtype: np.dtype) -> _Tables:
    """The tables of ``forest`` (its trees in the ensemble's order; the exit lays them out)."""
    ens, T, L, F = forest.ensemble, forest.n_trees, _max_leaves(forest), forest.ensemble.n_features
    means = np.zeros((T * L, F), dtype)
    present = np.zeros((T * L, F), dtype)
    values = np.zeros((T * L, ens.n_outputs), dtype)
    reached = np.zeros((T * L, 1), dtype)
    center = _center(forest).astype(dtype)
    for k, tree in enumerate(ens.trees):
        m, rows = forest.leaf_means[k], slice(k * L, k * L + tree.n_leaves)
        means[rows] = np.nan_to_num(m - center.astype(np.float64), nan=0.0)
        present[rows] = ~np.isnan(m)
        values[rows] = tree.value
        reached[rows, 0] = forest.leaf_counts[k] > 0
    return _Tables(means, present, values, reached, center)


def _gather(g: GraphBuilder, exit: Exit, forest: AttentionForest) -> Callable[..., str]:
    """``rows_of(table, hint, squeeze=False)``: a [T * L, K] table's rows where each row exits,
    [T, N, K] (``squeeze``: [T, N] of a one-column table). The tables are laid out as the exit
    index is (:meth:`Exit.per_slot`), each tree's S positions after the previous tree's: one
    index into all of them, the exit index plus each tree's offset, made here once."""
    T, L, S = forest.n_trees, _max_leaves(forest), exit.slots.shape[1]

    def rows_of(table: np.ndarray, hint: str, squeeze: bool = False) -> str:  # [T * L, K] by the exit: [T, N, K]
        laid = exit.per_slot(table, L).reshape(T * S, -1)
        return g.op("Gather", [g.const(laid[:, 0] if squeeze else laid, f"{hint}_table"), idx], hint, axis=0)

    offsets = (np.arange(T) * S).astype(exit.index_dtype)[:, None]
    idx = g.op("Add", [exit.index, g.const(offsets, "attention_offsets")], "attention_index")  # [T, N] into [T * S] tables
    return rows_of


def _head(g: GraphBuilder, exit: Exit, forest: AttentionForest, dtype: np.dtype, tree_weights: bool = False) -> list[onnx.ValueInfoProto]:
    """The attention from where the rows exit to ``variable`` [N, 1] (see the module's
    docstring; ``tree_weights``: and alpha as the output ``tree_weights`` [N, T]). Trees first
    throughout, as the exit index comes ([T, N], its trees in the form's order, its positions
    the form's: the tables are laid out so, as the form's leaf values are; no reordering of the
    index)."""
    dt = dtype.type
    tables = _tables(forest, dtype)
    weights = forest.weights[exit.order]
    rows_of = _gather(g, exit, forest)

    def softmax() -> str:  # [T, N]: the softmax over the trees that take part
        d, part = _distances(g, forest, dtype, tables, rows_of)
        return _softmax(g, forest, dtype, d, part, exit.order)

    eps = forest.epsilon
    if eps == 0.0:
        alpha = softmax()
    elif eps == 1.0:  # (the weights alone: no distance, no softmax)
        alpha = g.const(weights.astype(dtype)[:, None], "attention_weights")
    else:
        alpha = g.op("Add", [g.op("Mul", [softmax(), g.const(dt(1.0 - eps), "attention_one_minus_eps")], "attention_soft_part"),
                             g.const((eps * weights).astype(dtype)[:, None], "attention_eps_w")], "attention_alpha")
    extra = [_weights_output(g, exit, alpha, forest.n_trees, dtype, eps == 1.0)] if tree_weights else []
    if not forest.is_classifier:
        weighted = g.op("Mul", [alpha, rows_of(tables.values, "attention_values", squeeze=True)], "attention_weighted")  # [T, N]
        total = g.reduce_sum(weighted, [0], True, "attention_total")  # [1, N]
        g.op("Transpose", [total], out="variable", perm=[1, 0])
        return [tensor_info("variable", dtype, ["N", 1]), *extra]
    # a classifier: the weighted class probabilities [N, C], and the first class of the largest
    weighted = g.op("Mul", [g.unsqueeze(alpha, [2], "attention_alpha_classes"), rows_of(tables.values, "attention_values")], "attention_weighted")
    axes = g.const(np.asarray([0], np.int64), "attention_trees_axis")
    proba = g.op("ReduceSum", [weighted, axes], out="probabilities", keepdims=0)
    best = g.op("ArgMax", [proba], "attention_class", axis=1, keepdims=0)
    classes = forest.ensemble.classes[0]
    g.op("Gather", [g.const(classes, "attention_classes"), best], out="label", axis=0)
    return [tensor_info("label", label_dtype((classes,)), ["N"]), tensor_info("probabilities", dtype, ["N", len(classes)]), *extra]


def _weights_output(g: GraphBuilder, exit: Exit, alpha: str, n_trees: int, dtype: np.dtype, constant: bool) -> onnx.ValueInfoProto:
    """alpha [T, N] (trees in the exit's order; ``constant``: [T, 1], the weights alone, the same
    for every row) as the output ``tree_weights`` [N, T], its trees put in the forest's order
    (the exit's row of each, :attr:`Exit.position`)."""
    if constant:  # (one row for all: as many as the exit index has)
        alpha = g.op("Expand", [alpha, g.op("Shape", [exit.index], "attention_index_shape")], "attention_alpha_rows")
    position = exit.position
    if not np.array_equal(position, np.arange(n_trees)):
        alpha = g.op("Gather", [alpha, g.const(position, "attention_tree_position")], "attention_alpha_in_tree_order", axis=0)
    g.op("Transpose", [alpha], out="tree_weights", perm=[1, 0])
    return tensor_info("tree_weights", dtype, ["N", n_trees])


def _distances(g: GraphBuilder, forest: AttentionForest, dtype: np.dtype, tables: _Tables, rows_of: Callable[..., str]) -> tuple[str, str]:
    """Each tree's squared distance from the row to its leaf's mean over the coordinates both
    hold (ABRF-2/3: of ``(x - A) o z``), ``d`` [T, N], +inf where it overflows; and ``part``
    [T, N]: whether the tree takes part in the row's softmax (its leaf has a mean, ``d`` is
    within :data:`FAR`)."""
    dt = dtype.type
    zero = g.const(dt(0), "attention_zero")
    x_nan = g.op("IsNaN", ["input"], "attention_x_missing")
    centered = g.op("Sub", ["input", g.const(tables.center[None, :], "attention_center")], "attention_x_centered")
    x0 = g.unsqueeze(g.op("Where", [x_nan, zero, centered], "attention_x"), [0], "attention_x_trees")  # [1, N, F]
    diff = g.op("Sub", [x0, rows_of(tables.means, "attention_means")], "attention_diff")  # [T, N, F]
    if forest.feature_weights is not None:  # ABRF-2/3: (x - A) o z
        diff = g.op("Mul", [diff, g.const(forest.feature_weights.astype(dtype)[None, None, :], "attention_feature_weights")], "attention_diff_z")
    both = g.unsqueeze(g.op("Not", [x_nan], "attention_x_present"), [0], "attention_x_present_trees")  # [1, N, F]
    if _has_missing(forest):
        held = g.op("Cast", [rows_of(tables.present, "attention_mean_present")], "attention_held", to=onnx.TensorProto.BOOL)
        both = g.op("And", [both, held], "attention_both")
    squares = g.op("Where", [both, g.op("Mul", [diff, diff], "attention_squares"), zero], "attention_squares_held")
    d = g.reduce_sum(squares, [2], False, "attention_distance")  # [T, N]; +inf where it overflows
    far = g.const(dt(FAR), "attention_far")
    has_mean = g.op("Cast", [rows_of(tables.reached, "attention_reached", squeeze=True)], "attention_has_mean", to=onnx.TensorProto.BOOL)
    part = g.op("And", [has_mean, g.op("Not", [g.op("Greater", [d, far], "attention_too_far")], "attention_near")], "attention_part")
    return d, part


def _softmax(g: GraphBuilder, forest: AttentionForest, dtype: np.dtype, d: str, part: str, order: np.ndarray) -> str:
    """The softmax over the trees that take part (``part``) of ``-d`` scaled, [T, N]: ABRF-1's
    ``1 / (2 tau)`` applied after the nearest is subtracted, ABRF-2/3's ``v_k / 2`` (its trees
    in ``order``, the exit's) before; all trees alike for a row where none takes part. (Its
    constants 0 and :data:`FAR` are :func:`_distances`'s: the builder makes a constant asked
    for twice one initializer.)"""
    dt = dtype.type
    zero, far = g.const(dt(0), "attention_zero"), g.const(dt(FAR), "attention_far")
    if forest.tree_scales is None:  # ABRF-1: -(d - nearest) / (2 tau), scaled last (no overflow however small tau)
        dm = g.op("Where", [part, d, far], "attention_distance_part")
        nearest = g.reduce_max(dm, [0], True, "attention_nearest", op_type="ReduceMin")  # [1, N]
        z = g.op("Mul", [g.op("Sub", [dm, nearest], "attention_delta"), g.const(dt(1.0 / (2.0 * forest.tau)), "attention_inv_2tau")], "attention_z")
    else:  # ABRF-2/3: d v_k / 2 per tree first (v_k / 2 <= 1/2: no overflow), then less the nearest
        scales = g.const((forest.tree_scales[order] / 2.0).astype(dtype)[:, None], "attention_tree_scales")
        dm = g.op("Where", [part, g.op("Mul", [d, scales], "attention_scaled"), far], "attention_distance_part")
        nearest = g.reduce_max(dm, [0], True, "attention_nearest", op_type="ReduceMin")  # [1, N]
        z = g.op("Sub", [dm, nearest], "attention_z")
    e = g.op("Where", [part, g.op("Exp", [g.op("Neg", [z], "attention_neg_z")], "attention_exp"), zero], "attention_e")
    count = g.reduce_sum(g.op("Cast", [part], "attention_part_n", to=ONNX_TYPE[dtype]), [0], True, "attention_parts")
    none = g.op("Less", [count, g.const(dt(0.5), "attention_half")], "attention_none")  # [1, N]: all alike
    e = g.op("Where", [none, g.const(dt(1), "attention_one"), e], "attention_e_all")
    return g.op("Div", [e, g.reduce_sum(e, [0], True, "attention_e_sum")], "attention_softmax")

"""The reference evaluator: plain tree traversal in numpy, the oracle for every form.

It follows the source library's semantics: inputs cast to the source dtype, the source's
comparison (``<=`` or ``<``) against the float64 threshold, NaN by ``default_left``, categorical
nodes by exact value membership. It never uses the rounded graph thresholds.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from tree2mat.errors import DataError
from tree2mat.ir.core import (
    BINARY_LINKS,
    Aggregation,
    CategoryCodes,
    Comparison,
    Ensemble,
    LabelRule,
    Link,
    OutlierParams,
    Task,
    Tree,
    category_codes,
)


def prepare_input(ensemble: Ensemble, X: np.ndarray) -> np.ndarray:
    """Check the width and cast as the source library does (float32 or float64)."""
    X = np.asarray(X)
    if X.ndim != 2 or X.shape[1] != ensemble.n_features:
        raise DataError(
            f"input has shape {X.shape}, the model expects [N, {ensemble.n_features}]"
        )
    with np.errstate(over="ignore"):
        X = X.astype(ensemble.source_dtype)
    if not np.isnan(ensemble.missing_value):
        X[X == ensemble.source_dtype.type(ensemble.missing_value)] = np.nan
    if ensemble.zero_band:  # compared in float64 (numpy would round the band to float32 X)
        X[np.abs(X.astype(np.float64)) <= ensemble.zero_band] = 0.0
    return X


def columns(ensemble: Ensemble, X: np.ndarray) -> np.ndarray:
    """The columns the nodes test, [N, n_columns]: the prepared input ``X``
    (:func:`prepare_input`), then the projections of oblique nodes, summed in the source dtype
    as :class:`~tree2mat.ir.core.Projections` defines."""
    if ensemble.projections is None:
        return X
    return np.concatenate([X, ensemble.projections.values(X)], axis=1)


def apply_tree(
    tree: Tree, X: np.ndarray, comparison: Comparison, codes: CategoryCodes = CategoryCodes.EXACT,
    visit: Callable[[Tree, np.ndarray, np.ndarray], None] | None = None,
) -> np.ndarray:
    """Leaf index of each row of ``X`` (the columns of :func:`columns`) in ``tree``;
    ``visit(tree, rows, nodes)``, if given, sees each step of the walk: the rows still walking
    and the internal node each is at."""
    n = X.shape[0]
    cur = np.zeros(n, np.int64)
    if tree.n_internal == 0:
        return cur
    cat_row = np.full(tree.n_internal, -1, np.int64)
    cat_row[tree.cat_nodes] = np.arange(tree.cat_nodes.shape[0])
    active = np.arange(n)
    while active.size:
        nodes = cur[active]
        if visit is not None:
            visit(tree, active, nodes)
        x = X[active, tree.feature[nodes]].astype(np.float64)
        t = tree.threshold[nodes]
        with np.errstate(invalid="ignore"):
            go_left = x <= t if comparison is Comparison.LE else x < t
        missing = np.isnan(x)
        if tree.zero_missing.size:
            missing |= tree.zero_missing[nodes] & (x == 0)
        rows = cat_row[nodes]
        is_cat = rows >= 0
        if is_cat.any():
            vals = tree.cat_values[rows[is_cat]]
            hit = vals == category_codes(x[is_cat], codes)[:, None]
            hit_left = (hit & tree.cat_left[rows[is_cat]]).any(axis=1)
            go_left[is_cat] = np.where(hit.any(axis=1), hit_left, tree.other_left[rows[is_cat]])
        go_left = np.where(missing, tree.default_left[nodes], go_left)
        nxt = np.where(go_left, tree.left[nodes], tree.right[nodes])
        cur[active] = nxt
        active = active[nxt >= 0]
    return -1 - cur


def apply(ensemble: Ensemble, X: np.ndarray) -> np.ndarray:
    """Leaf index per row and tree, int64 [N, T]."""
    Xs = columns(ensemble, prepare_input(ensemble, X))
    return np.stack(
        [apply_tree(t, Xs, ensemble.comparison, ensemble.category_codes) for t in ensemble.trees], axis=1
    )


def near_hyperplanes(ensemble: Ensemble, X: np.ndarray) -> np.ndarray:
    """Rows (bool [N]) whose path (by the reference) meets an oblique node where another
    arithmetic of its sum (another order, fused multiply-adds) could decide otherwise: ``|w . x -
    t|`` within ``2 (P + 1) u sum |w_p x_p|`` plus ``P`` of the dtype's smallest subnormal (``w .
    x`` in float64, ``u`` half the source dtype's epsilon), or ``sum |w_p x_p|`` past the dtype's
    largest number (a partial sum may overflow in one order and not in another). These are the
    "near-boundary" rows ``verify`` counts apart; memory: rows x projections."""
    pr = ensemble.projections
    Xs = columns(ensemble, prepare_input(ensemble, X))
    near = np.zeros(Xs.shape[0], bool)
    if pr is None or not ensemble.is_oblique:
        return near
    dt = np.finfo(np.dtype(ensemble.source_dtype))
    X64 = Xs[:, : ensemble.n_features].astype(np.float64)
    exact = np.zeros((Xs.shape[0], pr.n_projections))
    size = np.zeros_like(exact)
    with np.errstate(invalid="ignore", over="ignore"):
        for used, product in pr.products(X64):  # (float64: the weights are exact there)
            term = np.where(used, product, 0.0)
            exact += term
            size += np.abs(term)
    n_terms = (pr.feature >= 0).sum(axis=1)
    margin = 2.0 * (n_terms + 1) * (float(dt.eps) / 2) * size + n_terms * float(dt.smallest_subnormal)
    F = ensemble.n_features

    def visit(tree: Tree, rows: np.ndarray, nodes: np.ndarray) -> None:
        oblique = tree.feature[nodes] >= F
        rows, nodes = rows[oblique], nodes[oblique]
        m = tree.feature[nodes] - F
        # (an infinite term gives the same +-inf or NaN in any order; NaN is not close)
        with np.errstate(invalid="ignore"):
            close = (np.abs(exact[rows, m] - tree.threshold[nodes]) <= margin[rows, m]) | (size[rows, m] > float(dt.max))
        near[rows] |= close & np.isfinite(margin[rows, m])

    for tree in ensemble.trees:
        if (tree.feature >= F).any():
            apply_tree(tree, Xs, ensemble.comparison, ensemble.category_codes, visit)
    return near


def source_leaf_ids(ensemble: Ensemble, X: np.ndarray) -> np.ndarray:
    """The leaf of each row and tree in the source library's own numbering (``leaf_source_id``:
    scikit-learn's ``apply``, XGBoost's and LightGBM's ``pred_leaf``), int64 [N, T]."""
    leaves = apply(ensemble, X)
    ids = []
    for i, t in enumerate(ensemble.trees):
        if t.leaf_source_id is None:
            raise ValueError(f"tree {i} has no leaf_source_id (the source library's leaf numbering)")
        ids.append(t.leaf_source_id[leaves[:, i]])
    return np.stack(ids, axis=1)


def linear_outputs(tree: Tree, X: np.ndarray, leaves: np.ndarray) -> np.ndarray:
    """A linear tree's output per row (float64 [N]) at its leaves, as LightGBM computes it: the
    leaf's constant plus each coefficient times its feature, in order; the plain leaf value
    when one of those features is NaN."""
    assert tree.linear_const is not None and tree.linear_feature is not None and tree.linear_coef is not None
    out = tree.linear_const[leaves].copy()
    nan = np.zeros(leaves.shape[0], bool)
    rows = np.arange(leaves.shape[0])
    for p in range(tree.linear_feature.shape[1]):
        f = tree.linear_feature[leaves, p]
        used = f >= 0
        x = X[rows, np.maximum(f, 0)].astype(np.float64)
        nan |= used & np.isnan(x)
        with np.errstate(invalid="ignore", over="ignore"):
            out = np.where(used, out + x * tree.linear_coef[leaves, p], out)
    return np.where(nan, tree.value[leaves, 0], out)


def margin(ensemble: Ensemble, X: np.ndarray, leaves: np.ndarray | None = None, keep: np.ndarray | None = None) -> np.ndarray:
    """Aggregated tree outputs plus base score, before the link: float64 [N, K]. Summed trees
    start from the base score and add tree by tree, as the libraries do. ``keep``: bool [T] or
    [N, T], the trees each row keeps (a tree mask: the others add nothing, the base score stays;
    summed trees only)."""
    if keep is not None:
        if ensemble.aggregation is not Aggregation.SUM:
            raise ValueError("a tree mask keeps trees of a sum; this ensemble averages its trees")
        keep = np.broadcast_to(np.asarray(keep, bool), (X.shape[0], ensemble.n_trees))
    if leaves is None:
        leaves = apply(ensemble, X)
    Xs = prepare_input(ensemble, X) if any(t.is_linear for t in ensemble.trees) else None
    acc = np.dtype(ensemble.accumulate_dtype)
    out = np.zeros((leaves.shape[0], ensemble.n_outputs), acc)
    if ensemble.aggregation is Aggregation.SUM:
        out += ensemble.base_score.astype(acc)
    for t, tree in enumerate(ensemble.trees):
        k = int(ensemble.output_index[t])
        if tree.is_linear:
            assert Xs is not None  # (prepared above: the ensemble has a linear tree)
            contrib = linear_outputs(tree, Xs, leaves[:, t]).astype(acc)[:, None]
        else:
            contrib = tree.value.astype(acc)[leaves[:, t]]
        if keep is not None:
            contrib = np.where(keep[:, t, None], contrib, acc.type(0))
        if k == -1:
            out += contrib
        else:
            out[:, k] += contrib[:, 0]
    if ensemble.aggregation is Aggregation.MEAN:
        out = out / ensemble.trees_per_output().astype(acc) + ensemble.base_score.astype(acc)
    return out.astype(np.float64)


def _expit(m: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-m))


def _positive(link: Link, m: np.ndarray) -> np.ndarray:
    """p of a binary link (see ``BINARY_LINKS``), elementwise on the margin."""
    if link is Link.MARGIN:
        return m.copy()
    if link is Link.STEP:
        return (m > 0).astype(np.float64)
    return _expit(2.0 * m if link is Link.LOGISTIC_2X else m)


def probabilities(ensemble: Ensemble, m: np.ndarray) -> np.ndarray:
    """Class probabilities from the margin: [N, C], or [N, G, max C] for G targets."""
    if ensemble.link in BINARY_LINKS:  # one margin column per target: [1 - p, p]
        p = _positive(ensemble.link, m)
        probs = np.stack([1.0 - p, p], axis=2)
        return probs[:, 0] if len(ensemble.classes) == 1 else probs
    if ensemble.link is Link.SOFTMAX:
        e = np.exp(m - m.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    if ensemble.link is Link.SIGMOID:  # one-vs-all: each column its own sigmoid, not normalized
        return _expit(m)
    if len(ensemble.classes) == 1:
        return m.copy()
    # Several targets: [N, G, max C], zero-padded (the graph contract's layout).
    out = np.zeros((m.shape[0], len(ensemble.classes), max(ensemble.n_classes)))
    start = 0
    for j, c in enumerate(ensemble.n_classes):
        out[:, j, :c] = m[:, start : start + c]
        start += c
    return out


def sigmoid(m: float) -> float:
    """The float64 sigmoid ``1 / (1 + exp(-m))`` of one margin, as the libraries compute it."""
    with np.errstate(over="ignore"):
        return float(_expit(np.float64(m)))


@functools.cache
def sigmoid_plateaus() -> tuple[float, float]:
    """``(low, high)``: the float64 sigmoid ``1 / (1 + exp(-m))`` is exactly 0 for ``m <= low``
    and exactly 1 for ``m >= high``; between them it rises (not strictly: neighbouring margins
    can share a probability)."""
    high = first_float(lambda m: sigmoid(m) == 1.0, 0.0, 1e3)
    low = float(np.nextafter(first_float(lambda m: sigmoid(m) > 0.0, -1e4, 0.0), -np.inf))
    return low, high


def argmax_key(ensemble: Ensemble, m: np.ndarray) -> np.ndarray:
    """What a library's ``argmax(predict_proba)`` ranks, as a function of the margin: the
    one-vs-all sigmoid saturates (margins beyond its plateaus tie, the first wins) and yields NaN
    for a NaN margin (numpy's argmax picks the first NaN); softmax yields all-NaN for a row with
    NaN or +inf (the first column wins). Elsewhere the margin itself."""
    key = m
    if ensemble.link is Link.SIGMOID:
        low, high = sigmoid_plateaus()
        key = np.where(np.isnan(m), np.inf, np.clip(m, low, high))
    elif ensemble.link is Link.SOFTMAX:
        bad = (np.isnan(m) | (m == np.inf)).any(axis=1, keepdims=True)
        key = np.where(bad, np.inf, m)
    return key


def labels(ensemble: Ensemble, m: np.ndarray) -> np.ndarray:
    """Class labels from the margin: [N] for one output group, [N, groups] for several."""
    cols, start = [], 0
    for j, classes in enumerate(ensemble.classes):
        if ensemble.label_rule is LabelRule.POSITIVE:  # one margin column per target
            cols.append(classes[(m[:, j] > ensemble.label_cutoff).astype(np.int64)])
        elif ensemble.label_rule is LabelRule.NON_NEGATIVE:
            cols.append(classes[(m[:, j] >= ensemble.label_cutoff).astype(np.int64)])
        else:
            cols.append(classes[np.argmax(argmax_key(ensemble, m)[:, start : start + len(classes)], axis=1)])
        start += len(classes)
    return cols[0] if len(cols) == 1 else np.stack(cols, axis=1)


def outlier_scores(ensemble: Ensemble, m: np.ndarray) -> np.ndarray:
    """IsolationForest ``score_samples`` from the summed path lengths, float64 [N]."""
    params = ensemble.outlier
    assert params is not None  # guaranteed by Ensemble.validate
    if params.denominator == 0:
        ratio = np.ones_like(m[:, 0])
    else:
        ratio = m[:, 0] / params.denominator
    return -(2.0 ** (-ratio))


_BITS = {np.dtype(np.float64): np.int64, np.dtype(np.float32): np.int32}


def _float_key(x: float, dtype: np.dtype) -> int:
    """An integer that orders values of ``dtype`` as the floats themselves are ordered."""
    i = int(np.asarray(x, dtype).view(_BITS[dtype]))
    sign = 1 << (8 * dtype.itemsize - 1)
    return i if i >= 0 else -(i & (sign - 1))


def _key_float(k: int, dtype: np.dtype) -> float:
    bits = k if k >= 0 else (-k) | -(1 << (8 * dtype.itemsize - 1))
    return float(np.asarray(bits, _BITS[dtype]).view(dtype))


def first_float(pred: Callable[[float], bool], lo: float, hi: float, dtype: type = np.float64) -> float:
    """The smallest ``m`` of ``dtype`` (float64 or float32) in ``(lo, hi]`` with ``pred(m)``, for
    a predicate that is false at ``lo``, true at ``hi`` and monotone between (bisection over the
    floats themselves)."""
    dt = np.dtype(dtype)
    a, b = _float_key(lo, dt), _float_key(hi, dt)
    while b - a > 1:
        mid = (a + b) // 2
        a, b = (a, mid) if pred(_key_float(mid, dt)) else (mid, b)
    return _key_float(b, dt)


def isolation_cutoff(params: OutlierParams) -> float:
    """The ratio ``r*`` with: IsolationForest labels a row an outlier iff ``r < r*``, where
    ``r = margin / denominator``.

    scikit-learn computes ``decision = -(2 ** -r) - offset`` with numpy's ``pow`` and labels
    ``decision < 0`` outliers, i.e. ``2 ** -r > -offset``. A graph's ``Pow`` may round its last
    bit differently, which flips rows exactly on the offset (training rows define it); so the
    graph compares ``r`` itself with the cutoff found here by bisection with numpy's own ``pow``
    (decreasing in ``r``).
    """
    c = -params.offset

    def inlier(r: float) -> bool:
        with np.errstate(over="ignore"):
            return bool(2.0 ** -np.asarray([r], np.float64)[0] <= c)

    if inlier(-np.inf):
        return -np.inf
    if not inlier(np.inf):
        return np.inf
    return first_float(inlier, -np.inf, np.inf)


def predict(ensemble: Ensemble, X: np.ndarray, raw: bool = False, keep: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The outputs the graph contract names, computed by traversal (float64 values); ``keep``:
    the trees kept, see :func:`margin`."""
    return outputs(ensemble, margin(ensemble, X, keep=keep), raw)


def outputs(ensemble: Ensemble, m: np.ndarray, raw: bool = False) -> dict[str, np.ndarray]:
    """The outputs the graph contract names from the margin ``m`` [N, K] (:func:`margin`)."""
    out: dict[str, np.ndarray] = {}
    if ensemble.task is Task.CLASSIFICATION:
        out["label"] = labels(ensemble, m)
    if ensemble.task is Task.OUTLIER:
        samples = outlier_scores(ensemble, m)
        scores = samples - ensemble.outlier.offset  # type: ignore[union-attr]
        out["label"] = np.where(scores < 0, -1, 1).astype(np.int64)
    if raw:
        out["variable"] = m
    elif ensemble.task is Task.CLASSIFICATION:
        out["probabilities"] = probabilities(ensemble, m)
    elif ensemble.task is Task.OUTLIER:
        out["scores"] = scores[:, None]
        out["score_samples"] = samples[:, None]
    elif ensemble.link is Link.EXP:
        out["variable"] = np.exp(m)
    elif ensemble.link is Link.SIGMOID:
        out["variable"] = _expit(m)
    elif ensemble.link is Link.SOFTPLUS:
        out["variable"] = np.log1p(np.exp(m))
    else:
        out["variable"] = m
    return out

"""Synthesized rows (:func:`synthesize`): where a graph can route a row differently from the
model, as one kind of rows each (random, threshold, nan, inf, extreme), then only the rows the
model accepts."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tree2mat.errors import OptionError
from tree2mat.ir.core import CategoryCodes, Ensemble, Tree
from tree2mat.ir.thresholds import compare_dtype, float32_neighbours, graph_thresholds

MAX_ROWS = 10_000_000
MAX_SYNTHESIZED_BYTES = 2 * 2**30


def synthesize(
    ens: Ensemble,
    rows: int = 1000,
    *,
    dtype: np.dtype = np.dtype(np.float32),
    seed: int = 0,
    max_nodes: int = 20_000,
) -> tuple[np.ndarray, dict[str, int]]:
    """Rows for ``verify`` and the count of each kind:

    - ``random``: uniform in the span of each feature's thresholds, a third of the cells on a
      critical value (threshold neighbours, categories);
    - ``threshold``: for every internal node (a seeded sample of ``max_nodes`` when there are
      more), rows that reach it with the node's feature on the threshold, on the float32 numbers
      just below and above it, and on the largest float32 <= t and its successor (plus the float64
      neighbours for float64 data), each value once; each category of a categorical node and an
      unseen one;
    - ``nan`` / ``inf``: where the model accepts them, cells NaN or +-inf, and NaN at each node;
    - ``extreme``: +-max float32, +-smallest subnormal, +-0.
    """
    _check_options(ens, rows, seed, dtype, max_nodes)
    dtype = np.dtype(dtype)
    # One generator draws every kind in turn: the order of the kinds is part of the seed's rows.
    rng = np.random.default_rng(seed)
    critical = _critical_values(ens, dtype)
    n_special = max(rows // 4, 16)
    parts = {
        "random": _random_rows(ens, rows, rng, dtype, critical),
        "threshold": _threshold_rows(ens, max_nodes, rng, dtype, critical),
    }
    if ens.accepts_nan:
        parts["nan"] = _nan_rows(ens, n_special, rng, dtype, critical)
    if ens.accepts_inf:
        parts["inf"] = _inf_rows(ens, n_special, rng, dtype, critical)
    parts["extreme"] = _extreme_rows(ens, n_special, rng, dtype, critical)
    parts = {kind: _accepted(ens, kind, X) for kind, X in parts.items()}
    kinds = {k: int(v.shape[0]) for k, v in parts.items()}
    return np.concatenate(list(parts.values()), axis=0), kinds


def _check_options(ens: Ensemble, rows: int, seed: int, dtype: np.dtype, max_nodes: int) -> None:
    """An error for ``--rows`` or ``--seed`` out of range, or rows that would take over
    :data:`MAX_SYNTHESIZED_BYTES`."""
    if not 0 <= rows <= MAX_ROWS:
        raise OptionError(f"--rows must be between 0 and {MAX_ROWS}")
    if not 0 <= seed < 2**63:
        raise OptionError("--seed must be >= 0")
    n_nodes = min(sum(t.n_internal for t in ens.trees), max_nodes)
    per_node = 22 if ens.is_oblique else 8  # (an oblique node: 3 cells moved onto its hyperplane, 7 steps each, and NaN)
    estimate = (rows + per_node * n_nodes + 3 * max(rows // 4, 16)) * ens.n_features * np.dtype(dtype).itemsize
    if estimate > MAX_SYNTHESIZED_BYTES:
        raise OptionError(
            f"synthesized rows would take {estimate / 2**30:.1f} GiB for {ens.n_features} features; "
            "lower --rows or pass --data"
        )


def _threshold_rows(ens: Ensemble, max_nodes: int, rng: np.random.Generator, dtype: np.dtype, critical: list[np.ndarray]) -> np.ndarray:
    """The ``threshold`` rows: :func:`_path_rows` at every internal node (a seeded sample of
    ``max_nodes`` when there are more), each from a random row of its own."""
    nodes = [(t, i) for t, tree in enumerate(ens.trees) for i in range(tree.n_internal)]
    if len(nodes) > max_nodes:
        keep = np.sort(rng.choice(len(nodes), size=max_nodes, replace=False))
        nodes = [nodes[k] for k in keep]
    base = _random_rows(ens, max(len(nodes), 1), rng, dtype, critical)
    boundary: list[np.ndarray] = []
    cmp = compare_dtype(ens.source_dtype, dtype)
    indexes: dict[int, _TreeIndex] = {}
    with np.errstate(over="ignore"):  # (past the largest float32: +-inf, where _path_rows checks for it)
        for k, (t, i) in enumerate(nodes):
            if t not in indexes:
                indexes[t] = _tree_index(ens, ens.trees[t], cmp)
            boundary += _path_rows(ens, ens.trees[t], indexes[t], i, base[k], critical, rng, ens.accepts_nan)
    return np.asarray(boundary, dtype).reshape(-1, ens.n_features)


def _nan_rows(ens: Ensemble, n: int, rng: np.random.Generator, dtype: np.dtype, critical: list[np.ndarray]) -> np.ndarray:
    """The ``nan`` rows: random rows with 30 % of the cells NaN, the first row all NaN."""
    X = _random_rows(ens, n, rng, dtype, critical)
    X[rng.random(X.shape) < 0.3] = np.nan
    X[0] = np.nan
    return X


def _inf_rows(ens: Ensemble, n: int, rng: np.random.Generator, dtype: np.dtype, critical: list[np.ndarray]) -> np.ndarray:
    """The ``inf`` rows: random rows with 15 % of the cells +inf and 15 % -inf, the first two
    rows all +inf and all -inf."""
    X = _random_rows(ens, n, rng, dtype, critical)
    cells: np.ndarray = rng.random(X.shape)
    X[cells < 0.15] = np.inf
    X[(cells >= 0.15) & (cells < 0.3)] = -np.inf
    X[0], X[1] = np.inf, -np.inf
    return X


def _extreme_rows(ens: Ensemble, n: int, rng: np.random.Generator, dtype: np.dtype, critical: list[np.ndarray]) -> np.ndarray:
    """The ``extreme`` rows: random rows with 30 % of the cells +-max float32, +-smallest
    subnormal or +-0."""
    X = _random_rows(ens, n, rng, dtype, critical)
    specials = np.asarray([np.finfo(np.float32).max, np.finfo(np.float32).smallest_subnormal, 0.0])
    specials = np.concatenate([specials, -specials]).astype(dtype)
    cells = rng.random(X.shape) < 0.3
    X[cells] = rng.choice(specials, size=int(cells.sum()))
    return X


def _accepted(ens: Ensemble, kind: str, X: np.ndarray) -> np.ndarray:
    """The rows of ``X`` (of ``kind``) the source model accepts, after its own cast; ``inf``
    rows first have their inf moved off the features that refuse it (in place)."""
    if ens.finite_features and kind == "inf":
        cols = list(ens.finite_features)
        X[:, cols] = np.where(np.isinf(X[:, cols]), 0.0, X[:, cols])
    with np.errstate(over="ignore"):
        seen = X.astype(ens.source_dtype)  # float64 beyond float32 becomes inf there
    keep = np.ones(X.shape[0], bool)
    if not ens.accepts_nan:
        keep &= ~np.isnan(seen).any(axis=1)
    if not ens.accepts_inf:
        keep &= ~np.isinf(seen).any(axis=1)
    elif ens.finite_features:
        keep &= ~np.isinf(seen[:, list(ens.finite_features)]).any(axis=1)
    return X[keep]


def _feature_values(ens: Ensemble) -> tuple[list[list[np.ndarray]], list[list[np.ndarray]]]:
    """Per feature: the numeric thresholds and the category values used anywhere."""
    thresholds: list[list[np.ndarray]] = [[] for _ in range(ens.n_features)]
    categories: list[list[np.ndarray]] = [[] for _ in range(ens.n_features)]
    for tree in ens.trees:
        numeric = tree.feature < ens.n_features  # (oblique nodes test projections, no feature)
        numeric[tree.cat_nodes] = False
        for f in np.unique(tree.feature[numeric]):
            thresholds[f].append(tree.threshold[numeric & (tree.feature == f)])
        for m, node in enumerate(tree.cat_nodes):
            vals = tree.cat_values[m]
            categories[tree.feature[node]].append(vals[~np.isnan(vals)])
    return thresholds, categories


def _critical_values(ens: Ensemble, dtype: np.dtype) -> list[np.ndarray]:
    """Per feature, values of ``dtype`` where routing can go wrong: each threshold's float32
    neighbours (and, for float64 data, its float64 neighbours and the float64 values just around
    the float32 rounding midpoints); each category value and one unseen value."""
    thresholds, categories = _feature_values(ens)
    out = []
    for f in range(ens.n_features):
        vals = []
        if thresholds[f]:
            t = np.unique(np.concatenate(thresholds[f]))
            t = t[np.isfinite(t)]
            vals.append(float32_neighbours(t).astype(np.float64).ravel())
            if dtype == np.float64:
                up = np.nextafter(t, np.inf)
                mid = (graph_thresholds(t, ens.comparison, np.dtype(np.float32)).astype(np.float64)
                       + np.nextafter(graph_thresholds(t, ens.comparison, np.dtype(np.float32)), np.float32(np.inf)).astype(np.float64)) / 2
                vals += [t, up, np.nextafter(t, -np.inf), mid, np.nextafter(mid, np.inf), np.nextafter(mid, -np.inf)]
        if categories[f]:
            c = np.unique(np.concatenate(categories[f]))
            vals += [c, np.asarray([c.max() + 1.0, -1.0])]
            if ens.category_codes is not CategoryCodes.EXACT:  # codes truncate: between codes
                vals += [c + 0.5, np.nextafter(c + 1.0, -np.inf), np.asarray([-0.5, -0.0])]
        v = np.unique(np.concatenate(vals)) if vals else np.zeros(0)
        with np.errstate(over="ignore"):
            out.append(v[np.isfinite(v.astype(dtype))].astype(dtype))
    return out


def _ranges(ens: Ensemble) -> tuple[np.ndarray, np.ndarray]:
    thresholds, categories = _feature_values(ens)
    lo, hi = np.zeros(ens.n_features), np.ones(ens.n_features)
    for f in range(ens.n_features):
        vals = [np.concatenate(v) for v in (thresholds[f], categories[f]) if v]
        if vals:
            v = np.concatenate(vals)
            v = v[np.abs(v) <= np.finfo(np.float32).max / 4]  # finite, and no overflow below (CatBoost: -FLT_MAX borders)
            if v.size:
                span = max(v.max() - v.min(), abs(v).max() * 0.1, 1.0)
                lo[f], hi[f] = v.min() - 0.25 * span, v.max() + 0.25 * span
    return lo, hi


def _random_rows(ens: Ensemble, n: int, rng: np.random.Generator, dtype: np.dtype, critical: list[np.ndarray]) -> np.ndarray:
    lo, hi = _ranges(ens)
    X = rng.uniform(lo, hi, size=(n, ens.n_features))
    for f, values in enumerate(critical):  # a third of the cells sit on a critical value
        if values.size:
            pick = rng.random(n) < 1 / 3
            X[pick, f] = rng.choice(values, size=int(pick.sum()))
    return X.astype(dtype)


@dataclass(frozen=True)
class _TreeIndex:
    """Per tree, computed once: each internal node's parent and side, thresholds as compared."""

    parent: dict[int, tuple[int, bool]]
    thresholds: np.ndarray
    cat_row: dict[int, int]
    #: float64 [I, 5]: :func:`float32_neighbours` of each node's threshold.
    neighbours: np.ndarray


def _tree_index(ens: Ensemble, tree: Tree, cmp: np.dtype) -> _TreeIndex:
    parent: dict[int, tuple[int, bool]] = {}
    for i in range(tree.n_internal):
        for child, is_left in ((int(tree.left[i]), True), (int(tree.right[i]), False)):
            if child >= 0:
                parent[child] = (i, is_left)
    return _TreeIndex(
        parent=parent,
        thresholds=graph_thresholds(tree.threshold, ens.comparison, cmp).astype(np.float64),
        cat_row={int(n): m for m, n in enumerate(tree.cat_nodes)},
        neighbours=float32_neighbours(tree.threshold[:tree.n_internal]).astype(np.float64),
    )


def _row_reaching(
    ens: Ensemble, tree: Tree, index: _TreeIndex, node: int, base: np.ndarray, critical: list[np.ndarray], rng: np.random.Generator,
) -> np.ndarray:
    """A copy of ``base`` moved onto the path to ``node``: at each node above it, the cell it
    tests gets a value that goes the path's way (one of that side's categories, or a critical
    value, else the bound, between the thresholds passed so far). Oblique nodes on the path bound
    no feature, so the row may still miss ``node``."""
    row = base.copy()
    lo = np.full(ens.n_features, -np.inf)
    hi = np.full(ens.n_features, np.inf)
    cmp = compare_dtype(ens.source_dtype, base.dtype)
    parent = index.parent
    path = []
    cur = node
    while cur in parent:
        p, is_left = parent[cur]
        path.append((p, is_left))
        cur = p
    cat_row = index.cat_row
    for p, is_left in reversed(path):
        f = int(tree.feature[p])
        if f >= ens.n_features:  # an oblique node: no bound on one feature (the row may not reach the node)
            continue
        if p in cat_row:
            m = cat_row[p]
            vals, lefts = tree.cat_values[m], tree.cat_left[m]
            ok = vals[(lefts == is_left) & ~np.isnan(vals)]
            if ok.size:
                row[f] = rng.choice(ok)
            elif bool(tree.other_left[m]) == is_left:  # a value that is no category of the node
                row[f] = -1.0
            elif bool(tree.default_left[p]) == is_left:
                row[f] = np.nan
            continue
        t = float(index.thresholds[p])
        if is_left:
            hi[f] = min(hi[f], t)
        else:  # (past the largest number: +inf, right)
            lo[f] = max(lo[f], float(np.nextafter(cmp.type(t), cmp.type(np.inf))))
        if not lo[f] <= row[f] <= hi[f]:
            inside = critical[f][(critical[f] >= lo[f]) & (critical[f] <= hi[f])]
            row[f] = rng.choice(inside) if inside.size else (hi[f] if np.isfinite(hi[f]) else lo[f])
    return row


def _path_rows(
    ens: Ensemble, tree: Tree, index: _TreeIndex, node: int, base: np.ndarray, critical: list[np.ndarray], rng: np.random.Generator, nan: bool,
) -> list[np.ndarray]:
    """Rows that reach ``node`` of ``tree`` and sit on its threshold (and neighbours), or on each
    of its categories; plus NaN there when the model accepts it."""
    row = _row_reaching(ens, tree, index, node, base, critical, rng)
    f = int(tree.feature[node])
    if f >= ens.n_features:
        return _hyperplane_rows(ens, tree, node, row, rng, nan)
    if node in index.cat_row:
        m = index.cat_row[node]
        vals = tree.cat_values[m]
        targets = list(vals[~np.isnan(vals)]) + [np.nanmax(vals) + 1.0]
    else:
        targets = list(index.neighbours[node])
        if base.dtype == np.float64:
            t = tree.threshold[node]
            targets += [t, np.nextafter(t, np.inf), np.nextafter(t, -np.inf)]
    if nan:
        targets.append(np.nan)
    rows = []
    # (a threshold's five float32 neighbours are three numbers: its nearest float32 is the
    # largest <= it or that one's successor; a row repeated checks nothing more)
    seen: set[bytes] = set()
    for v in targets:
        r = row.copy()
        r[f] = base.dtype.type(v)
        if (np.isinf(r[f]) and not np.isinf(v)) or r[f].tobytes() in seen:
            continue
        seen.add(r[f].tobytes())
        rows.append(r)
    return rows


def _hyperplane_rows(ens: Ensemble, tree: Tree, node: int, row: np.ndarray, rng: np.random.Generator, nan: bool) -> list[np.ndarray]:
    """Rows on and around oblique ``node``'s hyperplane ``w . x = t``: ``row`` moved along the
    term of largest ``|w|`` onto it (in float64), then that cell stepped 1 to 3 values of the
    dtype the sum is in (the source's when it casts, e.g. float32 rows of a float64 graph) down
    and up, so that the sum falls on both sides; plus the cell NaN when the model accepts it, and
    each of two other terms' cells moved instead."""
    assert ens.projections is not None
    feats, weights = ens.projections.terms(int(tree.feature[node]) - ens.n_features)
    dt = compare_dtype(ens.source_dtype, row.dtype).type  # (steps of the dtype the sum is in)
    t = float(tree.threshold[node])
    rows = []
    order = np.argsort(-np.abs(weights), kind="stable")
    picks = [order[0]] + (list(rng.choice(order[1:], size=min(2, order.size - 1), replace=False)) if order.size > 1 else [])
    for j in picks:
        f, w = int(feats[j]), float(weights[j])
        with np.errstate(invalid="ignore", over="ignore"):
            rest = float(np.dot(row[feats].astype(np.float64), weights)) - float(row[f]) * w
            target = (t - rest) / w
            if not np.isfinite(target) or abs(target) > float(np.finfo(dt).max):
                continue
            for k in range(-3, 4):
                v, cell = row.copy(), dt(target)
                for _ in range(abs(k)):
                    cell = np.nextafter(cell, dt(np.inf if k > 0 else -np.inf))
                v[f] = cell
                rows.append(v)
    if nan and rows:
        v = rows[0].copy()
        v[int(feats[order[0]])] = np.nan
        rows.append(v)
    return rows

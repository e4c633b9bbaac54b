"""Property tests on random IR trees: the graph's leaf ids equal the reference evaluator's, and
each tree's matrices read back to the tree.

Trees range from a single leaf to depth 20, with repeated thresholds, +-inf thresholds, float64
thresholds between float32 numbers, random default_left and categorical nodes (every category-code
rule, unknown categories going either way), LightGBM's zero band and missing type Zero; rows sit
on, just under and just over every threshold, between category codes, and hold NaN and +-inf.
"""

from __future__ import annotations

import dataclasses
import io

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import tree2mat
from tree2mat.inspect import matrices_of
from tree2mat.ir import Aggregation, Comparison, Ensemble, Link, Task, apply
from tree2mat.ir.build import tree_from_nodes
from tree2mat.ir.core import CategoryCodes
from tree2mat.ir.from_matrices import ensemble_from_matrices, tree_arrays
from tree2mat.ir.thresholds import float32_neighbours, graph_thresholds

from conftest import EXACT_VARIANTS, assert_standard_graph, run_onnx

pytestmark = pytest.mark.slow  # random trees by the hundred

N_FEATURES = 3
EXACT_FORMS = [name for name, spec in tree2mat.FORMS.items() if spec.exact]
POOL = [0.0, 1.0, -2.5, 0.1, 1e-40, 3.4e38, np.inf, -np.inf, 16777217.0, 0.30000000000000004,
        1e-35, -1e-35, 1.0000000180025095e-35, -1.0000000180025095e-35]


@st.composite
def random_tree(draw, comparison: Comparison):
    max_depth = draw(st.integers(0, 20))
    budget = [draw(st.integers(0, 48))]
    left, right, is_leaf, feature, threshold, dleft, cats = [], [], [], [], [], [], {}

    def new(depth: int) -> int:
        node = len(is_leaf)
        for arr in (left, right, feature):
            arr.append(-1)
        is_leaf.append(True)
        threshold.append(0.0)
        dleft.append(False)
        if depth >= max_depth or budget[0] <= 0 or draw(st.integers(0, 9)) == 0:
            return node
        budget[0] -= 1
        is_leaf[node] = False
        feature[node] = draw(st.integers(0, N_FEATURES - 1))
        t = draw(st.one_of(st.sampled_from(POOL), st.floats(-1e6, 1e6, allow_nan=False)))
        if comparison is Comparison.LT and t == -np.inf:
            t = 0.0
        threshold[node] = t
        dleft[node] = draw(st.booleans())
        if feature[node] == 2 and draw(st.booleans()):  # categorical node on feature 2
            values = np.asarray(draw(st.lists(st.integers(0, 6), min_size=1, max_size=5, unique=True)), float)
            cats[node] = (values, np.asarray(draw(st.lists(st.booleans(), min_size=len(values), max_size=len(values)))))
        # Deep, skewed trees: most often one child is a leaf.
        l_child = new(depth + 1)
        r_child = new(depth + 1)
        left[node], right[node] = l_child, r_child
        return node

    new(0)
    values = np.arange(len(is_leaf), dtype=float)[:, None]
    tree = tree_from_nodes(
        np.asarray(left), np.asarray(right), np.asarray(is_leaf), np.asarray(feature),
        np.asarray(threshold), np.asarray(dleft), values, categories=cats,
    )
    # LightGBM's missing type Zero at random nodes; XGBoost's "unknown categories go elsewhere".
    extras = {}
    if tree.n_internal and draw(st.booleans()):
        zero = np.asarray(draw(st.lists(st.booleans(), min_size=tree.n_internal, max_size=tree.n_internal)))
        zero[tree.cat_nodes] = False  # numeric nodes only
        extras["zero_missing"] = zero
    if tree.cat_nodes.size and draw(st.booleans()):
        m = tree.cat_nodes.size
        extras["cat_other_left"] = np.asarray(draw(st.lists(st.booleans(), min_size=m, max_size=m)))
    return dataclasses.replace(tree, **extras)


@st.composite
def random_ensemble(draw):
    comparison = draw(st.sampled_from(list(Comparison)))
    trees = tuple(draw(st.lists(random_tree(comparison), min_size=1, max_size=3)))
    return Ensemble(
        trees=trees, n_features=N_FEATURES, n_outputs=1, output_index=np.full(len(trees), -1),
        comparison=comparison, source_dtype=np.dtype(draw(st.sampled_from(["float32", "float64"]))),
        aggregation=Aggregation.SUM, base_score=np.zeros(1), link=Link.IDENTITY, task=Task.REGRESSION,
        category_codes=draw(st.sampled_from(list(CategoryCodes))),
        zero_band=draw(st.sampled_from([0.0, 1.0000000180025095e-35])),
    ).validate()


def _rows(ens: Ensemble, rng: np.random.Generator, dtype) -> np.ndarray:
    ts = np.concatenate([t.threshold for t in ens.trees] + [np.asarray(POOL)])
    ts = ts[np.isfinite(ts)]
    values = np.concatenate([
        float32_neighbours(ts).ravel(),
        [np.nan, np.inf, -np.inf, 7.0, 3.0, 2.5, -0.5, -0.0, -1.0, 1.99, 1e-36, -1e-36, 2.0**31],
    ]).astype(dtype)
    if np.dtype(dtype) == np.float64:
        values = np.concatenate([values, ts, np.nextafter(ts, np.inf), np.nextafter(ts, -np.inf)])
    return rng.choice(values, size=(400, N_FEATURES))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(ens=random_ensemble(), seed=st.integers(0, 2**32 - 1), dtype=st.sampled_from(["float32", "float64"]),
       variant=st.sampled_from(EXACT_VARIANTS))
def test_graph_leaves_equal_reference_leaves(ens, seed, dtype, variant):
    X = _rows(ens, np.random.default_rng(seed), dtype)
    onx = tree2mat.convert(ens, dtype=dtype, leaves=True, form=variant[0], matmul=variant[1])
    got = run_onnx(onx, X)["leaves"]
    np.testing.assert_array_equal(got, apply(ens, X))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ens=random_ensemble(), form=st.sampled_from(EXACT_FORMS))
def test_graph_is_standard_for_random_trees(ens, form):
    assert_standard_graph(tree2mat.convert(ens, leaves=True, form=form))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(ens=random_ensemble(), seed=st.integers(0, 2**32 - 1))
def test_random_trees_read_back_from_their_matrices(ens, seed):
    """Each tree's npz (inspect --tree K --format npz's arrays, through a file's bytes) reads back
    to that tree, array by array, and to the same matrices; in the ensemble, to the same leaves."""
    rebuilt = []
    for k, tree in enumerate(ens.trees):
        buf = io.BytesIO()
        np.savez(buf, **matrices_of(ens, k), **tree_arrays(ens, k))
        arrays = dict(np.load(io.BytesIO(buf.getvalue())))
        back = ensemble_from_matrices(arrays)
        for field in ("feature", "threshold", "default_left", "left", "right", "value", "cat_nodes", "cat_values", "cat_left", "zero_missing"):
            np.testing.assert_array_equal(getattr(back.trees[0], field), getattr(tree, field), err_msg=field)
        assert (back.trees[0].cat_other_left is None) == (tree.cat_other_left is None)
        if tree.cat_other_left is not None:
            np.testing.assert_array_equal(back.trees[0].cat_other_left, tree.cat_other_left)
        again = {**matrices_of(back, 0), **tree_arrays(back, 0)}
        assert again.keys() == arrays.keys()
        for key, value in arrays.items():
            np.testing.assert_array_equal(again[key], value, err_msg=key)
        rebuilt.append(back.trees[0])
    X = _rows(ens, np.random.default_rng(seed), ens.source_dtype)
    np.testing.assert_array_equal(apply(dataclasses.replace(ens, trees=tuple(rebuilt)), X), apply(ens, X))


@settings(max_examples=300, deadline=None)
@given(t=st.floats(allow_nan=False, width=64), x=st.floats(allow_nan=False, width=32))
def test_float32_threshold_rule_decides_like_float64(t, x):
    """sklearn/LightGBM: float32 x <= float64 t, compared in float64."""
    tg = graph_thresholds(np.asarray([t]), Comparison.LE, np.dtype(np.float32))[0]
    with np.errstate(over="ignore"):
        near = np.float32(t)  # round to nearest: the value most likely decided wrongly
        candidates = (np.float32(x), np.nextafter(np.float32(x), np.float32(np.inf)), near,
                      np.nextafter(near, np.float32(np.inf)), np.nextafter(near, np.float32(-np.inf)))
    for v32 in candidates:
        assert (np.float64(v32) <= t) == (v32 <= tg)


@settings(max_examples=300, deadline=None)
@given(t=st.floats(allow_nan=False, width=32), x=st.floats(allow_nan=False, width=32))
def test_float32_threshold_rule_for_less_than(t, x):
    """XGBoost: float32 x < float32 t (t = -inf is refused by Ensemble.validate)."""
    assume(t != -np.inf)
    tg = graph_thresholds(np.asarray([t]), Comparison.LT, np.dtype(np.float32))[0]
    with np.errstate(over="ignore"):  # stepping below -max float32 gives -inf, a fine probe
        below = float(np.nextafter(np.float32(t), np.float32(-np.inf)))
    for v in (x, t, below):
        v32 = np.float32(v)
        assert (v32 < np.float32(t)) == (v32 <= tg)


@pytest.mark.parametrize("form,matmul", EXACT_VARIANTS)
@pytest.mark.parametrize("depth", [0, 1, 20])
@pytest.mark.parametrize("side", ["left", "right", "zigzag"])
def test_single_leaf_and_depth_20_spines(depth, side, form, matmul):
    """The extremes the random trees reach only by chance: a single leaf, and spines of depth 20
    with repeated thresholds, NaN going either way."""
    n = 2 * depth + 1
    left, right = np.full(n, -1), np.full(n, -1)
    is_leaf = np.ones(n, bool)
    feature, threshold, dleft = np.zeros(n, int), np.zeros(n), np.zeros(n, bool)
    node = 0
    for d in range(depth):
        deeper, leaf = 2 * d + 1, 2 * d + 2
        go_left = side == "left" or (side == "zigzag" and d % 2 == 0)
        left[node], right[node] = (deeper, leaf) if go_left else (leaf, deeper)
        is_leaf[node], feature[node], threshold[node], dleft[node] = False, d % 3, float(d % 4) / 3, d % 2 == 0
        node = deeper
    tree = tree_from_nodes(left, right, is_leaf, feature, threshold, dleft, np.arange(n, dtype=float))
    ens = Ensemble(
        trees=(tree,), n_features=N_FEATURES, n_outputs=1, output_index=np.full(1, -1),
        comparison=Comparison.LE, source_dtype=np.dtype(np.float32), aggregation=Aggregation.SUM,
        base_score=np.zeros(1), link=Link.IDENTITY, task=Task.REGRESSION,
    ).validate()
    assert int(tree.leaf_depths().max(initial=0)) == depth
    X = _rows(ens, np.random.default_rng(depth), "float32")
    np.testing.assert_array_equal(run_onnx(tree2mat.convert(ens, leaves=True, form=form, matmul=matmul), X)["leaves"], apply(ens, X))

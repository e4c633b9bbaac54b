"""Rethink Decision Tree Traversal (Zhang), Theorem 2: "The algorithm (1) is equivalent to the
algorithm (2)". Alg. 1 is QuickScorer as the paper states it, run here: start from the all-ones
bitvector, AND in the bitvector of every false node, return the leaf of the leftmost 1. Alg. 2
is its matrix form, the leftmost maximum of B t + 1, which tree2mat's ``bitvector`` form computes.

The oracle is written from each tree's own arrays (``left``/``right``/``feature``/``threshold``/
``default_left``), never from tree2mat's matrices: it orders the leaves left to right by walking
the tree, gives each internal node QuickScorer's bitvector (0 at the leaves of its left subtree)
as a Python int whose most significant bit is the leftmost leaf, and evaluates every node's test
on every row (QuickScorer evaluates all nodes, not a path). A false node sends the row right.

Missing values: the paper's test is x_f <= t, false at NaN for every node (every NaN would go
right). The libraries send NaN (and LightGBM's zero under zero_as_missing) by a per-node default
direction, so the oracle's test is "x_f <= t (XGBoost: <), or x_f is missing and the node's
default is left": one Boolean per node still, which is all Alg. 1 and its proof need. The rows
are the reference evaluator's prepared input (the library's cast to float32 or float64, XGBoost's
``missing`` value, LightGBM's zero band); categorical nodes are outside the paper (a membership
test) and outside this file.

Checked: (1) on every test vector t in {0, 1}^I of trees with up to 10 internal nodes, Alg. 1's
result bitvector has its 1s exactly where B t + 1 (tree2mat's ``bitvector_matrix``) is largest,
so the leftmost 1 is the leftmost maximum; (2) on rows at every threshold, NaN, +-inf and
extreme values (``tree2mat.verify.synthesize``), Alg. 1's leaf is Alg. 2's (numpy), the
``bitvector`` graph's, the reference evaluator's and, for fitted trees, the library's own
(scikit-learn's ``apply``, XGBoost's and LightGBM's ``pred_leaf``) — on trees fitted by
scikit-learn, XGBoost and LightGBM and on Hypothesis trees (tests/forms/test_hypothesis_trees.py's
strategy, categorical nodes made numeric).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools

import lightgbm as lgb
import numpy as np
import pytest
import xgboost as xgb
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_diabetes, load_iris
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier
from sklearn.tree import DecisionTreeRegressor

import tree2mat
from tree2mat.ir import Comparison, Ensemble, Tree, apply
from tree2mat.ir.evaluate import prepare_input
from tree2mat.ir.matrices import bitvector_matrix
from tree2mat.verify import synthesize

from conftest import run_onnx, with_holes
from test_hypothesis_trees import _rows, random_ensemble
from test_paper_example import _rethink_tree
from test_proximity import library_leaves

# ------------------------------------------------------------------------- Alg. 1, the oracle


def leaves_left_to_right(tree: Tree, ref: int = 0) -> list[int]:
    """The leaves (IR indices) under child reference ``ref``, left to right, by walking the tree."""
    if tree.n_internal == 0:
        return [0]
    order: list[int] = []
    stack = [ref]
    while stack:
        r = stack.pop()
        if r < 0:
            order.append(-1 - r)
        else:
            stack += [int(tree.right[r]), int(tree.left[r])]  # (left popped first)
    return order


def node_bitvectors(tree: Tree) -> tuple[list[int], list[int]]:
    """Each internal node's QuickScorer bitvector as an int (bit L - 1 - p for the p-th leaf from
    the left: 0 where the leaf lies in the node's left subtree) and the leaves left to right."""
    order = leaves_left_to_right(tree)
    position = {leaf: p for p, leaf in enumerate(order)}
    L = len(order)
    bits = []
    for i in range(tree.n_internal):
        v = (1 << L) - 1
        for leaf in leaves_left_to_right(tree, int(tree.left[i])):
            v &= ~(1 << (L - 1 - position[leaf]))
        bits.append(v)
    return bits, order


def false_nodes(tree: Tree, X: np.ndarray, comparison: Comparison) -> np.ndarray:
    """bool [N, I]: every node's test, on every row of the prepared input, is false (right)."""
    x = X[:, tree.feature].astype(np.float64)
    with np.errstate(invalid="ignore"):
        true = x <= tree.threshold if comparison is Comparison.LE else x < tree.threshold
    missing = np.isnan(x) | ((x == 0) & tree.zero_missing if tree.zero_missing.size else False)
    return ~np.where(missing, tree.default_left, true)


def quickscorer(tree: Tree, false: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """Alg. 1 on each row's false nodes (bool [N, I]): the exit leaf (IR index) per row and the
    result bitvector per row."""
    bits, order = node_bitvectors(tree)
    L = len(order)
    leaves, results = [], []
    for row in false:
        v = (1 << L) - 1  # "Initialize the result bitvector v <- 1, 1, ..., 1"
        for u in np.flatnonzero(row):  # "for node u in U: v <- v AND u.bitvector"
            v &= bits[u]
        assert v, "no candidate leaf left"
        leaves.append(order[L - v.bit_length()])  # "index of the leftmost bit set to 1"
        results.append(v)
    return np.asarray(leaves, np.int64), results


def algorithm_2(tree: Tree, false: np.ndarray) -> np.ndarray:
    """Alg. 2 with tree2mat's bit-matrix: v = B t + 1 [N, L] (its leftmost maximum is ``argmax``)."""
    return false.astype(np.int64) @ bitvector_matrix(tree).T.astype(np.int64) + 1


def check_theorem_2(ens: Ensemble, X: np.ndarray) -> np.ndarray:
    """Alg. 1's leaves [N, T] on ``X``, each checked against Alg. 2 and the reference evaluator."""
    prepared = prepare_input(ens, X)
    reference = apply(ens, X)
    found = []
    for k, tree in enumerate(ens.trees):
        assert not tree.has_categorical and tree.n_internal == tree.n_leaves - 1
        false = false_nodes(tree, prepared, ens.comparison)
        alg1, _ = quickscorer(tree, false)
        np.testing.assert_array_equal(alg1, np.argmax(algorithm_2(tree, false), axis=1), err_msg=f"tree {k}: Alg. 1 != Alg. 2")
        np.testing.assert_array_equal(alg1, reference[:, k], err_msg=f"tree {k}: Alg. 1 != the reference evaluator")
        found.append(alg1)
    return np.stack(found, axis=1)


def check_every_test_vector(tree: Tree) -> int:
    """Thm. 2 on every t in {0, 1}^I (rows or not): Alg. 1's 1s are the maxima of B t + 1."""
    _, order = node_bitvectors(tree)
    L = len(order)
    assert L < 63  # (the result bitvectors as int64 below)
    false = np.array(list(itertools.product([False, True], repeat=tree.n_internal)), bool).reshape(2**tree.n_internal, tree.n_internal)
    _, results = quickscorer(tree, false)
    ones = np.zeros((len(results), L), bool)  # by IR leaf index
    ones[:, order] = (np.asarray(results, np.int64)[:, None] >> (L - 1 - np.arange(L))) & 1 == 1  # (L <= 11 here)
    v2 = algorithm_2(tree, false)
    np.testing.assert_array_equal(ones, v2 == v2.max(axis=1, keepdims=True))
    return len(results)


# ------------------------------------------------------------------------------ fitted trees

XI, YI = load_iris(return_X_y=True)
XD, YD = load_diabetes(return_X_y=True)
HOLES = with_holes(XI, np.random.default_rng(0), zeros=True)

MODELS = {
    "sklearn DecisionTreeRegressor": lambda: DecisionTreeRegressor(max_depth=6, random_state=0).fit(XD, YD),
    "sklearn RandomForestClassifier, NaN": lambda: RandomForestClassifier(n_estimators=4, max_depth=5, random_state=0).fit(HOLES, YI),
    "sklearn GradientBoostingClassifier": lambda: GradientBoostingClassifier(n_estimators=2, max_depth=3, random_state=0).fit(XI, YI),
    "xgboost, NaN": lambda: xgb.XGBClassifier(n_estimators=3, max_depth=4, n_jobs=1).fit(HOLES, YI),
    "lightgbm, NaN": lambda: lgb.LGBMRegressor(n_estimators=4, num_leaves=11, min_child_samples=5, verbose=-1, n_jobs=1).fit(HOLES, XI[:, 0]),
    "lightgbm zero_as_missing": lambda: lgb.LGBMRegressor(
        n_estimators=3, num_leaves=9, min_child_samples=5, zero_as_missing=True, verbose=-1, n_jobs=1).fit(HOLES, XI[:, 0]),
}


@functools.cache
def fitted(name: str):
    return MODELS[name]()


@pytest.mark.parametrize("name", list(MODELS))
def test_quickscorer_is_alg_2_the_graph_and_the_library_on_fitted_trees(name):
    model = fitted(name)
    ens = tree2mat.load(model)
    X, kinds = synthesize(ens, 150, seed=0)
    assert kinds["threshold"] and bool(kinds.get("nan")) == ens.accepts_nan
    assert ("zero_as_missing" in name) == any(t.zero_missing.any() for t in ens.trees)
    alg1 = check_theorem_2(ens, X)
    np.testing.assert_array_equal(alg1, run_onnx(tree2mat.convert(model, "bitvector", leaves=True), X)["leaves"])
    source = np.stack([t.leaf_source_id[alg1[:, k]] for k, t in enumerate(ens.trees)], axis=1)
    np.testing.assert_array_equal(source, library_leaves(model, X))
    assert all(len(np.unique(alg1[:, k])) > 1 for k in range(ens.n_trees))  # (rows reach more than one leaf)


def test_every_test_vector_of_small_fitted_trees_and_of_the_papers_tree():
    trees = [_rethink_tree()] + [t for name in MODELS for t in tree2mat.load(fitted(name)).trees if 1 <= t.n_internal <= 10]
    assert len(trees) >= 8
    assert sum(check_every_test_vector(t) for t in trees) >= 2**12


# --------------------------------------------------------------------------- Hypothesis trees


def _numeric(ens: Ensemble) -> Ensemble:
    """The ensemble with its categorical nodes made numeric (each keeps its drawn threshold)."""
    none = {"cat_nodes": np.zeros(0, np.int64), "cat_values": np.zeros((0, 0)), "cat_left": np.zeros((0, 0), bool), "cat_other_left": None}
    return dataclasses.replace(ens, trees=tuple(dataclasses.replace(t, **none) for t in ens.trees)).validate()


@pytest.mark.slow  # random trees by the dozen, a graph each
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(ens=random_ensemble(), seed=st.integers(0, 2**32 - 1), dtype=st.sampled_from(["float32", "float64"]))
def test_quickscorer_is_alg_2_and_the_graph_on_random_trees(ens, seed, dtype):
    ens = _numeric(ens)
    X = _rows(ens, np.random.default_rng(seed), dtype)
    alg1 = check_theorem_2(ens, X)
    np.testing.assert_array_equal(alg1, run_onnx(tree2mat.convert(ens, dtype=dtype, leaves=True, form="bitvector"), X)["leaves"])
    for tree in ens.trees:
        if tree.n_internal <= 10:
            check_every_test_vector(tree)

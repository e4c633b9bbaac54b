"""The papers' theorems on the template and bit matrices, on every kind of tree tree2mat reads.

- Decision Machines (Zhang), section 2.2, Theorem 1: "The template matrix is of full
  column-rank." B in {-1, 0, +1}^{L x (L-1)}, a row per leaf: -1 where the leaf lies in the
  node's left subtree, +1 in its right subtree, 0 off its path (section 2.1).
- Rethink Decision Tree Traversal (Zhang), section 2.2, Theorem 1: "The bit-matrix B is
  invertible for any decision tree." Its B is QuickScorer's bit-matrix, L x (L-1) (a column per
  internal node: 0 where the leaf lies in the node's left subtree, else 1), so not square: what
  the proof ends with, and what is tested here, is that the augmented matrix (B 1) is invertible.

Both are checked with numpy's rank (an SVD) on the matrices ``paper_matrices`` gives, after the
matrices themselves are held against the definitions: this test derives each leaf's path on its
own, walking up from the leaf through the parents (tree2mat walks down from the root). Also
checked, as the papers state them: every column of B has a -1 and a +1, the root's column has
no 0, the rows are distinct (Decision Machines 2.1-2.2); the last bit of every bitvector is 1,
the columns are distinct and no column is another's complement (Rethink 2.1-2.2); there is one
leaf more than internal nodes (Binary Network section 4).

A single-leaf tree (L = 1: a constant tree, as XGBoost's and LightGBM's pruned trees, or
scikit-learn's on a constant target) lies outside the papers' induction (which starts at two
leaves): B is 1 x 0, of full column rank 0, and (B 1) = (1) is invertible, so both statements
hold there too, and are checked.

The trees: each library's estimators fitted here on small data (scikit-learn's trees, forests,
extra-trees, gradient boosting, histogram boosting with categorical and missing values,
isolation forest; XGBoost depth-wise, loss-guided, categorical, multi-class; LightGBM
leaf-wise, categorical, single leaves; CatBoost symmetric, Depthwise, Lossguide), the model
files in fixtures/ and fixtures/corpus/, and random trees from Hypothesis (tests/forms/
test_hypothesis_trees.py's strategy), spines and complete trees. treeple's oblique trees are not
here (treeple is not installed beside the other libraries); their B is built the same way.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from sklearn import ensemble as sk_ensemble
from sklearn import tree as sk_tree

import tree2mat
from tree2mat.ir import Ensemble, Tree
from tree2mat.ir.build import tree_from_nodes
from tree2mat.ir.matrices import paper_matrices

from conftest import ROOT, with_holes
from test_hypothesis_trees import random_ensemble


def paths_by_parents(tree: Tree) -> tuple[np.ndarray, np.ndarray]:
    """The template matrix [L, I] by its definition and each leaf's depth [L], found by walking
    up from every leaf to the root."""
    parent: dict[tuple[bool, int], tuple[int, int]] = {}
    for i in range(tree.n_internal):
        for child, side in ((int(tree.left[i]), -1), (int(tree.right[i]), 1)):
            parent[(child < 0, -1 - child if child < 0 else child)] = (i, side)
    B = np.zeros((tree.n_leaves, tree.n_internal), np.int64)
    for leaf in range(tree.n_leaves):
        key = (True, leaf)
        while key in parent:
            node, side = parent[key]
            B[leaf, node] = side
            key = (False, node)
    return B, np.count_nonzero(B, axis=1)


def check_theorems(tree: Tree, n_features: int, projections: Any = None) -> None:
    """Both theorems and the papers' remarks on one tree (see the module's docstring)."""
    L, I = tree.n_leaves, tree.n_internal
    assert I == L - 1  # Binary Network, section 4: "this difference is always equal to 1"
    mats = paper_matrices(tree, n_features, projections)
    B, bits = mats["B"].astype(np.int64), mats["bitvector"].astype(np.int64)
    expected, depth = paths_by_parents(tree)
    np.testing.assert_array_equal(B, expected, err_msg="B is not the template matrix")
    np.testing.assert_array_equal(bits, (expected != -1).astype(np.int64), err_msg="not QuickScorer's bit-matrix")
    np.testing.assert_array_equal(mats["depth"], depth)

    # Decision Machines, Theorem 1: full column rank.
    assert B.shape == (L, L - 1)
    assert np.linalg.matrix_rank(B.astype(np.float64)) == I
    # Rethink Traversal, Theorem 1: (B 1) is invertible (L x L, rank L).
    augmented = np.c_[bits, np.ones(L, np.int64)].astype(np.float64)
    assert np.linalg.matrix_rank(augmented) == L
    # Stronger, and exact up to rounding: det (B 1) = +-1. Adding and subtracting columns turns
    # (1, the left-subtree indicators 1 - b) into every subtree's indicator, root down to the
    # leaves: the identity, with integer steps both ways.
    assert abs(np.linalg.det(augmented)) == pytest.approx(1.0, abs=1e-6)

    assert len({tuple(r) for r in B}) == L  # "The template vectors are distinct"
    if I:
        assert (B == -1).any(axis=0).all() and (B == 1).any(axis=0).all()  # "at least one 1 and -1"
        assert (B[:, 0] != 0).all()  # the root's column has no 0
        assert (bits[-1] == 1).all()  # "The last bit is always equal to 1 in each bitvector"
        columns = {tuple(c) for c in bits.T}
        assert len(columns) == I  # "The column is unique and distinct"
        assert not any(tuple(1 - np.asarray(c)) in columns for c in columns)  # "b and 1 - b cannot exist in the same bit-matrix"


def check_ensemble(ens: Ensemble) -> int:
    for tree in ens.trees:
        check_theorems(tree, ens.n_features, ens.projections)
    return ens.n_trees


# ---------------------------------------------------------------------------- the libraries

RNG = np.random.default_rng(0)
X = RNG.normal(size=(240, 4))
X[:, 3] = RNG.integers(0, 6, X.shape[0])  # a category code column
Y = ((X[:, 0] + X[:, 1] ** 2 > 0.7) ^ (X[:, 3] % 2 == 0)).astype(int)
Y3 = Y + (X[:, 2] > 0.5)
YR = 2 * X[:, 0] + np.sin(3 * X[:, 1]) + (X[:, 3] == 2)
XN = with_holes(X[:, :3], RNG)
FRAME = pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "c": pd.Categorical(X[:, 3].astype(int))})


def _xgb(**kw: Any) -> Any:
    import xgboost as xgb

    return (xgb.XGBClassifier if kw.pop("classify", False) else xgb.XGBRegressor)(n_estimators=6, random_state=0, n_jobs=1, **kw)


def _lgb(**kw: Any) -> Any:
    import lightgbm as lgb

    return (lgb.LGBMClassifier if kw.pop("classify", False) else lgb.LGBMRegressor)(n_estimators=6, verbose=-1, n_jobs=1, **kw)


def _cb(**kw: Any) -> Any:
    cb = pytest.importorskip("catboost")
    return cb.CatBoostRegressor(iterations=6, random_seed=0, verbose=0, thread_count=1, allow_writing_files=False, **kw)


# name: (fit, what the trees must show for the case to be what its name says)
LIBRARY_MODELS: dict[str, tuple[Callable[[], Any], str]] = {
    "sklearn DecisionTreeClassifier, unlimited": (lambda: sk_tree.DecisionTreeClassifier(random_state=0).fit(X, Y3), ""),
    "sklearn DecisionTreeRegressor, NaN": (lambda: sk_tree.DecisionTreeRegressor(max_depth=9, random_state=0).fit(XN, YR), ""),
    "sklearn DecisionTreeRegressor, constant target": (lambda: sk_tree.DecisionTreeRegressor().fit(X, np.ones(len(X))), "single leaf"),
    "sklearn ExtraTreeClassifier": (lambda: sk_tree.ExtraTreeClassifier(random_state=0).fit(X, Y), ""),
    "sklearn ExtraTreeRegressor, unlimited": (lambda: sk_tree.ExtraTreeRegressor(random_state=0).fit(X, YR), ""),
    "sklearn RandomForestClassifier, NaN": (lambda: sk_ensemble.RandomForestClassifier(n_estimators=6, random_state=0).fit(XN, Y3), ""),
    "sklearn ExtraTreesRegressor": (lambda: sk_ensemble.ExtraTreesRegressor(n_estimators=6, max_depth=7, random_state=0).fit(X, YR), ""),
    "sklearn GradientBoostingClassifier, 3 classes": (
        lambda: sk_ensemble.GradientBoostingClassifier(n_estimators=3, random_state=0).fit(X, Y3), ""),
    "sklearn HistGradientBoostingRegressor, NaN": (
        lambda: sk_ensemble.HistGradientBoostingRegressor(max_iter=6, random_state=0).fit(XN, YR), ""),
    "sklearn HistGradientBoostingClassifier, categorical": (
        lambda: sk_ensemble.HistGradientBoostingClassifier(max_iter=6, categorical_features=[3], random_state=0).fit(X, Y), "categorical"),
    "sklearn IsolationForest": (lambda: sk_ensemble.IsolationForest(n_estimators=6, random_state=0).fit(X), ""),
    "xgboost depthwise, NaN": (lambda: _xgb(max_depth=5).fit(XN, YR), ""),
    "xgboost lossguide, 3 classes": (
        lambda: _xgb(classify=True, grow_policy="lossguide", max_leaves=11, max_depth=0, tree_method="hist").fit(X, Y3), ""),
    "xgboost categorical": (
        lambda: _xgb(classify=True, enable_categorical=True, tree_method="hist", max_cat_to_onehot=1).fit(FRAME, Y), "categorical"),
    "xgboost pruned to single leaves": (lambda: _xgb(max_depth=3, gamma=1e9).fit(X, YR), "single leaf"),
    "lightgbm leaf-wise, NaN": (lambda: _lgb(num_leaves=13).fit(XN, YR), ""),
    "lightgbm categorical": (
        lambda: _lgb(classify=True, num_leaves=9, min_data_per_group=5, cat_smooth=1).fit(X, Y, categorical_feature=[3]), "categorical"),
    "lightgbm single leaf": (lambda: _lgb(min_child_samples=200).fit(X, YR), "single leaf"),
    "catboost symmetric": (lambda: _cb(depth=5).fit(XN, YR), "oblivious"),
    "catboost Depthwise": (lambda: _cb(depth=4, grow_policy="Depthwise").fit(X, YR), ""),
    "catboost Lossguide": (lambda: _cb(max_leaves=11, grow_policy="Lossguide").fit(X, YR), ""),
}


def _shows(ens: Ensemble, kind: str) -> bool:
    """Whether the trees have what the case is for (so that a library change cannot quietly
    turn it into another case)."""
    if kind == "single leaf":
        return any(t.n_leaves == 1 for t in ens.trees)
    if kind == "categorical":
        return any(t.has_categorical for t in ens.trees)
    if kind == "oblivious":  # every leaf at one depth D, 2^D of them
        depths = [paths_by_parents(t)[1] for t in ens.trees]
        return all(len(set(d)) == 1 and len(d) == 2 ** int(d[0]) for d in depths) and max(int(d[0]) for d in depths) == 5
    return True


@pytest.mark.parametrize("name", list(LIBRARY_MODELS))
def test_theorems_hold_on_the_libraries_trees(name):
    fit, kind = LIBRARY_MODELS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # (LightGBM: "no further splits with positive gain")
        ens = tree2mat.load(fit())
    assert _shows(ens, kind), f"{name}: no tree shows {kind!r}"
    assert check_ensemble(ens) == ens.n_trees >= 1


# ------------------------------------------------------------------- files and random trees

FILES = sorted(p for ext in ("json", "txt", "ubj") for p in (ROOT / "fixtures").glob(f"*.{ext}"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_theorems_hold_on_the_fixture_files(path):
    """XGBoost's dart, multi-output trees and categorical splits, LightGBM's random forest,
    linear trees and zero-as-missing, the Decision Machines example."""
    ens = tree2mat.load(path)
    assert check_ensemble(ens) == ens.n_trees >= 1


@pytest.mark.slow
def test_theorems_hold_on_every_corpus_file_its_library_loads(tmp_path):
    from test_corpus import CORPUS, _library_loads, _unpacked

    loaded, trees = 0, 0
    for packed in CORPUS:
        path = _unpacked(packed, tmp_path)
        if _library_loads(path):  # (what the library refuses, tree2mat refuses too: test_corpus.py)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # (the old files' parameters and formats)
                trees += check_ensemble(tree2mat.load(path))
            loaded += 1
    assert loaded and trees >= loaded


def _spine(depth: int, side: str) -> Tree:
    n = 2 * depth + 1
    left, right, is_leaf = np.full(n, -1), np.full(n, -1), np.ones(n, bool)
    node = 0
    for d in range(depth):
        deeper, leaf = 2 * d + 1, 2 * d + 2
        go_left = side == "left" or (side == "zigzag" and d % 2 == 0)
        left[node], right[node] = (deeper, leaf) if go_left else (leaf, deeper)
        is_leaf[node] = False
        node = deeper
    return tree_from_nodes(left, right, is_leaf, np.zeros(n, int), np.zeros(n), np.zeros(n, bool), np.zeros((n, 1)))


def _complete(depth: int) -> Tree:
    n = 2 ** (depth + 1) - 1
    ids = np.arange(n)
    inner = ids < 2**depth - 1
    left, right = np.where(inner, 2 * ids + 1, -1), np.where(inner, 2 * ids + 2, -1)
    return tree_from_nodes(left, right, ~inner, np.zeros(n, int), np.zeros(n), np.zeros(n, bool), np.zeros((n, 1)))


@pytest.mark.parametrize("tree", [
    *(pytest.param(_spine(d, s), id=f"spine-{s}-{d}") for s in ("left", "right", "zigzag") for d in (0, 1, 2, 60)),
    *(pytest.param(_complete(d), id=f"complete-{d}") for d in (1, 2, 3, 8)),
])
def test_theorems_hold_on_spines_and_complete_trees(tree):
    check_theorems(tree, 1)


@pytest.mark.slow  # random trees by the hundred
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(ens=random_ensemble())
def test_theorems_hold_on_random_trees(ens):
    check_ensemble(ens)

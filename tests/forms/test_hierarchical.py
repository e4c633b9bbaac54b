"""The hierarchical form: blocks of depth k, each the perfect tree's bitvector machine, the stages
chained by tables. Its template against a walk of the perfect tree, and its graphs against the
libraries' own predictions on trees of every shape: single leaves, depths that are and are not
multiples of k, leaf-wise trees, NaN and categorical splits."""

from __future__ import annotations

import itertools

import lightgbm as lgb
import numpy as np
import pytest
import xgboost as xgb
from sklearn.datasets import load_diabetes, make_classification
from sklearn.ensemble import RandomForestClassifier

import tree2mat
from tree2mat.forms import hierarchical

XD, YD = load_diabetes(return_X_y=True)


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_the_template_finds_the_perfect_trees_exit_for_every_bit_pattern(k):
    """For every pattern of test results of the perfect tree of depth k (heap order), the first
    maximum of Q z is the leaf a walk from the root reaches (right where the test holds)."""
    q = hierarchical.template(k)
    K = 2**k - 1
    for bits in itertools.product((0, 1), repeat=K):
        j = 0
        while j < K:
            j = 2 * j + 1 + bits[j]
        assert int(np.argmax(q @ np.asarray(bits, np.float32))) == j - K


@pytest.mark.parametrize("depth", [1, 2, 5, 7])
def test_xgboost_trees_of_every_depth_and_single_leaves(depth):
    """Depths below, at and past a block (k = 2 to 4), trees that shrink to one leaf (gamma),
    NaN cells: every row as XGBoost routes it."""
    X = XD.astype(np.float32).copy()
    X[::7, 2] = np.nan
    model = xgb.XGBRegressor(n_estimators=25, max_depth=depth, gamma=3000 if depth > 2 else 0, learning_rate=0.3).fit(X, YD)
    ens = tree2mat.load(model)
    if depth > 2:
        assert min(t.n_internal for t in ens.trees) == 0  # (the premise: single-leaf trees)
    report = tree2mat.verify(model, tree2mat.convert(model, "hierarchical"), data=X)
    assert report.passed, report.summary()


def test_leafwise_lightgbm_with_categorical_splits():
    """Leaf-wise trees of depths from 2 to past 10 with categorical nodes and missing values: as
    LightGBM."""
    X, y = make_classification(3000, 10, n_informative=6, random_state=3)
    X[:, 0] = np.random.default_rng(0).integers(0, 12, 3000)
    X[::11, 4] = np.nan
    model = lgb.LGBMClassifier(n_estimators=40, num_leaves=40, min_child_samples=3, random_state=0, verbose=-1)
    model.fit(X, y, categorical_feature=[0])
    ens = tree2mat.load(model)
    assert any(t.cat_nodes.size for t in ens.trees) and int(ens.tree_depths().max()) > 10
    report = tree2mat.verify(model, tree2mat.convert(model, "hierarchical"), data=X)
    assert report.passed, report.summary()


def test_a_forest_with_leaves_first_output_as_scikit_learn():
    """A random forest classifier (averaged probabilities) with ``--leaves``: leaf ids and
    probabilities as scikit-learn's."""
    X, y = make_classification(1500, 8, n_informative=5, n_classes=3, random_state=1)
    model = RandomForestClassifier(12, max_depth=9, random_state=0).fit(X, y)
    onx = tree2mat.convert(model, "hierarchical", leaves=True)
    report = tree2mat.verify(model, onx, data=X)
    assert report.passed, report.summary()


def test_block_depth_trades_stages_against_cells():
    """One deep tree takes the deepest blocks (fewest stages: its cells cost little); hundreds
    of trees the shallowest (each stage's cells cost more than its operators)."""
    one = tree2mat.load(xgb.XGBRegressor(n_estimators=1, max_depth=8).fit(XD, YD))
    many = tree2mat.load(xgb.XGBRegressor(n_estimators=400, max_depth=6).fit(XD, YD))
    assert hierarchical.block_depth(one) == max(hierarchical.DEPTHS)
    assert hierarchical.block_depth(many) == min(hierarchical.DEPTHS)
    assert hierarchical.stages(one, 4) == 2 and hierarchical.stages(many, 2) == 3

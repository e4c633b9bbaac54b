"""Every exact form against the libraries: the same models, the same synthesized rows
(threshold, NaN, +-inf, extreme, unseen categories, custom missing values), verified against each
library's own predictions with routing checked leaf by leaf. The per-library suites convert with
the default form (auto, which picks traverse for their models); this file makes sure every exact
form, and each reduced-precision MatMul, gives the same answers."""

from __future__ import annotations

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest
import xgboost as xgb
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris
from sklearn.ensemble import HistGradientBoostingClassifier, IsolationForest, RandomForestClassifier

import tree2mat

from conftest import EXACT_VARIANTS, assert_standard_graph, with_holes

RNG = np.random.default_rng(0)
XB, YB = load_breast_cancer(return_X_y=True)
XI, YI = load_iris(return_X_y=True)
XD, YD = load_diabetes(return_X_y=True)


def _holes(X: np.ndarray) -> np.ndarray:
    return with_holes(X, RNG, zeros=True)


def _categorical_frame():
    codes = RNG.integers(0, 12, XB.shape[0])
    codes[RNG.random(codes.size) < 0.1] = -1
    frame = pd.DataFrame(XB[:, :5], columns=list("abcde"))
    frame["c"] = pd.Categorical.from_codes(codes, categories=list(range(12)))
    return frame, ((codes % 3 == 0) ^ (XB[:, 0] > 14)).astype(int)


def _models():
    frame, y = _categorical_frame()
    X_cat = np.c_[XB[:, :5], np.where(frame["c"].cat.codes < 0, np.nan, frame["c"].cat.codes)]
    return {
        "sklearn RF, NaN": lambda: RandomForestClassifier(n_estimators=8, max_depth=6, random_state=0).fit(_holes(XI), YI),
        "sklearn HGB, categorical": lambda: HistGradientBoostingClassifier(max_iter=10, categorical_features=[5], random_state=0).fit(X_cat, y),
        "sklearn IsolationForest": lambda: IsolationForest(n_estimators=10, random_state=0).fit(XD),
        "xgboost categorical": lambda: xgb.XGBClassifier(n_estimators=10, max_depth=4, enable_categorical=True, tree_method="hist",
                                                         max_cat_to_onehot=1).fit(frame, y),
        "xgboost multiclass, missing -999": lambda: xgb.XGBClassifier(n_estimators=6, max_depth=4, missing=-999.0).fit(
            np.where(np.isnan(_holes(XI)), -999.0, XI), YI),
        "lightgbm categorical, zero_as_missing": lambda: lgb.LGBMClassifier(
            n_estimators=10, num_leaves=15, min_data_per_group=5, cat_smooth=1, zero_as_missing=True, verbose=-1).fit(X_cat, y, categorical_feature=[5]),
        "lightgbm linear_tree": lambda: lgb.LGBMRegressor(n_estimators=8, num_leaves=7, linear_tree=True, verbose=-1).fit(_holes(XD), YD),
        "lightgbm rf multiclass": lambda: lgb.LGBMClassifier(
            boosting_type="rf", n_estimators=6, num_leaves=7, bagging_freq=1, bagging_fraction=0.6, verbose=-1).fit(_holes(XI), YI),
    }


MODELS = _models()


@pytest.mark.slow
@pytest.mark.parametrize("form,matmul", EXACT_VARIANTS)
@pytest.mark.parametrize("name", list(MODELS))
def test_exact_form_matches_the_library(form, matmul, name):
    model = MODELS[name]()
    onx = tree2mat.convert(model, form=form, matmul=matmul)
    assert_standard_graph(onx)
    report = tree2mat.verify(model, onx, rows=300)
    assert report.passed, report.summary()
    raw = tree2mat.verify(model, tree2mat.convert(model, form=form, matmul=matmul, raw=True, dtype="float64"), rows=300)
    assert raw.passed, raw.summary()


def _padded_work(groups, sizes):
    return sum(g.size * (max(1, sizes[g].max()) + 1) * (max(1, sizes[g].max()) + 2) for g in groups)


def test_size_groups_partition_the_trees_near_the_least_padded_work():
    """The matrix forms pad each group of trees to its largest: every tree in exactly one group,
    at most four groups, and padded work within 10 % of the best split found by brute force."""
    import itertools

    from tree2mat.forms._exact import size_groups

    rng = np.random.default_rng(1)
    for _ in range(30):
        sizes = rng.choice([0, 1, 3, 7, 15, 31, 63], size=int(rng.integers(1, 12)))
        groups = size_groups(sizes)
        assert 1 <= len(groups) <= 4
        assert sorted(np.concatenate(groups).tolist()) == list(range(sizes.size))
        assert all(np.all(np.diff(g) > 0) for g in groups)
        # Brute force over every way to cut the sizes, largest first, into at most four groups.
        order = np.argsort(-np.maximum(sizes, 1), kind="stable")
        best = min(
            _padded_work(np.split(order, cuts), sizes)
            for k in range(4) for cuts in itertools.combinations(range(1, sizes.size), k)
        )
        assert _padded_work(groups, sizes) <= 1.1 * best
    assert len(size_groups(np.full(50, 30))) == 1  # equal trees: one group


@pytest.mark.parametrize("form,matmul", [v for v in EXACT_VARIANTS if v[0] not in ("traverse", "hierarchical", "treeensemble")])
def test_matrix_forms_group_trees_of_different_sizes_exactly(form, matmul):
    """Boosting whose later trees shrink to a few nodes or one leaf: the matrix forms pad the
    trees in several size groups (one MatMul each) and still route every row as XGBoost does."""
    model = xgb.XGBRegressor(n_estimators=30, max_depth=6, gamma=2000, learning_rate=0.3).fit(_holes(XD), YD)
    sizes = [t.n_internal for t in tree2mat.load(model).trees]
    assert max(sizes) > 30 and min(sizes) == 0  # (the premise: very different sizes)
    onx = tree2mat.convert(model, form=form, matmul=matmul)
    matrices = [i for i in onx.graph.initializer if i.name.endswith("_matrix")]
    assert len(matrices) > 1
    report = tree2mat.verify(model, onx, rows=400)
    assert report.passed, report.summary()

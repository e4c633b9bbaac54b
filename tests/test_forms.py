"""Every exact form against the libraries: the same models, the same synthesized rows
(threshold, NaN, +-inf, extreme, unseen categories, custom missing values), verified against each
library's own predictions with routing checked leaf by leaf. The sign form also runs the whole
per-library suites; this file makes sure every other exact form gives the same answers."""

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
        "xgboost categorical": lambda: xgb.XGBClassifier(n_estimators=10, max_depth=4, enable_categorical=True, tree_method="hist", max_cat_to_onehot=1).fit(frame, y),
        "xgboost multiclass, missing -999": lambda: xgb.XGBClassifier(n_estimators=6, max_depth=4, missing=-999.0).fit(np.where(np.isnan(_holes(XI)), -999.0, XI), YI),
        "lightgbm categorical, zero_as_missing": lambda: lgb.LGBMClassifier(n_estimators=10, num_leaves=15, min_data_per_group=5, cat_smooth=1, zero_as_missing=True, verbose=-1).fit(X_cat, y, categorical_feature=[5]),
        "lightgbm linear_tree": lambda: lgb.LGBMRegressor(n_estimators=8, num_leaves=7, linear_tree=True, verbose=-1).fit(_holes(XD), YD),
        "lightgbm rf multiclass": lambda: lgb.LGBMClassifier(boosting_type="rf", n_estimators=6, num_leaves=7, bagging_freq=1, bagging_fraction=0.6, verbose=-1).fit(_holes(XI), YI),
    }


MODELS = _models()


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

"""Categorical splits whose category codes are integers the library truncates from the input
(XGBoost ``enable_categorical``, LightGBM ``categorical_feature``): the graph must send every
float32 value where the library does — between codes, negative, NaN, unseen, huge."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xgboost as xgb

import tree2mat
from tree2mat.ir import evaluate

from conftest import assert_standard_graph

PROBES = [-1.5, -1.0, -0.5, -0.0, 0.5, 1.99, 2.0, 2.5, 29.5, 30.0, 31.0, 1e10, 2.0**31, np.nan]


def _data(n: int = 3000):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 3))
    codes = rng.integers(0, 30, n)
    codes[rng.random(n) < 0.1] = -1  # missing
    X[:, 2] = np.where(codes < 0, np.nan, codes)
    y = ((codes % 3 == 0) | (X[:, 0] > 0.5)).astype(int)
    frame = pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "c": pd.Categorical.from_codes(codes, categories=list(range(30)))})
    return X, frame, y


@pytest.mark.parametrize("max_cat_to_onehot", [1, 64])  # partition sets, one-hot splits
def test_xgboost_categorical_splits(max_cat_to_onehot):
    X, frame, y = _data()
    model = xgb.XGBClassifier(n_estimators=20, max_depth=4, enable_categorical=True, tree_method="hist",
                              max_cat_to_onehot=max_cat_to_onehot).fit(frame, y)
    ens = tree2mat.load(model)
    assert sum(t.cat_nodes.size for t in ens.trees) > 10
    onx = tree2mat.convert(model)
    assert_standard_graph(onx)
    report = tree2mat.verify(model, onx)
    assert report.passed, report.summary()
    rows = np.repeat(X[:50], len(PROBES), axis=0)
    rows[:, 2] = np.tile(PROBES, 50)
    dm = xgb.DMatrix(rows.astype(np.float32), feature_names=["a", "b", "c"], feature_types=["q", "q", "c"], enable_categorical=True)
    booster = model.get_booster()
    lib = booster.predict(dm, pred_leaf=True).astype(np.int64)
    assert np.array_equal(lib, evaluate.source_leaf_ids(ens, rows))
    margin = booster.predict(dm, output_margin=True)
    assert np.array_equal(evaluate.margin(ens, rows)[:, 0].astype(np.float32), margin)
    report = tree2mat.verify(model, onx, rows.astype(np.float32))
    assert report.passed, report.summary()

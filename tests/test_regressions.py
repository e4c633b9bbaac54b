"""Cases found in review, each with the original reproduction, and the bit-exact margins."""

from __future__ import annotations

import os
import stat

import numpy as np
import pytest
from sklearn import ensemble as E
from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits
from sklearn.tree import DecisionTreeClassifier

import tree2mat
from tree2mat.errors import OptionError, UnsupportedModelError
from tree2mat.verify import run_graph, synthesize

XB, YB = load_breast_cancer(return_X_y=True)
XD, YD = load_diabetes(return_X_y=True)


@pytest.mark.parametrize(
    "name,model,raw",
    [
        ("gb_binary", lambda: E.GradientBoostingClassifier(n_estimators=60).fit(XB, YB), lambda m, X: m.decision_function(X)),
        ("gb_multi", lambda: E.GradientBoostingClassifier(n_estimators=10).fit(*load_digits(return_X_y=True)), lambda m, X: m.decision_function(X)),
        ("hgb", lambda: E.HistGradientBoostingRegressor(max_iter=100).fit(XD, YD), lambda m, X: m._raw_predict(X)),
        ("rf_proba", lambda: E.RandomForestClassifier(60, random_state=0).fit(XB, YB), lambda m, X: m.predict_proba(X)),
        ("rf_reg", lambda: E.RandomForestRegressor(60, max_depth=8, random_state=0).fit(XD, YD), lambda m, X: m.predict(X)),
    ],
)
def test_float64_margins_are_bit_identical_to_sklearn(name, model, raw):
    """The base score is folded into the first tree and the trees are summed in order, so the
    float64 margin repeats scikit-learn's additions exactly: ties break the same way."""
    m = model()
    ens = tree2mat.load(m)
    X, _ = synthesize(ens, 500, dtype=np.float64, max_nodes=2000)
    X = X[~np.isnan(X).any(axis=1) & ~np.isinf(X.astype(np.float32)).any(axis=1)]
    got = run_graph(tree2mat.convert(m, dtype="float64", raw=True), X, rows_per_chunk=2000)["variable"]
    with np.errstate(over="ignore", invalid="ignore"):
        expected = np.asarray(raw(m, X)).reshape(X.shape[0], -1)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(tree2mat.ir.margin(ens, X), expected)


def test_float64_graph_of_a_model_trained_with_nan():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    X[rng.random(X.shape) < 0.1] = np.nan
    model = E.RandomForestRegressor(5, random_state=0).fit(X, np.nan_to_num(X[:, 0]))
    report = tree2mat.verify(model, tree2mat.convert(model, dtype="float64"))
    assert report.passed, report.summary()


def test_isolation_forest_rows_on_the_offset_keep_their_label():
    rng = np.random.default_rng(21)
    X = rng.normal(size=(21, 3))
    model = E.IsolationForest(n_estimators=94, max_samples=16, contamination=0.1, random_state=21).fit(X)
    report = tree2mat.verify(model, tree2mat.convert(model), data=X)
    assert report.passed, report.summary()


def test_high_cardinality_categorical_verifies_in_bounded_memory():
    rng = np.random.default_rng(0)
    c = rng.integers(0, 200, 3000) * 1.5 - 40
    X = np.column_stack([c, rng.normal(size=3000)])
    model = E.HistGradientBoostingClassifier(max_iter=20, categorical_features=[0]).fit(X, np.sin(c) > 0)
    ens = tree2mat.load(model)
    assert tree2mat.FORMS["sign"].bytes_per_row(ens) < 100_000
    report = tree2mat.verify(model, tree2mat.convert(model))
    assert report.passed, report.summary()


def test_labels_that_do_not_fit_are_refused():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 2))
    y = np.array([0, 2**63 + 5, 5], dtype=np.uint64)[rng.integers(0, 3, 60)]
    with pytest.raises(UnsupportedModelError, match="does not fit int64"):
        tree2mat.convert(DecisionTreeClassifier().fit(X, y))
    with pytest.raises(UnsupportedModelError, match="single class"):
        tree2mat.convert(DecisionTreeClassifier().fit(X, np.zeros(60)))


@pytest.mark.parametrize("kwargs", [{"atol": float("nan")}, {"rtol": float("nan")}, {"atol": -1.0}])
def test_nan_or_negative_tolerances_are_refused(kwargs):
    model = DecisionTreeClassifier(max_depth=2).fit(XB, YB)
    with pytest.raises(OptionError, match="must be numbers >= 0"):
        tree2mat.verify(model, tree2mat.convert(model), **kwargs)


@pytest.mark.parametrize("opset", [0, 12, 27])
def test_opsets_outside_the_range_are_refused(opset):
    with pytest.raises(OptionError, match=f"opset {opset} is not supported"):
        tree2mat.convert(DecisionTreeClassifier(max_depth=2).fit(XB, YB), opset=opset)


def test_written_files_get_the_usual_mode(tmp_path):
    onx = tree2mat.convert(DecisionTreeClassifier(max_depth=2).fit(XB, YB))
    umask = os.umask(0o022)
    try:
        tree2mat.save(onx, tmp_path / "m.onnx")
    finally:
        os.umask(umask)
    assert stat.S_IMODE((tmp_path / "m.onnx").stat().st_mode) == 0o644


@pytest.mark.parametrize("form", ["traverse", "sign", "bitvector"])
def test_missing_value_the_compared_dtype_cannot_hold(form):
    """Found by fuzzing the IR: a float64 model whose missing value (1e-200) rounds to 0 in
    float32. The library compares a row's float64 value with it, so a float32 0 is not missing;
    the graph compared in float32 and took every 0 for missing."""
    import dataclasses

    m = E.HistGradientBoostingRegressor(max_iter=5).fit(XD, YD)
    ens = dataclasses.replace(tree2mat.load(m), missing_value=1e-200)
    X = XD[:40].astype(np.float32)
    X[::2, :] = 0.0
    X[1::4, :] = np.float32(1e-200)  # (0 too, in float32)
    got = run_graph(tree2mat.convert(ens, form, leaves=True), X)["leaves"]
    np.testing.assert_array_equal(got, tree2mat.ir.apply(ens, X))
    assert not np.array_equal(got, tree2mat.ir.apply(dataclasses.replace(ens, missing_value=0.0), X))


def test_xgboost_missing_value_is_its_float32():
    """XGBoost holds ``missing`` as a float32: 1e-200 is 0 there, and 0 is missing."""
    xgb = pytest.importorskip("xgboost")
    X = XB.astype(np.float32).copy()
    X[::3, :5] = 0.0
    m = xgb.XGBClassifier(n_estimators=5, max_depth=3, missing=1e-200).fit(X, YB)
    assert tree2mat.verify(m, tree2mat.convert(m, "traverse"), X).passed
    assert not tree2mat.verify(m, tree2mat.convert(xgb.XGBClassifier(n_estimators=5, max_depth=3).fit(X, YB), "traverse"), X).passed

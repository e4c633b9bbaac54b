"""XGBoost: the converted graph against XGBoost's own predictions (routing exact, margins
bit-identical in float64), native JSON files without xgboost importable, early stopping, the
`missing` value, and refusals for what is not supported yet."""

from __future__ import annotations

import sys

import joblib
import numpy as np
import pytest
import xgboost as xgb
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris, load_wine

import tree2mat
from tree2mat.errors import ModelFileError, UnsupportedModelError
from tree2mat.frontends.xgboost import OBJECTIVES

from conftest import assert_standard_graph

XB, YB = load_breast_cancer(return_X_y=True)
XD, YD = load_diabetes(return_X_y=True)
XI, YI = load_iris(return_X_y=True)


def fit(objective: str, booster: str = "gbtree", **kw):
    if objective.startswith("rank:"):
        qid = np.repeat(np.arange(XD.shape[0] // 20 + 1), 20)[: XD.shape[0]]
        levels = [150] if objective == "rank:map" else [100, 200]  # rank:map needs binary relevance
        return xgb.XGBRanker(n_estimators=15, objective=objective, booster=booster, **kw).fit(XD, np.digitize(YD, levels), qid=qid)
    if objective.startswith("binary:"):
        return xgb.XGBClassifier(n_estimators=15, objective=objective, booster=booster, **kw).fit(XB, YB)
    if objective.startswith("multi:"):
        return xgb.XGBClassifier(n_estimators=10, objective=objective, booster=booster, **kw).fit(*load_wine(return_X_y=True))
    y = (YD > 150).astype(float) if objective == "reg:logistic" else YD
    if objective in ("reg:squaredlogerror", "reg:pseudohubererror"):
        y = YD / 100  # on the raw scale their hessians are too small for any split
    return xgb.XGBRegressor(n_estimators=15, objective=objective, booster=booster, **kw).fit(XD, y)


def check(model, exact_margins: bool = True, rows: int = 300) -> None:
    onx = tree2mat.convert(model)
    assert_standard_graph(onx)
    report = tree2mat.verify(model, onx, rows=rows)
    assert report.passed, report.summary()
    assert report.row_kinds["threshold"] > 0 and report.row_kinds["nan"] > 0
    if exact_margins:  # XGBoost sums in float32 from the base margin; so does the graph
        raw = tree2mat.verify(model, tree2mat.convert(model, raw=True, dtype="float64"), rows=rows, atol=0, rtol=0)
        assert raw.passed, raw.summary()


@pytest.mark.parametrize("objective", list(OBJECTIVES))
def test_objectives(objective):
    check(fit(objective))


@pytest.mark.parametrize("objective", ["binary:logistic", "multi:softprob", "reg:squarederror"])
def test_dart(objective):
    # DART scales each tree by its weight; routing and labels are exact, margins within tolerance.
    check(fit(objective, booster="dart", rate_drop=0.3, random_state=0), exact_margins=False)


@pytest.mark.parametrize("cls", [xgb.XGBRFClassifier, xgb.XGBRFRegressor])
def test_random_forests(cls):
    X, y = (XB, YB) if cls is xgb.XGBRFClassifier else (XD, YD)
    check(cls(n_estimators=10, random_state=0).fit(X, y))


@pytest.mark.parametrize("missing", [0.0, -999.0])
def test_custom_missing_value(missing):
    X = XB.copy()
    X[np.random.default_rng(0).random(X.shape) < 0.1] = missing
    model = xgb.XGBClassifier(n_estimators=15, missing=missing).fit(X, YB)
    assert tree2mat.load(model).missing_value == missing
    check(model)
    probe = X[:200].copy()
    assert tree2mat.verify(model, tree2mat.convert(model), probe).passed


def test_early_stopping_predicts_with_best_iteration():
    model = xgb.XGBClassifier(n_estimators=200, learning_rate=0.5, early_stopping_rounds=2, eval_metric="logloss")
    model.fit(XB[:400], YB[:400], eval_set=[(XB[400:], YB[400:])], verbose=False)
    assert model.best_iteration < 199
    assert tree2mat.load(model).n_trees == model.best_iteration + 1
    check(model)


def test_booster_objects_and_pickles(tmp_path):
    model = fit("multi:softprob")
    booster = model.get_booster()
    check(booster)
    joblib.dump(model, tmp_path / "m.joblib")
    assert tree2mat.verify(tmp_path / "m.joblib", tree2mat.convert(tmp_path / "m.joblib")).passed


def test_native_json_converts_without_xgboost(tmp_path, monkeypatch):
    model = fit("binary:logistic")
    path = tmp_path / "model.json"
    model.save_model(path)
    with monkeypatch.context() as m:
        m.setitem(sys.modules, "xgboost", None)  # import xgboost now fails
        onx = tree2mat.convert(path)
        with pytest.raises(ImportError):
            import xgboost  # noqa: F401
    # With xgboost back, verify compares with XGBoost's own Booster loaded from the file.
    report = tree2mat.verify(path, onx)
    assert report.passed and not report.notes, report.summary()
    raw = tree2mat.verify(path, tree2mat.convert(path, raw=True, dtype="float64"), atol=0, rtol=0)
    assert raw.passed, raw.summary()


@pytest.mark.parametrize(
    "edit,error,needle",
    [
        (lambda d: d["learner"].pop("gradient_booster"), ModelFileError, "need gradient_booster"),
        (lambda d: d["learner"]["gradient_booster"]["model"]["trees"][0].pop("split_conditions"), ModelFileError, "need split_conditions"),
        (lambda d: d["learner"]["gradient_booster"]["model"]["trees"][0].__setitem__("left_children", [1, 2]), ModelFileError, "differ in length"),
        (lambda d: d["learner"]["objective"].__setitem__("name", "binary:hinge"), UnsupportedModelError, "'binary:hinge' is not supported yet"),
        (lambda d: d["learner"]["learner_model_param"].__setitem__("base_score", "abc"), ModelFileError, "base_score"),
    ],
)
def test_malformed_json_names_the_field(tmp_path, edit, error, needle):
    import json

    path = tmp_path / "m.json"
    fit("binary:logistic").save_model(path)
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    with pytest.raises(error, match=needle):
        tree2mat.load(path)


def test_categorical_and_linear_boosters_are_refused():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"a": XI[:, 0], "c": pd.Categorical(np.digitize(XI[:, 1], [3, 3.5]))})
    model = xgb.XGBClassifier(n_estimators=3, enable_categorical=True, tree_method="hist").fit(frame, YI)
    with pytest.raises(UnsupportedModelError, match="categorical splits"):
        tree2mat.convert(model)
    linear = xgb.XGBRegressor(n_estimators=3, booster="gblinear").fit(XD, YD)
    with pytest.raises(UnsupportedModelError, match="booster 'gblinear'"):
        tree2mat.convert(linear)

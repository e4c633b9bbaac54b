"""LightGBM: the converted graph against LightGBM's own predictions and leaf indices (routing
exact, float64 margins bit-identical), every objective and boosting type, missing types, the zero
band, categorical bitsets, linear leaves, early stopping, native model text without lightgbm
importable, and malformed files."""

from __future__ import annotations

import dataclasses
import re
import sys

import joblib
import lightgbm as lgb
import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris

import tree2mat
from tree2mat.cli import main
from tree2mat.errors import InvalidTreeError, ModelFileError, UnsupportedModelError
from tree2mat.frontends.lightgbm import OBJECTIVES
from tree2mat.ir import evaluate
from tree2mat.verify import synthesize

from conftest import assert_standard_graph

RNG = np.random.default_rng(0)


def _holes(X: np.ndarray, seed: int = 0) -> np.ndarray:
    """5 % NaN and 10 % exact zeros, so missing types and zero thresholds appear."""
    rng = np.random.default_rng(seed)
    X = X.copy()
    X[rng.random(X.shape) < 0.05] = np.nan
    X[rng.random(X.shape) < 0.10] = 0.0
    return X


XB, YB = load_breast_cancer(return_X_y=True)
XB = _holes(XB)
XD, YD = load_diabetes(return_X_y=True)
XD = _holes(XD)
XI, YI = load_iris(return_X_y=True)
XI = _holes(XI)
SMALL = dict(n_estimators=12, num_leaves=15, min_child_samples=5, verbose=-1, random_state=0)


def fit(objective: str, **kw):
    params = {**SMALL, **kw}
    if objective in ("lambdarank", "rank_xendcg"):
        group = np.full(XD.shape[0] // 21 + 1, 21)
        group[-1] = XD.shape[0] - group[:-1].sum()
        return lgb.LGBMRanker(objective=objective, **params).fit(XD, np.digitize(YD, [100, 200]), group=group)
    if objective == "binary":
        return lgb.LGBMClassifier(objective=objective, **params).fit(XB, YB)
    if objective.startswith("multiclass"):
        return lgb.LGBMClassifier(objective=objective, **params).fit(XI, np.asarray(["a", "b", "c"])[YI])
    y = {
        "cross_entropy": (YD > 150).astype(float),
        "cross_entropy_lambda": (YD > 150).astype(float),
        "poisson": YD, "gamma": YD, "tweedie": YD,
    }.get(objective, YD)
    return lgb.LGBMRegressor(objective=objective, **params).fit(XD, y)


def library_leaves(model, ens, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """LightGBM's own leaf index per row and tree, and the reference evaluator's, mapped to
    LightGBM's numbering."""
    booster = model if isinstance(model, lgb.Booster) else model.booster_
    lib = np.asarray(booster.predict(X, pred_leaf=True)).reshape(X.shape[0], -1)
    return lib, evaluate.source_leaf_ids(ens, X)


def check(model, rows: int = 300, exact_margins: bool = True) -> None:
    onx = tree2mat.convert(model)
    assert_standard_graph(onx)
    report = tree2mat.verify(model, onx, rows=rows)
    assert report.passed, report.summary()
    assert report.row_kinds["threshold"] > 0 and report.row_kinds["nan"] > 0
    ens = tree2mat.load(model)
    X, _ = synthesize(ens, rows, dtype=np.dtype(np.float64))
    lib, ours = library_leaves(model, ens, X)
    assert np.array_equal(lib, ours), f"{np.count_nonzero((lib != ours).any(axis=1))} rows routed differently"
    if exact_margins:  # LightGBM sums in float64, tree by tree; so does the float64 graph
        raw = tree2mat.verify(model, tree2mat.convert(model, raw=True, dtype="float64"), X, atol=0, rtol=0)
        assert raw.passed, raw.summary()


@pytest.mark.slow
@pytest.mark.parametrize("objective", list(OBJECTIVES))
def test_objectives(objective):
    check(fit(objective))


@pytest.mark.slow
@pytest.mark.parametrize("boosting", ["dart", "goss", "rf"])
@pytest.mark.parametrize("objective", ["binary", "multiclass", "regression"])
def test_boosting_types(boosting, objective):
    extra = dict(bagging_freq=1, bagging_fraction=0.6) if boosting == "rf" else {}
    check(fit(objective, boosting_type=boosting, **extra))


@pytest.mark.parametrize("params", [dict(zero_as_missing=True), dict(use_missing=False), dict(zero_as_missing=True, use_missing=False)])
def test_missing_types(params):
    model = fit("binary", **params)
    kinds = {(int(d) >> 2) & 3 for line in model.booster_.model_to_string().splitlines()
             if line.startswith("decision_type=") for d in line.split("=")[1].split()}
    assert kinds != {2}, "the model should use missing types other than NaN"
    check(model)


def test_zero_band_is_needed():
    """LightGBM turns |x| <= 1e-35 into 0 before the trees; without that band, rows near the
    +-1e-35 thresholds it writes route differently from LightGBM itself."""
    model = fit("binary", zero_as_missing=True)
    ens = tree2mat.load(model)
    base = np.repeat(XB[:40], 6, axis=0)
    for i, v in enumerate([1e-36, -1e-36, 1e-35, -1e-35, 5e-40, -5e-40]):
        base[i::6, :] = np.where(np.isnan(base[i::6, :]), np.nan, v)
    lib, ours = library_leaves(model, ens, base)
    assert np.array_equal(lib, ours)
    _, without = library_leaves(model, dataclasses.replace(ens, zero_band=0.0), base)
    assert not np.array_equal(lib, without)
    assert tree2mat.verify(model, tree2mat.convert(model), base.astype(np.float32)).passed


def _categorical_data(n: int = 3000):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(n, 5))
    X[:, 3] = rng.integers(0, 40, n)
    X[:, 4] = rng.integers(0, 8, n)
    X[rng.random(n) < 0.1, 3] = np.nan
    y = ((X[:, 3] % 3 == 0) | (X[:, 0] > 0.5)).astype(int) + (X[:, 4] == 2)
    return X, y


@pytest.mark.parametrize("params", [{}, dict(zero_as_missing=True)])
def test_categorical_codes_follow_lightgbm(params):
    X, y = _categorical_data()
    model = lgb.LGBMClassifier(n_estimators=20, num_leaves=15, min_data_per_group=5, cat_smooth=1, verbose=-1, **params)
    model.fit(X, y, categorical_feature=[3, 4])
    ens = tree2mat.load(model)
    assert sum(t.cat_nodes.size for t in ens.trees) > 20
    check(model)
    # Codes are int(x) toward zero; negative codes, NaN, unseen and huge values go right.
    probes = [-1.5, -1.0, -0.5, -0.0, 0.5, 1.99, 2.0, 2.5, 39.5, 40.0, 41.0, 1e10, 2.0**31, np.nan, np.inf, -np.inf]
    rows = np.repeat(X[:60], len(probes), axis=0)
    for f in (3, 4):
        rows[:, f] = np.tile(probes, 60)
        lib, ours = library_leaves(model, ens, rows)
        assert np.array_equal(lib, ours)
        report = tree2mat.verify(model, tree2mat.convert(model), rows.astype(np.float32))
        assert report.passed, report.summary()


def test_linear_trees():
    model = lgb.LGBMRegressor(linear_tree=True, **SMALL).fit(XD, YD)
    ens = tree2mat.load(model)
    assert all(t.is_linear for t in ens.trees[1:])
    check(model)


@pytest.mark.filterwarnings("ignore:The argument 'eval_set' is deprecated")
def test_early_stopping_predicts_with_best_iteration():
    model = lgb.LGBMClassifier(n_estimators=200, learning_rate=0.3, **{k: v for k, v in SMALL.items() if k != "n_estimators"})
    model.fit(XB[:400], YB[:400], eval_set=[(XB[400:], YB[400:])], callbacks=[lgb.early_stopping(3, verbose=False)])
    assert 0 < model.best_iteration_ < 200
    assert tree2mat.load(model).n_trees == model.best_iteration_
    check(model)


def test_native_text_converts_without_lightgbm(tmp_path, monkeypatch):
    model = fit("multiclass", boosting_type="rf", bagging_freq=1, bagging_fraction=0.6)
    path = tmp_path / "model.txt"
    model.booster_.save_model(path)
    X, _ = synthesize(tree2mat.load(model), 300, dtype=np.dtype(np.float64))
    # LightGBM's raw score of a random forest is the sum before averaging over the iterations.
    expected = model.booster_.predict(X, raw_score=True) / model.booster_.current_iteration()
    with monkeypatch.context() as m:
        m.setitem(sys.modules, "lightgbm", None)  # import lightgbm now fails
        with pytest.raises(ImportError):
            import lightgbm  # noqa: F401
        ens = tree2mat.load(path)
        onx = tree2mat.convert(path, raw=True, dtype="float64")
    assert np.array_equal(evaluate.margin(ens, X), expected)
    # With lightgbm back, verify compares with LightGBM's own Booster loaded from the file.
    report = tree2mat.verify(path, onx, X, atol=0, rtol=0)
    assert report.passed and not report.notes, report.summary()


def test_pickled_wrapper_through_the_cli(tmp_path, capsys):
    model = fit("binary", linear_tree=True)
    path = tmp_path / "model.joblib"
    joblib.dump(model, path)
    out = tmp_path / "model.onnx"
    assert main(["convert", str(path), "-o", str(out)]) == 0
    assert main(["verify", str(path), str(out)]) == 0
    assert "PASS" in capsys.readouterr().out


def _text(**kw) -> str:
    return fit("binary", **kw).booster_.model_to_string()


def _unsized(edit):
    """``edit`` on the text without tree_sizes: edits that change a tree's length would
    otherwise be refused for the sizes first (LightGBM finds the trees by them)."""
    return lambda s: edit(re.sub(r"(?m)^tree_sizes=.*\n", "", s))


@pytest.mark.parametrize(
    "edit,error,needle",
    [
        (lambda s: s[: len(s) // 2], ModelFileError, "truncated"),
        (lambda s: "garbage\n" + s, ModelFileError, "not a LightGBM model text"),
        (_unsized(lambda s: s.replace("split_feature=", "split_featur=", 1)), ModelFileError, "need split_feature"),
        (lambda s: s.replace("num_leaves=15", "num_leaves=16", 1), ModelFileError, "values, expected"),
        (_unsized(lambda s: s.replace("decision_type=", "decision_type=12 ", 1)), ModelFileError, "decision_type"),
        (lambda s: s.replace("left_child=", "left_child=99 ", 1).replace("left_child=99 1", "left_child=99", 1), ModelFileError, ""),
        (lambda s: s.replace("threshold=", "threshold=nan ", 1).replace("threshold=nan 1", "threshold=nan", 1), Exception, ""),
        (lambda s: s.replace("objective=binary", "objective=custom", 1), UnsupportedModelError, "'custom' is not supported"),
        (lambda s: s.replace("objective=binary sigmoid:1", "objective=binary sigmoid:2", 1), UnsupportedModelError, "sigmoid"),
        # Python's float() and int() accept these, LightGBM reads them differently: refused.
        (_unsized(lambda s: re.sub(r"^threshold=\S+", "threshold=1_000", s, count=1, flags=re.M)), ModelFileError, "is not a number"),
        (lambda s: re.sub(r"^split_feature=\S+", "split_feature=\u0661", s, count=1, flags=re.M), ModelFileError, "is not a number"),
        (lambda s: re.sub(r"tree_sizes=(\d+)", lambda m: f"tree_sizes={int(m.group(1)) + 1}", s, count=1), ModelFileError, "tree_sizes"),
        (lambda s: s.replace("feature_names=", "feature_names=extra ", 1), ModelFileError, "feature_names"),
        (lambda s: s.replace("max_feature_idx=29", "max_feature_idx=x", 1), ModelFileError, "max_feature_idx"),
    ],
)
@pytest.mark.slow
def test_malformed_text_names_the_field(tmp_path, edit, error, needle):
    path = tmp_path / "bad.txt"
    path.write_text(edit(_text()))
    with pytest.raises(error) as info:
        tree2mat.load(path)
    assert needle in str(info.value)
    assert isinstance(info.value, (ModelFileError, UnsupportedModelError, InvalidTreeError))
    assert main(["convert", str(path), "-o", str(tmp_path / "bad.onnx")]) == 2
    assert not (tmp_path / "bad.onnx").exists()


def test_refusals():
    with pytest.raises(UnsupportedModelError, match="reg_sqrt"):
        tree2mat.load(fit("regression", reg_sqrt=True))

    def objective(y, p):
        return p - y, np.ones_like(p)

    with pytest.raises(UnsupportedModelError, match="custom objective"):
        tree2mat.load(lgb.LGBMRegressor(objective=objective, **SMALL).fit(XD, YD))


@pytest.mark.parametrize("objective", ["binary", "multiclass", "regression"])
def test_booster_objects(objective):
    X, y = {"binary": (XB, YB), "multiclass": (XI, YI), "regression": (XD, YD)}[objective]
    params = dict(objective=objective, num_leaves=15, min_data_in_leaf=5, verbose=-1, seed=0)
    if objective == "multiclass":
        params["num_class"] = 3
    booster = lgb.train(params, lgb.Dataset(X, y), num_boost_round=10)
    check(booster)


@pytest.mark.parametrize("objective", ["multiclass", "multiclassova"])
def test_linear_trees_with_several_classes(objective):
    check(lgb.LGBMClassifier(objective=objective, linear_tree=True, **SMALL).fit(XI, YI))


def test_linear_model_without_linear_terms():
    """LightGBM fits no linear terms in the first tree: a one-tree linear model has none at all,
    and its leaves output their constants."""
    model = lgb.LGBMRegressor(linear_tree=True, **{**SMALL, "n_estimators": 1}).fit(XD, YD)
    check(model)


def test_sigmoid_plateau_ties_break_like_lightgbm(tmp_path):
    """One-vs-all probabilities are exactly 1 for margins above ~36.7: with margins [40, 50, 0]
    LightGBM's argmax picks class 0, not the larger margin's class 1."""
    model = lgb.LGBMClassifier(objective="multiclassova", **{**SMALL, "n_estimators": 1}).fit(XI, YI)
    text = re.sub(r"^tree_sizes=.*\n", "", model.booster_.model_to_string(), flags=re.M)
    values = iter(["40", "50", "0"])
    text = re.sub(r"^leaf_value=(.*)$", lambda m: "leaf_value=" + " ".join([next(values)] * len(m.group(1).split())), text, flags=re.M)
    path = tmp_path / "ova.txt"
    path.write_text(text)
    assert np.array_equal(lgb.Booster(model_file=path).predict(XI[:1]), [[1.0, 1.0, 0.5]])
    report = tree2mat.verify(path, tree2mat.convert(path))
    assert report.passed and not report.notes, report.summary()
    assert tree2mat.verify(path, tree2mat.convert(path, form="bitvector")).passed


@pytest.mark.parametrize("cls,objective", [(lgb.LGBMClassifier, "cross_entropy"), (lgb.LGBMRegressor, "binary")])
def test_wrapper_decides_the_outputs(cls, objective):
    model = cls(objective=objective, **SMALL).fit(XB, YB)
    assert tree2mat.load(model).task.value == ("classification" if cls is lgb.LGBMClassifier else "regression")
    check(model)


def test_integral_float_labels_are_integers():
    model = lgb.LGBMClassifier(**SMALL).fit(XI, YI.astype(float))
    assert tree2mat.load(model).classes[0].dtype == np.int64
    check(model)

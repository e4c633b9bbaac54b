"""Label rows at a tie: where the library's scores of two classes lie within the rounding of
the sums, the float32 graph may pick the other class. verify counts such rows apart (passed,
reported with their rows), fails them with ``strict``, and still fails every other mismatch.
Each model is trained here, on data that makes such ties (found by searching seeds; the rows
are checked against the library's own predict and scores, not taken on trust)."""

from __future__ import annotations

import copy
import json
import re

import joblib
import numpy as np
import pytest
from sklearn.datasets import load_wine
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier

import tree2mat
from tree2mat.cli import main
from tree2mat.verify import synthesize, tie_gaps

from conftest import ROOT, run_onnx


def _random_forest():
    """RandomForestClassifier(20) on integer features of random classes (impure leaves of
    small fractions, whose float64 sums break real ties)."""
    rng = np.random.default_rng(2)
    X, y = rng.integers(0, 4, (300, 4)), rng.integers(0, 3, 300)
    model = RandomForestClassifier(20, random_state=2).fit(X, y)
    return model, lambda X: model.predict_proba(X)


def _multi_output_forest():
    rng = np.random.default_rng(0)
    X, y = rng.integers(0, 4, (300, 4)), rng.integers(0, 3, 300)
    Y = np.stack([y, rng.integers(0, 3, 300)], axis=1)
    model = RandomForestClassifier(10, random_state=0).fit(X, Y)
    return model, lambda X: np.concatenate(model.predict_proba(X), axis=1)


def _gradient_boosting():
    X, y = load_wine(return_X_y=True)
    model = GradientBoostingClassifier(init="zero", max_depth=10, n_estimators=30, random_state=0).fit(X.astype(int), y)
    return model, lambda X: model.decision_function(X)


def _lightgbm_booster():
    """A multiclass booster of 6 rows: its classes' scores tie on most inputs."""
    lgb = pytest.importorskip("lightgbm")
    rng = np.random.default_rng(2)
    X, y = rng.integers(0, 3, (6, 3)).astype(float), np.array([0, 1, 2, 0, 1, 2])
    params = {"objective": "multiclass", "num_class": 3, "min_data_in_leaf": 1, "min_data_in_bin": 1, "verbose": -1,
              "min_sum_hessian_in_leaf": 0}
    model = lgb.train(params, lgb.Dataset(X, y), 10)
    return model, lambda X: model.predict(X, raw_score=True)


MODELS = {"random_forest": _random_forest, "multi_output_forest": _multi_output_forest,
          "gradient_boosting": _gradient_boosting, "lightgbm": _lightgbm_booster}


def _predict(model, X):
    """The library's labels: LightGBM's booster gives probabilities, its label their argmax."""
    out = model.predict(X)
    return out.argmax(axis=1) if out.ndim == 2 and not hasattr(model, "classes_") else out


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_ties_pass_reported_with_their_rows_and_fail_strict(kind):
    model, scores = MODELS[kind]()
    onx = tree2mat.convert(model)
    report = tree2mat.verify(model, onx, max_report=100_000)
    assert report.passed, report.summary()
    labels = [o for o in report.outputs if o.name == "label"]
    assert all(o.mismatches == 0 for o in report.outputs), report.summary()
    assert all(o.ties > 0 and [t.row for t in o.first_ties] == o.tie_rows for o in labels), report.summary()
    assert 0 < report.tie_bound < 1e-6
    for o in labels:
        rows = np.asarray([t.input for t in o.first_ties])
        expected = np.asarray([t.expected for t in o.first_ties]).reshape(len(rows), -1)
        got = np.asarray([t.got for t in o.first_ties]).reshape(len(rows), -1)
        # the library's own labels and the graph's, each different, at the scores' tie
        assert np.array_equal(_predict(model, rows).reshape(len(rows), -1), expected)
        assert np.array_equal(run_onnx(onx, rows.astype(np.float32))["label"].reshape(len(rows), -1), got)
        assert (expected != got).any(axis=1).all()
        # the library's own scores of the two labels: within the bound, as far apart as reported
        s, start, worst = scores(rows), 0, np.zeros(len(rows))
        for j, classes in enumerate(tree2mat.load(model).classes):
            cols = s[:, start:start + len(classes)]
            start += len(classes)
            at = np.arange(len(rows))
            gap = np.abs(cols[at, np.searchsorted(classes, expected[:, j])] - cols[at, np.searchsorted(classes, got[:, j])])
            worst = np.maximum(worst, gap)
        assert (worst <= report.tie_bound).all()
        assert np.array_equal(worst, [t.gap for t in o.first_ties])
    assert "--dtype float64" in report.summary() and "ties:" in report.summary()
    strict = tree2mat.verify(model, onx, strict=True)
    assert not strict.passed and strict.ties == report.ties and strict.summary().endswith("FAIL")
    exact = tree2mat.verify(model, tree2mat.convert(model, dtype="float64"))
    assert exact.passed and exact.ties == 0, exact.summary()


def test_a_label_that_differs_away_from_a_tie_still_fails():
    model, scores = _random_forest()
    changed = copy.deepcopy(model)
    tree = changed.estimators_[0].tree_
    for leaf in np.flatnonzero(tree.children_left == -1)[:3]:  # their class fractions moved to other classes
        tree.value[leaf] = np.roll(tree.value[leaf], 1, axis=-1)
    report = tree2mat.verify(model, tree2mat.convert(changed), max_report=100_000)
    label = next(o for o in report.outputs if o.name == "label")
    assert not report.passed and not label.passed and label.mismatches > 0, report.summary()
    rows = np.asarray([m.input for m in label.first_mismatches])
    got = run_onnx(tree2mat.convert(changed), rows.astype(np.float32))["label"]
    expected = model.predict(rows)
    assert np.array_equal(np.asarray([m.expected for m in label.first_mismatches]), expected) and (got != expected).all()
    s = scores(rows)
    gap = np.abs(s[np.arange(len(rows)), expected] - s[np.arange(len(rows)), got])
    assert (gap > report.tie_bound).all()  # none of them at a tie: each a mismatch


def test_command_line_reports_ties_and_strict_fails_them(tmp_path, capsys):
    model, _ = _random_forest()
    joblib.dump(model, tmp_path / "m.joblib")
    assert main(["convert", str(tmp_path / "m.joblib"), "-o", str(tmp_path / "m.onnx")]) == 0
    capsys.readouterr()
    args = ["verify", str(tmp_path / "m.joblib"), str(tmp_path / "m.onnx")]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "(tie, library scores" in text and "ties at rows" in text and "--strict fails them" in text and "--dtype float64" in text, text
    assert main([*args, "--json", "-"]) == 0
    doc = json.loads(capsys.readouterr().out)  # the JSON alone on stdout
    label = next(o for o in doc["outputs"] if o["name"] == "label")
    assert doc["passed"] and not doc["strict"] and label["mismatches"] == 0 and label["ties"] == len(label["tie_rows"]) > len(label["first_ties"]) == 5
    section = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8").split("### The JSON report")[1].split("\n## ")[0]
    documented = set(re.findall(r"`([a-z_]+)`(?=[:,;.]| \(| per)", section))
    assert {"strict", "tie_bound", "ties", "tie_rows", "first_ties", "gap"} <= documented
    assert set(doc) | set(label) | set(label["first_ties"][0]) <= documented
    tie = label["first_ties"][0]
    assert model.predict([tie["input"]])[0] == tie["expected"] != tie["got"] and tie["gap"] <= doc["tie_bound"]
    assert main([*args, "--strict", "--json", "-"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert not doc["passed"] and doc["strict"]
    assert main([*args, "--strict"]) == 1
    assert capsys.readouterr().out.rstrip().endswith("FAIL")


def test_a_binary_cutoff_is_a_tie_only_within_the_bound_of_the_margin():
    """A binary model decides m > cutoff: a flipped label is a tie where the library's own
    margin lies within the bound of the cutoff, and nowhere else."""
    rng = np.random.default_rng(0)
    X, y = rng.integers(0, 4, (300, 4)).astype(float), rng.integers(0, 2, 300)
    model = GradientBoostingClassifier(init="zero", max_depth=10, n_estimators=20, random_state=0).fit(X, y)
    ens = tree2mat.load(model)
    rows, _ = synthesize(ens, 200)
    with np.errstate(over="ignore", invalid="ignore"):  # (scikit-learn's finiteness check sums +-max float32 rows)
        margin, labels = model.decision_function(rows), model.predict(rows)
    flipped = model.classes_[1 - np.searchsorted(model.classes_, labels)]
    bound = float(np.median(np.abs(margin)))
    gaps = tie_gaps(ens, margin[:, None], labels, flipped, bound)
    near = np.abs(margin) <= bound
    assert near.any() and (~near).any()
    assert np.array_equal(gaps[near], np.abs(margin[near])) and np.isnan(gaps[~near]).all()
    assert np.isnan(tie_gaps(ens, margin[:, None], labels, labels[:, None] * 0 + 7, np.inf)).all()  # no class of the model

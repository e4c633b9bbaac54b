"""What verify checks the graph's routing with: the library's own leaf of every tree
(XGBoost's and LightGBM's ``pred_leaf``, scikit-learn's ``apply``) mapped to the IR's leaves,
else tree2mat's reference evaluator (itself tested against the libraries in tests/frontends);
and the synthesized threshold rows, each value once per node."""

from __future__ import annotations

import dataclasses

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest
import xgboost as xgb
from sklearn.datasets import load_diabetes, load_iris
from sklearn.ensemble import (
    ExtraTreesRegressor,
    GradientBoostingClassifier,
    HistGradientBoostingClassifier,
    IsolationForest,
    RandomForestClassifier,
)
from sklearn.tree import DecisionTreeRegressor

import tree2mat
from tree2mat import frontends
from tree2mat.contract import leaf_ids_of
from tree2mat.ir import evaluate
from tree2mat.ir.io import dumps
from tree2mat.verify import CROSS_CHECK_ROWS, load_subject, synthesize
from tree2mat.verify.subject import EVALUATOR

XI, YI = load_iris(return_X_y=True)
XD, YD = load_diabetes(return_X_y=True)


def _models(tmp_path):
    """(model or file, whose leaves verify should take) for each kind of library leaves."""
    booster = xgb.train({"objective": "multi:softprob", "num_class": 3, "max_depth": 3, "num_parallel_tree": 2},
                        xgb.DMatrix(XI, YI), num_boost_round=4)
    booster.save_model(tmp_path / "xgb.json")
    lgb.train({"objective": "multiclass", "num_class": 3, "num_leaves": 7, "verbose": -1, "min_data_in_leaf": 5},
              lgb.Dataset(XI, YI), num_boost_round=4).save_model(tmp_path / "lgb.txt")
    return [
        (RandomForestClassifier(n_estimators=4, max_depth=4, random_state=0).fit(XI, YI), "scikit-learn"),
        (GradientBoostingClassifier(n_estimators=3, max_depth=2, random_state=0).fit(XI, YI), "scikit-learn"),
        (DecisionTreeRegressor(max_depth=5, random_state=0).fit(XD, YD), "scikit-learn"),
        (ExtraTreesRegressor(n_estimators=3, max_depth=4, random_state=0).fit(XD, YD), "scikit-learn"),
        (xgb.XGBRegressor(n_estimators=5, max_depth=3, missing=0.0).fit(XD, YD), "XGBoost"),
        # (fitted on a DataFrame: its booster asks the rows for the frame's feature names)
        (xgb.XGBRegressor(n_estimators=3, max_depth=3).fit(pd.DataFrame(XD, columns=[f"f{j}" for j in range(XD.shape[1])]), YD), "XGBoost"),
        (tmp_path / "xgb.json", "XGBoost"),
        (lgb.LGBMRegressor(n_estimators=5, num_leaves=7, verbose=-1).fit(XD, YD), "LightGBM"),
        (tmp_path / "lgb.txt", "LightGBM"),
        (HistGradientBoostingClassifier(max_iter=3).fit(XI, YI), EVALUATOR),  # no apply
        (IsolationForest(n_estimators=3, max_features=0.5, random_state=0).fit(XD), EVALUATOR),
    ]


def test_library_leaves_are_the_reference_evaluators(tmp_path):
    """The library's leaf numbers mapped to the IR's give, row for row, the leaves the reference
    evaluator walks to, on the synthesized rows (thresholds, NaN, extremes)."""
    for model, whose in _models(tmp_path):
        subject = load_subject(model)
        X, _ = synthesize(subject.ens, rows=300)
        leaves, got_whose, why_not = subject.leaves(X)
        assert got_whose == whose and why_not is None, model
        np.testing.assert_array_equal(leaves, evaluate.apply(subject.ens, X), err_msg=str(model))


def test_no_library_and_named_categories_take_the_evaluator(tmp_path):
    model = RandomForestClassifier(n_estimators=2, random_state=0).fit(XI, YI)
    (tmp_path / "ir.json").write_text(dumps(tree2mat.load(model)))
    subject = load_subject(tmp_path / "ir.json")
    assert subject.leaves(XI.astype(np.float32))[1:] == (EVALUATOR, None)
    # (rows with the names of their categories: the library reads a frame, its leaves are not asked)
    assert load_subject(model).leaves(XI.astype(np.float32), {0: np.asarray(["a"] * len(XI))})[1:] == (EVALUATOR, None)


def _failing(exc: Exception):
    def leaves(m, X, ens):
        raise exc
    return leaves


@pytest.mark.parametrize("broken, why", [
    (lambda real: lambda m, X, ens: real(m, X, ens) + 1000, "XGBoost numbered a leaf that the model's trees as tree2mat read them do not have"),
    (lambda real: lambda m, X, ens: real(m, X, ens)[:, :1], "XGBoost gave leaves of shape [442, 1] for 442 rows of 3 trees"),
    (lambda real: _failing(AttributeError("no _get_iteration_range")), "asking XGBoost for them failed (AttributeError: no _get_iteration_range)"),
])
def test_library_leaves_that_cannot_be_used_take_the_evaluator_and_say_so(monkeypatch, broken, why):
    """Library leaves that do not fit the IR (a frontend's numbering broken) or cannot be had (a
    library version without the call): the reference evaluator's leaves instead, never a wrong
    mapping, and verify's report says why, once."""
    model = xgb.XGBRegressor(n_estimators=3, max_depth=2).fit(XD, YD)
    spec = frontends.FRONTENDS["xgboost"]
    monkeypatch.setitem(frontends.FRONTENDS, "xgboost", dataclasses.replace(spec, reference_leaves=broken(spec.reference_leaves)))
    subject = load_subject(model)
    leaves, whose, why_not = subject.leaves(XD.astype(np.float32))
    assert (whose, why_not) == (EVALUATOR, why)
    np.testing.assert_array_equal(leaves, evaluate.apply(subject.ens, XD.astype(np.float32)))
    report = tree2mat.verify(model, tree2mat.convert(model), XD)
    assert report.passed and [n for n in report.notes if "routing checked against" in n] == [
        f"routing checked against tree2mat's reference evaluator, not the library's own leaves: {why} (please report it)"
    ]


def test_verify_checks_routing_against_the_library(monkeypatch):
    """verify's routing is the library's: with the reference evaluator made wrong (every leaf
    one off), the report still passes on the library's leaves and says that the two disagree on
    the rows it cross-checked, spread over the first chunk (threshold and NaN rows among them)."""
    model = lgb.LGBMClassifier(n_estimators=5, num_leaves=7, verbose=-1).fit(XI, YI)
    onx = tree2mat.convert(model)
    assert tree2mat.verify(model, onx, rows=100).notes == []
    real = evaluate.apply
    monkeypatch.setattr(evaluate, "apply", lambda ens, X: real(ens, X) + 1)
    report = tree2mat.verify(model, onx, rows=100)
    assert report.passed and next(o for o in report.outputs if o.name == "routing").mismatches == 0
    note = next(n for n in report.notes if n.startswith("tree2mat's reference evaluator and LightGBM put "))
    assert f"put {CROSS_CHECK_ROWS} of {CROSS_CHECK_ROWS} rows spread over the first {report.rows} in different leaves" in note


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_threshold_rows_hold_each_value_once_per_node(dtype):
    """A node's threshold rows differ in its feature's cell only; the five float32 neighbours of
    a threshold are three numbers, each now once (the coverage itself: test_verify.py)."""
    ens = tree2mat.load(lgb.LGBMRegressor(n_estimators=3, num_leaves=15, verbose=-1).fit(XD, YD))
    X, kinds = synthesize(ens, rows=0, dtype=np.dtype(dtype))
    rows = X[kinds["random"]:kinds["random"] + kinds["threshold"]]
    assert np.unique(rows.view(np.uint8).reshape(rows.shape[0], -1), axis=0).shape[0] == rows.shape[0]
    per_node = 3 + 1 + (3 if dtype == np.float64 else 0)  # (float32 neighbours, NaN, float64 neighbours)
    assert rows.shape[0] <= per_node * sum(t.n_internal for t in ens.trees)


def test_the_graphs_leaf_ids_read_as_a_loop_reads_them():
    """:func:`leaf_ids_of` (the exit index of a traverse / hierarchical / oblivious graph, row r
    for tree order[r], to leaf ids) against a plain loop: slots of their own per tree or one row
    broadcast to all (the dense forms'), positions out of range (a broken graph) as -1, the
    slots untouched."""
    rng = np.random.default_rng(2)

    def loop(index, order, slots):
        out = np.empty(index.shape, slots.dtype)
        for r in range(slots.shape[0]):
            for n in range(index.shape[1]):
                k = index[r, n]
                out[order[r], n] = slots[r, k] if 0 <= k < slots.shape[1] else -1
        return out

    for T, S, N in [(1, 1, 5), (3, 4, 0), (70, 7, 9), (130, 64, 20)]:
        for shared in (False, True):
            slots = np.broadcast_to(rng.integers(-1, 50, size=(1, S)), (T, S)) if shared else rng.integers(-1, 50, size=(T, S))
            before, order = slots.copy(), rng.permutation(T)
            for lo, hi in [(0, S), (-3, S + 3)]:
                index = rng.integers(lo, hi, size=(T, N)).astype(np.int32)
                np.testing.assert_array_equal(leaf_ids_of(index, order, slots), loop(index, order, slots))
                np.testing.assert_array_equal(slots, before)

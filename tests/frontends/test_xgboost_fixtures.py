"""Committed XGBoost 3 model files (fixtures/, written by fixtures/make_xgboost_fixtures.py with
XGBoost itself: UBJSON with categorical splits, JSON DART) against the outputs XGBoost gave for
them, with xgboost not importable."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import tree2mat
from tree2mat.ir import evaluate

from conftest import ROOT, assert_matches, assert_standard_graph, run_onnx

FIXTURES = ROOT / "fixtures"
NAMES = ["xgboost_binary_categorical.ubj", "xgboost_multiclass_dart.json"]


@pytest.fixture(autouse=True)
def no_xgboost(monkeypatch):
    monkeypatch.setitem(sys.modules, "xgboost", None)  # import xgboost fails in these tests


@pytest.mark.parametrize("name", NAMES)
def test_fixture_matches_xgboost(name):
    path = FIXTURES / name
    expected = np.load(path.with_suffix(".npz"))
    X = expected["X"]
    ens = tree2mat.load(path)
    assert np.array_equal(evaluate.source_leaf_ids(ens, X), expected["pred_leaf"])
    margin = expected["margin"].reshape(X.shape[0], -1)
    got = run_onnx(tree2mat.convert(path, raw=True), X)["variable"]
    if "dart" in name:  # DART's weighted sum may differ in the last float32 bits
        np.testing.assert_allclose(got, margin, rtol=1e-6, atol=1e-6)
    else:
        assert np.array_equal(got, margin)
    onx = tree2mat.convert(path)
    assert_standard_graph(onx)
    pred = expected["predict"]
    probs = pred if pred.ndim == 2 else np.stack([1 - pred, pred], axis=1)
    labels = np.argmax(probs, axis=1) if pred.ndim == 2 else (pred > 0.5).astype(np.int64)
    assert_matches(run_onnx(onx, X), {"label": labels, "probabilities": probs}, X, ens)

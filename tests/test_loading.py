"""Model files: joblib and pickle (trusted only), skops (safe load, trusted-type list)."""

from __future__ import annotations

import operator
import pickle

import joblib
import numpy as np
import pytest
from sklearn.datasets import load_wine
from sklearn.ensemble import HistGradientBoostingClassifier, IsolationForest, RandomForestClassifier
from sklearn.preprocessing import FunctionTransformer

import tree2mat
from tree2mat.errors import ModelFileError, UnsupportedModelError
from tree2mat.ir import predict

X, Y = load_wine(return_X_y=True)
MODELS = {
    "rf": lambda: RandomForestClassifier(n_estimators=3, random_state=0).fit(X, Y),
    "hgb_cat": lambda: HistGradientBoostingClassifier(max_iter=5, categorical_features=[12]).fit(
        np.c_[X[:, :12], np.digitize(X[:, 12], [500, 800, 1100])], Y
    ),
    "iforest": lambda: IsolationForest(n_estimators=3, random_state=0).fit(X),
}


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("fmt", ["joblib", "pkl", "skops"])
def test_formats_load_the_same_model(tmp_path, name, fmt):
    model = MODELS[name]()
    path = tmp_path / f"m.{fmt}"
    if fmt == "joblib":
        joblib.dump(model, path)
    elif fmt == "pkl":
        path.write_bytes(pickle.dumps(model))
    else:
        sio = pytest.importorskip("skops.io")
        sio.dump(model, path)
    from_file, from_object = tree2mat.load(path), tree2mat.load(model)
    out_a, out_b = predict(from_file, X), predict(from_object, X)
    for key in out_b:
        np.testing.assert_array_equal(out_a[key], out_b[key])
    assert tree2mat.verify(path, tree2mat.convert(path), rows=50).passed


def test_skops_with_untrusted_types_is_refused(tmp_path):
    sio = pytest.importorskip("skops.io")
    path = tmp_path / "evil.skops"
    sio.dump(FunctionTransformer(func=operator.add), path)  # a callable from outside sklearn/numpy
    with pytest.raises(UnsupportedModelError, match="does not trust: _operator.add"):
        tree2mat.load(path)


def test_pickle_of_a_missing_module_names_it(tmp_path):
    # A pickle that refers to a module that is not installed (e.g. xgboost on a bare machine).
    path = tmp_path / "m.pkl"
    path.write_bytes(b"\x80\x04\x95\x1d\x00\x00\x00\x00\x00\x00\x00\x8c\x0enot_a_module_x\x94\x8c\x03Cls\x94\x93\x94.")
    with pytest.raises(ModelFileError, match="needs the module 'not_a_module_x'"):
        tree2mat.load(path)

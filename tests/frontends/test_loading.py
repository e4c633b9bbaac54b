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

from conftest import ROOT

X, Y = load_wine(return_X_y=True)
MODELS = {
    "rf": lambda: RandomForestClassifier(n_estimators=3, random_state=0).fit(X, Y),
    "hgb_cat": lambda: HistGradientBoostingClassifier(max_iter=5, categorical_features=[12]).fit(
        np.c_[X[:, :12], np.digitize(X[:, 12], [500, 800, 1100])], Y
    ),
    "iforest": lambda: IsolationForest(n_estimators=3, random_state=0).fit(X),
}


@pytest.mark.slow
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
    with pytest.raises(UnsupportedModelError, match="holds what tree2mat does not read: _operator.add"):
        tree2mat.load(path)


def test_pickle_of_a_missing_module_names_it(tmp_path):
    # A pickle that refers to a module that is not installed (e.g. xgboost on a bare machine).
    path = tmp_path / "m.pkl"
    path.write_bytes(b"\x80\x04\x95\x1d\x00\x00\x00\x00\x00\x00\x00\x8c\x0enot_a_module_x\x94\x8c\x03Cls\x94\x93\x94.")
    with pytest.raises(ModelFileError, match="needs the module 'not_a_module_x'"):
        tree2mat.load(path)


# ------------------------------------------------------------------------------------ safe mode


class _Marker:
    """A pickle that, loaded, writes a file: what any pickle may do."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def _evil_pickle(tmp_path, suffix=".pkl"):
    marker = tmp_path / "pwned"
    path = tmp_path / f"evil{suffix}"
    path.write_bytes(pickle.dumps(_Marker(marker)))
    return path, marker


def test_loading_a_pickle_runs_its_code_so_safe_mode_refuses_it_unread(tmp_path, monkeypatch):
    from tree2mat.cli import main

    path, marker = _evil_pickle(tmp_path)
    with pytest.raises(UnsupportedModelError):
        tree2mat.load(path)  # not a model; but the pickle's code ran
    assert marker.exists()
    marker.unlink()
    for suffix in (".pkl", ".joblib", ".pickle", ".PKL"):
        path, marker = _evil_pickle(tmp_path, suffix)
        with tree2mat.safe_loading(), pytest.raises(ModelFileError, match="safe mode refuses pickle files"):
            tree2mat.load(path)
        out = tmp_path / "out.onnx"
        assert main(["convert", str(path), "-o", str(out), "--safe"]) == 2
        assert main(["--safe", "verify", str(path), str(out)]) == 2
        monkeypatch.setenv("TREE2MAT_SAFE", "1")
        assert main(["inspect", str(path)]) == 2
        with pytest.raises(ModelFileError, match="safe mode"):
            tree2mat.convert(path)
        with tree2mat.safe_loading(False):  # the block's setting wins over the environment
            with pytest.raises(UnsupportedModelError):
                tree2mat.load(path)
        assert marker.exists()
        marker.unlink()
        monkeypatch.delenv("TREE2MAT_SAFE")
        assert not out.exists()


def test_safe_mode_environment_value_must_be_a_switch(tmp_path, monkeypatch, capsys):
    from tree2mat.cli import main

    model = tmp_path / "m.joblib"
    joblib.dump(MODELS["rf"](), model)
    monkeypatch.setenv("TREE2MAT_SAFE", "maybe")
    assert main(["convert", str(model), "-o", str(tmp_path / "m.onnx")]) == 2
    err = capsys.readouterr().err
    assert "TREE2MAT_SAFE='maybe'" in err and err.count("\n") == 1
    monkeypatch.setenv("TREE2MAT_SAFE", "0")
    assert main(["convert", str(model), "-o", str(tmp_path / "m.onnx")]) == 0


def test_safe_mode_reads_the_formats_that_cannot_run_code(tmp_path):
    """.skops, XGBoost .json/.ubj and LightGBM .txt convert and verify against the library in
    safe mode (verify loads native files with the library's own reader, never a pickle)."""
    from tree2mat.cli import main

    sio = pytest.importorskip("skops.io")
    xgb = pytest.importorskip("xgboost")
    lgb = pytest.importorskip("lightgbm")
    files = []
    sio.dump(MODELS["hgb_cat"](), tmp_path / "m.skops")
    files.append(tmp_path / "m.skops")
    booster = xgb.XGBClassifier(n_estimators=5, max_depth=3).fit(X, Y)
    for suffix in (".json", ".ubj"):
        booster.save_model(tmp_path / f"x{suffix}")
        files.append(tmp_path / f"x{suffix}")
    lgb.LGBMClassifier(n_estimators=5, num_leaves=7, verbose=-1).fit(X, Y).booster_.save_model(tmp_path / "l.txt")
    files.append(tmp_path / "l.txt")
    from tree2mat.ir.io import dumps

    (tmp_path / "ir.json").write_text(dumps(tree2mat.load(MODELS["rf"]())))
    files.append(tmp_path / "ir.json")
    for path in files:
        out = tmp_path / f"{path.stem}{path.suffix[1:]}.onnx"
        assert main(["--safe", "convert", str(path), "-o", str(out)]) == 0, path
        assert main(["verify", str(path), str(out), "--rows", "50", "--safe"]) == 0, path


FIXTURES = ROOT / "fixtures"


@pytest.mark.parametrize(
    ("fixture", "name"),
    [
        ("lightgbm_binary_categorical_zero_as_missing.txt", "model.model"),  # LightGBM text as *.model, common in the wild
        ("xgboost_binary_categorical.ubj", "model.bin"),
        ("xgboost_multiclass_dart.json", "model"),
    ],
)
def test_native_files_are_read_by_their_contents_under_any_name(tmp_path, fixture, name):
    """The committed files the libraries wrote (fixtures/make_*_fixtures.py), renamed: converted by what
    their bytes are, and verified against the library itself (LightGBM; XGBoost guesses the
    format by the name, and reads these two)."""
    import shutil

    path = tmp_path / name
    shutil.copyfile(FIXTURES / fixture, path)
    onx = tree2mat.convert(path)
    report = tree2mat.verify(path, onx, rows=200)
    assert report.passed, report.summary()
    assert not [n for n in report.notes if "no original library model" in n], report.notes


def test_other_names_are_refused_by_their_contents(tmp_path):
    """A pickle under another name is still a pickle (safe mode refuses it unread); XGBoost's
    legacy binary (a real one, written by XGBoost 0.90: fixtures/corpus, SOURCES.md) is refused
    by name with the way out, under its own name and another; anything else names the formats
    tree2mat reads."""
    model = RandomForestClassifier(n_estimators=3, random_state=0).fit(*load_wine(return_X_y=True))
    joblib.dump(model, tmp_path / "forest.model")
    assert tree2mat.load(tmp_path / "forest.model").n_trees == 3
    with tree2mat.safe_loading(), pytest.raises(ModelFileError, match="safe mode refuses pickle files"):
        tree2mat.load(tmp_path / "forest.model")
    legacy = ROOT / "fixtures" / "corpus" / "xgboost-0.90.reg.bin"
    (tmp_path / "old.model").write_bytes(legacy.read_bytes())
    for path in (legacy, tmp_path / "old.model"):
        with pytest.raises(UnsupportedModelError, match=r"XGBoost's legacy binary model format .* save_model\('model.json'\)"):
            tree2mat.load(path)
    (tmp_path / "notes.model").write_text("hello\n")
    with pytest.raises(ModelFileError, match=r"unknown model file type '.model', and its contents are none"):
        tree2mat.load(tmp_path / "notes.model")

"""Every optional library tree2mat imports, missing: the command fails in one line (exit 2, no
traceback) naming the library and the extra that installs it, worded as the docs' install
command (``pip install 'tree2mat[EXTRA]'``). A missing module is a None entry in sys.modules
(what the import system reads as "not installed"); a pickle naming XGBoost is loaded by a
process of its own whose import of xgboost is blocked before tree2mat starts. The PNG
(tests/e2e/test_pictures.py, test_bench.py), .cbm (tests/frontends/test_catboost.py) and
``--runtime`` (tests/runtimes/test_runtimes.py) cases are tested beside their features."""

from __future__ import annotations

import subprocess
import sys

import joblib
import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier

from tree2mat.cli import main
from tree2mat.errors import EXTRAS, MissingDependencyError, install_command, require

from conftest import ROOT, block_modules
from test_cli import one_line_error

X = np.random.default_rng(0).normal(size=(200, 4))
Y = (X[:, 0] + X[:, 1] > 0).astype(int)


def _missing(what: str, module: str, extra: str) -> str:
    return f"{what} needs {module}, which is not installed: pip install 'tree2mat[{extra}]'"


def test_require_names_the_extra_and_imports_what_is_there(monkeypatch):
    assert require("numpy", "anything") is np
    block_modules(monkeypatch, "pandas")
    with pytest.raises(MissingDependencyError) as info:
        require("pandas", "reading this")
    assert str(info.value) == _missing("reading this", "pandas", "data")
    assert install_command(EXTRAS["pyarrow"]) == "pip install 'tree2mat[data]'"


def test_a_library_that_breaks_on_import_is_not_called_missing(monkeypatch):
    """A module that is there but fails inside its own import (a broken install): the error
    says it cannot be imported, and why, not that an extra would install it."""
    import importlib

    def broken(name, *args, **kwargs):
        raise ModuleNotFoundError("No module named 'dateutil'", name="dateutil")

    monkeypatch.setattr(importlib, "import_module", broken)
    with pytest.raises(MissingDependencyError, match=r"^reading this needs pandas, which cannot be imported: No module named 'dateutil'$"):
        require("pandas", "reading this")


def _verify_passes_then_fails_without(tmp_path, capsys, monkeypatch, model, data: str, module: str, expected: str) -> None:
    """``model`` converts and verifies on ``data`` (a file in ``tmp_path``); with ``module``
    blocked the same verify is the one-line error ``expected``: the block, not the file, made it."""
    joblib.dump(model, tmp_path / "m.joblib")
    args = ["verify", str(tmp_path / "m.joblib"), str(tmp_path / "m.onnx"), "--data", str(tmp_path / data)]
    assert main(["convert", str(tmp_path / "m.joblib"), "-o", str(tmp_path / "m.onnx")]) == 0
    assert main(args) == 0
    capsys.readouterr()
    block_modules(monkeypatch, module)
    one_line_error(capsys, main(args), 2, expected)


def test_named_categories_without_pandas(tmp_path, capsys, monkeypatch):
    """The library predicts on a DataFrame of the user's category names: without pandas the
    error names the data extra (it read "the model itself rejects the data: ModuleNotFoundError")."""
    frame = pd.DataFrame({"x": X[:, 0], "city": pd.Categorical(np.where(X[:, 1] > 0, "oslo", "rome"))})
    pd.DataFrame({"x": [0.5, -1.0], "city": ["oslo", "rome"]}).to_csv(tmp_path / "rows.csv", index=False)
    _verify_passes_then_fails_without(tmp_path, capsys, monkeypatch, HistGradientBoostingClassifier(max_iter=3, random_state=0).fit(frame, Y),
                                      "rows.csv", "pandas",
                                      _missing("a model with named categories (its library reads them from a DataFrame)", "pandas", "data"))


def test_a_pipeline_fitted_on_a_dataframe_without_pandas(tmp_path, capsys, monkeypatch):
    pipeline = make_pipeline(StandardScaler(), DecisionTreeClassifier(max_depth=3, random_state=0))
    np.save(tmp_path / "rows.npy", X[:20])
    _verify_passes_then_fails_without(tmp_path, capsys, monkeypatch, pipeline.fit(pd.DataFrame(X, columns=list("abcd")), Y),
                                      "rows.npy", "pandas", _missing("a pipeline fitted on a DataFrame", "pandas", "data"))


def test_parquet_without_pyarrow(tmp_path, capsys, monkeypatch):
    pd.DataFrame(X[:20], columns=list("abcd")).to_parquet(tmp_path / "rows.parquet")
    _verify_passes_then_fails_without(tmp_path, capsys, monkeypatch, DecisionTreeClassifier(max_depth=3, random_state=0).fit(X, Y),
                                      "rows.parquet", "pyarrow", _missing(f"{tmp_path / 'rows.parquet'}: reading parquet", "pyarrow", "data"))


def test_skops_without_skops(tmp_path, capsys, monkeypatch):
    import skops.io as sio

    sio.dump(DecisionTreeClassifier(max_depth=3, random_state=0).fit(X, Y), tmp_path / "m.skops")
    assert main(["convert", str(tmp_path / "m.skops"), "-o", str(tmp_path / "m.onnx")]) == 0
    capsys.readouterr()
    block_modules(monkeypatch, "skops")
    one_line_error(capsys, main(["convert", str(tmp_path / "m.skops"), "-o", str(tmp_path / "m.onnx")]), 2,
                   _missing(f"{tmp_path / 'm.skops'}: reading .skops files", "skops", "skops"))


def test_a_pipeline_without_skl2onnx(tmp_path, capsys, monkeypatch):
    joblib.dump(make_pipeline(StandardScaler(), DecisionTreeClassifier(max_depth=3, random_state=0)).fit(X, Y), tmp_path / "p.joblib")
    block_modules(monkeypatch, "skl2onnx")
    one_line_error(capsys, main(["convert", str(tmp_path / "p.joblib"), "-o", str(tmp_path / "p.onnx")]), 2,
                   _missing("converting a scikit-learn Pipeline (through skl2onnx)", "skl2onnx", "pipelines"))
    assert not (tmp_path / "p.onnx").exists()


def test_attend_without_clarabel(tmp_path, capsys, monkeypatch):
    joblib.dump(RandomForestRegressor(n_estimators=5, max_depth=3, random_state=0).fit(X, X[:, 0]), tmp_path / "f.joblib")
    np.savez(tmp_path / "d.npz", X=X, y=X[:, 0])
    block_modules(monkeypatch, "clarabel")
    one_line_error(capsys, main(["attend", str(tmp_path / "f.joblib"), "--data", str(tmp_path / "d.npz"), "-o", str(tmp_path / "a.json")]), 2,
                   _missing("solving the L2 weights (Clarabel's QP solver)", "clarabel", "attention"))


#: A process whose import of xgboost fails as where it is not installed, then tree2mat's CLI.
WITHOUT_XGBOOST = "import sys; sys.modules['xgboost'] = None; sys.argv[0] = 'tree2mat'; from tree2mat.cli import run; run()"


def test_a_pickle_of_an_xgboost_model_without_xgboost(tmp_path):
    """The pickle names xgboost's classes; unpickling imports xgboost, which is not there: the
    error names the extra (it named the module alone)."""
    xgb = pytest.importorskip("xgboost")
    joblib.dump(xgb.XGBClassifier(n_estimators=3, max_depth=2).fit(X, Y), tmp_path / "m.joblib")
    args = ["convert", str(tmp_path / "m.joblib"), "-o", str(tmp_path / "m.onnx")]
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "TREE2MAT_SAFE": "0"}
    done = subprocess.run([sys.executable, "-c", WITHOUT_XGBOOST, *args], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2, done.stderr
    what = f"{tmp_path / 'm.joblib'}: the pickle"
    assert done.stderr == f"tree2mat: error: {_missing(what, 'xgboost', 'xgboost')}\n"
    assert not (tmp_path / "m.onnx").exists()
    # The same process without the block converts it: the block, not the file, made the error.
    ok = subprocess.run([sys.executable, "-c", WITHOUT_XGBOOST.replace("sys.modules['xgboost'] = None; ", ""), *args],
                        capture_output=True, text=True, env=env, timeout=120)
    assert ok.returncode == 0, ok.stderr

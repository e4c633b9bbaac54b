"""Pipelines fitted on a pandas DataFrame with string columns (OneHotEncoder, OrdinalEncoder on
text, numbers passed through or scaled) before a tree model: `convert` writes one input per
column, `verify --data` reads the columns by name (text as text), against the pipeline's own
predictions; on the runtimes that run string tensors, refused in one line on the others."""

from __future__ import annotations

import json

import joblib
import numpy as np
import onnx
import pandas as pd
import pytest
import skl2onnx
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestRegressor
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder, StandardScaler

import tree2mat
from tree2mat.cli import main
from tree2mat.data import ColumnRows
from tree2mat.errors import VerificationError
from tree2mat.runtimes import column_runtimes

from test_cli import one_line_error

CITIES = ["paris", "rome", "oslo", "lima"]


@pytest.fixture(autouse=True)
def skl2onnx_as_it_was():
    from tree2mat.pipelines import restored

    with restored():
        yield


def frame(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "city": rng.choice(CITIES[:3], n), "age": rng.normal(40, 10, n).round(1),
        "color": rng.choice(["red", "blue", "green"], n), "income": rng.exponential(3, n).round(2),
    })


def encoders() -> ColumnTransformer:
    return ColumnTransformer([
        ("city", OneHotEncoder(handle_unknown="ignore", sparse_output=False), ["city"]),
        ("color", OrdinalEncoder(), ["color"]),
        ("income", StandardScaler(), ["income"]),
    ], remainder="passthrough")


def classifier(df: pd.DataFrame, flip: bool = False) -> Pipeline:
    y = (df.city.eq("rome") ^ (df.age > 40) ^ df.color.eq("red") ^ flip).astype(int)
    return Pipeline([("pre", encoders()), ("m", HistGradientBoostingClassifier(max_iter=15, random_state=0))]).fit(df, y)


def regressor(df: pd.DataFrame) -> Pipeline:
    y = df.age * 2 + df.city.eq("oslo") * 30 - df.income
    return Pipeline([("pre", encoders()), ("m", RandomForestRegressor(n_estimators=8, max_depth=6, random_state=0))]).fit(df, y)


def rows(seed: int) -> pd.DataFrame:
    """Rows to check on, in another column order than the fit's, with a city the encoders never
    saw (OneHotEncoder ignores it: all zeros)."""
    df = frame(300, seed)[["income", "color", "age", "city"]]
    df.loc[df.index[:7], "city"] = "lima"
    return df


@pytest.mark.parametrize("make", [classifier, regressor])
def test_cli_convert_and_verify_csv_and_parquet(make, tmp_path, capsys):
    pipe = make(frame(2000, 1))
    joblib.dump(pipe, tmp_path / "pipe.joblib")
    out = tmp_path / "pipe.onnx"
    assert main(["convert", str(tmp_path / "pipe.joblib"), "-o", str(out), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["inputs"] == [
        {"name": "city", "shape": [None, 1], "dtype": "string"}, {"name": "age", "shape": [None, 1], "dtype": "float64"},
        {"name": "color", "shape": [None, 1], "dtype": "string"}, {"name": "income", "shape": [None, 1], "dtype": "float64"},
    ]
    data = rows(2)
    assert (data.city == "lima").any()
    data.to_csv(tmp_path / "rows.csv", index=False)
    data.to_parquet(tmp_path / "rows.parquet")
    for path in ("rows.csv", "rows.parquet"):
        report = tmp_path / "r.json"
        code = main(["verify", str(tmp_path / "pipe.joblib"), str(out), "--data", str(tmp_path / path), "--no-progress", "--json", str(report)])
        assert code == 0 and capsys.readouterr().out.rstrip().endswith("PASS")
        doc = json.loads(report.read_text())
        assert doc["rows"] == len(data)
        assert {o["name"] for o in doc["outputs"]} >= ({"label", "probabilities"} if make is classifier else {"variable"})
    code = main(["verify", str(tmp_path / "pipe.joblib"), str(out), "--data", str(tmp_path / "rows.csv"), "--json", "-"])
    assert code == 0 and json.loads(capsys.readouterr().out)["passed"] is True  # (the report alone on stdout)
    # the oracle itself: the graph's outputs on the rows are the pipeline's own predictions
    got = tree2mat.verify(pipe, onnx.load(out), data)
    assert got.passed and got.rows == len(data)


def test_verify_fails_on_a_graph_of_another_pipeline(tmp_path, capsys):
    df = frame(2000, 1)
    pipe, other = classifier(df), classifier(df, flip=True)
    joblib.dump(pipe, tmp_path / "pipe.joblib")
    onnx.save(tree2mat.convert(other), tmp_path / "other.onnx")
    rows(3).to_csv(tmp_path / "rows.csv", index=False)
    code = main(["verify", str(tmp_path / "pipe.joblib"), str(tmp_path / "other.onnx"), "--data", str(tmp_path / "rows.csv"), "--no-progress"])
    assert code == 1 and capsys.readouterr().out.rstrip().endswith("FAIL")


def test_csv_text_columns_stay_text(tmp_path):
    """A .csv's text cells are read as written ("NA" is a city, "1" a colour), empty ones as
    missing; its numbers as numbers."""
    (tmp_path / "rows.csv").write_text("age,city,color\n41.5,NA,1\n,,red\nNA,paris,blue\n")
    got = np.concatenate(list(ColumnRows(tmp_path / "rows.csv", ["city", "color", "age"], ["city", "color"]).chunks(2)))
    assert got[:, :2].tolist() == [["NA", "1"], [None, "red"], ["paris", "blue"]]
    assert got[0, 2] == 41.5 and np.isnan(got[1, 2]) and np.isnan(got[2, 2])


def test_data_needs_the_named_columns(tmp_path, capsys):
    pipe = classifier(frame(500, 1))
    joblib.dump(pipe, tmp_path / "pipe.joblib")
    onnx.save(tree2mat.convert(pipe), tmp_path / "pipe.onnx")
    rows(2).drop(columns="color").to_csv(tmp_path / "rows.csv", index=False)
    code = main(["verify", str(tmp_path / "pipe.joblib"), str(tmp_path / "pipe.onnx"), "--data", str(tmp_path / "rows.csv")])
    one_line_error(capsys, code, 2, "no column 'color'")
    rows(2).to_csv(tmp_path / "rows.csv", index=False)
    code = main(["verify", str(tmp_path / "pipe.joblib"), str(tmp_path / "pipe.onnx"), "--data", str(tmp_path / "rows.csv"), "--no-header"])
    one_line_error(capsys, code, 2, "header")
    code = main(["verify", str(tmp_path / "pipe.joblib"), str(tmp_path / "pipe.onnx")])
    one_line_error(capsys, code, 2, "--data")


@pytest.mark.parametrize("runtime", column_runtimes())
def test_each_runtime_that_runs_strings_passes(runtime):
    pipe = regressor(frame(1000, 1))
    report = tree2mat.verify(pipe, tree2mat.convert(pipe), rows(4), runtime=runtime)
    assert report.passed and report.rows == 300


def test_a_runtime_without_string_tensors_is_refused_before_running(tmp_path, capsys):
    assert column_runtimes() == ["onnxruntime", "reference"]
    pipe = regressor(frame(500, 1))
    joblib.dump(pipe, tmp_path / "pipe.joblib")
    onnx.save(tree2mat.convert(pipe), tmp_path / "pipe.onnx")
    rows(2).to_csv(tmp_path / "rows.csv", index=False)
    code = main(["verify", str(tmp_path / "pipe.joblib"), str(tmp_path / "pipe.onnx"), "--data", str(tmp_path / "rows.csv"), "--runtime", "openvino"])
    one_line_error(capsys, code, 2, "--runtime openvino cannot run", "onnxruntime, reference")


def test_the_documented_python_route_verifies():
    """register_skl2onnx + skl2onnx.to_onnx with one input per column (named as the columns):
    verify reads the rows by those names."""
    df = frame(1000, 1)
    pipe = classifier(df)
    tree2mat.register_skl2onnx()
    from skl2onnx.common.data_types import DoubleTensorType, StringTensorType

    types = [(c, StringTensorType([None, 1]) if c in ("city", "color") else DoubleTensorType([None, 1])) for c in df.columns]  # (float64: exact, see above)
    onx = skl2onnx.to_onnx(pipe, initial_types=types, options={id(pipe.steps[-1][1]): {"zipmap": False}})
    assert len(onx.graph.input) == 4
    report = tree2mat.verify(pipe, onx, rows(5))
    assert report.passed and report.rows == 300


def test_columns_must_be_the_pipelines():
    pipe = classifier(frame(500, 1))
    town = frame(500, 1).rename(columns={"city": "town"})
    other = Pipeline([("pre", ColumnTransformer([("t", OneHotEncoder(handle_unknown="ignore", sparse_output=False), ["town"]), ("age", "passthrough", ["age"])],
                                                remainder="drop")), ("m", HistGradientBoostingClassifier(max_iter=3))])
    onx = tree2mat.convert(other.fit(town, town.age > 40))
    with pytest.raises(VerificationError, match="not the pipeline's columns"):
        tree2mat.verify(pipe, onx, rows(2))

"""Models fitted on DataFrames with string categories: scikit-learn's HistGradientBoosting with its
default ``categorical_features="from_dtype"`` and LightGBM's pandas categorical columns. The graph
takes each category's code (its position in the model's list, shown by ``convert --json``,
``inspect`` and the graph's metadata); ``verify --data`` takes the user's CSV/parquet with the
names and compares with the library predicting on the same names (pandas, not tree2mat, matching
them to the model's categories)."""

from __future__ import annotations

import json

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

import tree2mat
from tree2mat import data as data_module
from tree2mat.cli import main
from tree2mat.ir.io import dumps, ensemble_from_dict

from conftest import run_onnx

RNG = np.random.default_rng(0)
CITIES = np.array(["oslo", "bergen", "rome", "lima", "são paulo"])
N = 800


def _frame(n: int, cities: np.ndarray = CITIES) -> pd.DataFrame:
    return pd.DataFrame({
        "x": RNG.normal(size=n),
        "city": pd.Categorical(RNG.choice(cities, n), categories=sorted(CITIES)),
        "size": pd.Categorical(RNG.choice([3, 1, 2], n)),
        "z": RNG.normal(size=n),
    })


TRAIN = _frame(N)
TARGET = (TRAIN.city.isin(["oslo", "lima"]) ^ (TRAIN.x > 0.5) ^ (TRAIN["size"] == 2)).astype(int).to_numpy()

MODELS = {
    "HistGradientBoostingClassifier": lambda: HistGradientBoostingClassifier(max_iter=8, random_state=0).fit(TRAIN, TARGET),
    "HistGradientBoostingRegressor": lambda: HistGradientBoostingRegressor(max_iter=8, random_state=0).fit(TRAIN, TARGET + TRAIN.x),
    "LGBMClassifier": lambda: lgb.LGBMClassifier(n_estimators=8, min_child_samples=5, verbose=-1, random_state=0).fit(TRAIN, TARGET),
}


def _user_rows(tmp_path, suffix: str) -> str:
    """Rows as a user has them: names in text columns, an unseen city, an empty cell."""
    rows = pd.DataFrame({
        "x": RNG.normal(size=60),
        "city": RNG.choice(np.r_[CITIES, ["paris", ""]], 60).astype(object),
        "size": RNG.choice([1, 2, 3, 7], 60),
        "z": RNG.normal(size=60),
    })
    path = tmp_path / f"rows{suffix}"
    if suffix == ".csv":
        rows.to_csv(path, index=False)
    else:
        rows.replace("", None).to_parquet(path)
    return str(path)


@pytest.fixture(params=list(MODELS), scope="module")
def model(request):
    return MODELS[request.param]()


def test_labels_are_the_models_own(model):
    ens = tree2mat.load(model)
    labels = dict(ens.category_labels)
    assert labels[1] == tuple(sorted(CITIES))
    if isinstance(model, lgb.LGBMModel):  # LightGBM names integer categories too
        assert labels[2] == (1, 2, 3)
        assert list(model.booster_.pandas_categorical[0]) == list(labels[1])
    else:
        (encoder,) = [t for name, t, _ in model._preprocessor.transformers_ if name == "encoder"]
        assert list(encoder.categories_[0]) == list(labels[1])
    back = ensemble_from_dict(json.loads(dumps(ens)))
    assert back.category_labels == ens.category_labels


def test_graph_on_codes_matches_the_library_on_names(model):
    ens = tree2mat.load(model)
    onx = tree2mat.convert(model)
    test = _frame(300)
    test.loc[::7, "city"] = np.nan
    codes = test.copy()
    for j, labels in ens.category_labels:
        col = test.columns[j]
        codes[col] = pd.Categorical(test[col], categories=list(labels)).codes.astype(float)
        codes.loc[codes[col] < 0, col] = np.nan
    got = run_onnx(onx, codes.to_numpy(np.float32))
    key = "label" if hasattr(model, "classes_") else "variable"
    want = np.asarray(model.predict(test)).reshape(got[key].shape)
    np.testing.assert_allclose(got[key], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_verify_takes_the_users_rows_with_names(model, tmp_path, capsys, suffix):
    src = tmp_path / "model.joblib"
    import joblib

    joblib.dump(model, src)
    out = tmp_path / "model.onnx"
    assert main(["convert", str(src), "-o", str(out), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["categories"][0] == {"column": 1, "name": "city", "categories": sorted(CITIES)}
    rows = _user_rows(tmp_path, suffix)
    assert main(["verify", str(src), str(out), "--data", rows, "--json", "-"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["passed"] and report["rows"] == 60
    assert main(["inspect", str(src)]) == 0
    assert "categories of column 1 (city): bergen=0, lima=1, oslo=2, rome=3, são paulo=4" in capsys.readouterr().out


def test_a_wrong_encoding_fails_verify(model, tmp_path, monkeypatch):
    """verify compares with the library reading the names itself: codes one off are caught."""
    rows = _user_rows(tmp_path, ".csv")
    onx = tree2mat.convert(model)
    assert tree2mat.verify(model, onx, data=rows).passed
    right = data_module.encoder
    monkeypatch.setattr(data_module._csv, "encoder", lambda labels: lambda cell: (right(labels)(cell) + 1) % len(labels))
    assert not tree2mat.verify(model, onx, data=rows).passed


def test_lightgbm_names_only_where_they_pair_with_the_splits(tmp_path):
    """LightGBM's text lists the names of every pandas category column, ordered ones too (coded,
    not split on as categories), by position only; its categorical features may be integer
    columns instead. Names are kept only where they pair with the categorical features' codes."""
    frame = pd.DataFrame({
        "x": RNG.normal(size=N),
        "size": pd.Categorical(RNG.choice(["S", "M", "L"], N), categories=["S", "M", "L"], ordered=True),
        "store": RNG.integers(0, 9, N),
    })
    target = frame.x + (frame.store % 3) + frame["size"].cat.codes
    model = lgb.LGBMRegressor(n_estimators=5, min_child_samples=5, verbose=-1).fit(frame, target, categorical_feature=["store"])
    text = model.booster_.model_to_string()
    assert "[categorical_feature: 2]" in text and 'pandas_categorical:[["S", "M", "L"]]' in text
    assert tree2mat.load(model).category_labels == ()  # not S/M/L on the store column
    codes = frame.assign(size=frame["size"].cat.codes).to_numpy(np.float64)
    assert tree2mat.verify(model, tree2mat.convert(model), data=codes[:200]).passed


def test_only_named_columns_header_or_not(tmp_path):
    """With every column a named category, a first line naming no category is a header, and one
    naming some (beside a name the model never saw) is a row."""
    frame = pd.DataFrame({"city": pd.Categorical(RNG.choice(CITIES[:4], N)), "grade": pd.Categorical(RNG.choice(["S", "M"], N))})
    target = (frame.city.isin(["oslo", "lima"]) ^ (frame.grade == "S")).astype(int)
    model = lgb.LGBMClassifier(n_estimators=3, min_child_samples=5, verbose=-1).fit(frame, target)
    ens = tree2mat.load(model)
    assert len(ens.category_labels) == 2
    for text, rows in (("city,grade\noslo,S\nrome,M\n", 2), ("oslo,S\nparis,M\n", 2), ("paris,S\noslo,M\n", 2)):
        (tmp_path / "rows.csv").write_text(text)
        source = data_module.open_rows(tmp_path / "rows.csv", dict(ens.category_labels))
        assert sum(c.shape[0] for c in source.chunks(10)) == rows, text


def test_lightgbm_text_keeps_the_names(tmp_path, capsys):
    """A model text LightGBM's Python package saved carries the categories (its last line):
    the text converts, and verify reads the user's names against the Booster loaded from it."""
    model = MODELS["LGBMClassifier"]()
    path = tmp_path / "model.txt"
    model.booster_.save_model(str(path))
    assert dict(tree2mat.load(path).category_labels)[1] == tuple(sorted(CITIES))
    out = tmp_path / "model.onnx"
    assert main(["convert", str(path), "-o", str(out)]) == 0
    assert main(["verify", str(path), str(out), "--data", _user_rows(tmp_path, ".csv")]) == 0
    assert "PASS" in capsys.readouterr().out


# ------------------------------------------------------------------------------ XGBoost (3.1 on)

xgb = pytest.importorskip("xgboost")
ASCII = ["rome", "oslo", "bergen", "lima"]  # the dtype's order, not sorted: XGBoost keeps it


def _xgb_model(cities: list[str]):
    frame = TRAIN.copy()
    frame["city"] = pd.Categorical(RNG.choice(cities, N), categories=cities)
    target = (frame.city.isin(cities[:2]) ^ (frame.x > 0.5)).astype(int).to_numpy()
    model = xgb.XGBClassifier(n_estimators=6, max_depth=3, enable_categorical=True, tree_method="hist", random_state=0)
    return model.fit(frame, target)


@pytest.mark.parametrize("suffix", [".json", ".ubj"])
def test_xgboost_stored_categories(tmp_path, capsys, monkeypatch, suffix):
    model = _xgb_model(ASCII)
    path = tmp_path / f"model{suffix}"
    model.save_model(str(path))
    ens = tree2mat.load(path)
    assert dict(ens.category_labels) == {1: tuple(ASCII), 2: (1, 2, 3)}
    out = tmp_path / "model.onnx"
    assert main(["convert", str(path), "-o", str(out)]) == 0
    assert main(["verify", str(path), str(out)]) == 0  # synthesized rows: codes, as XGBoost takes them too
    rows = pd.DataFrame({
        "x": RNG.normal(size=60), "city": RNG.choice(ASCII + [""], 60).astype(object),
        "size": RNG.choice([1, 2, 3], 60), "z": RNG.normal(size=60),
    })
    rows.to_csv(tmp_path / "rows.csv", index=False)
    capsys.readouterr()
    assert main(["verify", str(path), str(out), "--data", str(tmp_path / "rows.csv"), "--json", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["passed"]
    right = data_module.encoder  # codes one off: XGBoost, reading the names itself, disagrees
    monkeypatch.setattr(data_module._csv, "encoder", lambda labels: lambda cell: (right(labels)(cell) + 1) % len(labels))
    assert not tree2mat.verify(path, str(out), data=str(tmp_path / "rows.csv")).passed


def test_xgboost_non_ascii_names(tmp_path):
    """XGBoost 3.2.0 and earlier store non-ASCII names cut at the wrong bytes: tree2mat leaves the
    names out (the graph takes XGBoost's codes) rather than name categories wrongly; the model
    converts and verifies all the same."""
    cities = ["rome", "são paulo", "oslo"]
    model = _xgb_model(cities)
    path = tmp_path / "model.json"
    model.save_model(str(path))
    labels = dict(tree2mat.load(path).category_labels)
    fixed = tuple(int(v) for v in xgb.__version__.split(".")[:3] if v.isdigit()) > (3, 2, 0)
    # (none at all: XGBoost reads names for all its category columns or for none)
    assert labels == ({1: tuple(cities), 2: (1, 2, 3)} if fixed else {})
    assert tree2mat.verify(path, tree2mat.convert(path)).passed


def _codes_csv(tmp_path, ens, cities=CITIES) -> str:
    """A user's rows with each named-category column written as the categories' codes (as the
    graph takes them), not their names."""
    rows = _frame(60, np.asarray(cities))
    for j, labels in ens.category_labels:
        col = rows.columns[j]
        rows[col] = pd.Categorical(rows[col].astype(object), categories=list(labels)).codes
    path = tmp_path / "codes.csv"
    rows.to_csv(path, index=False)
    return str(path)


def _category_notes(report) -> list[str]:
    return [n for n in report.notes if "categories" in n and n.startswith("column")]


def _check_codes_file(subject, tmp_path, cities=CITIES) -> None:
    """A .csv whose category columns hold codes (4, not "rome"): read as names, no cell names a
    category, which the report says, naming --category-codes; with it, the codes are the rows'
    categories, verify passes and every category column was reached."""
    ens = tree2mat.load(subject)
    onx = tree2mat.convert(subject)
    rows = _codes_csv(tmp_path, ens, cities)
    notes = _category_notes(tree2mat.verify(subject, onx, data=rows))
    for j, labels in ens.category_labels:
        if not isinstance(labels[0], str):  # (codes of numbers name numbers: size's 1 and 2 are categories 1, 2)
            continue
        col = ens.feature_names[j]
        assert any(n.startswith(f"column {j} ({col}): none of its 60 cells names one of the model's categories") and "--category-codes" in n
                   for n in notes), notes
        assert f"column {j} ({col}): no row of the data holds one of the model's categories, so the splits on its categories were not checked" in notes
    codes = tree2mat.verify(subject, onx, data=rows, category_codes=True)
    assert codes.passed and _category_notes(codes) == [], codes.summary()


def test_a_file_of_codes_is_never_read_silently_as_no_category(model, tmp_path):
    _check_codes_file(model, tmp_path)
    named = tree2mat.verify(model, tree2mat.convert(model), data=_user_rows(tmp_path, ".csv"))  # ("paris", 7: unseen)
    assert named.passed and all("none of its" not in n and "not checked" not in n for n in named.notes), named.notes
    assert any(n.startswith("column 1 (city): ") and "cells name none of the model's categories, e.g. 'paris'" in n for n in named.notes), named.notes


def test_a_file_of_codes_for_xgboost(tmp_path):
    """As above for XGBoost's stored categories (the file the issue saw fail on 392 rows: read as
    names, XGBoost takes each code as a name it never saw, which it routes unlike NaN)."""
    _check_codes_file(_xgb_model(ASCII), tmp_path, ASCII)

"""``--form auto`` and the pieces around it: the choice is the cheapest estimate among the exact
forms that fit the memory budget, it is said in the graph, the convert summary and inspect, and
the graph it gives is exact. Graphs over protobuf's 2 GiB go to ONNX external data (the limit is
lowered here, so that a small model takes that path)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier, RandomForestRegressor

import tree2mat
import importlib
from tree2mat.cli import main
from tree2mat.errors import OptionError, UnsupportedModelError
from tree2mat.forms import FORMS, auto

XB, YB = load_breast_cancer(return_X_y=True)
XI, YI = load_iris(return_X_y=True)
XD, YD = load_diabetes(return_X_y=True)


def _meta(onx: onnx.ModelProto) -> dict[str, str]:
    return {p.key: p.value for p in onx.metadata_props}


@pytest.fixture(scope="module")
def shallow():
    return GradientBoostingClassifier(n_estimators=20, max_depth=2, random_state=0).fit(XB, YB)


@pytest.fixture(scope="module")
def deep():
    return RandomForestRegressor(n_estimators=10, random_state=0).fit(XD, YD)  # ~280 leaves a tree


@pytest.mark.parametrize("which", ["shallow", "deep"])
def test_auto_picks_the_cheapest_fitting_exact_form_and_is_exact(which, request):
    model = request.getfixturevalue(which)
    ens = tree2mat.load(model)
    choice = auto.choose(ens)
    fitting = [e for e in choice.estimates if e.fits]
    assert choice.form == min(fitting, key=lambda e: e.us_per_row).form
    assert FORMS[choice.form].exact
    onx = tree2mat.convert(model)
    meta = _meta(onx)
    assert meta["tree2mat.form"] == choice.form and meta["tree2mat.auto"] == choice.reason
    report = tree2mat.verify(model, onx, rows=300)
    assert report.passed, report.summary()


def test_auto_follows_the_cost_model_between_shallow_and_deep(shallow, deep):
    """Matrix forms win on shallow trees (little T*I*L work), the walk on deep ones."""
    assert auto.choose(tree2mat.load(shallow)).form == "bitvector"
    assert auto.choose(tree2mat.load(deep)).form == "traverse"


def test_memory_budget_rules_forms_out(deep):
    ens = tree2mat.load(deep)
    dense = next(e for e in auto.choose(ens).estimates if e.form == "bitvector")
    walk = next(e for e in auto.choose(ens).estimates if e.form == "traverse")
    assert walk.memory_bytes < dense.memory_bytes  # (the premise of this test)
    assert auto.choose(ens, max_memory=walk.memory_bytes).form == "traverse"
    with pytest.raises(UnsupportedModelError, match="no exact form fits --max-memory"):
        auto.choose(ens, max_memory=walk.memory_bytes - 1)


@pytest.mark.parametrize("text,expected", [("4G", 4 * 2**30), ("512M", 512 * 2**20), ("1.5GiB", int(1.5 * 2**30)),
                                           ("2000000", 2_000_000), ("64kb", 64 * 2**10)])
def test_parse_memory(text, expected):
    assert auto.parse_memory(text) == expected


@pytest.mark.parametrize("text", ["lots", "", "-1G", "0", "nanG", "infM"])
def test_parse_memory_refuses_nonsense(text):
    with pytest.raises(OptionError, match="--max-memory"):
        auto.parse_memory(text)


def test_auto_refuses_soft_options(shallow):
    with pytest.raises(OptionError, match="explicit --form"):
        tree2mat.convert(shallow, temperature=0.1)
    with pytest.raises(OptionError, match="explicit --form"):
        tree2mat.convert(shallow, matmul="int8")


def test_cli_says_what_auto_picked_and_why(tmp_path, capsys, shallow):
    import joblib

    joblib.dump(shallow, tmp_path / "m.joblib")
    assert main(["convert", str(tmp_path / "m.joblib"), "-o", str(tmp_path / "m.onnx")]) == 0
    out = capsys.readouterr().out
    assert "form bitvector" in out and "auto picked bitvector: fastest exact form" in out
    assert main(["inspect", str(tmp_path / "m.joblib"), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["auto"]["form"] == "bitvector" and "estimated" in doc["auto"]["reason"]
    assert doc["forms"]["traverse"]["estimated_us_per_row"] > doc["forms"]["bitvector"]["estimated_us_per_row"]
    assert main(["convert", str(tmp_path / "m.joblib"), "-o", str(tmp_path / "t.onnx"), "--max-memory", "1K"]) == 2
    assert "no exact form fits --max-memory" in capsys.readouterr().err
    assert not (tmp_path / "t.onnx").exists()


def test_graph_over_the_protobuf_limit_is_written_as_external_data(tmp_path, capsys, monkeypatch):
    model = RandomForestClassifier(n_estimators=5, max_depth=5, random_state=0).fit(XI, YI)
    import joblib

    joblib.dump(model, tmp_path / "m.joblib")
    monkeypatch.setattr(importlib.import_module("tree2mat.convert"), "EXTERNAL_DATA_BYTES", 1000)
    assert main(["convert", str(tmp_path / "m.joblib"), "-o", str(tmp_path / "m.onnx"), "--form", "sign"]) == 0
    out = capsys.readouterr().out
    assert "constants in m.onnx.data" in out
    graph, data = tmp_path / "m.onnx", tmp_path / "m.onnx.data"
    assert data.stat().st_size > graph.stat().st_size
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.joblib", "m.onnx", "m.onnx.data"]  # no temporaries left
    sess = ort.InferenceSession(str(graph), providers=["CPUExecutionProvider"])  # onnxruntime finds the data
    labels = sess.run(["label"], {"input": XI.astype(np.float32)})[0]
    np.testing.assert_array_equal(labels, model.predict(XI))
    assert main(["verify", str(tmp_path / "m.joblib"), str(graph), "--rows", "200"]) == 0
    # The in-memory model is left whole by save.
    onx = tree2mat.convert(model, form="sign")
    before = onx.SerializeToString()
    tree2mat.save(onx, tmp_path / "again.onnx")
    assert onx.SerializeToString() == before

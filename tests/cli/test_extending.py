"""A new form or frontend is one file and one registry entry. With tests/cli/toy_form.py registered in
``FORMS`` (and nothing else changed), the CLI takes the form, auto weighs it, inspect lists it,
the README's table shows it and verify proves it against the library. With tests/cli/toy_frontend.py
registered in ``FRONTENDS``, its model files convert under their name or any other, verify
compares the graph with the toy library's own predictions, and the README's table lists it."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from sklearn.datasets import make_classification
from sklearn.ensemble import RandomForestClassifier

import tree2mat
from tree2mat.cli import main
from tree2mat.forms import FORMS, auto
from tree2mat.frontends import FRONTENDS
from tree2mat.inspect import summary
from tree2mat.support import support_table
from tree2mat.verify import run_graph

import toy_form
import toy_frontend


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(FORMS, "toy", toy_form.FORM)
    return toy_form.FORM


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    X, y = make_classification(400, 6, random_state=0)
    X[::9, 1] = np.nan
    model = RandomForestClassifier(n_estimators=6, max_depth=5, random_state=0).fit(X, y)
    path = tmp_path_factory.mktemp("toy") / "model.skops"
    import skops.io as sio

    sio.dump(model, path)
    return path


def _form_of(path) -> str:
    return {p.key: p.value for p in onnx.load(str(path)).metadata_props}["tree2mat.form"]


def test_the_cli_converts_with_the_new_form_and_verify_proves_it(toy, model_file, tmp_path, capsys):
    out = tmp_path / "toy.onnx"
    assert main(["convert", str(model_file), "-o", str(out), "--form", "toy"]) == 0
    assert _form_of(out) == "toy"
    capsys.readouterr()
    assert main(["verify", str(model_file), str(out), "--json", "-"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["passed"] and any(o["name"] == "routing" for o in report["outputs"])


def test_without_its_entry_the_form_is_unknown(model_file, tmp_path, capsys):
    assert "toy" not in FORMS
    assert main(["convert", str(model_file), "-o", str(tmp_path / "x.onnx"), "--form", "toy"]) == 2
    assert "unknown form 'toy'" in capsys.readouterr().err


def test_an_unknown_form_s_error_lists_the_new_one(toy, model_file, tmp_path, capsys):
    assert main(["convert", str(model_file), "-o", str(tmp_path / "x.onnx"), "--form", "nope"]) == 2
    assert "toy" in capsys.readouterr().err


def test_auto_weighs_the_new_form(toy, model_file):
    """Proven on onnxruntime alone: a candidate for --target onnxruntime, not of the portable
    default (forms proven on every runtime)."""
    ens = tree2mat.load(model_file)
    assert toy in auto.candidates("onnxruntime") and toy not in auto.candidates()
    choice = auto.choose(ens, target="onnxruntime")
    assert choice.form == "toy" and "toy" in {e.form for e in choice.estimates}
    graph = tree2mat.convert(model_file, target="onnxruntime")
    assert {p.key: p.value for p in graph.metadata_props}["tree2mat.form"] == "toy"
    assert {p.key: p.value for p in tree2mat.convert(model_file).metadata_props}["tree2mat.form"] != "toy"
    # over the budget it is left out, as any form: its dense matrices need more than the walk
    mine, walk = auto.estimate(toy, ens), auto.estimate(FORMS["traverse"], ens)
    assert walk.memory_bytes < mine.memory_bytes
    assert auto.choose(ens, walk.memory_bytes, target="onnxruntime").form != "toy"


def test_inspect_and_the_readme_table_list_the_new_form(toy, model_file, capsys):
    ens = tree2mat.load(model_file)
    info = summary(ens)
    assert info["forms"]["toy"]["exact"] and info["forms"]["toy"]["estimated_us_per_row"] == pytest.approx(1e-9)
    assert main(["inspect", str(model_file), "--format", "json"]) == 0
    assert "toy" in json.loads(capsys.readouterr().out)["forms"]
    assert "| `toy` | yes | onnxruntime | a toy form" in support_table()


# ------------------------------------------------------------------------------ a new frontend


@pytest.fixture
def stumps(monkeypatch):
    monkeypatch.setitem(FRONTENDS, "stumps", toy_frontend.SPEC)


def _stumps_file(path):
    model = toy_frontend.Stumps(3, [(0, 0.5, 1.25, -2.0, True), (2, -1.0, 0.5, 3.0, False), (0, 2.0, 0.25, -0.75, False)])
    model.save(path)
    return model


@pytest.mark.parametrize("name", ["model.stumps", "model.bin"])
def test_the_new_frontend_s_files_convert_and_verify_against_its_library(stumps, tmp_path, capsys, name):
    path = tmp_path / name
    model = _stumps_file(path)
    out = tmp_path / "stumps.onnx"
    assert main(["convert", str(path), "-o", str(out), "--form", "traverse"]) == 0
    capsys.readouterr()
    assert main(["verify", str(path), str(out), "--json", "-"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["passed"] and not any("no original library model" in n for n in report["notes"])
    # the graph against the toy library itself, on thresholds, their neighbours and NaN
    X = np.array([[0.5, 0, -1.0], [np.nextafter(0.5, 1), 0, np.nextafter(-1.0, 0)], [np.nan, 0, np.nan], [2.0, 0, 5.0]], np.float32)
    got = run_graph(tree2mat.convert(path), X)
    np.testing.assert_allclose(got["variable"][:, 0], model.predict(X.astype(np.float64)), rtol=1e-6)


def test_without_its_entry_the_new_frontend_s_files_are_unknown(tmp_path):
    path = tmp_path / "model.stumps"
    _stumps_file(path)
    with pytest.raises(tree2mat.Tree2MatError, match="unknown model file type '.stumps'"):
        tree2mat.convert(path)


def test_the_readme_table_lists_the_new_frontend(stumps):
    assert "| Stumps | `Stumps` | regression |" in support_table()

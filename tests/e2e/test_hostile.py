"""Broken, hostile and odd inputs from the command line: a one-line error and the documented exit
code, never a traceback, a hang, a partial or clobbered file, or a silently coerced answer."""

from __future__ import annotations

import json
import os

import joblib
import numpy as np
import onnx
import pytest
from sklearn.datasets import load_breast_cancer, load_iris
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier
from sklearn.tree import DecisionTreeRegressor

from tree2mat.cli import main

from conftest import ROOT

FIXTURE = ROOT / "fixtures" / "paper_tree.json"
XI, YI = load_iris(return_X_y=True)


@pytest.fixture(scope="module")
def rf(tmp_path_factory):
    d = tmp_path_factory.mktemp("rf")
    joblib.dump(RandomForestClassifier(n_estimators=3, random_state=0).fit(XI, YI), d / "rf.joblib")
    assert main(["convert", str(d / "rf.joblib"), "-o", str(d / "rf.onnx")]) == 0
    return d


def expect(capsys, code, expected, *needles):
    err = capsys.readouterr().err.strip()
    assert code == expected, err
    assert err.count("\n") == 0 and err.startswith("tree2mat: error:") and "Traceback" not in err, err
    for n in needles:
        assert n in err, err


def test_special_files_are_never_written_through(rf, tmp_path, capsys):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    expect(capsys, main(["convert", str(rf / "rf.joblib"), "-o", str(fifo)]), 2, "not a regular file")
    assert fifo.is_fifo()
    expect(capsys, main(["convert", str(rf / "rf.joblib"), "-o", str(tmp_path)]), 2, "not a regular file")
    expect(capsys, main(["convert", str(rf / "rf.joblib"), "-o", "-"]), 2, "'-' is not a file name")


def test_symlinks_are_written_through(rf, tmp_path):
    target = tmp_path / "real.onnx"
    target.write_bytes(b"old")
    link = tmp_path / "link.onnx"
    link.symlink_to(target)
    assert main(["convert", str(rf / "rf.joblib"), "-o", str(link)]) == 0
    assert link.is_symlink() and target.read_bytes() == (rf / "rf.onnx").read_bytes()


def test_debug_keeps_exit_codes_and_adds_the_traceback(rf, tmp_path, capsys):
    assert main(["--debug", "convert", str(tmp_path / "missing.pkl"), "-o", str(tmp_path / "x.onnx")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and err.strip().splitlines()[-1].startswith("tree2mat: error:")
    assert main(["verify", str(rf / "rf.joblib"), str(rf / "rf.onnx"), "--debug", "--rows", "10"]) == 0


def test_bad_json_path_is_reported_before_the_run(rf, tmp_path, capsys):
    code = main(["verify", str(rf / "rf.joblib"), str(rf / "rf.onnx"), "--json", str(tmp_path / "no" / "r.json")])
    expect(capsys, code, 2, "no such directory")


def test_library_warnings_and_multiline_messages_stay_off_stderr(tmp_path, capsys):
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(XI, columns=list("abcd"))
    joblib.dump(RandomForestClassifier(n_estimators=2, random_state=0).fit(frame, YI), tmp_path / "df.joblib")
    assert main(["convert", str(tmp_path / "df.joblib"), "-o", str(tmp_path / "df.onnx")]) == 0
    assert main(["verify", str(tmp_path / "df.joblib"), str(tmp_path / "df.onnx"), "--rows", "20"]) == 0
    assert capsys.readouterr().err == ""
    X, y = load_breast_cancer(return_X_y=True)
    joblib.dump(GradientBoostingClassifier(n_estimators=2).fit(X, y), tmp_path / "gb.joblib")
    assert main(["convert", str(tmp_path / "gb.joblib"), "-o", str(tmp_path / "gb.onnx")]) == 0
    X[0, 0] = np.nan  # GradientBoosting refuses NaN, with a message of several lines
    np.save(tmp_path / "nan.npy", X)
    expect(capsys, main(["verify", str(tmp_path / "gb.joblib"), str(tmp_path / "gb.onnx"), "--data", str(tmp_path / "nan.npy")]), 2, "rejects the data")
    (tmp_path / "empty.csv").write_text("")
    expect(capsys, main(["verify", str(tmp_path / "gb.joblib"), str(tmp_path / "gb.onnx"), "--data", str(tmp_path / "empty.csv")]), 2, "non-empty")


def test_csv_empty_cells_are_missing_values(rf, tmp_path, capsys):
    (tmp_path / "x.csv").write_text("a,b,c,d\n5.1,,1.4,0.2\n6.0,3.0,4.8,1.8\n")
    assert main(["verify", str(rf / "rf.joblib"), str(rf / "rf.onnx"), "--data", str(tmp_path / "x.csv")]) == 0


@pytest.mark.parametrize("args,needle", [(["--rows", "99999999999999999999"], "--rows"), (["--seed", "-1"], "--seed"), (["--rows", "-5"], "--rows")])
def test_out_of_range_numbers(rf, capsys, args, needle):
    expect(capsys, main(["verify", str(rf / "rf.joblib"), str(rf / "rf.onnx"), *args]), 2, needle)


def test_unreadable_or_odd_onnx_files(rf, tmp_path, capsys):
    (tmp_path / "empty.onnx").write_bytes(b"")
    expect(capsys, main(["verify", str(rf / "rf.joblib"), str(tmp_path / "empty.onnx")]), 2, "not an ONNX model")
    expect(capsys, main(["verify", str(rf / "rf.joblib"), str(tmp_path)]), 2, "not a regular file")
    onx = onnx.load(str(rf / "rf.onnx"))
    for p in onx.metadata_props:
        if p.key == "tree2mat.leaf_tensor":
            p.value = "label"  # tampered metadata
    onnx.save(onx, str(tmp_path / "tampered.onnx"))
    code = main(["verify", str(rf / "rf.joblib"), str(tmp_path / "tampered.onnx")])
    assert code in (1, 2), capsys.readouterr()
    assert "internal error" not in capsys.readouterr().err


def ir_doc() -> dict:
    return json.loads(FIXTURE.read_text())


@pytest.mark.parametrize(
    "edit,needle",
    [
        (lambda d: d["trees"][0].__setitem__("feature", [0.9, 1, 2, 1, 3]), "feature must be a 1-D list of integers"),
        (lambda d: d["trees"][0].__setitem__("left", [1.5, 3, -5, -1, -2]), "left must be a 1-D list of integers"),
        (lambda d: d.__setitem__("n_features", 4.7), "n_features must be an integer"),
        (lambda d: d["trees"][0].__setitem__("default_left", ["false"] * 5), "default_left must be a 1-D list of true/false"),
        (lambda d: d.__setitem__("feature_names", "abcd"), "feature_names must be a list of strings"),
        (lambda d: d.__setitem__("feature_names", ["a"]), "1 feature names for 4 features"),
        (lambda d: d.__setitem__("source_dtype", None), "source_dtype"),
        (lambda d: d["trees"][0].__setitem__("feature", [0, 1, 2, 1, 2**70]), "feature"),
        (lambda d: d["trees"][0].__setitem__("categorical", [{"node": 99, "values": [1.0], "left": [True]}]), "categorical node index out of range"),
        (lambda d: d.__setitem__("finite_features", [99]), "finite_features"),
        (lambda d: d.__setitem__("n_features", 10**9), "n_features must be between"),
        (lambda d: d.update(task="classification", n_outputs=2, classes=[[0.5, 1.5]]), "all integers or all strings"),
        (lambda d: d.update(task="classification", n_outputs=2, classes=[[True, False]]), "all integers or all strings"),
        (lambda d: d.update(task="classification", link="logistic", label_rule="positive", classes=[[0, 0]]), "distinct"),
    ],
)
def test_ill_typed_ir_is_refused_not_coerced(tmp_path, capsys, edit, needle):
    doc = ir_doc()
    edit(doc)
    (tmp_path / "m.json").write_text(json.dumps(doc))
    expect(capsys, main(["convert", str(tmp_path / "m.json"), "-o", str(tmp_path / "m.onnx")]), 2, needle)
    assert not (tmp_path / "m.onnx").exists()


def test_deeply_nested_json(tmp_path, capsys):
    (tmp_path / "deep.json").write_text('{"learner": ' + "[" * 100_000 + "]" * 100_000 + "}")
    expect(capsys, main(["inspect", str(tmp_path / "deep.json")]), 2, "nested too deeply")


@pytest.mark.parametrize(
    "tamper",
    [
        lambda m: setattr(m.estimators_[0], "tree_", None),
        lambda m: setattr(m, "estimators_", None),
        lambda m: setattr(m, "estimators_", {"a": 1}),
    ],
)
def test_tampered_fitted_models(tmp_path, capsys, tamper):
    model = RandomForestClassifier(n_estimators=2, random_state=0).fit(XI, YI)
    tamper(model)
    joblib.dump(model, tmp_path / "t.joblib")
    expect(capsys, main(["convert", str(tmp_path / "t.joblib"), "-o", str(tmp_path / "t.onnx")]), 2, "fitted attributes are not as expected")


def test_tampered_learning_rate(tmp_path, capsys):
    X, y = load_breast_cancer(return_X_y=True)
    model = GradientBoostingClassifier(n_estimators=2).fit(X, y)
    model.learning_rate = "fast"
    joblib.dump(model, tmp_path / "t.joblib")
    expect(capsys, main(["convert", str(tmp_path / "t.joblib"), "-o", str(tmp_path / "t.onnx")]), 2, "fitted attributes")


@pytest.mark.slow
def test_huge_dense_layout_is_refused_quickly(tmp_path, capsys):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20_000, 5))
    joblib.dump(DecisionTreeRegressor(random_state=0).fit(X, rng.normal(size=20_000)), tmp_path / "deep.joblib")
    expect(capsys, main(["convert", str(tmp_path / "deep.joblib"), "-o", str(tmp_path / "deep.onnx"), "--form", "sign"]), 2,
           "over --max-memory", "--form traverse fits")
    assert not (tmp_path / "deep.onnx").exists()
    # The form the message names converts it, as does auto (which picks it), and the graph
    # routes as scikit-learn does.
    assert main(["convert", str(tmp_path / "deep.joblib"), "-o", str(tmp_path / "deep.onnx")]) == 0
    assert "auto picked traverse" in capsys.readouterr().out
    assert main(["convert", str(tmp_path / "deep.joblib"), "-o", str(tmp_path / "deep.onnx"), "--form", "traverse"]) == 0
    assert main(["verify", str(tmp_path / "deep.joblib"), str(tmp_path / "deep.onnx"), "--rows", "300"]) == 0

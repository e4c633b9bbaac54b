"""The command line: exit codes, one-line errors, files never left half-written or clobbered."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import joblib
import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_iris
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier

from tree2mat.cli import main

from conftest import ROOT

BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    X, y = load_breast_cancer(return_X_y=True)
    a = RandomForestClassifier(n_estimators=5, random_state=0).fit(X, y)
    b = RandomForestClassifier(n_estimators=5, random_state=1).fit(X, y)
    joblib.dump(a, d / "a.joblib")
    with open(d / "b.pkl", "wb") as fh:
        pickle.dump(b, fh)
    assert main(["convert", str(d / "a.joblib"), "-o", str(d / "a.onnx")]) == 0
    assert main(["convert", str(d / "b.pkl"), "-o", str(d / "b.onnx")]) == 0
    return d


def one_line_error(capsys, code, expected_code, *needles):
    err = capsys.readouterr().err.strip()
    assert code == expected_code, err
    assert err.startswith("tree2mat: error:") and "\n" not in err, err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, err


def test_convert_and_verify_pass(models, capsys, tmp_path):
    report = tmp_path / "r.json"
    code = main(["verify", str(models / "a.joblib"), str(models / "a.onnx"), "--json", str(report)])
    out = capsys.readouterr().out
    assert code == 0 and out.rstrip().endswith("PASS")
    doc = json.loads(report.read_text())
    assert doc["passed"] is True and doc["schema"] == 3
    assert {o["name"] for o in doc["outputs"]} == {"label", "probabilities", "routing"}


def test_verify_json_to_stdout(models, capsys):
    assert main(["verify", str(models / "a.joblib"), str(models / "a.onnx"), "--json", "-", "--rows", "50"]) == 0
    assert json.loads(capsys.readouterr().out)["passed"] is True


def test_verify_fails_with_exit_1_on_another_models_graph(models, capsys):
    code = main(["verify", str(models / "a.joblib"), str(models / "b.onnx")])
    out = capsys.readouterr().out
    assert code == 1
    assert out.rstrip().endswith("FAIL") and "row " in out  # first mismatching rows shown


def test_verify_exit_2_on_wrong_width_data(models, capsys, tmp_path):
    bad = tmp_path / "bad.npy"
    np.save(bad, np.zeros((10, 7)))
    code = main(["verify", str(models / "a.joblib"), str(models / "a.onnx"), "--data", str(bad)])
    one_line_error(capsys, code, 2, "shape (10, 7)", "[N, 30]")


@pytest.mark.parametrize("suffix", [".npy", ".npz", ".csv", ".parquet"])
def test_verify_reads_data_files(models, capsys, tmp_path, suffix):
    X = load_breast_cancer(return_X_y=True)[0][:50]
    path = tmp_path / f"x{suffix}"
    if suffix == ".npy":
        np.save(path, X)
    elif suffix == ".npz":
        np.savez(path, X=X)
    elif suffix == ".csv":
        header = ",".join(f"f{i}" for i in range(X.shape[1]))
        np.savetxt(path, X, delimiter=",", header=header, comments="")
    else:
        pd = pytest.importorskip("pandas")
        pytest.importorskip("pyarrow")
        pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])]).to_parquet(path)
    code = main(["verify", str(models / "a.joblib"), str(models / "a.onnx"), "--data", str(path)])
    assert code == 0, capsys.readouterr()
    assert "50 data" in capsys.readouterr().out


def test_verify_exit_2_on_unreadable_data(models, capsys, tmp_path):
    bad = tmp_path / "x.npy"
    bad.write_bytes(b"not numpy")
    code = main(["verify", str(models / "a.joblib"), str(models / "a.onnx"), "--data", str(bad)])
    one_line_error(capsys, code, 2, "cannot read data")


def test_verify_cuda_without_provider_is_exit_2(models, capsys, has_cuda):
    if has_cuda:
        pytest.skip("this onnxruntime has the CUDA provider; the refusal cannot be seen here")
    code = main(["verify", str(models / "a.joblib"), str(models / "a.onnx"), "--device", "cuda"])
    one_line_error(capsys, code, 2, "CUDAExecutionProvider", "nothing was run")


def test_verify_exit_1_on_graph_of_other_width(models, capsys, tmp_path):
    X, y = load_iris(return_X_y=True)
    joblib.dump(RandomForestClassifier(n_estimators=2, random_state=0).fit(X, y), tmp_path / "iris.joblib")
    assert main(["convert", str(tmp_path / "iris.joblib"), "-o", str(tmp_path / "iris.onnx")]) == 0
    capsys.readouterr()
    code = main(["verify", str(models / "a.joblib"), str(tmp_path / "iris.onnx")])
    err = capsys.readouterr().err
    assert code == 1 and "takes 4 features, the model 30" in err


@pytest.mark.parametrize(
    "content,suffix,needle",
    [
        (b"\x80\x04garbage", ".pkl", "cannot unpickle"),
        (b"", ".joblib", "cannot unpickle"),
        (b"{not json", ".json", "not valid JSON"),
        (b'{"learner": {}}', ".json", "ill-formed XGBoost model: need objective"),
        (b'{"foo": 1}', ".json",
         "neither a tree2mat IR document nor an XGBoost model nor a CatBoost model (no 'tree2mat_ir' or 'learner' or 'features_info' key)"),
        (b"[i\x01]", ".ubj", "not an XGBoost model (no 'learner' key)"),
        (b"{L\x00\x00\x00\x00\x00\x00\x00\x07learn", ".ubj", "not a valid UBJSON model file: truncated"),
        (b'{"tree2mat_ir": 1, "n_features": 2}', ".json", "missing field 'trees'"),
        (b"x", ".dat",
         "unknown model file type '.dat', and its contents are none of the formats tree2mat reads; "
         "supported: .pkl, .pickle, .joblib, .skops, .json, .npz, .cbm, .txt, .ubj"),
        (b"x", ".txt", "not a LightGBM model text"),
        (b"x", ".onnx", "this is an ONNX file"),
        (b"PK\x03\x04junk", ".skops", "skops"),
    ],
)
def test_bad_model_files_are_one_line_errors(tmp_path, capsys, content, suffix, needle):
    path = tmp_path / f"model{suffix}"
    path.write_bytes(content)
    out = tmp_path / "out.onnx"
    code = main(["convert", str(path), "-o", str(out)])
    one_line_error(capsys, code, 2, needle)
    assert not out.exists()


def test_missing_files_and_bad_options(models, capsys, tmp_path):
    one_line_error(capsys, main(["convert", str(tmp_path / "nope.pkl"), "-o", str(tmp_path / "o.onnx")]), 2, "no such file")
    one_line_error(capsys, main(["convert", str(models / "a.joblib"), "-o", str(tmp_path / "o.onnx"), "--form", "magic"]), 2, "unknown form 'magic'", "sign")
    one_line_error(capsys, main(["convert", str(models / "a.joblib"), "-o", str(tmp_path / "o.onnx"), "--dtype", "float16"]), 2, "dtype 'float16'")
    one_line_error(capsys, main(["convert", str(models / "a.joblib"), "-o", str(tmp_path / "o.onnx"), "--opset", "7"]), 2, "opset 7")
    one_line_error(capsys, main(["convert", str(models / "a.joblib"), "-o", str(tmp_path / "no" / "o.onnx")]), 2, "no such directory")
    one_line_error(capsys, main(["verify", str(models / "a.joblib"), str(models / "a.onnx"), "--device", "tpu"]), 2, "unknown device")
    conv = ["convert", str(models / "a.joblib"), "-o", str(tmp_path / "o.onnx")]
    one_line_error(capsys, main(conv + ["--form", "sign", "--temperature", "0.1"]), 2, "--temperature applies to the soft forms")
    one_line_error(capsys, main(conv + ["--form", "soft", "--temperature", "0"]), 2, "finite number > 0")
    one_line_error(capsys, main(conv + ["--form", "traverse", "--matmul", "int8"]), 2, "--matmul int8 is not available for the form traverse")
    one_line_error(capsys, main(conv + ["--form", "sign", "--matmul", "int4"]), 2, "--matmul int4")
    one_line_error(capsys, main(conv + ["--max-memory", "plenty"]), 2, "--max-memory 'plenty'")
    one_line_error(capsys, main(conv + ["--form", "sign", "--max-memory", "1K"]), 2, "--form sign needs about", "over --max-memory", "no exact form fits")
    one_line_error(capsys, main(conv + ["--form", "soft", "--leaves"]), 2, "--leaves needs an exact form")
    one_line_error(capsys, main(["inspect", str(models / "a.joblib"), "--tree", "99"]), 2, "out of range", "5 trees")
    one_line_error(capsys, main(["inspect", str(models / "a.joblib"), "--format", "xml"]), 2, "unknown format")
    one_line_error(capsys, main(["convert", str(models / "a.joblib")]), 2, "Missing option")
    one_line_error(capsys, main(["verify", str(models / "a.joblib"), str(models / "a.joblib")]), 2, "not a readable ONNX file")
    assert not (tmp_path / "o.onnx").exists()


def test_convert_summary_names_reduced_precision_and_approximations(models, capsys, tmp_path):
    out = tmp_path / "o.onnx"
    assert main(["convert", str(models / "a.joblib"), "-o", str(out), "--form", "sign", "--matmul", "int8"]) == 0
    assert "form sign (MatMul in int8)" in capsys.readouterr().out
    assert main(["verify", str(models / "a.joblib"), str(out), "--rows", "200"]) == 0
    capsys.readouterr()
    assert main(["convert", str(models / "a.joblib"), "-o", str(out), "--form", "softmax", "--temperature", "0.25"]) == 0
    assert "form softmax at temperature 0.25 (an approximation, not exact)" in capsys.readouterr().out


def test_failed_convert_never_clobbers_an_existing_file(tmp_path, capsys):
    out = tmp_path / "model.onnx"
    out.write_bytes(b"precious")
    bad = tmp_path / "broken.pkl"
    bad.write_bytes(b"junk")
    assert main(["convert", str(bad), "-o", str(out)]) == 2
    assert out.read_bytes() == b"precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.pkl", "model.onnx"]  # no temp files


def test_same_model_gives_identical_bytes(models, tmp_path):
    for name in ("x.onnx", "y.onnx"):
        assert main(["convert", str(models / "a.joblib"), "-o", str(tmp_path / name)]) == 0
    assert (tmp_path / "x.onnx").read_bytes() == (tmp_path / "y.onnx").read_bytes()
    assert (tmp_path / "x.onnx").read_bytes() == (models / "a.onnx").read_bytes()


def test_inspect_summary(models, capsys):
    assert main(["inspect", str(models / "a.joblib")]) == 0
    out = capsys.readouterr().out
    assert "trees: 5" in out and "sign: constants" in out and "features: 30" in out
    assert main(["inspect", str(models / "a.joblib"), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["trees"] == 5 and doc["forms"]["sign"]["exact"] is True


@pytest.mark.slow
def test_console_script_end_to_end(tmp_path):
    """The installed `tree2mat` command, as a user runs it (also `python -m tree2mat`)."""
    X, y = load_iris(return_X_y=True)
    model = HistGradientBoostingClassifier(max_iter=5).fit(X, y)
    joblib.dump(model, tmp_path / "m.joblib")
    env = dict(os.environ)
    run = subprocess.run([str(BIN / "tree2mat"), "convert", str(tmp_path / "m.joblib"), "-o", str(tmp_path / "m.onnx")],
                         capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    assert "wrote" in run.stdout and "label [N] int64" in run.stdout
    run = subprocess.run([sys.executable, "-m", "tree2mat", "verify", str(tmp_path / "m.joblib"), str(tmp_path / "m.onnx")],
                         capture_output=True, text=True, env=env)
    assert run.returncode == 0 and "PASS" in run.stdout, run.stdout + run.stderr
    run = subprocess.run([str(BIN / "tree2mat"), "convert", str(tmp_path / "nope.pkl"), "-o", str(tmp_path / "x.onnx")],
                         capture_output=True, text=True, env=env)
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and "Traceback" not in run.stderr
    run = subprocess.run([str(BIN / "tree2mat"), "--version"], capture_output=True, text=True, env=env)
    assert run.returncode == 0 and run.stdout.startswith("tree2mat ")


def test_convert_json_describes_the_file_written(models, tmp_path, capsys):
    import onnx

    out = tmp_path / "m.onnx"
    assert main(["convert", str(models / "a.joblib"), "-o", str(out), "--form", "bitvector", "--opset", "21", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)  # stdout is the JSON object and nothing else
    onx = onnx.load(str(out))
    meta = {p.key: p.value for p in onx.metadata_props}
    assert info["schema"] == 1 and info["path"] == str(out) and info["bytes"] == out.stat().st_size
    assert info["form"] == meta["tree2mat.form"] == "bitvector" and info["exact"] is True and info["pipeline"] is None
    assert info["opset"] == onx.opset_import[0].version == 21
    assert info["n_features"] == 30 and info["n_trees"] == 5 and info["nodes"] == len(onx.graph.node)
    assert [o["name"] for o in info["outputs"]] == [o.name for o in onx.graph.output] == ["label", "probabilities"]
    assert info["inputs"] == [{"name": onx.graph.input[0].name, "shape": ["N", 30], "dtype": "float32"}]
    assert info["data_file"] is None and info["auto_reason"] is None
    assert main(["convert", str(models / "a.joblib"), "-o", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["auto_reason"].startswith("fastest exact form")


def test_convert_steps_on_stderr(models, tmp_path, capsys, monkeypatch):
    from tree2mat.cli import _progress

    out = str(tmp_path / "m.onnx")
    monkeypatch.setattr(_progress, "PROGRESS_DELAY_S", 0.0)
    assert main(["convert", str(models / "a.joblib"), "-o", out, "--form", "sign"]) == 0
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("convert:")]
    assert lines == [
        "convert: reading the model (step 1 of 4)",
        "convert: building the sign graph of 5 trees (step 2 of 4)",
        "convert: checking the graph (step 3 of 4)",
        f"convert: writing {out} (step 4 of 4)",
    ]
    assert main(["convert", str(models / "a.joblib"), "-o", out, "--no-progress"]) == 0
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(_progress, "PROGRESS_DELAY_S", 3600.0)  # a quick convert prints nothing
    assert main(["convert", str(models / "a.joblib"), "-o", out]) == 0
    assert capsys.readouterr().err == ""


def test_progress_bar_on_a_terminal_keeps_stdout_clean(models, tmp_path, capsys, monkeypatch):
    from tree2mat.cli import _progress

    monkeypatch.setattr(_progress, "PROGRESS_DELAY_S", 0.0)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert main(["convert", str(models / "a.joblib"), "-o", str(tmp_path / "m.onnx"), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["n_trees"] == 5  # the bar went to stderr, not into the JSON


def test_verify_of_synthesized_rows_shows_a_bar_on_a_terminal_only(models, tmp_path, capsys, monkeypatch):
    """Synthesized rows (a big model's take a minute): the bar says what verify is at, the
    reading and then the rows checked; nothing where stderr is no terminal, nor with --json -."""
    from tree2mat.cli import _progress

    onx = str(tmp_path / "m.onnx")
    assert main(["convert", str(models / "a.joblib"), "-o", onx, "--no-progress"]) == 0
    capsys.readouterr()
    shown: list[tuple[float, str]] = []
    monkeypatch.setattr(_progress._Progress, "_bar", lambda self, fraction, text, eta: shown.append((fraction, text)))
    assert main(["verify", str(models / "a.joblib"), onx]) == 0
    assert shown == [] and capsys.readouterr().err == ""  # (not a terminal)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert main(["verify", str(models / "a.joblib"), onx, "--json", "-"]) == 0
    assert shown == [] and json.loads(capsys.readouterr().out)["passed"]
    assert main(["verify", str(models / "a.joblib"), onx]) == 0
    assert shown[0] == (0.0, "reading the model and making the rows") and shown[1] == (0.0, "0 rows"), shown
    assert shown[-1][0] == 1.0 and shown[-1][1].endswith(" rows") and "PASS" in capsys.readouterr().out
    shown.clear()
    assert main(["verify", str(models / "a.joblib"), onx, "--no-progress"]) == 0 and shown == []


@pytest.mark.slow
def test_json_on_stdout_is_all_there_is_when_a_library_prints(tmp_path):
    """`--json -` pipes into a parser even where LightGBM prints while loading a model: a real
    LightGBM v3 text from LightGBM's repository (fixtures/SOURCES.md) whose parameters LightGBM
    4.7 no longer knows; its "Ignoring unrecognized parameter" warnings, printed by native code,
    go to stderr."""
    pytest.importorskip("lightgbm")
    path = str(ROOT / "fixtures" / "corpus" / "lightgbm-2021-04-16-tests-python_package_test-temp_model.txt")
    # LightGBM itself prints the warnings on stdout
    load = subprocess.run([sys.executable, "-c", f"import lightgbm; lightgbm.Booster(model_file={path!r})"], capture_output=True, text=True)
    assert "Ignoring unrecognized parameter" in load.stdout, load.stdout + load.stderr
    env = dict(os.environ)
    run = subprocess.run([str(BIN / "tree2mat"), "convert", path, "-o", str(tmp_path / "m.onnx"), "--json"], capture_output=True, text=True, env=env)
    assert run.returncode == 0 and json.loads(run.stdout)["form"], run.stdout + run.stderr
    run = subprocess.run([str(BIN / "tree2mat"), "verify", path, str(tmp_path / "m.onnx"), "--json", "-", "--rows", "50"],
                         capture_output=True, text=True, env=env)
    assert run.returncode == 0 and json.loads(run.stdout)["passed"] is True, run.stdout + run.stderr
    assert "Ignoring unrecognized parameter" in run.stderr  # (LightGBM did print: it went here)
    run = subprocess.run([str(BIN / "tree2mat"), "inspect", path, "--format", "json"], capture_output=True, text=True, env=env)
    assert run.returncode == 0 and json.loads(run.stdout)["trees"] > 0, run.stdout + run.stderr


@pytest.fixture(scope="module")
def iris_csv(tmp_path_factory):
    """Iris models and .csv files whose first line is the header pandas writes for unnamed
    columns (0,1,2,...): the file is a header and rows, or all rows, as the user says (classes
    2, 3, 4: the header's last cell, 4, is a label too)."""
    pd = pytest.importorskip("pandas")
    from sklearn.tree import DecisionTreeClassifier

    d = tmp_path_factory.mktemp("iris_csv")
    X, y = load_iris(return_X_y=True)
    y = y + 2
    joblib.dump(RandomForestClassifier(n_estimators=5, max_depth=3, random_state=0).fit(X, y), d / "rf.joblib")
    joblib.dump(DecisionTreeClassifier(max_depth=3, random_state=0).fit(X, y), d / "tree.joblib")
    assert main(["convert", str(d / "rf.joblib"), "-o", str(d / "rf.onnx")]) == 0
    pd.DataFrame(X[::5]).to_csv(d / "rows.csv", index=False)
    pd.DataFrame(np.column_stack([X[::5], y[::5]])).to_csv(d / "labelled.csv", index=False)
    return d


@pytest.mark.parametrize("flag, rows", [([], None), (["--header"], 30), (["--no-header"], 31)])
def test_header_options_reach_every_command_that_reads_data(iris_csv, capsys, tmp_path, flag, rows):
    """verify, bench, attend and learn: the first line 0,1,2,3 is refused unless --header (30
    rows, the attention fitted as on pandas' rows) or --no-header (31) says what it is."""
    pd = pytest.importorskip("pandas")
    from tree2mat import attention

    d = iris_csv
    data, labelled = ["--data", str(d / "rows.csv"), *flag], ["--data", str(d / "labelled.csv"), "--target", "4", *flag]
    commands = {
        "verify": ["verify", str(d / "rf.joblib"), str(d / "rf.onnx"), *data, "--json", "-"],
        "bench": ["bench", str(d / "rf.joblib"), *data, "--batch", "1", "--repeat", "1", "--no-peers", "--json", "-"],
        "attend": ["attend", str(d / "rf.joblib"), *labelled, "-o", str(tmp_path / "abrf.json"), "--epsilon", "0.5", "--tau", "2", "--folds", "2", "--json"],
        "learn": ["learn", str(d / "tree.joblib"), *labelled, "-o", str(tmp_path / "tuned.json"), "--epochs", "1", "--json", "-"],
    }
    for name, args in commands.items():
        code = main(args)
        if rows is None:
            one_line_error(capsys, code, 2, "cannot tell whether the first line is a header or a row of data", "give --header or --no-header")
            continue
        assert code == 0, (name, capsys.readouterr().err)
        out = json.loads(capsys.readouterr().out)
        counted = out["rows"] + out.get("held_out_rows", 0) if name == "learn" else out["rows"]
        assert counted == rows, (name, out["rows"])
    if rows is not None:  # the forest attended on the rows pandas reads, told the same
        table = pd.read_csv(d / "labelled.csv", header=0 if flag == ["--header"] else None).to_numpy(np.float64)
        expected = attention.fit(d / "rf.joblib", table[:, :4], table[:, 4], epsilon=0.5, tau=2.0)
        np.testing.assert_allclose(attention.load(tmp_path / "abrf.json").weights, expected.weights, rtol=1e-9, atol=1e-12)


def test_header_option_without_a_csv_is_refused(iris_csv, capsys, tmp_path):
    np.save(tmp_path / "x.npy", load_iris(return_X_y=True)[0][:5])
    d = iris_csv
    code = main(["verify", str(d / "rf.joblib"), str(d / "rf.onnx"), "--header"])
    one_line_error(capsys, code, 2, "--header says whether the first line of a .csv --data file is a header, and no --data is given")
    code = main(["bench", str(d / "rf.joblib"), "--data", str(tmp_path / "x.npy"), "--no-header", "--no-peers"])
    one_line_error(capsys, code, 2, "--no-header says", "x.npy is no .csv file")

"""No command writes its output over one of its inputs, or two of its outputs to one file: every
output option of every command, given an input's path, a symbolic link to it or a hard link to
it, is refused in one line with exit 2 before any work, and the input is left byte for byte as it
was."""

from __future__ import annotations

import os
import shutil

import joblib
import numpy as np
import pytest
from sklearn.datasets import load_iris
from sklearn.ensemble import RandomForestClassifier

from tree2mat.cli import main

from conftest import ROOT

X, Y = load_iris(return_X_y=True)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("inputs")
    shutil.copyfile(ROOT / "fixtures" / "paper_tree.json", d / "m.json")
    assert main(["convert", str(d / "m.json"), "-o", str(d / "m.onnx")]) == 0
    joblib.dump(RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0).fit(X, Y), d / "rf.joblib")
    np.savez(d / "rows.npz", X=X, y=Y)
    np.save(d / "X4.npy", np.random.default_rng(0).normal(size=(20, 4)))
    np.save(d / "y.npy", Y)
    return d


#: (command line with {input} where the clobbered input goes, the input's file name, the output
#: flag): every output option against every input the command reads.
CASES = [
    (["convert", "{m.json}", "-o", "{out}"], "m.json"),
    (["verify", "{m.json}", "{m.onnx}", "--json", "{out}"], "m.json"),
    (["verify", "{m.json}", "{m.onnx}", "--json", "{out}"], "m.onnx"),
    (["verify", "{m.json}", "{m.onnx}", "--data", "{X4.npy}", "--json", "{out}"], "X4.npy"),
    (["inspect", "{m.json}", "-o", "{out}"], "m.json"),
    (["inspect", "{m.json}", "--tree", "0", "--png", "{out}"], "m.json"),
    (["bench", "{m.json}", "--json", "{out}", "--no-peers"], "m.json"),
    (["bench", "{m.json}", "--data", "{X4.npy}", "--json", "{out}", "--no-peers"], "X4.npy"),
    (["bench", "{m.json}", "--plot", "{out}", "--no-peers"], "m.json"),
    (["attend", "{rf.joblib}", "--data", "{rows.npz}", "-o", "{out}"], "rf.joblib"),
    (["attend", "{rf.joblib}", "--data", "{rows.npz}", "-o", "{out}"], "rows.npz"),
    (["learn", "{rf.joblib}", "--data", "{rows.npz}", "-o", "{out}"], "rf.joblib"),
    (["learn", "{rf.joblib}", "--data", "{rows.npz}", "-o", "{out}"], "rows.npz"),
    (["learn", "{rf.joblib}", "--data", "{rows.npz}", "-o", "{tuned.json}", "--json", "{out}"], "rows.npz"),
    (["learn", "{rf.joblib}", "--data", "{X.npy}", "--target", "{y.npy}", "-o", "{out}"], "y.npy"),
]


def _line(args, d, out):
    """The command line: ``{name}`` as that input's path, ``{out}`` as ``out``."""
    return [str(out) if a == "{out}" else str(d / a[1:-1]) if a.startswith("{") else a for a in args]


def _picture(args) -> bool:
    return any(a in ("--png", "--plot") for a in args)


#: Each case by each way of naming the input; a picture option takes only *.png names, so only the
#: links can name an input there.
WAYS = [
    pytest.param(args, victim, how, id=f"{args[0]}-{victim}-{i}-{how}")
    for i, (args, victim) in enumerate(CASES)
    for how in ("same path", "relative path", "symbolic link", "hard link")
    if not (_picture(args) and how in ("same path", "relative path"))
]


@pytest.mark.parametrize("args, victim, how", WAYS)
def test_an_output_naming_an_input_is_refused(files, tmp_path, capsys, monkeypatch, args, victim, how):
    if victim == "X.npy" or "{X.npy}" in args:
        np.save(files / "X.npy", X)
    target = files / victim
    before = target.read_bytes()
    suffix = ".png" if _picture(args) else target.suffix
    out = target
    if how == "relative path":
        monkeypatch.chdir(files.parent)
        out = os.path.relpath(target)
    elif how == "symbolic link":
        out = tmp_path / f"link{suffix}"
        out.symlink_to(target)
    elif how == "hard link":
        out = tmp_path / f"hard{suffix}"
        os.link(target, out)
    capsys.readouterr()
    code = main(_line(args, files, out))
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("tree2mat: error:") and "\n" not in err, err
    assert "never writes over its input" in err, err
    assert target.read_bytes() == before


def test_two_outputs_of_one_command_are_refused(files, tmp_path, capsys):
    report = tmp_path / "both.png"
    code = main(["bench", str(files / "m.json"), "--json", str(report), "--plot", str(report), "--no-peers"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "are one file" in err and "\n" not in err, err
    assert not report.exists()


def test_an_unrelated_output_is_written(files, tmp_path):
    """(The check compares files, not names: another file of the same name elsewhere is fine.)"""
    (tmp_path / "m.json").write_text("old")
    assert main(["inspect", str(files / "m.json"), "-o", str(tmp_path / "m.json")]) == 0
    assert (tmp_path / "m.json").read_text().startswith("source")


def test_a_graph_s_data_file_is_an_input_whatever_its_name(files, tmp_path, capsys):
    """A graph saved with its constants in a file of any name (ONNX external data, by another
    tool): verify's report may not be written over that file."""
    import onnx

    graph = onnx.load(str(files / "m.onnx"))
    onnx.save(graph, str(tmp_path / "g.onnx"), save_as_external_data=True, all_tensors_to_one_file=True, location="w.bin", size_threshold=0)
    before = (tmp_path / "w.bin").read_bytes()
    code = main(["verify", str(files / "m.json"), str(tmp_path / "g.onnx"), "--json", str(tmp_path / "w.bin")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "its data file w.bin" in err and "\n" not in err, err
    assert (tmp_path / "w.bin").read_bytes() == before

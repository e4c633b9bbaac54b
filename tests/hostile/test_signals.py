"""No temporary file survives Ctrl-C or SIGTERM at any point of a write, and a name the file
system takes is written whatever its length: the signal is sent at each step of a write (the
temporary file made, written, renamed into place), and at random moments of a whole command in a
process of its own; the folder then holds the old file or the new one, whole, and nothing else."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import joblib
import numpy as np
import onnx
import pytest
from sklearn.datasets import make_classification
from sklearn.ensemble import RandomForestClassifier

import tree2mat._files as files_module
from tree2mat._files import atomic_write_files
from tree2mat.cli import main

from conftest import ROOT

EXAMPLES = int(os.environ.get("TREE2MAT_FUZZ_EXAMPLES", "40"))
FIXTURE = ROOT / "fixtures" / "paper_tree.json"
SIGNALS = {"SIGINT": (signal.SIGINT, 130, "interrupted"), "SIGTERM": (signal.SIGTERM, 143, "terminated")}


def _send(sig):
    os.kill(os.getpid(), sig)


def _at_step(monkeypatch, step, sig):
    """Send ``sig`` to this process at ``step`` of an atomic write."""
    real_open, real_chmod, real_replace = os.open, os.chmod, os.replace

    def made(path, *args, **kwargs):
        fd = real_open(path, *args, **kwargs)
        if str(path).endswith(".tmp"):
            _send(sig)  # (as the temporary file exists, before its descriptor is returned)
        return fd

    def chmod(*args, **kwargs):
        _send(sig)
        return real_chmod(*args, **kwargs)

    def replace(*args, **kwargs):
        if step == "before rename":
            _send(sig)
        real_replace(*args, **kwargs)
        if step == "after rename":
            _send(sig)

    if step == "made":
        monkeypatch.setattr(files_module.os, "open", made)
    elif step == "written":
        monkeypatch.setattr(files_module.os, "chmod", chmod)
    else:
        monkeypatch.setattr(files_module.os, "replace", replace)


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="POSIX signals")
@pytest.mark.parametrize("name", sorted(SIGNALS))
@pytest.mark.parametrize("step", ["made", "written", "before rename", "after rename"])
def test_a_signal_at_each_step_of_a_write_leaves_no_temporary_file(tmp_path, monkeypatch, capsys, step, name):
    sig, code, word = SIGNALS[name]
    out = tmp_path / "out.onnx"
    out.write_bytes(b"old")
    _at_step(monkeypatch, step, sig)
    assert main(["convert", str(FIXTURE), "-o", str(out)]) == code
    monkeypatch.undo()
    assert capsys.readouterr().err.strip().endswith(f"tree2mat: {word}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.onnx"]
    if step == "after rename":
        onnx.checker.check_model(onnx.load(str(out)))  # the new graph, whole
    else:
        assert out.read_bytes() == b"old"
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # (the command's handler is gone with it)


@pytest.mark.parametrize("name", sorted(SIGNALS))
def test_a_signal_while_companion_files_are_written_leaves_nothing(tmp_path, name):
    """The external-data writer (a graph past 2 GiB) cleans its temporary folder the same way."""
    sig = SIGNALS[name][0]
    previous = signal.signal(signal.SIGTERM, lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))

    def write(tmp):
        tmp.write_bytes(b"graph")
        tmp.with_name("g.onnx.data").write_bytes(b"data")
        _send(sig)

    try:
        with pytest.raises(KeyboardInterrupt):
            atomic_write_files(tmp_path / "g.onnx", write, ("g.onnx.data",))
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["a" * 250 + ".onnx", "é" * 124 + ".onnx", "x" * 255])
def test_the_longest_names_are_written(tmp_path, name):
    assert len(name.encode()) <= 255
    assert main(["convert", str(FIXTURE), "-o", str(tmp_path / name)]) == 0
    assert [p.name for p in tmp_path.iterdir()] == [name]


@pytest.mark.parametrize("flag", ["-o", "--json"])
def test_a_name_the_file_system_cannot_take_is_refused_before_any_work(tmp_path, capsys, flag):
    name = tmp_path / ("é" * 128 + ".onnx")  # (261 bytes)
    args = ["convert", str(FIXTURE), "-o", str(name)] if flag == "-o" else ["verify", str(FIXTURE), str(FIXTURE), "--json", str(name)]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "a file name of 261 bytes; the file system takes 255 at most" in err and "\n" not in err, err
    assert list(tmp_path.iterdir()) == []


def test_companions_placed_before_an_interruption_are_removed(tmp_path):
    """A graph over 2 GiB moves its data file into place before the graph itself: interrupted in
    between, the data file (new, referred to by nothing) goes too; an old one of the same name,
    which an old graph may refer to, stays."""
    real_replace = os.replace

    def replace(src, dst):
        real_replace(src, dst)
        if str(dst).endswith(".data"):
            raise KeyboardInterrupt

    def write(tmp):
        tmp.write_bytes(b"graph")
        tmp.with_name("g.onnx.data").write_bytes(b"data")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(files_module.os, "replace", replace)
        with pytest.raises(KeyboardInterrupt):
            atomic_write_files(tmp_path / "g.onnx", write, ("g.onnx.data",))
        assert list(tmp_path.iterdir()) == []
        (tmp_path / "g.onnx.data").write_bytes(b"old data")
        with pytest.raises(KeyboardInterrupt):
            atomic_write_files(tmp_path / "g.onnx", write, ("g.onnx.data",))
    assert [p.name for p in tmp_path.iterdir()] == ["g.onnx.data"]


@pytest.fixture(scope="module")
def slow_model(tmp_path_factory):
    """A forest whose convert takes a second or two (reading, building, checking, writing)."""
    d = tmp_path_factory.mktemp("slow")
    X, y = make_classification(2000, 20, random_state=0)
    joblib.dump(RandomForestClassifier(n_estimators=150, random_state=0).fit(X, y), d / "rf.joblib")
    return d / "rf.joblib"


#: Moments (seconds after the start) and signals of the whole-command runs: seeded, so that each
#: run sends the same; where in the command each lands varies with the machine.
MOMENTS = [(float(d), sorted(SIGNALS)[i % 2]) for i, d in enumerate(np.random.default_rng(0).uniform(1.0, 6.0, max(4, min(EXAMPLES // 20, 250))))]


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("delay, name", MOMENTS, ids=[f"{d:.2f}s-{n}" for d, n in MOMENTS])
def test_fuzz_a_signal_at_any_moment_of_a_command(slow_model, tmp_path, delay, name):
    sig, code, word = SIGNALS[name]
    out = tmp_path / "out.onnx"
    proc = subprocess.Popen([sys.executable, "-m", "tree2mat", "convert", str(slow_model), "-o", str(out), "--form", "sign"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(delay)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=300)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left in ([], ["out.onnx"]), (left, err)  # never a temporary file
    if left:  # written whole before the signal came (the command may still report it)
        onnx.checker.check_model(onnx.load(str(out)))
    # 0: done first; -sig: before the command's handlers (while Python starts, or as it exits)
    assert proc.returncode in (0, code, -sig), (proc.returncode, err)
    assert proc.returncode != code or err.strip().endswith(f"tree2mat: {word}"), err
    # (Python's own traceback only for a Ctrl-C while it starts, before any of the command's work)
    working = ("tree2mat/convert", "tree2mat/frontends", "tree2mat/forms", "tree2mat/_files", "tree2mat/onnx_io")
    assert "Traceback" not in err or (proc.returncode == -sig and not any(w in err for w in working)), err

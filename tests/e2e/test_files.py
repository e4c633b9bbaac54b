"""Output files under stress: converts in parallel processes into one folder, Ctrl-C at any
moment of a convert, an interrupted write; and the same bytes from separate processes. Whatever
happens, the target is either the old file or a complete new one, and no temporary file stays."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import joblib
import numpy as np
import onnx
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.ensemble import RandomForestClassifier

import tree2mat
from tree2mat import _files
from tree2mat.errors import Tree2MatError

X, Y = load_breast_cancer(return_X_y=True)
CLI = [sys.executable, "-m", "tree2mat"]


@pytest.fixture(scope="module")
def forests(tmp_path_factory):
    d = tmp_path_factory.mktemp("forests")
    for seed in range(3):
        joblib.dump(RandomForestClassifier(20 + 10 * seed, random_state=seed).fit(X, Y), d / f"rf{seed}.joblib")
    # Large enough that its write takes a while (for the interrupt test).
    rows = np.tile(X, (4, 1)) + np.random.default_rng(0).normal(0, 1e-3, (4 * len(X), X.shape[1]))
    joblib.dump(RandomForestClassifier(300, min_samples_leaf=1, random_state=0).fit(rows, np.tile(Y, 4)), d / "big.joblib")
    return d


def _temporaries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".") or p.suffix == ".tmp")


@pytest.mark.slow
def test_parallel_converts_into_one_folder(forests, tmp_path):
    """Six processes at once: three models to their own files and three to one shared file.
    Each own file is its model's graph; the shared one is one complete graph of the three."""
    procs = []
    for seed in range(3):
        model = forests / f"rf{seed}.joblib"
        for out in (tmp_path / f"own{seed}.onnx", tmp_path / "shared.onnx"):
            procs.append(subprocess.Popen([*CLI, "convert", str(model), "-o", str(out), "--form", "sign"],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stderr.read()
    for seed in range(3):
        expected = tree2mat.convert(forests / f"rf{seed}.joblib", "sign").SerializeToString()
        assert (tmp_path / f"own{seed}.onnx").read_bytes() == expected
    shared = (tmp_path / "shared.onnx").read_bytes()
    assert any(shared == tree2mat.convert(forests / f"rf{s}.joblib", "sign").SerializeToString() for s in range(3))
    assert _temporaries(tmp_path) == []


def test_ctrl_c_while_the_command_line_loads_its_libraries_is_one_line():
    """Ctrl-C while the command line imports numpy, typer and the rest (the first second or
    more; sent here from an import hook the moment typer's import starts): the one line and exit
    130, as in a command, not Python's KeyboardInterrupt traceback."""
    code = (
        "import os, signal, sys\n"
        "class Hook:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'typer':\n"
        "            os.kill(os.getpid(), signal.SIGINT)\n"
        "sys.meta_path.insert(0, Hook())\n"
        "sys.argv = ['tree2mat', '--version']\n"
        "from tree2mat.cli import run\n"
        "run()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr, done.stdout) == (130, "tree2mat: interrupted\n", "")


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.0, 1.0, 2.0, 3.0])
def test_ctrl_c_at_any_moment_leaves_the_old_file_or_a_complete_new_one(forests, tmp_path, delay):
    out = tmp_path / "model.onnx"
    out.write_bytes(b"old")
    proc = subprocess.Popen([*CLI, "convert", str(forests / "big.joblib"), "-o", str(out), "--form", "traverse"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    code = proc.wait(timeout=300)
    err = proc.stderr.read().decode()
    # (-2: before Python set its handler up; 1 with Python's own "Fatal Python error: init_...":
    # the interrupt came while the interpreter itself was starting, before any of tree2mat ran)
    starting = code == 1 and err.startswith("Fatal Python error: init_")
    assert code in (0, 130, -signal.SIGINT) or starting, err
    assert "Traceback" not in err or starting
    if code == 130:
        assert err.strip().endswith("tree2mat: interrupted")
    data = out.read_bytes()
    assert data == b"old" or not starting
    if data != b"old":  # replaced: then by the whole graph
        assert tree2mat.verify(forests / "big.joblib", out, rows=50).passed
    assert _temporaries(tmp_path) == []


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, OSError(28, "No space left on device")])
def test_a_write_that_fails_midway_leaves_nothing(tmp_path, monkeypatch, interrupt):
    out = tmp_path / "model.onnx"
    out.write_bytes(b"old")
    real_fdopen = os.fdopen

    class Breaks:
        def __init__(self, fh):
            self.fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

        def write(self, data):
            self.fh.write(data[: len(data) // 2])
            raise interrupt

    monkeypatch.setattr(_files.os, "fdopen", lambda fd, mode: Breaks(real_fdopen(fd, mode)))
    with pytest.raises(KeyboardInterrupt if interrupt is KeyboardInterrupt else Tree2MatError):
        _files.atomic_write(out, b"x" * 10_000)
    assert out.read_bytes() == b"old"
    assert _temporaries(tmp_path) == []


@pytest.mark.slow
@pytest.mark.parametrize("form", ["traverse", "sign", "bitvector", "soft"])
def test_separate_processes_write_the_same_bytes(forests, tmp_path, form):
    """Byte-deterministic output: two processes with different hash seeds, and this one."""
    model = forests / "rf1.joblib"
    for k, seed in enumerate(("1", "2")):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        subprocess.run([*CLI, "convert", str(model), "-o", str(tmp_path / f"{k}.onnx"), "--form", form],
                       check=True, env=env, stdout=subprocess.DEVNULL)
    first = (tmp_path / "0.onnx").read_bytes()
    assert first == (tmp_path / "1.onnx").read_bytes()
    assert first == tree2mat.convert(model, form).SerializeToString()
    onnx.checker.check_model(onnx.load_from_string(first))


def test_written_files_get_the_usual_mode(tmp_path):
    onx = tree2mat.convert(RandomForestClassifier(n_estimators=2, max_depth=2, random_state=0).fit(*load_breast_cancer(return_X_y=True)))
    umask = os.umask(0o022)
    try:
        tree2mat.save(onx, tmp_path / "m.onnx")
    finally:
        os.umask(umask)
    assert stat.S_IMODE((tmp_path / "m.onnx").stat().st_mode) == 0o644

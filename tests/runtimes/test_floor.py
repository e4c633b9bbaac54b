"""The oldest onnxruntime tree2mat's default graph is for (README: 1.16): the default graph
(opset 19, IR 9) of each exact form on onnxruntime (treeensemble's ai.onnx.ml 3 node included) of
the runtime matrix's five models, verified on onnxruntime
1.16.3 against the library's own predictions, routing included, as every runtime of the matrix is.

onnxruntime 1.16 needs numpy < 2, so it lives in a venv of its own, which `make test` builds
(build/ort-floor; TREE2MAT_ORT_FLOOR names another python); verify runs each graph there through
a test-only runtime that hands it the rows and takes the outputs back as files. Without that venv
(pytest run by hand) the tests skip, saying how to build it.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import onnx
import pytest

import tree2mat
from benchmarks._cases import MODELS, fitted
from tree2mat.forms import DEFAULT_OPSET
from tree2mat.runtimes import RUNTIMES, Runtime

from conftest import ROOT
from test_runtimes import EXACT

pytestmark = pytest.mark.slow
FLOOR_PYTHON = Path(os.environ.get("TREE2MAT_ORT_FLOOR") or ROOT / "build" / "ort-floor" / "bin" / "python")
FLOOR = "onnxruntime-floor"
#: Run in the floor's venv: the graph on the rows, each output to an .npy file of its name.
RUN = """
import sys, numpy as np, onnxruntime as ort
graph, rows, out, *names = sys.argv[1:]
session = ort.InferenceSession(graph, providers=["CPUExecutionProvider"])
for name, value in zip(names, session.run(names, {session.get_inputs()[0].name: np.load(rows)})):
    np.save(f"{out}/{name}.npy", value)
"""


def _version() -> str | None:
    if not FLOOR_PYTHON.exists():
        return None
    done = subprocess.run([str(FLOOR_PYTHON), "-c", "import onnxruntime; print(onnxruntime.__version__)"], capture_output=True, text=True, check=False)
    return done.stdout.strip() or None


def _load(model: onnx.ModelProto, outputs, device: str = "cpu"):
    folder = Path(tempfile.mkdtemp(prefix="floor-"))
    path = folder / "graph.onnx"
    onnx.save(model, str(path))

    def run(X: np.ndarray) -> dict[str, np.ndarray]:
        np.save(folder / "rows.npy", X)
        subprocess.run([str(FLOOR_PYTHON), "-c", RUN, str(path), str(folder / "rows.npy"), str(folder), *outputs],
                       check=True, capture_output=True, timeout=600)
        return {name: np.load(folder / f"{name}.npy") for name in outputs}

    return run


@pytest.fixture(scope="module")
def floor():
    version = _version()
    if version is None:
        where = FLOOR_PYTHON.relative_to(ROOT) if FLOOR_PYTHON.is_relative_to(ROOT) else FLOOR_PYTHON
        pytest.skip(f"no onnxruntime 1.16 venv at {where} (make test builds it)")
    assert version == "1.16.3", version
    patch = pytest.MonkeyPatch()
    patch.setitem(RUNTIMES, FLOOR, Runtime(FLOOR, "make test builds it", "onnxruntime 1.16.3 (CPU), in its own venv", lambda: version, _load))
    yield version
    patch.undo()


@pytest.mark.parametrize("form", [form for form in EXACT if "onnxruntime" in tree2mat.FORMS[form].proven_on])
@pytest.mark.parametrize("name", list(MODELS))
def test_default_graph_verifies_on_the_oldest_onnxruntime(floor, name, form):
    onx = tree2mat.convert(fitted(name), form)
    assert (onx.opset_import[0].version, onx.ir_version) == (DEFAULT_OPSET, 9)
    report = tree2mat.verify(fitted(name), onx, runtime=FLOOR, rows=200)
    assert report.passed and report.runtime == f"{FLOOR} 1.16.3", report.summary()
    assert any(o.name == "routing" and o.compared > 0 for o in report.outputs)


def test_the_pinned_onnxruntime_s_newest_opset_does_not_load_there(floor, tmp_path):
    """Why the default is not the newest opset: onnxruntime 1.16 refuses its IR version at load."""
    onx = tree2mat.convert(fitted("RandomForestClassifier"), "traverse", opset=21)
    path = tmp_path / "g.onnx"
    onnx.save(onx, str(path))
    done = subprocess.run([str(FLOOR_PYTHON), "-c", RUN, str(path), str(path), str(tmp_path)], capture_output=True, text=True, check=False)
    assert done.returncode != 0 and "Unsupported model IR version: 10, max supported IR version: 9" in done.stderr, done.stderr[-500:]


def test_auto_s_default_graph_verifies_there_too(floor):
    name = "LGBMClassifier 3 classes, NaN"
    report = tree2mat.verify(fitted(name), tree2mat.convert(fitted(name)), runtime=FLOOR, rows=200)
    assert report.passed, report.summary()

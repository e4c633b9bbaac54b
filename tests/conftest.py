"""Shared test helpers: one way to run a graph, one way to compare (``tree2mat.verify.compare``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import tree2mat
from tree2mat.forms._graph import all_nodes
from tree2mat.verify import DEFAULT_RTOL, compare, default_atol

#: Every exact graph variant: each exact form, with each element type of its path MatMul.
#: The repository (tests/ is one level down, whatever folder a test module is in).
ROOT = Path(__file__).resolve().parent.parent

EXACT_VARIANTS = [(name, mm) for name, spec in tree2mat.FORMS.items() if spec.exact for mm in spec.matmul]


def with_holes(X: np.ndarray, rng: np.random.Generator, zeros: bool = False) -> np.ndarray:
    """A copy of ``X`` with 5 % of the cells NaN (and, with ``zeros``, 5 % more set to 0)."""
    X = X.copy()
    X[rng.random(X.shape) < 0.05] = np.nan
    if zeros:
        X[rng.random(X.shape) < 0.05] = 0.0
    return X


def run_onnx(model: onnx.ModelProto, X: np.ndarray) -> dict[str, np.ndarray]:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    outs = sess.run(None, {sess.get_inputs()[0].name: X})
    return dict(zip([o.name for o in sess.get_outputs()], outs))


def assert_standard_graph(model: onnx.ModelProto) -> None:
    """Every emitted graph: full checker, standard domain only, no ai.onnx.ml, no unused
    initializer (onnxruntime warns about each)."""
    onnx.checker.check_model(model, full_check=True)
    used = {i for n in all_nodes(model.graph) for i in n.input}
    unused = [t.name for t in model.graph.initializer if t.name not in used]
    assert not unused, f"unused initializers: {unused}"
    assert {n.domain for n in all_nodes(model.graph)} <= {"", "ai.onnx"}
    assert all(o.domain in ("", "ai.onnx") for o in model.opset_import)


def assert_matches(got: dict[str, np.ndarray], expected: dict[str, np.ndarray], X: np.ndarray, ens, atol=None, rtol=DEFAULT_RTOL) -> None:
    """Each expected output present and equal (labels, leaves exactly; values within tolerance)."""
    # (a float32 input: the default graph, float32 arithmetic; float64: --dtype float64)
    atol = default_atol(ens, np.dtype(X.dtype).name) if atol is None else atol
    for name, exp in expected.items():
        assert name in got, f"output {name!r} missing; graph has {sorted(got)}"
        rep = compare(name, "cpu", got[name], np.asarray(exp), X, atol, rtol, exact=name in ("label", "leaves"))
        assert rep.passed, f"{name}: {rep.mismatches} mismatches, {rep.problem} first: {rep.first_mismatches[:2]}"


@pytest.fixture(scope="session")
def has_cuda() -> bool:
    return "CUDAExecutionProvider" in ort.get_available_providers()


@pytest.fixture
def without_matplotlib(monkeypatch) -> None:
    """Every import of matplotlib fails, as where the plot extra is not installed."""
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)

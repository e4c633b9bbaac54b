"""What may stay on the CPU when a graph runs on onnxruntime's CUDA provider
(``tree2mat.runtimes.shape_nodes``): shape arithmetic alone. On an H200 (onnxruntime-gpu 1.31.1,
2026-11-26) the provider left to the CPU, at every opset from 18 to 26, only Concat and Slice
(sign, bitvector, hierarchical, oblivious) and LessOrEqual (traverse) on a few int64s, and
``session.disable_cpu_ep_fallback`` refused the sessions for them. These tests run here, on the
CPU: a node called shape arithmetic must never have an output that grows with the rows, and
the nodes that do must be named by ``cuda_cpu_nodes`` if they run on the CPU."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from sklearn.datasets import load_breast_cancer

import tree2mat
from tree2mat.forms.traverse import FLAT_ELEMENTS
from tree2mat.runtimes import cuda_cpu_nodes, shape_nodes
from tree2mat.verify import synthesize

X, Y = load_breast_cancer(return_X_y=True)
EXACT = [name for name, spec in tree2mat.FORMS.items() if spec.exact]


def _outputs_by_node(onx, batches) -> dict[str, list]:
    """node name -> its output shapes in each batch's run (onnxruntime's profile, CPU)."""
    opts = ort.SessionOptions()
    opts.enable_profiling = True
    with tempfile.TemporaryDirectory() as tmp:
        opts.profile_file_prefix = str(Path(tmp) / "p")
        sess = ort.InferenceSession(onx.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        for batch in batches:
            sess.run(None, {"input": batch})
        events = json.loads(Path(sess.end_profiling()).read_text())
    out: dict[str, list] = {}
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            shapes = [list(d.values())[0] for d in e["args"].get("output_type_shape", [])]
            out.setdefault(e["name"].removesuffix("_kernel_time"), []).append((e["args"]["op_name"], shapes))
    return out


@pytest.fixture(scope="module")
def models():
    import lightgbm
    import xgboost

    X_nan = X.copy()
    X_nan[::7, 3] = np.nan
    return {
        "xgboost": xgboost.XGBClassifier(n_estimators=12, max_depth=4).fit(X_nan, Y),
        "lightgbm": lightgbm.LGBMClassifier(n_estimators=12, verbose=-1).fit(X_nan, Y),
    }


@pytest.mark.parametrize("form", EXACT)
@pytest.mark.parametrize("library", ["xgboost", "lightgbm"])
def test_shape_nodes_never_grow_with_the_rows(models, library, form):
    model = models[library]
    onx = tree2mat.convert(model, form=form)
    rows, _ = synthesize(tree2mat.load(model), FLAT_ELEMENTS + 1)
    one = _outputs_by_node(onx, [rows[:1]])
    many = _outputs_by_node(onx, [rows])
    shapes = shape_nodes(onx.graph)
    ran = set(one) & set(many)
    growing = {n for n in ran if any(a != b for (_, a), (_, b) in zip(one[n], many[n]))}
    if form in ("sign", "traverse"):  # (the H200 left some of theirs to the CPU)
        assert ran & shapes, "no shape arithmetic found: the test reads nothing"
    assert not growing & shapes, f"called shape arithmetic, yet its output grows with the rows: {sorted(growing & shapes)}"
    assert growing, "no node grows with the rows: the profile was not read"
    # What the H200 left to the CPU (Concat, Slice, LessOrEqual) is shape arithmetic wherever it
    # does not grow with the rows.
    for name in ran - growing:
        if one[name][0][0] in ("Concat", "Slice", "LessOrEqual") and all(np.prod(s) <= 4 for _, ss in many[name] for s in ss):
            assert name in shapes, f"{one[name][0][0]} {name} ({many[name][0][1]}) is not counted as shape arithmetic"


def test_cuda_cpu_nodes_names_the_row_nodes_left_to_the_cpu(models):
    """Without the CUDA provider (this machine) onnxruntime runs everything on the CPU: every
    node that touches rows is named, and no shape arithmetic."""
    onx = tree2mat.convert(models["xgboost"], form="traverse")
    rows, _ = synthesize(tree2mat.load(models["xgboost"]), FLAT_ELEMENTS + 1)
    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("this onnxruntime has the CUDA provider: test_cuda.py checks the placement there")
    with pytest.warns(UserWarning, match="CUDAExecutionProvider"):
        left = cuda_cpu_nodes(onx, rows)
    names = {entry.split(" ", 1)[1] for entry in left}
    shapes = shape_nodes(onx.graph)
    assert not names & shapes
    ops = {entry.split(" ", 1)[0] for entry in left}
    assert {"GatherElements", "Greater", "IsNaN"} <= ops
    assert "Shape" not in ops and "n_flat_batch" not in names


def test_int8_products_are_refused_on_cuda_before_a_session(models):
    """``--matmul int8``'s MatMulInteger fails on onnxruntime's CUDA provider at some batch sizes
    (one row always; an H200, onnxruntime-gpu 1.31.1): a session on cuda is refused before it is
    made, on any machine, and the float32 graph of the same model is not."""
    from tree2mat.errors import OptionError
    from tree2mat.runtimes import check_cuda_operators, ort_session

    for form in ("sign", "bitvector"):
        int8 = tree2mat.convert(models["lightgbm"], form=form, matmul="int8")
        assert "MatMulInteger" in {n.op_type for n in int8.graph.node}
        with pytest.raises(OptionError, match=r"--device cuda: the graph's int8 products \(--matmul int8\) fail .* --matmul float32 or float16"):
            ort_session(int8, ort.SessionOptions(), "cuda")
        check_cuda_operators(tree2mat.convert(models["lightgbm"], form=form))


def test_the_onnxruntime_version_is_the_module_s(monkeypatch):
    """onnxruntime-gpu installs the module ``onnxruntime`` under another distribution's name: the
    version verify reports is the module's, with no distribution called onnxruntime."""
    import importlib.metadata

    from tree2mat.runtimes import RUNTIMES

    real = importlib.metadata.version

    def version(dist):
        if dist == "onnxruntime":
            raise importlib.metadata.PackageNotFoundError(dist)
        return real(dist)

    monkeypatch.setattr(importlib.metadata, "version", version)
    assert RUNTIMES["onnxruntime"].check() == ort.__version__

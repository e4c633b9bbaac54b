"""The graph contract: names, dtypes and shapes; opsets; N = 1 and N = 100 000; float64 graphs;
the size guard."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris
from sklearn.ensemble import (
    GradientBoostingClassifier,
    HistGradientBoostingClassifier,
    HistGradientBoostingRegressor,
    IsolationForest,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.tree import DecisionTreeRegressor

import tree2mat
from tree2mat.errors import OptionError, UnsupportedModelError
from tree2mat.forms import DEFAULT_OPSET, MIN_OPSET, NEWEST_OPSET, _stack
from tree2mat.verify import run_graph, synthesize

from conftest import assert_matches, assert_standard_graph, run_onnx

XB, YB = load_breast_cancer(return_X_y=True)
XI, YI = load_iris(return_X_y=True)
XD, YD = load_diabetes(return_X_y=True)


def outputs(onx: onnx.ModelProto) -> dict[str, tuple[int, list]]:
    return {
        o.name: (o.type.tensor_type.elem_type, [d.dim_param or d.dim_value for d in o.type.tensor_type.shape.dim])
        for o in onx.graph.output
    }


def test_output_contract_per_task():
    F, D, I64, S = onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.INT64, onnx.TensorProto.STRING
    clf = RandomForestClassifier(n_estimators=2, random_state=0).fit(XI, YI)
    assert outputs(tree2mat.convert(clf)) == {"label": (I64, ["N"]), "probabilities": (F, ["N", 3])}
    names = np.asarray(["a", "b", "c"])[YI]
    clf_s = RandomForestClassifier(n_estimators=2, random_state=0).fit(XI, names)
    assert outputs(tree2mat.convert(clf_s))["label"] == (S, ["N"])
    reg = RandomForestRegressor(n_estimators=2, random_state=0).fit(XD, YD)
    assert outputs(tree2mat.convert(reg)) == {"variable": (F, ["N", 1])}
    assert outputs(tree2mat.convert(reg, dtype="float64")) == {"variable": (D, ["N", 1])}
    gb = GradientBoostingClassifier(n_estimators=2).fit(XB, YB)
    assert outputs(tree2mat.convert(gb, raw=True)) == {"label": (I64, ["N"]), "variable": (F, ["N", 1])}
    iso = IsolationForest(n_estimators=2, random_state=0).fit(XB)
    assert outputs(tree2mat.convert(iso)) == {"label": (I64, ["N"]), "scores": (F, ["N", 1]), "score_samples": (F, ["N", 1])}
    inp = tree2mat.convert(clf).graph.input
    assert [i.name for i in inp] == ["input"] and inp[0].type.tensor_type.shape.dim[1].dim_value == 4


@pytest.mark.parametrize("opset", sorted({MIN_OPSET, 17, DEFAULT_OPSET, 21, NEWEST_OPSET}))
def test_opsets_run_in_onnxruntime(opset):
    model = HistGradientBoostingClassifier(max_iter=5).fit(XI, YI)
    onx = tree2mat.convert(model, opset=opset)
    assert onx.opset_import[0].version == opset
    assert_standard_graph(onx)
    assert tree2mat.verify(model, onx, rows=100).passed


def test_newest_opset_is_the_newest_onnxruntime_runs():
    """NEWEST_OPSET must load in the pinned onnxruntime, and the next one must not (else bump it);
    the default graph is DEFAULT_OPSET's, IR 9 (what onnxruntime 1.16 loads: test_floor.py)."""
    model = RandomForestRegressor(n_estimators=1, max_depth=2).fit(XD, YD)
    default = tree2mat.convert(model)
    assert (default.opset_import[0].version, default.ir_version) == (DEFAULT_OPSET, 9) == (19, 9)
    onx = tree2mat.convert(model, opset=NEWEST_OPSET)
    ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    if NEWEST_OPSET + 1 > onnx.defs.onnx_opset_version():
        return
    newer = onnx.ModelProto()
    newer.CopyFrom(onx)
    newer.opset_import[0].version = NEWEST_OPSET + 1
    newer.ir_version = onnx.helper.find_min_ir_version_for(list(newer.opset_import))
    with pytest.raises(Exception, match="opset"):
        ort.InferenceSession(newer.SerializeToString(), providers=["CPUExecutionProvider"])


@pytest.mark.slow
@pytest.mark.parametrize("n", [1, 100_000])
def test_one_row_and_a_hundred_thousand_rows(n):
    model = HistGradientBoostingClassifier(max_iter=40, random_state=0).fit(XB, YB)
    ens = tree2mat.load(model)
    pool, _ = synthesize(ens, 2000)
    X = pool[np.random.default_rng(0).integers(0, pool.shape[0], n)]
    got = run_onnx(tree2mat.convert(model), X)
    assert got["label"].shape == (n,) and got["probabilities"].shape == (n, 2)
    assert_matches(got, {"label": model.predict(X), "probabilities": model.predict_proba(X)}, X, ens)


@pytest.mark.parametrize(
    "model",
    [
        RandomForestClassifier(n_estimators=5, random_state=0).fit(XB, YB),  # casts float64 to float32
        HistGradientBoostingRegressor(max_iter=10).fit(XD, YD),  # compares in float64
    ],
    ids=["forest", "hist"],
)
def test_float64_graph_on_float64_data(model):
    onx = tree2mat.convert(model, dtype="float64")
    assert onx.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.DOUBLE
    report = tree2mat.verify(model, onx, rows=300)
    assert report.passed, report.summary()
    assert report.row_kinds["threshold"] > 0


def test_float64_graph_tells_float64_neighbours_apart():
    """HGB compares in float64: a float64 value one ulp above a threshold goes right, which a
    float32 graph cannot see; the float64 graph gets it right."""
    model = HistGradientBoostingRegressor(max_iter=3, max_depth=1).fit(XD[:, :1], YD)
    t = tree2mat.load(model).trees[0].threshold[0]
    X = np.asarray([[t], [np.nextafter(t, np.inf)], [np.nextafter(t, -np.inf)]])
    got = run_onnx(tree2mat.convert(model, dtype="float64"), X)["variable"][:, 0]
    np.testing.assert_allclose(got, model.predict(X), rtol=1e-12)


def test_oversized_dense_layout_is_refused(monkeypatch):
    monkeypatch.setattr(_stack, "MAX_INITIALIZER_BYTES", 10_000)
    model = RandomForestClassifier(n_estimators=5, random_state=0).fit(XB, YB)
    with pytest.raises(UnsupportedModelError, match="dense sign layout needs .* GiB .*--form traverse.*max_depth"):
        tree2mat.convert(model, form="sign")
    # auto leaves the dense forms out and still converts, exactly.
    onx = tree2mat.convert(model)
    assert {p.key: p.value for p in onx.metadata_props}["tree2mat.form"] == "traverse"
    assert tree2mat.verify(model, onx, rows=200).passed


def test_leaves_output_matches_reference_evaluator():
    model = GradientBoostingClassifier(n_estimators=4, random_state=0).fit(XI, YI)
    ens = tree2mat.load(model)
    X, _ = synthesize(ens, 200)
    onx = tree2mat.convert(model, leaves=True)
    assert outputs(onx)["leaves"] == (onnx.TensorProto.INT64, ["N", 12])
    np.testing.assert_array_equal(run_onnx(onx, X)["leaves"], tree2mat.ir.apply(ens, X))


def test_float16_path_sums_past_2048_are_refused():
    """bitvector's Q z counts up to the node count: float16 holds integers only to 2 048."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(6000, 3))
    model = DecisionTreeRegressor(max_leaf_nodes=2100, random_state=0).fit(X, rng.normal(size=6000))
    assert tree2mat.load(model).trees[0].n_internal > 2048  # (the premise)
    with pytest.raises(UnsupportedModelError, match="--matmul float16 holds integers up to 2048 exactly"):
        tree2mat.convert(model, form="bitvector", matmul="float16")
    # At the limit itself (2 048 nodes) float16 is exact; int8 (int32 sums) has no such limit.
    edge = DecisionTreeRegressor(max_leaf_nodes=2049, random_state=0).fit(X, rng.normal(size=6000))
    assert tree2mat.load(edge).trees[0].n_internal == 2048
    for form in ("bitvector", "sign"):
        report = tree2mat.verify(edge, tree2mat.convert(edge, form=form, matmul="float16"), X[:200])
        assert report.passed, report.summary()
    report = tree2mat.verify(model, tree2mat.convert(model, form="bitvector", matmul="int8"), X[:300])
    assert report.passed, report.summary()


@pytest.mark.parametrize("opset", [0, 12, 27])
def test_opsets_outside_the_range_are_refused(opset):
    with pytest.raises(OptionError, match=f"opset {opset} is not supported"):
        tree2mat.convert(DecisionTreeRegressor(max_depth=2).fit(XB, YB), opset=opset)


@pytest.mark.parametrize("form", ["traverse", "sign", "bitvector"])
def test_missing_value_the_compared_dtype_cannot_hold(form):
    """Found by fuzzing the IR: a float64 model whose missing value (1e-200) rounds to 0 in
    float32. The library compares a row's float64 value with it, so a float32 0 is not missing;
    the graph compared in float32 and took every 0 for missing."""
    import dataclasses

    m = HistGradientBoostingRegressor(max_iter=5).fit(XD, YD)
    ens = dataclasses.replace(tree2mat.load(m), missing_value=1e-200)
    X = XD[:40].astype(np.float32)
    X[::2, :] = 0.0
    X[1::4, :] = np.float32(1e-200)  # (0 too, in float32)
    got = run_graph(tree2mat.convert(ens, form, leaves=True), X)["leaves"]
    np.testing.assert_array_equal(got, tree2mat.ir.apply(ens, X))
    assert not np.array_equal(got, tree2mat.ir.apply(dataclasses.replace(ens, missing_value=0.0), X))

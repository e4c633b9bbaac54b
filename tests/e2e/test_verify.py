"""verify's data synthesis and report."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import onnx
import pytest
from sklearn.datasets import load_diabetes, load_iris
from sklearn.ensemble import GradientBoostingRegressor, HistGradientBoostingClassifier, RandomForestClassifier, RandomForestRegressor

import tree2mat
from tree2mat.errors import OptionError
from tree2mat.ir import apply
from tree2mat.ir.matrices import leaf_paths
from tree2mat.ir.thresholds import largest_float32_at_most
from tree2mat.verify import synthesize

from conftest import ROOT, run_onnx

XD, YD = load_diabetes(return_X_y=True)


def test_threshold_rows_reach_every_node_on_and_around_its_threshold():
    model = RandomForestRegressor(n_estimators=3, max_depth=6, random_state=0).fit(XD, YD)
    ens = tree2mat.load(model)
    X, kinds = synthesize(ens, rows=10)
    start = kinds["random"]
    rows = X[start:start + kinds["threshold"]]
    leaves = apply(ens, rows)
    for t, tree in enumerate(ens.trees):
        on_path = [{n for n, _ in p} for p in leaf_paths(tree)]
        for node in range(tree.n_internal):
            reach = np.asarray([node in on_path[leaf] for leaf in leaves[:, t]])
            values = rows[reach, tree.feature[node]]
            down = largest_float32_at_most(tree.threshold[node:node + 1])[0]
            up = np.nextafter(down, np.float32(np.inf))
            assert down in values and up in values, (t, node)


def test_nan_and_inf_rows_only_where_the_model_accepts_them():
    rf = tree2mat.load(RandomForestRegressor(n_estimators=2, random_state=0).fit(XD, YD))
    X, kinds = synthesize(rf, rows=50)
    assert np.isnan(X).any() and not np.isinf(X).any() and "inf" not in kinds
    X, y = load_iris(return_X_y=True)
    hgb = tree2mat.load(HistGradientBoostingClassifier(max_iter=3).fit(X, y))
    X, kinds = synthesize(hgb, rows=50)
    assert np.isposinf(X).any() and np.isneginf(X).any() and kinds["inf"] > 0


def test_report_json_and_missing_output():
    model = RandomForestRegressor(n_estimators=2, random_state=0).fit(XD, YD)
    onx = tree2mat.convert(model)
    report = tree2mat.verify(model, onx, rows=20)
    doc = json.loads(report.to_json())
    assert doc["passed"] and doc["rows"] == report.rows and doc["schema"] == 3
    broken = onnx.ModelProto()
    broken.CopyFrom(onx)
    broken.graph.output[0].name = "something_else"
    broken.graph.node[-1].output[0] = "something_else"
    bad = tree2mat.verify(model, broken, rows=20)
    assert not bad.passed
    assert any(o.problem == "output missing from the graph" for o in bad.outputs)


def test_text_labels_that_differ_are_reported_as_text():
    """A classifier of text labels whose graph gives other labels: the mismatches name them (the
    graph's labels come back from onnxruntime as Python strings, which have no ``tolist``)."""
    X, y = load_iris(return_X_y=True)
    names = np.array(["setosa", "versicolor", "virginica"])[y]
    small = RandomForestClassifier(n_estimators=3, max_depth=2, random_state=0).fit(X, names)
    other = RandomForestClassifier(n_estimators=5, max_depth=3, random_state=1).fit(X, names)
    report = tree2mat.verify(other, tree2mat.convert(small), X)
    labels = next(o for o in report.outputs if o.name == "label")
    differ = np.flatnonzero(other.predict(X.astype(np.float32)) != small.predict(X.astype(np.float32)))
    assert not report.passed and labels.mismatches == differ.size > 0
    first = labels.first_mismatches[0]
    assert first.row == differ[0] and (first.expected, first.got) == (other.predict(X[differ[:1]])[0], small.predict(X[differ[:1]])[0])
    assert json.loads(report.to_json())["outputs"][0]["first_mismatches"][0]["got"] == first.got


def test_values_off_by_one_leaf_are_caught_through_routing():
    """A graph whose leaf values are right but one tree's routing is off is caught even when the
    value error is below the tolerance."""
    model = RandomForestRegressor(n_estimators=50, max_depth=3, random_state=0).fit(XD, YD)
    onx = tree2mat.convert(model, form="bitvector")  # (its "node_threshold0" constant: per node of the first size group, a root first)
    # Shift the threshold of a tree's root by a lot: routing changes for many rows.
    thr = next(i for i in onx.graph.initializer if i.name == "node_threshold0")
    arr = onnx.numpy_helper.to_array(thr).copy()
    arr[0] += 0.01
    thr.CopyFrom(onnx.numpy_helper.from_array(arr, "node_threshold0"))
    report = tree2mat.verify(model, onx, rows=200, rtol=0.5)
    routing = [o for o in report.outputs if o.name == "routing"][0]
    assert not report.passed and routing.mismatches > 0


def _rewired(onx: onnx.ModelProto, output: str, op: str, extra: list[onnx.TensorProto], rank: int | None = None, **attrs) -> onnx.ModelProto:
    """A copy of ``onx`` whose ``output`` passes through one more ``op`` (with constants ``extra``)."""
    out = onnx.ModelProto()
    out.CopyFrom(onx)
    for node in out.graph.node:
        node.output[:] = [f"{o}_before" if o == output else o for o in node.output]
        node.input[:] = [f"{i}_before" if i == output else i for i in node.input]
    out.graph.initializer.extend(extra)
    out.graph.node.append(onnx.helper.make_node(op, [f"{output}_before", *(t.name for t in extra)], [output], **attrs))
    for o in out.graph.output:
        if o.name == output and rank is not None:
            elem = o.type.tensor_type.elem_type
            o.CopyFrom(onnx.helper.make_tensor_value_info(output, elem, [f"d{k}" for k in range(rank)]))
    return out


def test_a_graph_with_nan_outputs_or_wrong_shapes_fails_loudly(tmp_path, capsys):
    """A gate must not pass a graph that gives NaN, or the right numbers in the wrong shape."""
    from tree2mat.cli import main

    X, y = load_iris(return_X_y=True)
    model = HistGradientBoostingClassifier(max_iter=3).fit(X, y)
    onx = tree2mat.convert(model, "traverse")
    nan = onnx.numpy_helper.from_array(np.asarray([np.nan], np.float32), "nan")
    cases = {
        "nan": _rewired(onx, "probabilities", "Mul", [nan]),
        "transposed": _rewired(onx, "probabilities", "Transpose", [], rank=2, perm=[1, 0]),
        "flat": _rewired(onx, "probabilities", "Reshape", [onnx.numpy_helper.from_array(np.asarray([-1], np.int64), "flat")], rank=1),
        "label_rows": _rewired(onx, "label", "Concat", [onnx.numpy_helper.from_array(np.asarray([0], np.int64), "one_more")], rank=1, axis=0),
    }
    import joblib

    joblib.dump(model, tmp_path / "m.joblib")
    for name, broken in cases.items():
        report = tree2mat.verify(model, broken, rows=30)
        assert not report.passed, name
        bad = [o for o in report.outputs if not o.passed]
        # (traverse: every walk, see test_runtimes.py and test_walk.py, reports each output)
        ways = len({o.walk for o in report.outputs})
        assert ways == (3 if "tree2mat.walk_few_tensor" in {p.key for p in onx.metadata_props} else 2)
        assert [o.name for o in bad] == ways * (["label"] if name == "label_rows" else ["probabilities"]), name
        if name == "nan":
            assert bad[0].mismatches == bad[0].compared > 0 and bad[0].max_abs_error == float("inf")
        else:
            assert bad[0].problem.startswith("shape"), bad[0].problem
        tree2mat.save(broken, tmp_path / f"{name}.onnx")
        assert main(["verify", str(tmp_path / "m.joblib"), str(tmp_path / f"{name}.onnx"), "--json", str(tmp_path / f"{name}.json")]) == 1
        out = capsys.readouterr().out
        assert out.rstrip().endswith("FAIL")
        doc = json.loads((tmp_path / f"{name}.json").read_text())
        assert doc["passed"] is False and doc["schema"] == 3


def test_the_report_fields_are_the_documented_ones():
    """docs/cli.md documents verify's JSON report field by field; the report has exactly those."""
    import re

    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    section = text[text.index("### The JSON report"):]
    section = section[: section.index("\n## ")]
    documented = set(re.findall(r"`([a-z_]+)`(?=[:,;.]| \(| per)", section))
    model = RandomForestRegressor(n_estimators=2, random_state=0).fit(XD, YD)
    onx = tree2mat.convert(model)
    wrong = tree2mat.convert(RandomForestRegressor(n_estimators=2, random_state=1).fit(XD, YD))
    doc = json.loads(tree2mat.verify(model, wrong, rows=20).to_json())
    assert not doc["passed"] and doc["outputs"][0]["first_mismatches"]
    fields = set(doc) | set(doc["outputs"][0]) | set(doc["outputs"][0]["first_mismatches"][0])
    assert fields <= documented, fields - documented
    assert doc["schema"] == 3 and tree2mat.verify(model, onx, rows=20).passed


@pytest.mark.parametrize("kwargs", [{"atol": float("nan")}, {"rtol": float("nan")}, {"atol": -1.0}])
def test_nan_or_negative_tolerances_are_refused(kwargs):
    model = RandomForestRegressor(n_estimators=2, max_depth=2, random_state=0).fit(*load_diabetes(return_X_y=True))
    with pytest.raises(OptionError, match="must be numbers >= 0"):
        tree2mat.verify(model, tree2mat.convert(model), **kwargs)


def test_relative_error_is_taken_away_from_zero_only():
    """Near zero the tolerance is atol's: a relative error over a tiny expected value says
    nothing, so the report takes it where rtol x |expected| >= atol (computed here from the
    library's predictions and the graph's outputs)."""
    model = GradientBoostingRegressor(n_estimators=50, random_state=0).fit(XD, (YD - YD.mean()) / 100)
    onx = tree2mat.convert(model)
    report = tree2mat.verify(model, onx, rows=2000)
    X, _ = synthesize(tree2mat.load(model), 2000, dtype=np.float32, seed=0)
    assert X.shape[0] == report.rows
    with np.errstate(over="ignore", invalid="ignore"):  # (scikit-learn's finiteness check sums +-max float32 rows)
        expected = model.predict(X)
    got = run_onnx(onx, X)["variable"][:, 0].astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.abs(got - expected) / np.abs(expected)
    away = np.abs(expected) * report.rtol >= report.atol
    value = next(o for o in report.outputs if o.name == "variable")
    assert value.max_rel_error == pytest.approx(rel[away].max(), rel=1e-12)
    assert np.nanmax(rel[~away]) > 5 * value.max_rel_error  # what the near-zero values would have shown
    assert f"{value.max_rel_error:.3g}" in report.summary()


def test_table_shows_an_output_once_unless_its_walks_differ():
    X, y = load_iris(return_X_y=True)
    model = RandomForestClassifier(n_estimators=5, random_state=0).fit(X, y)
    report = tree2mat.verify(model, tree2mat.convert(model, "traverse"), rows=100)
    walks = {o.walk for o in report.outputs}
    assert len(walks) >= 2 and report.passed
    table = report.summary().splitlines()
    for name in ("label", "probabilities", "routing"):
        assert len([o for o in report.outputs if o.name == name]) == len(walks)  # the JSON keeps every walk
        rows = [line for line in table if line.startswith(name + " ")]
        assert len(rows) == 1 and rows[0].split()[1] == "cpu", table
    # a walk whose figures differ keeps a row of its own, naming it; the others stay one row
    first = next(o for o in report.outputs if o.name == "label")
    changed = [replace(o, mismatches=1) if o is first else o for o in report.outputs]
    table = replace(report, outputs=changed).summary().splitlines()
    rows = [line for line in table if line.startswith("label ")]
    assert len(rows) == 2 and f"cpu, {first.walk}" in rows[0] and all(w in rows[1] for w in walks - {first.walk})

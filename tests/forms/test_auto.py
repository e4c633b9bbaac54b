"""``--form auto`` and the pieces around it: the choice is the cheapest estimate among the exact
forms that fit the memory budget, it is said in the graph, the convert summary and inspect, and
the graph it gives is exact. Graphs over protobuf's 2 GiB go to ONNX external data (the limit is
lowered here, so that a small model takes that path)."""

from __future__ import annotations

import importlib
import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier, RandomForestRegressor

import tree2mat
from tree2mat.cli import main
from tree2mat.errors import OptionError, UnsupportedModelError
from tree2mat.forms import FORMS, auto, traverse

from conftest import ROOT

XB, YB = load_breast_cancer(return_X_y=True)
XI, YI = load_iris(return_X_y=True)
XD, YD = load_diabetes(return_X_y=True)
ONNX_IO = importlib.import_module("tree2mat.onnx_io")


def _meta(onx: onnx.ModelProto) -> dict[str, str]:
    return {p.key: p.value for p in onx.metadata_props}


@pytest.fixture(scope="module")
def shallow():
    return GradientBoostingClassifier(n_estimators=20, max_depth=2, random_state=0).fit(XB, YB)


@pytest.fixture(scope="module")
def deep():
    return RandomForestRegressor(n_estimators=10, random_state=0).fit(XD, YD)  # ~280 leaves a tree


@pytest.mark.parametrize("which", ["shallow", "deep"])
def test_auto_picks_the_cheapest_fitting_exact_form_and_is_exact(which, request):
    model = request.getfixturevalue(which)
    ens = tree2mat.load(model)
    choice = auto.choose(ens)
    fitting = [e for e in choice.estimates if e.fits]
    assert choice.form == min(fitting, key=lambda e: e.us_per_row).form
    assert FORMS[choice.form].exact
    onx = tree2mat.convert(model)
    meta = _meta(onx)
    assert meta["tree2mat.form"] == choice.form and meta["tree2mat.auto"] == choice.reason
    report = tree2mat.verify(model, onx, rows=300)
    assert report.passed, report.summary()


def test_auto_takes_the_lowest_estimate(shallow, deep):
    """auto takes the form with the lowest estimate; the walk measured fastest on every model
    (benchmarks/form_speed.json), and the cost model says so on shallow and deep trees alike,
    the matrix forms' estimates growing with nodes x leaves."""
    for model in (shallow, deep):
        choice = auto.choose(tree2mat.load(model))
        best = min(choice.estimates, key=lambda e: e.us_per_row)
        assert choice.form == best.form == "traverse"
    est = {e.form: e.us_per_row for e in auto.choose(tree2mat.load(deep)).estimates}
    shallow_est = {e.form: e.us_per_row for e in auto.choose(tree2mat.load(shallow)).estimates}
    assert est["bitvector"] / est["traverse"] > shallow_est["bitvector"] / shallow_est["traverse"]


def test_memory_budget_rules_forms_out(deep):
    ens = tree2mat.load(deep)
    dense = next(e for e in auto.choose(ens).estimates if e.form == "bitvector")
    walk = next(e for e in auto.choose(ens).estimates if e.form == "traverse")
    assert walk.memory_bytes < dense.memory_bytes  # (the premise of this test)
    assert auto.choose(ens, max_memory=walk.memory_bytes).form == "traverse"
    with pytest.raises(UnsupportedModelError, match="no exact form fits --max-memory"):
        auto.choose(ens, max_memory=walk.memory_bytes - 1)


def test_an_explicit_form_over_the_budget_is_refused_naming_one_that_fits(deep, tmp_path, capsys):
    """Before building: the dense graph of a deep forest over --max-memory is refused, the message
    names traverse (which fits); traverse itself converts under the same budget and runs exactly."""
    import joblib

    ens = tree2mat.load(deep)
    dense = auto.estimate(FORMS["bitvector"], ens)
    walk = auto.estimate(FORMS["traverse"], ens)
    budget = (dense.memory_bytes + walk.memory_bytes) // 2
    with pytest.raises(UnsupportedModelError, match=r"--form bitvector needs about .* over --max-memory .*: --form traverse fits"):
        tree2mat.convert(deep, "bitvector", max_memory=budget)
    onx = tree2mat.convert(deep, "traverse", max_memory=budget)
    assert tree2mat.verify(deep, onx, rows=100).passed
    joblib.dump(deep, tmp_path / "m.joblib")
    out = tmp_path / "m.onnx"
    args = ["convert", str(tmp_path / "m.joblib"), "-o", str(out), "--form", "sign", "--max-memory", str(budget)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "--form sign needs about" in err and "--form traverse fits" in err and err.count("\n") == 1
    assert not out.exists()
    with pytest.raises(UnsupportedModelError, match="no exact form fits"):
        tree2mat.convert(deep, "traverse", max_memory=walk.memory_bytes - 1)
    tree2mat.convert(deep, "traverse", max_memory=walk.memory_bytes)


@pytest.mark.parametrize("text,expected", [("4G", 4 * 2**30), ("512M", 512 * 2**20), ("1.5GiB", int(1.5 * 2**30)),
                                           ("2000000", 2_000_000), ("64kb", 64 * 2**10)])
def test_parse_memory(text, expected):
    assert auto.parse_memory(text) == expected


@pytest.mark.parametrize("text", ["lots", "", "-1G", "0", "nanG", "infM"])
def test_parse_memory_refuses_nonsense(text):
    with pytest.raises(OptionError, match="--max-memory"):
        auto.parse_memory(text)


def test_auto_refuses_soft_options(shallow):
    with pytest.raises(OptionError, match="explicit --form"):
        tree2mat.convert(shallow, temperature=0.1)
    with pytest.raises(OptionError, match="explicit --form"):
        tree2mat.convert(shallow, matmul="int8")


def test_cli_says_what_auto_picked_and_why(tmp_path, capsys, shallow):
    import joblib

    joblib.dump(shallow, tmp_path / "m.joblib")
    assert main(["convert", str(tmp_path / "m.joblib"), "-o", str(tmp_path / "m.onnx")]) == 0
    out = capsys.readouterr().out
    assert "form traverse" in out and "auto picked traverse: fastest exact form" in out
    assert main(["inspect", str(tmp_path / "m.joblib"), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["auto"]["form"] == "traverse" and "estimated" in doc["auto"]["reason"]
    assert doc["forms"]["traverse"]["estimated_us_per_row"] < doc["forms"]["bitvector"]["estimated_us_per_row"]
    assert main(["convert", str(tmp_path / "m.joblib"), "-o", str(tmp_path / "t.onnx"), "--max-memory", "1K"]) == 2
    assert "no exact form fits --max-memory" in capsys.readouterr().err
    assert not (tmp_path / "t.onnx").exists()


def test_graph_over_the_protobuf_limit_is_written_as_external_data(tmp_path, capsys, monkeypatch):
    model = RandomForestClassifier(n_estimators=20, max_depth=6, random_state=0).fit(XI, YI)
    import joblib

    joblib.dump(model, tmp_path / "m.joblib")
    graph = tmp_path / "m.onnx"
    graph.write_bytes(tree2mat.convert(model, form="sign").SerializeToString())  # an earlier, small graph
    monkeypatch.setattr(ONNX_IO, "EXTERNAL_DATA_BYTES", 1000)
    assert main(["convert", str(tmp_path / "m.joblib"), "-o", str(graph), "--form", "sign"]) == 0
    out = capsys.readouterr().out
    data = ONNX_IO.external_data_file(graph)
    assert data is not None and f"constants in {data.name}" in out
    assert data.stat().st_size > graph.stat().st_size
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["m.joblib", "m.onnx", data.name])  # no temporaries
    sess = ort.InferenceSession(str(graph), providers=["CPUExecutionProvider"])  # onnxruntime finds the data
    labels = sess.run(["label"], {"input": XI.astype(np.float32)})[0]
    np.testing.assert_array_equal(labels, model.predict(XI))
    assert main(["verify", str(tmp_path / "m.joblib"), str(graph), "--rows", "200"]) == 0
    # Another model over the same path: its own data file, and the old one is gone.
    other = RandomForestClassifier(n_estimators=20, max_depth=5, random_state=1).fit(XI, YI)
    joblib.dump(other, tmp_path / "m.joblib")
    assert main(["convert", str(tmp_path / "m.joblib"), "-o", str(graph), "--form", "sign"]) == 0
    new = ONNX_IO.external_data_file(graph)
    assert new != data and not data.exists() and new.exists()
    assert main(["verify", str(tmp_path / "m.joblib"), str(graph), "--rows", "200"]) == 0
    # save leaves the in-memory model as it was, and the same model gives the same bytes.
    onx = tree2mat.convert(other, form="sign")
    before = onx.SerializeToString()
    tree2mat.save(onx, tmp_path / "again.onnx")
    assert onx.SerializeToString() == before
    # Through a symbolic link, a graph with a side file is refused (the data would not be found).
    (tmp_path / "link.onnx").symlink_to(graph)
    assert main(["convert", str(tmp_path / "m.joblib"), "-o", str(tmp_path / "link.onnx"), "--form", "sign"]) == 2
    assert "symbolic link" in capsys.readouterr().err


def test_one_constant_past_2_gib_is_refused(monkeypatch):
    monkeypatch.setattr(importlib.import_module("tree2mat.forms._graph"), "MAX_TENSOR_BYTES", 200)
    model = RandomForestClassifier(n_estimators=5, max_depth=5, random_state=0).fit(XI, YI)
    with pytest.raises(UnsupportedModelError, match="at most 2 GiB in one tensor"):
        tree2mat.convert(model, form="traverse")


def test_options_are_checked_budget_first_and_an_empty_dtype_is_the_default():
    model = tree2mat.load(str(ROOT / "fixtures" / "paper_tree.json"))
    with pytest.raises(OptionError, match="--max-memory must be positive"):
        tree2mat.convert(model, form="nope", max_memory=0)
    assert tree2mat.convert(model, form="sign", dtype="").graph.input[0].type.tensor_type.elem_type == 1  # float


@pytest.fixture(scope="module")
def leafwise():
    """LightGBM's leaf-wise trees, 31 leaves and up to ~15 levels: at one row the walk's
    operators per level outweigh a matrix form's MatMul."""
    import lightgbm as lgb
    from sklearn.datasets import make_classification

    X, y = make_classification(4000, 20, n_informative=10, random_state=0)
    return lgb.LGBMClassifier(n_estimators=100, num_leaves=31, min_child_samples=3, random_state=0, verbose=-1).fit(X.astype(np.float32), y), X


@pytest.fixture(scope="module")
def few_shallow():
    """Five XGBoost trees of depth 4: at one row the bitvector form's estimate is the lowest (as
    measured: benchmarks/latency_fit.json), in runs of 10 000 rows traverse's."""
    import xgboost as xgb
    from sklearn.datasets import make_classification

    X, y = make_classification(4000, 20, n_informative=10, random_state=0)
    return xgb.XGBClassifier(n_estimators=5, max_depth=4).fit(X.astype(np.float32), y), X


def test_leaf_wise_trees_walk_decided_at_one_row(leafwise):
    """At one row traverse's estimate on leaf-wise trees is its decided walk's (built in the
    graph), under every dense form's: ``--batch-hint 1`` keeps traverse."""
    model, _ = leafwise
    ens = tree2mat.load(model)
    one = auto.choose(ens, batch_hint=1)
    assert one.form == "traverse"
    assert FORMS["traverse"].call_us(ens) < traverse.flat_call_us(int(ens.tree_depths().max()), traverse.tree_levels(ens))
    assert "tree2mat.walk_few" in _meta(tree2mat.convert(model, "traverse"))


def test_traverse_estimates_the_walk_its_graph_takes_at_each_batch(leafwise):
    """traverse's estimate of a run of b rows is linear in b within each walk's rows, and changes
    course exactly where the graph changes walks (its metadata: the decided walk up to
    ``tree2mat.walk_few`` rows, the flat one up to ``tree2mat.walk_rows``, the wide one above)."""
    model, _ = leafwise
    ens = tree2mat.load(model)
    meta = _meta(tree2mat.convert(model, "traverse"))
    few, flat = int(meta["tree2mat.walk_few"]), int(meta["tree2mat.walk_rows"])
    run = [FORMS["traverse"].run_us(ens, b) for b in range(flat + 4)]  # (run[0] unused)
    kinks = {b for b in range(2, flat + 3) if run[b + 1] - run[b] != pytest.approx(run[b] - run[b - 1])}
    assert kinks == {few, few + 1, flat, flat + 1}


def test_batch_hint_weighs_each_forms_run_overhead(few_shallow):
    """``--batch-hint 1`` picks the form whose one-row run is estimated fastest (operators'
    overhead and one row's work), the default the fastest per row in runs of 10 000; the choice
    and the hint are in the graph's metadata, and the graph routes as XGBoost."""
    model, X = few_shallow
    ens = tree2mat.load(model)
    one, many = auto.choose(ens, batch_hint=1), auto.choose(ens)
    for choice, hint in ((one, 1), (many, auto.DEFAULT_BATCH_HINT)):
        spec = FORMS[choice.form]
        run = spec.run_us(ens, hint) if spec.run_us is not None else spec.call_us(ens) + (hint - 1) * spec.us_per_row(ens)
        expected = run / hint
        assert choice.estimates[[e.form for e in choice.estimates].index(choice.form)].us_per_row == pytest.approx(expected)
        assert choice.form == min((e for e in choice.estimates if e.fits), key=lambda e: e.us_per_row).form
        assert f"in runs of {hint} row" in choice.reason
    assert many.form == "traverse" and one.form != "traverse"  # (the premise: the hint changes the pick)
    onx = tree2mat.convert(model, batch_hint=1)
    meta = _meta(onx)
    assert meta["tree2mat.form"] == one.form and meta["tree2mat.batch_hint"] == "1" and meta["tree2mat.auto"] == one.reason
    assert "tree2mat.batch_hint" not in _meta(tree2mat.convert(model, "traverse"))
    report = tree2mat.verify(model, onx, data=X[:2000])
    assert report.passed, report.summary()


@pytest.mark.parametrize("hint", [0, -3, 1.5, True, "many"])
def test_a_bad_batch_hint_is_refused(shallow, hint):
    with pytest.raises(OptionError, match="--batch-hint must be a whole number of rows >= 1"):
        tree2mat.convert(shallow, batch_hint=hint)


def test_batch_hint_with_an_explicit_form_is_refused_on_the_command_line(shallow, tmp_path, capsys):
    import joblib

    path = tmp_path / "m.joblib"
    joblib.dump(shallow, path)
    out = tmp_path / "m.onnx"
    assert main(["convert", str(path), "-o", str(out), "--form", "sign", "--batch-hint", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--batch-hint tells --form auto which form to pick" in err and not out.exists()
    assert main(["convert", str(path), "-o", str(out), "--batch-hint", "0"]) == 2
    assert "--batch-hint must be a whole number of rows >= 1" in capsys.readouterr().err and not out.exists()
    assert main(["inspect", str(path), "--format", "json", "--batch-hint", "1"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["auto"]["batch_hint"] == 1 and info["auto"]["form"] == auto.choose(tree2mat.load(shallow), batch_hint=1).form
    weighed = {spec.name for spec in auto.candidates()}  # (the exact forms auto weighs: all but treeensemble)
    assert weighed and all("estimated_us_per_run_of_one_row" in v for k, v in info["forms"].items() if k in weighed)

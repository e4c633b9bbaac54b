"""The ``treeensemble`` form against the libraries' own predictions, on every runtime it claims
(onnxruntime, onnx's reference evaluator, onnxruntime-node and onnxruntime-web's wasm backend):
one model per thing its ``TreeEnsembleRegressor`` has to be told through its input columns
(the library's missing value, LightGBM's zero band and missing-type Zero, categories of each
library) or through the rest of the graph (averaged forests, linear leaves, several outputs,
float64 input, ``--leaves``). ``verify`` synthesizes rows on and beside every threshold, NaN
and +-inf, and checks each tree's leaf against the reference evaluator. CatBoost and treeple
(oblique) models: their frontends' tests run every exact form."""

from __future__ import annotations

import json

import joblib
import lightgbm as lgb
import numpy as np
import onnx
import pandas as pd
import pytest
import xgboost as xgb
from sklearn.datasets import make_classification, make_regression
from sklearn.ensemble import ExtraTreesRegressor, GradientBoostingClassifier, HistGradientBoostingClassifier, IsolationForest, RandomForestClassifier
from sklearn.tree import DecisionTreeRegressor

import tree2mat
from tree2mat.cli import main
from tree2mat.forms import treeensemble
from tree2mat.forms._graph import DEFAULT_OPSET, ML_DOMAIN, GraphOptions
from tree2mat.runtimes import RUNTIMES

from conftest import assert_standard_graph, run_onnx, with_holes


def _classes(n: int, nan: bool = False, zeros: bool = False) -> tuple[np.ndarray, np.ndarray]:
    X, y = make_classification(800, 6, n_informative=4, n_classes=n, random_state=0)
    return (with_holes(X, np.random.default_rng(1), zeros=zeros) if nan else X), y


def _regression(targets: int = 1, nan: bool = False) -> tuple[np.ndarray, np.ndarray]:
    X, y = make_regression(800, 6, n_informative=4, n_targets=targets, noise=1.0, random_state=0)
    return (with_holes(X, np.random.default_rng(1)) if nan else X), y


def _categorical_frame() -> tuple[pd.DataFrame, np.ndarray]:
    """Two numeric columns with NaN and a 12-category column (pandas categories)."""
    X, y = _classes(2, nan=True)
    frame = pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "c": pd.Categorical(np.random.default_rng(2).integers(0, 12, len(y)))})
    y = np.where(frame["c"].cat.codes.to_numpy() % 3 == 0, 1 - y, y)
    return frame, y


def _lightgbm_categorical() -> lgb.LGBMClassifier:
    X, y = _classes(2, nan=True, zeros=True)
    X[:, 5] = np.random.default_rng(3).integers(0, 40, len(y))
    y = np.where(X[:, 5] % 4 == 0, 1 - y, y)
    return lgb.LGBMClassifier(n_estimators=15, num_leaves=15, min_data_per_group=5, cat_smooth=1, zero_as_missing=True,
                              verbose=-1).fit(X, y, categorical_feature=[5])


MODELS = {
    "DecisionTreeRegressor, 2 outputs": lambda: DecisionTreeRegressor(max_depth=6, random_state=0).fit(*_regression(2)),
    "RandomForestClassifier": lambda: RandomForestClassifier(n_estimators=15, max_depth=6, random_state=0).fit(*_classes(3)),
    "ExtraTreesRegressor, NaN": lambda: ExtraTreesRegressor(n_estimators=10, max_depth=6, random_state=0).fit(*_regression(nan=True)),
    "GradientBoostingClassifier, 3 classes": lambda: GradientBoostingClassifier(n_estimators=10, max_depth=3, random_state=0).fit(*_classes(3)),
    "HistGradientBoostingClassifier, categories and NaN": lambda: HistGradientBoostingClassifier(
        max_iter=15, categorical_features="from_dtype", random_state=0).fit(*_categorical_frame()),
    "IsolationForest": lambda: IsolationForest(n_estimators=15, random_state=0).fit(_classes(2)[0]),
    "XGBClassifier, 3 classes, NaN": lambda: xgb.XGBClassifier(n_estimators=10, max_depth=4).fit(*_classes(3, nan=True)),
    "XGBRegressor, missing=0": lambda: xgb.XGBRegressor(n_estimators=10, max_depth=4, missing=0.0).fit(*_regression(nan=True)),
    "XGBClassifier, categories": lambda: xgb.XGBClassifier(n_estimators=10, max_depth=4, enable_categorical=True,
                                                            tree_method="hist").fit(*_categorical_frame()),
    "XGBRegressor, 2 outputs": lambda: xgb.XGBRegressor(n_estimators=8, max_depth=3).fit(*_regression(2)),
    "XGBRegressor, dart": lambda: xgb.XGBRegressor(n_estimators=8, max_depth=3, booster="dart", rate_drop=0.3).fit(*_regression()),
    "XGBRFClassifier": lambda: xgb.XGBRFClassifier(n_estimators=8, max_depth=4).fit(*_classes(2, nan=True)),
    "LGBMClassifier, bitsets and zero-as-missing": _lightgbm_categorical,
    "LGBMRegressor, rf": lambda: lgb.LGBMRegressor(boosting_type="rf", n_estimators=10, num_leaves=15, bagging_freq=1,
                                                    bagging_fraction=0.7, verbose=-1).fit(*_regression(nan=True)),
    "LGBMRegressor, linear_tree": lambda: lgb.LGBMRegressor(n_estimators=8, num_leaves=7, linear_tree=True, verbose=-1).fit(*_regression(nan=True)),
    "LGBMClassifier, 3 classes": lambda: lgb.LGBMClassifier(n_estimators=8, num_leaves=15, verbose=-1).fit(*_classes(3, nan=True)),
}


@pytest.mark.parametrize("opset", [None, 21])  # (the default, 19: leaf numbers; 21: the node sums where it may)
@pytest.mark.parametrize("name", list(MODELS))
def test_verifies_against_the_library(name, opset):
    model = MODELS[name]()
    onx = tree2mat.convert(model, form="treeensemble", opset=opset)
    assert_standard_graph(onx)
    summed = treeensemble.sums_in_the_node(tree2mat.load(model), GraphOptions(opset=opset or DEFAULT_OPSET))
    assert [n.op_type for n in onx.graph.node if n.domain == ML_DOMAIN] == ["TreeEnsemble" if summed else "TreeEnsembleRegressor"]
    report = tree2mat.verify(model, onx, rows=300)
    assert report.passed, report.summary()
    assert {o.name for o in report.outputs} >= {"routing"}


def test_which_graphs_sum_in_the_node():
    """The node sums the values (ml opset 5, double sums) for the libraries that sum in float64,
    one value per leaf; XGBoost's float32 sums, several values per leaf (a forest's class
    fractions), linear leaves, ``--leaves`` and opsets before 21 keep the leaf numbers."""
    at_21 = GraphOptions(opset=21)  # (the default opset, 19, has no ml opset 5: no model sums there)
    assert not any(treeensemble.sums_in_the_node(tree2mat.load(MODELS[name]()), GraphOptions()) for name in MODELS)
    summed = {name for name in MODELS if treeensemble.sums_in_the_node(tree2mat.load(MODELS[name]()), at_21)}
    assert summed == {
        "ExtraTreesRegressor, NaN", "GradientBoostingClassifier, 3 classes", "HistGradientBoostingClassifier, categories and NaN",
        "IsolationForest", "LGBMClassifier, bitsets and zero-as-missing", "LGBMRegressor, rf", "LGBMClassifier, 3 classes",
    }
    ens = tree2mat.load(MODELS["LGBMClassifier, 3 classes"]())
    assert not treeensemble.sums_in_the_node(ens, GraphOptions(opset=20))
    assert not treeensemble.sums_in_the_node(ens, GraphOptions(opset=21, leaves=True))


@pytest.mark.parametrize("opset", [20, 26])
def test_both_nodes_verify_at_their_opsets(opset):
    model = MODELS["LGBMClassifier, 3 classes"]()
    onx = tree2mat.convert(model, form="treeensemble", opset=opset)
    assert_standard_graph(onx)
    report = tree2mat.verify(model, onx, rows=300)
    assert report.passed and report.outputs[-1].name == "routing", report.summary()


@pytest.mark.slow
@pytest.mark.parametrize("opset", [None, 21])  # (both nodes: leaf numbers at the default opset, sums from 21)
@pytest.mark.parametrize("name", list(MODELS))
def test_verifies_against_the_library_on_every_runtime_it_claims(name, opset):
    model = MODELS[name]()
    onx = tree2mat.convert(model, form="treeensemble", opset=opset)
    assert treeensemble.PROVEN_ON[0] == "onnxruntime"  # (the test above)
    for runtime in treeensemble.PROVEN_ON[1:]:
        if not RUNTIMES[runtime].available():
            pytest.skip(f"{runtime}: no node on the PATH or no npm package (make test installs it when node is present)")
        report = tree2mat.verify(model, onx, rows=300, runtime=runtime)
        assert report.passed, (runtime, report.summary())
        assert {o.name for o in report.outputs} >= {"routing"}


@pytest.mark.parametrize("name", ["RandomForestClassifier", "LGBMClassifier, bitsets and zero-as-missing", "XGBRegressor, missing=0"])
def test_float64_input_verifies(name):
    model = MODELS[name]()
    onx = tree2mat.convert(model, form="treeensemble", dtype="float64")
    node = next(n for n in onx.graph.node if n.domain == ML_DOMAIN)
    attrs = {a.name for a in node.attribute}
    source64 = np.dtype(tree2mat.load(model).source_dtype) == np.float64
    if node.op_type == "TreeEnsembleRegressor":  # (the node that sums takes doubles whatever the input)
        assert ("nodes_values_as_tensor" in attrs) == source64  # (sklearn compares in float32 whatever the input)
    report = tree2mat.verify(model, onx, rows=300)
    assert report.passed, report.summary()


def test_leaves_are_the_library_s_leaves():
    """``--leaves`` gives each tree's leaf as LightGBM's own ``pred_leaf`` numbers it, rows with
    NaN, zeros and unseen categories included."""
    model = MODELS["LGBMClassifier, bitsets and zero-as-missing"]()
    X, _ = _classes(2, nan=True, zeros=True)
    X[:, 5] = np.random.default_rng(4).integers(-2, 45, len(X))  # (unseen and negative categories)
    X = X.astype(np.float32)
    got = run_onnx(tree2mat.convert(model, form="treeensemble", leaves=True), X)["leaves"]
    ens = tree2mat.load(model)
    source = np.stack([t.leaf_source_id[got[:, k]] for k, t in enumerate(ens.trees)], axis=1)
    np.testing.assert_array_equal(source, model.predict(X, pred_leaf=True))


@pytest.mark.parametrize("name", ["RandomForestClassifier", "LGBMClassifier, 3 classes"])
def test_one_threshold_moved_fails_verify(name):
    """verify sees a node of the TreeEnsemble moved by one float32 step: it checks the node's
    routing tree by tree, from the leaf numbers the node writes (a forest's) or, where the node
    sums the values (LightGBM's), from a copy of it whose leaves write their numbers."""
    model = MODELS[name]()
    onx = tree2mat.convert(model, form="treeensemble")
    node = next(n for n in onx.graph.node if n.domain == ML_DOMAIN)
    if node.op_type == "TreeEnsemble":
        splits = next(a for a in node.attribute if a.name == "nodes_splits")
        values = onnx.numpy_helper.to_array(splits.t).copy()
        i = int(np.flatnonzero(np.isfinite(values) & (values != 0))[0])
        values[i] = np.nextafter(np.float32(values[i]), np.float32(-np.inf))
        splits.t.CopyFrom(onnx.numpy_helper.from_array(values, splits.t.name))
    else:
        values = next(a for a in node.attribute if a.name == "nodes_values")
        i = [m.decode() for m in next(a for a in node.attribute if a.name == "nodes_modes").strings].index("BRANCH_LEQ")
        values.floats[i] = float(np.nextafter(np.float32(values.floats[i]), np.float32(-np.inf)))
    onnx.checker.check_model(onx)
    report = tree2mat.verify(model, onx, rows=300)
    assert not report.passed
    assert any(o.name == "routing" and o.mismatches for o in report.outputs), report.summary()


def test_a_runtime_without_the_operator_is_named_with_the_way_out(tmp_path, capsys):
    """``verify --runtime tract`` of a treeensemble graph: tract refuses the operator, and the one
    line says where the form runs and what to convert for tract (exit 1, as any graph a runtime
    cannot run)."""
    model = MODELS["RandomForestClassifier"]()
    path = tmp_path / "rf.joblib"
    joblib.dump(model, path)
    assert main(["convert", str(path), "-o", str(tmp_path / "rf.onnx"), "--form", "treeensemble"]) == 0
    capsys.readouterr()
    assert main(["verify", str(path), str(tmp_path / "rf.onnx"), "--runtime", "tract", "--rows", "50"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "TreeEnsembleRegressor" in err, err
    assert "a treeensemble graph is exact on onnxruntime, reference, onnxruntime-node, onnxruntime-web; for tract" in err, err


def test_one_leaf_trees_between_others_on_every_runtime(tmp_path):
    """Trees of one leaf after and before trees with splits, summed in the node: right on
    onnxruntime and on onnx's reference evaluator, which reads a root whose two branches reach
    one leaf as a leaf of the root's index (the node writes a split that every row takes
    instead). Compared with tree2mat's reference evaluator (an IR file: no library)."""
    split = {"feature": [0, 1], "threshold": [0.5, -0.25], "default_left": [True, False], "left": [1, -1], "right": [-3, -2],
             "value": [[1.5], [-2.0], [4.25]]}
    leaf = {"feature": [], "threshold": [], "default_left": [], "left": [], "right": [], "value": [[100.0]]}
    doc = {"tree2mat_ir": 1, "n_features": 2, "trees": [split, leaf, split, leaf, leaf]}
    path = tmp_path / "ir.json"
    path.write_text(json.dumps(doc))
    onx = tree2mat.convert(str(path), form="treeensemble", opset=21)  # (the node that sums)
    assert [n.op_type for n in onx.graph.node if n.domain == ML_DOMAIN] == ["TreeEnsemble"]
    for runtime in ("onnxruntime", "reference"):
        report = tree2mat.verify(str(path), onx, rows=200, runtime=runtime)
        assert report.passed and report.outputs[-1].name == "routing", (runtime, report.summary())


def test_a_twin_of_a_cycle_is_refused_in_one_line(tmp_path, capsys):
    """A graph made to look like a summing treeensemble graph whose node points back at itself:
    verify refuses it in one line (exit 2) before any run, instead of walking it forever."""
    model = MODELS["LGBMClassifier, 3 classes"]()
    onx = tree2mat.convert(model, form="treeensemble", opset=21)  # (the node that sums)
    node = next(n for n in onx.graph.node if n.domain == ML_DOMAIN)
    true_ids = next(a for a in node.attribute if a.name == "nodes_truenodeids")
    true_leafs = next(a for a in node.attribute if a.name == "nodes_trueleafs")
    true_ids.ints[0], true_leafs.ints[0] = 0, 0  # (the first root's true branch: itself)
    path = tmp_path / "m.txt"
    model.booster_.save_model(str(path))
    onnx.save(onx, str(tmp_path / "m.onnx"))
    assert main(["verify", str(path), str(tmp_path / "m.onnx"), "--rows", "50"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not a forest (tree 0 reaches node 0 twice" in err, err

"""XGBoost: the converted graph against XGBoost's own predictions (routing exact, margins
bit-identical in float64), multi-target trees and multi-label classifiers, native JSON and UBJSON
files without xgboost importable, feature names, early stopping, the `missing` value, and
refusals for what is not supported yet."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import joblib
import numpy as np
import pytest
import xgboost as xgb
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris, load_wine

import tree2mat
from tree2mat.errors import ModelFileError, UnsupportedModelError
from tree2mat.frontends.xgboost import OBJECTIVES, reference_outputs
from tree2mat.ir import evaluate
from tree2mat.verify import synthesize

from conftest import ROOT, assert_matches, assert_standard_graph, run_onnx

XB, YB = load_breast_cancer(return_X_y=True)
XD, YD = load_diabetes(return_X_y=True)
XI, YI = load_iris(return_X_y=True)
Y3 = np.stack([YD, np.sqrt(YD), -YD], axis=1)  # three regression targets
YL = np.stack([YB, 1 - YB, (XB[:, 0] > 14).astype(int)], axis=1)  # three binary labels
QID = np.repeat(np.arange(XD.shape[0] // 20 + 1), 20)[: XD.shape[0]]
FIXTURES = ROOT / "fixtures"


def fit(objective: str, booster: str = "gbtree", **kw):
    if objective.startswith("rank:"):
        levels = [150] if objective == "rank:map" else [100, 200]  # rank:map needs binary relevance
        return xgb.XGBRanker(n_estimators=15, objective=objective, booster=booster, **kw).fit(XD, np.digitize(YD, levels), qid=QID)
    if objective.startswith("binary:"):
        return xgb.XGBClassifier(n_estimators=15, objective=objective, booster=booster, **kw).fit(XB, YB)
    if objective.startswith("multi:"):
        return xgb.XGBClassifier(n_estimators=10, objective=objective, booster=booster, **kw).fit(*load_wine(return_X_y=True))
    if objective == "survival:aft":  # the wrappers cannot pass interval labels: a Booster
        data = xgb.DMatrix(XD)
        data.set_float_info("label_lower_bound", YD)
        data.set_float_info("label_upper_bound", np.where(np.arange(YD.size) % 4 == 0, np.inf, YD))  # 1/4 right-censored
        params = {"objective": objective, "booster": booster, "max_depth": 3, "aft_loss_distribution": "normal", **kw}
        return xgb.train(params, data, num_boost_round=15)
    y = (YD > 150).astype(float) if objective == "reg:logistic" else YD
    if objective in ("reg:squaredlogerror", "reg:pseudohubererror"):
        y = YD / 100  # on the raw scale their hessians are too small for any split
    if objective == "survival:cox":
        y, kw = np.where(np.arange(YD.size) % 3 == 0, -YD, YD), {"max_depth": 3, **kw}  # negative: censored
    if objective == "reg:quantileerror":
        kw = {"quantile_alpha": 0.3, **kw}  # XGBoost needs an alpha; several: a column each (below)
    return xgb.XGBRegressor(n_estimators=15, objective=objective, booster=booster, **kw).fit(XD, y)


def check(model, exact_margins: bool = True, rows: int = 300) -> None:
    onx = tree2mat.convert(model)
    assert_standard_graph(onx)
    report = tree2mat.verify(model, onx, rows=rows)
    assert report.passed, report.summary()
    assert report.row_kinds["threshold"] > 0 and report.row_kinds["nan"] > 0
    if exact_margins:  # XGBoost sums in float32 from the base margin; so does the graph
        raw = tree2mat.verify(model, tree2mat.convert(model, raw=True, dtype="float64"), rows=rows, atol=0, rtol=0)
        assert raw.passed, raw.summary()
    ens = tree2mat.load(model)  # the reference evaluator (every form's oracle) against XGBoost too
    X, _ = synthesize(ens, rows=100)
    for raw_margin in (False, True):
        assert_matches(evaluate.predict(ens, X, raw=raw_margin), reference_outputs(model, X, raw_margin, ens), X, ens)


@pytest.mark.slow
@pytest.mark.parametrize("objective", list(OBJECTIVES))
def test_objectives(objective):
    check(fit(objective))


@pytest.mark.slow
@pytest.mark.parametrize("objective", ["binary:logistic", "multi:softprob", "reg:squarederror"])
def test_dart(objective):
    # DART scales each tree by its weight; routing and labels are exact, margins within tolerance.
    check(fit(objective, booster="dart", rate_drop=0.3, random_state=0), exact_margins=False)


def test_classifier_with_reg_logistic():
    # XGBClassifier reads reg:logistic's p as binary:logistic's: predict_proba [1 - p, p], predict
    # p > 0.5; the graph is a classifier's (label, probabilities), not a regression's.
    model = xgb.XGBClassifier(n_estimators=15, objective="reg:logistic").fit(XB, YB)
    assert [o.name for o in tree2mat.convert(model).graph.output] == ["label", "probabilities"]
    check(model)


def test_classifier_with_another_regression_objective_is_refused():
    model = xgb.XGBClassifier(n_estimators=2, objective="reg:squarederror").fit(XB, YB)
    with pytest.raises(UnsupportedModelError, match="regression objective 'reg:squarederror' predicts no probabilities"):
        tree2mat.convert(model)


@pytest.mark.parametrize("cls", [xgb.XGBRFClassifier, xgb.XGBRFRegressor])
def test_random_forests(cls):
    X, y = (XB, YB) if cls is xgb.XGBRFClassifier else (XD, YD)
    check(cls(n_estimators=10, random_state=0).fit(X, y))


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["multi_output_tree", "one_output_per_tree"])
@pytest.mark.parametrize("objective", ["reg:squarederror", "binary:logistic", "binary:hinge"])
def test_multi_target(strategy, objective):
    # multi_output_tree: vector leaves add to every target; one_output_per_tree: a tree per target.
    # Multi-label: `label` [N, 3] and `probabilities` [N, 3, 2], predict_proba's p as [1 - p, p].
    cls, X, Y = (xgb.XGBRegressor, XD, Y3) if objective.startswith("reg:") else (xgb.XGBClassifier, XB, YL)
    model = cls(n_estimators=5, max_depth=3, objective=objective, multi_strategy=strategy, tree_method="hist").fit(X, Y)
    ens = tree2mat.load(model)
    assert ens.n_outputs == 3 and np.all(ens.output_index == -1) == (strategy == "multi_output_tree")
    assert len(np.unique(ens.base_score)) > 1  # one intercept per target ("[a,b,c]")
    check(model)
    check(model.get_booster())


@pytest.mark.slow
def test_several_quantiles_give_one_column_each():
    model = xgb.XGBRegressor(n_estimators=8, max_depth=3, objective="reg:quantileerror", quantile_alpha=[0.1, 0.5, 0.9]).fit(XD, YD)
    assert tree2mat.convert(model).graph.output[0].type.tensor_type.shape.dim[1].dim_value == 3
    check(model)


def test_multi_target_trees_of_xgboost2_files():
    """XGBoost 2.x kept vector leaves in `base_weights` by node id (3.x: `leaf_weights`). The
    fixture and its margins were written by XGBoost 2.1.4: XGBRegressor(n_estimators=4,
    multi_strategy="multi_output_tree", tree_method="hist", max_depth=3, random_state=0) on
    load_diabetes with targets (y, sqrt y, -y); the rows are `synthesize(ens, rows=100, seed=0)`.
    XGBoost 3.x crashes loading it, so the recorded margins are the reference."""
    data = np.load(FIXTURES / "xgboost2_multi_output_tree.npz")
    assert str(data["xgboost_version"]) == "2.1.4"
    onx = tree2mat.convert(FIXTURES / "xgboost2_multi_output_tree.json", raw=True, dtype="float64")
    np.testing.assert_array_equal(run_onnx(onx, data["X"].astype(np.float64))["variable"], data["margin"])


@pytest.mark.slow
@pytest.mark.parametrize("missing,task", [(0.0, "binary"), (-999.0, "binary"), (-999.0, "multi-target")])
def test_custom_missing_value(missing, task):
    X, y = (XB.copy(), YB) if task == "binary" else (XD.copy(), Y3)
    X[np.random.default_rng(0).random(X.shape) < 0.1] = missing
    cls, kw = (xgb.XGBClassifier, {}) if task == "binary" else (xgb.XGBRegressor, {"multi_strategy": "multi_output_tree"})
    model = cls(n_estimators=15, missing=missing, tree_method="hist", **kw).fit(X, y)
    assert tree2mat.load(model).missing_value == missing
    check(model)
    probe = X[:200].copy()
    assert tree2mat.verify(model, tree2mat.convert(model), probe).passed


@pytest.mark.slow
def test_early_stopping_predicts_with_best_iteration(tmp_path):
    model = xgb.XGBClassifier(n_estimators=200, learning_rate=0.5, early_stopping_rounds=2, eval_metric="logloss")
    model.fit(XB[:400], YB[:400], eval_set=[(XB[400:], YB[400:])], verbose=False)
    assert model.best_iteration < 199
    assert tree2mat.load(model).n_trees == model.best_iteration + 1
    check(model)
    # The Booster (and its file) predicts with every round, best_iteration or not: so does the graph.
    model.get_booster().save_model(tmp_path / "m.ubj")
    for booster in (model.get_booster(), tmp_path / "m.ubj"):
        assert tree2mat.load(booster).n_trees == model.get_booster().num_boosted_rounds() > model.best_iteration + 1
    check(model.get_booster())
    assert tree2mat.verify(tmp_path / "m.ubj", tree2mat.convert(tmp_path / "m.ubj")).passed


@pytest.mark.parametrize("cls", [xgb.XGBClassifier, xgb.XGBRegressor, xgb.XGBRanker, xgb.XGBRFClassifier, xgb.XGBRFRegressor])
def test_feature_names_reach_the_ir(cls, tmp_path):
    pd = pytest.importorskip("pandas")
    names = tuple(f"f_{i}" for i in range(XD.shape[1]))
    frame = pd.DataFrame(XD, columns=list(names))
    if cls is xgb.XGBRanker:
        model = cls(n_estimators=3).fit(frame, np.digitize(YD, [100, 200]), qid=QID)
    else:
        model = cls(n_estimators=3).fit(frame, (YD > 150).astype(int) if "Classifier" in cls.__name__ else YD)
    model.get_booster().save_model(tmp_path / "m.ubj")
    for source in (model, model.get_booster(), tmp_path / "m.ubj"):
        assert tree2mat.load(source).feature_names == names
    check(model.get_booster(), rows=100)  # the Booster insists on its names: verify passes them


@pytest.mark.slow
@pytest.mark.parametrize("objective", ["multi:softprob", "multi:softmax", "binary:logitraw", "binary:hinge"])
def test_booster_objects_and_pickles(tmp_path, objective):
    # A Booster's predictions read as XGBClassifier reads them (multi:softmax predicts the class:
    # its probabilities are the softmax of the margin, as XGBClassifier.predict_proba computes).
    model = fit(objective)
    check(model.get_booster())
    joblib.dump(model, tmp_path / "m.joblib")
    assert tree2mat.verify(tmp_path / "m.joblib", tree2mat.convert(tmp_path / "m.joblib")).passed


@pytest.mark.parametrize("suffix", [".json", ".ubj"])
@pytest.mark.parametrize("kind", ["binary:logistic", "multi_output_tree"])
def test_native_files_convert_without_xgboost(tmp_path, monkeypatch, suffix, kind):
    if kind == "multi_output_tree":
        model = xgb.XGBRegressor(n_estimators=5, multi_strategy=kind, tree_method="hist").fit(XD, Y3)
    else:
        model = fit(kind)
    path = tmp_path / f"model{suffix}"
    model.save_model(path)
    with monkeypatch.context() as m:
        m.setitem(sys.modules, "xgboost", None)  # import xgboost now fails
        onx = tree2mat.convert(path)
        with pytest.raises(ImportError):
            import xgboost  # noqa: F401
    # With xgboost back, verify compares with XGBoost's own Booster loaded from the file.
    report = tree2mat.verify(path, onx)
    assert report.passed and not report.notes, report.summary()
    raw = tree2mat.verify(path, tree2mat.convert(path, raw=True, dtype="float64"), atol=0, rtol=0)
    assert raw.passed, raw.summary()


@pytest.mark.parametrize(
    "edit,error,needle",
    [
        (lambda d: d["learner"].pop("gradient_booster"), ModelFileError, "need gradient_booster"),
        (lambda d: d["learner"]["gradient_booster"]["model"]["trees"][0].pop("split_conditions"), ModelFileError, "need split_conditions"),
        (lambda d: d["learner"]["gradient_booster"]["model"]["trees"][0].__setitem__("left_children", [1, 2]), ModelFileError, "differ in length"),
        (lambda d: d["learner"]["objective"].__setitem__("name", "binary:mystery"), UnsupportedModelError, "'binary:mystery' is not supported yet"),
        (lambda d: d["learner"].__setitem__("feature_names", ["a"]), ModelFileError, "feature_names must be 30 strings"),
        (lambda d: d["learner"]["learner_model_param"].__setitem__("num_class", "3") or d["learner"]["learner_model_param"].__setitem__("num_target", "2"),
         UnsupportedModelError, "3 classes and 2 targets"),
        (lambda d: d["learner"]["learner_model_param"].__setitem__("base_score", "abc"), ModelFileError, "base_score"),
    ],
)
def test_malformed_json_names_the_field(tmp_path, edit, error, needle):
    path = tmp_path / "m.json"
    fit("binary:logistic").save_model(path)
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    with pytest.raises(error, match=needle):
        tree2mat.load(path)


@pytest.mark.parametrize(
    "edit,needle",
    [
        (lambda t: t.__setitem__("leaf_weights", t["leaf_weights"][:-1]), "leaf_weights does not hold 3 values per leaf"),
        (lambda t: t["right_children"].__setitem__(t["left_children"].index(-1), 99), "leaf_weights does not hold 3"),
        (lambda t: t.pop("leaf_weights") and t.pop("base_weights"), "need base_weights"),
    ],
)
def test_malformed_vector_leaves_name_the_field(tmp_path, edit, needle):
    path = tmp_path / "m.json"
    xgb.XGBRegressor(n_estimators=2, multi_strategy="multi_output_tree", tree_method="hist").fit(XD, Y3).save_model(path)
    doc = json.loads(path.read_text())
    edit(doc["learner"]["gradient_booster"]["model"]["trees"][1])
    path.write_text(json.dumps(doc))
    with pytest.raises(ModelFileError, match=f"tree 1: ill-formed XGBoost model: {needle}"):
        tree2mat.load(path)


def ubj_error(path: Path, content: bytes, needle: str) -> None:
    path.write_bytes(content)
    with pytest.raises(ModelFileError, match=needle) as info:
        tree2mat.load(path)
    assert str(info.value).startswith(f"{path}: ") and "\n" not in str(info.value)


def test_truncated_ubj_is_a_one_line_model_file_error(tmp_path, monkeypatch):
    good = bytes(fit("binary:logistic").get_booster().save_raw("ubj"))
    monkeypatch.setitem(sys.modules, "xgboost", None)  # read without xgboost
    ubj_error(tmp_path / "m.ubj", b"", "an empty file")
    for cut in [*range(1, len(good), len(good) // 50), len(good) - 1]:
        ubj_error(tmp_path / "m.ubj", good[:cut], "not a valid UBJSON model file: truncated: .* at byte")
    ubj_error(tmp_path / "m.ubj", good + b"Z", f"trailing bytes after the document at byte {len(good)}")


BIG = (2**40).to_bytes(8, "big")


@pytest.mark.parametrize(
    "content,needle",
    [
        (b"garbage", "not a JSON or UBJSON model document \\(it begins b'garbage'\\)"),  # (refused unread, however long)
        (b"[$d#L" + BIG, "length 1099511627776 needs at least 4398046511104 bytes, 0 left at byte 4"),  # refused before allocating
        (b"[#L" + BIG + b"ZZ", "length 1099511627776 needs at least 1099511627776 bytes, 2 left at byte 2"),
        (b"{L" + BIG + b"abc", "length 1099511627776 needs at least 1099511627776 bytes, 3 left at byte 1"),
        (b"[#d" + bytes(4), "a length must be an integer, found marker 'd' at byte 2"),
        (b"[$S#i\x01", "typed arrays of 'S' are not supported at byte 2"),
        (b"[" * 100 + b"]" * 100, "nested deeper than 64 levels at byte 65"),
        (b"{i\x01aZi\x01aZ}", "duplicate key 'a' at byte 5"),
        (b"[Si\x02\xff\xfe]", "string is not UTF-8 at byte 2"),
        (b"[i\x01]", "not an XGBoost model"),
    ],
)
def test_malformed_ubj_is_a_one_line_model_file_error(tmp_path, monkeypatch, content, needle):
    monkeypatch.setitem(sys.modules, "xgboost", None)
    ubj_error(tmp_path / "m.ubj", content, needle)


def test_linear_boosters_are_refused():
    linear = xgb.XGBRegressor(n_estimators=3, booster="gblinear").fit(XD, YD)
    with pytest.raises(UnsupportedModelError, match="booster 'gblinear'"):
        tree2mat.convert(linear)


def test_xgboost2_vector_leaf_file_verifies_without_loading_it_in_xgboost3():
    """XGBoost 3 crashes the process loading a 2.x multi_output_tree file; verify must not try."""
    path = ROOT / "fixtures" / "xgboost2_multi_output_tree.json"
    report = tree2mat.verify(path, tree2mat.convert(path))
    assert report.passed, report.summary()
    if int(xgb.__version__.split(".")[0]) >= 3:
        assert any("reference evaluator" in n for n in report.notes)


def test_xgboost_missing_value_is_its_float32():
    """XGBoost holds ``missing`` as a float32: 1e-200 is 0 there, and 0 is missing."""
    X = XB.astype(np.float32).copy()
    X[::3, :5] = 0.0
    m = xgb.XGBClassifier(n_estimators=5, max_depth=3, missing=1e-200).fit(X, YB)
    assert tree2mat.verify(m, tree2mat.convert(m, "traverse"), X).passed
    assert not tree2mat.verify(m, tree2mat.convert(xgb.XGBClassifier(n_estimators=5, max_depth=3).fit(X, YB), "traverse"), X).passed


def test_an_ir_file_of_a_multi_output_model_verifies_against_the_reference_evaluator(tmp_path):
    """An IR file naming XGBoost as its source is no XGBoost file: verify compares with the
    reference evaluator, also for a multi-output model (whose native file's writer version
    decides whether XGBoost may load it)."""
    from tree2mat.ir.io import dumps

    path = tmp_path / "ir.json"
    path.write_text(dumps(tree2mat.load(FIXTURES / "xgboost2_multi_output_tree.json")))
    report = tree2mat.verify(path, tree2mat.convert(path))
    assert report.passed, report.summary()
    assert any("no original library model" in note for note in report.notes)


@pytest.fixture(scope="module")
def three_trees(tmp_path_factory) -> Path:
    """A real model file (three trees of a binary classifier) and its graph beside it."""
    path = tmp_path_factory.mktemp("three_trees") / "m.json"
    xgb.XGBClassifier(n_estimators=3, max_depth=3).fit(XB, YB).save_model(path)
    tree2mat.save(tree2mat.convert(path), path.with_suffix(".onnx"))
    return path


def _edited(tmp_path: Path, three_trees: Path, edit) -> Path:
    """``three_trees`` with one field edited."""
    doc = json.loads(three_trees.read_text())
    edit(doc["learner"], doc["learner"]["gradient_booster"]["model"])
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(
    "edit, needle",
    [
        (lambda lr, m: m["trees"][0]["tree_param"].__setitem__("num_nodes", "1000000"),
         "tree 0: ill-formed XGBoost model: tree_param num_nodes is 1000000, the node arrays hold"),
        (lambda lr, m: m["trees"][1]["tree_param"].__setitem__("num_nodes", "3"),
         "tree 1: ill-formed XGBoost model: tree_param num_nodes is 3, the node arrays hold"),
        (lambda lr, m: lr["learner_model_param"].__setitem__("num_class", "-5"), "learner_model_param num_class is -5; it must be 0 or more"),
        (lambda lr, m: lr["learner_model_param"].__setitem__("num_target", "0"), "learner_model_param num_target is 0; it must be 1 or more"),
        (lambda lr, m: m["gbtree_model_param"].__setitem__("num_trees", "100"), "gbtree_model_param num_trees is 100, the model holds 3 trees"),
        (lambda lr, m: m["gbtree_model_param"].__setitem__("num_trees", "2"), "gbtree_model_param num_trees is 2, the model holds 3 trees"),
        (lambda lr, m: m["trees"][1].__setitem__("id", 7), "tree 1: ill-formed XGBoost model: id 7, not its position 1"),
        (lambda lr, m: m.__setitem__("iteration_indptr", [0, 1, 2, 5]), "iteration_indptr [0, 1, 2, 5] does not rise from 0 to the 3 trees"),
        (lambda lr, m: m["trees"][2]["parents"].pop(), "tree 2: ill-formed XGBoost model: parents holds"),
        (lambda lr, m: m["trees"][0]["loss_changes"].append(0.0), "tree 0: ill-formed XGBoost model: loss_changes holds"),
    ],
)
def test_declared_counts_xgboost_refuses_are_refused_without_it(tmp_path, three_trees, monkeypatch, capsys, edit, needle):
    """Counts a file declares that disagree with what it holds: XGBoost refuses the file, and
    so does tree2mat, without xgboost installed too (convert, verify and inspect: exit 2, one line)."""
    from tree2mat.cli import main

    path = _edited(tmp_path, three_trees, edit)
    with pytest.raises(xgb.core.XGBoostError):
        xgb.Booster(model_file=bytearray(path.read_bytes()))
    monkeypatch.setitem(sys.modules, "xgboost", None)
    with pytest.raises(ModelFileError, match=re.escape(needle)):
        tree2mat.load(path)
    for args in (["convert", str(path), "-o", str(tmp_path / "x.onnx")], ["verify", str(path), str(three_trees.with_suffix(".onnx"))]):
        assert main(args) == 2
        err = capsys.readouterr().err.strip()
        assert err == f"tree2mat: error: {path}: {needle}" or (err.startswith(f"tree2mat: error: {path}: ") and needle in err and "\n" not in err), err
    assert not (tmp_path / "x.onnx").exists()


def test_a_file_xgboost_refuses_never_verifies_against_tree2mat_alone(tmp_path, three_trees, capsys):
    """num_deleted, which tree2mat does not read: the file converts, but verify loads it in
    XGBoost to compare with, which refuses it; verify says so (exit 2, XGBoost's reason in one
    line) instead of passing against tree2mat's own reading."""
    from tree2mat.cli import main

    path = _edited(tmp_path, three_trees, lambda lr, m: m["trees"][0]["tree_param"].__setitem__("num_deleted", "3"))
    with pytest.raises(xgb.core.XGBoostError, match="num_deleted"):
        xgb.Booster(model_file=str(path))
    onx = tree2mat.convert(path)
    reason = "XGBoost itself cannot load this model: Check failed: static_cast<bst_node_t>(deleted_nodes_.size()) == param_.num_deleted (0 vs. 3)"
    with pytest.raises(ModelFileError, match=re.escape(f"{path}: {reason}")):
        tree2mat.verify(path, onx)
    tree2mat.save(onx, tmp_path / "m.onnx")
    assert main(["verify", str(path), str(tmp_path / "m.onnx")]) == 2
    assert capsys.readouterr().err.strip() == f"tree2mat: error: {path}: {reason}"


def test_verify_loads_the_file_in_xgboost_by_its_contents(tmp_path):
    """A UBJSON model named .json (XGBoost's loader goes by the name and fails on it; tree2mat
    reads it by its bytes): verify compares with XGBoost's own Booster of it, not with the
    reference evaluator; an IR file naming XGBoost as its source still compares with the latter."""
    from tree2mat.ir.io import dumps

    model = fit("binary:logistic")
    path = tmp_path / "ubj.json"
    path.write_bytes(bytes(model.get_booster().save_raw("ubj")))
    with pytest.raises(xgb.core.XGBoostError):
        xgb.Booster(model_file=str(path))
    report = tree2mat.verify(path, tree2mat.convert(path))
    assert report.passed and not report.notes, report.summary()
    ir = tmp_path / "ir.json"
    ir.write_text(dumps(tree2mat.load(path)))
    report = tree2mat.verify(ir, tree2mat.convert(ir))
    assert report.passed and any("no original library model" in note for note in report.notes), report.summary()


def test_require_library_refuses_where_xgboost_s_own_predictions_cannot_be_had(tmp_path, monkeypatch, capsys):
    """`verify --require-library`: a CI gate that must prove against XGBoost's predict exits 2
    in one line where they cannot be had (xgboost not installed; tree2mat's IR), not 0 on the
    reference evaluator's word; with xgboost there, the native file passes against XGBoost."""
    from tree2mat.cli import main
    from tree2mat.ir.io import dumps

    path = tmp_path / "m.json"
    fit("binary:logistic").save_model(path)
    ir = tmp_path / "ir.json"
    ir.write_text(dumps(tree2mat.load(path)))
    onx = tmp_path / "m.onnx"
    assert main(["convert", str(path), "-o", str(onx)]) == 0
    assert main(["verify", str(path), str(onx), "--require-library"]) == 0
    assert main(["verify", str(ir), str(onx), "--require-library"]) == 2
    assert capsys.readouterr().err.strip().endswith(
        f"{ir}: --require-library: XGBoost's own predictions cannot be had: the file is not XGBoost's own model file: verify the model file XGBoost wrote")
    monkeypatch.setitem(sys.modules, "xgboost", None)
    assert main(["verify", str(path), str(onx)]) == 0  # (the reference evaluator's word, said in a note)
    assert "no original library model" in capsys.readouterr().out
    assert main(["verify", str(path), str(onx), "--require-library"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"tree2mat: error: {path}: --require-library: XGBoost's own predictions cannot be had: "
                   "XGBoost is not installed here (pip install 'tree2mat[xgboost]')"), err

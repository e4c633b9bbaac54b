"""Whole scikit-learn pipelines through skl2onnx: every family's tree step as a tree2mat form,
behind scalers, imputers, one-hot encoders and column transformers, against the pipeline's own
predictions."""

from __future__ import annotations

import json
import sys

import joblib
import numpy as np
import pytest
import skl2onnx
from lightgbm import LGBMClassifier, LGBMRegressor
from sklearn.compose import ColumnTransformer
from sklearn.datasets import load_iris
from sklearn.ensemble import (
    GradientBoostingClassifier,
    HistGradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import MinMaxScaler, OneHotEncoder, PolynomialFeatures, RobustScaler, StandardScaler
from xgboost import XGBClassifier, XGBRegressor

import tree2mat
from tree2mat.cli import main
from tree2mat.errors import DataError, MissingDependencyError, OptionError, UnsupportedModelError

from conftest import ROOT, assert_matches, run_onnx
from test_cli import one_line_error

NUM, CODE = [0, 1, 3], [2]


@pytest.fixture(autouse=True)
def skl2onnx_as_it_was():
    """register_skl2onnx changes skl2onnx for the process (its job): undone after each test, so
    other tests' skl2onnx (the bench peers) is skl2onnx's own."""
    from tree2mat.pipelines import restored

    with restored():
        yield


def table(n: int, seed: int, holes: bool) -> np.ndarray:
    """Columns: a rounded measurement, a noisy one (NaN in 10 % with ``holes``), a category code
    (0-3, as numbers), a skewed rounded amount: ties and repeated values, as real tables have."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.normal(50, 10, n).round(1), rng.normal(0, 1, n), rng.integers(0, 4, n), rng.exponential(3, n).round(2)])
    if holes:
        X[rng.random(n) < 0.1, 1] = np.nan
    return X


def target(X: np.ndarray, kind: str) -> np.ndarray:
    score = X[:, 0] + 5 * np.nan_to_num(X[:, 1]) + 2 * X[:, 2] - X[:, 3]
    if kind == "binary":
        return (score > 52).astype(int)
    if kind == "multiclass":
        return np.digitize(score, [45, 52, 60])
    return score


def imputed_scaled() -> ColumnTransformer:
    return ColumnTransformer([("num", make_pipeline(SimpleImputer(), StandardScaler()), NUM), ("code", OneHotEncoder(handle_unknown="ignore"), CODE)])


#: (id, pipeline factory, target kind, whether the rows hold NaN, form): each family, each kind of step.
CASES = [
    ("rf-impute-scale-onehot", lambda: Pipeline([("pre", imputed_scaled()), ("m", RandomForestClassifier(20, random_state=0))]), "binary", True, "sign"),
    ("rf-reg-robust", lambda: make_pipeline(RobustScaler(), RandomForestRegressor(10, max_depth=8, random_state=0)), "regression", False, "bitvector"),
    ("gb-scale-onehot", lambda: Pipeline([("pre", ColumnTransformer([("num", StandardScaler(), NUM), ("code", OneHotEncoder(), CODE)])),
                                          ("m", GradientBoostingClassifier(n_estimators=15, random_state=0))]), "multiclass", False, "traverse"),
    ("hgb-median-minmax", lambda: make_pipeline(SimpleImputer(strategy="median"), MinMaxScaler(), HistGradientBoostingRegressor(max_iter=20)),
     "regression", True, "sign"),
    ("xgb-impute-scale-onehot", lambda: Pipeline([("pre", imputed_scaled()), ("m", XGBClassifier(n_estimators=20, max_depth=4))]), "binary", True, "auto"),
    ("xgb-reg-scale", lambda: make_pipeline(StandardScaler(), XGBRegressor(n_estimators=20, max_depth=4)), "regression", True, "bitvector"),
    ("lgbm-onehot-passthrough", lambda: Pipeline([("pre", ColumnTransformer([("code", OneHotEncoder(), CODE)], remainder="passthrough")),
                                                  ("m", LGBMClassifier(n_estimators=20, num_leaves=8, verbose=-1))]), "multiclass", True, "traverse"),
    ("lgbm-reg-constant-scale", lambda: make_pipeline(SimpleImputer(strategy="constant", fill_value=-1.0), StandardScaler(),
                                                      LGBMRegressor(n_estimators=20, num_leaves=8, verbose=-1)), "regression", True, "sign"),
]


def expected(pipe, X: np.ndarray) -> dict[str, np.ndarray]:
    if hasattr(pipe, "classes_"):
        return {"label": pipe.predict(X), "probabilities": pipe.predict_proba(X)}
    return {"variable": pipe.predict(X).reshape(len(X), -1)}


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_pipeline_graph_reproduces_the_pipeline(case):
    _, make, kind, holes, form = case
    X = table(3000, 0, holes)
    pipe = make().fit(X[:2000], target(X[:2000], kind))
    onx = tree2mat.convert(pipe, form)
    meta = {p.key: p.value for p in onx.metadata_props}
    assert meta["tree2mat.pipeline"] == "1" and meta["tree2mat.exact"] == "1"
    ops = {n.op_type for n in onx.graph.node}
    assert not any(op.startswith("TreeEnsemble") for op in ops), ops  # the tree step is tree2mat's
    assert [i.name for i in onx.graph.input] == ["X"]
    # Training rows (each beside a threshold of the trees) and unseen rows, through the graph.
    got = run_onnx(onx, X)
    ens = tree2mat.load(pipe.steps[-1][1])
    assert_matches(got, expected(pipe, X), X, ens)
    report = tree2mat.verify(pipe, onx, X)
    assert report.passed, report.summary()
    # verify also compares the tree step's leaf ids with the reference evaluator's on the rows
    # scikit-learn's own preprocessing gives the trees.
    assert {o.name for o in report.outputs} == set(expected(pipe, X)) | {"routing"}


@pytest.mark.parametrize("form", ["auto", "traverse", "sign"])
def test_a_regressor_pipeline_s_output_is_variable_whatever_the_form(form):
    """skl2onnx names tensors in the order it meets them: with traverse's graph (auto's pick) a
    scaler's output took ``variable`` and left the regressor's ``variable1``, and verify failed
    ("output missing from the graph"). The graph's outputs are named as the tree step's."""
    X = table(2000, 3, False)
    pipe = make_pipeline(RobustScaler(), RandomForestRegressor(10, max_depth=6, random_state=0)).fit(X, target(X, "regression"))
    onx = tree2mat.convert(pipe, form)
    assert [o.name for o in onx.graph.output] == ["variable"]
    report = tree2mat.verify(pipe, onx, X)
    assert report.passed and {o.name for o in report.outputs} >= {"variable", "routing"}, report.summary()


def test_columns_selected_by_name_become_one_matrix():
    """A pipeline fitted on a DataFrame selects columns by name: the graph still takes one
    matrix X, its columns in the DataFrame's order."""
    pd = pytest.importorskip("pandas")
    X = table(2000, 1, True)
    df = pd.DataFrame(X, columns=["age", "noise", "code", "fare"])
    pre = ColumnTransformer([("num", make_pipeline(SimpleImputer(), StandardScaler()), ["age", "noise", "fare"]), ("code", OneHotEncoder(), ["code"])])
    pipe = Pipeline([("pre", pre), ("m", XGBClassifier(n_estimators=10, max_depth=3))]).fit(df, target(X, "binary"))
    onx = tree2mat.convert(pipe, "sign")
    assert [i.name for i in onx.graph.input] == ["X"]
    got = run_onnx(onx, X)
    assert_matches(got, expected(pipe, df), X, tree2mat.load(pipe.steps[-1][1]))
    report = tree2mat.verify(pipe, onx, X)  # rows as a matrix; the pipeline gets them by name
    assert report.passed and "routing" in {o.name for o in report.outputs}, report.summary()


def test_float32_preprocessing_is_caught_by_verify():
    """Why pipelines default to float64: skl2onnx's float32 Scaler rounds differently from
    scikit-learn, and rows beside a threshold take the other branch. verify sees it."""
    X = table(5000, 2, False)
    pipe = make_pipeline(StandardScaler(), RandomForestClassifier(30, random_state=0)).fit(X[:3000], target(X[:3000], "binary"))
    exact = tree2mat.verify(pipe, tree2mat.convert(pipe, "sign"), X)
    rounded = tree2mat.verify(pipe, tree2mat.convert(pipe, "sign", dtype="float32"), X)
    assert exact.passed, exact.summary()
    assert not rounded.passed and sum(o.mismatches for o in rounded.outputs) > 0
    assert next(o for o in rounded.outputs if o.name == "routing").mismatches > 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_register_skl2onnx_with_skl2onnx_defaults(dtype):
    """The documented API: register, then skl2onnx.to_onnx as usual (ZipMap included; it takes
    float probabilities, so a double graph's are cast for it)."""
    names = tree2mat.register_skl2onnx(form="sign")
    assert {"RandomForestClassifier", "HistGradientBoostingRegressor", "XGBClassifier", "LGBMRegressor"} <= set(names)
    X = table(1500, 3, True)
    pipe = make_pipeline(SimpleImputer(), RandomForestClassifier(10, random_state=0)).fit(X, target(X, "multiclass"))
    onx = skl2onnx.to_onnx(pipe, X[:1].astype(dtype))
    assert not any(n.op_type.startswith("TreeEnsemble") for n in onx.graph.node)
    Xt = X.astype(dtype)
    label, proba = run_onnx(onx, Xt).values()
    np.testing.assert_array_equal(label, pipe.predict(Xt))
    zipped = np.array([[row[c] for c in pipe.classes_] for row in proba])
    np.testing.assert_allclose(zipped, pipe.predict_proba(Xt), rtol=1e-6, atol=1e-7)


def test_register_covers_xgboost_and_lightgbm_steps():
    tree2mat.register_skl2onnx(form="bitvector")
    X = table(1500, 4, False)
    y = target(X, "regression")
    for model in (XGBRegressor(n_estimators=10, max_depth=3), LGBMRegressor(n_estimators=10, num_leaves=6, verbose=-1)):
        pipe = make_pipeline(StandardScaler(), model).fit(X, y)
        onx = skl2onnx.to_onnx(pipe, X[:1])
        assert "MatMul" in {n.op_type for n in onx.graph.node}
        assert not any(n.op_type.startswith("TreeEnsemble") for n in onx.graph.node)
        np.testing.assert_allclose(run_onnx(onx, X)["variable"][:, 0], pipe.predict(X), rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------------- refusals


def iris_pipeline(last=None):
    X, y = load_iris(return_X_y=True)
    return make_pipeline(StandardScaler(), last or RandomForestClassifier(n_estimators=3, random_state=0)).fit(X, y), X


def test_refusals_in_the_api():
    pipe, X = iris_pipeline()
    with pytest.raises(DataError, match="--data"):
        tree2mat.verify(pipe, tree2mat.convert(pipe))
    with pytest.raises(OptionError, match="--raw and --leaves"):
        tree2mat.convert(pipe, raw=True)
    with pytest.raises(OptionError, match="skl2onnx .* converts up to opset"):
        tree2mat.convert(pipe, opset=26)
    with pytest.raises(UnsupportedModelError, match="ends in LogisticRegression"):
        tree2mat.convert(iris_pipeline(LogisticRegression())[0])
    strings = make_pipeline(OneHotEncoder(), RandomForestClassifier(n_estimators=2)).fit(np.array([["a"], ["b"], ["a"]]), [0, 1, 0])
    with pytest.raises(UnsupportedModelError, match="string categories"):
        tree2mat.convert(strings)
    two = make_pipeline(StandardScaler(), RandomForestClassifier(n_estimators=2)).fit(X, np.column_stack([X[:, 0] > 5, X[:, 1] > 3]))
    with pytest.raises(UnsupportedModelError, match="2 outputs"):
        tree2mat.convert(two)


def test_without_skl2onnx_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "skl2onnx", None)
    with pytest.raises(MissingDependencyError, match=r"needs skl2onnx, which is not installed: pip install 'tree2mat\[pipelines\]'$"):
        tree2mat.convert(iris_pipeline()[0])


def test_cli_pipeline_end_to_end(tmp_path, capsys):
    X = table(3000, 5, True)
    pipe = Pipeline([("pre", imputed_scaled()), ("m", LGBMClassifier(n_estimators=15, num_leaves=8, verbose=-1))]).fit(X[:2000], target(X[:2000], "binary"))
    joblib.dump(pipe, tmp_path / "pipe.joblib")
    np.save(tmp_path / "rows.npy", X)
    out = tmp_path / "pipe.onnx"
    assert main(["convert", str(tmp_path / "pipe.joblib"), "-o", str(out), "--form", "sign", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["pipeline"] == "Pipeline(pre=ColumnTransformer, m=LGBMClassifier)" and info["form"] == "sign"
    assert info["bytes"] == out.stat().st_size and info["n_features"] == 4
    assert info["inputs"] == [{"name": "X", "shape": [None, 4], "dtype": "float64"}]
    assert [o["name"] for o in info["outputs"]] == ["label", "probabilities"]
    code = main(["verify", str(tmp_path / "pipe.joblib"), str(out), "--data", str(tmp_path / "rows.npy"), "--no-progress"])
    assert code == 0 and capsys.readouterr().out.rstrip().endswith("PASS")
    np.save(tmp_path / "narrow.npy", X[:, :3])
    code = main(["verify", str(tmp_path / "pipe.joblib"), str(out), "--data", str(tmp_path / "narrow.npy")])
    one_line_error(capsys, code, 2, "[N, 4]")
    code = main(["verify", str(tmp_path / "pipe.joblib"), str(out)])
    one_line_error(capsys, code, 2, "--data")


def test_cli_refusals_leave_no_file(tmp_path, capsys):
    pipe, _ = iris_pipeline(LogisticRegression())
    joblib.dump(pipe, tmp_path / "p.joblib")
    code = main(["convert", str(tmp_path / "p.joblib"), "-o", str(tmp_path / "p.onnx")])
    one_line_error(capsys, code, 2, "ends in LogisticRegression")
    joblib.dump(iris_pipeline()[0], tmp_path / "q.joblib")
    code = main(["convert", str(tmp_path / "q.joblib"), "-o", str(tmp_path / "q.onnx"), "--leaves"])
    one_line_error(capsys, code, 2, "--raw and --leaves")
    code = main(["inspect", str(tmp_path / "q.joblib")])
    one_line_error(capsys, code, 2, "Pipeline", "StandardScaler", "RandomForestClassifier", "pipeline[-1]")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.joblib", "q.joblib"]


def test_readme_pipeline_example(tmp_path, capsys):
    """docs/pipelines.md's end-to-end example (examples/pipeline_demo.py, then convert and verify)."""
    import runpy

    demo = runpy.run_path(str(ROOT / "examples" / "pipeline_demo.py"))
    demo["main"](str(tmp_path))
    assert main(["convert", str(tmp_path / "pipeline.joblib"), "-o", str(tmp_path / "pipeline.onnx"), "--no-progress"]) == 0
    assert "form traverse, 100 trees, 10 features, opset 19" in capsys.readouterr().out
    assert main(["verify", str(tmp_path / "pipeline.joblib"), str(tmp_path / "pipeline.onnx"), "--data", str(tmp_path / "rows.npy")]) == 0
    out = capsys.readouterr().out
    # every walk agreed: one row per output, as docs/pipelines.md shows it
    assert "routing        cpu          442         0      0" in out and out.count("\nrouting ") == 1
    assert out.rstrip().endswith("PASS")


def test_convert_leaves_skl2onnx_as_it_was():
    """A pipeline convert registers tree2mat's converters for its own conversion only: skl2onnx
    alone still emits its TreeEnsemble afterwards (the bench peer must stay skl2onnx's)."""
    pipe, X = iris_pipeline()

    def skl2onnx_alone() -> set[str]:
        return {n.op_type for n in skl2onnx.to_onnx(pipe.steps[-1][1], X[:1].astype(np.float32)).graph.node}

    assert "TreeEnsembleClassifier" in skl2onnx_alone()  # (no test left tree2mat's converters registered)
    tree2mat.convert(pipe)
    assert "TreeEnsembleClassifier" in skl2onnx_alone()


def test_xgboost_after_sparse_rows_is_refused():
    """XGBoost reads the entries a sparse matrix leaves out as missing, not 0: such a pipeline
    disagrees with any dense graph, so it is refused; dense one-hot rows convert exactly."""
    X = table(800, 6, False)
    y = target(X, "binary")
    sparse = make_pipeline(OneHotEncoder(handle_unknown="ignore"), XGBClassifier(n_estimators=5, max_depth=3)).fit(X[:, CODE], y)
    with pytest.raises(UnsupportedModelError, match="sparse_output=False"):
        tree2mat.convert(sparse)
    dense = make_pipeline(OneHotEncoder(handle_unknown="ignore", sparse_output=False), XGBClassifier(n_estimators=5, max_depth=3)).fit(X[:, CODE], y)
    assert tree2mat.verify(dense, tree2mat.convert(dense), X[:, CODE]).passed


def test_polynomial_features_are_tree2mat_s_own_operators():
    """skl2onnx writes PolynomialFeatures with ReduceProd (float32: its float64 graph fails in
    skl2onnx's own shape inference): verify runs such a graph without --foreign-graph."""
    from tree2mat.verify.runners import foreign_operators

    X = table(500, 0, False)
    pipe = make_pipeline(PolynomialFeatures(2), RandomForestRegressor(5, max_depth=4, random_state=0)).fit(X, target(X, "regression"))
    onx = tree2mat.convert(pipe, dtype="float32")
    assert "ReduceProd" in {n.op_type for n in onx.graph.node} and foreign_operators(onx) == []
    report = tree2mat.verify(pipe, onx, X)  # (float32 products round otherwise than scikit-learn's: a mismatch may be seen)
    assert {o.name for o in report.outputs} == {"variable", "routing"}

"""The ``proximity`` output (``convert --proximity``): for each row and reference row, the
fraction of trees in which the two share a leaf (Decision Machines eq. 6's delta, averaged over
the trees), on every exact form, float32 and float64 input, against the libraries' own leaf
numbers (scikit-learn's ``apply``, XGBoost's and LightGBM's ``pred_leaf``): the kernel is
written here in numpy from those numbers alone, on rows at every threshold, NaN and +-inf
(verify's synthesized rows)."""

from __future__ import annotations

import functools

import lightgbm as lgb
import numpy as np
import onnx
import pytest
import xgboost as xgb
from sklearn.datasets import load_diabetes, load_iris
from sklearn.ensemble import ExtraTreesRegressor, GradientBoostingClassifier, RandomForestClassifier

import tree2mat
from tree2mat.forms import _exit
from tree2mat.verify import synthesize

from conftest import run_onnx

EXACT = [name for name, spec in tree2mat.FORMS.items() if spec.exact]
XI, YI = load_iris(return_X_y=True)
XD, YD = load_diabetes(return_X_y=True)
HOLES = XI.copy()
HOLES[np.random.default_rng(0).random(XI.shape) < 0.15] = np.nan

MODELS = {
    "RandomForestClassifier": lambda: RandomForestClassifier(n_estimators=6, max_depth=5, random_state=0).fit(HOLES, YI),
    "ExtraTreesRegressor": lambda: ExtraTreesRegressor(n_estimators=5, max_depth=5, random_state=0).fit(XD, YD),
    "GradientBoostingClassifier": lambda: GradientBoostingClassifier(n_estimators=3, max_depth=3, random_state=0).fit(XI, YI),
    "XGBClassifier": lambda: xgb.XGBClassifier(n_estimators=4, max_depth=3).fit(HOLES, YI),
    "LGBMClassifier": lambda: lgb.LGBMClassifier(n_estimators=4, num_leaves=7, min_child_samples=5, verbose=-1).fit(HOLES, YI),
}


@functools.cache
def fitted(name: str):
    return MODELS[name]()


def library_leaves(model, X: np.ndarray) -> np.ndarray:
    """Each row's leaf in each tree [N, trees], numbered as the library numbers them."""
    with np.errstate(over="ignore", invalid="ignore"):
        if isinstance(model, lgb.LGBMModel):
            return np.asarray(model.predict(X, pred_leaf=True)).reshape(X.shape[0], -1)
        if isinstance(model, xgb.XGBModel):
            return model.get_booster().predict(xgb.DMatrix(X, missing=np.nan), pred_leaf=True).astype(np.int64).reshape(X.shape[0], -1)
        return model.apply(X).reshape(X.shape[0], -1)  # (GradientBoostingClassifier: [N, stages, classes])


def kernel(a: np.ndarray, b: np.ndarray, dtype: type) -> np.ndarray:
    """For each row of ``a`` and of ``b`` (leaves [N, T], [R, T]), the trees where both leaves are
    equal, over T: counted as integers, divided once in ``dtype``."""
    same = (a[:, None, :] == b[None, :, :]).sum(axis=2)
    return same.astype(dtype) / dtype(a.shape[1])


def rows(model, dtype: type) -> tuple[np.ndarray, np.ndarray]:
    """Rows to score (synthesized: every threshold, NaN and +-inf where the model takes them) and
    reference rows (others, spread over every kind)."""
    ens = tree2mat.load(model)
    X, kinds = synthesize(ens, 300, dtype=np.dtype(dtype), seed=0)
    assert kinds["threshold"] > 0 and bool(kinds.get("nan")) == ens.accepts_nan
    ref = synthesize(ens, 300, dtype=np.dtype(dtype), seed=1)[0]
    return X, ref[np.unique(np.linspace(0, ref.shape[0] - 1, 40).astype(np.int64))]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("form", EXACT)
@pytest.mark.parametrize("name", list(MODELS))
def test_proximity_is_the_library_s_leaf_kernel(name, form, dtype):
    model = fitted(name)
    X, ref = rows(model, dtype)
    onx = tree2mat.convert(model, form, dtype=np.dtype(dtype).name, proximity=ref)
    got = run_onnx(onx, X)["proximity"]
    expected = kernel(library_leaves(model, X), library_leaves(model, ref), dtype)
    assert got.dtype == dtype and got.shape == (X.shape[0], ref.shape[0])
    assert np.array_equal(got, expected)
    assert 0 < np.count_nonzero(expected == 1) < expected.size and np.count_nonzero(expected == 0)  # (rows apart and alike)


@pytest.mark.parametrize("form", EXACT)
def test_proximity_beside_leaves_and_raw(form):
    """With ``--leaves`` (and ``--raw``) too: the same kernel, and the ``leaves`` output its own."""
    model = fitted("RandomForestClassifier")
    X, ref = rows(model, np.float32)
    out = run_onnx(tree2mat.convert(model, form, leaves=True, raw=True, proximity=ref), X)
    assert np.array_equal(out["proximity"], kernel(library_leaves(model, X), library_leaves(model, ref), np.float32))
    assert np.array_equal(out["proximity"], kernel(out["leaves"], tree2mat.ir.evaluate.apply(tree2mat.load(model), ref), np.float32))


def test_treeensemble_writes_leaf_numbers_for_proximity():
    """At opset 21 a scikit-learn forest's treeensemble graph sums in its node (no leaves to
    compare); with proximity it takes the node that writes leaf numbers, as with --leaves."""
    model = fitted("ExtraTreesRegressor")
    X, ref = rows(model, np.float32)
    summed = tree2mat.convert(model, "treeensemble", opset=21)
    onx = tree2mat.convert(model, "treeensemble", opset=21, proximity=ref)
    assert "TreeEnsemble" in {n.op_type for n in summed.graph.node}
    assert {n.op_type for n in onx.graph.node} >= {"TreeEnsembleRegressor"} and "TreeEnsemble" not in {n.op_type for n in onx.graph.node}
    assert np.array_equal(run_onnx(onx, X)["proximity"], kernel(library_leaves(model, X), library_leaves(model, ref), np.float32))


def test_the_graph_carries_its_reference_rows():
    from tree2mat.contract import PROXIMITY_KEY, read_proximity_rows

    model = fitted("LGBMClassifier")
    _, ref = rows(model, np.float64)
    for dtype in ("float32", "float64"):
        onx = tree2mat.convert(model, "sign", dtype=dtype, proximity=ref)
        meta = {p.key: p.value for p in onx.metadata_props}
        back = read_proximity_rows(meta[PROXIMITY_KEY], 4, 100)
        assert back.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(back, ref.astype(dtype))  # (NaN in the same cells)
        assert [o.name for o in onx.graph.output][-1] == "proximity"
        assert onx.graph.output[-1].type.tensor_type.elem_type == onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def test_reference_rows_as_a_data_frame_and_a_file(tmp_path):
    import pandas as pd

    model = fitted("RandomForestClassifier")
    X, ref = rows(model, np.float32)
    expected = kernel(library_leaves(model, X), library_leaves(model, ref), np.float32)
    np.save(tmp_path / "ref.npy", ref)
    pd.DataFrame(ref.astype(np.float64)).to_csv(tmp_path / "ref.csv", index=False, header=["a", "b", "c", "d"], float_format="%.9g")
    for given in (pd.DataFrame(ref), tmp_path / "ref.npy", str(tmp_path / "ref.csv")):
        assert np.array_equal(run_onnx(tree2mat.convert(model, proximity=given), X)["proximity"], expected), given


@pytest.mark.parametrize(("kwargs", "says"), [
    ({"form": "soft"}, "--proximity needs an exact form: the soft form has no exit leaf"),
    ({"form": "softmax"}, "--proximity needs an exact form"),
    ({"rows": np.zeros((0, 4))}, "the reference rows have shape [0, 4]"),
    ({"rows": np.zeros((3, 5))}, "the model takes rows of 4 features"),
    ({"rows": np.zeros(4)}, "the reference rows have shape [4]"),
    ({"rows": [["a", "b", "c", "d"]]}, "--proximity: could not convert string"),
    ({"rows": np.zeros((_exit.MAX_PROXIMITY_PAIRS // 6 + 1, 4))}, "trees = 1,048,578 pairs, past 1,048,576"),
])
def test_refusals_in_one_line(kwargs, says):
    model = fitted("RandomForestClassifier")
    with pytest.raises(tree2mat.errors.OptionError) as err:
        tree2mat.convert(model, kwargs.get("form", "auto"), proximity=kwargs.get("rows", XI[:5]))
    assert says in str(err.value) and "\n" not in str(err.value)


def test_refused_for_files_that_are_not_reference_rows(tmp_path):
    model = fitted("RandomForestClassifier")
    np.save(tmp_path / "empty.npy", np.zeros((0, 4)))
    (tmp_path / "none.csv").write_text("a,b,c,d\n")
    (tmp_path / "rows.txt").write_text("1,2,3,4\n")
    for path, says in ((tmp_path / "empty.npy", "non-empty"), (tmp_path / "none.csv", "no rows"), (tmp_path / "absent.npy", "no such file"),
                       (tmp_path / "rows.txt", "unknown data file type")):
        with pytest.raises(tree2mat.errors.OptionError, match="--proximity: ") as err:
            tree2mat.convert(model, proximity=path)
        assert says in str(err.value), str(err.value)


def test_refused_for_pipelines_and_attention_forests():
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from tree2mat import attention

    pipe = make_pipeline(StandardScaler(), RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0)).fit(XI, YI)
    with pytest.raises(tree2mat.errors.OptionError, match="not to a pipeline"):
        tree2mat.convert(pipe, proximity=XI[:5])
    forest = RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0).fit(XI, YI)
    abrf = attention.fit(forest, XI, YI, variant=1, epsilon=0.5, tau=1.0)
    with pytest.raises(tree2mat.errors.OptionError, match="not to an attention forest"):
        tree2mat.convert(abrf, proximity=XI[:5])

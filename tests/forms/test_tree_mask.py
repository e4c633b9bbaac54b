"""The tree mask (``convert --tree-mask``): a second graph input that keeps or drops trees,
against the libraries' own staged predictions (XGBoost's ``iteration_range``, LightGBM's
``num_iteration`` and ``start_iteration``, scikit-learn's ``staged_predict_proba`` and
``staged_predict``, CatBoost's ``ntree_end``) on every exact form, float32 and float64, one
mask for the request ([T]) or one per row ([N, T]), on rows on every threshold and its float32
neighbours, NaN and +-inf (``verify.synthesize``). Also: a mask of every tree is the model; what
is refused; the default graph has no second input."""

from __future__ import annotations

import catboost
import lightgbm as lgb
import numpy as np
import onnxruntime as ort
import pytest
import xgboost as xgb
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris
from sklearn.ensemble import GradientBoostingRegressor, HistGradientBoostingClassifier, RandomForestRegressor

import tree2mat
from tree2mat.cli import main
from tree2mat.errors import OptionError, UnsupportedModelError
from tree2mat.verify import default_atol, synthesize

from conftest import with_holes

XB, YB = load_breast_cancer(return_X_y=True)
XI, YI = load_iris(return_X_y=True)
XD, YD = load_diabetes(return_X_y=True)
EXACT = [name for name, spec in tree2mat.FORMS.items() if spec.exact]


class Staged:
    """A fitted model and its library's prediction after its first ``k`` rounds (of ``rounds``),
    probabilities for a classifier, values for a regressor; ``nan``: whether the library takes
    NaN cells."""

    def __init__(self, model, rounds: int, predict, nan: bool = True):
        self.model, self.rounds, self.predict, self.nan = model, rounds, predict, nan


def _xgb_classifier() -> Staged:
    m = xgb.XGBClassifier(n_estimators=12, max_depth=4).fit(with_holes(XI, np.random.default_rng(1)), YI)
    return Staged(m, 12, lambda X, k: m.predict_proba(X, iteration_range=(0, k)))


def _xgb_regressor() -> Staged:
    m = xgb.XGBRegressor(n_estimators=15, max_depth=3, base_score=150.0).fit(with_holes(XD, np.random.default_rng(2)), YD)
    return Staged(m, 15, lambda X, k: m.predict(X, iteration_range=(0, k)))


def _lgb_classifier() -> Staged:
    m = lgb.LGBMClassifier(n_estimators=15, num_leaves=15, verbose=-1).fit(with_holes(XB, np.random.default_rng(3), zeros=True), YB)
    return Staged(m, 15, lambda X, k: m.predict_proba(X, num_iteration=k))


def _lgb_multiclass() -> Staged:
    m = lgb.LGBMClassifier(n_estimators=8, num_leaves=7, verbose=-1).fit(with_holes(XI, np.random.default_rng(4)), YI)
    return Staged(m, 8, lambda X, k: m.predict_proba(X, num_iteration=k))


def _hgb_classifier() -> Staged:
    m = HistGradientBoostingClassifier(max_iter=10, random_state=0).fit(with_holes(XI, np.random.default_rng(5)), YI)
    return Staged(m, m.n_iter_, lambda X, k: next(p for j, p in enumerate(m.staged_predict_proba(X), 1) if j == k))


def _gb_regressor() -> Staged:
    m = GradientBoostingRegressor(n_estimators=10, max_depth=3, random_state=0).fit(XD, YD)
    return Staged(m, 10, lambda X, k: next(p for j, p in enumerate(m.staged_predict(X), 1) if j == k), nan=False)


def _catboost_classifier() -> Staged:
    m = catboost.CatBoostClassifier(iterations=10, depth=4, verbose=False, random_seed=0, thread_count=1,
                                    allow_writing_files=False).fit(with_holes(XB, np.random.default_rng(6)), YB)
    return Staged(m, 10, lambda X, k: m.predict_proba(X, ntree_end=k))


MODELS = {
    "xgboost multiclass": _xgb_classifier,
    "xgboost regressor": _xgb_regressor,
    "lightgbm binary, zeros": _lgb_classifier,
    "lightgbm multiclass": _lgb_multiclass,
    "sklearn HGB multiclass": _hgb_classifier,
    "sklearn GB regressor": _gb_regressor,
    "catboost binary": _catboost_classifier,
}


@pytest.fixture(scope="module")
def fitted():
    cache: dict[str, Staged] = {}

    def get(name: str) -> Staged:
        if name not in cache:
            cache[name] = MODELS[name]()
        return cache[name]

    return get


def rows(staged: Staged, ens, dtype=np.float32) -> np.ndarray:
    X = synthesize(ens, rows=400, dtype=np.dtype(dtype))[0]
    return X if staged.nan else X[np.isfinite(X).all(axis=1)]


def run(onx, X: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
    session = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, {"input": X, "tree_mask": mask})))


def trees_of_rounds(ens, rounds: int, first: int, end: int) -> np.ndarray:
    """The mask of rounds first..end-1: the IR keeps the libraries' tree order, round by round."""
    per_round, rest = divmod(ens.n_trees, rounds)
    assert rest == 0, (ens.n_trees, rounds)
    return (np.arange(ens.n_trees) // per_round >= first) & (np.arange(ens.n_trees) // per_round < end)


def values(out: dict[str, np.ndarray]) -> np.ndarray:
    return out["probabilities"] if "probabilities" in out else out["variable"][:, 0]


def check(got: np.ndarray, want: np.ndarray, ens, dtype, where: str) -> None:
    """``got`` within verify's default tolerance of the library's ``want`` as the graph's dtype
    holds it (past float32's range: inf, as a linear leaf of an extreme row gives)."""
    atol = default_atol(ens, "float32" if np.dtype(dtype) == np.float32 else "float64")
    with np.errstate(over="ignore"):
        want = np.asarray(want).astype(got.dtype)
    np.testing.assert_allclose(got, want.reshape(got.shape), rtol=1e-6 if np.dtype(dtype) == np.float32 else 1e-12, atol=atol, err_msg=where)


def assert_labels(got: np.ndarray, proba: np.ndarray, classes: np.ndarray) -> None:
    """The library's label (the first largest probability), but where its probabilities of the two
    labels lie within 1e-12 of each other: a tie, which float64 summation breaks one way and the
    graph's exact sums the other (the first rounds of a booster whose classes start from equal
    scores: docs/exactness.md)."""
    want = classes[np.argmax(proba, axis=1)]
    differ = np.flatnonzero(got != want)
    if differ.size:
        taken = np.searchsorted(classes, got[differ])
        gap = proba[differ].max(axis=1) - proba[differ, taken]
        assert (gap <= 1e-12).all(), (differ[gap > 1e-12][:5], gap.max())


@pytest.mark.slow
@pytest.mark.parametrize("form", EXACT)
@pytest.mark.parametrize("name", list(MODELS))
def test_a_mask_of_the_first_rounds_gives_the_library_s_staged_predictions(fitted, name, form):
    staged = fitted(name)
    ens = tree2mat.load(staged.model)
    for dtype in ("float32", "float64"):
        onx = tree2mat.convert(staged.model, form=form, dtype=dtype, tree_mask="request")
        X = rows(staged, ens, dtype)
        for k in sorted({1, 2, staged.rounds // 2, staged.rounds}):
            got = run(onx, X, trees_of_rounds(ens, staged.rounds, 0, k))
            check(values(got), np.asarray(staged.predict(X, k)), ens, dtype, f"{name} {form} {dtype}: {k} rounds")
            if "label" in got and "probabilities" in got:
                assert_labels(got["label"], np.asarray(staged.predict(X, k)), staged.model.classes_)


@pytest.mark.parametrize("form", ["traverse", "sign"])
@pytest.mark.parametrize("name", ["xgboost multiclass", "lightgbm binary, zeros", "sklearn HGB multiclass"])
def test_one_mask_per_row_gives_each_row_its_own_stage(fitted, name, form):
    """[N, T]: each row its own number of rounds, as the library predicts it after so many."""
    staged = fitted(name)
    ens = tree2mat.load(staged.model)
    onx = tree2mat.convert(staged.model, form=form, tree_mask="rows")
    X = rows(staged, ens)
    k = np.random.default_rng(0).integers(1, staged.rounds + 1, X.shape[0])
    mask = np.stack([trees_of_rounds(ens, staged.rounds, 0, j) for j in k])
    got = values(run(onx, X, mask))
    for j in np.unique(k):
        check(got[k == j], np.asarray(staged.predict(X[k == j], j)), ens, np.float32, f"{name} {form}: rows at {j} rounds")


@pytest.mark.parametrize("form", EXACT)
def test_a_mask_without_the_first_trees_is_xgboost_s_later_rounds(fitted, form):
    """Dropping the tree the base score is folded into keeps the base score: rounds 3..8 are
    XGBoost's ``iteration_range=(3, 9)``."""
    staged = fitted("xgboost regressor")
    ens = tree2mat.load(staged.model)
    X = rows(staged, ens)
    onx = tree2mat.convert(staged.model, form=form, tree_mask="request")
    got = run(onx, X, trees_of_rounds(ens, staged.rounds, 3, 9))["variable"][:, 0]
    check(got, staged.model.predict(X, iteration_range=(3, 9)), ens, np.float32, form)


def test_lightgbm_s_window_of_iterations():
    m = lgb.LGBMRegressor(n_estimators=12, num_leaves=15, verbose=-1).fit(with_holes(XD, np.random.default_rng(7)), YD)
    ens = tree2mat.load(m)
    X = synthesize(ens, rows=400)[0]
    onx = tree2mat.convert(m, tree_mask="request")
    got = run(onx, X, trees_of_rounds(ens, 12, 4, 10))["variable"][:, 0]
    check(got, m.predict(X, start_iteration=4, num_iteration=6), ens, np.float32, "lightgbm iterations 4..9")


def test_every_tree_kept_is_the_model_and_verify_proves_it(fitted):
    staged = fitted("lightgbm multiclass")
    onx = tree2mat.convert(staged.model, tree_mask="rows")
    ens = tree2mat.load(staged.model)
    X = rows(staged, ens)
    got = run(onx, X, np.ones((X.shape[0], ens.n_trees), bool))
    check(got["probabilities"], staged.model.predict_proba(X), ens, np.float32, "all trees")
    report = tree2mat.verify(staged.model, onx, rows=300)
    assert report.passed, report.summary()


def test_the_default_graph_has_no_mask_and_a_masked_one_says_which(fitted):
    staged = fitted("xgboost regressor")
    plain = tree2mat.convert(staged.model)
    assert [i.name for i in plain.graph.input] == ["input"]
    assert "tree2mat.tree_mask" not in {p.key for p in plain.metadata_props}
    masked = tree2mat.convert(staged.model, tree_mask="rows")
    assert [i.name for i in masked.graph.input] == ["input", "tree_mask"]
    dims = [d.dim_param or d.dim_value for d in masked.graph.input[1].type.tensor_type.shape.dim]
    assert dims == ["N", tree2mat.load(staged.model).n_trees]
    assert {p.key: p.value for p in masked.metadata_props}["tree2mat.tree_mask"] == "rows"


def test_what_is_refused():
    forest = RandomForestRegressor(n_estimators=4, max_depth=3, random_state=0).fit(XD, YD)
    with pytest.raises(UnsupportedModelError, match="averages its trees"):
        tree2mat.convert(forest, tree_mask="request")
    with pytest.raises(OptionError, match="--tree-mask 'some'"):
        tree2mat.convert(forest, tree_mask="some")


def test_cli_convert_with_a_mask(fitted, tmp_path, capsys):
    staged = fitted("xgboost regressor")
    staged.model.save_model(tmp_path / "model.ubj")
    out = tmp_path / "masked.onnx"
    assert main(["convert", str(tmp_path / "model.ubj"), "-o", str(out), "--tree-mask", "request", "--json"]) == 0
    assert '"tree_mask"' in capsys.readouterr().out
    assert main(["convert", str(tmp_path / "model.ubj"), "-o", str(tmp_path / "bad.onnx"), "--tree-mask", "all"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--tree-mask 'all'" in err[0]
    assert not (tmp_path / "bad.onnx").exists()


def test_verify_fails_a_graph_that_ignores_its_mask(fitted):
    """A graph that keeps every tree whatever the mask says is the model with every tree kept
    (those outputs pass) and wrong on the staged check, which fails it."""
    import onnx

    staged = fitted("xgboost multiclass")
    onx = tree2mat.convert(staged.model, form="sign", tree_mask="rows")  # (one graph: traverse's walks are subgraphs)
    always = onnx.helper.make_node("Or", ["tree_mask_trees", "always_keep"], ["tree_mask_ignored"])
    for node in onx.graph.node:
        node.input[:] = ["tree_mask_ignored" if i == "tree_mask_trees" else i for i in node.input]
    at = next(k for k, n in enumerate(onx.graph.node) if "tree_mask_trees" in n.output)
    onx.graph.node.insert(at + 1, always)
    onx.graph.initializer.append(onnx.numpy_helper.from_array(np.ones((1, 1), bool), "always_keep"))
    report = tree2mat.verify(staged.model, onx, rows=300)
    assert not report.passed
    failed = {o.name for o in report.outputs if o.mismatches}
    assert failed and all(name.endswith("(tree mask)") for name in failed), report.summary()


def test_linear_leaves_keep_lightgbm_s_stages():
    """Linear leaves (LightGBM ``linear_tree``: leaves computed from the input in float64)."""
    m = lgb.LGBMRegressor(n_estimators=10, num_leaves=7, linear_tree=True, verbose=-1).fit(with_holes(XD, np.random.default_rng(8)), YD)
    ens = tree2mat.load(m)
    X = synthesize(ens, rows=300)[0]
    for form in EXACT:
        onx = tree2mat.convert(m, form=form, tree_mask="request")
        for k in (1, 4, 10):
            got = run(onx, X, trees_of_rounds(ens, 10, 0, k))["variable"][:, 0]
            check(got, m.predict(X, num_iteration=k), ens, np.float32, f"{form}: {k} rounds")


@pytest.mark.parametrize("form", ["soft", "softmax"])
def test_the_soft_forms_mask_as_the_graph_of_the_kept_trees(fitted, form):
    """The soft forms (approximations) with the first k rounds kept: the soft graph of an
    ensemble of those trees alone (the IR cut, the base score kept)."""
    from dataclasses import replace

    staged = fitted("xgboost multiclass")
    ens = tree2mat.load(staged.model)
    X = rows(staged, ens)[:200]
    onx = tree2mat.convert(staged.model, form=form, tree_mask="rows")
    for k in (1, 5):
        keep = trees_of_rounds(ens, staged.rounds, 0, k)
        cut = replace(ens, trees=ens.trees[: keep.sum()], output_index=ens.output_index[: keep.sum()])
        alone = ort.InferenceSession(tree2mat.convert(cut, form=form).SerializeToString()).run(["probabilities"], {"input": X})[0]
        got = run(onx, X, np.broadcast_to(keep, (X.shape[0], ens.n_trees)).copy())["probabilities"]
        np.testing.assert_allclose(got, alone, rtol=1e-5, atol=1e-6)

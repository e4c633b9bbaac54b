"""An attention forest's ONNX graph against independent computations: scikit-learn's own
predictions at the contamination model's limits, each tree's own predictions weighted by w, and
``AttentionForest.predict`` (itself tested against scikit-learn in test_abrf.py) on random,
threshold, NaN and extreme rows, through ``verify`` (the leaf of every tree checked exactly);
the CLI's ``attend``; and what is refused."""

from __future__ import annotations

import json

import numpy as np
import onnxruntime as ort
import pytest
from sklearn.datasets import load_diabetes, make_friedman1
from sklearn.ensemble import ExtraTreesRegressor, RandomForestRegressor

import tree2mat
from tree2mat import attention
from tree2mat.attention import fitting
from tree2mat.attention import graph as attention_graph
from tree2mat.cli import main
from tree2mat.errors import OptionError, UnsupportedModelError
from tree2mat.ir import evaluate
from tree2mat.verify import synthesize

X, Y = make_friedman1(n_samples=400, n_features=6, noise=1.0, random_state=0)
HOLES = X.copy()
HOLES[np.random.default_rng(0).random(X.shape) < 0.1] = np.nan
EXACT = [name for name, spec in tree2mat.FORMS.items() if spec.exact]


@pytest.fixture(scope="module")
def forest():
    return RandomForestRegressor(n_estimators=15, max_depth=6, random_state=0).fit(X[:250], Y[:250])


@pytest.fixture(scope="module")
def holes_forest():
    return RandomForestRegressor(n_estimators=15, max_depth=6, random_state=0).fit(HOLES[:250], Y[:250])


def run(onx, rows: np.ndarray) -> dict[str, np.ndarray]:
    session = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, {"input": rows.astype(np.float32)})))


def test_no_contamination_and_a_hot_softmax_is_the_forest(forest):
    abrf = attention.fit(forest, X[:250], Y[:250], epsilon=0.0, tau=1e12)  # (the forest's own rows: every leaf reached)
    got = run(tree2mat.convert(abrf), X[250:])["variable"][:, 0]
    np.testing.assert_allclose(got, forest.predict(X[250:].astype(np.float32)), rtol=1e-5, atol=1e-5)


def test_full_contamination_is_the_trees_weighted_by_w(forest):
    abrf = attention.fit(forest, X[:250], Y[:250], epsilon=1.0)
    rows = X[250:].astype(np.float32)
    trees = np.stack([t.predict(rows) for t in forest.estimators_], axis=1)
    np.testing.assert_allclose(run(tree2mat.convert(abrf), rows)["variable"][:, 0], trees @ abrf.weights, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("form", EXACT)
@pytest.mark.parametrize("epsilon", [0.0, 0.5, 1.0])
def test_the_graph_is_the_attention_forest_on_every_kind_of_row(holes_forest, form, epsilon):
    abrf = attention.fit(holes_forest, HOLES[:250], Y[:250], epsilon=epsilon, tau=0.5)
    onx = tree2mat.convert(abrf, form)
    assert [o.name for o in onx.graph.output] == ["variable"]
    report = tree2mat.verify(abrf, onx, rows=300)
    assert report.passed, report.summary()
    assert report.row_kinds["nan"] > 0 and report.row_kinds["threshold"] > 0 and report.row_kinds["extreme"] > 0
    assert {o.name for o in report.outputs} == {"variable", "routing"}
    data = tree2mat.verify(abrf, onx, HOLES[250:])
    assert data.passed, data.summary()


def test_float64_graphs_and_the_leaves_output(holes_forest):
    abrf = attention.fit(holes_forest, HOLES[:250], Y[:250], epsilon=0.25, tau=0.5)
    onx = tree2mat.convert(abrf, "bitvector", dtype="float64", leaves=True)
    session = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    variable, leaves = session.run(None, {"input": HOLES[250:]})
    np.testing.assert_array_equal(leaves, evaluate.apply(abrf.ensemble, HOLES[250:]))
    np.testing.assert_allclose(variable[:, 0], abrf.predict(HOLES[250:]), rtol=1e-12, atol=1e-12)
    report = tree2mat.verify(abrf, onx, rows=200)
    assert report.passed and report.atol < 1e-11, report.summary()


def test_leaves_no_fitting_row_reached_and_means_missing_a_coordinate():
    """A leaf whose fitting rows all lack a feature has a mean without that coordinate (the
    graph's presence table); a leaf no fitting row reached leaves its tree out."""
    rng = np.random.default_rng(1)
    Xm = X.copy()
    Xm[Xm[:, 1] > 0.6, 0] = np.nan  # feature 0 missing wherever feature 1 is large
    model = ExtraTreesRegressor(n_estimators=10, max_depth=7, random_state=0).fit(Xm[:250], Y[:250])
    few = rng.choice(250, 60, replace=False)
    abrf = attention.fit(model, Xm[few], Y[few], epsilon=0.5, tau=0.3)
    assert attention_graph._has_missing(abrf)
    assert any((c == 0).any() for c in abrf.leaf_counts)
    report = tree2mat.verify(abrf, tree2mat.convert(abrf), rows=300)
    assert report.passed, report.summary()
    assert tree2mat.verify(abrf, tree2mat.convert(abrf, "sign"), Xm[250:]).passed


@pytest.mark.slow
@pytest.mark.parametrize("data", ["friedman1", "diabetes", "offset", "far offset"])
@pytest.mark.parametrize("factor", [1e-4, 1e-2, 1.0, 100.0])
def test_verify_s_tolerance_holds_however_sharp_the_softmax(data, factor):
    """verify's default atol for attention graphs, ``2 (F + 1) eps (1 + z) scale`` per row
    (tree2mat.attention.graph.default_atol): the float32 graph against the float64 model, tau
    from 1e-4 to 100 times the distance scale, on features near 0, of a few hundredths (the
    diabetes data), around 1000 (an offset) and at 10 000 +- 0.01 (an offset far beyond the
    spread: the graph centres the features); the largest error is held below half of
    ``(F + 1) eps (1 + z) scale``."""
    Xd, yd = {
        "friedman1": lambda: make_friedman1(n_samples=500, noise=1.0, random_state=0),
        "diabetes": lambda: load_diabetes(return_X_y=True),
        "offset": lambda: (make_friedman1(n_samples=500, random_state=1)[0] * 100 + 1000, make_friedman1(n_samples=500, random_state=1)[1]),
        "far offset": lambda: (make_friedman1(n_samples=500, random_state=1)[0] * 0.01 + 1e4, make_friedman1(n_samples=500, random_state=1)[1]),
    }[data]()
    model = ExtraTreesRegressor(n_estimators=40, max_depth=8, random_state=0).fit(Xd[:350], yd[:350])
    leaves = evaluate.apply(tree2mat.load(model), Xd[:350])
    tau = factor * fitting._distance_scale(tree2mat.load(model), Xd[:350], leaves)
    abrf = attention.fit(model, Xd[:350], yd[:350], epsilon=0.25, tau=tau)
    onx = tree2mat.convert(abrf)
    report = tree2mat.verify(abrf, onx, rows=1000)
    assert report.passed, report.summary()
    assert tree2mat.verify(abrf, onx, Xd[350:]).passed
    rows = np.concatenate([synthesize(abrf.ensemble, 1000)[0], Xd[350:].astype(np.float32)])
    error = np.abs(run(onx, rows)["variable"][:, 0] - abrf.predict(rows))
    unit = (Xd.shape[1] + 1) * np.finfo(np.float32).eps * (1 + abrf.nearest(rows)) * (1 + max(np.abs(t.value).max() for t in abrf.ensemble.trees))
    assert (error / unit).max() < 0.5


def test_refused_options_and_models(forest, tmp_path):
    abrf = attention.fit(forest, X[:250], Y[:250], epsilon=0.5, tau=1.0)
    with pytest.raises(OptionError, match="needs each tree's leaf: choose an exact form, not soft"):
        tree2mat.convert(abrf, "soft")
    with pytest.raises(OptionError, match="--raw does not apply"):
        tree2mat.convert(abrf, raw=True)
    with pytest.raises(UnsupportedModelError, match=r"the attention needs about .* over --max-memory .* raise --max-memory"):
        tree2mat.convert(abrf, max_memory=2**16)
    need = attention_graph.constant_bytes(abrf) + attention_graph.bytes_per_row(abrf) * 10_000
    with pytest.raises(UnsupportedModelError, match="less the attention's"):
        tree2mat.convert(abrf, "sign", max_memory=need + 1000)


# ------------------------------------------------------------------------------------- the CLI


@pytest.fixture()
def files(forest, tmp_path):
    import joblib

    joblib.dump(forest, tmp_path / "forest.joblib")
    np.savez(tmp_path / "rows.npz", X=X[250:], y=Y[250:])
    np.save(tmp_path / "X.npy", X[250:])
    np.save(tmp_path / "y.npy", Y[250:])
    lines = ["a,b,c,d,e,f,target"] + [",".join(map(repr, [*r, t])) for r, t in zip(X[250:].tolist(), Y[250:].tolist())]
    (tmp_path / "rows.csv").write_text("\n".join(lines) + "\n")
    return tmp_path


def test_attend_convert_verify(files, capsys):
    out = files / "forest.abrf.json"
    assert main(["attend", str(files / "forest.joblib"), "--data", str(files / "rows.npz"), "-o", str(out), "--json", "--folds", "3"]) == 0
    info = json.loads(capsys.readouterr().out)  # (stdout holds the JSON alone)
    assert info["schema"] == 1 and info["rows"] == 150 and info["auto"] == {"epsilon": True, "tau": True}
    abrf = attention.load(out)
    assert (abrf.epsilon, abrf.tau) == (info["epsilon"], info["tau"])
    held = attention.held_out(files / "forest.joblib", X[250:], Y[250:], folds=3)  # (nested: tests/attention/test_abrf.py)
    assert info["attention"] == pytest.approx(attention.scores(Y[250:], held))
    forest = evaluate.predict(abrf.ensemble, X[250:])["variable"][:, 0]
    assert info["forest"]["r2"] == pytest.approx(1 - np.sum((Y[250:] - forest) ** 2) / np.sum((Y[250:] - Y[250:].mean()) ** 2))
    onnx_path = files / "forest.abrf.onnx"
    assert main(["convert", str(out), "-o", str(onnx_path)]) == 0
    capsys.readouterr()
    assert main(["verify", str(out), str(onnx_path), "--rows", "200"]) == 0
    assert "PASS" in capsys.readouterr().out
    assert main(["--safe", "verify", str(out), str(onnx_path), "--data", str(files / "X.npy")]) == 0  # (no pickle read)
    capsys.readouterr()
    plain = files / "forest.onnx"
    assert main(["convert", str(files / "forest.joblib"), "-o", str(plain)]) == 0
    capsys.readouterr()
    assert main(["verify", str(out), str(plain)]) == 1
    assert "the graph is a plain forest's" in capsys.readouterr().err
    assert main(["verify", str(files / "forest.joblib"), str(onnx_path)]) == 1
    assert "the graph is an attention forest's (ABRF-1)" in capsys.readouterr().err
    for command in (["inspect", str(out)], ["bench", str(out), "--rows", "10", "--batch", "1", "--no-peers"]):
        assert main(command) == 2
        assert "an attention-based forest" in capsys.readouterr().err


@pytest.mark.parametrize(("data", "target"), [("X.npy", "y.npy"), ("rows.csv", "target"), ("rows.csv", "6")])
def test_attend_reads_rows_and_targets(files, capsys, data, target):
    out = files / "f.json"
    args = ["attend", str(files / "forest.joblib"), "--data", str(files / data), "--target", str(files / target) if target.endswith(".npy") else target]
    assert main([*args, "-o", str(out), "--epsilon", "0.5", "--tau", "2", "--folds", "2"]) == 0
    text = capsys.readouterr().out
    assert "ABRF-1 (2-fold CV)" in text and "epsilon 0.5 (given), tau 2 (given)" in text
    expected = attention.fit(files / "forest.joblib", X[250:], Y[250:], epsilon=0.5, tau=2.0)
    np.testing.assert_allclose(attention.load(out).weights, expected.weights, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(("args", "needle"), [
    (["--data", "rows.csv"], "name the column of targets with --target"),
    (["--data", "rows.csv", "--target", "nope"], "no column 'nope'"),
    (["--data", "X.npy"], "name the .npy file of their targets"),
    (["--data", "rows.npz", "--target", "z"], "no array 'z'"),
    (["--data", "rows.npz", "--epsilon", "2"], "--epsilon must be auto or a number in"),
    (["--data", "rows.npz", "--tau", "x"], "--tau 'x': give a number or auto"),
    (["--data", "rows.npz", "--variant", "4"], "--variant 4: choose one of 1, 2, 3"),
    (["--data", "rows.npz", "--loss", "l3"], "--loss 'l3'"),
    (["--data", "rows.npz", "--folds", "1"], "--folds"),
    (["--data", "missing.npz"], "no such file"),
])
def test_attend_errors_are_one_line(files, capsys, args, needle):
    args = [a if not a.endswith((".csv", ".npy", ".npz")) else str(files / a) for a in args]
    out = files / "f.json"
    assert main(["attend", str(files / "forest.joblib"), *args, "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1
    assert not out.exists()


# ------------------------------------------------------------------------------------ classifiers

LABELS = np.array(["low", "mid", "high"])[np.digitize(Y, np.quantile(Y, [1 / 3, 2 / 3]))]


@pytest.mark.parametrize("form", EXACT)
def test_a_classifier_s_graph_gives_its_labels_and_probabilities(form):
    from sklearn.ensemble import RandomForestClassifier

    model = RandomForestClassifier(n_estimators=12, max_depth=6, random_state=0).fit(HOLES[:250], LABELS[:250])
    abrf = attention.fit(model, HOLES[:250], LABELS[:250], epsilon=0.5, tau=0.5)
    onx = tree2mat.convert(abrf, form)
    assert [o.name for o in onx.graph.output] == ["label", "probabilities"]
    report = tree2mat.verify(abrf, onx, rows=300)
    assert report.passed, report.summary()
    assert {o.name for o in report.outputs} == {"label", "probabilities", "routing"}
    assert tree2mat.verify(abrf, onx, HOLES[250:]).passed
    out = run(onx, HOLES[250:])
    np.testing.assert_array_equal(out["label"], abrf.predict(HOLES[250:].astype(np.float32)))


def test_attend_a_classifier_with_text_labels(tmp_path, capsys):
    import joblib
    from sklearn.ensemble import ExtraTreesClassifier
    from sklearn.metrics import accuracy_score

    model = ExtraTreesClassifier(n_estimators=10, max_depth=5, random_state=0).fit(X[:250], LABELS[:250])
    joblib.dump(model, tmp_path / "model.joblib")
    np.savez(tmp_path / "rows.npz", X=X[250:], y=LABELS[250:])
    out = tmp_path / "model.abrf.json"
    assert main(["attend", str(tmp_path / "model.joblib"), "--data", str(tmp_path / "rows.npz"), "-o", str(out), "--folds", "3", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["forest"]["accuracy"] == pytest.approx(accuracy_score(LABELS[250:], model.predict(X[250:])))
    assert set(info["attention"]) == {"accuracy", "log_loss"}
    assert main(["attend", str(tmp_path / "model.joblib"), "--data", str(tmp_path / "rows.npz"), "-o", str(out), "--folds", "3"]) == 0
    assert "accuracy   log-loss" in capsys.readouterr().out
    onnx_path = tmp_path / "model.abrf.onnx"
    assert main(["convert", str(out), "-o", str(onnx_path)]) == 0
    assert main(["verify", str(out), str(onnx_path), "--rows", "200"]) == 0


# ------------------------------------------------------------------------------------ ABRF-2 and ABRF-3


@pytest.mark.parametrize("form", EXACT)
@pytest.mark.parametrize("variant", [2, 3])
def test_abrf_2_and_3_graphs_are_the_model(holes_forest, form, variant):
    abrf = attention.fit(holes_forest, HOLES[:250], Y[:250], variant=variant, epsilon=0.0 if variant == 2 else 0.5, tau=0.5)
    onx = tree2mat.convert(abrf, form)
    assert {p.key: p.value for p in onx.metadata_props}["tree2mat.attention"] == f"ABRF-{variant}"
    report = tree2mat.verify(abrf, onx, rows=300)
    assert report.passed, report.summary()
    assert tree2mat.verify(abrf, onx, HOLES[250:]).passed


def test_attend_variant_3(files, capsys):
    out = files / "v3.json"
    args = ["attend", str(files / "forest.joblib"), "--data", str(files / "rows.npz"), "-o", str(out), "--variant", "3", "--folds", "3"]
    assert main([*args, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    abrf = attention.load(out)
    assert info["variant"] == 3 and abrf.variant == 3 and abrf.epsilon == info["epsilon"]
    held = attention.held_out(files / "forest.joblib", X[250:], Y[250:], variant=3, folds=3)  # (epsilon, tau chosen per fold)
    assert info["attention"] == pytest.approx(attention.scores(Y[250:], held))
    assert main(["attend", str(files / "forest.joblib"), "--data", str(files / "rows.npz"), "-o", str(out), "--variant", "2", "--epsilon", "0.5"]) == 2
    assert "ABRF-2 has no contamination" in capsys.readouterr().err


def test_verify_says_how_many_rows_are_too_far_to_check_in_float32(forest):
    """A row far from every leaf mean (relative to tau) gets a tolerance past the values' range:
    verify counts such rows in a note rather than let them pass unsaid."""
    abrf = attention.fit(forest, X[:250], Y[:250], epsilon=0.5, tau=1e-3)
    rows = X[250:260].copy()
    rows[:3, 0] = 1e4
    report = tree2mat.verify(abrf, tree2mat.convert(abrf), rows)
    assert report.passed, report.summary()
    assert any(note.startswith("3 rows lie so far from every leaf mean") for note in report.notes), report.notes
    near = tree2mat.verify(abrf, tree2mat.convert(abrf), X[250:260])
    assert not any("so far from every leaf mean" in note for note in near.notes)


def test_attend_json_writes_null_for_an_undefined_r2(files, capsys):
    np.savez(files / "flat.npz", X=X[250:], y=np.full(150, 3.0))
    out = files / "flat.json"
    assert main(["attend", str(files / "forest.joblib"), "--data", str(files / "flat.npz"), "-o", str(out), "--folds", "2",
                 "--epsilon", "0.5", "--tau", "1", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)  # (strict JSON: no NaN token)
    assert info["forest"]["r2"] is None and info["attention"]["r2"] is None and info["forest"]["mae"] > 0

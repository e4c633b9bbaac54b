"""An attention graph's per-row tree weights (``convert --tree-weights``, the output
``tree_weights``) against ``AttentionForest.attention``, which is held here against each tree's own
scikit-learn predictions (``predict`` is the trees weighted by it) and, on rows with NaN and +-inf
cells, against the package docstring's rules written out with scikit-learn's ``apply``; verify's
check of the output (and that it fails a wrong one); what is refused; the CLI end to end."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from sklearn.datasets import make_friedman1
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

import tree2mat
from tree2mat import attention
from tree2mat.attention import graph as attention_graph
from tree2mat.cli import main
from tree2mat.errors import DataError, OptionError
from tree2mat.verify import synthesize

X, Y = make_friedman1(n_samples=400, n_features=6, noise=1.0, random_state=0)
HOLES = X.copy()
HOLES[np.random.default_rng(0).random(X.shape) < 0.1] = np.nan
LABELS = np.array(["low", "mid", "high"])[np.digitize(Y, np.quantile(Y, [1 / 3, 2 / 3]))]
EXACT = [name for name, spec in tree2mat.FORMS.items() if spec.exact]
F = X.shape[1]
EPS32 = float(np.finfo(np.float32).eps)
MAX32 = float(np.finfo(np.float32).max)
#: Rows the package docstring has rules for: no coordinate at all, every coordinate at +-inf
#: (no tree takes part: all trees alike), one at +-inf beside NaN (a tree takes part only where
#: its leaf's mean lacks that coordinate), +-inf or max float32 among finite ones.
SPECIAL = np.array([
    [np.nan] * F,
    [np.inf] * F,
    [-np.inf] * F,
    [np.inf, np.nan, np.nan, np.nan, np.nan, np.nan],
    [np.nan, -np.inf, np.nan, np.nan, np.nan, np.nan],
    [0.5, np.inf, 0.2, 0.7, np.nan, 0.1],
    [0.5, 0.3, -np.inf, 0.7, 0.4, 0.1],
    [0.5, 0.3, MAX32, 0.7, 0.4, 0.1],
    [-MAX32, 0.3, 0.2, np.nan, 0.4, 0.1],
], np.float32)
#: ABRF-2/3 from a small starting tau fit large feature weights z: there a float32 distance rounds
#: to many times F eps of itself (weights_bound's cross term), which the tests hold too.
TAU = {1: 0.5, 2: 1e-3, 3: 1e-3}


def run(onx, rows: np.ndarray) -> dict[str, np.ndarray]:
    session = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, {"input": rows})))


@pytest.fixture(scope="module")
def forests():
    return {
        "regressor": RandomForestRegressor(n_estimators=15, max_depth=6, random_state=0).fit(HOLES[:250], Y[:250]),
        "classifier": RandomForestClassifier(n_estimators=12, max_depth=6, random_state=0).fit(HOLES[:250], LABELS[:250]),
    }


_FITTED: dict[tuple[int, str, int], attention.AttentionForest] = {}


def fitted(forests, task: str, variant: int):
    """The forest and its ABRF-``variant`` (epsilon 0.5, ABRF-2's 0; tau: TAU), fitted once."""
    model = forests[task]
    key = (id(model), task, variant)
    if key not in _FITTED:
        y = Y if task == "regressor" else LABELS
        _FITTED[key] = attention.fit(model, HOLES[:250], y[:250], variant=variant, epsilon=0.0 if variant == 2 else 0.5, tau=TAU[variant])
    return model, _FITTED[key]


def per_tree(model, rows: np.ndarray) -> np.ndarray:
    """Each tree's own prediction (scikit-learn's), [N, T, K]."""
    with np.errstate(over="ignore", invalid="ignore"):  # (its finiteness pre-check sums rows at +-max float32)
        if isinstance(model, RandomForestRegressor):
            return np.stack([t.predict(rows) for t in model.estimators_], axis=1)[:, :, None]
        return np.stack([t.predict_proba(rows) for t in model.estimators_], axis=1)


def docstring_rule(model, abrf, rows: np.ndarray) -> np.ndarray:
    """The weights of rows with no finite coordinate beside NaN, by the package docstring's rules
    and scikit-learn's routing alone: a tree takes part where a fitting row reached its leaf and
    the distance is finite, which (every cell NaN or +-inf) is where the leaf's fitting rows lack
    every coordinate the row has at +-inf; its distance is then 0, so the softmax weighs the trees
    that take part alike, and all trees alike where none does; mixed with epsilon w."""
    fit_rows = HOLES[:250].astype(np.float32)
    out = np.empty((rows.shape[0], abrf.n_trees))
    for k, tree in enumerate(model.estimators_):
        fit_leaf, row_leaf = tree.tree_.apply(fit_rows), tree.tree_.apply(rows)  # (the tree's own apply: its estimator refuses +-inf)
        for r in range(rows.shape[0]):
            held = fit_rows[fit_leaf == row_leaf[r]]
            infinite = np.isinf(rows[r])
            out[r, k] = held.size > 0 and bool(np.isnan(held[:, infinite]).all(axis=0).all())
    parts = out.sum(axis=1, keepdims=True)
    soft = np.where(parts > 0, out / np.maximum(parts, 1), 1.0 / abrf.n_trees)
    return (1 - abrf.epsilon) * soft + abrf.epsilon * abrf.weights[None, :]


@pytest.mark.parametrize("task", ["regressor", "classifier"])
@pytest.mark.parametrize("variant", [1, 2, 3])
def test_tree_weights_are_the_model_s(forests, task, variant):
    """Within half of weights_bound (verify's default tolerance) on random, threshold, NaN,
    extreme and +-inf rows; a distribution per row; the docstring's rules on SPECIAL's first five
    rows; and the graph's prediction is its weights times each tree's own (scikit-learn's)."""
    model, abrf = fitted(forests, task, variant)
    onx = tree2mat.convert(abrf, tree_weights=True)
    assert [o.name for o in onx.graph.output][-1] == "tree_weights"
    rows = np.concatenate([synthesize(abrf.ensemble, 300, seed=variant)[0], HOLES[250:].astype(np.float32), SPECIAL])
    out = run(onx, rows)
    got, expected = out["tree_weights"], abrf.attention(rows)
    assert got.shape == (rows.shape[0], abrf.n_trees) and got.dtype == np.float32
    error = np.abs(got - expected).max(axis=1) / attention_graph.weights_bound(abrf, rows)
    assert error.max() < 0.5, (error.max(), rows[error.argmax()])
    assert (got >= 0).all()
    np.testing.assert_allclose(got.sum(axis=1), 1.0, rtol=0, atol=(abrf.n_trees + 4) * EPS32)
    rule = docstring_rule(model, abrf, SPECIAL[:5])
    np.testing.assert_allclose(expected[-len(SPECIAL):][:5], rule, rtol=0, atol=1e-12)
    np.testing.assert_allclose(got[-len(SPECIAL):][:5], rule, rtol=0, atol=(abrf.n_trees + 4) * EPS32)
    keep = ~np.isinf(rows).any(axis=1)  # (scikit-learn refuses +-inf)
    trees = per_tree(model, rows[keep])
    np.testing.assert_allclose(abrf.outputs(rows[keep]), np.einsum("nt,ntk->nk", expected[keep], trees), rtol=1e-12, atol=1e-12)
    graph = out["variable"] if task == "regressor" else out["probabilities"]
    weighed = np.einsum("nt,ntk->nk", got[keep].astype(np.float64), trees)
    np.testing.assert_allclose(graph[keep], weighed, rtol=0, atol=(abrf.n_trees + 2) * EPS32 * (1 + np.abs(trees).max()))
    values = out["variable"] if task == "regressor" else out["probabilities"]  # (within half of values_bound)
    finite = np.isfinite(abrf.outputs(rows)).all(axis=1)
    error = np.abs(values[finite] - abrf.outputs(rows[finite])).max(axis=1) / attention_graph.values_bound(abrf, rows[finite])
    assert error.max() < 0.5, (error.max(), rows[finite][error.argmax()])
    report = tree2mat.verify(abrf, onx)  # (synthesized rows: exact ties of two classes among them, which float32 may part)
    assert report.passed, report.summary()
    assert {o.name for o in report.outputs} >= {"tree_weights", "routing"}
    assert any(note.startswith("tree_weights: each row's tree weights compared") for note in report.notes)


def test_large_feature_weights_need_the_bound_s_cross_term(forests):
    """ABRF-2's large feature weights z (TAU[2]): the graph's weights lie further from the model's
    than a tolerance in proportion to the distances alone, ``2 (F + 1) eps (1 + z)`` (the values'
    rule, default_atol, without the leaf values' scale), allows; within half of weights_bound."""
    _, abrf = fitted(forests, "classifier", 2)
    assert abrf.feature_weights.max() > 1e6
    rows = synthesize(abrf.ensemble, 1000)[0]
    error = np.abs(run(tree2mat.convert(abrf, tree_weights=True), rows)["tree_weights"] - abrf.attention(rows)).max(axis=1)
    assert (error / (2 * (F + 1) * EPS32 * (1 + abrf.nearest(rows)))).max() > 2
    assert (error / attention_graph.weights_bound(abrf, rows)).max() < 0.5


@pytest.mark.parametrize("form", EXACT)
def test_every_exact_form_gives_the_forest_s_order(forests, form):
    """The forms' exits order the trees their own way (the matrix forms by size): the output is in
    the forest's; epsilon 1 (no softmax: w for every row) too."""
    model, abrf = fitted(forests, "regressor", 1)
    rows = np.concatenate([HOLES[250:].astype(np.float32), SPECIAL])
    got = run(tree2mat.convert(abrf, form, tree_weights=True), rows)["tree_weights"]
    error = np.abs(got - abrf.attention(rows)).max(axis=1) / attention_graph.weights_bound(abrf, rows)
    assert error.max() < 0.5
    full = attention.fit(model, HOLES[:250], Y[:250], epsilon=1.0)
    got = run(tree2mat.convert(full, form, tree_weights=True), rows)["tree_weights"]
    np.testing.assert_array_equal(got, np.broadcast_to(full.weights.astype(np.float32), got.shape))


def test_float64_graphs_and_the_leaves_output(forests):
    _, abrf = fitted(forests, "classifier", 2)
    onx = tree2mat.convert(abrf, "bitvector", dtype="float64", leaves=True, tree_weights=True)
    assert [o.name for o in onx.graph.output] == ["label", "probabilities", "tree_weights", "leaves"]
    rows = np.concatenate([HOLES[250:], SPECIAL.astype(np.float64)])
    got = run(onx, rows)["tree_weights"]
    assert got.dtype == np.float64
    error = np.abs(got - abrf.attention(rows)).max(axis=1) / attention_graph.weights_bound(abrf, rows, "float64")
    assert error.max() < 0.5
    report = tree2mat.verify(abrf, onx, rows=200)
    assert report.passed, report.summary()
    assert next(o for o in report.outputs if o.name == "tree_weights").max_abs_error < 1e-12


def test_the_default_graph_has_no_weights_output(forests):
    _, abrf = fitted(forests, "regressor", 1)
    assert [o.name for o in tree2mat.convert(abrf).graph.output] == ["variable"]


# ------------------------------------------------------------------------------------- verify


def scaled(onx: onnx.ModelProto, factor: float) -> onnx.ModelProto:
    """``onx`` with its ``tree_weights`` output multiplied by ``factor`` (a wrong graph)."""
    out = onnx.ModelProto()
    out.CopyFrom(onx)
    node = next(n for n in out.graph.node if "tree_weights" in n.output)
    node.output[list(node.output).index("tree_weights")] = "tree_weights_unscaled"
    out.graph.initializer.append(onnx.numpy_helper.from_array(np.asarray(factor, np.float32), "weights_factor"))
    out.graph.node.append(onnx.helper.make_node("Mul", ["tree_weights_unscaled", "weights_factor"], ["tree_weights"]))
    return out


def test_verify_fails_wrong_weights_and_takes_a_given_atol(forests):
    _, abrf = fitted(forests, "regressor", 1)
    wrong = scaled(tree2mat.convert(abrf, "sign", tree_weights=True), 1.001)
    report = tree2mat.verify(abrf, wrong, HOLES[250:])
    assert not report.passed
    by_name = {o.name: o for o in report.outputs}
    assert by_name["tree_weights"].mismatches > 0 and by_name["variable"].mismatches == 0
    assert by_name["tree_weights"].max_abs_error == pytest.approx(1e-3 * np.abs(abrf.attention(HOLES[250:].astype(np.float32))).max(), rel=1e-3)
    loose = tree2mat.verify(abrf, wrong, HOLES[250:], atol=2e-3)
    assert loose.passed and any("within --atol 0.002" in note for note in loose.notes), loose.summary()


def test_verify_counts_rows_whose_weights_float32_cannot_tell():
    forest = RandomForestRegressor(n_estimators=15, max_depth=6, random_state=0).fit(X[:250], Y[:250])
    abrf = attention.fit(forest, X[:250], Y[:250], epsilon=0.5, tau=1e-3)
    rows = X[250:260].copy()
    rows[:3, 0] = 1e4
    report = tree2mat.verify(abrf, tree2mat.convert(abrf, tree_weights=True), rows)
    assert report.passed, report.summary()
    assert any(note.startswith("3 rows' tree weights are not checked") for note in report.notes), report.notes
    assert (attention_graph.weights_bound(abrf, rows.astype(np.float32)) >= 1).sum() == 3


# ------------------------------------------------------------------------------- refused, the CLI


def test_refused_for_any_other_model(forests, tmp_path):
    import joblib

    with pytest.raises(OptionError, match=r"^--tree-weights: a RandomForestRegressor is not an attention forest"):
        tree2mat.convert(forests["regressor"], tree_weights=True)
    with pytest.raises(OptionError, match="--tree-weights: a Ensemble is not an attention forest"):
        tree2mat.convert(tree2mat.load(forests["regressor"]), tree_weights=True)
    joblib.dump(forests["regressor"], tmp_path / "forest.joblib")
    out = tmp_path / "forest.onnx"
    assert main(["convert", str(tmp_path / "forest.joblib"), "-o", str(out), "--tree-weights"]) == 2
    _, abrf = fitted(forests, "regressor", 1)
    with pytest.raises(DataError, match=r"X has shape \(3, 5\); the forest takes \[N, 6\]"):
        abrf.attention(X[:3, :5])
    assert not out.exists()


def test_refused_on_the_command_line_in_one_line(forests, tmp_path, capsys):
    import joblib

    joblib.dump(forests["classifier"], tmp_path / "forest.joblib")
    out = tmp_path / "forest.onnx"
    assert main(["convert", str(tmp_path / "forest.joblib"), "-o", str(out), "--tree-weights"]) == 2
    err = capsys.readouterr().err
    assert "--tree-weights:" in err and "forest.joblib is not an attention forest" in err and err.count("\n") == 1
    assert not out.exists()


def test_attend_convert_tree_weights_verify(forests, tmp_path, capsys):
    import joblib

    joblib.dump(forests["regressor"], tmp_path / "forest.joblib")
    np.savez(tmp_path / "rows.npz", X=HOLES[250:], y=Y[250:])
    model, graph, report = tmp_path / "f.abrf.json", tmp_path / "f.abrf.onnx", tmp_path / "report.json"
    assert main(["attend", str(tmp_path / "forest.joblib"), "--data", str(tmp_path / "rows.npz"), "-o", str(model),
                 "--epsilon", "0.5", "--tau", "1", "--folds", "2"]) == 0
    capsys.readouterr()
    assert main(["convert", str(model), "-o", str(graph), "--tree-weights", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["outputs"][-1] == {"name": "tree_weights", "shape": ["N", 15], "dtype": "float32"}
    assert main(["verify", str(model), str(graph), "--rows", "200", "--json", str(report)]) == 0
    assert "tree_weights" in capsys.readouterr().out
    checked = {o["name"]: o for o in json.loads(report.read_text())["outputs"]}
    assert checked["tree_weights"]["compared"] > 200 and checked["tree_weights"]["mismatches"] == 0
    abrf = attention.load(model)
    rows = HOLES[250:].astype(np.float32)
    got = run(onnx.load(graph), rows)["tree_weights"]
    assert (np.abs(got - abrf.attention(rows)).max(axis=1) / attention_graph.weights_bound(abrf, rows)).max() < 0.5


def _tilted(onx: onnx.ModelProto, delta: float) -> onnx.ModelProto:
    """The graph with ``delta`` added to the second class's probability before its ArgMax (the
    ``probabilities`` output untouched): a graph that parts an exact tie the other way."""
    tilted = onnx.ModelProto()
    tilted.CopyFrom(onx)
    argmax = next(n for n in tilted.graph.node if n.op_type == "ArgMax")
    assert list(argmax.input) == ["probabilities"]
    tilted.graph.initializer.append(onnx.numpy_helper.from_array(np.asarray([0.0, delta], np.float32), "tilt"))
    tilted.graph.node.insert(list(tilted.graph.node).index(argmax), onnx.helper.make_node("Add", ["probabilities", "tilt"], ["tilted"]))
    argmax.input[0] = "tilted"
    return tilted


def test_a_label_parted_at_an_exact_tie_is_a_tie_not_a_mismatch():
    """Rows below 0 reach, in every tree, a leaf of half "a" and half "b": the model's probabilities
    are an exact tie (its label the first class, "a"). A graph that parts them the other way is at
    a tie there (counted apart, failing only strict); one that flips rows whose classes are 1
    apart fails."""
    x = np.linspace(-1.0, 1.0, 40)[:, None]
    y = np.where(x[:, 0] < 0, np.tile(["a", "b"], 20), "a")
    model = RandomForestClassifier(n_estimators=3, max_depth=1, bootstrap=False, random_state=0).fit(x, y)
    abrf = attention.fit(model, x, y, epsilon=0.5, tau=1.0)
    below = x[:, 0] < 0
    assert (abrf.predict_proba(x)[below, 0] == abrf.predict_proba(x)[below, 1]).all() and (abrf.predict(x)[below] == "a").all()
    onx = tree2mat.convert(abrf)
    tilted = _tilted(onx, 1e-6)
    assert (run(tilted, x.astype(np.float32))["label"][below] == "b").all()
    report = tree2mat.verify(abrf, tilted, x)
    label = next(o for o in report.outputs if o.name == "label")
    assert report.passed and label.mismatches == 0 and label.ties == below.sum(), report.summary()
    assert not tree2mat.verify(abrf, tilted, x, strict=True).passed
    flipped = tree2mat.verify(abrf, _tilted(onx, 1.5), x)
    label = next(o for o in flipped.outputs if o.name == "label")
    assert not flipped.passed and label.mismatches == (~below).sum() and label.ties == below.sum(), flipped.summary()

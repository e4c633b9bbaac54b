"""Oblique nodes (``w . x <= t``, tree2mat.ir.core.Projections): the reference evaluator against
scikit-learn trees fitted on the projections themselves, every exact form's graph against the
evaluator on random, near-hyperplane, NaN, +-inf and extreme rows, the IR JSON, validation and
the float64 rule."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import tree2mat
from tree2mat.errors import InvalidTreeError, ModelFileError, UnsupportedModelError
from tree2mat.ir import evaluate
from tree2mat.ir.core import Projections
from tree2mat.ir.io import dumps, ensemble_from_dict
from tree2mat.verify import synthesize

from conftest import float32_projections, oblique_model, run_onnx

EXACT = [name for name, spec in tree2mat.FORMS.items() if spec.exact]


@pytest.fixture(scope="module")
def tree():
    return oblique_model("tree")


@pytest.fixture(scope="module")
def forest():
    return oblique_model("forest")


def _sklearn_leaves(model, terms, X: np.ndarray) -> np.ndarray:
    """scikit-learn's leaf of every row and tree on ``[X, projections]`` (finite rows only)."""
    XZ = np.concatenate([X.astype(np.float32), float32_projections(X, terms)], axis=1)
    trees = getattr(model, "estimators_", [model])
    return np.stack([t.apply(XZ) for t in trees], axis=1)


@pytest.mark.parametrize("which", ["tree", "forest"])
def test_reference_evaluator_routes_as_scikit_learn_on_the_projections(which, tree, forest):
    """Every synthesized row (on and one to three float32 steps around each hyperplane, NaN at
    the nodes, extreme values): the evaluator's leaf is scikit-learn's on the float32 sums."""
    model, terms, X_test, ens = tree if which == "tree" else forest
    X, kinds = synthesize(ens, 500)
    assert kinds["threshold"] > 100 and kinds["nan"] > 0 and kinds["inf"] > 0
    finite = ~np.isinf(np.concatenate([X, float32_projections(X, terms)], axis=1)).any(axis=1)  # (scikit-learn refuses +-inf)
    assert finite.sum() > 1000
    for rows in (X[finite], X_test):
        assert (evaluate.source_leaf_ids(ens, rows) == _sklearn_leaves(model, terms, rows)).all()
    assert evaluate.near_hyperplanes(ens, X).sum() > 50  # (the rows do lie at the hyperplanes)
    got = evaluate.predict(ens, X_test)
    assert (got["label"] == model.predict(np.concatenate([X_test, float32_projections(X_test, terms)], axis=1))).all()


@pytest.mark.parametrize("form", EXACT)
@pytest.mark.parametrize("which", ["tree", "forest"])
def test_every_exact_form_routes_as_the_reference(which, form, tree, forest):
    """Routing exact on every row kind, +-inf included (where a sum meets inf - inf it is NaN:
    missing); the near-hyperplane rows counted in a note."""
    model, terms, X_test, ens = tree if which == "tree" else forest
    onx = tree2mat.convert(ens, form)
    report = tree2mat.verify(ens, onx, rows=500)
    assert report.passed, report.summary()
    assert "routing" in {o.name for o in report.outputs}
    near = [n for n in report.notes if n.startswith("oblique nodes:")]
    assert len(near) == 1 and int(near[0].split()[2]) > 50, near
    report = tree2mat.verify(ens, onx, X_test)
    assert report.passed, report.summary()
    got = run_onnx(onx, X_test)
    assert (got["label"] == model.predict(np.concatenate([X_test, float32_projections(X_test, terms)], axis=1))).all()


def test_a_weight_one_float32_step_off_fails_and_is_counted_near_a_hyperplane(forest):
    """A graph built with one weight moved by one float32 step misroutes rows at that hyperplane:
    verify fails, and counts those mismatches as near a hyperplane (never passes them)."""
    _, _, _, ens = forest
    pr = ens.projections
    used = [int(t.feature[0]) - ens.n_features for t in ens.trees if t.feature[0] >= ens.n_features]
    m = used[0] if used else 1
    weight = pr.weight.copy()
    weight[m, 0] = float(np.nextafter(np.float32(weight[m, 0]), np.float32(np.inf)))
    moved = dataclasses.replace(ens, projections=Projections(pr.feature, weight)).validate()
    report = tree2mat.verify(ens, tree2mat.convert(moved, "sign"), rows=2000)
    routing = next(o for o in report.outputs if o.name == "routing")
    assert not report.passed and routing.mismatches > 0
    assert 0 < routing.near_boundary <= routing.mismatches
    assert "near a hyperplane" in report.summary()


def test_soft_forms_take_oblique_nodes_and_harden_as_the_temperature_falls(tree):
    model, terms, X_test, ens = tree
    expected = evaluate.predict(ens, X_test)["label"]
    for form in ("soft", "softmax"):
        got = run_onnx(tree2mat.convert(ens, form, temperature=1e-5), X_test)["label"]
        assert (got == expected).mean() > 0.99


def test_float64_sums_need_a_float64_graph(tree):
    """A model whose projections sum in float64: a float32 graph is refused (its sums would round
    otherwise); a float64 graph is exact."""
    _, _, X_test, ens = tree
    rng = np.random.default_rng(1)
    weight = np.where(ens.projections.feature >= 0, ens.projections.weight * (1 + rng.normal(size=ens.projections.weight.shape) * 1e-9), 0.0)
    ens64 = dataclasses.replace(ens, source_dtype=np.dtype(np.float64), projections=Projections(ens.projections.feature, weight)).validate()
    with pytest.raises(UnsupportedModelError, match="sum in float64: convert it with --dtype float64"):
        tree2mat.convert(ens64, "sign")
    for form in EXACT:
        report = tree2mat.verify(ens64, tree2mat.convert(ens64, form, dtype="float64"), rows=300)
        assert report.passed, report.summary()
    with pytest.raises(InvalidTreeError, match="is no float32 number"):
        dataclasses.replace(ens64, source_dtype=np.dtype(np.float32)).validate()


def test_ir_json_round_trip_keeps_the_projections(tree, tmp_path):
    _, _, X_test, ens = tree
    doc = json.loads(dumps(ens))
    assert len(doc["projections"]) == ens.projections.n_projections
    assert doc["projections"][0]["feature"] == ens.projections.terms(0)[0].tolist()
    back = ensemble_from_dict(doc)
    assert (evaluate.apply(back, X_test) == evaluate.apply(ens, X_test)).all()
    path = tmp_path / "oblique.json"
    path.write_text(dumps(ens))
    assert tree2mat.verify(path, tree2mat.convert(path, "traverse"), rows=200).passed


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["projections"][0].update(feature=[99]), "outside \\[0, 8\\)"),
        (lambda d: d["projections"][0].update(weight=[0.0]), "finite and non-zero"),
        (lambda d: d["projections"][0].update(weight=[0.1]), "is no float32 number"),
        (lambda d: d["projections"][0].update(feature=[1, 2], weight=[1.0]), "as many weights as features"),
        (lambda d: d.update(projections=[]), "non-empty list"),
        (lambda d: d.update(projections=None) or d["trees"][0]["feature"].__setitem__(0, 8), "outside \\[0, 8\\)"),
        (lambda d: d["trees"][0]["feature"].__setitem__(0, 8 + 10), "outside \\[0, 18\\)"),
        (lambda d: d.update(missing_value=-1.0), "NaN as the only missing value"),
    ],
)
def test_ill_formed_projections_are_refused_by_name(tree, change, message):
    doc = json.loads(dumps(tree[3]))
    change(doc)
    with pytest.raises((ModelFileError, InvalidTreeError), match=message):
        ensemble_from_dict(doc)


def test_projections_summed_in_order_differ_from_another_order():
    """The order matters (what the definition fixes): three float32 terms whose sum depends on it."""
    X = np.asarray([[1e8, 1.0, -1e8]], np.float32)
    forward = Projections(np.asarray([[0, 1, 2]]), np.asarray([[1.0, 1.0, 1.0]])).values(X)
    backward = Projections(np.asarray([[2, 0, 1]]), np.asarray([[1.0, 1.0, 1.0]])).values(X)
    assert forward[0, 0] == 0.0 and backward[0, 0] == 1.0
    assert float32_projections(X, [([0, 1, 2], [1.0, 1.0, 1.0])])[0, 0] == forward[0, 0]


def test_inspect_shows_w_and_t_and_draws_the_tree(tree, tmp_path, capsys):
    """inspect: the oblique node count and projections; ``--tree`` gives W (each oblique node's
    row its projection's weights, an axis-aligned node's a 1 at its feature) in place of S."""
    from tree2mat.cli import main

    _, terms, _, ens = tree
    path = tmp_path / "oblique.json"
    path.write_text(dumps(ens))
    assert main(["inspect", str(path), "--format", "json"]) == 0
    info = json.loads(capsys.readouterr().out)
    t = ens.trees[0]
    assert info["oblique_nodes"] == int((t.feature >= 8).sum()) > 0
    assert info["projections"]["count"] == len(terms) and info["projections"]["max_terms"] == 8
    assert main(["inspect", str(path), "--tree", "0", "--format", "npz", "-o", str(tmp_path / "m.npz")]) == 0
    mats = np.load(tmp_path / "m.npz")
    assert "S" not in mats and mats["W"].shape == (t.n_internal, 8)
    for i in range(t.n_internal):
        f = int(t.feature[i])
        expected = np.zeros(8)
        if f < 8:
            expected[f] = 1.0
        else:
            feats, weights = terms[f - 8]
            expected[feats] = weights
        assert (mats["W"][i] == expected).all(), i
    assert (mats["t"] == t.threshold).all()
    assert main(["inspect", str(path), "--tree", "0"]) == 0
    assert "W (node x feature weights" in capsys.readouterr().out
    pytest.importorskip("matplotlib")
    assert main(["inspect", str(path), "--tree", "0", "--png", str(tmp_path / "t.png")]) == 0
    assert "beside W, t, B" in capsys.readouterr().out and (tmp_path / "t.png").stat().st_size > 10_000


def _sum(X: np.ndarray, feats, weights, order, fused: bool) -> np.ndarray:
    """A float32 sum of the terms in ``order``; ``fused``: each step one rounding of s + x * w
    (a fused multiply-add: the product exact in float64, the sum then rounded to float32)."""
    s = np.zeros(X.shape[0], np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        for p in order:
            x, w = X[:, feats[p]], np.float32(weights[p])
            s = (s.astype(np.float64) + x.astype(np.float64) * np.float64(w)).astype(np.float32) if fused else s + x * w
    return s


def test_rows_another_arithmetic_routes_otherwise_are_all_flagged_near_a_hyperplane():
    """The near-boundary margin is sound and not wide: sums in reverse order, with fused
    multiply-adds, or both, decide a node otherwise only on rows near_hyperplanes flags; and it
    flags few random rows. Rows on the hyperplanes (1-3 float32 steps around them), magnitudes
    from 1e-30 to 1e30 (subnormal products), terms that overflow in one order only."""
    rng = np.random.default_rng(0)
    F, n = 6, 4000
    flagged_random = differing = 0
    for case in range(60):
        size = int(rng.integers(2, F + 1))
        feats = rng.choice(F, size=size, replace=False)
        weights = (rng.normal(size=size) * 10.0 ** rng.integers(-3, 4, size=size)).astype(np.float32).astype(np.float64)
        scale = 10.0 ** rng.uniform(-30, 30, size=(n, 1))
        X = (rng.normal(size=(n, F)) * scale).astype(np.float32)
        if case % 10 == 0:  # huge cells: partial sums overflow in some orders
            X[: n // 4] = (np.sign(rng.normal(size=(n // 4, F))) * 3e38).astype(np.float32)
        t = float(_sum(X[:1], feats, weights, range(size), False)[0])
        t = t if np.isfinite(t) else 0.0
        doc = {
            "tree2mat_ir": 1, "n_features": F, "source_dtype": "float32",
            "projections": [{"feature": feats.tolist(), "weight": weights.tolist()}],
            "trees": [{"feature": [F], "threshold": [t], "default_left": [True], "left": [-1], "right": [-2], "value": [0, 1]}],
        }
        ens = ensemble_from_dict(doc)
        # half the rows moved onto the hyperplane along their first term, then 0-3 float32 steps
        on = rng.random(n) < 0.5
        rest = _sum(X, feats[1:], weights[1:], range(size - 1), False).astype(np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            cell = ((t - rest) / weights[0]).astype(np.float32)
        for _ in range(3):
            step = rng.integers(-1, 2, size=n).astype(np.float32)
            cell = np.where(step != 0, np.nextafter(cell, step * np.float32(np.inf)), cell)
        X[on, feats[0]] = np.where(np.isfinite(cell[on]), cell[on], X[on, feats[0]])
        near = evaluate.near_hyperplanes(ens, X)
        reference = _sum(X, feats, weights, range(size), False)
        for order, fused in ((range(size)[::-1], False), (range(size), True), (range(size)[::-1], True)):
            other = _sum(X, feats, weights, order, fused)
            with np.errstate(invalid="ignore"):
                left_ref = np.where(np.isnan(reference), True, reference <= t)
                left_other = np.where(np.isnan(other), True, other <= t)
            assert not (left_ref != left_other)[~near].any(), (case, order, fused)
            differing += int((left_ref != left_other).sum())
        huge = np.zeros(n, bool)
        if case % 10 == 0:
            huge[: n // 4] = True
            assert near[huge & ~on].all()  # (sum |w x| past float32's largest number)
        flagged_random += int(near[~on & ~huge].sum())
    assert flagged_random < 0.001 * 60 * n / 2
    assert differing > 100  # (the other arithmetics do route rows otherwise: the test can fail)


@pytest.mark.parametrize("form", EXACT)
def test_a_float64_graph_of_a_float32_model_routes_as_the_reference(form, forest):
    """The graph casts float64 rows to float32 and sums there; the hyperplane rows step in
    float32 (the sum's dtype), so that they straddle the float32 sums after the cast too."""
    _, _, X_test, ens = forest
    onx = tree2mat.convert(ens, form, dtype="float64")
    report = tree2mat.verify(ens, onx, rows=300)
    assert report.passed, report.summary()
    X, kinds = synthesize(ens, 300, dtype=np.dtype(np.float64))
    start = kinds["random"]
    threshold = X[start : start + kinds["threshold"]]
    assert np.unique(threshold.astype(np.float32), axis=0).shape[0] > 0.9 * np.unique(threshold, axis=0).shape[0]


def test_a_hostile_categorical_node_beside_projections_is_one_line(tree, tmp_path, capsys):
    from tree2mat.cli import main

    doc = json.loads(dumps(tree[3]))
    doc["trees"][0]["categorical"] = [{"node": 999, "values": [1.0], "left": [True]}]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    assert main(["convert", str(path), "-o", str(tmp_path / "bad.onnx")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "categorical node index out of range" in err and "internal error" not in err
    assert not (tmp_path / "bad.onnx").exists()

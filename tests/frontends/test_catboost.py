"""CatBoost: the converted graph of every exact form against CatBoost's own predictions (labels
equal, values within tolerance) on synthesized rows (random, at and beside every border, NaN,
+-inf) and on data rows, and the reference evaluator's leaves against CatBoost's leaf indices;
every objective, symmetric and non-symmetric trees, depths 1-10, nan_mode Min/Max/Forbidden,
scale_and_bias, the probability threshold; the JSON export read without catboost, the binary
.cbm through it, pickles; categorical/text/embedding features and damaged documents refused."""

from __future__ import annotations

import json
import re
import sys

import joblib
import numpy as np
import pytest

import tree2mat
from tree2mat.errors import MissingDependencyError, ModelFileError, UnsupportedModelError
from tree2mat.frontends.catboost import OBJECTIVES
from tree2mat.ir import evaluate

from conftest import assert_standard_graph, with_holes

cb = pytest.importorskip("catboost")

EXACT = [name for name, spec in tree2mat.FORMS.items() if spec.exact]
RNG = np.random.default_rng(0)
X = with_holes(RNG.normal(size=(300, 5)), RNG)
X[:4, 2] = [0.0, -0.0, 1e30, -1e30]  # (CatBoost cannot export a model fitted on +-inf as JSON)
CLEAN = np.clip(np.nan_to_num(X), -3, 3)
Y3 = (CLEAN[:, 0] > 0).astype(int) + (CLEAN[:, 1] > 0.5)
YR = 2 * CLEAN[:, 0] + CLEAN[:, 2] - CLEAN[:, 3] * CLEAN[:, 4]
GROUPS = np.repeat(np.arange(30), 10)
RANKERS = ("YetiRank", "PairLogit", "QueryRMSE", "QuerySoftMax")


def fit(loss: str, depth: int = 3, iterations: int = 4, X=X, **kw):
    params = dict(loss_function=loss, depth=depth, iterations=iterations, random_seed=0, verbose=0, thread_count=1,
                  allow_writing_files=False, **kw)
    if loss in RANKERS:
        y = np.clip(np.round(YR), -2, 2) + 2 if loss != "QuerySoftMax" else (YR > 1).astype(float)
        return cb.CatBoostRanker(**params).fit(X, y, group_id=GROUPS)
    if loss in ("Logloss", "CrossEntropy", "MultiClass", "MultiClassOneVsAll"):
        y = {
            "Logloss": np.asarray(["no", "yes"])[(Y3 > 0).astype(int)],  # string labels
            "CrossEntropy": np.clip(0.5 + 0.2 * YR, 0, 1),  # probabilities as targets
            "MultiClass": Y3 * 3 + 1,  # integer labels 1, 4, 7
        }.get(loss, Y3)
        return cb.CatBoostClassifier(**params).fit(X, y)
    y = np.abs(np.round(YR)) if loss in ("Poisson", "Tweedie:variance_power=1.5") else YR
    return cb.CatBoostRegressor(**params).fit(X, y)


def check(model, forms=EXACT, rows: int = 150, data=X) -> None:
    """Every form's graph against CatBoost on synthesized rows and on ``data``; CatBoost's leaf
    index of every symmetric tree against the reference evaluator's."""
    ens = tree2mat.load(model)
    for form in forms:
        onx = tree2mat.convert(model, form)
        assert_standard_graph(onx)
        report = tree2mat.verify(model, onx, rows=rows)
        if not report.passed and _near_ties_only(report):
            # docs/exactness.md, limits: a float32 graph's label may differ where two classes'
            # float64 margins differ in the last bits (CatBoost's Newton steps in one-row leaves
            # of deep multiclass trees give such pairs); routing stays exact, and a float64
            # graph gives CatBoost's labels
            report = tree2mat.verify(model, tree2mat.convert(model, form, dtype="float64"), rows=rows)
        assert report.passed, f"{form}: {report.summary()}"
        assert report.row_kinds["threshold"] > 0 and report.row_kinds["nan"] > 0
        report = tree2mat.verify(model, onx, data)
        assert report.passed, f"{form} on data rows: {report.summary()}"
    if model.get_all_params().get("grow_policy", "SymmetricTree") == "SymmetricTree":
        X32 = data.astype(np.float32)
        np.testing.assert_array_equal(evaluate.source_leaf_ids(ens, X32), model.calc_leaf_indexes(X32))


def _near_ties_only(report) -> bool:
    """Whether only labels differ, routing exact (and the model a multiclass one)."""
    bad = {o.name for o in report.outputs if not o.passed}
    return bad == {"label"} and report.outputs[0].compared == report.rows


LOSSES = [*OBJECTIVES]
LOSSES[LOSSES.index("Tweedie")] = "Tweedie:variance_power=1.5"
LOSSES[LOSSES.index("Quantile")] = "Quantile:alpha=0.8"
LOSSES[LOSSES.index("Huber")] = "Huber:delta=0.5"
LOSSES[LOSSES.index("Expectile")] = "Expectile:alpha=0.3"


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("grow", ["SymmetricTree", "Depthwise"])
def test_objective(loss, grow):
    check(fit(loss, grow_policy=grow))


@pytest.mark.parametrize("loss", ["Logloss", "MultiClass", "RMSE"])
def test_lossguide(loss):
    check(fit(loss, depth=6, grow_policy="Lossguide", max_leaves=12))


@pytest.mark.parametrize("nan_mode", ["Min", "Max"])
@pytest.mark.parametrize("grow", ["SymmetricTree", "Depthwise"])
def test_nan_mode(nan_mode, grow):
    model = fit("Logloss", depth=4, nan_mode=nan_mode, grow_policy=grow)
    doc = tree2mat.frontends.catboost.model_json(model)
    treatment = {"Min": "AsFalse", "Max": "AsTrue"}[nan_mode]
    assert {f["nan_value_treatment"] for f in doc["features_info"]["float_features"] if f["has_nans"]} == {treatment}
    ens = tree2mat.load(model)
    assert all(t.default_left.all() for t in ens.trees) == (nan_mode == "Min")
    check(model)


def test_nan_mode_forbidden():
    """Fitted on rows without NaN; CatBoost still predicts NaN rows (NaN > border is false: left)."""
    model = fit("RMSE", depth=4, nan_mode="Forbidden", X=CLEAN)
    with pytest.raises(cb.CatBoostError):
        fit("RMSE", nan_mode="Forbidden")
    assert tree2mat.load(model).accepts_nan
    check(model)


@pytest.mark.parametrize("depth", [1, 6])
@pytest.mark.parametrize("loss", ["Logloss", "MultiClass", "RMSE"])
def test_depth(loss, depth):
    check(fit(loss, depth=depth, iterations=3), rows=100)


#: The issue's objectives (its "Done when": each at depths 1 to 10, every exact form).
SWEPT = ["Logloss", "CrossEntropy", "MultiClass", "MultiClassOneVsAll", "RMSE", "MAE", "Quantile:alpha=0.8", "Poisson",
         "Tweedie:variance_power=1.5", "YetiRank", "PairLogit", "QueryRMSE"]


@pytest.mark.slow
@pytest.mark.parametrize("depth", range(1, 11))
@pytest.mark.parametrize(("loss", "grow"), [(loss, "SymmetricTree") for loss in SWEPT]
                         + [(loss, "Depthwise") for loss in ["Logloss", "MultiClass", "RMSE", "Poisson", "YetiRank"]])
def test_depth_sweep(loss, grow, depth):
    check(fit(loss, depth=depth, iterations=3, grow_policy=grow), rows=100)


def test_scale_and_bias_and_threshold():
    model = fit("Logloss", depth=3)
    model.set_scale_and_bias(0.75, 0.25)
    model.set_probability_threshold(0.7)
    ens = tree2mat.load(model)
    assert ens.base_score.tolist() == [0.25] and ens.label_cutoff == pytest.approx(np.log(0.7 / 0.3))
    check(model)
    multi = fit("MultiClass", depth=3)
    multi.set_scale_and_bias(1.5, [0.5, -1.0, 2.0])
    check(multi)


def test_trees_of_depth_zero(tmp_path):
    """Trees that found no split (single leaves), symmetric and not."""
    for grow in ("SymmetricTree", "Depthwise"):
        model = fit("MultiClass", depth=2, iterations=2, grow_policy=grow)
        doc = tree2mat.frontends.catboost.model_json(model)
        if grow == "SymmetricTree":
            doc["oblivious_trees"][0] = {"splits": [], "leaf_values": [0.5, -1.0, 0.25]}
        else:
            doc["trees"][0] = {"value": [0.5, -1.0, 0.25], "weight": 3}
        path = tmp_path / "model.json"
        path.write_text(json.dumps(doc))
        ens = tree2mat.load(path)
        assert ens.trees[0].n_internal == 0 and ens.trees[0].value.tolist() == [[0.5, -1.0, 0.25]]
        report = tree2mat.verify(path, tree2mat.convert(path), rows=50)
        assert report.passed, report.summary()


# ---------------------------------------------------------------------------------------- files


def _same_ir(a, b) -> None:
    assert (a.n_features, a.n_outputs, a.link, a.task, a.label_cutoff) == (b.n_features, b.n_outputs, b.link, b.task, b.label_cutoff)
    np.testing.assert_array_equal(a.base_score, b.base_score)
    assert [c.tolist() for c in a.classes] == [c.tolist() for c in b.classes]
    for s, t in zip(a.trees, b.trees, strict=True):
        for field in ("feature", "threshold", "default_left", "left", "right", "value"):
            np.testing.assert_array_equal(getattr(s, field), getattr(t, field))


@pytest.mark.parametrize("grow", ["SymmetricTree", "Lossguide"])
def test_json_without_catboost(tmp_path, monkeypatch, grow):
    model = fit("MultiClass", depth=4, nan_mode="Max", grow_policy=grow)
    path = tmp_path / "model.json"
    model.save_model(str(path), format="json")
    expected = tree2mat.load(model)
    onx = tree2mat.convert(path)
    report = tree2mat.verify(path, onx, rows=100)  # against CatBoost's own model of the file
    assert report.passed, report.summary()
    monkeypatch.setitem(sys.modules, "catboost", None)  # import catboost fails from here on
    _same_ir(tree2mat.load(path), expected)
    renamed = tmp_path / "model.bin"  # another name: read by its contents
    renamed.write_bytes(path.read_bytes())
    _same_ir(tree2mat.load(renamed), expected)
    assert tree2mat.load(path).source == "catboost MultiClass"


def test_cbm_and_pickle(tmp_path, monkeypatch):
    model = fit("Logloss", depth=3, grow_policy="Depthwise")
    model.save_model(str(tmp_path / "model.cbm"))
    (tmp_path / "model.other").write_bytes((tmp_path / "model.cbm").read_bytes())
    joblib.dump(model, tmp_path / "model.joblib")
    for name in ("model.cbm", "model.other", "model.joblib"):
        path = tmp_path / name
        _same_ir(tree2mat.load(path), tree2mat.load(model))
        report = tree2mat.verify(path, tree2mat.convert(path), rows=100)
        assert report.passed, report.summary()
    monkeypatch.setitem(sys.modules, "catboost", None)
    with pytest.raises(MissingDependencyError, match=r"model\.cbm: .*needs catboost, which is not installed: pip install 'tree2mat\[catboost\]'; or export"):
        tree2mat.load(tmp_path / "model.cbm")


def test_cbm_damaged(tmp_path):
    path = tmp_path / "model.cbm"
    path.write_bytes(b"CBM1" + b"\x00" * 40)
    with pytest.raises(ModelFileError, match="model.cbm: not a readable CatBoost .cbm model"):
        tree2mat.load(path)


# ------------------------------------------------------------------------------------ refusals


def test_categorical_features_refused():
    frame = X[:, :3].astype(object)
    frame[:, 2] = np.asarray(["a", "b", "c"])[RNG.integers(0, 3, X.shape[0])]
    model = cb.CatBoostClassifier(iterations=2, depth=2, verbose=0, thread_count=1, allow_writing_files=False)
    model.fit(frame, Y3 > 0, cat_features=[2])
    with pytest.raises(UnsupportedModelError, match="categorical features .*CatBoost hashes the category strings"):
        tree2mat.load(model)


def test_other_losses_refused():
    model = fit("RMSEWithUncertainty", depth=2, iterations=2)
    with pytest.raises(UnsupportedModelError, match="loss function 'RMSEWithUncertainty' is not supported yet; supported: Logloss"):
        tree2mat.load(model)


@pytest.fixture(scope="module")
def document():
    return tree2mat.frontends.catboost.model_json(fit("MultiClass", depth=2, iterations=2))


def _damage(doc, edit):
    doc = json.loads(json.dumps(doc))
    edit(doc)
    return doc


DAMAGE = {
    "text features": (lambda d: d["features_info"].update(text_features=[{"feature_index": 0}]), "text features"),
    "embeddings": (lambda d: d["features_info"].update(embedding_features=[{"feature_index": 0}]), "embedding features"),
    "no trees": (lambda d: d.update(oblivious_trees=[]), "no trees"),
    "no loss": (lambda d: d["model_info"]["params"].pop("loss_function"), "need loss_function"),
    "leaf count": (lambda d: d["oblivious_trees"][0]["leaf_values"].pop(), "leaf values for depth 2"),
    "border": (lambda d: d["oblivious_trees"][0]["splits"][0].update(border="x"), "border must be a number"),
    "nan border": (lambda d: d["oblivious_trees"][0]["splits"][0].update(border=float("nan")), "no float32 border"),
    "huge border": (lambda d: d["oblivious_trees"][0]["splits"][0].update(border=1e300), "no float32 border"),
    "feature": (lambda d: d["oblivious_trees"][0]["splits"][0].update(float_feature_index=99), "unknown float feature 99"),
    "ctr split": (lambda d: d["oblivious_trees"][0]["splits"][0].update(split_type="OnlineCtr"), "split type 'OnlineCtr'"),
    "deep": (lambda d: d["oblivious_trees"][0].update(splits=d["oblivious_trees"][0]["splits"] * 9), "at most 16"),
    "leaf value": (lambda d: d["oblivious_trees"][0]["leaf_values"].__setitem__(0, None), "leaf_values must be a number"),
    "scale": (lambda d: d.update(scale_and_bias=[1.0]), "scale_and_bias must be"),
    "classes": (lambda d: d["model_info"]["class_params"].update(class_names=[0, 0.5, 1]), "non-integer float class labels"),
    "nan treatment": (lambda d: d["features_info"]["float_features"][0].update(nan_value_treatment="Up"), "nan_value_treatment"),
    "feature twice": (lambda d: d["features_info"]["float_features"].append(d["features_info"]["float_features"][0]), "listed twice"),
}


@pytest.mark.parametrize("case", DAMAGE)
def test_damaged_documents(tmp_path, document, case):
    edit, message = DAMAGE[case]
    path = tmp_path / "damaged.json"
    path.write_text(json.dumps(_damage(document, edit)))
    with pytest.raises((ModelFileError, UnsupportedModelError)) as info:
        tree2mat.load(path)
    text = str(info.value)
    assert "damaged.json" in text and message in text and "\n" not in text


def test_non_symmetric_damaged(tmp_path):
    leaf = {"value": [0.0, 1.0, 2.0], "weight": 1}
    for tree, message in (
        ({"split": {"split_type": "FloatFeature", "float_feature_index": 0, "border": 0.5}, "left": leaf}, "need right"),
        ({"value": [1.0]}, "holds 1 values, expected 3"),
        ([1, 2], "must be an object"),
    ):
        doc = tree2mat.frontends.catboost.model_json(fit("MultiClass", depth=2, iterations=2, grow_policy="Depthwise"))
        doc["trees"] = [tree]
        path = tmp_path / "t.json"
        path.write_text(json.dumps(doc))
        with pytest.raises(ModelFileError, match=message):
            tree2mat.load(path)


def test_bench_times_catboost_s_own_onnx_export_and_its_predict():
    """bench's peer for CatBoost is CatBoost's own ONNX export (FrontendSpec.peer_convert), timed
    in the same run as tree2mat's oblivious graph and CatBoost's predict; the oblivious graph
    gets no row wrong, and auto picks it for a symmetric model."""
    from tree2mat.bench import bench

    model = fit("Logloss", depth=6, iterations=20)
    report = bench(model, rows=2000, batches=(1, 1000), forms=("oblivious", "auto"), repeat=1, threads=1)
    by = {c.name: c for c in report.contenders}
    assert by["tree2mat oblivious"].mismatched_rows == 0 and by["tree2mat auto (oblivious)"].mismatched_rows == 0
    peer = by["catboost TreeEnsemble"]
    assert peer.kind == "peer" and [t.batch for t in peer.timings] == [1, 1000] and peer.mismatched_rows is not None
    assert [t.batch for t in by["catboost predict"].timings] == [1, 1000]


def test_damaged_cbm_files_are_one_line_errors(tmp_path, capsys):
    """CatBoost's own loader segfaulted or hung on some truncated or byte-flipped .cbm files: it
    reads them in a process of its own first, so tree2mat answers in one line, exit 2."""
    from tree2mat.cli import main

    path = tmp_path / "m.cbm"
    fit("Logloss", depth=4, iterations=30).save_model(str(path))
    data = path.read_bytes()
    rng = np.random.default_rng(0)
    for k in range(6):
        damaged = bytearray(data[: int(rng.integers(8, len(data)))] if k % 2 else data)
        for _ in range(0 if k % 2 else 8):
            damaged[int(rng.integers(4, len(damaged)))] = int(rng.integers(256))
        bad = tmp_path / f"bad{k}.cbm"
        bad.write_bytes(bytes(damaged))
        code = main(["inspect", str(bad)])
        err = capsys.readouterr().err.strip()
        assert code in (0, 2) and "\n" not in err and "internal error" not in err, (k, code, err)


def test_bool_labels_and_a_threshold_of_0_or_1():
    model = cb.CatBoostClassifier(iterations=10, depth=3, verbose=0, allow_writing_files=False, random_seed=0).fit(X, Y3 > 0)
    assert tree2mat.load(model).classes[0].tolist() == [False, True]
    check(model, forms=["oblivious"])
    model.set_probability_threshold(1.0)
    with pytest.raises(tree2mat.errors.UnsupportedModelError, match="set a threshold inside"):
        tree2mat.load(model)


# ------------------------------------------------------------------------ borders by split_index


def _split_edit(tmp_path, grow: str, edit):
    """A real CatBoost JSON export (catboost's own model of it, and the rows to route), with its
    first tree's first split edited by ``edit(split, borders)`` (``borders``: the model's, by
    split_index)."""
    model = fit("RMSE", depth=3, iterations=3, grow_policy=grow)
    path = tmp_path / "model.json"
    model.save_model(str(path), format="json")
    doc = json.loads(path.read_text())
    borders = [(f["feature_index"], b) for f in doc["features_info"]["float_features"] for b in f["borders"]]
    tree = doc["oblivious_trees"][0]["splits"][0] if grow == "SymmetricTree" else doc["trees"][0]["split"]
    edit(tree, borders)
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(doc))
    return path, edited


def _catboost_leaves(path, X):
    model = cb.CatBoost()
    model.load_model(str(path), format="json")
    return model.calc_leaf_indexes(X.astype(np.float32))


def _another_border(split, borders):
    """The index of a border of the split's feature other than its own."""
    return next(k for k, (f, _) in enumerate(borders) if f == split["float_feature_index"] and k != split["split_index"])


@pytest.mark.parametrize("grow", ["SymmetricTree", "Depthwise"])
def test_a_split_reads_the_border_its_split_index_names_as_catboost_does(tmp_path, grow):
    """CatBoost reads a split's border by its split_index: moved to another border's index (its
    border field moved with it), CatBoost routes rows elsewhere, and so does tree2mat, exactly as
    CatBoost does."""
    def move(split, borders):
        k = _another_border(split, borders)
        split.update(split_index=k, border=borders[k][1])

    path, edited = _split_edit(tmp_path, grow, move)
    assert np.any(_catboost_leaves(edited, X) != _catboost_leaves(path, X))
    report = tree2mat.verify(edited, tree2mat.convert(edited), data=X)  # against CatBoost's model of the file
    assert report.passed and not report.notes, report.summary()
    if grow == "SymmetricTree":
        np.testing.assert_array_equal(evaluate.source_leaf_ids(tree2mat.load(edited), X.astype(np.float32)), _catboost_leaves(edited, X))


@pytest.mark.parametrize("grow", ["SymmetricTree", "Depthwise"])
@pytest.mark.parametrize("what", ["border", "split_index", "float_feature_index"])
def test_a_split_whose_border_disagrees_with_its_split_index_is_refused(tmp_path, grow, what):
    """Only one of the two moved: CatBoost goes by the index (its leaves unchanged where the
    border or feature moved, changed where the index did); tree2mat refuses the file, naming
    both."""
    def move(split, borders):
        k = _another_border(split, borders)
        if what == "border":
            split["border"] = borders[k][1]
        elif what == "split_index":
            split["split_index"] = k
        else:
            split["float_feature_index"] = next(f for f, _ in borders if f != split["float_feature_index"])

    path, edited = _split_edit(tmp_path, grow, move)
    same = np.array_equal(_catboost_leaves(edited, X), _catboost_leaves(path, X))
    assert same == (what != "split_index")
    with pytest.raises(ModelFileError, match=r"edited\.json: tree 0: ill-formed CatBoost model: a split of float feature \d+ at border .* "
                                             r"disagrees with its split_index \d+, which is float feature \d+'s border .* "
                                             r"\(CatBoost reads the split by its index\)"):
        tree2mat.load(edited)


@pytest.mark.parametrize(
    "edit, needle",
    [
        (lambda d: d["oblivious_trees"][0]["splits"][0].update(split_index=10_000), "split_index 10000 names none of the model's"),
        (lambda d: d["oblivious_trees"][0]["splits"][0].pop("split_index"), "need split_index"),
        (lambda d: d["features_info"]["float_features"][0]["borders"].reverse(), "float feature 0: borders must ascend, each once"),
        (lambda d: d["features_info"]["float_features"].reverse(), "listed after float feature 4: CatBoost numbers the borders in feature order"),
    ],
)
def test_borders_catboost_cannot_number_are_refused(tmp_path, document, edit, needle):
    """A split_index past the borders (CatBoost reads memory past them), none (CatBoost takes 0),
    borders out of order (CatBoost bins by how many a value exceeds) and float features out of
    order (CatBoost's evaluator crashed on such a model): refused in one line."""
    path = tmp_path / "damaged.json"
    doc = _damage(document, edit)
    if needle.startswith("float feature 0: borders"):  # (reversed, they no longer ascend)
        assert len(doc["features_info"]["float_features"][0]["borders"]) > 1
    path.write_text(json.dumps(doc))
    with pytest.raises(ModelFileError, match=re.escape(needle)) as info:
        tree2mat.load(path)
    assert "\n" not in str(info.value)


def test_verify_refuses_a_json_catboost_cannot_load(tmp_path, capsys):
    """A float feature without nan_value_treatment: tree2mat's reader takes CatBoost's default
    (AsIs), CatBoost 1.2 refuses the file; verify, which compares with CatBoost's own model of
    the file, refuses it with CatBoost's reason (exit 2) instead of passing against tree2mat alone."""
    from tree2mat.cli import main

    doc = tree2mat.frontends.catboost.model_json(fit("RMSE", depth=2, iterations=2))
    doc["features_info"]["float_features"][1].pop("nan_value_treatment")
    path = tmp_path / "model.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(cb.CatBoostError, match="ENanValueTreatment"):
        cb.CatBoost().load_model(str(path), format="json")
    onx = tree2mat.convert(path)
    with pytest.raises(ModelFileError,
                       match=r"model\.json: not a readable CatBoost \.json model: .*Key '' not found in enum TFloatFeature::ENanValueTreatment"):
        tree2mat.verify(path, onx)
    tree2mat.save(onx, tmp_path / "model.onnx")
    assert main(["verify", str(path), str(tmp_path / "model.onnx")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"tree2mat: error: {path}: not a readable CatBoost .json model: ") and "\n" not in err, err

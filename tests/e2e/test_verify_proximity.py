"""``verify`` on a ``--proximity`` graph: it reads the reference rows from the graph's metadata,
takes their leaves and the checked rows' from the library (scikit-learn's ``apply``, XGBoost's and
LightGBM's ``pred_leaf``), and compares the graph's ``proximity`` output exactly; a graph whose
reference leaf ids were edited fails. Through the API and the command line (convert --proximity,
then verify)."""

from __future__ import annotations

import functools

import joblib
import lightgbm as lgb
import numpy as np
import onnx
import pytest
import xgboost as xgb
from sklearn.datasets import load_iris
from sklearn.ensemble import GradientBoostingClassifier, HistGradientBoostingClassifier, RandomForestClassifier

import tree2mat
from tree2mat.contract import PROXIMITY_KEY
from tree2mat.errors import VerificationError
from tree2mat.verify.subject import EVALUATOR

X, Y = load_iris(return_X_y=True)
HOLES = X.copy()
HOLES[np.random.default_rng(1).random(X.shape) < 0.1] = np.nan
EXACT = [name for name, spec in tree2mat.FORMS.items() if spec.exact]
REF = np.concatenate([HOLES[::15], [[np.nan] * 4, [7.0, 3.0, 5.0, 1.0]]])
#: A reference row scikit-learn refuses (its apply takes no inf): verify takes its leaves from
#: tree2mat's reference evaluator, and says why.
INF = np.asarray([[np.inf, -np.inf, 0.0, 1.0]])


@functools.cache
def models():
    return [
        (RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0).fit(HOLES, Y), "scikit-learn"),
        (GradientBoostingClassifier(n_estimators=2, max_depth=3, random_state=0).fit(X, Y), "scikit-learn"),
        (xgb.XGBClassifier(n_estimators=3, max_depth=3).fit(HOLES, Y), "XGBoost"),
        (lgb.LGBMClassifier(n_estimators=3, num_leaves=7, min_child_samples=5, verbose=-1).fit(HOLES, Y), "LightGBM"),
        (HistGradientBoostingClassifier(max_iter=3).fit(HOLES, Y), EVALUATOR),  # (no apply: the reference evaluator's leaves)
    ]


def tampered(onx: onnx.ModelProto) -> onnx.ModelProto:
    """``onx`` with one reference row's leaf id in one tree moved to another leaf."""
    out = onnx.ModelProto()
    out.CopyFrom(onx)
    init = next(i for i in out.graph.initializer if i.name == "proximity_reference")
    ids = onnx.numpy_helper.to_array(init).copy()  # [T, 1, R]
    ids[0, 0, 0] = 1 if ids[0, 0, 0] == 0 else 0
    init.CopyFrom(onnx.numpy_helper.from_array(ids, init.name))
    return out


@pytest.mark.parametrize("form", EXACT)
def test_verify_checks_proximity_on_every_exact_form_and_fails_a_tampered_graph(form):
    model = RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0).fit(HOLES, Y)
    onx = tree2mat.convert(model, form, proximity=REF)
    report = tree2mat.verify(model, onx, rows=300)
    assert report.passed, report.summary()
    checked = [o for o in report.outputs if o.name == "proximity"]
    assert checked and all(o.compared == report.rows and o.mismatches == 0 for o in checked)
    assert any(f"{REF.shape[0]} reference rows" in n and "leaves by scikit-learn," in n for n in report.notes), report.notes
    bad = tree2mat.verify(model, tampered(onx), rows=300)
    assert not bad.passed
    failed = {o.name for o in bad.outputs if o.mismatches}
    assert failed == {"proximity"}, bad.summary()  # (the routing is intact: only the kernel's constant was edited)


@pytest.mark.slow  # (five libraries' models, verified twice each: 3-5 s)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_verify_takes_each_library_s_leaves(dtype):
    for model, whose in models():
        onx = tree2mat.convert(model, dtype=dtype, proximity=REF)
        report = tree2mat.verify(model, onx, rows=200)
        assert report.passed, (type(model).__name__, report.summary())
        assert any(f"leaves by {whose}," in n for n in report.notes), report.notes
        assert not tree2mat.verify(model, tampered(onx), rows=200).passed, type(model).__name__


def test_reference_rows_the_library_refuses_take_the_reference_evaluator_s_leaves():
    model, _ = models()[0]
    onx = tree2mat.convert(model, "traverse", proximity=np.concatenate([REF, INF]))
    report = tree2mat.verify(model, onx, rows=200)
    assert report.passed, report.summary()
    assert any(f"leaves by {EVALUATOR} (asking scikit-learn for them failed (ValueError: Input X contains infinity" in n for n in report.notes)
    assert not tree2mat.verify(model, tampered(onx), rows=200).passed


def test_verify_on_your_data():
    model, _ = models()[2]
    onx = tree2mat.convert(model, "bitvector", proximity=REF)
    report = tree2mat.verify(model, onx, HOLES)
    assert report.passed and [o.compared for o in report.outputs if o.name == "proximity"] == [X.shape[0]]


def test_malformed_reference_rows_are_refused_in_one_line():
    model, _ = models()[0]
    onx = tree2mat.convert(model, "sign", proximity=REF)
    for value in ("{", '{"rows": 3, "features": 4, "dtype": "float32", "data": "AAAA"}', '{"rows": 1, "features": 5}'):
        broken = onnx.ModelProto()
        broken.CopyFrom(onx)
        next(p for p in broken.metadata_props if p.key == PROXIMITY_KEY).value = value
        with pytest.raises(VerificationError, match="the graph's reference rows: ") as err:
            tree2mat.verify(model, broken, rows=50)
        assert "\n" not in str(err.value)


def test_a_graph_whose_proximity_output_is_gone_fails():
    model, _ = models()[0]
    onx = tree2mat.convert(model, "sign", proximity=REF)
    kept = [o for o in onx.graph.output if o.name != "proximity"]
    del onx.graph.output[:]
    onx.graph.output.extend(kept)
    report = tree2mat.verify(model, onx, rows=50)
    assert not report.passed and any(o.name == "proximity" and o.problem for o in report.outputs)


def test_the_command_line_end_to_end(tmp_path, capsys):
    from tree2mat.cli import main

    model = RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0).fit(HOLES, Y)
    joblib.dump(model, tmp_path / "m.joblib")
    np.savetxt(tmp_path / "ref.csv", REF, delimiter=",", fmt="%.9g", header="a,b,c,d", comments="")
    out = tmp_path / "m.onnx"
    assert main(["convert", str(tmp_path / "m.joblib"), "--proximity", str(tmp_path / "ref.csv"), "-o", str(out), "--no-progress"]) == 0
    assert f"proximity [N, {REF.shape[0]}] float32" in capsys.readouterr().out
    assert main(["verify", str(tmp_path / "m.joblib"), str(out)]) == 0
    assert capsys.readouterr().out.rstrip().endswith("PASS")
    onnx.save(tampered(onnx.load(out)), tmp_path / "bad.onnx")
    assert main(["verify", str(tmp_path / "m.joblib"), str(tmp_path / "bad.onnx")]) != 0
    assert capsys.readouterr().out.rstrip().endswith("FAIL")
    np.savetxt(tmp_path / "narrow.csv", REF[:, :3], delimiter=",")
    assert main(["convert", str(tmp_path / "m.joblib"), "--proximity", str(tmp_path / "narrow.csv"), "-o", str(tmp_path / "n.onnx")]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"tree2mat: error: --proximity: the reference rows have shape [{REF.shape[0]}, 3]")
    assert not (tmp_path / "n.onnx").exists()
    assert main(["convert", str(tmp_path / "m.joblib"), "--proximity", str(out), "-o", str(out)]) == 2  # (never over an input)

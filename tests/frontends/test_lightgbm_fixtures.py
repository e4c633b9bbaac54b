"""Committed LightGBM model texts (fixtures/, written by fixtures/make_lightgbm_fixtures.py with
LightGBM itself) against the outputs LightGBM gave for them, with lightgbm not importable."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import tree2mat
from tree2mat.errors import Tree2MatError
from tree2mat.frontends.lightgbm import from_text
from tree2mat.ir import evaluate
from tree2mat.ir.core import Aggregation, Task
from tree2mat.ir.io import dumps

from conftest import ROOT, assert_matches, assert_standard_graph, run_onnx

FIXTURES = sorted((ROOT / "fixtures").glob("lightgbm_*.txt"))


@pytest.fixture(autouse=True)
def no_lightgbm(monkeypatch):
    monkeypatch.setitem(sys.modules, "lightgbm", None)  # import lightgbm fails in these tests


@pytest.mark.parametrize("suffix", ["", "32"], ids=["float64", "float32"])
@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_fixture_matches_lightgbm(path, suffix):
    expected = np.load(path.with_suffix(".npz"))
    X = expected[f"X{suffix}"]
    ens = tree2mat.load(path)
    assert np.array_equal(evaluate.source_leaf_ids(ens, X), expected[f"pred_leaf{suffix}"])
    raw = expected[f"raw_score{suffix}"].reshape(X.shape[0], -1)
    if ens.aggregation is Aggregation.MEAN:  # LightGBM's rf raw score is the sum, not the mean
        raw = raw / ens.trees_per_output()
    assert np.array_equal(evaluate.margin(ens, X), raw)
    # The graph of the input's dtype: float64 margins bit-identical; float32 margins (exact sums,
    # then one rounding per digit, and one for the average) within two float32 steps of
    # LightGBM's, rounded. Outputs within tolerance.
    dtype = "float32" if suffix else "float64"
    exact = run_onnx(tree2mat.convert(path, raw=True, dtype=dtype), X)
    if dtype == "float64":
        assert np.array_equal(exact["variable"], raw)
    else:
        np.testing.assert_array_max_ulp(exact["variable"], raw.astype(np.float32), maxulp=2)
    onx = tree2mat.convert(path, dtype=dtype)
    assert_standard_graph(onx)
    pred = expected[f"predict{suffix}"]
    if ens.task is Task.CLASSIFICATION:
        probs = pred if pred.ndim == 2 else np.stack([1 - pred, pred], axis=1)
        want = {"label": np.argmax(probs, axis=1), "probabilities": probs}
    else:
        want = {"variable": pred.reshape(X.shape[0], -1)}
    assert_matches(run_onnx(onx, X), want, X, ens)


def test_fixtures_cover_what_they_are_there_for():
    """The committed texts hold, between them, categorical splits with zero as missing, linear
    leaves and random-forest averaging (make_lightgbm_fixtures.py writes one of each), each with
    LightGBM's outputs beside it."""
    kinds = {p.stem: tree2mat.load(p) for p in FIXTURES}
    assert all(p.with_suffix(".npz").exists() for p in FIXTURES)
    assert any(t.cat_nodes.size and t.zero_missing.any() for t in kinds["lightgbm_binary_categorical_zero_as_missing"].trees)
    assert all(t.is_linear for t in kinds["lightgbm_regression_linear_tree"].trees)
    assert kinds["lightgbm_multiclassova_rf"].aggregation is Aggregation.MEAN


def test_mutated_texts_give_typed_errors():
    """Random edits of real model texts (values replaced by hostile tokens, lines dropped): each
    either converts or raises a tree2mat error naming the problem — never anything else."""
    rng = np.random.default_rng(0)
    tokens = ["-1", "nan", "inf", "1e400", "99999999999", "0", "1.5", "x", "", "=", "Tree=0", "2147483648"]
    texts = [p.read_text() for p in FIXTURES]
    for _ in range(300):
        lines = texts[rng.integers(len(texts))].split("\n")
        for _ in range(rng.integers(1, 4)):
            j = int(rng.integers(len(lines)))
            key, sep, value = lines[j].partition("=")
            if sep and rng.random() < 0.8:
                values = value.split(" ")
                values[rng.integers(len(values))] = str(rng.choice(tokens))
                lines[j] = key + "=" + " ".join(values)
            else:
                del lines[j]
        try:
            tree2mat.convert(from_text("\n".join(lines), "mutated"))
        except Tree2MatError:
            pass


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_ir_json_keeps_every_lightgbm_feature(path, tmp_path):
    """Zero band, missing type Zero, truncated category codes and linear leaves survive the IR
    JSON format: the reloaded ensemble routes and sums as LightGBM did."""
    expected = np.load(path.with_suffix(".npz"))
    ens = tree2mat.load(path)
    ir_path = tmp_path / "model.json"
    ir_path.write_text(dumps(ens))
    again = tree2mat.load(ir_path)
    assert again.zero_band == ens.zero_band and again.category_codes is ens.category_codes
    raw = expected["raw_score"].reshape(expected["X"].shape[0], -1)
    if ens.aggregation is Aggregation.MEAN:
        raw = raw / ens.trees_per_output()
    assert np.array_equal(evaluate.margin(again, expected["X"]), raw)

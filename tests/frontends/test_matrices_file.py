"""A tree's matrices read back (``tree2mat inspect --tree K --format npz``, then the .npz as the
model): every library's trees come back as they were (the frontends' IR trees, every array) and,
put back in their ensemble, predict what the library predicts on threshold, NaN and +-inf rows;
the paper's printed matrices are its figure's tree; a matrix that is no tree's is refused by the
rule it breaks (Binary Network Sec. 4), in one line."""

from __future__ import annotations

import dataclasses

import joblib
import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest
import xgboost as xgb
from catboost import CatBoostRegressor
from sklearn.datasets import load_diabetes, load_iris
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.tree import DecisionTreeRegressor

import tree2mat
from benchmarks._common import with_holes
from tree2mat.cli import main
from tree2mat.errors import InvalidTreeError, ModelFileError
from tree2mat.frontends import frontend_for
from tree2mat.ir import apply, evaluate
from tree2mat.ir.matrices import oblivious_levels
from tree2mat.verify import synthesize

from conftest import ROOT, assert_matches
from test_cli import one_line_error

FIXTURE = ROOT / "fixtures" / "paper_tree.json"
XD, YD = load_diabetes(return_X_y=True)
XI, YI = load_iris(return_X_y=True)
XH = with_holes(XD, np.random.default_rng(0), zeros=True)  # NaN cells (and zeros, LightGBM's missing type Zero)

# As printed in the paper (Binary Network Sec. 3, fig. 1): S, t and the bitvector matrix (its B).
PAPER_S = [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 1]]
PAPER_T = [1.0, 4, 3, 2, 5]
PAPER_BITS = [[0, 0, 1, 0, 1], [0, 0, 1, 1, 0], [0, 0, 1, 1, 1], [0, 1, 1, 1, 1], [1, 1, 0, 1, 1], [1, 1, 1, 1, 1]]


def _codes(k: int, seed: int) -> np.ndarray:
    """A column of category codes 0..k-1 for XD's rows, a tenth of them NaN."""
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, k, XD.shape[0]).astype(float)
    codes[rng.random(codes.size) < 0.1] = np.nan
    return codes


CODES = _codes(8, 1)


def _categorical_frame():
    codes = np.random.default_rng(2).integers(-1, 8, XD.shape[0])  # (-1: missing)
    frame = pd.DataFrame({"a": XH[:, 2], "b": XH[:, 3], "c": pd.Categorical.from_codes(codes, categories=list(range(8)))})
    return frame, YD + 40 * (codes % 3)


# Each model, and what its trees hold that the file must carry beyond S, t, B, v (the test checks they do).
MODELS = {
    "sklearn tree, NaN": (lambda: DecisionTreeRegressor(max_leaf_nodes=12, random_state=0).fit(XH, YD),
                          lambda ts: any(not t.default_left.all() for t in ts) and any(t.default_left.any() for t in ts)),
    "sklearn histgb, categories": (lambda: HistGradientBoostingClassifier(max_iter=2, max_leaf_nodes=6, categorical_features=[2]).fit(
        np.column_stack([XH[:, :2], _codes(6, 3)]), YD > 140), lambda ts: any(t.has_categorical for t in ts)),
    "xgboost, 3 classes, <": (lambda: xgb.XGBClassifier(n_estimators=1, max_depth=3).fit(with_holes(XI, np.random.default_rng(4)), YI),
                              lambda ts: any(not t.default_left.all() for t in ts)),
    "xgboost, categories": (lambda: xgb.XGBRegressor(n_estimators=3, max_depth=3, enable_categorical=True, tree_method="hist",
                                                     max_cat_to_onehot=1).fit(*_categorical_frame()),
                            lambda ts: any(t.cat_other_left is not None for t in ts)),
    "lightgbm, categories": (lambda: lgb.LGBMRegressor(n_estimators=3, num_leaves=6, min_child_samples=5, verbose=-1).fit(
        np.column_stack([XH[:, :3], CODES]), YD + 60 * np.nan_to_num(CODES % 3), categorical_feature=[3]), lambda ts: any(t.has_categorical for t in ts)),
    "lightgbm, zero missing": (lambda: lgb.LGBMRegressor(n_estimators=3, num_leaves=6, zero_as_missing=True, verbose=-1).fit(XH, YD),
                               lambda ts: any(t.zero_missing.any() for t in ts if t.zero_missing.size)),
    "lightgbm, linear leaves": (lambda: lgb.LGBMRegressor(n_estimators=2, num_leaves=4, linear_tree=True, verbose=-1).fit(XH[:, :4], YD),
                                lambda ts: any(t.is_linear for t in ts)),
    "catboost, oblivious": (lambda: CatBoostRegressor(iterations=3, depth=3, verbose=0, random_seed=0, thread_count=1).fit(XH, YD),
                            lambda ts: all(oblivious_levels(t) is not None for t in ts)),
}


def _write(model_path, tree: int, out) -> dict[str, np.ndarray]:
    assert main(["inspect", str(model_path), "--tree", str(tree), "--format", "npz", "-o", str(out)]) == 0
    return dict(np.load(out))


@pytest.mark.parametrize("name", list(MODELS))
def test_every_library_s_trees_read_back(name, tmp_path):
    make, holds = MODELS[name]
    model = make()
    path = tmp_path / "model.joblib"
    joblib.dump(model, path)
    ens = tree2mat.load(path)
    assert holds(ens.trees), f"{name}: its trees hold none of what the test is for"
    rebuilt = []
    for k, tree in enumerate(ens.trees):
        written = _write(path, k, tmp_path / f"{k}.npz")
        back = tree2mat.load(tmp_path / f"{k}.npz")
        # the tree, array by array, and the settings it is tested under, as the frontend read them
        _assert_same_tree(back.trees[0], tree)
        for field in ("comparison", "source_dtype", "zero_band", "n_features") + (("category_codes",) if tree.has_categorical else ()):
            assert getattr(back, field) == getattr(ens, field), field
        np.testing.assert_array_equal(back.missing_value, ens.missing_value)
        # matrices -> tree -> matrices: the same arrays
        again = _write(tmp_path / f"{k}.npz", 0, tmp_path / f"{k}again.npz")
        assert again.keys() == written.keys()
        for key, arr in written.items():
            np.testing.assert_array_equal(again[key], arr, err_msg=key)
        rebuilt.append(back.trees[0])
        assert "level_feature" in written or not name.startswith("catboost")  # (an oblivious tree's levels: checked on reading)
    assert {"default_left", "comparison", "source_dtype"} <= set(written)
    # the trees read back, in their ensemble, predict what the library does
    same = dataclasses.replace(ens, trees=tuple(rebuilt))
    X, kinds = synthesize(ens, rows=200, dtype=np.dtype(ens.source_dtype))
    assert kinds["threshold"] > 0 and kinds["nan"] > 0
    np.testing.assert_array_equal(apply(same, X), apply(ens, X))
    spec = frontend_for(model)
    for raw in (False, True):
        assert_matches(evaluate.predict(same, X, raw=raw), spec.reference_outputs(model, X, raw, ens), X, ens)


def _assert_same_tree(got, expected) -> None:
    for field in ("feature", "threshold", "default_left", "left", "right", "value", "cat_nodes", "cat_values", "cat_left",
                  "cat_other_left", "zero_missing", "linear_const", "linear_feature", "linear_coef"):
        a, b = getattr(got, field), getattr(expected, field)
        assert (a is None) == (b is None), field
        if a is not None:
            assert a.dtype == b.dtype, field
            np.testing.assert_array_equal(a, b, err_msg=field)


def test_the_papers_printed_matrices_are_its_figures_tree(tmp_path):
    # Only what the paper prints (S, t, its B = the bitvector, v): the tree of its fig. 1 (the fixture,
    # written down from the figure), and its worked inputs reach v5 and v1.
    path = tmp_path / "paper.npz"
    np.savez(path, S=np.asarray(PAPER_S), t=np.asarray(PAPER_T), bitvector=np.asarray(PAPER_BITS), v=np.arange(1.0, 7.0))
    back, figure = tree2mat.load(path), tree2mat.load(FIXTURE)
    _assert_same_tree(back.trees[0], figure.trees[0])
    assert back.comparison.value == "<=" and back.trees[0].default_left.all()  # the paper's Sign(0) = -1, D(NaN) = 0
    X = np.asarray([[2, 1, 2, 2], [1, 1, 2, 3], [np.nan, 1, 2, 3]])
    np.testing.assert_array_equal(evaluate.margin(back, X)[:, 0], [5.0, 1.0, 1.0])


def test_inspect_reads_the_matrices_back(tmp_path, capsys):
    _write(FIXTURE, 0, tmp_path / "paper.npz")
    capsys.readouterr()
    assert main(["inspect", str(tmp_path / "paper.npz"), "--tree", "0"]) == 0
    assert "v5     1  0 -1  0  0" in capsys.readouterr().out  # the paper's template row of v5
    assert main(["inspect", str(tmp_path / "paper.npz")]) == 0
    out = capsys.readouterr().out
    assert "source: tree matrices (npz)" in out and "leaves: total 6, max 6" in out


@pytest.mark.parametrize("levels,ok", [
    ({"level_feature": [0, 1], "level_threshold": [0.0, 1.0], "level_power": [2, 1]}, True),
    ({"level_feature": [0, 1], "level_threshold": [0.0, 2.0], "level_power": [2, 1]}, False),
    ({"level_power": [1, 2]}, False),
])
def test_an_oblivious_tree_s_levels_must_be_its_own(levels, ok, tmp_path):
    # depth 2, every level one test: x1 <= 0, then x2 <= 1 (written down by hand)
    path = tmp_path / "oblivious.npz"
    np.savez(path, S=np.asarray([[1, 0], [0, 1], [0, 1]]), t=np.asarray([0.0, 1.0, 1.0]), v=np.arange(4.0),
             bitvector=np.asarray([[0, 0, 1], [0, 1, 1], [1, 1, 0], [1, 1, 1]]), **{k: np.asarray(v) for k, v in levels.items()})
    if ok:
        X = np.asarray([[0.0, 1.0], [0.0, 1.5], [0.5, 1.0], [0.5, 2.0]])
        np.testing.assert_array_equal(evaluate.margin(tree2mat.load(path), X)[:, 0], [0, 1, 2, 3])
    else:
        with pytest.raises(InvalidTreeError, match="is not the tree's"):
            tree2mat.load(path)


def test_a_single_leaf_reads_back(tmp_path):
    model = DecisionTreeRegressor().fit(XD[:5], np.full(5, 3.5))
    path = tmp_path / "leaf.joblib"
    joblib.dump(model, path)
    written = _write(path, 0, tmp_path / "leaf.npz")
    assert written["S"].shape == (0, 10) and written["bitvector"].shape == (1, 0)
    back = tree2mat.load(tmp_path / "leaf.npz")
    assert back.trees[0].n_leaves == 1 and np.array_equal(evaluate.margin(back, XD[:3]), np.full((3, 1), 3.5))


def _paper_arrays(**changes) -> dict[str, np.ndarray]:
    arrays = {"S": np.asarray(PAPER_S), "t": np.asarray(PAPER_T), "bitvector": np.asarray(PAPER_BITS), "v": np.arange(6.0)}
    for key, value in changes.items():
        if value is None:
            arrays.pop(key)
        else:
            arrays[key] = value
    return arrays


def _bits(*cells: tuple[int, int, int], swap: tuple[int, int] | None = None) -> np.ndarray:
    """The paper's bitvector matrix with the (leaf, node) cells set, or two nodes' columns swapped."""
    bits = np.asarray(PAPER_BITS)
    for leaf, node, value in cells:
        bits[leaf, node] = value
    if swap:
        bits[:, list(swap)] = bits[:, list(swap[::-1])]
    return bits


PAPER_B = np.asarray([[-1, -1, 0, -1, 0], [-1, -1, 0, 1, -1], [-1, -1, 0, 1, 1], [-1, 1, 0, 0, 0], [1, 0, -1, 0, 0], [1, 0, 1, 0, 0]])

# Matrices that are no tree's, each breaking one rule, and what the one-line refusal says.
BROKEN = {
    "identity": (dict(bitvector=np.eye(6, 5, dtype=np.int64)), InvalidTreeError, "column n1 has its 0s at v2, v3, v4, v5, ..., not a run from v1", "rule 1"),
    "non-binary bitvector": (dict(bitvector=_bits((0, 0, 2))), InvalidTreeError, "bitvector has the entry 2 at v1, n1: its entries are 0 or 1"),
    "non-binary B": (dict(bitvector=None, B=np.where(PAPER_B == 1, 2, PAPER_B)), InvalidTreeError, "B has the entry 2 at v2, n4"),
    "no 0": (dict(bitvector=_bits((4, 2, 1))), InvalidTreeError, "column n3 has no 0: its left subtree would hold no leaf", "rule 2"),
    "no 1 under it": (dict(bitvector=_bits((3, 1, 0))), InvalidTreeError, "column n2 has no 1 under it (v1..v4)", "rule 2"),
    "0s not a run": (dict(bitvector=_bits((0, 3, 1), (1, 3, 0))), InvalidTreeError, "column n4 has its 0s at v2, not a run from v1", "rule 2"),
    "0 above the parent's 1": (dict(bitvector=_bits((5, 1, 0))), InvalidTreeError,
                               "column n2 has a 0 at v6, a leaf not under it, where its parent n1 has a 1", "rule 3"),
    "columns not breadth-first": (dict(bitvector=_bits(swap=(1, 2))), InvalidTreeError, "column n2 has a 0 at v5", "rule 3"),
    "right child keeps a 0": (dict(bitvector=_bits((0, 2, 0))), InvalidTreeError,
                              "column n3, the right child of n1, has a 0 at v1, where n1 has a 0", "rule 4"),
    "B not a partition": (dict(B=np.where(np.arange(5) == 2, np.where(PAPER_B == 0, 1, PAPER_B), PAPER_B)), InvalidTreeError,
                          "B column n3 marks v1 +1, but v1 is not under it", "a partition"),
    "B disagrees": (dict(B=-PAPER_B), InvalidTreeError, "the bitvector and B disagree at v1, n1"),
    "S row of two 1s": (dict(S=np.asarray(PAPER_S) + np.eye(5, 4, k=1, dtype=np.int64)), InvalidTreeError, "S row n1 has 1s at x1, x2", "one-hot"),
    "S row of no 1": (dict(S=np.asarray(PAPER_S) * (np.arange(5) != 3)[:, None]), InvalidTreeError, "S row n4 has no 1"),
    "S not binary": (dict(S=np.asarray(PAPER_S) * 0.5), InvalidTreeError, "S has the entry 0.5 at n1, x1"),
    "NaN threshold": (dict(t=np.asarray([1, np.nan, 3, 2, 5])), InvalidTreeError, "t at n2 is NaN"),
    "t too short": (dict(t=np.asarray(PAPER_T[:4])), InvalidTreeError, "S has 5 rows, t 4 thresholds"),
    "v too short": (dict(v=np.arange(5.0)), InvalidTreeError, "v has 5 rows, the bitvector 6: both are one per leaf"),
    "as many leaves as nodes": (dict(S=np.asarray(PAPER_S + [[1, 0, 0, 0]]), t=np.arange(6.0), bitvector=np.ones((6, 6), np.int64)),
                                InvalidTreeError, "has 6 rows for 6 internal nodes: a binary tree has one leaf more"),
    "wrong depth": (dict(depth=np.asarray([3, 4, 4, 2, 2, 1])), InvalidTreeError, "depth [3, 4, 4, 2, 2, 1] is not the tree's"),
    "levels of a tree not oblivious": (dict(level_feature=np.asarray([0])), InvalidTreeError, "the tree is not oblivious"),
    "infinite leaf": (dict(v=np.asarray([0, 1, 2, 3, 4, np.inf])), InvalidTreeError, "leaf values must be finite"),
    "-inf threshold with <": (dict(t=np.asarray([-np.inf, 4, 3, 2, 5]), comparison=np.asarray("<")), InvalidTreeError, "threshold -inf with '<'"),
    "unknown array": (dict(X=np.zeros((3, 4))), ModelFileError, "not a tree's matrices", "unknown arrays X"),
    "no bitvector nor B": (dict(bitvector=None), ModelFileError, "need S, t, v and B or the bitvector"),
    "text S": (dict(S=np.asarray([["a"]])), ModelFileError, "S must be 2-D numbers"),
    "unknown comparison": (dict(comparison=np.asarray(">")), ModelFileError, "comparison '>': choose one of <=, <"),
    "text missing value": (dict(missing_value=np.asarray("nan")), ModelFileError, "missing_value must be a number"),
    "half a categorical node": (dict(cat_values=np.asarray([[1.0, 2.0]])), ModelFileError, "categorical nodes need cat_nodes, cat_values and cat_left"),
    "oblique W": (dict(W=np.ones((5, 4))), tree2mat.errors.UnsupportedModelError, "W holds an oblique tree's weights"),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_matrices_that_are_no_tree_are_refused_in_one_line(case, tmp_path, capsys):
    changes, error, *needles = BROKEN[case]
    path = tmp_path / "broken.npz"
    np.savez(path, **_paper_arrays(**changes))
    with pytest.raises(error) as exc:
        tree2mat.load(path)
    assert all(n in str(exc.value) for n in needles), str(exc.value)
    one_line_error(capsys, main(["inspect", str(path)]), 2, str(path), *needles)


def test_the_paper_s_matrices_with_b_alone_read_back(tmp_path):
    # (B's -1s are the bitvector's 0s: B alone is the tree too)
    path = tmp_path / "b.npz"
    np.savez(path, **_paper_arrays(bitvector=None, B=PAPER_B))
    _assert_same_tree(tree2mat.load(path).trees[0], dataclasses.replace(tree2mat.load(FIXTURE).trees[0], value=np.arange(6.0)[:, None]))


@pytest.mark.parametrize("content,needle", [
    (b"not a zip", "not a readable .npz"),
    (None, "holds Python objects"),
])
def test_files_that_are_no_npz_of_arrays_are_refused(content, needle, tmp_path, capsys):
    path = tmp_path / "bad.npz"
    if content is None:
        np.savez(path, allow_pickle=True, **_paper_arrays(v=np.asarray([object()] * 6)))
    else:
        path.write_bytes(content)
    one_line_error(capsys, main(["inspect", str(path)]), 2, needle)


def test_an_npz_declaring_huge_arrays_is_refused_unread(tmp_path, capsys):
    # a header promising 2^40 float64 leaf values, in a file of a few hundred bytes
    import io
    import zipfile

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": (2**40,)})
    path = tmp_path / "huge.npz"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("v.npy", header.getvalue())
    one_line_error(capsys, main(["inspect", str(path)]), 2, "refused before anything of it was built")

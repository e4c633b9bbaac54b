"""LightGBM model texts read as LightGBM's own loader reads them (``GBDT::LoadModelFromString``):
texts LightGBM wrote and then edited as users do (tree_sizes out of step with the blocks, trees
renumbered, Windows line ends, no ``end of trees``), category bitsets spanning millions of codes.
Each is checked against LightGBM loading the same file: where LightGBM loads it, tree2mat converts
it and ``verify`` passes against LightGBM's predictions; where LightGBM cannot, tree2mat refuses
it with the reason. (LightGBM 4.7 aborts the whole process on a text whose tree_sizes put a tree
where none starts, and never returns from loading a text whose lines end in CR alone, so those
files are never handed to it here.)"""

from __future__ import annotations

import re

import lightgbm as lgb
import numpy as np
import pytest
from sklearn.datasets import make_classification

import tree2mat
from tree2mat.cli import main
from tree2mat.errors import ModelFileError

X, Y = make_classification(600, 6, random_state=0)


def _text() -> str:
    model = lgb.LGBMClassifier(n_estimators=5, num_leaves=7, verbose=-1, random_state=0).fit(X, Y)
    return model.booster_.model_to_string()


def _edit_tree(text: str, t: int, edit) -> str:
    parts = re.split(r"(?m)^(?=Tree=)", text)
    parts[t + 1] = edit(parts[t + 1])
    return "".join(parts)


def _longer_leaf(block: str) -> str:
    """One leaf value written with one more digit: the block grows by a byte."""
    return re.sub(r"(?m)^(leaf_value=\S+)", lambda m: m.group(1) + "1", block, count=1)


def _without_sizes(text: str) -> str:
    return re.sub(r"(?m)^tree_sizes=.*\n", "", text)


LOADED_BY_LIGHTGBM = {
    # tree_sizes place the trees; the last tree's size is never used to find another
    "last tree edited": lambda s: _edit_tree(s, 4, _longer_leaf),
    # as many trees as sizes: LightGBM reads the first three
    "fewer tree_sizes": lambda s: re.sub(r"(?m)^tree_sizes=(.*)$", lambda m: "tree_sizes=" + " ".join(m.group(1).split()[:3]), s),
    "trees renumbered": lambda s: s.replace("Tree=1\n", "Tree=7\n"),
    # texts written before mid-2018: no tree_sizes, no end of trees
    "no tree_sizes, no end of trees": lambda s: _without_sizes(s).replace("end of trees\n", ""),
    "windows line ends, no tree_sizes": lambda s: _without_sizes(s).replace("\n", "\r\n"),
    "tree without decision_type": lambda s: _without_sizes(_edit_tree(s, 2, lambda b: re.sub(r"(?m)^decision_type=.*\n", "", b))),
}

REFUSED = {
    # tree 3 no longer starts where tree_sizes say: LightGBM aborts ("expect a tree here")
    "middle tree edited": (lambda s: _edit_tree(s, 2, _longer_leaf), "places tree 3 at byte"),
    # tree_sizes count the bytes of '\n' line ends
    "windows line ends with tree_sizes": (lambda s: s.replace("\n", "\r\n"), "tree_sizes does not match the tree blocks"),
    # LightGBM's file loader never returns on it (4.7)
    "carriage returns alone": (lambda s: _without_sizes(s).replace("\n", "\r"), "lines end in CR alone"),
    # (LightGBM's Python package never returns from reading its pandas_categorical line)
    "carriage returns, one last LF": (lambda s: _without_sizes(s).replace("\n", "\r") + "\n", "lines end in CR alone"),
    "no feature_infos": (lambda s: re.sub(r"(?m)^feature_infos=.*\n", "", s), "need feature_infos"),
    "no num_cat": (lambda s: _without_sizes(_edit_tree(s, 1, lambda b: re.sub(r"(?m)^num_cat=.*\n", "", b))), "need num_cat"),
    "a line with two '='": (lambda s: s.replace("label_index=0", "label_index=0=1"), "Wrong line at model file"),
}


@pytest.mark.parametrize("edit", LOADED_BY_LIGHTGBM.values(), ids=LOADED_BY_LIGHTGBM.keys())
def test_texts_lightgbm_loads_convert_and_verify(tmp_path, edit):
    path = tmp_path / "model.txt"
    path.write_bytes(edit(_text()).encode())
    booster = lgb.Booster(model_file=str(path))
    ens = tree2mat.load(path)
    assert ens.n_trees == booster.num_trees()
    rows = np.vstack([X[:100], np.full((1, 6), np.nan)])
    np.testing.assert_array_equal(tree2mat.ir.evaluate.margin(ens, rows)[:, 0], booster.predict(rows, raw_score=True))
    report = tree2mat.verify(path, tree2mat.convert(path))
    assert report.passed, report.summary()


@pytest.mark.parametrize("edit,needle", REFUSED.values(), ids=REFUSED.keys())
def test_texts_lightgbm_cannot_load_are_refused(tmp_path, capsys, edit, needle):
    path = tmp_path / "model.txt"
    path.write_bytes(edit(_text()).encode())
    with pytest.raises(ModelFileError, match=re.escape(needle)):
        tree2mat.load(path)
    assert main(["convert", str(path), "-o", str(tmp_path / "model.onnx")]) == 2
    assert not (tmp_path / "model.onnx").exists()
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


@pytest.mark.slow
def test_refusals_that_lightgbm_shares(tmp_path):
    """The texts refused above that LightGBM refuses without aborting: it refuses them too."""
    for key in ("no feature_infos", "no num_cat", "a line with two '='"):
        path = tmp_path / "model.txt"
        path.write_text(REFUSED[key][0](_text()))
        with pytest.raises(lgb.basic.LightGBMError):
            lgb.Booster(model_file=str(path))


def test_one_leaf_linear_tree_predicts_its_linear_leaf(tmp_path):
    """LightGBM predicts a one-leaf tree of a linear model by its constant and terms, not by its
    leaf value."""
    model = lgb.LGBMRegressor(n_estimators=3, num_leaves=4, linear_tree=True, verbose=-1, random_state=0)
    text = model.fit(X, X[:, 0] * 2 + 1).booster_.model_to_string()
    single = (
        "num_leaves=1\nnum_cat=0\nsplit_feature=\nthreshold=\nleft_child=\nright_child=\nleaf_value=0.5\n"
        "is_linear=1\nleaf_const=0.25\nnum_features=1\n"
        "leaf_features=2\nleaf_coeff=0.125\nshrinkage=1\n\n\n"
    )
    text = _without_sizes(_edit_tree(text, 2, lambda b: "Tree=2\n" + single))
    path = tmp_path / "linear.txt"
    path.write_text(text)
    booster = lgb.Booster(model_file=str(path))
    rows = np.vstack([X[:50], [[0, 0, np.nan, 0, 0, 0]]])
    np.testing.assert_array_equal(tree2mat.ir.evaluate.margin(tree2mat.load(path), rows)[:, 0], booster.predict(rows, raw_score=True))
    assert tree2mat.verify(path, tree2mat.convert(path)).passed


@pytest.mark.slow
def test_category_bitsets_spanning_millions_of_codes(tmp_path):
    """A categorical feature whose codes reach 58 million: LightGBM's bitsets hold 1.8 million
    words a node, almost all zero. The graph holds the categories the splits list, not the span
    (its size is far below the text's), and routes as LightGBM does."""
    rng = np.random.default_rng(0)
    codes = np.sort(rng.choice(58_000_000, 200, replace=False))
    codes[-1] = 57_999_993  # not a float32: float32 inputs never reach it
    n = 3000
    data = np.column_stack([rng.choice(codes, n).astype(float), rng.normal(size=n)])
    target = ((data[:, 0] % 3 == 0) ^ (data[:, 1] > 0)).astype(int)
    model = lgb.LGBMClassifier(
        n_estimators=1, num_leaves=5, max_cat_to_onehot=4, min_data_per_group=5, cat_smooth=1, verbose=-1
    ).fit(data, target, categorical_feature=[0])
    path = tmp_path / "sparse.txt"
    model.booster_.save_model(str(path))
    words = max(int(b.split()[-1]) for b in re.findall(r"(?m)^cat_boundaries=(.*)$", path.read_text()))
    assert words > 1_000_000
    onx = tree2mat.convert(path)
    assert onx.ByteSize() < 50_000 and path.stat().st_size > 5_000_000
    report = tree2mat.verify(path, onx)
    assert report.passed, report.summary()
    # rows at every category the model knows, its float32 neighbours and codes it never saw
    rows = np.column_stack([np.concatenate([codes, codes + 1, codes - 1]), np.zeros(3 * codes.size)]).astype(np.float32)
    assert tree2mat.verify(model, onx, data=rows).passed


def test_feature_names_are_split_on_spaces_alone(tmp_path):
    """LightGBM splits feature_names on spaces only: a name may hold a tab or a no-break space
    (a column name copied from a spreadsheet)."""
    import pandas as pd

    frame = pd.DataFrame(X[:, :3], columns=["price\u00a0usd", "a\tb", "c"])
    model = lgb.LGBMRegressor(n_estimators=3, num_leaves=4, verbose=-1, random_state=0).fit(frame, X[:, 3])
    path = tmp_path / "names.txt"
    model.booster_.save_model(str(path))
    assert tree2mat.load(path).feature_names == tuple(lgb.Booster(model_file=str(path)).feature_name())
    assert tree2mat.verify(path, tree2mat.convert(path)).passed

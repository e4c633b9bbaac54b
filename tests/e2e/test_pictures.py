"""``inspect --tree K --png FILE`` (tree2mat.pictures): a valid, reproducible PNG of one tree beside
its matrices; what it draws checked against the source library's own tree, not against tree2mat."""

from __future__ import annotations

import json
import re
from pathlib import Path

import joblib
import matplotlib.image
import numpy as np
import pytest
from sklearn.datasets import load_iris, make_regression
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

import tree2mat
from tree2mat.cli import main
from tree2mat.pictures import MAX_BOXES, node_labels, tree_figure

from conftest import ROOT

FIXTURES = ROOT / "fixtures"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def six() -> DecisionTreeClassifier:
    X, y = load_iris(return_X_y=True, as_frame=True)  # as a frame: feature names
    return DecisionTreeClassifier(max_leaf_nodes=6, random_state=0).fit(X, y)


@pytest.fixture(scope="module")
def big() -> DecisionTreeRegressor:
    X, y = make_regression(n_samples=3000, n_features=8, random_state=0)
    return DecisionTreeRegressor(max_leaf_nodes=255, random_state=0).fit(X, y)


@pytest.fixture(scope="module")
def models(tmp_path_factory, six, big) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("pictures")
    joblib.dump(six, d / "six.joblib")
    joblib.dump(big, d / "big.joblib")
    return {
        "six": d / "six.joblib",
        "big": d / "big.joblib",
        "xgboost": FIXTURES / "xgboost_binary_categorical.ubj",
        "lightgbm": FIXTURES / "lightgbm_binary_categorical_zero_as_missing.txt",
    }


def one_line_error(capsys, code: int, *needles: str) -> None:
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert err.startswith("tree2mat: error:") and "\n" not in err and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err


def sklearn_tree(model) -> tuple[list[int], list[int], dict[int, set[int]]]:
    """From scikit-learn's ``tree_`` alone: internal node ids breadth-first, leaf ids left to right,
    and per internal node the leaf ids of its left subtree."""
    t = model.tree_
    internal, queue = [], [0]
    while queue:
        node = queue.pop(0)
        if t.children_left[node] != -1:
            internal.append(node)
            queue += [t.children_left[node], t.children_right[node]]

    def leaves_under(node: int) -> list[int]:
        if t.children_left[node] == -1:
            return [node]
        return leaves_under(t.children_left[node]) + leaves_under(t.children_right[node])

    return internal, leaves_under(0), {n: set(leaves_under(t.children_left[n])) for n in internal}


def figure_texts(fig) -> set[str]:
    from matplotlib.text import Text

    return {a.get_text() for a in fig.findobj(Text)}


def heatmap(fig, title: str) -> np.ndarray:
    (ax,) = [ax for ax in fig.axes if ax.get_title(loc="left") == title]
    return np.asarray(ax.images[0].get_array())


@pytest.mark.parametrize("name", ["six", "big", "xgboost", "lightgbm"])
def test_png_is_written_valid_and_reproducible(models, name, tmp_path, capsys):
    pngs = [tmp_path / "a.png", tmp_path / "b.png"]
    for png in pngs:
        assert main(["inspect", str(models[name]), "--tree", "0", "--png", str(png)]) == 0
        out = capsys.readouterr().out.strip().splitlines()
        assert len(out) == 1 and out[0].startswith(f"wrote {png} (") and "leaves" in out[0], out
    data = pngs[0].read_bytes()
    assert data[:8] == PNG_MAGIC and data == pngs[1].read_bytes()  # same bytes: no timestamp
    image = matplotlib.image.imread(pngs[0])
    height, width = image.shape[:2]
    assert image.ndim == 3 and 400 <= height <= 2000 and 800 <= width <= 3500, image.shape
    assert image[..., :3].std() > 0.05  # something drawn
    assert sorted(tmp_path.iterdir()) == sorted(pngs)  # no temporary files left


def test_six_leaf_tree_drawn_as_sklearn_has_it(six):
    """Node tests, leaf values and the matrices S, B, bitvector, v in the picture, from
    scikit-learn's tree_ directly."""
    names = list(six.feature_names_in_)
    internal, leaves, left_leaves = sklearn_tree(six)
    t = six.tree_
    expected_nodes = [f"{names[t.feature[n]]}\n≤ {t.threshold[n]:.4g}" for n in internal]
    expected_leaves = ["[" + ", ".join(f"{v:.3g}" for v in t.value[leaf, 0]) + "]" for leaf in leaves]
    ens = tree2mat.load(six)
    assert node_labels(ens, 0) == (expected_nodes, expected_leaves)

    fig = tree_figure(ens, 0, model_name="six.joblib")
    texts = figure_texts(fig)
    for i, label in enumerate(expected_nodes):
        assert f"n{i + 1}\n{label}" in texts
    for j, label in enumerate(expected_leaves):
        assert f"v{j + 1}\n{label}" in texts
    assert "six.joblib (sklearn.DecisionTreeClassifier)" in " ".join(texts)
    assert set(names) <= texts  # S's columns named by feature
    assert {f"{t.threshold[n]:.4g}" for n in internal} <= texts  # the t column
    s = np.zeros((len(internal), len(names)))
    s[np.arange(len(internal)), t.feature[internal]] = 1
    b = np.array([[0 if leaf not in _subtree(t, n) else (-1 if leaf in left_leaves[n] else 1) for n in internal] for leaf in leaves])
    np.testing.assert_array_equal(heatmap(fig, "S: node × feature"), s)
    np.testing.assert_array_equal(heatmap(fig, "B: leaf × node"), b)
    np.testing.assert_array_equal(heatmap(fig, "bitvector: leaf × node"), (b != -1).astype(int))
    np.testing.assert_allclose(heatmap(fig, "v"), t.value[leaves, 0])
    for m in (b, (b != -1).astype(int)):  # every cell's value written in it
        cells = {f"{v:+d}" if v == 1 and m is b else f"{v:d}" for v in m.ravel()}
        assert cells <= texts


def _subtree(t, node: int) -> set[int]:
    """Leaf ids under ``node`` of a scikit-learn tree_."""
    if t.children_left[node] == -1:
        return {node}
    return _subtree(t, t.children_left[node]) | _subtree(t, t.children_right[node])


def test_255_leaf_tree_is_summarized(big):
    ens = tree2mat.load(big)
    internal, leaves, _ = sklearn_tree(big)
    assert len(leaves) == 255
    fig = tree_figure(ens, 0)
    texts = figure_texts(fig)
    assert len(texts) < 400  # no per-cell values (255 x 254 cells in B alone)
    boxes = [s for s in texts if re.fullmatch(r"n\d+ …\n\d+ leaves\nv\d+–v\d+", s)]
    assert 2 <= len(boxes) <= MAX_BOXES
    # each summary box names its subtree's root and leaf range as scikit-learn has them
    t = big.tree_
    for box in boxes:
        node, count, first, last = map(int, re.findall(r"\d+", box))
        under = _subtree(t, internal[node - 1])
        assert count == len(under) == last - first + 1
        assert set(leaves[first - 1:last]) == under
    names = [f"x{f + 1}" for f in range(big.n_features_in_)]
    assert f"n1\n{names[t.feature[0]]}\n≤ {t.threshold[0]:.4g}" in texts
    image_b = heatmap(fig, "B: leaf × node")
    assert image_b.shape == (255, 254)


def test_xgboost_tree_drawn_as_xgboost_dumps_it(models):
    """XGBoost's own JSON dump: '<' tests, categorical nodes (listed categories go right, so the
    left test is 'not in'), leaf values."""
    xgboost = pytest.importorskip("xgboost")
    dump = json.loads(xgboost.Booster(model_file=str(models["xgboost"])).get_dump(dump_format="json")[0])
    internal, queue, leaves = [], [dump], []
    while queue:  # breadth-first; children are listed left, right
        node = queue.pop(0)
        if "children" in node:
            internal.append(node)
            queue += node["children"]

    def in_order(node: dict) -> None:
        if "children" in node:
            in_order(node["children"][0])
            in_order(node["children"][1])
        else:
            leaves.append(node["leaf"])

    in_order(dump)
    nodes, leaf_labels = node_labels(tree2mat.load(models["xgboost"]), 0)
    assert len(nodes) == len(internal) and leaf_labels == [f"{v:.4g}" for v in leaves]
    for label, node in zip(nodes, internal):
        name, test = label.split("\n")
        assert name == f"x{int(node['split'][1:]) + 1}"
        if isinstance(node["split_condition"], list):
            cats = sorted(node["split_condition"])
            shown = [int(v) for v in re.findall(r"(?<![+\d])(\d+)(?=[,}])", test)]
            more = re.search(r"\+(\d+) more", test)
            assert test.startswith("not in {") and shown == cats[: len(shown)]
            assert len(shown) + (int(more.group(1)) if more else 0) == len(cats)
        else:
            assert test == f"< {node['split_condition']:.4g}"
    fig = tree_figure(tree2mat.load(models["xgboost"]), 0)
    assert "cat" in figure_texts(fig)  # the t column of a categorical node


def test_feature_names_argument_and_single_leaf(six, tmp_path):
    ens = tree2mat.load(six)
    nodes, _ = node_labels(ens, 0, ["a", "b", "c", "d"])
    assert nodes[0].split("\n")[0] in "abcd"
    stump = DecisionTreeRegressor().fit(np.zeros((10, 2)), np.ones(10))  # one leaf, no split
    fig = tree_figure(tree2mat.load(stump), 0)
    assert "v1\n1" in figure_texts(fig)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ([], "--png needs --tree K"),
        (["--tree", "0", "--png", "{d}/x.svg"], "name the file *.png"),
        (["--tree", "0", "--png", "{d}/missing/x.png"], "no such directory"),
        (["--tree", "0", "--format", "json"], "--png writes only the picture"),
        (["--tree", "0", "-o", "{d}/m.txt"], "--png writes only the picture"),
        (["--tree", "7"], "--tree 7 is out of range"),
    ],
)
def test_bad_png_options_are_one_line_errors(models, tmp_path, capsys, args, needle):
    png = tmp_path / "t.png"
    argv = ["inspect", str(models["six"])] + [a.format(d=tmp_path) for a in args]
    if "--png" not in argv:
        argv += ["--png", str(png)]
    one_line_error(capsys, main(argv), needle)
    assert list(tmp_path.iterdir()) == []  # nothing written, no temp files


def test_png_without_matplotlib_is_a_one_line_error(models, tmp_path, capsys, without_matplotlib):
    png = tmp_path / "t.png"
    one_line_error(capsys, main(["inspect", str(models["six"]), "--tree", "0", "--png", str(png)]),
                   "--png needs matplotlib, which is not installed: pip install 'tree2mat[plot]'")
    assert not png.exists()

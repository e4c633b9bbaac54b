"""Files and graphs that would take minutes or gigabytes are refused early, saying so: a model
file's declared sizes (bitset words x splits, outputs per leaf, node counts, the file's own size)
are weighed against the memory budget before anything of it is built, and a file whose first
bytes are not its format is refused unread, however large; ``verify`` runs only graphs of
tree2mat's own operators unless told, and every run of a graph ends within ``--timeout``.

Each size case runs the command in a process of its own and measures it there: refused within
5 s and 500 MB (beyond the interpreter and its imports)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

from tree2mat.cli import main
from tree2mat.ir.limits import physical_memory

from conftest import ROOT

#: What one refusal may take, measured in its own process after the imports.
SECONDS, MEGABYTES = 5.0, 500

_MEASURE = """
import json, resource, sys, time
from tree2mat.cli import main
import tree2mat.frontends, tree2mat.forms, tree2mat.verify, tree2mat.convert  # (the imports are not the command's)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
code = main(sys.argv[1:])
seconds = time.perf_counter() - start
grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
print(json.dumps({"code": code, "seconds": seconds, "megabytes": grown}))
"""


def measured(args: list[str]) -> tuple[dict, str]:
    """``tree2mat ARGS`` in a process of its own: its exit code, seconds and peak memory growth
    (MB) after the imports, and its stderr."""
    done = subprocess.run([sys.executable, "-c", _MEASURE, *args], capture_output=True, text=True, timeout=600, check=False)
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr.strip()


def lightgbm_bitset_text(splits: int, words: int) -> str:
    """A LightGBM model text of one tree whose ``splits`` categorical splits all name one bitset
    of ``words`` uint32 words, every bit set (what LightGBM's loader reads as written)."""
    n = splits
    left = [-i - 1 for i in range(n)]
    right = [i + 1 for i in range(n - 1)] + [-n - 1]
    join = lambda xs: " ".join(map(str, xs))  # noqa: E731
    tree = "\n".join([
        "Tree=0", f"num_leaves={n + 1}", "num_cat=1", f"split_feature={join([0] * n)}", f"split_gain={join([1] * n)}",
        f"threshold={join([0] * n)}", f"decision_type={join([1] * n)}", f"left_child={join(left)}", f"right_child={join(right)}",
        f"leaf_value={join(range(n + 1))}", f"leaf_weight={join([1] * (n + 1))}", f"leaf_count={join([1] * (n + 1))}",
        f"internal_value={join([0] * n)}", f"internal_weight={join([1] * n)}", f"internal_count={join([1] * n)}",
        f"cat_boundaries=0 {words}", f"cat_threshold={join([2**32 - 1] * words)}", "is_linear=0", "shrinkage=1", "", "",
    ])
    head = "\n".join(["tree", "version=v4", "num_class=1", "num_tree_per_iteration=1", "label_index=0", "max_feature_idx=1",
                      "objective=regression", "feature_names=a b", "feature_infos=-1:0:1 [0:1]", f"tree_sizes={len(tree.encode())}", "", ""])
    return head + tree + "end of trees\n\nparameters:\n[objective: regression]\nend of parameters\n\npandas_categorical:null\n"


def _categorical_chain(nodes: int, width: int, columns: int = 1) -> dict:
    """An IR document: one tree, a chain of ``nodes`` categorical nodes over ``columns`` columns,
    each listing ``width`` categories of its own."""
    cats = [{"node": i, "values": list(range(i * width, (i + 1) * width)), "left": [True] * width, "other_left": False}
            for i in range(nodes)]
    return {"tree2mat_ir": 1, "n_features": columns, "trees": [{
        "feature": [i % columns for i in range(nodes)], "threshold": [0.0] * nodes, "default_left": [True] * nodes,
        "left": [-(i + 1) for i in range(nodes)], "right": [i + 1 for i in range(nodes - 1)] + [-(nodes + 1)],
        "value": [0.0] * (nodes + 1), "categorical": cats}]}


def test_inspect_summarizes_what_only_its_max_memory_refuses(tmp_path, capsys):
    """inspect refuses unread only a model no graph of fits half this machine's memory (or its
    --max-memory, if more) for 10 000 rows; a model over --max-memory alone is summarized, with
    auto's refusal in the summary."""
    (tmp_path / "wide.json").write_text(json.dumps(_categorical_chain(10, 100, columns=10)))
    assert main(["inspect", str(tmp_path / "wide.json"), "--max-memory", "64M"]) == 0
    out = capsys.readouterr().out
    assert "auto: None: no exact form fits --max-memory 64.0 MiB" in out, out
    assert main(["convert", str(tmp_path / "wide.json"), "-o", str(tmp_path / "w.onnx"), "--max-memory", "64M"]) == 2
    assert "any graph of it needs at least" in capsys.readouterr().err


def _sparse(path: Path, size: int, start: bytes = b"") -> Path:
    with open(path, "wb") as fh:
        fh.write(start)
        fh.truncate(size)
    return path


def _large_text_bytes() -> int:
    """A text size whose parse would take over half this machine's memory (8 bytes per byte)."""
    return physical_memory() // 16 + 2**20


def _cases(d: Path) -> dict[str, tuple[Path, str]]:
    """(file, a word its refusal names) per hostile file."""
    (d / "bitset.txt").write_text(lightgbm_bitset_text(60, 31_250))
    K = 1_000_000
    doc = {"tree2mat_ir": 1, "n_features": 2, "n_outputs": K, "trees": [
        {"feature": [0], "threshold": [0.5], "default_left": [True], "left": [-1], "right": [-2], "value": [[0] * K, [1] * K]}]}
    (d / "wide.json").write_text(json.dumps(doc, separators=(",", ":")))
    (d / "leaves.txt").write_text(lightgbm_bitset_text(3, 1).replace("num_leaves=4", f"num_leaves={10**15}"))
    (d / "shared.txt").write_text(lightgbm_bitset_text(40_000, 62_500))  # one bitset named 40 000 times (counted once)
    (d / "sparse.txt").write_text(lightgbm_bitset_text(200_000, 62_500).replace(" ".join(["4294967295"] * 62_500), " ".join(["0"] * 62_499 + ["1"])))
    (d / "chain.json").write_text(json.dumps(_categorical_chain(4_000, 200), separators=(",", ":")))
    return {
        "lightgbm 60 splits x 31 250-word bitset": (d / "bitset.txt", "categorical splits"),
        "IR with 1 000 000 outputs per leaf": (d / "wide.json", "outputs per leaf"),
        "LightGBM num_leaves 10^15": (d / "leaves.txt", "nodes"),
        "LightGBM 40 000 splits x one 62 500-word bitset": (d / "shared.txt", "categorical splits"),
        "LightGBM 200 000 splits x one sparse bitset": (d / "sparse.txt", "categorical splits"),
        "IR with 4 000 categorical nodes x 200 new categories": (d / "chain.json", "categorical splits"),
        "2 GiB of zeros as .json": (_sparse(d / "zeros.json", 2**31), "not a JSON"),
        "2 GiB of zeros as .ubj": (_sparse(d / "zeros.ubj", 2**31), "not a JSON"),
        "2 GiB of zeros as LightGBM .txt": (_sparse(d / "zeros.txt", 2**31), "not a LightGBM model text"),
        "2 GiB of zeros as .skops": (_sparse(d / "zeros.skops", 2**31), "not a readable .skops"),
        "2 GiB of zeros, no suffix": (_sparse(d / "zeros", 2**31), "unknown model file type"),
        "XGBoost JSON over half the memory": (_sparse(d / "big.json", _large_text_bytes(), b'{"learner": '), "half this machine's memory"),
        "LightGBM text over half the memory": (_sparse(d / "big.txt", _large_text_bytes(), b"tree\nversion=v4\n"), "half this machine's memory"),
    }


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    return _cases(tmp_path_factory.mktemp("hostile"))


@pytest.mark.slow
@pytest.mark.parametrize("command", ["convert", "inspect"])
def test_hostile_sizes_are_refused_early(cases, tmp_path, command):
    for what, (path, needle) in cases.items():
        if command == "inspect" and what.startswith("IR with"):
            continue  # (a million outputs fit one row of a graph: inspect reads it; convert's 10 000 rows do not)
        args = ["convert", str(path), "-o", str(tmp_path / "out.onnx")] if command == "convert" else ["inspect", str(path)]
        got, err = measured(args)
        assert got["code"] == 2 and err.startswith("tree2mat: error:") and "\n" not in err and needle in err, (what, err)
        assert got["seconds"] < SECONDS and got["megabytes"] < MEGABYTES, (what, got)
    assert not (tmp_path / "out.onnx").exists()


def test_the_bitset_refusal_says_what_it_weighed(cases, tmp_path, capsys):
    path, _ = cases["lightgbm 60 splits x 31 250-word bitset"]
    start = time.perf_counter()
    assert main(["convert", str(path), "-o", str(tmp_path / "x.onnx")]) == 2
    err = capsys.readouterr().err
    assert "60 categorical splits listing 60,000,000 categories (1,000,000 in the widest column)" in err, err
    assert "--max-memory 4.00 GiB" in err and time.perf_counter() - start < SECONDS


def test_a_small_bitset_model_still_converts_exactly(tmp_path):
    """The same file with a bitset of a few words converts, and its graph routes as the reference
    evaluator (and LightGBM, where installed: tests/frontends/test_lightgbm.py) does."""
    import tree2mat

    (tmp_path / "small.txt").write_text(lightgbm_bitset_text(5, 2))
    ens = tree2mat.load(tmp_path / "small.txt")
    report = tree2mat.verify(tmp_path / "small.txt", tree2mat.convert(tmp_path / "small.txt"), rows=200)
    assert report.passed and ens.trees[0].cat_values.shape == (5, 64), report.summary()


# ------------------------------------------------------------------------------ foreign graphs


def _loop_graph(path: Path, n_features: int = 4, output: str = "variable") -> Path:
    """A valid graph on [N, n_features] whose Loop runs 2**62 times before it hands the rows back."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c_out"]), helper.make_node("Identity", ["x"], ["x_out"])], "body",
        [helper.make_tensor_value_info("i", T.INT64, []), helper.make_tensor_value_info("c", T.BOOL, []),
         helper.make_tensor_value_info("x", T.FLOAT, ["N", n_features])],
        [helper.make_tensor_value_info("c_out", T.BOOL, []), helper.make_tensor_value_info("x_out", T.FLOAT, ["N", n_features])],
    )
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "cond", "X"], ["looped"], body=body),
         helper.make_node("ReduceSum", ["looped", "axis"], [output], keepdims=1)], "loop",
        [helper.make_tensor_value_info("X", T.FLOAT, ["N", n_features])], [helper.make_tensor_value_info(output, T.FLOAT, ["N", 1])],
        initializer=[onnx.numpy_helper.from_array(np.array(2**62, np.int64), "M"), onnx.numpy_helper.from_array(np.array(True), "cond"),
                     onnx.numpy_helper.from_array(np.array([1], np.int64), "axis")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def test_a_looping_graph_is_refused_unless_asked(tmp_path, capsys):
    graph = _loop_graph(tmp_path / "loop.onnx")
    model = ROOT / "fixtures" / "paper_tree.json"
    assert main(["verify", str(model), str(graph)]) == 2
    err = capsys.readouterr().err.strip()
    assert "operators tree2mat never writes (Loop)" in err and "--foreign-graph" in err and "\n" not in err, err


@pytest.mark.parametrize("runtime", ["onnxruntime", "reference"])
def test_a_foreign_graph_ends_within_the_timeout(tmp_path, runtime):
    """Asked to run it, verify stops the run at --timeout with one line and exit 2 (in a process
    of its own: the reference evaluator's run cannot be stopped, only left, and the command ends)."""
    graph = _loop_graph(tmp_path / "loop.onnx")
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "tree2mat", "verify", str(ROOT / "fixtures" / "paper_tree.json"), str(graph),
                           "--foreign-graph", "--timeout", "2", "--runtime", runtime], capture_output=True, text=True, timeout=300, check=False)
    err = done.stderr.strip()
    assert done.returncode == 2 and err.startswith("tree2mat: error:") and "\n" not in err and "--timeout" in err, err
    assert time.perf_counter() - start < 60


def test_a_custom_domain_is_foreign(tmp_path, capsys):
    model = onnx.load(str(_loop_graph(tmp_path / "loop.onnx")))
    node = model.graph.node[1]
    node.domain, node.op_type = "com.example", "Anything"
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    onnx.save(model, str(tmp_path / "custom.onnx"))
    assert main(["verify", str(ROOT / "fixtures" / "paper_tree.json"), str(tmp_path / "custom.onnx")]) == 2
    assert "com.example.Anything" in capsys.readouterr().err


def _graph(path: Path, nodes: list, initializers: list) -> Path:
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", T.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("variable", T.FLOAT, ["N", 4])], initializers)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    return path


def test_a_graph_of_allowed_operators_asking_for_any_memory_is_refused(tmp_path, capsys):
    """A ConstantOfShape of a size the file chooses (10^10 floats for every row) is refused before
    a runtime loads it, as shape inference sizes it."""
    shape = onnx.numpy_helper.from_array(np.array([100_000, 100_000], np.int64), "shape")
    graph = _graph(tmp_path / "big.onnx", [
        helper.make_node("ConstantOfShape", ["shape"], ["a"], value=helper.make_tensor("v", T.FLOAT, [1], [1.0])),
        helper.make_node("ReduceSum", ["a"], ["s"], keepdims=0), helper.make_node("Add", ["X", "s"], ["variable"])], [shape])
    assert main(["verify", str(ROOT / "fixtures" / "paper_tree.json"), str(graph)]) == 2
    err = capsys.readouterr().err
    assert "[100000, 100000] float, over 4 GiB for one row" in err and "\n" not in err.strip(), err


def test_loading_a_graph_is_within_the_timeout(tmp_path):
    """onnxruntime folds a graph's constants as it loads it (a 3000 x 3000 MatMul of constants,
    seconds): the load is timed as a run is."""
    shape = onnx.numpy_helper.from_array(np.array([3000, 3000], np.int64), "shape")
    graph = _graph(tmp_path / "fold.onnx", [
        helper.make_node("ConstantOfShape", ["shape"], ["a"], value=helper.make_tensor("v", T.FLOAT, [1], [1.0])),
        helper.make_node("MatMul", ["a", "a"], ["b"]), helper.make_node("ReduceSum", ["b"], ["s"], keepdims=0),
        helper.make_node("Add", ["X", "s"], ["variable"])], [shape])
    done = subprocess.run([sys.executable, "-m", "tree2mat", "verify", str(ROOT / "fixtures" / "paper_tree.json"), str(graph),
                           "--timeout", "0.05"], capture_output=True, text=True, timeout=300, check=False)
    err = done.stderr.strip()
    assert done.returncode == 2 and "did not load the graph within 0.05 s (--timeout)" in err and "\n" not in err, err


def test_timeout_must_be_positive(capsys):
    fixture = str(ROOT / "fixtures" / "paper_tree.json")
    assert main(["verify", fixture, fixture, "--timeout", "0"]) == 2
    assert "--timeout" in capsys.readouterr().err


# ------------------------------------------------------ the declared sizes and the floor they meet


def _models():
    """Fitted models of every library and shape the floor must stay under: categories, several
    outputs per leaf, one class per tree, stumps, oblivious trees."""
    import pandas as pd
    from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestRegressor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 5))
    X[:, 4] = rng.integers(0, 12, 600)
    y3 = rng.integers(0, 3, 600)
    out = {
        "forest 3 targets": RandomForestRegressor(n_estimators=4, max_depth=5, random_state=0).fit(X, rng.normal(size=(600, 3))),
        "hgb categorical": HistGradientBoostingClassifier(max_iter=5, categorical_features=[4], random_state=0).fit(X, y3),
        "stumps": HistGradientBoostingClassifier(max_iter=4, max_depth=1, random_state=0).fit(X, y3 > 0),
    }
    lgb = pytest.importorskip("lightgbm")
    xgb = pytest.importorskip("xgboost")
    out["lightgbm categorical"] = lgb.LGBMClassifier(n_estimators=5, num_leaves=7, verbose=-1).fit(X, y3, categorical_feature=[4])
    frame = pd.DataFrame({"a": X[:, 0], "c": pd.Categorical(X[:, 4].astype(int))})
    out["xgboost categorical"] = xgb.XGBRegressor(n_estimators=4, max_depth=3, enable_categorical=True, tree_method="hist").fit(frame, X[:, 1])
    out["xgboost multi-output tree"] = xgb.XGBRegressor(n_estimators=3, max_depth=3, multi_strategy="multi_output_tree",
                                                        tree_method="hist").fit(X, rng.normal(size=(600, 4)))
    catboost = pytest.importorskip("catboost")
    out["catboost oblivious"] = catboost.CatBoostClassifier(iterations=4, depth=4, verbose=0).fit(X, y3)
    return out


@pytest.mark.slow
def test_the_floor_is_below_every_form(tmp_path):
    """What a model's sizes say any graph needs at least is at most what each form estimates for
    its graph (so the early refusal refuses nothing a form could build), at 1 and 10 000 rows."""
    import tree2mat
    from tree2mat.forms import FORMS
    from tree2mat.forms._stack import floor_bytes
    from tree2mat.ir.limits import Declared

    for what, model in _models().items():
        ens = tree2mat.load(model)
        sizes = Declared.of(ens)
        for rows in (1, 10_000):
            least = floor_bytes(sizes, rows)
            for spec in FORMS.values():
                estimate = spec.constant_bytes(ens) + rows * spec.bytes_per_row(ens)
                assert least <= estimate, (what, spec.name, rows, least, estimate)


@pytest.mark.slow
def test_declared_sizes_are_what_is_built(tmp_path):
    """What each reader declares before building is what the built IR holds (XGBoost: a column's
    categories counted from below, as its largest node's), on files the libraries wrote."""
    import tree2mat
    from tree2mat import frontends
    from tree2mat.ir import limits
    from tree2mat.ir.io import dumps

    seen = []
    files = {
        "lightgbm": ROOT / "fixtures" / "lightgbm_binary_categorical_zero_as_missing.txt",
        "xgboost": ROOT / "fixtures" / "xgboost_binary_categorical.ubj",
        "xgboost multi": ROOT / "fixtures" / "xgboost2_multi_output_tree.json",
    }
    (tmp_path / "ir.json").write_text(dumps(tree2mat.load(ROOT / "fixtures" / "lightgbm_binary_categorical_zero_as_missing.txt")))
    files["ir"] = tmp_path / "ir.json"
    for what, path in files.items():
        seen.clear()
        with limits.checking(lambda sizes, name: seen.append(sizes)):
            ens = frontends.load_model(path)[1]  # (tree2mat.load would put its own check in)
        built = limits.Declared.of(ens)
        declared = [s for s in seen if s.trees][-1]
        assert declared.trees == built.trees and declared.internal == built.internal and declared.leaves == built.leaves, (what, declared, built)
        assert declared.outputs == built.outputs and declared.categorical_nodes == built.categorical_nodes, (what, declared, built)
        assert declared.widest_node == built.widest_node and declared.categorical_columns == built.categorical_columns, (what, declared, built)
        if what.startswith("xgboost"):
            assert declared.widest_column <= built.widest_column, (what, declared, built)
        else:
            assert declared.widest_column == built.widest_column and declared.category_entries == built.category_entries, (what, declared, built)


@pytest.mark.parametrize("k", [1, 1_000, 100_000])
def test_every_form_counts_the_output_width(k):
    """A graph writes its K outputs for every row: every form's memory estimate per row holds at
    least those K float32s (hierarchical's did not, and auto picked it for a million outputs)."""
    from tree2mat.forms import FORMS
    from tree2mat.ir.io import ensemble_from_dict

    ens = ensemble_from_dict({"tree2mat_ir": 1, "n_features": 2, "n_outputs": k, "trees": [
        {"feature": [0], "threshold": [0.5], "default_left": [True], "left": [-1], "right": [-2], "value": [[0.0] * k, [1.0] * k]}]})
    for spec in FORMS.values():
        assert spec.bytes_per_row(ens) >= 4 * k, (spec.name, spec.bytes_per_row(ens))

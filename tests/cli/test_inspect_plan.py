"""``inspect --plan``: each pass of an exact form's graph, in figures, checked against the
library's own trees and against the graph ``convert`` builds (its contract's exit map)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import xgboost as xgb

import tree2mat
from tree2mat import contract
from tree2mat.cli import main

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
MODEL = FIXTURES / "xgboost_multiclass_dart.json"
EXACT = ("sign", "bitvector", "traverse", "hierarchical", "oblivious")


def _plan(capsys, *args: str) -> dict:
    assert main(["inspect", str(MODEL), "--plan", "--format", "json", *args]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("form", EXACT)
def test_the_plan_is_the_librarys_trees_and_the_graphs_exit(form, capsys):
    """The stacked pass has XGBoost's trees (its own dump: how many, the most leaves of one);
    the exit pass is the exit the graph carries (its map's index type and positions, its trees'
    order)."""
    doc = _plan(capsys, "--form", form)
    assert doc["form"] == form and [p["pass"] for p in doc["passes"]] == ["stack", "nodes", "exit", "sums"]
    stack, nodes, exit_, sums = doc["passes"]
    booster = xgb.Booster(model_file=str(MODEL))
    dumps = booster.get_dump()
    assert stack["trees"] == len(dumps)
    assert stack["leaves_per_tree"] == max(d.count("leaf=") for d in dumps)
    assert stack["internal_nodes_per_tree"] == stack["leaves_per_tree"] - 1
    # (every real node reads one block: the blocks' nodes are all the trees' splits)
    assert sum(b["nodes"] for b in nodes["blocks"].values()) == sum(d.count("[f") for d in dumps)
    meta = {p.key: p.value for p in tree2mat.convert(str(MODEL), form=form).metadata_props}
    T = len(dumps)
    if meta[contract.LAYOUT_KEY] == contract.EXIT_MAPPED:
        m = contract.read_exit_map(meta[contract.MAP_KEY], T, 10**6)
        assert exit_["index"] == f"[{T}, N] {m.index_dtype.name}" and exit_["positions_per_tree"] == m.slots.shape[1]
        assert exit_["trees_in_order"] == bool(np.array_equal(m.order, np.arange(T)))
    else:
        assert exit_["index"] == f"[{T}, N] int64" and exit_["positions_are"] == "leaf ids" and exit_["trees_in_order"]
    assert sums["margin_dtype"] == meta["tree2mat.arithmetic"] == "float32" and sums["link"] == "softmax"
    assert "float32_digits" not in sums  # (XGBoost sums in float32: the graph sums as it does, no digits)
    if form in ("sign", "bitvector", "oblivious"):
        assert exit_["positions_are"] == "leaf ids"
    assert _plan(capsys, "--form", form, "--dtype", "float64")["passes"][3]["margin_dtype"] == "float64"


def test_the_digits_of_the_plan_are_the_graphs(capsys):
    """LightGBM sums in float64, so a float32 graph sums its leaf values exactly in float32
    digits: as many digit sums in the graph as the plan says; none with --dtype float64."""
    model = FIXTURES / "lightgbm_binary_categorical_zero_as_missing.txt"
    assert main(["inspect", str(model), "--plan", "--form", "sign", "--format", "json"]) == 0
    sums = json.loads(capsys.readouterr().out)["passes"][3]
    graph = tree2mat.convert(str(model), form="sign")
    digit_sums = {o for n in graph.graph.node for o in n.output if re.fullmatch(r"digit_sum\d+", o)}
    assert sums["float32_digits"]["count"] == len(digit_sums) >= 2
    assert main(["inspect", str(model), "--plan", "--form", "sign", "--dtype", "float64", "--format", "json"]) == 0
    assert "float32_digits" not in json.loads(capsys.readouterr().out)["passes"][3]


def test_the_plan_as_text_and_of_autos_form(capsys):
    assert main(["inspect", str(MODEL), "--plan"]) == 0
    out = capsys.readouterr().out
    picked = {p.key: p.value for p in tree2mat.convert(str(MODEL)).metadata_props}["tree2mat.form"]
    assert out.startswith(f"passes of the {picked} form's graph (float32 input):")
    assert all(f"{k}. {name}" in out for k, name in enumerate(("stack", "nodes", "exit", "sums"), 1))


@pytest.mark.parametrize("args, needle", [
    (["--plan", "--tree", "0"], "leave out --tree"),
    (["--plan", "--form", "soft"], "soft is an approximation"),
    (["--form", "sign"], "add --plan"),
    (["--plan", "--dtype", "float16"], "choose float32 or float64"),
    (["--plan", "--form", "nope"], "unknown form 'nope'"),
    (["--plan", "--form", "treeensemble"], "treeensemble's graph tests columns of its own"),
    (["--dtype", "float32"], "add --plan"),
])
def test_plan_options_refused_with_one_line(args, needle, capsys):
    code = main(["inspect", str(MODEL), *args])
    err = capsys.readouterr().err
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err

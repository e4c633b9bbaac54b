"""The papers' worked example (Decision Machines fig. 1; Binary Network fig. 1) as a fixture."""

import json

import numpy as np
import pytest

import tree2mat
from tree2mat.cli import main
from tree2mat.ir import apply
from tree2mat.ir.matrices import paper_matrices

from conftest import ROOT, assert_standard_graph, run_onnx

FIXTURE = ROOT / "fixtures" / "paper_tree.json"

# As printed in the papers (docs/architecture.md, "The matrices").
PAPER = {
    "S": [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 1]],
    "t": [1, 4, 3, 2, 5],
    "B": [[-1, -1, 0, -1, 0], [-1, -1, 0, 1, -1], [-1, -1, 0, 1, 1], [-1, 1, 0, 0, 0], [1, 0, -1, 0, 0], [1, 0, 1, 0, 0]],
    "bitvector": [[0, 0, 1, 0, 1], [0, 0, 1, 1, 0], [0, 0, 1, 1, 1], [0, 1, 1, 1, 1], [1, 1, 0, 1, 1], [1, 1, 1, 1, 1]],
    "depth": [3, 4, 4, 2, 2, 2],
}


def test_matrices_equal_the_papers():
    ens = tree2mat.load(FIXTURE)
    mats = paper_matrices(ens.trees[0], ens.n_features)
    for key, expected in PAPER.items():
        np.testing.assert_array_equal(mats[key], np.asarray(expected), err_msg=key)


@pytest.mark.parametrize("fmt", ["json", "npz"])
def test_inspect_outputs_the_papers_matrices(tmp_path, fmt):
    out = tmp_path / f"m.{fmt}"
    assert main(["inspect", str(FIXTURE), "--tree", "0", "--format", fmt, "-o", str(out)]) == 0
    got = json.loads(out.read_text()) if fmt == "json" else dict(np.load(out))
    for key, expected in PAPER.items():
        np.testing.assert_array_equal(np.asarray(got[key]), np.asarray(expected), err_msg=key)
    np.testing.assert_array_equal(np.asarray(got["v"]).ravel(), [1, 2, 3, 4, 5, 6])


def test_inspect_text_shows_template(capsys):
    assert main(["inspect", str(FIXTURE), "--tree", "0"]) == 0
    text = capsys.readouterr().out
    assert "v5     1  0 -1  0  0" in text and "n4     0  1  0  0" in text


@pytest.mark.parametrize("form", [name for name, spec in tree2mat.FORMS.items() if spec.exact])
def test_worked_inputs_reach_the_papers_leaves(form):
    # x = (2,1,2,2) -> v5 and x = (1,1,2,3) -> v1 (leaf values 1..6 stand for v1..v6).
    ens = tree2mat.load(FIXTURE)
    X = np.asarray([[2, 1, 2, 2], [1, 1, 2, 3]], np.float32)
    np.testing.assert_array_equal(apply(ens, X)[:, 0], [4, 0])
    onx = tree2mat.convert(FIXTURE, leaves=True, form=form)
    assert_standard_graph(onx)
    got = run_onnx(onx, X)
    np.testing.assert_array_equal(got["leaves"][:, 0], [4, 0])
    np.testing.assert_array_equal(got["variable"][:, 0], [5.0, 1.0])


def test_verify_against_reference_evaluator_for_ir_files():
    report = tree2mat.verify(FIXTURE, tree2mat.convert(FIXTURE))
    assert report.passed
    assert any("reference evaluator" in n for n in report.notes)

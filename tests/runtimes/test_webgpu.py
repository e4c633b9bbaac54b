"""WebGPU in headless Chromium (``make test-webgpu``, which sets TREE2MAT_WEBGPU=1 after
installing Chromium and the npm packages; skipped elsewhere, as CI has no browser), on both of
onnxruntime-web's WebGPU backends: ``webgpu`` (the ``onnxruntime-web/webgpu`` import) and
``webgpu-jsep`` (the default import's JSEP), SwiftShader's adapter headless:

- every exact form its spec proves there, of each of the runtime matrix's five models, routes
  exactly, against the library, leaf ids included (the outcomes also in build/webgpu.json);
- the default graphs of the matrix's attention forests, against their own predict;
- each exact form's graph of the matrix's oblique forest, against the reference evaluator;
- each exact form's graph of the matrix's CatBoost classifiers, against CatBoost's predict;
- the browser example (examples/web) scores its rows on WebGPU with scikit-learn's labels;
- each exact form's graph with a tree mask (``convert --tree-mask rows``) against the library's
  staged predictions, and with a ``proximity`` output against the library's leaf kernel.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
import pytest

import tree2mat
from benchmarks._cases import MODELS, fitted
from tree2mat.forms import DEFAULT_OPSET, auto
from tree2mat.runtimes import NODE_SCRIPT, RUNTIMES, node_modules
from tree2mat.verify import GraphRunner, compare, default_atol, synthesize

from conftest import ROOT
from test_runtimes import (
    BROWSER,
    EXACT,
    PORTABLE,
    SOFT,
    attention_forest,
    catboost_model,
    graph,
    oblique_forest,
    proven_opset,
    zero_split_booster,
)

RESULTS = ROOT / "build" / "webgpu.json"
#: (form, runtime): each exact form on each WebGPU runtime its spec proves it on.
PROVEN_HERE = [(form, runtime) for form in EXACT for runtime in BROWSER if runtime in tree2mat.FORMS[form].proven_on]

pytestmark = pytest.mark.skipif(os.environ.get("TREE2MAT_WEBGPU") != "1", reason="WebGPU tests run with make test-webgpu (TREE2MAT_WEBGPU=1)")


@pytest.mark.parametrize("runtime", BROWSER)
def test_webgpu_is_there(runtime):
    """make test-webgpu installed everything: a missing piece fails here, it is not skipped."""
    assert RUNTIMES[runtime].available(), RUNTIMES[runtime].install


@pytest.mark.parametrize("runtime", BROWSER)
@pytest.mark.parametrize("name", list(MODELS))
def test_every_model_routes_exactly_on_webgpu(name, runtime):
    outcome = {}
    default = {p.key: p.value for p in tree2mat.convert(fitted(name)).metadata_props}["tree2mat.form"]
    proven = [f for f in EXACT if runtime in tree2mat.FORMS[f].proven_on]
    assert auto.runs_on(tree2mat.FORMS[default], runtime, DEFAULT_OPSET, tree2mat.load(fitted(name)))
    for form in proven:  # (each at the opset from which it is proven there)
        try:
            report = tree2mat.verify(fitted(name), graph(name, form, proven_opset(fitted(name), form, runtime)), runtime=runtime, rows=100)
            outcome[form] = {"passed": report.passed, "failed": {o.title: o.mismatches or o.problem for o in report.outputs if not o.passed}}
        except tree2mat.Tree2MatError as exc:
            outcome[form] = {"passed": False, "error": str(exc)[:300]}
    done = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    done.setdefault(runtime, {})[name] = {"default": default, "forms": outcome, "version": RUNTIMES[runtime].version()}
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(done, indent=1))
    assert {f: o for f, o in outcome.items() if not o["passed"]} == {}, f"on {runtime} (the default graph: {default})"


@pytest.mark.parametrize("runtime", BROWSER)
@pytest.mark.parametrize("name", list(MODELS))
def test_each_target_s_pick_verifies_on_webgpu(name, runtime):
    from test_runtimes import assert_target_s_pick_verifies

    assert_target_s_pick_verifies(name, runtime, rows=100)


def _argmax_after_a_shorter_one() -> onnx.ModelProto:
    """x [2, 62, 3]: ``short``, the ArgMax over axis 1 of its first 47 entries, then ``long``, the
    ArgMax of all 62 (after ``short``: it reads ``short`` times 0), one rank and the same attributes."""
    h = onnx.helper
    nodes = [
        h.make_node("Slice", ["x", "start", "stop", "axis"], ["x_short"]),
        h.make_node("ArgMax", ["x_short"], ["short"], axis=1, keepdims=0),
        h.make_node("Cast", ["short"], ["short_f"], to=onnx.TensorProto.FLOAT),
        h.make_node("Mul", ["short_f", "zero"], ["nothing"]),
        h.make_node("Unsqueeze", ["nothing", "axis"], ["nothing_3d"]),
        h.make_node("Add", ["x", "nothing_3d"], ["x_after"]),
        h.make_node("ArgMax", ["x_after"], ["long"], axis=1, keepdims=0),
    ]
    consts = {"start": np.asarray([0]), "stop": np.asarray([47]), "axis": np.asarray([1]), "zero": np.float32(0)}
    graph = h.make_graph(
        nodes, "argmax_after_a_shorter_one", [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 62, 3])],
        [h.make_tensor_value_info(n, onnx.TensorProto.INT64, [2, 3]) for n in ("short", "long")],
        [onnx.numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items()],
    )
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("runtime", BROWSER)
def test_jsep_reuses_an_argmax_shader_across_lengths(runtime):
    """Why _exact.exit_by_scores gives each size group's ArgMax its own rank, measured: JSEP (the
    default import) runs the second ArgMax with the first one's shader, whose loop stops at 47
    entries, and finds 10 where the maximum is at 55; the ``/webgpu`` import finds 55, as
    onnxruntime does. When JSEP finds 55, it changed: update docs/runtimes.md and group_argmax."""
    x = np.zeros((2, 62, 3), np.float32)
    x[:, 10], x[:, 55] = 1, 2
    model = _argmax_after_a_shorter_one()
    want = GraphRunner(model, "cpu").run(x)
    assert (want["short"] == 10).all() and (want["long"] == 55).all()
    got = GraphRunner(model, "cpu", runtime).run(x)
    assert (got["short"] == 10).all()
    assert (got["long"] == (10 if runtime == "webgpu-jsep" else 55)).all(), got["long"]


@pytest.mark.parametrize("runtime", BROWSER)
@pytest.mark.parametrize("kind", ["regressor", "classifier", "ABRF-3"])
def test_attention_forests_default_graphs_on_webgpu(kind, runtime):
    """An attention forest's default graph (tree2mat.attention): routing exact, values within
    the softmax's rounding, labels identical."""
    abrf = attention_forest(kind)
    report = tree2mat.verify(abrf, tree2mat.convert(abrf), runtime=runtime, rows=100)
    assert report.passed, report.summary()


@pytest.mark.parametrize("runtime", BROWSER)
@pytest.mark.parametrize("form", PORTABLE)
def test_oblique_forest_routes_exactly_on_webgpu(form, runtime):
    """Projections summed term by term in float32 (WGSL may fuse a multiply into an add: the
    graph adds |p| x sign(p), exact), then the nodes: routing exact, near-hyperplane rows too."""
    ens = oblique_forest()[3]
    report = tree2mat.verify(ens, tree2mat.convert(ens, form, opset=proven_opset(ens, form, runtime)), runtime=runtime, rows=100)
    assert report.passed, report.summary()


@pytest.mark.parametrize("runtime", BROWSER)
@pytest.mark.parametrize("form", PORTABLE)
@pytest.mark.parametrize("kind", ["symmetric", "non-symmetric"])
def test_catboost_routes_exactly_on_webgpu(kind, form, runtime):
    model = catboost_model(kind)
    report = tree2mat.verify(model, tree2mat.convert(model, form, opset=proven_opset(model, form, runtime)), runtime=runtime, rows=100)
    assert report.passed, report.summary()


@pytest.mark.parametrize("runtime", BROWSER)
@pytest.mark.parametrize("form", PORTABLE)
def test_an_xgboost_split_at_zero_sends_zero_where_xgboost_does_on_webgpu(form, runtime):
    """WebGPU flushes subnormals: before the scaled blocks, x = 0 went left at XGBoost's splits
    at 0 (14 of 570 synthesized rows, both backends, 2026-11-29; test_runtimes.py)."""
    model, rows = zero_split_booster()
    report = tree2mat.verify(model, tree2mat.convert(model, form), rows, runtime=runtime)
    assert report.passed, report.summary()


@pytest.mark.parametrize("runtime", BROWSER)
@pytest.mark.parametrize("form", SOFT)
def test_soft_forms_run_on_webgpu(form, runtime):
    """The approximations give onnxruntime's outputs on WebGPU too."""
    name = "HistGradientBoostingClassifier, NaN"
    ens = tree2mat.load(fitted(name))
    onx = graph(name, form)
    X = synthesize(ens, 100)[0]
    want = GraphRunner(onx, "cpu").run(X)
    got = GraphRunner(onx, "cpu", runtime).run(X)
    for out, exp in want.items():
        rep = compare(out, "cpu", got[out], exp, X, default_atol(ens, "float32"), 1e-5, out == "label")
        assert rep.passed, rep


def test_the_browser_example_scores_on_webgpu(tmp_path):
    subprocess.run([sys.executable, str(ROOT / "examples" / "web" / "make_model.py"), str(tmp_path)], check=True, capture_output=True)
    shutil.copy(ROOT / "examples" / "web" / "index.html", tmp_path)
    folder = node_modules("onnxruntime-web")
    done = subprocess.run(
        [shutil.which("node") or "node", str(NODE_SCRIPT.with_name("run_browser.mjs")), "--page", str(tmp_path)],
        capture_output=True, text=True, env={**os.environ, "TREE2MAT_NODE_MODULES": str(folder)}, timeout=600, check=False,
    )
    assert done.returncode == 0, done.stderr
    page = json.loads(done.stdout.strip().splitlines()[-1])
    assert page.get("backend") == "webgpu", page
    assert page["matches"] == page["rows"] == 72, page
    assert page["maxError"] < 1e-6, page


@pytest.mark.parametrize(("form", "runtime"), PROVEN_HERE)
def test_tree_mask_and_proximity_on_webgpu(form, runtime):
    from test_proximity_runtimes import assert_proximity_on
    from test_tree_mask_runtimes import assert_staged_on

    assert_staged_on("LGBMClassifier 3 classes, NaN", form, runtime)
    assert_proximity_on("XGBClassifier, NaN", form, runtime)

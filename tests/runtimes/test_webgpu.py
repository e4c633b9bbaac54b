"""WebGPU in headless Chromium (``make test-webgpu``, which sets TREE2MAT_WEBGPU=1 after
installing Chromium and the npm packages; skipped elsewhere, as CI has no browser).

- the default graph of each of the runtime matrix's five models routes exactly on onnxruntime-web's
  WebGPU backend (SwiftShader's adapter headless), against the library, leaf ids included; every
  exact form is run too and the outcome written to build/webgpu.json (for the README's table);
- the default graphs of the matrix's attention forests, against their own predict;
- each exact form's graph of the matrix's oblique forest, against the reference evaluator;
- each exact form's graph of the matrix's CatBoost classifiers, against CatBoost's predict;
- the browser example (examples/web) scores its rows on WebGPU with scikit-learn's labels.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

import tree2mat
from tree2mat.runtimes import NODE_SCRIPT, RUNTIMES, node_modules
from tree2mat.verify import GraphRunner, compare, default_atol, synthesize

from conftest import ROOT
from test_runtimes import EXACT, MODELS, SOFT, attention_forest, catboost_model, fitted, graph, oblique_forest

RESULTS = ROOT / "build" / "webgpu.json"

pytestmark = pytest.mark.skipif(os.environ.get("TREE2MAT_WEBGPU") != "1", reason="WebGPU tests run with make test-webgpu (TREE2MAT_WEBGPU=1)")


def test_webgpu_is_there():
    """make test-webgpu installed everything: a missing piece fails here, it is not skipped."""
    assert RUNTIMES["webgpu"].available(), RUNTIMES["webgpu"].install


@pytest.mark.parametrize("name", list(MODELS))
def test_every_model_routes_exactly_on_webgpu(name):
    outcome = {}
    default = {p.key: p.value for p in tree2mat.convert(fitted(name)).metadata_props}["tree2mat.form"]
    for form in [f for f in EXACT if "webgpu" in tree2mat.FORMS[f].proven_on]:
        try:
            report = tree2mat.verify(fitted(name), graph(name, form), runtime="webgpu", rows=100)
            outcome[form] = {"passed": report.passed, "failed": {o.title: o.mismatches or o.problem for o in report.outputs if not o.passed}}
        except tree2mat.Tree2MatError as exc:
            outcome[form] = {"passed": False, "error": str(exc)[:300]}
    done = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    done[name] = {"default": default, "forms": outcome, "version": RUNTIMES["webgpu"].version()}
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(done, indent=1))
    assert outcome[default]["passed"], f"the default graph ({default}) on WebGPU: {outcome[default]}"


@pytest.mark.parametrize("kind", ["regressor", "classifier", "ABRF-3"])
def test_attention_forests_default_graphs_on_webgpu(kind):
    """An attention forest's default graph (tree2mat.attention): routing exact, values within
    the softmax's rounding, labels identical."""
    abrf = attention_forest(kind)
    report = tree2mat.verify(abrf, tree2mat.convert(abrf), runtime="webgpu", rows=100)
    assert report.passed, report.summary()


@pytest.mark.parametrize("form", EXACT)
def test_oblique_forest_routes_exactly_on_webgpu(form):
    """Projections summed term by term in float32 (WGSL may fuse a multiply into an add: the
    graph adds |p| x sign(p), exact), then the nodes: routing exact, near-hyperplane rows too."""
    ens = oblique_forest()[3]
    report = tree2mat.verify(ens, tree2mat.convert(ens, form), runtime="webgpu", rows=100)
    assert report.passed, report.summary()


@pytest.mark.parametrize("form", EXACT)
@pytest.mark.parametrize("kind", ["symmetric", "non-symmetric"])
def test_catboost_routes_exactly_on_webgpu(kind, form):
    model = catboost_model(kind)
    report = tree2mat.verify(model, tree2mat.convert(model, form), runtime="webgpu", rows=100)
    assert report.passed, report.summary()


@pytest.mark.parametrize("form", SOFT)
def test_soft_forms_run_on_webgpu(form):
    """The approximations give onnxruntime's outputs on WebGPU too."""
    name = "HistGradientBoostingClassifier, NaN"
    ens = tree2mat.load(fitted(name))
    onx = graph(name, form)
    X = synthesize(ens, 100)[0]
    want = GraphRunner(onx, "cpu").run(X)
    got = GraphRunner(onx, "cpu", "webgpu").run(X)
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

"""The runtime matrix: each exact form's graph of five models, verified on every ONNX runtime
(onnx's reference evaluator, OpenVINO, tract, IREE; onnxruntime-node and onnxruntime-web's wasm
backend in Node.js when node is present, which `make test` installs the npm packages for;
onnxruntime is every other test) against the library's own predictions on rows on every
threshold and its float32 neighbours, NaN and +-inf rows, with the leaf of every tree checked
against the reference evaluator.

The models are those the portability issue measured (benchmarks/_cases.py, which the runtime
matrix of docs/runtimes.md runs too): a random forest, and, fitted on data with NaN cells,
scikit-learn's HistGradientBoostingClassifier, an XGBClassifier and a 3-class LGBMClassifier; a
GradientBoostingRegressor. Also: the soft forms run everywhere with onnxruntime's
outputs, every graph meets the graph contract (no float64 tensor, no +-inf or NaN constant), and
``verify --runtime`` fails a graph with one threshold moved by one float32 step.
"""

from __future__ import annotations

import functools

import numpy as np
import onnx
import pytest
import xgboost as xgb
from onnx import numpy_helper

import tree2mat
from benchmarks._cases import MODELS, fitted, matrix_data
from tree2mat.cli import main
from tree2mat.forms import DEFAULT_OPSET
from tree2mat.forms._nodes import BF16_MAX
from tree2mat.forms._spec import ALL_RUNTIMES
from tree2mat.runtimes import RUNTIMES, WEBGPU_IMPORTS
from tree2mat.verify import GraphRunner, compare, default_atol, synthesize

from conftest import EXACT_VARIANTS, ROOT

pytestmark = pytest.mark.slow  # the runtime matrix: every exact form of five models on every runtime

EXACT = [name for name, spec in tree2mat.FORMS.items() if spec.exact]
SOFT = [name for name, spec in tree2mat.FORMS.items() if not spec.exact]
#: The WebGPU runtimes (a browser: tests/runtimes/test_webgpu.py, make test-webgpu).
BROWSER = tuple(name for name, _, _ in WEBGPU_IMPORTS)
#: Every runtime but onnxruntime (the rest of the suite runs on it) and WebGPU.
OTHERS = [name for name in RUNTIMES if name not in ("onnxruntime", *BROWSER)]
#: Runtimes in Node.js: skipped where node or their npm package is missing (`make test` installs
#: the packages when node is on the PATH); the Python ones are in the test extra and must run.
NODE = ("onnxruntime-node", "onnxruntime-web")
#: (form, runtime): each exact form on each runtime here that its spec says it is exact on.
PROVEN = [(form, runtime) for form in EXACT for runtime in tree2mat.FORMS[form].proven_on if runtime in OTHERS]
#: The exact forms of the portable graph: exact on every runtime, and keeping the graph contract
#: (``treeensemble``'s ai.onnx.ml node runs on fewer: docs/graph.md).
PORTABLE = [form for form in EXACT if set(tree2mat.FORMS[form].proven_on) >= set(ALL_RUNTIMES)]


def test_forms_name_the_runtimes_there_are():
    """``FormSpec.proven_on`` names runtimes of RUNTIMES, and the built-in exact forms claim
    every one: the tests here and in test_webgpu.py check each claim."""
    assert ALL_RUNTIMES == tuple(RUNTIMES)
    for form in EXACT:
        assert set(tree2mat.FORMS[form].proven_on) <= set(RUNTIMES), form
    assert {(f, r) for f in ("sign", "bitvector", "traverse") for r in OTHERS} <= set(PROVEN)


def needs(runtime: str) -> None:
    if runtime in NODE and not RUNTIMES[runtime].available():
        pytest.skip(f"{runtime}: no node on the PATH or no npm package (make test installs it when node is present)")


@functools.cache
def graph(name: str, form: str, opset: int | None = None) -> onnx.ModelProto:
    return tree2mat.convert(fitted(name), form, opset=opset)


def proven_opset(model, form: str, runtime: str) -> int | None:
    """The opset of the graphs of ``form`` of ``model`` the runtime matrix proves on ``runtime``:
    None (the default) but where they are proven there only from a newer one (``FormSpec.proven_from``)."""
    lowest = tree2mat.FORMS[form].lowest_opset(runtime, tree2mat.load(model))
    return lowest if lowest > DEFAULT_OPSET else None


@pytest.mark.parametrize(("form", "runtime"), PROVEN)
@pytest.mark.parametrize("name", list(MODELS))
def test_exact_forms_route_exactly_on_every_runtime(name, form, runtime):
    needs(runtime)
    report = tree2mat.verify(fitted(name), graph(name, form, proven_opset(fitted(name), form, runtime)), runtime=runtime, rows=200)
    assert report.passed, report.summary()
    assert report.runtime == f"{runtime} {RUNTIMES[runtime].version()}"  # (OpenVINO: its defaults)
    kinds = report.row_kinds
    assert kinds["threshold"] > 0 and kinds["extreme"] > 0
    ens = tree2mat.load(fitted(name))
    assert bool(kinds.get("nan")) == ens.accepts_nan and bool(kinds.get("inf")) == ens.accepts_inf
    assert {o.name for o in report.outputs} >= {"routing"}
    # traverse walks small batches another way (two, where it has the decided walk): every walk
    # compared on every row
    flat = [o for o in report.outputs if o.walk.startswith("<=")]
    assert (form == "traverse") == bool(flat) and all(o.compared == report.rows for o in flat)
    meta = {p.key: p.value for p in graph(name, form, proven_opset(fitted(name), form, runtime)).metadata_props}
    if form == "traverse":
        few = [f"<={meta['tree2mat.walk_few']} rows"] if "tree2mat.walk_few" in meta else []
        assert {o.walk for o in flat} == {f"<={meta['tree2mat.walk_rows']} rows", *few}


def assert_target_s_pick_verifies(name: str, runtime: str, rows: int = 200) -> None:
    """``convert --target RUNTIME``'s graph of model ``name``: a form proven there, said in the
    graph, and verify passes it on that runtime with no warning."""
    from tree2mat.forms import auto

    onx = tree2mat.convert(fitted(name), target=runtime)
    meta = {p.key: p.value for p in onx.metadata_props}
    assert meta["tree2mat.target"] == runtime and auto.runs_on(tree2mat.FORMS[meta["tree2mat.form"]], runtime)
    report = tree2mat.verify(fitted(name), onx, runtime=runtime, rows=rows)
    assert report.passed, f"{meta['tree2mat.form']}: {report.summary()}"
    assert not any("--target" in n for n in report.notes)


@pytest.mark.parametrize("runtime", ["onnxruntime", *OTHERS])
@pytest.mark.parametrize("name", list(MODELS))
def test_each_target_s_pick_verifies_on_its_runtime(name, runtime):
    needs(runtime)
    assert_target_s_pick_verifies(name, runtime)


@pytest.mark.parametrize(("form", "runtime"), PROVEN)
@pytest.mark.parametrize("name", list(MODELS))
def test_graphs_as_shipped_give_the_library_s_outputs(name, form, runtime):
    """verify adds the exit index as an output to check every tree's leaf: a runtime may run
    that graph and not the one shipped (OpenVINO did, with an If whose output the graph read on:
    benchmarks/RESULTS.md, "The small batches' walk"). The graph as written, its own outputs,
    against the library's, in batches that take each walk."""
    from tree2mat.verify import _expected

    needs(runtime)
    model, onx = fitted(name), graph(name, form, proven_opset(fitted(name), form, runtime))
    ens = tree2mat.load(model)
    X = synthesize(ens, 200)[0]
    expected, _ = _expected(model, ens, X, raw=False)
    assert {o.name for o in onx.graph.output} == set(expected)
    # (traverse: batches of all the rows walk wide, batches of walk_rows flat, one row the
    # decided walk where the graph has one: tree2mat.walk_few)
    small = int({p.key: p.value for p in onx.metadata_props}.get("tree2mat.walk_rows", 0))
    assert (form == "traverse") == (0 < small < X.shape[0])
    runner = GraphRunner(onx, "cpu", runtime)
    # every row in one batch; rows spread over every kind in batches of walk_rows (2 of them:
    # a Node.js runtime starts a process a batch, onnxruntime-web in 2 s) and one at a time (4)
    for batch, picked in ((X.shape[0], np.arange(X.shape[0])), (small, _spread(X.shape[0], 2 * small)), (1, _spread(X.shape[0], 4))):
        if not batch:
            continue
        got = runner.run(X[picked], batch)
        for out, exp in expected.items():
            rep = compare(out, "cpu", got[out], np.asarray(exp)[picked], X[picked], default_atol(ens, "float32"), 1e-6, out == "label")
            assert rep.passed, (batch, rep)


@pytest.mark.parametrize(("form", "runtime"), PROVEN)
def test_leaves_graphs_give_the_reference_evaluator_s_leaves_on_every_runtime(form, runtime):
    """A ``--leaves`` graph's own ``leaves`` output [N, T] is the reference evaluator's ``apply``
    on every row (verify compares it), the forest's exits mapped to leaf ids in the graph (three
    size groups, the walks' node ids). IREE 3.13 refused every such graph while the leaf ids were
    gathered before the trees were put in order (_exit.Exit.leaf_ids)."""
    needs(runtime)
    name = "RandomForestClassifier"
    onx = tree2mat.convert(fitted(name), form, leaves=True)
    mapped = {p.key: p.value for p in onx.metadata_props}["tree2mat.exit_layout"] != "leaves"  # (ids computed in the graph)
    assert mapped or form == "treeensemble"  # (whose node writes the leaf ids themselves)
    report = tree2mat.verify(fitted(name), onx, runtime=runtime, rows=200)
    assert report.passed, report.summary()
    leaves = [o for o in report.outputs if o.name == "leaves"]
    assert leaves and all(o.compared == report.rows for o in leaves)


def _spread(n: int, k: int) -> np.ndarray:
    """``k`` row numbers spread evenly over ``n`` rows (the synthesized kinds come in blocks)."""
    return np.unique(np.linspace(0, n - 1, min(n, k)).astype(np.int64))


def openvino_bf16() -> bool:
    """OpenVINO's CPU plugin runs MatMul in bf16 by default here (CPUs with bf16)."""
    return "bfloat16" in (RUNTIMES["openvino"].version() or "")


def f32_openvino(monkeypatch) -> None:
    """``--runtime openvino`` compiled with INFERENCE_PRECISION_HINT f32 for this test."""
    from dataclasses import replace

    import tree2mat.runtimes as runtimes

    load = lambda model, outputs, device="cpu": runtimes._openvino(model, outputs, device, {"INFERENCE_PRECISION_HINT": "f32"})  # noqa: E731
    monkeypatch.setitem(runtimes.RUNTIMES, "openvino", replace(RUNTIMES["openvino"], load=load))


@pytest.mark.parametrize("runtime", OTHERS)
@pytest.mark.parametrize(("form", "matmul"), [(f, m) for f, m in EXACT_VARIANTS if m != "float32"])
def test_reduced_precision_matmuls_route_exactly_on_every_runtime(form, matmul, runtime, monkeypatch):
    """--matmul float16 (MatMul) and int8 (MatMulInteger) run and stay exact everywhere too;
    on OpenVINO with f32 precision (with its default bf16, int8 misroutes: the next test)."""
    needs(runtime)
    if runtime == "openvino":
        f32_openvino(monkeypatch)
    name = "LGBMClassifier 3 classes, NaN"
    report = tree2mat.verify(fitted(name), tree2mat.convert(fitted(name), form, matmul=matmul), runtime=runtime, rows=200)
    assert report.passed, report.summary()


@pytest.mark.skipif(not openvino_bf16(), reason="OpenVINO's CPU plugin defaults to f32 on this CPU (no bf16)")
@pytest.mark.parametrize("form", ["sign", "bitvector"])
def test_openvino_bf16_default_misroutes_int8_matmuls(form):
    """Measured, and said in docs/runtimes.md: with OpenVINO's default bf16 precision, MatMulInteger
    (--matmul int8) is not computed exactly; the default float32 MatMul is (the matrix above runs
    OpenVINO's defaults). When this starts to pass, OpenVINO changed: update docs/runtimes.md."""
    name = "LGBMClassifier 3 classes, NaN"
    report = tree2mat.verify(fitted(name), tree2mat.convert(fitted(name), form, matmul="int8"), runtime="openvino", rows=200)
    routing = next(o for o in report.outputs if o.name == "routing")
    assert not report.passed and routing.mismatches > 0


@pytest.mark.parametrize("runtime", OTHERS)
@pytest.mark.parametrize("form", SOFT)
@pytest.mark.parametrize("name", ["HistGradientBoostingClassifier, NaN", "LGBMClassifier 3 classes, NaN"])
def test_soft_forms_run_on_every_runtime(name, form, runtime, monkeypatch):
    """The approximations give onnxruntime's outputs (they are not the model's: nothing to
    compare with but the graph itself); on OpenVINO with f32 precision (its default bf16
    MatMul changes an approximation's values, as any bf16 product would)."""
    needs(runtime)
    if runtime == "openvino":
        f32_openvino(monkeypatch)
    ens = tree2mat.load(fitted(name))
    onx = graph(name, form)
    X = synthesize(ens, 200)[0]
    want = GraphRunner(onx, "cpu").run(X)
    got = GraphRunner(onx, "cpu", runtime).run(X)
    for out, exp in want.items():
        rep = compare(out, "cpu", got[out], exp, X, default_atol(ens, "float32"), 1e-5, out == "label")
        assert rep.passed, rep


@pytest.mark.parametrize("form", PORTABLE + SOFT)
@pytest.mark.parametrize("name", list(MODELS))
def test_graphs_keep_the_contract(name, form):
    """No float64 tensor anywhere (after shape inference), no +-inf or NaN constant, every
    GatherElements with data and indices of one size on every axis but the gathered one."""
    onx = graph(name, form)
    walks = [n for n in onx.graph.node if n.op_type == "If"]
    assert len(walks) == (form == "traverse")  # (the If of traverse's walks: each walk inlined in turn)
    for walk in inlined_walks(onx):
        _keeps_the_contract(walk)


def inlined_walks(onx: onnx.ModelProto) -> list[onnx.ModelProto]:
    """``onx`` once per walk: each ``If`` replaced by one of its branches (an ``If`` in a branch
    too), every combination; ``[onx]`` where it has no ``If``."""
    if not any(n.op_type == "If" for n in onx.graph.node):
        return [onx]
    return [walk for branch in ("then_branch", "else_branch") for walk in inlined_walks(inlined(onx, branch))]


def inlined(onx: onnx.ModelProto, branch: str) -> onnx.ModelProto:
    """``onx`` with each ``If`` replaced by its ``branch``'s nodes and constants."""
    out = onnx.ModelProto()
    out.CopyFrom(onx)
    nodes = []
    for node in out.graph.node:
        if node.op_type != "If":
            nodes.append(node)
            continue
        sub = next(a.g for a in node.attribute if a.name == branch)
        out.graph.initializer.extend(sub.initializer)
        nodes += [*sub.node, *(onnx.helper.make_node("Identity", [o.name], [name]) for o, name in zip(sub.output, node.output))]
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    return out


def _keeps_the_contract(onx: onnx.ModelProto, bf16_range: bool = True) -> None:
    """``bf16_range``: no float constant past bfloat16's range either (the exact forms' node
    tests; an attention graph's cutoff of far distances is float32's largest number, which
    OpenVINO at bf16 clamps: only rows whose distance lies within 0.4 % of float32's largest
    number are counted otherwise, an overflow region the softmax's tolerance covers anyway)."""
    inferred = onnx.shape_inference.infer_shapes(onx, strict_mode=True, data_prop=True)
    typed = list(inferred.graph.value_info) + list(inferred.graph.output) + list(inferred.graph.input)
    assert not [v.name for v in typed if v.type.tensor_type.elem_type == onnx.TensorProto.DOUBLE]
    for t in onx.graph.initializer:
        a = numpy_helper.to_array(t)
        assert a.dtype != np.float64, t.name
        assert a.dtype.kind != "f" or np.isfinite(a).all(), t.name
        # (OpenVINO's CPU plugin at its default bf16 clamps a constant past bfloat16's range)
        assert not bf16_range or a.dtype.kind != "f" or (np.abs(a) <= BF16_MAX).all(), (t.name, a[np.abs(a) > BF16_MAX][:3])
    shapes = {v.name: [d.dim_value if d.HasField("dim_value") else d.dim_param for d in v.type.tensor_type.shape.dim] for v in typed}
    shapes.update({t.name: list(t.dims) for t in onx.graph.initializer})
    assert not any(a.type == onnx.AttributeProto.GRAPH for n in onx.graph.node for a in n.attribute)
    for node in onx.graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.TENSOR:
                assert np.isfinite(numpy_helper.to_array(attr.t)).all(), node.name
        if node.op_type == "GatherElements":
            data, index = shapes[node.input[0]], shapes[node.input[1]]
            axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
            assert len(data) == len(index) and all(a == b for k, (a, b) in enumerate(zip(data, index)) if k != axis % len(data)), (node.name, data, index)


def _flat_walk(graph: onnx.GraphProto) -> onnx.GraphProto:
    """The flat walk's branch: the then branch of the ``If`` on ``tree2mat.walk_rows``, in the
    else branch of the decided walk's ``If`` where there is one."""
    (node,) = [n for n in graph.node if n.op_type == "If"]
    branches = {a.name: a.g for a in node.attribute}
    inner = [n for n in branches["else_branch"].node if n.op_type == "If"]
    return _flat_walk(branches["else_branch"]) if inner else branches["then_branch"]


def test_traverse_walks_small_batches_flat_and_verify_runs_both_walks():
    """Batches of up to tree2mat.walk_rows rows take the flat walk, larger ones the [T, N]
    walk; a fault in the flat walk (its row width one less: rows past the first read the wrong
    cells) shows at that many rows and not one more, and verify finds it on every row."""
    name = "RandomForestClassifier"
    model, onx = fitted(name), graph(name, "traverse")
    rows = int({p.key: p.value for p in onx.metadata_props}["tree2mat.walk_rows"])
    assert 1 < rows < 1500
    broken = onnx.ModelProto()
    broken.CopyFrom(onx)
    flat = _flat_walk(broken.graph)
    init = next(t for t in flat.initializer if t.name == "row_width")
    init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init) - 1, init.name))
    X = matrix_data(2, False)[0].astype(np.float32)
    want = model.predict_proba(X)
    for graph_, n, wrong in ((onx, rows, False), (broken, rows, True), (broken, rows + 1, False)):
        got = GraphRunner(graph_, "cpu").run(X[:n], n)["probabilities"]
        assert (np.abs(got - want[:n]).max() > 1e-3) == wrong, (n, wrong)
    report = tree2mat.verify(model, broken, rows=200)
    assert not report.passed
    assert {o.where for o in report.outputs if o.mismatches} == {f"cpu, <={rows} rows"}
    few = {p.key: p.value for p in onx.metadata_props}.get("tree2mat.walk_few")
    walks = {("cpu", f"<={rows} rows"), ("cpu", f">{rows} rows")} | ({("cpu", f"<={few} rows")} if few else set())
    assert {(o.device, o.walk) for o in report.outputs} == walks
    # a graph whose metadata no longer says how to force the walks: checked as it is, and said so
    stale = onnx.ModelProto()
    stale.CopyFrom(onx)
    next(p for p in stale.metadata_props if p.key == "tree2mat.walk_rows").value = str(rows + 1)
    report = tree2mat.verify(model, stale, rows=50)
    assert report.passed and all(o.walk == "" for o in report.outputs)
    assert [n for n in report.notes if n.startswith(f"the graph's walks could not be forced ('flat_rows' is not [{rows + 1}])")]


def test_verify_on_openvino_fails_a_threshold_moved_by_one_float32_step(tmp_path):
    """The issue's gate: exit 0 on the graph tree2mat wrote, 1 on the same graph with one root
    threshold one float32 step away."""
    import joblib

    name = "RandomForestClassifier"
    joblib.dump(fitted(name), tmp_path / "model.joblib")
    onx = tree2mat.convert(fitted(name), "traverse")
    tree2mat.save(onx, tmp_path / "model.onnx")
    moved = onnx.ModelProto()
    moved.CopyFrom(onx)
    init = next(t for t in moved.graph.initializer if t.name == "root_threshold")
    values = numpy_helper.to_array(init).copy()
    values[0] = np.nextafter(values[0], np.float32(np.inf))
    init.CopyFrom(numpy_helper.from_array(values, init.name))
    tree2mat.save(moved, tmp_path / "moved.onnx")
    args = ["verify", str(tmp_path / "model.joblib")]
    assert main([*args, str(tmp_path / "model.onnx"), "--runtime", "openvino"]) == 0
    assert main([*args, str(tmp_path / "moved.onnx"), "--runtime", "openvino"]) == 1


def test_runtime_errors_are_one_line_and_exit_2(tmp_path, capsys, monkeypatch):
    import joblib

    joblib.dump(fitted("GradientBoostingRegressor"), tmp_path / "m.joblib")
    tree2mat.save(graph("GradientBoostingRegressor", "traverse"), tmp_path / "m.onnx")
    args = ["verify", str(tmp_path / "m.joblib"), str(tmp_path / "m.onnx")]
    assert main([*args, "--runtime", "nosuch"]) == 2
    assert "unknown runtime 'nosuch'; choose one of onnxruntime, reference" in capsys.readouterr().err
    assert main([*args, "--runtime", "openvino", "--device", "cuda"]) == 2
    assert "--runtime openvino runs on the CPU" in capsys.readouterr().err
    from dataclasses import replace

    import tree2mat.runtimes as runtimes

    monkeypatch.setitem(runtimes.RUNTIMES, "tract", replace(RUNTIMES["tract"], version=lambda: None))
    assert main([*args, "--runtime", "tract"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--runtime tract needs tract, which is not installed: pip install 'tree2mat[tract]'" in err


def test_the_docs_runtime_table_is_the_last_matrix_run():
    """docs/runtimes.md's runtime table is what benchmarks/runtime_matrix.py renders from its JSON,
    and that run covered every runtime tree2mat knows and every exact form of the five models."""
    import json

    from benchmarks.runtime_matrix import FORMS, render

    doc = json.loads((ROOT / "benchmarks" / "runtime_matrix.json").read_text())
    page = (ROOT / "docs" / "runtimes.md").read_text(encoding="utf-8")
    assert render(page, doc) == page, "run: python -m benchmarks.runtime_matrix --from benchmarks/runtime_matrix.json --readme docs/runtimes.md"
    assert set(doc["versions"]) == set(RUNTIMES) and set(doc["models"]) == set(MODELS) and set(FORMS) == set(EXACT)
    ran = {(r["graph"], r["runtime"], r["model"]) for r in doc["results"]}
    assert {(f, r, m) for f in EXACT for r in RUNTIMES for m in MODELS} <= ran, "a form, runtime or model the last run left out"


# ----------------------------------------------------------------------------- attention forests


@functools.cache
def attention_forest(kind: str = "regressor"):
    """An ABRF-1 over a random forest (a regressor, or a 3-class classifier), or an ABRF-3 over
    the regressor, fitted on rows with NaN cells (tree2mat.attention)."""
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    from tree2mat import attention

    X, y = matrix_data(3 if kind == "classifier" else 0, True)
    forest = RandomForestClassifier if kind == "classifier" else RandomForestRegressor
    model = forest(n_estimators=15, max_depth=6, random_state=0).fit(X[:1000], y[:1000])
    tau = float(np.median(np.nansum((X - np.nanmean(X, 0)) ** 2, 1)))
    return attention.fit(model, X[1000:], y[1000:], epsilon=0.5, tau=tau, variant=3 if kind == "ABRF-3" else 1)


@pytest.mark.parametrize(("form", "runtime"), PROVEN)
@pytest.mark.parametrize("kind", ["regressor", "classifier", "ABRF-3"])
def test_attention_graphs_run_on_every_runtime(kind, form, runtime):
    """The attention after each exact form's leaves: routing exact, values within the softmax's
    rounding, labels identical, on every runtime (tree2mat/attention/graph.py)."""
    needs(runtime)
    abrf = attention_forest(kind)
    report = tree2mat.verify(abrf, tree2mat.convert(abrf, form), runtime=runtime, rows=200)
    assert report.passed, report.summary()
    outputs = {"label", "probabilities"} if kind == "classifier" else {"variable"}
    assert report.row_kinds["nan"] > 0 and {o.name for o in report.outputs} == outputs | {"routing"}


@pytest.mark.parametrize("form", PORTABLE)
@pytest.mark.parametrize("kind", ["regressor", "classifier", "ABRF-3"])
def test_attention_graphs_keep_the_contract(kind, form):
    onx = tree2mat.convert(attention_forest(kind), form)
    for walk in inlined_walks(onx):
        _keeps_the_contract(walk, bf16_range=False)


# ----------------------------------------------------------------------------- oblique trees


@functools.cache
def oblique_forest():
    """A random forest of oblique and axis-aligned nodes mixed, 3 classes, fitted on rows with
    NaN cells (conftest.oblique_model)."""
    from conftest import oblique_model

    return oblique_model("forest")


@pytest.mark.parametrize(("form", "runtime"), PROVEN)
def test_oblique_graphs_route_exactly_on_every_runtime(form, runtime):
    """Each exact form's graph of an oblique forest (projections summed term by term in float32,
    tree2mat.ir.core.Projections) routes as the reference evaluator on every runtime: random,
    near-hyperplane, NaN, +-inf and extreme rows; no mismatch near a hyperplane either (IREE fuses
    a Mul into the Add after it: the graph adds |p| x sign(p), exact, so a fused add rounds the
    same)."""
    needs(runtime)
    _, _, X_test, ens = oblique_forest()
    onx = tree2mat.convert(ens, form)
    report = tree2mat.verify(ens, onx, runtime=runtime, rows=300)
    assert report.passed, report.summary()
    assert report.row_kinds["nan"] > 0 and report.row_kinds["inf"] > 0
    near = next(n for n in report.notes if n.startswith("oblique nodes:"))
    assert int(near.split()[2]) > 50, near
    assert tree2mat.verify(ens, onx, X_test, runtime=runtime).passed


@pytest.mark.parametrize("form", PORTABLE)
def test_oblique_graphs_keep_the_contract(form):
    onx = tree2mat.convert(oblique_forest()[3], form)
    for walk in inlined_walks(onx):
        _keeps_the_contract(walk)
    assert "MatMul" not in {n.op_type for n in onx.graph.node if n.output[0].startswith("projection")}


# ----------------------------------------------------------------------------- CatBoost


@functools.cache
@functools.cache
def zero_split_booster() -> tuple[xgb.XGBClassifier, np.ndarray]:
    """An XGBClassifier with splits at 0 (``x < 0``: the graph's ``x > -1.4e-45``, a subnormal),
    and rows that test them: its training rows, then each with one column at -0, 0, the positive
    subnormals' ends and -+the smallest normal. (No negative subnormal input: a runtime that
    flushes subnormals reads it as 0, and no float operation tells them apart.)"""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 5))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    X[rng.random(X.shape) < 0.15] = 0.0
    model = xgb.XGBClassifier(n_estimators=10, max_depth=4, random_state=0).fit(X, y)
    f32 = np.finfo(np.float32)
    rows = [X[:100].astype(np.float32)]
    for v in (-0.0, 0.0, f32.smallest_subnormal, f32.tiny * (1 - f32.eps), f32.tiny, -f32.tiny):
        for c in range(X.shape[1]):
            r = X[:100].astype(np.float32)
            r[:, c] = v
            rows.append(r)
    return model, np.concatenate(rows)


@pytest.mark.parametrize(("form", "runtime"), PROVEN + [(form, "onnxruntime") for form in EXACT])
def test_an_xgboost_split_at_zero_sends_zero_where_xgboost_does_on_every_runtime(form, runtime):
    """Such a node is compared scaled (``_nodes.UPSCALED``): before, IREE, OpenVINO and WebGPU,
    which read the subnormal threshold as -0, sent x = 0 left (14 of 570 synthesized rows on
    IREE, 8 on OpenVINO, 2026-11-29)."""
    needs(runtime)
    model, rows = zero_split_booster()
    ens = tree2mat.load(model)
    assert any(((t.threshold == 0) & (t.feature >= 0)).any() for t in ens.trees)  # (the case)
    report = tree2mat.verify(model, tree2mat.convert(model, form), rows, runtime=runtime)
    assert report.passed, report.summary()


def catboost_model(kind: str):
    """A binary CatBoostClassifier fitted on rows with NaN cells (nan_mode Max: NaN right) in
    symmetric trees, or a 3-class one in non-symmetric (Lossguide) trees with nan_mode Min."""
    cb = pytest.importorskip("catboost")
    X, y = matrix_data(2 if kind == "symmetric" else 3, True)
    params = dict(iterations=20, depth=6, random_seed=0, verbose=0, thread_count=2, allow_writing_files=False)
    if kind == "symmetric":
        return cb.CatBoostClassifier(nan_mode="Max", **params).fit(X, y)
    return cb.CatBoostClassifier(loss_function="MultiClass", grow_policy="Lossguide", max_leaves=16, **params).fit(X, y)


@pytest.mark.parametrize(("form", "runtime"), PROVEN)
@pytest.mark.parametrize("kind", ["symmetric", "non-symmetric"])
def test_catboost_graphs_route_exactly_on_every_runtime(kind, form, runtime):
    """Each exact form's graph of a CatBoost classifier on every runtime against CatBoost's own
    predict / predict_proba: rows at and beside every border, NaN (routed per nan_mode), +-inf.
    OpenVINO at its default (bfloat16 on CPUs that have it) included: it clamps a constant past
    bfloat16's range, so CatBoost's -+FLT_MAX borders are compared halved (_nodes.HALVED);
    before that, 31 of 2 150 rows at x = -FLT_MAX went right on every form (2026-11-25)."""
    needs(runtime)
    model = catboost_model(kind)
    report = tree2mat.verify(model, tree2mat.convert(model, form), runtime=runtime, rows=200)
    assert report.passed, report.summary()
    assert report.row_kinds["nan"] > 0 and report.row_kinds["inf"] > 0 and report.row_kinds["threshold"] > 0


@pytest.mark.parametrize("form", PORTABLE)
@pytest.mark.parametrize("kind", ["symmetric", "non-symmetric"])
def test_catboost_graphs_keep_the_contract(kind, form):
    """CatBoost's nan_mode Min / Max borders at -+FLT_MAX included: no constant past bfloat16's
    range (the halved blocks), on any machine (the OpenVINO test can fail only on a bf16 CPU)."""
    model = catboost_model(kind)
    borders = np.concatenate([t.threshold for t in tree2mat.load(model).trees])
    assert (np.abs(borders) >= BF16_MAX).any()  # (the case the halving is for)
    onx = tree2mat.convert(model, form)
    for walk in inlined_walks(onx):
        _keeps_the_contract(walk)

"""``--target RUNTIME``: auto picks among the forms proven exact on that runtime (the runtime
matrix's claims, ``FormSpec.proven_on``; ``cuda``: ``FormSpec.devices``), an explicit form not
proven there is refused, the graph says its target, and verify warns when it proves the graph
elsewhere. Without a target the graph is the portable one it always was. (That each target's
pick verifies on its runtime: tests/runtimes/test_runtimes.py, test_webgpu.py, test_cuda.py.)"""

from __future__ import annotations

import json

import onnx
import pytest
from sklearn.datasets import load_breast_cancer

import tree2mat
from tree2mat.cli import main
from tree2mat.errors import OptionError, TargetWarning
from tree2mat.forms import DEFAULT_OPSET, FORMS, auto
from tree2mat.forms._spec import ALL_RUNTIMES

X, Y = load_breast_cancer(return_X_y=True)


def _meta(onx: onnx.ModelProto) -> dict[str, str]:
    return {p.key: p.value for p in onx.metadata_props}


@pytest.fixture(scope="module")
def booster():
    import lightgbm

    return lightgbm.LGBMClassifier(n_estimators=60, verbose=-1).fit(X, Y)


def test_without_a_target_auto_keeps_to_the_forms_exact_on_every_runtime(booster):
    portable = {s.name for s in auto.candidates()}
    assert portable and all(set(FORMS[f].proven_on) >= set(ALL_RUNTIMES) for f in portable)
    assert "treeensemble" not in portable
    onx = tree2mat.convert(booster)
    assert _meta(onx)["tree2mat.form"] in portable and "tree2mat.target" not in _meta(onx)
    assert "fastest exact form on every runtime of the matrix" in _meta(onx)["tree2mat.auto"]


@pytest.mark.parametrize("target", auto.TARGETS)
def test_each_target_s_candidates_are_the_forms_proven_there(target):
    names = {s.name for s in auto.candidates(target)}
    assert names, f"no form for --target {target}"
    for name in names:
        spec = FORMS[name]
        assert spec.exact and ("cuda" in spec.devices if target == "cuda" else target in spec.proven_on)
    # the ai.onnx.ml node: onnxruntime (CPU, Node.js, wasm) only, and no CUDA kernel
    assert ("treeensemble" in names) == (target in FORMS["treeensemble"].proven_on and target != "cuda")
    assert ("treeensemble" in names) == (target in ("onnxruntime", "reference", "onnxruntime-node", "onnxruntime-web"))


def test_on_onnxruntime_the_node_is_picked_where_it_is_estimated_fastest(booster):
    """A LightGBM booster sums in float64: its node sums, measured faster than the walk
    (benchmarks/form_speed_treeensemble.json), and auto picks it for onnxruntime."""
    onx = tree2mat.convert(booster, target="onnxruntime")
    meta = _meta(onx)
    assert meta["tree2mat.form"] == "treeensemble" and meta["tree2mat.target"] == "onnxruntime"
    assert "fastest exact form on onnxruntime" in meta["tree2mat.auto"]
    assert tree2mat.verify(booster, onx, rows=500).passed
    # the portable graph of the same model is not the node
    assert _meta(tree2mat.convert(booster))["tree2mat.form"] != "treeensemble"


@pytest.mark.parametrize("target", ["openvino", "tract", "iree", "webgpu", "cuda"])
def test_where_the_node_is_not_proven_it_is_never_picked(booster, target):
    estimates = auto.choose(tree2mat.load(booster), target=target).estimates
    assert "treeensemble" not in {e.form for e in estimates}


def test_an_unknown_target_is_refused_naming_the_choices(booster):
    with pytest.raises(OptionError, match=r"--target 'onnx': choose one of onnxruntime, reference, .* cuda"):
        tree2mat.convert(booster, target="onnx")


def test_an_explicit_form_not_proven_on_the_target_is_refused(booster):
    with pytest.raises(OptionError, match=r"--form treeensemble is not proven exact on openvino .* sign, bitvector"):
        tree2mat.convert(booster, form="treeensemble", target="openvino")
    with pytest.raises(OptionError, match="--matmul int8 is refused on --target cuda"):
        tree2mat.convert(booster, form="sign", matmul="int8", target="cuda")
    onx = tree2mat.convert(booster, form="sign", target="openvino")  # proven there: kept, and said
    assert _meta(onx)["tree2mat.target"] == "openvino"


def test_the_command_line_converts_for_a_target_and_verify_warns_elsewhere(booster, tmp_path, capsys):
    model = tmp_path / "model.txt"  # (LightGBM's own model text)
    booster.booster_.save_model(str(model))
    out = tmp_path / "model.onnx"
    assert main(["convert", str(model), "-o", str(out), "--target", "onnxruntime", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["target"] == "onnxruntime" and info["form"] == "treeensemble"
    # proved on onnxruntime: no warning
    assert main(["verify", str(model), str(out), "--rows", "300"]) == 0
    assert "warning" not in capsys.readouterr().err
    # proved on the reference evaluator: proved there, and a one-line warning says it is not the target
    assert main(["verify", str(model), str(out), "--rows", "300", "--runtime", "reference", "--json", "-"]) == 0
    captured = capsys.readouterr()
    line = "tree2mat: warning: the graph was built for --target onnxruntime but is proved here on reference"
    assert captured.err.count(line) == 1 and "verify with --runtime onnxruntime" in captured.err
    assert any(n.startswith("the graph was built for --target onnxruntime") for n in json.loads(captured.out)["notes"])
    # the text report: the note, and no warning line besides
    assert main(["verify", str(model), str(out), "--rows", "300", "--runtime", "reference"]) == 0
    captured = capsys.readouterr()
    assert "note: the graph was built for --target onnxruntime" in captured.out and "warning" not in captured.err
    assert main(["convert", str(model), "-o", str(tmp_path / "x.onnx"), "--target", "nope"]) == 2
    assert "--target 'nope': choose one of" in capsys.readouterr().err


def test_verify_warns_through_python_warnings(booster):
    onx = tree2mat.convert(booster, form="traverse", target="openvino")
    with pytest.warns(TargetWarning, match="built for --target openvino but is proved here on onnxruntime \\(cpu\\)"):
        report = tree2mat.verify(booster, onx, rows=200)
    assert report.passed


def test_inspect_says_what_auto_would_pick_for_a_target(booster, tmp_path, capsys):
    model = tmp_path / "model.txt"  # (LightGBM's own model text)
    booster.booster_.save_model(str(model))
    assert main(["inspect", str(model), "--format", "json", "--target", "onnxruntime"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["auto"]["form"] == "treeensemble" and info["auto"]["target"] == "onnxruntime"
    assert main(["inspect", str(model), "--format", "json", "--target", "tract"]) == 0
    assert json.loads(capsys.readouterr().out)["auto"]["form"] != "treeensemble"


def test_bench_times_the_target_s_pick(booster):
    from tree2mat.bench import bench

    report = bench(booster, rows=2000, batches=(1, 2000), use_peers=False, repeat=1, target="onnxruntime")
    ours = [c for c in report.contenders if c.kind == "tree2mat"]
    assert [c.name for c in ours] == ["tree2mat auto (treeensemble)"] and ours[0].mismatched_rows == 0
    with pytest.raises(OptionError, match="--target tells --form auto"):
        bench(booster, rows=100, forms=("traverse",), use_peers=False, target="onnxruntime")


def test_the_node_is_priced_as_the_graph_it_builds():
    """--leaves, or a pipeline (skl2onnx: ml opset 3), make the node write leaf numbers, which
    costs more than the node that sums: auto prices that node, and here takes the walk."""
    import lightgbm
    from sklearn.datasets import make_classification
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    Xc, yc = make_classification(2000, 10, random_state=0)
    model = lightgbm.LGBMClassifier(n_estimators=100, max_depth=6, verbose=-1).fit(Xc, yc)
    summing = tree2mat.convert(model, target="onnxruntime")  # (the node sums from opset 21 on: auto raises it)
    assert _meta(summing)["tree2mat.form"] == "treeensemble" and summing.opset_import[0].version == 21
    assert "opset 21, not the default 19" in _meta(summing)["tree2mat.auto"] and "onnxruntime 1.21 or newer" in _meta(summing)["tree2mat.auto"]
    assert {o.domain: o.version for o in summing.opset_import}["ai.onnx.ml"] == 5
    assert tree2mat.verify(model, summing, Xc[:300]).passed
    at_19 = tree2mat.convert(model, target="onnxruntime", opset=19)  # (leaf numbers: the walk is cheaper)
    assert _meta(at_19)["tree2mat.form"] == "traverse" and at_19.opset_import[0].version == 19
    assert tree2mat.convert(model).opset_import[0].version == 19  # (no target: the default opset whatever is faster)
    leaves = _meta(tree2mat.convert(model, target="onnxruntime", leaves=True))
    assert leaves["tree2mat.form"] == "traverse" and "treeensemble" in leaves["tree2mat.auto"]
    pipeline = make_pipeline(StandardScaler(), model).fit(Xc, yc)
    onx = tree2mat.convert(pipeline, target="onnxruntime")
    assert _meta(onx)["tree2mat.form"] == "traverse" and _meta(onx)["tree2mat.target"] == "onnxruntime"
    assert tree2mat.verify(pipeline, onx, Xc[:300]).passed


def test_a_soft_form_with_a_target_is_refused():
    with pytest.raises(OptionError, match="--target picks among the exact forms; soft is an approximation"):
        tree2mat.convert(_toy_forest(), form="soft", target="onnxruntime")


def _toy_forest():
    from sklearn.ensemble import RandomForestClassifier

    return RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0).fit(X, Y)


def test_the_warning_s_advice_names_what_differs():
    from tree2mat.verify import _target_elsewhere

    meta = {"tree2mat.target": "onnxruntime"}
    assert _target_elsewhere(meta, "onnxruntime", ["cpu"]) is None
    assert _target_elsewhere(meta, "onnxruntime", ["cpu", "cuda"]) is None
    assert "verify with --device cpu" in _target_elsewhere(meta, "onnxruntime", ["cuda"])
    assert "verify with --runtime onnxruntime" in _target_elsewhere(meta, "tract", ["cpu"])
    assert "verify with --device cuda" in _target_elsewhere({"tree2mat.target": "cuda"}, "onnxruntime", ["cpu"])
    assert _target_elsewhere({}, "tract", ["cpu"]) is None


@pytest.fixture
def jsep_floor(monkeypatch):
    """sign and oblivious proven on webgpu-jsep only from opset 23 for models with a zero band,
    the floor they carried until their graphs stopped taking the Shape of a computed tensor
    (docs/runtimes.md): the mechanism, on a case the runtime matrix once measured."""
    from dataclasses import replace

    from tree2mat.forms._spec import OpsetFloor

    floor = OpsetFloor("webgpu-jsep", 23, lambda ens: bool(ens.zero_band), "LightGBM's models (a zero band)")
    for name in ("sign", "oblivious"):
        monkeypatch.setitem(FORMS, name, replace(FORMS[name], proven_from=(floor,)))


def test_a_form_proven_on_a_runtime_only_from_an_opset_is_built_there_at_that_opset(booster, jsep_floor):
    """Were sign graphs of a LightGBM model proven on webgpu-jsep only from opset 23
    (``FormSpec.proven_from``): for such a model, sign is not a portable candidate at the default
    opset nor one for that target; ``--form sign --target webgpu-jsep`` builds it at 23 and
    refuses ``--opset 19``; other runtimes, and other models, keep it at every opset."""
    sign, lgbm, forest = FORMS["sign"], tree2mat.load(booster), tree2mat.load(_toy_forest())
    lowest = sign.lowest_opset("webgpu-jsep", lgbm)
    assert lowest == 23 > DEFAULT_OPSET and sign.lowest_opset("webgpu", lgbm) == 0 and sign.lowest_opset("webgpu-jsep", forest) == 0
    assert sign.lowest_opset("webgpu-jsep") == lowest  # (of any model: the worst)
    assert not sign.proven("webgpu-jsep", 22, lgbm) and sign.proven("webgpu-jsep", 23, lgbm) and sign.proven("webgpu", DEFAULT_OPSET, lgbm)
    assert sign.proven("webgpu-jsep", DEFAULT_OPSET, forest)
    names = lambda *a: {s.name for s in auto.candidates(*a)}  # noqa: E731
    assert "sign" not in names(None, DEFAULT_OPSET, lgbm) | names("webgpu-jsep", 22, lgbm)
    assert "sign" in names(None, lowest, lgbm) & names("webgpu", DEFAULT_OPSET, lgbm) & names(None, DEFAULT_OPSET, forest)
    assert "oblivious" not in names(None, DEFAULT_OPSET, lgbm) and "oblivious" in names(None, DEFAULT_OPSET, forest)
    assert auto.runs_on(sign, "webgpu-jsep") and not auto.runs_on(sign, "webgpu-jsep", DEFAULT_OPSET, lgbm)
    onx = tree2mat.convert(booster, form="sign", target="webgpu-jsep")
    assert onx.opset_import[0].version == lowest and _meta(onx)["tree2mat.target"] == "webgpu-jsep"
    with pytest.warns(TargetWarning, match="built for --target webgpu-jsep"):
        assert tree2mat.verify(booster, onx, rows=300).passed
    with pytest.raises(OptionError, match=r"--form sign is proven exact on webgpu-jsep for this model only from opset 23 .* not at --opset 19"):
        tree2mat.convert(booster, form="sign", target="webgpu-jsep", opset=DEFAULT_OPSET)
    assert tree2mat.convert(booster, form="sign", target="webgpu").opset_import[0].version == DEFAULT_OPSET
    assert tree2mat.convert(_toy_forest(), form="sign", target="webgpu-jsep").opset_import[0].version == DEFAULT_OPSET


def test_auto_raises_the_opset_for_a_target_where_a_form_proven_only_from_it_is_faster(monkeypatch):
    """A tree at one row: bitvector is estimated fastest. Were it proven on webgpu only from
    opset 23, --target webgpu builds it at 23 and says why, and the default graph is another form."""
    from dataclasses import replace

    from sklearn.tree import DecisionTreeClassifier

    from tree2mat.forms._spec import OpsetFloor

    tree = DecisionTreeClassifier(max_depth=3, random_state=0).fit(X, Y)
    assert _meta(tree2mat.convert(tree, target="webgpu", batch_hint=1))["tree2mat.form"] == "bitvector"
    floor = OpsetFloor("webgpu", 23, lambda ens: True, "every model")
    monkeypatch.setitem(FORMS, "bitvector", replace(FORMS["bitvector"], proven_from=(floor,)))
    onx = tree2mat.convert(tree, target="webgpu", batch_hint=1)
    meta = _meta(onx)
    assert meta["tree2mat.form"] == "bitvector" and onx.opset_import[0].version == 23
    assert "opset 23, not the default 19" in meta["tree2mat.auto"]
    assert "bitvector graphs of this model are proven on webgpu only from opset 23" in meta["tree2mat.auto"]
    default = tree2mat.convert(tree, batch_hint=1)
    assert _meta(default)["tree2mat.form"] != "bitvector" and default.opset_import[0].version == DEFAULT_OPSET
    assert "on every runtime of the matrix at opset 19" in _meta(default)["tree2mat.auto"]
    # at an asked opset, no raise: the forms proven there
    assert _meta(tree2mat.convert(tree, target="webgpu", batch_hint=1, opset=22))["tree2mat.form"] != "bitvector"


def test_verify_says_when_a_graph_is_older_than_its_form_is_proven_on_the_runtime(booster, jsep_floor):
    from tree2mat.verify import _below_proven_opset

    lgbm, forest = tree2mat.load(booster), _toy_forest()
    at_19, at_23 = (tree2mat.convert(booster, form="sign", opset=o) for o in (19, 23))
    note = _below_proven_opset(at_19, _meta(at_19), "webgpu-jsep", lgbm)
    assert note is not None and note.startswith(
        "a sign graph of opset 19: the runtime matrix saw webgpu-jsep misroute rows of sign graphs of LightGBM's models (a zero band) below opset 23"
    )
    assert "convert with --target webgpu-jsep (or --opset 23)" in note
    assert _below_proven_opset(at_23, _meta(at_23), "webgpu-jsep", lgbm) is None
    assert _below_proven_opset(at_19, _meta(at_19), "webgpu", lgbm) is None
    walk = tree2mat.convert(booster, form="traverse")
    assert _below_proven_opset(walk, _meta(walk), "webgpu-jsep", lgbm) is None
    other = tree2mat.convert(forest, form="sign")
    assert _below_proven_opset(other, _meta(other), "webgpu-jsep", tree2mat.load(forest)) is None

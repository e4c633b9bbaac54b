"""Model files that try to run code. A ``.skops`` file is audited node by node against tree2mat's
allow-list before skops builds anything (whatever skops itself trusts), in every mode; safe mode
refuses pickles unread; no method of a loaded model runs before its arrays were read. Each
payload writes a marker file if its code ever runs: the marker must never appear, under ``--safe``,
``TREE2MAT_SAFE=1``, the API's ``safe_loading`` or no setting at all.

The last test is a fuzzer: a real ``.skops`` file with a node that names a callable (a function,
a bound method, an ``operator`` callable, a type, an object of another library) spliced in at a
random place; each is refused by name (``make fuzz`` runs more examples, ``TREE2MAT_FUZZ_EXAMPLES``).
"""

from __future__ import annotations

import functools
import io
import json
import os
import zipfile

import joblib
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_iris
from sklearn.dummy import DummyClassifier
from sklearn.ensemble import GradientBoostingClassifier, HistGradientBoostingClassifier, RandomForestClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler

import tree2mat
from tree2mat.cli import main
from tree2mat.errors import ModelFileError, UnsupportedModelError

sio = pytest.importorskip("skops.io")

X, Y = load_iris(return_X_y=True)
EXAMPLES = int(os.environ.get("TREE2MAT_FUZZ_EXAMPLES", "40"))


def _script_payload(marker):
    """scikit-learn's own test helper, which runs a Python script: a function named ``sklearn.*``."""
    from sklearn.utils._testing import assert_run_python_script_without_output

    return functools.partial(assert_run_python_script_without_output, f"open({str(marker)!r}, 'w').write('ran')")


def _savetxt_payload(marker):
    """numpy's ``savetxt`` writing where the file says (a ``.pth`` file there runs at the next
    Python start): a function named ``numpy.*``."""
    return functools.partial(np.savetxt, str(marker))


def _gb_with_init(payload):
    """A GradientBoostingClassifier whose fitted init estimator is a pipeline that calls
    ``payload`` on the rows (``init`` itself left at None, as the frontend checks it)."""
    gb = GradientBoostingClassifier(n_estimators=3, random_state=0).fit(X, Y)
    gb.init_ = make_pipeline(FunctionTransformer(payload), DummyClassifier().fit(X, Y))
    return gb


def _pipeline_with(payload):
    """A fitted pipeline whose first step's function is then set to ``payload``."""
    pipe = make_pipeline(FunctionTransformer(), RandomForestClassifier(n_estimators=3, random_state=0)).fit(X, Y)
    pipe.steps[0][1].func = payload
    return pipe


PAYLOADS = {
    "gb-init-script": lambda marker: _gb_with_init(_script_payload(marker)),
    "gb-init-savetxt": lambda marker: _gb_with_init(_savetxt_payload(marker)),
    "pipeline-savetxt": lambda marker: _pipeline_with(_savetxt_payload(marker)),
    "pipeline-script": lambda marker: _pipeline_with(_script_payload(marker)),
}


@pytest.fixture(params=sorted(PAYLOADS))
def payload(request, tmp_path):
    marker = tmp_path / "evil.pth"
    path = tmp_path / "model.skops"
    sio.dump(PAYLOADS[request.param](marker), path)
    np.save(tmp_path / "X.npy", X)
    return path, marker


def _refused(capsys, code):
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("tree2mat: error:") and "\n" not in err, err
    assert "does not read: " in err and "the function " in err, err


@pytest.mark.parametrize("how", ["--safe", "TREE2MAT_SAFE=1", "default"])
def test_skops_payloads_never_run(payload, how, tmp_path, capsys, monkeypatch):
    path, marker = payload
    flags = ["--safe"] if how == "--safe" else []
    if how == "TREE2MAT_SAFE=1":
        monkeypatch.setenv("TREE2MAT_SAFE", "1")
    out = tmp_path / "out.onnx"
    for args in (["inspect", str(path)], ["convert", str(path), "-o", str(out)],
                 ["verify", str(path), str(out), "--data", str(tmp_path / "X.npy")], ["bench", str(path), "--rows", "10", "--no-peers"]):
        _refused(capsys, main([*flags, *args]))
        assert not marker.exists(), args
    assert not out.exists()
    with tree2mat.safe_loading(how != "default"), pytest.raises(UnsupportedModelError, match="does not read"):
        tree2mat.convert(path)
    with pytest.raises(UnsupportedModelError):
        tree2mat.verify(path, tree2mat.convert(RandomForestClassifier(n_estimators=2).fit(X, Y)), X)
    assert not marker.exists()


def test_the_same_models_without_the_payload_load(tmp_path):
    """What the payloads ride on is read: a GradientBoostingClassifier whose init is its dummy, a
    pipeline of a scaler and a forest, HistGradientBoosting with a categorical feature (its
    ``partial(check_array)``), in safe mode, against scikit-learn."""
    Xc = np.c_[X, np.arange(len(X)) % 3]
    models = {
        "gb": GradientBoostingClassifier(n_estimators=3, random_state=0).fit(X, Y),
        "pipe": make_pipeline(StandardScaler(), RandomForestClassifier(n_estimators=3, random_state=0)).fit(X, Y),
        "hgb": HistGradientBoostingClassifier(max_iter=3, categorical_features=[4]).fit(Xc, Y),
    }
    for name, model in models.items():
        path = tmp_path / f"{name}.skops"
        sio.dump(model, path)
        with tree2mat.safe_loading():
            rows = Xc if name == "hgb" else X
            report = tree2mat.verify(path, tree2mat.convert(path), rows)
        assert report.passed, report.summary()


def test_a_custom_init_estimator_is_refused_not_called(tmp_path):
    """The starting score is computed from the dummy estimator's arrays (equal to scikit-learn's,
    bit for bit: the graphs of tests/frontends/test_sklearn.py); any other init is refused by
    name, with its methods never called."""
    gb = GradientBoostingClassifier(n_estimators=3, random_state=0).fit(X, Y)
    called = []

    class Spy(DummyClassifier):
        def predict_proba(self, X):
            called.append(1)
            return super().predict_proba(X)

    gb.init_ = Spy().fit(X, Y)
    with pytest.raises(UnsupportedModelError, match="custom init estimator"):
        tree2mat.load(gb)
    assert not called


def test_default_mode_says_it_runs_a_pickle(tmp_path, capsys, monkeypatch):
    """Unset, tree2mat loads a pickle and says so in one line first, naming --safe; with
    TREE2MAT_SAFE=0 (the user's choice) it says nothing; under any name."""
    monkeypatch.delenv("TREE2MAT_SAFE")
    joblib.dump(RandomForestClassifier(n_estimators=2, random_state=0).fit(X, Y), tmp_path / "model.bin")
    assert main(["inspect", str(tmp_path / "model.bin")]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tree2mat: warning:") and "--safe" in err and "runs whatever code" in err, err
    monkeypatch.setenv("TREE2MAT_SAFE", "0")
    assert main(["inspect", str(tmp_path / "model.bin")]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("value", ["maybe", "2", "yes please"])
def test_a_bad_safe_setting_is_an_error_whatever_the_file(tmp_path, capsys, monkeypatch, value):
    """TREE2MAT_SAFE is checked whenever a model file is read, not only a pickle."""
    monkeypatch.setenv("TREE2MAT_SAFE", value)
    from conftest import ROOT

    code = main(["inspect", str(ROOT / "fixtures" / "paper_tree.json")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "TREE2MAT_SAFE" in err and "\n" not in err, err


@pytest.mark.parametrize("version", ["true", "1.0", '"1"', "2"])
def test_the_ir_version_is_an_integer(tmp_path, version):
    from conftest import ROOT

    text = (ROOT / "fixtures" / "paper_tree.json").read_text().replace('"tree2mat_ir": 1', f'"tree2mat_ir": {version}')
    assert f'"tree2mat_ir": {version}' in text
    (tmp_path / "m.json").write_text(text)
    with pytest.raises(ModelFileError):
        tree2mat.load(tmp_path / "m.json")


# ------------------------------------------------ files that pass a type check and still do harm


def _rewritten(path, edit):
    """``path`` (a .skops file) with its schema changed by ``edit(schema)``, in place."""
    with zipfile.ZipFile(path) as z:
        files = {n: z.read(n) for n in z.namelist()}
    schema = json.loads(files["schema.json"])
    edit(schema)
    files["schema.json"] = json.dumps(schema).encode()
    with zipfile.ZipFile(path, "w") as z:
        for name, blob in files.items():
            z.writestr(name, blob)
    return path


def _array_interface_write(tmp_path, victim):
    """Allowed types only, each where it belongs: a DummyRegressor carrying
    ``__array_interface__`` (numpy then reads and writes at the address it names) handed to
    ``check_array`` by a partial, and a MinMaxScaler that scales in place."""
    from sklearn.preprocessing import MinMaxScaler
    from sklearn.utils.validation import check_array

    evil = DummyClassifier()
    evil.__dict__["__array_interface__"] = {"data": (victim.ctypes.data, False), "shape": (1, 4), "typestr": "<f8", "version": 3}
    pipe = make_pipeline(FunctionTransformer(), MinMaxScaler(), RandomForestClassifier(n_estimators=2, random_state=0)).fit(X, Y)
    pipe.steps[0][1].func = functools.partial(check_array, evil)
    scaler = pipe.steps[1][1]
    scaler.copy, scaler.scale_, scaler.min_ = False, np.zeros(4), np.array([1337.0, 4242.0, 7.0, 8.0])
    sio.dump(pipe, tmp_path / "write.skops")
    return tmp_path / "write.skops"


def test_no_object_carries_a_raw_address(tmp_path):
    victim = np.zeros(4)
    path = _array_interface_write(tmp_path, victim)
    with tree2mat.safe_loading(), pytest.raises(UnsupportedModelError, match="a partial with positional arguments.*'__array_interface__'"):
        tree2mat.verify(path, tree2mat.convert(RandomForestClassifier(n_estimators=2).fit(X, Y)), X)
    assert (victim == 0).all()
    gb = GradientBoostingClassifier(n_estimators=2, random_state=0).fit(X, Y)
    gb.init_.class_prior_ = DummyClassifier()  # (read by np.asarray: memory at the address it names)
    gb.init_.class_prior_.__dict__["__array_interface__"] = {"data": (victim.ctypes.data, True), "shape": (3,), "typestr": "<f8", "version": 3}
    sio.dump(gb, tmp_path / "read.skops")
    with pytest.raises(UnsupportedModelError, match="__array_interface__"):
        tree2mat.load(tmp_path / "read.skops")


@pytest.mark.parametrize("edit, needle", [
    # an attribute over a method of the class (predict, as an allowed callable object)
    (lambda s: s["content"]["content"].__setitem__("predict", {"__class__": "DummyClassifier", "__module__": "sklearn.dummy", "__loader__": "ObjectNode"}),
     "attribute 'predict' over its class's own"),
    # an allowed type where its kind of node calls it with the file's data
    (lambda s: s["content"]["content"].__setitem__("junk", {"__class__": "bytearray", "__module__": "builtins", "__loader__": "LossNode"}),
     "builtins.bytearray (as LossNode)"),
    (lambda s: s["content"]["content"].__setitem__("junk", {"__class__": "RandomForestClassifier", "__module__": "sklearn.ensemble._forest",
                                                            "__loader__": "ListNode", "content": []}),
     "(as ListNode)"),
    # joblib starts as many workers as the file says when the model predicts
    (lambda s: s["content"]["content"].__setitem__("n_jobs", {"__class__": "int", "__module__": "builtins", "__loader__": "JsonNode",
                                                              "content": "123456", "is_json": True}),
     "n_jobs '123456'"),
])
def test_types_are_allowed_only_where_they_belong(tmp_path, edit, needle):
    path = tmp_path / "m.skops"
    sio.dump(RandomForestClassifier(n_estimators=2, random_state=0).fit(X, Y), path)
    with pytest.raises(UnsupportedModelError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        tree2mat.load(_rewritten(path, edit))


def test_an_older_protocol_is_refused(tmp_path):
    """skops reads protocol 0 files' functions from other fields than the ones checked."""
    path = tmp_path / "m.skops"
    sio.dump(RandomForestClassifier(n_estimators=2, random_state=0).fit(X, Y), path)
    with pytest.raises(ModelFileError, match="protocol 0"):
        tree2mat.load(_rewritten(path, lambda s: s.__setitem__("protocol", 0)))


# ------------------------------------------------------------------------------------ fuzzing


def _hostile_nodes(marker: str) -> list[dict]:
    """Schema nodes that name something callable beyond the allow-list."""
    fn = lambda module, name: {"__class__": name, "__module__": module, "__loader__": "FunctionNode"}  # noqa: E731
    empty = {"__class__": "tuple", "__module__": "builtins", "__loader__": "TupleNode", "content": []}
    return [
        fn("os", "system"), fn("builtins", "eval"), fn("numpy", "savetxt"), fn("numpy", "load"),
        fn("sklearn.utils._testing", "assert_run_python_script_without_output"), fn("sklearn.utils", "check_random_state"),
        {"__class__": "eval", "__module__": "builtins", "__loader__": "TypeNode"},
        {"__class__": "Popen", "__module__": "subprocess", "__loader__": "ObjectNode",
         "content": {"__class__": "dict", "__module__": "builtins", "__loader__": "DictNode", "content": {}}},
        {"__class__": "methodcaller", "__module__": "operator", "__loader__": "OperatorFuncNode", "attrs": empty},
        {"__class__": "Pipeline", "__module__": "sklearn.pipeline", "__loader__": "MethodNode",
         "content": {"func": "predict", "obj": {"__class__": "Pipeline", "__module__": "sklearn.pipeline", "__loader__": "ObjectNode"}}},
        {"__class__": "partial", "__module__": "functools", "__loader__": "PartialNode",
         "content": {"func": fn("numpy", "savetxt"), "args": empty,
                     "kwds": {"__class__": "dict", "__module__": "builtins", "__loader__": "DictNode", "content": {}},
                     "namespace": {"__class__": "dict", "__module__": "builtins", "__loader__": "DictNode", "content": {}}}},
        {"__class__": "ZoneInfo", "__module__": "zoneinfo", "__loader__": "ConstructorFromReduceNode", "content": empty},
        {"__class__": "LogisticRegression", "__module__": "sklearn.linear_model._logistic", "__loader__": "ObjectNode"},
    ]


def _dicts(doc, out):
    if isinstance(doc, dict):
        if doc.get("__loader__") == "DictNode" and isinstance(doc.get("content"), dict):
            out.append(doc["content"])
        for v in doc.values():
            _dicts(v, out)
    elif isinstance(doc, list):
        for v in doc:
            _dicts(v, out)
    return out


@pytest.fixture(scope="module")
def clean_skops(tmp_path_factory):
    path = tmp_path_factory.mktemp("skops") / "forest.skops"
    sio.dump(RandomForestClassifier(n_estimators=2, max_depth=3, random_state=0).fit(X, Y), path)
    return path.read_bytes()


@pytest.mark.slow
@settings(max_examples=EXAMPLES, deadline=None, derandomize=EXAMPLES <= 100, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_any_callable_spliced_in_is_refused(clean_skops, tmp_path, data):
    with zipfile.ZipFile(io.BytesIO(clean_skops)) as z:
        files = {n: z.read(n) for n in z.namelist()}
    schema = json.loads(files["schema.json"])
    spots = _dicts(schema, [])
    spot = spots[data.draw(st.integers(0, len(spots) - 1), label="where")]
    marker = tmp_path / "ran"
    nodes = _hostile_nodes(str(marker))
    node = nodes[data.draw(st.integers(0, len(nodes) - 1), label="what")]
    spot[data.draw(st.sampled_from(["payload", "_validate_params", "n_features_in_"]), label="as")] = node
    files["schema.json"] = json.dumps(schema).encode()
    path = tmp_path / "m.skops"
    with zipfile.ZipFile(path, "w") as z:
        for name, blob in files.items():
            z.writestr(name, blob)
    with pytest.raises((UnsupportedModelError, ModelFileError)) as info:
        tree2mat.load(path)
    assert "does not read" in str(info.value), info.value
    assert not marker.exists()

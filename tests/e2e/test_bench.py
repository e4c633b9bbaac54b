"""``tree2mat bench``: it times every contender on the same rows and counts the rows whose outputs
differ from the library's. tree2mat's graphs must differ on none (they are exact); the peer's
count is whatever it is. Timings are only checked to exist: speed is never asserted in tests."""

from __future__ import annotations

import json

import joblib
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestRegressor

import tree2mat
from tree2mat import peers
from tree2mat.bench import bench, bench_rows, parse_batches
from tree2mat.cli import main
from tree2mat.errors import OptionError

XB, YB = load_breast_cancer(return_X_y=True)
HAS_CUDA = "CUDAExecutionProvider" in __import__("onnxruntime").get_available_providers()
XD, YD = load_diabetes(return_X_y=True)


@pytest.fixture(scope="module")
def classifier():
    return HistGradientBoostingClassifier(max_iter=10, random_state=0).fit(XB, YB)


@pytest.mark.slow
def test_bench_times_every_contender_and_tree2mat_is_exact(classifier):
    report = bench(classifier, rows=600, batches=(1, 200), forms=("auto", "sign", "traverse"), repeat=2)
    names = [c.name for c in report.contenders]
    assert names[:3] == ["tree2mat auto (" + names[0].split("(")[1], "tree2mat sign", "tree2mat traverse"]
    assert names[3] == "skl2onnx TreeEnsemble" and names[-1] == "sklearn predict"
    hummingbird = [c for c in report.contenders if c.kind == "hummingbird"]
    if peers.available("hummingbird"):
        assert [c.name for c in hummingbird] == [f"hummingbird {s}" for s in peers.HUMMINGBIRD_STRATEGIES]
    else:
        assert len(hummingbird) == 1 and "not installed" in hummingbird[0].note and not hummingbird[0].timings
    for c in report.contenders:
        if not c.timings:
            continue
        assert [t.batch for t in c.timings] == [1, 200]
        assert all(t.rows_per_s > 0 and t.p50_ms <= t.p99_ms for t in c.timings)
        assert c.timings[0].runs >= 50  # batch 1: enough single rows for percentiles
    for c in report.contenders[:3]:
        assert c.mismatched_rows == 0, c.name
    peer = report.contenders[3]
    assert peer.mismatched_rows is not None and peer.file_bytes > 0
    assert peer.mismatched_labels is not None and peer.mismatched_labels <= peer.mismatched_rows
    for c in report.contenders[:3]:
        assert c.mismatched_labels == 0 and c.peak_mib is not None and c.peak_mib >= 0
    doc = json.loads(report.to_json())
    assert doc["schema"] == 2 and len(doc["contenders"]) == len(report.contenders) and doc["device"] == "cpu"
    # x ref stands beside rows/s and is their ratio, not the latencies'
    lines = report.summary().splitlines()
    assert lines[1].split()[:5] == ["contender", "batch", "rows/s", "x", "ref"] and lines[1].split()[5] == "p50"
    sign = report.contenders[1].timings[1]
    row = next(line for line in lines if line.startswith("tree2mat sign") and line[28:36].strip() == "200")
    assert float(row[48:56]) == pytest.approx(sign.rows_per_s / peer.timings[1].rows_per_s, abs=0.006)
    assert float(row[56:66]) == pytest.approx(sign.p50_ms, rel=1e-3)


@pytest.mark.slow
def test_peer_counts_its_own_wrong_rows(classifier):
    """The synthesized rows sit on thresholds, where skl2onnx's float32 TreeEnsemble routes some
    rows differently from HistGradientBoosting (float64 thresholds; benchmarks/MISROUTING.md):
    bench's count is at least the label flips counted here directly, and tree2mat's is 0."""
    report = bench(classifier, rows=2000, batches=(500,), repeat=1)
    X = bench_rows(tree2mat.load(classifier), 2000, 0)
    onx, _ = peers.convert(classifier, XB.shape[1])
    flips = int((peers.outputs(peers.session(onx), X, True)["label"] != classifier.predict(X)).sum())
    peer = next(c for c in report.contenders if c.kind == "peer")
    assert flips > 0 and flips <= peer.mismatched_rows <= X.shape[0]
    assert report.contenders[0].mismatched_rows == 0


@pytest.mark.parametrize("library", ["xgboost", "lightgbm"])
def test_onnxmltools_is_called_as_the_frontend_says(library):
    """peers.convert calls the onnxmltools function the model's frontend names (peer_call), with
    zipmap=False for a classifier where the frontend says it takes it: the peer's probabilities,
    read as a matrix, are the library's own on ordinary rows (away from thresholds, where the
    peers' float32 rounding misroutes rows)."""
    pytest.importorskip("onnxmltools")
    lib = pytest.importorskip(library)
    cls = lib.XGBClassifier if library == "xgboost" else lib.LGBMClassifier
    model = cls(n_estimators=5, max_depth=3, verbosity=0) if library == "xgboost" else cls(n_estimators=5, num_leaves=7, verbose=-1)
    model.fit(XB, YB)
    onx, how = peers.convert(model, XB.shape[1])
    assert how["call"].startswith(f"onnxmltools.convert_{library}(") and ("zipmap=False" in how["call"]) == (library == "lightgbm")
    got = peers.outputs(peers.session(onx), XB.astype("float32"), True)["probabilities"]
    assert abs(got - model.predict_proba(XB)).max() < 1e-5


def test_without_peers_installed_bench_says_so(monkeypatch):
    model = RandomForestRegressor(n_estimators=3, max_depth=3, random_state=0).fit(XD, YD)
    monkeypatch.setattr(peers, "available", lambda name: False)
    report = bench(model, rows=200, batches=(50,), repeat=1)
    peer = next(c for c in report.contenders if c.kind == "peer")
    assert not peer.timings and "install the bench extra" in peer.note
    assert "install the bench extra" in report.summary()


@pytest.mark.slow
def test_cli_bench(tmp_path, capsys, classifier):
    joblib.dump(classifier, tmp_path / "m.joblib")
    out = tmp_path / "bench.json"
    assert main(["bench", str(tmp_path / "m.joblib"), "--rows", "300", "--batch", "1,100", "--repeat", "1", "--no-peers", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "tree2mat auto" in text and "sklearn predict" in text and "skl2onnx" not in text
    doc = json.loads(out.read_text())
    assert [c["kind"] for c in doc["contenders"]] == ["tree2mat", "native"]
    cases = ((["--batch", "x"], "--batch 'x'"), (["--batch", "0"], "integers >= 1"), (["--form", "magic"], "unknown form 'magic'"),
                         (["--repeat", "0"], "must be >= 1"), (["--device", "tpu"], "choose cpu or cuda"),
                         (["--plot", str(tmp_path / "p.svg")], "name the file *.png"), (["--max-memory", "lots"], "--max-memory 'lots'"))
    cases += ((["--device", "cuda"], "no CUDAExecutionProvider"),) if not HAS_CUDA else ()
    for args, needle in cases:
        assert main(["bench", str(tmp_path / "m.joblib"), "--rows", "100", *args]) == 2
        err = capsys.readouterr().err
        assert needle in err and len(err.strip().splitlines()) == 1


def test_parse_batches():
    assert parse_batches("1, 1000,100000") == (1, 1000, 100000)
    with pytest.raises(OptionError):
        parse_batches("")


def test_sklearn_regressor_peer_converts():
    """skl2onnx takes no zipmap option for regressors (a refusal the bench once reported as the
    peer's)."""
    model = RandomForestRegressor(n_estimators=5, max_depth=4, random_state=0).fit(XD, YD)
    report = bench(model, rows=300, batches=(100,), repeat=1)
    peer = next(c for c in report.contenders if c.kind == "peer")
    assert peer.timings and not peer.note and peer.mismatched_rows is not None and peer.mismatched_labels is None
    assert report.contenders[0].mismatched_rows == 0


def test_batches_over_the_memory_limit_are_not_timed_but_still_checked(classifier):
    """A form whose estimated memory at a batch is over --max-memory is not timed there (a dense
    form at batch 100 000 on a deep forest would need tens of GiB); its rows are still compared,
    in chunks that fit."""
    from tree2mat.forms import FORMS

    ens = tree2mat.load(classifier)
    spec = FORMS["bitvector"]
    limit = spec.constant_bytes(ens) + spec.bytes_per_row(ens) * 50
    report = bench(classifier, rows=400, batches=(10, 400), forms=("bitvector",), use_peers=False, repeat=1, max_memory=limit)
    c = report.contenders[0]
    assert [t.batch for t in c.timings] == [10]
    assert "not timed at batch 400" in c.note and c.mismatched_rows == 0
    assert "not timed at batch 400" in report.summary()


def test_plot_is_a_png_of_every_timed_contender(tmp_path, capsys, classifier):
    import matplotlib.image

    joblib.dump(classifier, tmp_path / "m.joblib")
    png = tmp_path / "bench.png"
    assert main(["bench", str(tmp_path / "m.joblib"), "--rows", "200", "--batch", "1,100", "--repeat", "1", "--plot", str(png)]) == 0
    capsys.readouterr()
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    image = matplotlib.image.imread(png)
    assert image.ndim == 3 and image.shape[0] >= 400 and image.shape[1] >= 600


def test_plot_without_matplotlib_is_a_one_line_error(tmp_path, capsys, classifier, without_matplotlib):
    joblib.dump(classifier, tmp_path / "m.joblib")
    png = tmp_path / "bench.png"
    assert main(["bench", str(tmp_path / "m.joblib"), "--rows", "100", "--batch", "10", "--repeat", "1", "--no-peers", "--plot", str(png)]) == 2
    err = capsys.readouterr().err
    assert "needs matplotlib" in err and len(err.strip().splitlines()) == 1 and not png.exists()


def test_a_peer_graph_that_fails_at_one_batch_size_is_reported_not_fatal(classifier, monkeypatch):
    """Hummingbird 0.4.11's graphs fail at batch 1 on some models (a Transpose of the wrong
    rank): the batch is named in the note, the others are timed."""
    real = peers.outputs

    def outputs(sess, X, classifier_):
        if X.shape[0] == 1:
            raise RuntimeError("perm size: 2 does not match input rank: 1")
        return real(sess, X, classifier_)

    monkeypatch.setattr(peers, "outputs", outputs)
    report = bench(classifier, rows=300, batches=(1, 100), forms=("traverse",), repeat=1)
    peer = next(c for c in report.contenders if c.kind == "peer")
    assert [t.batch for t in peer.timings] == [100] and "fails at batch 1: RuntimeError: perm size" in peer.note
    assert report.contenders[0].mismatched_rows == 0 and [t.batch for t in report.contenders[0].timings] == [1, 100]


def test_hummingbird_gemm_over_the_memory_limit_is_not_converted(classifier, monkeypatch):
    """Hummingbird's GEMM conversion of a forest with thousands of leaves per tree held 12 GiB,
    and perf_tree_trav pads deep trees to perfect ones: bench estimates the conversion's memory
    and leaves such a strategy out, saying so, instead of running the machine out of memory; the
    others are still tried."""
    from tree2mat import bench as bench_module
    from tree2mat.forms import FORMS

    monkeypatch.setattr(peers, "available", lambda name: True)
    tried = []

    def convert(model, X, strategy):
        tried.append(strategy)
        raise RuntimeError("no Hummingbird here")

    monkeypatch.setattr(peers, "hummingbird_convert", convert)
    ens = tree2mat.load(classifier)
    limit = bench_module.HUMMINGBIRD_COPIES * FORMS["bitvector"].constant_bytes(ens) - 1
    assert bench_module.hummingbird_conversion_bytes("gemm", ens) > limit  # (the premise)
    assert bench_module.hummingbird_conversion_bytes("perf_tree_trav", ens) > limit  # depth 2^(D+1) padding
    report = bench(classifier, rows=200, batches=(100,), forms=("traverse",), repeat=1, max_memory=limit)
    hb = {c.name: c for c in report.contenders if c.kind == "hummingbird"}
    for s in ("gemm", "perf_tree_trav"):
        assert "not converted" in hb[f"hummingbird {s}"].note and "over the memory limit" in hb[f"hummingbird {s}"].note
    assert tried == ["tree_trav"]
    assert all("cannot convert it: RuntimeError" in hb[f"hummingbird {s}"].note for s in tried)


def test_every_hummingbird_strategy_is_estimated_as_one_form():
    """bench sizes each Hummingbird strategy as the one form that declares it (FormSpec.hummingbird):
    a strategy no form declares, or two do, would be sized by a name in bench.py."""
    from tree2mat import bench as bench_module
    from tree2mat.forms import FORMS

    for strategy in peers.HUMMINGBIRD_STRATEGIES:
        assert [name for name, spec in FORMS.items() if strategy in spec.hummingbird] == [bench_module.hummingbird_like(strategy).name]
    assert set(bench_module.HUMMINGBIRD_ROW_COPIES) == set(peers.HUMMINGBIRD_STRATEGIES)


def test_named_category_columns_synthesized_and_from_a_csv_of_names(tmp_path):
    """A model fitted on a DataFrame with a category column: scikit-learn's predict takes only that
    DataFrame (codes fail inside its encoder), and a .csv holds the names: both reach the library as
    it was fitted, and the graph matches the library on every row."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.normal(size=400), "colour": pd.Categorical(rng.choice(["red", "green", "blue"], 400))})
    y = ((frame.a > 0) ^ (frame.colour == "green")).astype(int)
    model = HistGradientBoostingClassifier(max_iter=5, categorical_features="from_dtype", random_state=0).fit(frame, y)
    csv = tmp_path / "rows.csv"
    frame.head(150).to_csv(csv, index=False)
    for data, rows in ((None, 300), (csv, 150)):
        report = bench(model, data, rows=300, batches=(1, 100), use_peers=False, repeat=1)
        ours, native = report.contenders[0], report.contenders[-1]
        assert report.rows == rows and native.kind == "native" and [t.batch for t in native.timings] == [1, 100]
        assert ours.mismatched_rows == 0 and ours.mismatched_labels == 0, data

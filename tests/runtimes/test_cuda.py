"""The CUDA provider (see ../shared/docs/GPU.md): skipped where onnxruntime has no CUDA provider,
which is every CI run. On a GPU machine: every node of every exact graph that touches rows runs on
CUDA (onnxruntime keeps its shape arithmetic on the CPU), with onnxruntime's default TF32
setting, and routes like the CPU."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier

import tree2mat
from tree2mat.runtimes import cuda_cpu_nodes
from tree2mat.verify import synthesize

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(
        "CUDAExecutionProvider" not in ort.get_available_providers(),
        reason="onnxruntime has no CUDAExecutionProvider here (CPU build or no GPU)",
    ),
]

X, Y = load_breast_cancer(return_X_y=True)
X_CAT = np.c_[X[:, :5], np.random.default_rng(0).integers(0, 12, X.shape[0])]
from conftest import EXACT_VARIANTS  # noqa: E402

#: The exact forms whose row work all runs on the CUDA provider (``FormSpec.devices``), but for
#: ``--matmul int8``, which is refused there (``tree2mat.runtimes.CUDA_REFUSED``).
ON_CUDA = [(f, m) for f, m in EXACT_VARIANTS if "cuda" in tree2mat.FORMS[f].devices and m != "int8"]

# Fitted only where the tests run (a GPU machine): every graph feature (NaN, categorical codes,
# the zero band, missing type Zero, linear leaves) on the device.
MODELS = {
    "forest": lambda: RandomForestClassifier(n_estimators=20, random_state=0).fit(X, Y),
    "hist": lambda: HistGradientBoostingClassifier(max_iter=30, random_state=0).fit(X, Y),
    "lightgbm categorical zero": lambda: __import__("lightgbm").LGBMClassifier(
        n_estimators=20, zero_as_missing=True, verbose=-1).fit(X_CAT, Y, categorical_feature=[5]),
    "lightgbm linear": lambda: __import__("lightgbm").LGBMRegressor(n_estimators=10, linear_tree=True, verbose=-1).fit(X, Y),
    "xgboost missing": lambda: __import__("xgboost").XGBClassifier(n_estimators=20, missing=0.0).fit(X, Y),
}


@pytest.mark.parametrize("form,matmul", ON_CUDA)
@pytest.mark.parametrize("name", list(MODELS))
def test_verify_on_cuda(name, form, matmul):
    model = MODELS[name]()
    report = tree2mat.verify(model, tree2mat.convert(model, form=form, matmul=matmul), device="cuda")
    assert report.passed, report.summary()


@pytest.mark.parametrize("form,matmul", ON_CUDA)
@pytest.mark.parametrize("name", list(MODELS))
def test_no_row_data_on_the_cpu_and_same_leaves_as_cpu(name, form, matmul):
    """Every node that touches rows runs on CUDA: onnxruntime leaves only its shape arithmetic
    (Shape, and Slice / Concat / a compare on a few int64s) to the CPU, on purpose, which
    ``session.disable_cpu_ep_fallback`` refuses as well (seen on an H200, onnxruntime-gpu 1.31.1).
    Every one of traverse's walks runs (1 row, and one more than each walk takes, from the
    graph's tree2mat.walk_few and tree2mat.walk_rows); leaves as the CPU's at each of those batches."""
    model = MODELS[name]()
    onx = tree2mat.convert(model, leaves=True, form=form, matmul=matmul)
    rows, _ = synthesize(tree2mat.load(model), 9000)
    assert cuda_cpu_nodes(onx, rows) == []
    cuda = ort.InferenceSession(onx.SerializeToString(), providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    cpu = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    few = int({p.key: p.value for p in onx.metadata_props}.get("tree2mat.walk_few", 0))
    for batch in (rows[:1], rows[: few + 2], rows):
        np.testing.assert_array_equal(cuda.run(["leaves"], {"input": batch})[0], cpu.run(["leaves"], {"input": batch})[0])


@pytest.mark.parametrize("form", sorted({f for f, _ in ON_CUDA}))
def test_oblique_forest_on_cuda(form):
    """Oblique nodes' projections are elementwise Mul and Add (never a MatMul: TF32 does not
    touch them), |p| x sign(p) before each Add (a fused multiply-add rounds the same): routing
    exact on the device against the reference evaluator, near-hyperplane rows included."""
    from conftest import oblique_model

    ens = oblique_model("forest")[3]
    report = tree2mat.verify(ens, tree2mat.convert(ens, form), device="cuda", rows=1000)
    assert report.passed, report.summary()


@pytest.mark.parametrize("name", ["xgboost missing", "lightgbm categorical zero"])
def test_bench_times_every_exact_form_on_cuda(name):
    """``bench --device cuda``: every exact form passes the placement check (no row data on the
    CPU) and is timed, and no row's output differs from the library's."""
    from tree2mat.bench import bench

    forms = tuple(dict.fromkeys(f for f, _ in ON_CUDA))
    report = bench(MODELS[name](), rows=10_000, batches=(1, 10_000), forms=forms, use_peers=False, repeat=1, device="cuda")
    ours = [c for c in report.contenders if c.kind == "tree2mat"]
    assert [c.name for c in ours] == [f"tree2mat {f}" for f in forms]
    for c in ours:
        assert [t.batch for t in c.timings] == [1, 10_000], f"{c.name}: {c.note}"
        assert c.mismatched_rows == 0, c.name


@pytest.mark.parametrize("form", sorted({f for f, m in EXACT_VARIANTS if m == "int8"}))
def test_int8_products_are_refused_on_cuda(form):
    """cuBLAS's int8 GEMM refused MatMulInteger at one row and at 9 000 rows of these models (an
    H200, onnxruntime-gpu 1.31.1): verify refuses the graph on cuda in one line, before a run."""
    from tree2mat.errors import OptionError

    model = MODELS["forest"]()
    graph = tree2mat.convert(model, form=form, matmul="int8")
    with pytest.raises(OptionError, match="--matmul float32 or float16"):
        tree2mat.verify(model, graph, device="cuda")
    # --device all: proved on the CPU, and the report says why not on CUDA
    report = tree2mat.verify(model, graph, device="all", rows=500)
    assert report.passed and report.devices == ["cpu"]
    assert any(n.startswith("not run on cuda: the graph's int8 products") for n in report.notes)


@pytest.mark.parametrize("name", list(MODELS))
def test_target_cuda_picks_a_form_that_verifies_on_cuda(name):
    """``--target cuda`` never picks the TreeEnsemble node (no CUDA kernel) nor int8 products; its
    pick verifies on the device with every row-touching node there."""
    model = MODELS[name]()
    onx = tree2mat.convert(model, target="cuda")
    form = {p.key: p.value for p in onx.metadata_props}["tree2mat.form"]
    assert "cuda" in tree2mat.FORMS[form].devices
    report = tree2mat.verify(model, onx, device="cuda")
    assert report.passed, report.summary()
    rows, _ = synthesize(tree2mat.load(model), 9000)
    assert cuda_cpu_nodes(onx, rows) == []

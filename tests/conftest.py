"""Shared test helpers: one way to run a graph, one way to compare (``tree2mat.verify.compare``)."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import tree2mat
from benchmarks._common import with_holes  # (the data helper the runtime matrix's models use too)
from tree2mat.forms._graph import ML_DOMAIN, ML_OPSETS, all_nodes
from tree2mat.verify import DEFAULT_RTOL, compare, default_atol
from tree2mat.verify.runners import foreign_operators

#: Every exact graph variant: each exact form, with each element type of its path MatMul.
#: The repository (tests/ is one level down, whatever folder a test module is in).
ROOT = Path(__file__).resolve().parent.parent

EXACT_VARIANTS = [(name, mm) for name, spec in tree2mat.FORMS.items() if spec.exact for mm in spec.matmul]

# The tests load the pickles they wrote themselves: TREE2MAT_SAFE=0, the user's explicit "load
# pickles", spares each command's stderr the warning that default mode prints once per pickle
# (tests/frontends/test_loading.py checks that warning with the variable unset).
os.environ.setdefault("TREE2MAT_SAFE", "0")

# Ctrl-C as a terminal delivers it: a suite started in the background of a non-interactive shell
# (`make test &`) inherits SIGINT ignored, and so would every command it starts (an ignored
# signal stays ignored across exec), which the Ctrl-C tests would then see do nothing.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def run_onnx(model: onnx.ModelProto, X: np.ndarray) -> dict[str, np.ndarray]:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    outs = sess.run(None, {sess.get_inputs()[0].name: X})
    return dict(zip([o.name for o in sess.get_outputs()], outs))


def assert_standard_graph(model: onnx.ModelProto) -> None:
    """Every emitted graph: full checker, standard domain only but for the ``treeensemble``
    form's one ai.onnx.ml node (importing its version, ML_OPSETS), no unused initializer
    (onnxruntime warns about each)."""
    onnx.checker.check_model(model, full_check=True)
    used = {i for n in all_nodes(model.graph) for i in n.input}
    unused = [t.name for t in model.graph.initializer if t.name not in used]
    assert not unused, f"unused initializers: {unused}"
    ml = [n for n in all_nodes(model.graph) if n.domain == ML_DOMAIN]
    assert {n.domain for n in all_nodes(model.graph)} <= {"", "ai.onnx", ML_DOMAIN}
    assert len(ml) <= 1 and all(n.op_type in ML_OPSETS for n in ml), [n.op_type for n in ml]
    assert {(o.domain, o.version) for o in model.opset_import if o.domain not in ("", "ai.onnx")} == {(ML_DOMAIN, ML_OPSETS[n.op_type]) for n in ml}
    assert not foreign_operators(model), f"operators verify would refuse: {foreign_operators(model)}"


def assert_matches(got: dict[str, np.ndarray], expected: dict[str, np.ndarray], X: np.ndarray, ens, atol=None, rtol=DEFAULT_RTOL) -> None:
    """Each expected output present and equal (labels, leaves exactly; values within tolerance)."""
    # (a float32 input: the default graph, float32 arithmetic; float64: --dtype float64)
    atol = default_atol(ens, np.dtype(X.dtype).name) if atol is None else atol
    for name, exp in expected.items():
        assert name in got, f"output {name!r} missing; graph has {sorted(got)}"
        rep = compare(name, "cpu", got[name], np.asarray(exp), X, atol, rtol, exact=name in ("label", "leaves"))
        assert rep.passed, f"{name}: {rep.mismatches} mismatches, {rep.problem} first: {rep.first_mismatches[:2]}"


@pytest.fixture(scope="session")
def has_cuda() -> bool:
    return "CUDAExecutionProvider" in ort.get_available_providers()


@pytest.fixture
def without_matplotlib(monkeypatch) -> None:
    """Every import of matplotlib fails, as where the plot extra is not installed."""
    block_modules(monkeypatch, "matplotlib")


def block_modules(monkeypatch, *names: str) -> None:
    """Imports of ``names`` and their submodules fail as where they are not installed
    (ModuleNotFoundError naming the module): a None entry in sys.modules, which the import
    system reads as "not found" whether or not the module was imported before."""
    for name in names:
        for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            monkeypatch.setitem(sys.modules, loaded, None)
        monkeypatch.setitem(sys.modules, name, None)


# ----------------------------------------------------------------------------- oblique trees
#: Oblique splits of 8 features: projection m's (features, weights), in summation order; one of
#: a single term, one dense over every feature, the rest of 2 to 5 terms.
def oblique_terms(n_features: int = 8, n_projections: int = 10, seed: int = 0) -> list[tuple[list[int], list[float]]]:
    rng = np.random.default_rng(seed)
    sizes = [1, n_features] + list(rng.integers(2, 6, size=n_projections - 2))
    out = []
    for size in sizes:
        feats = rng.choice(n_features, size=int(size), replace=False).tolist()
        weights = rng.normal(size=int(size)).astype(np.float32).astype(np.float64).tolist()
        out.append((feats, weights))
    return out


def float32_projections(X: np.ndarray, terms: list[tuple[list[int], list[float]]]) -> np.ndarray:
    """Each projection of the rows ``X`` as treeple's predict sums it: ``s = s + x * w`` term by
    term, every product and sum rounded to float32 (numpy's float32 arithmetic), [N, M]."""
    X = np.asarray(X, np.float32)
    out = np.zeros((X.shape[0], len(terms)), np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        for m, (feats, weights) in enumerate(terms):
            s = np.zeros(X.shape[0], np.float32)
            for f, w in zip(feats, weights):
                s = s + X[:, f] * np.float32(w)
            out[:, m] = s
    return out


def oblique_ir(model, terms: list[tuple[list[int], list[float]]], n_features: int):
    """The IR of a scikit-learn tree model fitted on ``[X, projections of X]``, as an oblique
    model of X: its nodes on column F + m test projection m (tree2mat's column layout), so that
    scikit-learn's ``apply`` on ``[X, float32_projections(X)]`` is what the oblique model must do."""
    import dataclasses

    from tree2mat.ir.core import Projections

    ens = tree2mat.load(model)
    return dataclasses.replace(
        ens, n_features=n_features, projections=Projections.from_terms(terms), feature_names=None, finite_features=(), accepts_inf=True,
    ).validate()


def oblique_model(kind: str = "tree", n_classes: int = 3, seed: int = 0):
    """A scikit-learn tree (``tree``) or forest (``forest``) fitted on 8 features with NaN cells
    and 10 oblique projections of them (:func:`oblique_terms`): ``(model, terms, X_test, ens)``,
    ``ens`` its oblique IR (:func:`oblique_ir`), axis-aligned and oblique nodes mixed."""
    from sklearn.datasets import make_classification
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.tree import DecisionTreeClassifier

    X, y = make_classification(2000, 8, n_informative=6, n_classes=n_classes, random_state=seed)
    X = with_holes(X, np.random.default_rng(seed)).astype(np.float32)
    terms = oblique_terms(seed=seed)
    XZ = np.concatenate([X, float32_projections(X, terms)], axis=1)
    if kind == "tree":
        model = DecisionTreeClassifier(max_depth=8, random_state=seed).fit(XZ[:1500], y[:1500])
    else:
        model = RandomForestClassifier(n_estimators=10, max_depth=6, random_state=seed).fit(XZ[:1500], y[:1500])
    return model, terms, X[1500:], oblique_ir(model, terms, 8)


#: The tests measured slow (tests/tiers.py wrote tests/slow.txt from a make test run): marked
#: ``slow`` here, so that make test-fast leaves them out.
_MEASURED_SLOW = frozenset(
    line.strip() for line in (Path(__file__).parent / "slow.txt").read_text().splitlines() if line.strip() and not line.startswith("#")
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid in _MEASURED_SLOW:
            item.add_marker(pytest.mark.slow)

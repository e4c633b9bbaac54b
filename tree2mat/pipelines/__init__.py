"""Whole scikit-learn pipelines through skl2onnx, every tree step a tree2mat form.

:func:`register_skl2onnx` registers tree2mat's converter with skl2onnx for each supported tree
estimator (scikit-learn's, and the scikit-learn estimators of XGBoost and LightGBM when they are
installed: the role onnxmltools' converters play in a skl2onnx pipeline). ``skl2onnx.to_onnx``
then emits the standard-operator graph of a tree2mat form for every tree step, and skl2onnx's
own operators for the rest of the pipeline.

:func:`convert_pipeline` (what ``tree2mat.convert`` calls for a ``Pipeline``) does that for a
pipeline that takes one numeric matrix, in float64 by default: skl2onnx's scalers then compute
what scikit-learn computes (in float32 they round differently, and rows near a threshold take
the other branch: 676 of 20 000 rows through a StandardScaler, benchmarks/RESULTS.md). A
pipeline fitted on a DataFrame whose encoders take text columns (:func:`text_columns`) gets one
input per column instead, the text ones strings, which ``verify`` feeds by name
(:func:`graph_columns`, :class:`tree2mat.data.ColumnRows`).

The package: :mod:`~tree2mat.pipelines._step` (a tree step's converter and its registration),
:mod:`~tree2mat.pipelines._imputer` (``SimpleImputer`` on doubles),
:mod:`~tree2mat.pipelines._fitted` (what the fitted pipeline says of its columns and steps) and
:mod:`~tree2mat.pipelines._graph_io` (the whole graph's inputs and outputs); here, registering
with skl2onnx and converting a whole pipeline.

>>> import numpy as np, skl2onnx, tree2mat
>>> from sklearn.datasets import load_iris
>>> from sklearn.ensemble import RandomForestClassifier
>>> from sklearn.pipeline import make_pipeline
>>> from sklearn.preprocessing import StandardScaler
>>> X, y = load_iris(return_X_y=True)
>>> pipe = make_pipeline(StandardScaler(), RandomForestClassifier(n_estimators=5, random_state=0)).fit(X, y)
>>> names = tree2mat.register_skl2onnx(form="sign")
>>> onx = skl2onnx.to_onnx(pipe, X[:1], options={"zipmap": False})
>>> sorted({n.op_type for n in onx.graph.node} & {"TreeEnsembleClassifier", "TreeEnsemble", "MatMul"})
['MatMul']
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import onnx

from tree2mat.build import ConvertOptions, Progress, checked, quiet, stamp
from tree2mat.contract import CONTRACT, CONTRACT_KEY, ROUTING_KEYS
from tree2mat.errors import OptionError, Tree2MatError, UnsupportedModelError, require
from tree2mat.forms import DEFAULT_FORM, DEFAULT_OPSET, FORMS, NEWEST_OPSET
from tree2mat.forms._graph import sort_nodes
from tree2mat.frontends.sklearn import describe_pipeline as describe
from tree2mat.pipelines._fitted import (
    _estimators,
    _refuse_sparse_to_xgboost,
    _selects_by_name,
    as_fitted,
    final_step,
    n_features,
    text_columns,
)
from tree2mat.pipelines._graph_io import _one_matrix_input, _outputs_named, graph_columns
from tree2mat.pipelines._step import STEP_OUTPUTS, _register, _Steps, tree_estimators, tree_step_graph

#: The operators skl2onnx writes for the preprocessing steps a pipeline graph holds, beyond
#: tree2mat's own (``tree2mat.forms._graph.OPERATORS``), by domain: ``verify`` runs a pipeline
#: graph of these without ``--foreign-graph`` (tests/e2e/test_pipelines.py checks the cases).
PREPROCESSING_OPERATORS = {
    "": frozenset({"ArgMin", "CastLike", "Flatten", "Gemm", "ReduceL2", "ReduceMean", "ReduceMin", "ReduceProd",
                   "ReduceSumSquare", "Reciprocal", "Round", "Size", "Sqrt", "Sum"}),
    "ai.onnx.ml": frozenset({"ArrayFeatureExtractor", "Binarizer", "CastMap", "FeatureVectorizer", "Imputer", "LabelEncoder",
                             "Normalizer", "OneHotEncoder", "Scaler"}),
}


def _skl2onnx() -> Any:
    return require("skl2onnx", "converting a scikit-learn Pipeline (through skl2onnx)")


def register_skl2onnx(
    form: str = DEFAULT_FORM, *, max_memory: int | None = None, matmul: str = "float32", temperature: float | None = None,
) -> list[str]:
    """Make ``skl2onnx.to_onnx`` emit tree2mat's graph for every supported tree estimator.

    ``form`` and the other options are those of :func:`tree2mat.convert`; each tree step's graph
    takes the element type skl2onnx gives it (float or double) and the opset of the conversion
    (13 at least). A later call replaces the settings. Also registers a standard-operator
    converter for ``SimpleImputer`` on double inputs (skl2onnx's uses ``ai.onnx.ml.Imputer``, which
    onnxruntime runs on float only). Returns the names of the estimators registered.

    >>> import tree2mat
    >>> "RandomForestClassifier" in tree2mat.register_skl2onnx(form="bitvector")
    True
    """
    skl2onnx = _skl2onnx()
    options = ConvertOptions.parse(form, max_memory=max_memory, matmul=matmul, temperature=temperature)
    return _register(skl2onnx, _Steps(options))


def convert_pipeline(pipeline: Any, options: ConvertOptions, progress: Progress = quiet) -> onnx.ModelProto:
    """One checked ONNX graph of a fitted ``Pipeline`` over one numeric matrix ``X`` [N,
    n_features_in_] (with text columns: one input per column, see :func:`text_columns`):
    skl2onnx's operators for the preprocessing, a tree2mat form for the tree step (see
    :func:`register_skl2onnx`), in float64 unless ``options.dtype`` says otherwise.
    Classifiers output ``label`` and ``probabilities`` (a tensor, no ZipMap), regressors
    ``variable``. The metadata says what each tree step became (a pipeline without a tree step
    tree2mat converts is refused)."""
    if options.raw or options.leaves:
        raise OptionError("--raw and --leaves apply to a tree model, not to a pipeline (its outputs are skl2onnx's)")
    onx, steps = _to_onnx(pipeline, options)
    forms = sorted({step["tree2mat.form"] for step in steps})
    stamp(onx, {
        "tree2mat.form": ",".join(forms),
        "tree2mat.source": f"sklearn {describe(pipeline)}",
        "tree2mat.pipeline": str(len(steps)),
        "tree2mat.n_trees": str(sum(int(step["tree2mat.n_trees"]) for step in steps)),
        "tree2mat.n_features": str(n_features(pipeline)),
        "tree2mat.raw": "0",
        "tree2mat.exact": str(int(all(FORMS[f].exact for f in forms))),
        **{key: value for step in steps for key, value in step.items()
           if key in ("tree2mat.auto", "tree2mat.matmul", "tree2mat.temperature", "tree2mat.target")},
        # verify checks the routing of the last step (it has scikit-learn's rows for it)
        **({key: steps[-1][key] for key in ROUTING_KEYS if key in steps[-1]} if len(steps) == 1 else {CONTRACT_KEY: str(CONTRACT)}),
        # verify runs the steps' small batches' walks (traverse) on every row too
        **{key: ",".join(step[key] for step in steps if f"{walk}_tensor" in step)
           for walk in ("tree2mat.walk_rows", "tree2mat.walk_few") for key in (f"{walk}_tensor", walk, f"{walk}_max")
           if any(f"{walk}_tensor" in step for step in steps)},
        # verify's tolerance: the tree steps' arithmetic (float32 if any step computes in it)
        "tree2mat.arithmetic": min((step.get("tree2mat.arithmetic", "float64") for step in steps), key=lambda a: a != "float32"),
    })
    return checked(onx, progress)


def _to_onnx(pipeline: Any, options: ConvertOptions) -> tuple[onnx.ModelProto, list[dict[str, str]]]:
    """skl2onnx's graph of the pipeline with tree2mat's converters registered for it, and the
    metadata of each tree step's graph."""
    skl2onnx = _skl2onnx()
    from skl2onnx.common.data_types import DoubleTensorType, FloatTensorType, StringTensorType

    newest = min(NEWEST_OPSET, int(skl2onnx.__max_supported_opset__))
    opset = min(DEFAULT_OPSET, newest) if options.opset is None else options.opset
    if opset > newest:
        raise OptionError(f"opset {opset} is not supported for a pipeline: skl2onnx {skl2onnx.__version__} converts up to opset {newest}")
    n = n_features(pipeline)
    final_step(pipeline)
    text = text_columns(pipeline)
    _refuse_sparse_to_xgboost(pipeline)
    kind = {"float64": DoubleTensorType, "float32": FloatTensorType}[options.dtype or "float64"]
    names = getattr(pipeline, "feature_names_in_", None)
    by_name = names is not None and (bool(text) or _selects_by_name(pipeline))
    # (string columns: one input per column, strings for text, which verify feeds by name; no
    # one matrix can hold both)
    inputs = ([(str(c), StringTensorType([None, 1]) if str(c) in text else kind([None, 1])) for c in names]
              if by_name and names is not None else [("X", kind([None, n]))])
    zipmap = {id(est): {"zipmap": False} for est in _estimators(pipeline) if hasattr(est, "classes_") and hasattr(est, "predict_proba")}
    steps = _Steps(options, built=[])
    with restored():
        _register(skl2onnx, steps)
        try:
            onx = skl2onnx.to_onnx(pipeline, initial_types=inputs, target_opset=opset, options=zipmap)
        except Tree2MatError:
            raise
        except Exception as exc:  # skl2onnx cannot convert a step: name it
            raise UnsupportedModelError(
                f"skl2onnx cannot convert {describe(pipeline)}: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
            ) from exc
    assert steps.built is not None
    if not steps.built:
        raise UnsupportedModelError(f"{describe(pipeline)} has no tree step that tree2mat converts; skl2onnx alone converts it")
    sort_nodes(onx.graph)
    _outputs_named(onx.graph, steps.built[-1][STEP_OUTPUTS].split(","))
    if by_name and not text:
        onx = _one_matrix_input(onx, kind is DoubleTensorType, n)
    return onx, steps.built


@contextlib.contextmanager
def restored() -> Iterator[None]:
    """skl2onnx's converter registries as they were before the block."""
    from skl2onnx import _parse, _supported_operators
    from skl2onnx.common import _registration

    pools = (_supported_operators.sklearn_operator_name_map, _registration._converter_pool,
             _registration._shape_calculator_pool, _parse.sklearn_parsers_map)
    saved = [dict(pool) for pool in pools]
    try:
        yield
    finally:
        for pool, copy in zip(pools, saved):
            pool.clear()
            pool.update(copy)


__all__ = [
    "PREPROCESSING_OPERATORS", "STEP_OUTPUTS", "as_fitted", "convert_pipeline", "describe", "final_step", "graph_columns", "n_features",
    "register_skl2onnx", "restored", "text_columns", "tree_estimators", "tree_step_graph",
]

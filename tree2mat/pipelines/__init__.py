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
import importlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import onnx

from tree2mat import frontends
from tree2mat.build import ConvertOptions, Progress, build_graph, checked, quiet, stamp
from tree2mat.contract import CONTRACT, CONTRACT_KEY, LEAF_KEY, ROUTING_KEYS, TWIN_KEY
from tree2mat.errors import OptionError, Tree2MatError, UnsupportedModelError, VerificationError, require
from tree2mat.forms import DEFAULT_FORM, DEFAULT_OPSET, FORMS, MIN_OPSET, NEWEST_OPSET
from tree2mat.forms._graph import all_nodes, sort_nodes
from tree2mat.frontends.sklearn import describe_pipeline as describe

#: The operators skl2onnx writes for the preprocessing steps a pipeline graph holds, beyond
#: tree2mat's own (``tree2mat.forms._graph.OPERATORS``), by domain: ``verify`` runs a pipeline
#: graph of these without ``--foreign-graph`` (tests/e2e/test_pipelines.py checks the cases).
PREPROCESSING_OPERATORS = {
    "": frozenset({"ArgMin", "CastLike", "Flatten", "Gemm", "ReduceL2", "ReduceMean", "ReduceMin", "ReduceProd",
                   "ReduceSumSquare", "Reciprocal", "Round", "Size", "Sqrt", "Sum"}),
    "ai.onnx.ml": frozenset({"ArrayFeatureExtractor", "Binarizer", "CastMap", "FeatureVectorizer", "Imputer", "LabelEncoder",
                             "Normalizer", "OneHotEncoder", "Scaler"}),
}

@dataclass
class _Steps:
    """What the converters of one registration build with, and (when ``built`` is a list) the
    metadata of each tree step's graph they built."""

    options: ConvertOptions
    built: list[dict[str, str]] | None = None


def _skl2onnx() -> Any:
    return require("skl2onnx", "converting a scikit-learn Pipeline (through skl2onnx)")


def tree_estimators() -> dict[str, tuple[str, ...]]:
    """The estimators :func:`register_skl2onnx` registers a converter for, module -> class names:
    every frontend's ``pipeline_steps``."""
    return {module: names for spec in frontends.FRONTENDS.values() for module, names in spec.pipeline_steps.items()}


def _classes() -> Iterator[type]:
    for module_name, names in tree_estimators().items():
        try:
            module = importlib.import_module(module_name)
        except ImportError:  # an optional library: nothing of it can be in a pipeline
            continue
        for name in names:
            yield getattr(module, name)


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


def _register(skl2onnx: Any, steps: _Steps) -> list[str]:
    options = {"zipmap": [True, False, "columns"], "nocl": [False], "output_class_labels": [False]}

    def shape_calculator(operator: Any) -> None:
        _shape_calculator(steps, operator)

    registered = []
    for cls in _classes():
        is_classifier = cls.__name__.endswith("Classifier")
        skl2onnx.update_registered_converter(
            cls, f"Tree2mat{cls.__name__}", shape_calculator, _converter, overwrite=True,
            options=options if is_classifier else None,
        )
        registered.append(cls.__name__)
    _register_imputer(skl2onnx)
    return registered


# ------------------------------------------------------------------ the converter of a tree step


def _target_opset(operator: Any) -> int:
    target = operator.target_opset
    if isinstance(target, dict):
        target = target.get("")
    if target is None:
        return DEFAULT_OPSET
    if int(target) < MIN_OPSET:
        raise OptionError(f"tree2mat's graphs need opset {MIN_OPSET} or newer; the conversion targets opset {target}")
    return min(int(target), NEWEST_OPSET)


def _element_type(operator: Any) -> str:
    from skl2onnx.common.data_types import DoubleTensorType, FloatTensorType

    kind = operator.inputs[0].type
    if isinstance(kind, DoubleTensorType):
        return "float64"
    if isinstance(kind, FloatTensorType):
        return "float32"
    raise UnsupportedModelError(
        f"{type(operator.raw_operator).__name__} in a pipeline gets {type(kind).__name__} input; "
        "tree2mat's graphs take float or double"
    )


def _variable_type(value: onnx.ValueInfoProto) -> Any:
    from skl2onnx.common.data_types import DoubleTensorType, FloatTensorType, Int64TensorType, StringTensorType

    tt = value.type.tensor_type
    shape = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
    kinds: dict[int, Any] = {
        onnx.TensorProto.FLOAT: FloatTensorType, onnx.TensorProto.DOUBLE: DoubleTensorType,
        onnx.TensorProto.INT64: Int64TensorType, onnx.TensorProto.STRING: StringTensorType,
    }
    return kinds[tt.elem_type](shape)


def tree_step_graph(model: Any, options: ConvertOptions) -> onnx.ModelProto:
    """The tree2mat graph of one tree step (``options`` with the step's dtype and opset)."""
    ens = frontends.load_model(model)[1]
    if len(ens.classes) > 1:
        raise UnsupportedModelError(
            f"{type(model).__name__} has {len(ens.classes)} outputs; in a skl2onnx pipeline tree2mat "
            "converts single-output classifiers (convert the estimator alone for multi-output)"
        )
    return build_graph(ens, options, ml_opset=3)  # (skl2onnx 1.20 writes no ai.onnx.ml past 3)


def _shape_calculator(steps: _Steps, operator: Any) -> None:
    """Build the step's graph (once) and give skl2onnx's variables its outputs' types."""
    options = replace(steps.options, dtype=_element_type(operator), opset=_target_opset(operator))
    graph = tree_step_graph(operator.raw_operator, options)
    operator.tree2mat_graph = graph
    operator.tree2mat_meta = {p.key: p.value for p in graph.metadata_props}
    operator.tree2mat_meta[STEP_OUTPUTS] = ",".join(o.name for o in graph.graph.output)
    if steps.built is not None:
        steps.built.append(operator.tree2mat_meta)
    outputs = {o.name: o for o in graph.graph.output}
    # ZipMap (skl2onnx's default after a classifier) takes float probabilities only: as skl2onnx's
    # own converters do, a double graph's probabilities are cast to float for it.
    zipmap = hasattr(operator.raw_operator, "classes_") and operator.scope_inst.get_options(
        operator.raw_operator, dict(zipmap=True)).get("zipmap", True) is not False
    operator.tree2mat_to_float = set()
    for var in operator.outputs:
        if var.raw_name not in outputs:
            raise UnsupportedModelError(
                f"skl2onnx expects an output {var.raw_name!r} from {type(operator.raw_operator).__name__}; "
                f"tree2mat's graph has {', '.join(outputs)}"
            )
        var.type = _variable_type(outputs[var.raw_name])
        if zipmap and var.raw_name == "probabilities" and outputs[var.raw_name].type.tensor_type.elem_type == onnx.TensorProto.DOUBLE:
            from skl2onnx.common.data_types import FloatTensorType

            var.type = FloatTensorType(var.type.shape)
            operator.tree2mat_to_float.add(var.raw_name)


def _converter(scope: Any, operator: Any, container: Any) -> None:
    """Copy the step's graph into skl2onnx's, every name made unique in its scope."""
    graph = operator.tree2mat_graph
    names = {graph.graph.input[0].name: operator.inputs[0].full_name}
    names.update({var.raw_name: var.full_name for var in operator.outputs if var.raw_name not in operator.tree2mat_to_float})

    def rename(name: str) -> str:
        if name and name not in names:
            names[name] = scope.get_unique_variable_name(f"t2m_{name}")
        return names.get(name, name)

    for init in graph.graph.initializer:
        tensor = onnx.TensorProto()
        tensor.CopyFrom(init)
        tensor.name = rename(init.name)
        container.initializers.append(tensor)
    def renamed(node: onnx.NodeProto) -> onnx.NodeProto:
        new = onnx.NodeProto()
        new.CopyFrom(node)
        del new.input[:], new.output[:]
        new.input.extend(rename(i) for i in node.input)
        new.output.extend(rename(o) for o in node.output)
        new.name = scope.get_unique_operator_name(f"t2m_{node.op_type}")
        for attr in new.attribute:  # an If's branches read the step's tensors by name
            if attr.type == onnx.AttributeProto.GRAPH:
                nodes = [renamed(n) for n in attr.g.node]
                del attr.g.node[:]
                attr.g.node.extend(nodes)
                for tensor in (*attr.g.output, *attr.g.initializer):
                    tensor.name = rename(tensor.name)
        return new

    for node in graph.graph.node:
        container.nodes.append(renamed(node))
    for key in (LEAF_KEY, TWIN_KEY, "tree2mat.walk_rows_tensor", "tree2mat.walk_few_tensor"):
        # where the step's tensors are in the whole graph (verify checks routing there, and
        # runs every one of traverse's walks)
        if operator.tree2mat_meta.get(key) in names:
            operator.tree2mat_meta[key] = names[operator.tree2mat_meta[key]]
    for var in operator.outputs:
        if var.raw_name in operator.tree2mat_to_float:
            container.add_node("Cast", [rename(var.raw_name)], [var.full_name], to=onnx.TensorProto.FLOAT,
                               name=scope.get_unique_operator_name("t2m_CastForZipMap"))
    for entry in graph.opset_import:
        container.node_domain_version_pair_sets.add((entry.domain, entry.version))


# ------------------------------------------------------- SimpleImputer on doubles, standard ops


def _register_imputer(skl2onnx: Any) -> None:
    from skl2onnx.common._registration import get_shape_calculator
    from skl2onnx.operator_converters.imputer_op import convert_sklearn_imputer
    from sklearn.impute import SimpleImputer

    shape = get_shape_calculator("SklearnSimpleImputer")

    def convert(scope: Any, operator: Any, container: Any) -> None:
        from skl2onnx.common.data_types import DoubleTensorType

        if getattr(operator.raw_operator, "add_indicator", False):  # (skl2onnx's graph gets the width wrong)
            raise UnsupportedModelError("SimpleImputer(add_indicator=True) is not supported in a pipeline tree2mat converts")
        if not isinstance(operator.inputs[0].type, DoubleTensorType):
            return convert_sklearn_imputer(scope, operator, container)
        _convert_imputer_double(scope, operator, container)
        return None

    skl2onnx.update_registered_converter(SimpleImputer, "SklearnSimpleImputer", shape, convert, overwrite=True)


def _convert_imputer_double(scope: Any, operator: Any, container: Any) -> None:
    """``where(x is missing, statistic, x)`` in double: what ``SimpleImputer.transform`` computes."""
    imputer = operator.raw_operator
    stats = np.asarray(imputer.statistics_, dtype=np.float64)
    missing = imputer.missing_values
    if np.isnan(stats).any() and not getattr(imputer, "keep_empty_features", False):
        raise UnsupportedModelError(
            "SimpleImputer dropped all-missing columns (statistics NaN); refit it with keep_empty_features=True"
        )
    if len(operator.inputs) != 1:
        raise UnsupportedModelError("SimpleImputer on double inputs takes one input matrix")
    x = operator.inputs[0].full_name
    is_missing = scope.get_unique_variable_name("imputer_missing")
    values = scope.get_unique_variable_name("imputer_statistics")
    container.add_initializer(values, onnx.TensorProto.DOUBLE, [1, stats.size], stats.tolist())
    if isinstance(missing, float) and np.isnan(missing):
        container.add_node("IsNaN", [x], [is_missing], name=scope.get_unique_operator_name("ImputerIsNaN"))
    elif isinstance(missing, (int, float, np.number)) and not isinstance(missing, bool):
        value = scope.get_unique_variable_name("imputer_missing_value")
        container.add_initializer(value, onnx.TensorProto.DOUBLE, [], [float(missing)])
        container.add_node("Equal", [x, value], [is_missing], name=scope.get_unique_operator_name("ImputerEqual"))
    else:
        raise UnsupportedModelError(f"SimpleImputer(missing_values={missing!r}) on double inputs is not supported")
    container.add_node("Where", [is_missing, values, x], [operator.outputs[0].full_name],
                       name=scope.get_unique_operator_name("ImputerWhere"))


# ----------------------------------------------------------------- a whole pipeline, one matrix


def n_features(pipeline: Any) -> int:
    n = getattr(pipeline, "n_features_in_", None)
    if n is None:
        raise UnsupportedModelError(f"scikit-learn {describe(pipeline)} is not fitted (no n_features_in_)")
    return int(n)


def as_fitted(pipeline: Any, X: np.ndarray) -> Any:
    """Rows as the pipeline was fitted on them: a DataFrame with its column names when it was
    fitted on one (a ColumnTransformer may select columns by name), else ``X``."""
    names = getattr(pipeline, "feature_names_in_", None)
    if names is None:
        return X
    pd = require("pandas", "a pipeline fitted on a DataFrame")
    frame = pd.DataFrame(X, columns=list(names))
    if X.dtype == object:  # (rows of named columns, see ColumnRows: the numbers as numbers)
        text = set(text_columns(pipeline))
        frame = frame.astype({c: np.float64 for c in frame.columns if c not in text})
    return frame


def graph_columns(onx: onnx.ModelProto, pipeline: Any, runtime: str) -> list[str] | None:
    """The columns of a pipeline's graph of one input per column (strings among them, or from
    skl2onnx.to_onnx with one input per column), its inputs put in ``pipeline``'s column order
    in ``onx`` (a copy of the caller's: rows are read in that order); None for a graph of one
    input, or with no pipeline. A VerificationError where
    the inputs are not the pipeline's columns; an OptionError where ``runtime`` cannot run it."""
    from tree2mat.runtimes import RUNTIMES, column_runtimes

    inputs = list(onx.graph.input)
    if pipeline is None or (len(inputs) == 1 and inputs[0].type.tensor_type.elem_type != onnx.TensorProto.STRING):
        return None  # (a tree model's graph: its one input checked as ever)
    if getattr(pipeline, "feature_names_in_", None) is None:
        raise VerificationError(f"the ONNX graph has {len(inputs)} inputs by column name; {describe(pipeline)} was not fitted on a "
                                "pandas DataFrame, so it has no column names: verify the graph tree2mat convert wrote of it")
    names = [str(c) for c in pipeline.feature_names_in_]
    have = [i.name for i in inputs]
    if sorted(have) != sorted(names):
        raise VerificationError(f"the ONNX graph's inputs ({', '.join(have[:6])}) are not the pipeline's columns ({', '.join(names[:6])}): "
                                "not a graph of this pipeline")
    if not RUNTIMES[runtime].text:
        raise OptionError(f"--runtime {runtime} cannot run a pipeline graph of named column inputs with string tensors "
                          f"(ai.onnx.ml encoders on text); verify it on {', '.join(column_runtimes())}")
    by_name = {i.name: onnx.ValueInfoProto() for i in inputs}
    for i in inputs:
        by_name[i.name].CopyFrom(i)
    del onx.graph.input[:]
    onx.graph.input.extend(by_name[c] for c in names)
    return names


def final_step(pipeline: Any) -> Any:
    """The last step, which must be a tree model tree2mat converts (the pipeline's predictions
    are its predictions, which ``verify`` compares with)."""
    step = pipeline.steps[-1][1]
    estimators = tree_estimators()
    supported = [name for names in estimators.values() for name in names]
    libraries = {module.split(".")[0] for module in estimators}
    if type(step).__name__ not in supported or type(step).__module__.split(".")[0] not in libraries:
        raise UnsupportedModelError(
            f"{describe(pipeline)} ends in {type(step).__name__}; tree2mat converts pipelines that end in a tree "
            f"model ({', '.join(supported)})"
        )
    return step


def text_columns(pipeline: Any) -> list[str]:
    """The columns of the DataFrame ``pipeline`` was fitted on that an encoder took as text (its
    categories are strings): each becomes a string input of the graph. A pipeline whose string
    categories cannot be traced to named DataFrame columns is refused, saying what would work."""
    names = getattr(pipeline, "feature_names_in_", None)
    out: list[str] = []
    for est in _estimators(pipeline):
        for _, step, cols in getattr(est, "transformers_", []):
            if isinstance(step, str):
                continue
            picked = [str(names[c]) if names is not None and not isinstance(c, str) else str(c)
                      for c in np.atleast_1d(np.asarray(cols, dtype=object))]
            for inner in _estimators(step):
                for k, cats in enumerate(getattr(inner, "categories_", []) or []):
                    if _is_text(cats) and k < len(picked) and picked[k] not in out:
                        out.append(picked[k])
    inside = {id(step) for est in _estimators(pipeline) for _, t, _ in getattr(est, "transformers_", [])
              if not isinstance(t, str) for step in _estimators(t)}
    stray = [est for est in _estimators(pipeline) if id(est) not in inside
             and any(_is_text(c) for c in getattr(est, "categories_", []) or [])]
    if stray or (out and names is None):
        what = type(stray[0]).__name__ if stray else "an encoder"
        raise UnsupportedModelError(
            f"{what} in {describe(pipeline)} encodes string categories of columns without names; tree2mat converts string "
            "columns picked by name in a ColumnTransformer of a pipeline fitted on a pandas DataFrame: refit it so"
        )
    return out


def _is_text(categories: Any) -> bool:
    return np.asarray(categories).dtype.kind in "OUS" and any(isinstance(c, str) for c in np.asarray(categories, dtype=object))


def _estimators(model: Any) -> Iterator[Any]:
    yield model
    for _, step in getattr(model, "steps", []):
        yield from _estimators(step)
    for _, step, _ in getattr(model, "transformers_", []):
        if not isinstance(step, str):
            yield from _estimators(step)


def convert_pipeline(pipeline: Any, options: ConvertOptions, progress: Progress = quiet) -> onnx.ModelProto:
    """One checked ONNX graph of a fitted ``Pipeline`` over one numeric matrix ``X`` [N,
    n_features_in_] (with text columns: one input per column, see :func:`text_columns`): skl2onnx's operators for the preprocessing, a tree2mat form for the tree step
    (see :func:`register_skl2onnx`), in float64 unless ``options.dtype`` says otherwise.
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
        **{key: value for step in steps for key, value in step.items() if key in ("tree2mat.auto", "tree2mat.matmul", "tree2mat.temperature", "tree2mat.target")},
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


def _names(graph: onnx.GraphProto) -> set[str]:
    """Every tensor name ``graph`` uses: its inputs, outputs, initializers and every node's
    inputs and outputs (subgraphs too)."""
    return ({v for node in all_nodes(graph) for v in (*node.input, *node.output)} | {t.name for t in graph.initializer}
            | {v.name for v in (*graph.input, *graph.output)})


def _free(base: str, taken: set[str]) -> str:
    """``base``, or ``base_1``, ``base_2``... : the first not in ``taken``."""
    return next(c for c in (base, *(f"{base}_{i}" for i in range(1, len(taken) + 2))) if c not in taken)


#: A tree step's outputs, by name (in the steps' metadata, not the graph's).
STEP_OUTPUTS = "tree2mat.step_outputs"


def _outputs_named(graph: onnx.GraphProto, wanted: list[str]) -> None:
    """The graph's outputs named as the last tree step names them (``variable``, ``label``,
    ``probabilities``). skl2onnx names a pipeline's tensors in the order it meets them, so a
    scaler's output can take ``variable`` first and leave the regressor's output ``variable1``
    (seen with traverse's graph, whose ``If`` comes in another order); a tensor that holds a
    wanted name is renamed out of the way first, everywhere (subgraphs too)."""
    have = [o.name for o in graph.output]
    if have == wanted or len(have) != len(wanted):
        return
    taken = _names(graph)
    mapping: dict[str, str] = {}
    for old, new in zip(have, wanted):
        if old != new:
            if new in taken:
                mapping[new] = _free(f"{new}_step", taken)
            mapping[old] = new
    for node in all_nodes(graph):
        node.input[:] = [mapping.get(i, i) for i in node.input]
        node.output[:] = [mapping.get(o, o) for o in node.output]
    for info in (*graph.output, *graph.value_info, *graph.initializer):
        info.name = mapping.get(info.name, info.name)


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


def _refuse_sparse_to_xgboost(pipeline: Any) -> None:
    """XGBoost reads the entries a sparse matrix leaves out as missing, not as 0; the graph's
    matrix is dense. Refuse when the step before it gives sparse rows."""
    if type(pipeline.steps[-1][1]).__module__.split(".")[0] != "xgboost" or len(pipeline.steps) < 2:
        return
    step = pipeline.steps[-2][1]
    while hasattr(step, "steps"):
        step = step.steps[-1][1]
    sparse = getattr(step, "sparse_output_", None)  # a fitted ColumnTransformer's choice
    if sparse is None and type(step).__name__ == "OneHotEncoder":
        sparse = getattr(step, "sparse_output", False)
    if sparse:
        raise UnsupportedModelError(
            f"{describe(pipeline)}: {type(step).__name__} gives XGBoost sparse rows, whose absent entries XGBoost "
            "treats as missing (not 0); refit with OneHotEncoder(sparse_output=False) or ColumnTransformer(sparse_threshold=0)"
        )


def _selects_by_name(model: Any) -> bool:
    return any(
        any(isinstance(c, str) for c in np.atleast_1d(np.asarray(cols, dtype=object)))
        for est in _estimators(model) for _, _, cols in getattr(est, "transformers_", [])
    )


def _one_matrix_input(onx: onnx.ModelProto, double: bool, n: int) -> onnx.ModelProto:
    """Replace the per-column inputs (skl2onnx's way to select columns by name) by one matrix
    ``X`` [N, n] (``X_1``... if a column is called X) split into them, in the column order the pipeline was fitted with."""
    columns = [i.name for i in onx.graph.input]
    taken = _names(onx.graph)
    name = _free("X", taken)
    elem = onnx.TensorProto.DOUBLE if double else onnx.TensorProto.FLOAT
    sizes = onnx.numpy_helper.from_array(np.ones(n, dtype=np.int64), _free("tree2mat_split_sizes", taken))
    split = onnx.helper.make_node("Split", [name, sizes.name], columns, axis=1, name="tree2mat_split_columns")
    del onx.graph.input[:]
    onx.graph.input.append(onnx.helper.make_tensor_value_info(name, elem, [None, n]))
    onx.graph.initializer.append(sizes)
    onx.graph.node.insert(0, split)
    return onx

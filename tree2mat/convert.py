"""``load`` and ``convert``: a fitted model, a model file or a scikit-learn Pipeline to the IR or
to an ONNX graph (read -> validate -> build -> check)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from tree2mat import attention, frontends, pipelines
from tree2mat.attention import graph as attention_graph
from tree2mat.build import ConvertOptions, Progress, build_graph, quiet
from tree2mat.data import load_data
from tree2mat.errors import DataError, OptionError
from tree2mat.forms import DEFAULT_FORM, auto
from tree2mat.forms._graph import all_nodes
from tree2mat.ir import limits
from tree2mat.ir.core import Ensemble
from tree2mat.onnx_io import external_data_file


def load(model_or_path: Any, *, max_memory: int | None = None) -> Ensemble:
    """The validated IR of a fitted model object or a model file. A file whose declared sizes
    would take over half this machine's memory to read is refused before it is built, as is
    one no form's graph fits ``max_memory`` bytes for 10 000 rows, when given
    (:mod:`tree2mat.ir.limits`).

    >>> from sklearn.datasets import load_iris
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> ens = load(DecisionTreeClassifier(max_leaf_nodes=6, random_state=0).fit(X, y))
    >>> ens.n_trees, ens.n_features, ens.trees[0].n_leaves
    (1, 4, 6)
    """
    with limits.checking(auto.reading_check() if max_memory is None else auto.declared_check(max_memory)):
        return frontends.load_model(model_or_path)[1]


def convert(
    model_or_path: Any,
    form: str = DEFAULT_FORM,
    *,
    dtype: str | None = None,
    opset: int | None = None,
    raw: bool = False,
    leaves: bool = False,
    temperature: float | None = None,
    matmul: str = "float32",
    max_memory: int | None = None,
    batch_hint: int | None = None,
    target: str | None = None,
    tree_weights: bool = False,
    tree_mask: str | None = None,
    proximity: Any = None,
    progress: Progress | None = None,
) -> onnx.ModelProto:
    """Convert a fitted tree model (object, file path or ``Ensemble``) to an ONNX model.

    ``form``: one of ``FORMS``, or ``auto`` (the default): the fastest exact form whose constants
    and intermediates for 10 000 rows fit ``max_memory`` bytes (default 4 GiB; the graph's metadata
    ``tree2mat.form`` and ``tree2mat.auto`` say which and why). An explicit form over
    ``max_memory`` is refused before it is built, naming an exact form that fits. ``dtype``: the input's,
    float32 (the default for a tree model) or float64 (the default for a pipeline). ``opset``: default the
    newest the pinned onnxruntime runs (for a pipeline: that skl2onnx converts). ``batch_hint``: auto only,
    the rows per run the graph will mostly see (default 10 000): auto picks the form fastest for such runs
    (metadata ``tree2mat.batch_hint``). ``target``: the runtime the graph is for (``auto.TARGETS``: a runtime
    of ``verify --runtime``, or ``cuda``): auto picks among the forms proven exact there (for onnxruntime,
    node and wasm, ``treeensemble`` among them), and an explicit form not proven there is refused. None (the
    default): the forms exact on every runtime (``verify`` warns when it proves the graph elsewhere).
    ``temperature``: soft forms only (default 1, in input-feature units). ``matmul``: the path-matching
    MatMul's element type (float32, or float16 / int8 for the sign and bitvector forms; exact in every case).
    ``progress(step)`` is called as each step begins. Every option is checked before the model is read.

    An attention forest (:mod:`tree2mat.attention`, or its file) becomes the forest's graph with
    the attention after it (:mod:`tree2mat.attention.graph`). ``tree_weights``: its graph also
    outputs ``tree_weights`` [N, T], each row's weight of each tree (the model's
    ``attention(X)``); any other model refuses it.

    Also (docs/cli.md#convert): ``tree_mask`` (``"request"``: [T]; ``"rows"``: [N, T]), a second input that
    keeps or drops each tree (staged predictions, every leaf exact); ``proximity``, reference rows [R, F] (an array,
    a DataFrame, or a data file as ``verify`` reads ``data``) for an output ``proximity`` [N, R]: the
    fraction of trees in which a row and a reference row share a leaf (Decision Machines eq. 6's delta).

    A scikit-learn ``Pipeline`` becomes one graph through skl2onnx (the ``pipelines`` extra):
    its tree step a tree2mat form, the other steps skl2onnx's (see :mod:`tree2mat.pipelines`).

    >>> from sklearn.datasets import load_iris
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> onx = convert(RandomForestClassifier(n_estimators=5, random_state=0).fit(X, y))
    >>> [o.name for o in onx.graph.output]
    ['label', 'probabilities']
    """
    options = ConvertOptions.parse(
        form, dtype=dtype, opset=opset, raw=raw, leaves=leaves, temperature=temperature, matmul=matmul, max_memory=max_memory, batch_hint=batch_hint,
        target=target, tree_weights=tree_weights, tree_mask=tree_mask, proximity=proximity is not None,
    )
    return _convert(model_or_path, options, progress or quiet, proximity)


def _convert(model_or_path: Any, options: ConvertOptions, step: Progress, proximity: Any = None) -> onnx.ModelProto:
    """:func:`convert` once its options are checked: the model read (within ``options.max_memory``)
    and built as what it is, an attention forest, a pipeline or a tree model."""
    step("reading the model")
    with limits.checking(auto.declared_check(options.max_memory)), limits.reporting(_reading(step)):
        obj = frontends.load_object(model_or_path)
    forest = attention.as_forest(obj)
    if options.tree_mask is not None and (forest is not None or frontends.is_pipeline(obj)):
        kind = "an attention forest (its attention weighs every tree)" if forest is not None else "a pipeline (skl2onnx writes its inputs)"
        raise OptionError(f"--tree-mask: the graph of {kind} takes no tree mask; convert the tree model itself")
    if proximity is not None and (forest is not None or frontends.is_pipeline(obj)):
        raise OptionError(f"--proximity applies to a tree model's exact graph, not to {'an attention forest' if forest else 'a pipeline'}'s")
    if forest is not None:
        return attention_graph.build(forest, options, step)
    if options.tree_weights:
        what = model_or_path if isinstance(model_or_path, (str, Path)) else f"a {type(obj).__name__}"
        raise OptionError(
            f"--tree-weights: {what} is not an attention forest; the per-row tree weights are an attention forest's "
            "(tree2mat attend fits one on a random forest's trees)"
        )
    if frontends.is_pipeline(obj):
        step(f"converting {pipelines.describe(obj)} through skl2onnx")
        return pipelines.convert_pipeline(obj, options, step)
    ens = frontends.named(model_or_path, frontends.to_ensemble, obj)
    if proximity is not None:
        options = replace(options, proximity=_reference_rows(proximity, ens))
    return build_graph(ens, options, step)


def _reference_rows(given: Any, ens: Ensemble) -> np.ndarray:
    """The reference rows of ``convert(proximity=...)`` as numbers [R, F] (float64): a data
    file read as ``verify`` reads ``--data`` (a named-category column's names become their
    codes), or an array or DataFrame of numbers; an OptionError where they cannot be read."""
    try:
        if isinstance(given, (str, Path)):
            rows = load_data(given, None, dict(ens.category_labels) or None)
        else:
            with np.errstate(over="ignore"):
                rows = np.asarray(given, np.float64)
    except (DataError, ValueError, TypeError) as exc:
        raise OptionError(f"--proximity: {exc}") from None
    return rows  # (its shape checked as the graph is built: tree2mat.build.proximity_leaves)


def _reading(step: Progress) -> Callable[[int, int], None]:
    """Reading a model's trees as a step's progress (a tenth of them at a time)."""

    def report(done: int, total: int) -> None:
        if 0 < done:
            step(f"reading the model ({done:,} of {total:,} trees)")

    return report


#: ``convert --json``'s schema version (fields are only added within a version).
CONVERT_SCHEMA = 1


def written(onx: Any, output: Path, size: int) -> dict[str, Any]:
    """What ``convert`` wrote to ``output`` (``size`` bytes), as ``tree2mat convert --json`` prints
    it (documented in docs/cli.md#convert)."""
    meta = {p.key: p.value for p in onx.metadata_props}
    data = external_data_file(output)
    temperature = meta.get("tree2mat.temperature")
    return {
        "schema": CONVERT_SCHEMA,
        "path": str(output),
        "bytes": size,
        "data_file": None if data is None else str(data),
        "data_bytes": None if data is None else data.stat().st_size,
        "form": meta["tree2mat.form"],
        "exact": meta["tree2mat.exact"] == "1",
        "auto_reason": meta.get("tree2mat.auto"),
        "target": meta.get("tree2mat.target"),
        "matmul": meta.get("tree2mat.matmul", "float32"),
        "temperature": None if temperature is None else float(temperature),
        "source": meta["tree2mat.source"],
        "pipeline": meta["tree2mat.source"].split(" ", 1)[1] if "tree2mat.pipeline" in meta else None,
        "n_trees": int(meta["tree2mat.n_trees"]),
        "n_features": int(meta["tree2mat.n_features"]),
        "opset": next(i.version for i in onx.opset_import if i.domain in ("", "ai.onnx")),
        "nodes": sum(1 for _ in all_nodes(onx.graph)),
        "inputs": [io_info(i) for i in onx.graph.input],
        "outputs": [io_info(o) for o in onx.graph.output],
        "categories": json.loads(meta["tree2mat.categories"]) if "tree2mat.categories" in meta else None,
    }


def io_info(value: Any) -> dict[str, Any]:
    """An ONNX graph input or output: name, shape (a dimension's name where it has no size), dtype."""
    tt = value.type.tensor_type
    dims = [d.dim_param or (d.dim_value if d.HasField("dim_value") else None) for d in tt.shape.dim]
    dtype = "string" if tt.elem_type == onnx.TensorProto.STRING else onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type).name
    return {"name": value.name, "shape": dims, "dtype": dtype}

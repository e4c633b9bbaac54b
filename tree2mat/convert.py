"""``load`` / ``convert`` / ``save``: parse -> validate -> lower -> emit, as a pipeline."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from tree2mat import frontends, pipelines
from tree2mat._files import atomic_write, atomic_write_files, writable_target
from tree2mat.errors import OptionError
from tree2mat.forms import AUTO, DEFAULT_FORM, DEFAULT_OPSET, FORMS, MIN_OPSET, GraphOptions, auto, check_form
from tree2mat.ir.core import Ensemble

DTYPES: dict[str, np.dtype] = {"float32": np.dtype(np.float32), "float64": np.dtype(np.float64)}

#: A graph whose constants pass this many bytes cannot be one protobuf message (2 GiB limit): it
#: is written with its constants in a side file (ONNX external data, ``<file>.<digest>.data``).
EXTERNAL_DATA_BYTES = 2**31 - 2**26
#: Constants smaller than this stay in the graph file.
EXTERNAL_MIN_BYTES = 1024
#: Offsets of tensors in the data file are multiples of this (memory-mappable).
EXTERNAL_ALIGN = 4096


def needs_external_data(model: onnx.ModelProto) -> bool:
    return sum(len(t.raw_data) for t in model.graph.initializer) > EXTERNAL_DATA_BYTES


def load(model_or_path: Any) -> Ensemble:
    """The validated IR of a fitted model object or a model file.

    >>> from sklearn.datasets import load_iris
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> ens = load(DecisionTreeClassifier(max_leaf_nodes=6, random_state=0).fit(X, y))
    >>> ens.n_trees, ens.n_features, ens.trees[0].n_leaves
    (1, 4, 6)
    """
    return frontends.load_model(model_or_path)[1]


def graph_options(
    dtype: str = "float32", opset: int = DEFAULT_OPSET, raw: bool = False, leaves: bool = False,
    form: str = "sign", temperature: float | None = None, matmul: str = "float32",
) -> GraphOptions:
    spec = check_form(form)
    if temperature is not None:
        if spec.exact:
            raise OptionError(f"--temperature applies to the soft forms ({', '.join(n for n, f in FORMS.items() if not f.exact)}), not to the exact form {form}")
        if not (np.isfinite(temperature) and temperature > 0):
            raise OptionError(f"--temperature must be a finite number > 0, got {temperature}")
    if leaves and not spec.exact:
        raise OptionError(f"--leaves needs an exact form: the {form} form has no exit leaf")
    if matmul not in spec.matmul:
        which = ", ".join(n for n, f in FORMS.items() if len(f.matmul) > 1)
        raise OptionError(
            f"--matmul {matmul} is not available for the form {form}; it takes {', '.join(spec.matmul)}"
            f" (reduced precision: the forms {which})"
        )
    if dtype not in DTYPES:
        raise OptionError(f"dtype {dtype!r} is not supported; choose one of {', '.join(DTYPES)}")
    if not MIN_OPSET <= opset <= DEFAULT_OPSET:
        raise OptionError(
            f"opset {opset} is not supported; choose {MIN_OPSET} to {DEFAULT_OPSET} "
            "(the newest the pinned onnxruntime runs)"
        )
    return GraphOptions(dtype=DTYPES[dtype], opset=opset, raw=raw, leaves=leaves, temperature=temperature, matmul=matmul)


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
    progress: Callable[[str], None] | None = None,
) -> onnx.ModelProto:
    """Convert a fitted tree model (object, file path or ``Ensemble``) to an ONNX model.

    ``form``: one of ``FORMS``, or ``auto`` (the default): the fastest exact form whose constants
    and intermediates for 10 000 rows fit ``max_memory`` bytes (default 4 GiB; the graph's metadata
    ``tree2mat.form`` and ``tree2mat.auto`` say which and why). An explicit form over
    ``max_memory`` is refused before it is built, naming an exact form that fits. ``dtype``: the
    input's, float32 (the default for a tree model) or float64 (the default for a pipeline).
    ``opset``: default the newest the pinned onnxruntime runs (for a pipeline: that skl2onnx
    converts).
    ``temperature``: soft forms only (default 1, in input-feature units). ``matmul``: the
    path-matching MatMul's element type (float32, or float16 / int8 for the sign and bitvector
    forms; exact in every case). ``progress(step)`` is called as each step begins (reading the
    model, building the graph, checking it).

    A scikit-learn ``Pipeline`` becomes one graph through skl2onnx (the ``pipelines`` extra):
    its tree step a tree2mat form, the other steps skl2onnx's (see :mod:`tree2mat.pipelines`).

    >>> from sklearn.datasets import load_iris
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> onx = convert(RandomForestClassifier(n_estimators=5, random_state=0).fit(X, y))
    >>> [o.name for o in onx.graph.output]
    ['label', 'probabilities']
    """
    reason = None
    graph_opset = DEFAULT_OPSET if opset is None else opset
    tree_dtype = dtype or "float32"
    budget = auto.DEFAULT_MAX_MEMORY if max_memory is None else max_memory
    if not budget > 0:
        raise OptionError(f"--max-memory must be positive, got {budget}")
    if form == AUTO:
        if temperature is not None or matmul != "float32":
            raise OptionError("--temperature and --matmul need an explicit --form (auto picks an exact float32 form)")
        graph_options(tree_dtype, graph_opset, raw, leaves)  # options checked before the model is read
    else:
        graph_options(tree_dtype, graph_opset, raw, leaves, form, temperature, matmul)
    step = progress or (lambda _: None)
    step("reading the model")
    obj = frontends.load_object(model_or_path)
    if pipelines.is_pipeline(obj):
        step(f"converting {pipelines.describe(obj)} through skl2onnx")
        return _convert_pipeline(obj, form, dtype or "float64", opset, raw, leaves, temperature, matmul, max_memory, step)
    ens = frontends.named(model_or_path, frontends.to_ensemble, obj)
    if form == AUTO:
        choice = auto.choose(ens, budget)
        form, reason = choice.form, choice.reason
        opts = graph_options(tree_dtype, graph_opset, raw, leaves, form)
    else:
        opts = graph_options(tree_dtype, graph_opset, raw, leaves, form, temperature, matmul)
        auto.check_budget(form, ens, budget)
    step(f"building the {form} graph of {ens.n_trees} trees")
    model = FORMS[form].build(ens, opts)
    _stamp(model, {
        "tree2mat.form": form,
        "tree2mat.source": ens.source,
        "tree2mat.n_trees": str(ens.n_trees),
        "tree2mat.n_features": str(ens.n_features),
        "tree2mat.raw": str(int(opts.raw)),
        "tree2mat.exact": str(int(FORMS[form].exact)),
        **({"tree2mat.matmul": opts.matmul} if opts.matmul != "float32" else {}),
        **({"tree2mat.auto": reason} if reason is not None else {}),
        **({"tree2mat.categories": json.dumps(ens.category_table())} if ens.category_labels else {}),
    })
    return _checked(model, step)


def _convert_pipeline(
    pipeline: Any, form: str, dtype: str, opset: int | None, raw: bool, leaves: bool, temperature: float | None,
    matmul: str, max_memory: int | None, step: Callable[[str], None],
) -> onnx.ModelProto:
    if raw or leaves:
        raise OptionError("--raw and --leaves apply to a tree model, not to a pipeline (its outputs are skl2onnx's)")
    model, steps = pipelines.convert_pipeline(
        pipeline, form, dtype=dtype, opset=opset, max_memory=max_memory, matmul=matmul, temperature=temperature,
    )
    forms = sorted({step["tree2mat.form"] for step in steps})
    _stamp(model, {
        "tree2mat.form": ",".join(forms),
        "tree2mat.source": f"sklearn {pipelines.describe(pipeline)}",
        "tree2mat.pipeline": str(len(steps)),
        "tree2mat.n_trees": str(sum(int(step["tree2mat.n_trees"]) for step in steps)),
        "tree2mat.n_features": str(pipelines.n_features(pipeline)),
        "tree2mat.raw": "0",
        "tree2mat.exact": str(int(all(FORMS[f].exact for f in forms))),
        **{key: value for step in steps for key, value in step.items() if key in ("tree2mat.auto", "tree2mat.matmul", "tree2mat.temperature")},
        # verify checks the routing of the last step (it has scikit-learn's rows for it)
        **({key: steps[-1][key] for key in ("tree2mat.leaf_tensor", "tree2mat.exit_layout") if key in steps[-1]} if len(steps) == 1 else {}),
        # verify runs the steps' small batches' walks (traverse) on every row too
        **{key: ",".join(step[key] for step in steps if "tree2mat.walk_rows_tensor" in step)
           for key in ("tree2mat.walk_rows_tensor", "tree2mat.walk_rows", "tree2mat.walk_rows_max")
           if any("tree2mat.walk_rows_tensor" in step for step in steps)},
        # verify's tolerance: the tree steps' arithmetic (float32 if any step computes in it)
        "tree2mat.arithmetic": min((step.get("tree2mat.arithmetic", "float64") for step in steps), key=lambda a: a != "float32"),
    })
    return _checked(model, step)


def _checked(model: onnx.ModelProto, step: Callable[[str], None]) -> onnx.ModelProto:
    """``model`` after onnx's full check (a graph too large for an in-memory check is checked
    by :func:`save`, from the file)."""
    if not needs_external_data(model):
        step("checking the graph")
        onnx.checker.check_model(model, full_check=True)
    return model


def _stamp(model: onnx.ModelProto, meta: dict[str, str]) -> None:
    for key in sorted(meta):
        entry = model.metadata_props.add()
        entry.key, entry.value = key, meta[key]


def save(model: onnx.ModelProto, path: str | Path) -> int:
    """Write ``model`` atomically (temporary file in the target folder, then rename); an existing
    file is replaced only on success. Returns the number of bytes written.

    A graph over the protobuf limit (:func:`needs_external_data`) is written as ONNX external
    data: ``path`` holds the graph, ``<name>.<digest>.data`` beside it its constants (keep them
    together; onnxruntime and ``onnx.load`` find the data by that name, see
    :func:`external_data_file`). The written graph is checked with ``onnx.checker`` (full check)
    before it replaces anything; a data file the replaced graph used is deleted afterwards.

    >>> import os, tempfile
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> onx = convert(DecisionTreeClassifier(max_depth=3, random_state=0).fit(X, y))
    >>> path = os.path.join(tempfile.mkdtemp(), "model.onnx")
    >>> save(onx, path) == os.path.getsize(path)
    True
    """
    target = writable_target(path)
    old = _own_data_files(target)
    if not needs_external_data(model):
        written = atomic_write(path, model.SerializeToString())
        keep = None
    else:
        keep = f"{target.name}.{_digest(model)}.data"
        written = atomic_write_files(path, lambda tmp: write_external(model, tmp, keep), (keep,))
    for name in old - {keep}:
        target.with_name(name).unlink(missing_ok=True)
    return written


def external_data_file(path: str | Path) -> Path | None:
    """The data file a graph written by :func:`save` keeps its constants in, or None."""
    names = _own_data_files(Path(path))
    return Path(path).with_name(sorted(names)[0]) if names else None


def _own_data_files(path: Path) -> set[str]:
    """Names of the data files the graph at ``path`` refers to that :func:`save` could have made
    (``<name>.<hex>.data`` in the same folder); empty when ``path`` is no readable graph."""
    if not path.is_file():
        return set()
    try:
        graph = onnx.load(str(path), load_external_data=False)
    except Exception:  # not an ONNX file (or not ours): nothing of ours to clean up
        return set()
    pattern = re.compile(re.escape(path.name) + r"\.[0-9a-f]{16}\.data")
    names = set()
    for tensor in graph.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location" and pattern.fullmatch(entry.value):
                names.add(entry.value)
    return names


def _digest(model: onnx.ModelProto) -> str:
    """A short digest of the constants: the same model always gets the same data file name."""
    h = hashlib.sha256()
    for tensor in model.graph.initializer:
        h.update(tensor.name.encode())
        h.update(tensor.raw_data)
    return h.hexdigest()[:16]


def write_external(model: onnx.ModelProto, path: Path, data_name: str) -> None:
    """Write ``model`` to ``path`` with its constants of EXTERNAL_MIN_BYTES or more in
    ``data_name`` beside it, then check the file. ``model`` is not modified: the graph file is a
    new message that shares everything but the constants' bytes."""
    light = onnx.ModelProto()
    _copy_fields(model, light, skip="graph")
    _copy_fields(model.graph, light.graph, skip="initializer")
    offset = 0
    with open(path.with_name(data_name), "wb") as data:
        for tensor in model.graph.initializer:
            if len(tensor.raw_data) < EXTERNAL_MIN_BYTES:
                light.graph.initializer.append(tensor)
                continue
            out = light.graph.initializer.add()
            out.name, out.data_type = tensor.name, tensor.data_type
            out.dims.extend(tensor.dims)
            out.data_location = onnx.TensorProto.EXTERNAL
            pad = -offset % EXTERNAL_ALIGN
            data.write(b"\0" * pad)
            offset += pad
            for key, value in (("location", data_name), ("offset", str(offset)), ("length", str(len(tensor.raw_data)))):
                entry = out.external_data.add()
                entry.key, entry.value = key, value
            data.write(tensor.raw_data)
            offset += len(tensor.raw_data)
    path.write_bytes(light.SerializeToString())
    onnx.checker.check_model(str(path), full_check=True)


def _copy_fields(src, dst, skip: str) -> None:
    """Copy every set field of protobuf message ``src`` into ``dst`` but ``skip``."""
    for field, value in src.ListFields():
        if field.name == skip:
            continue
        if hasattr(value, "extend"):  # repeated
            getattr(dst, field.name).extend(value)
        elif hasattr(value, "CopyFrom"):  # message
            getattr(dst, field.name).CopyFrom(value)
        else:
            setattr(dst, field.name, value)

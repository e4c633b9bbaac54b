"""ONNX files: :func:`save` (atomic, with the constants in a side file past protobuf's 2 GiB
limit) and the external data's layout that the runtimes read back."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import onnx

from tree2mat._files import NAME_MAX, atomic_write, atomic_write_files, writable_target
from tree2mat.errors import OptionError

#: A graph whose constants pass this many bytes cannot be one protobuf message (2 GiB limit): it
#: is written with its constants in a side file (ONNX external data, ``<file>.<digest>.data``).
EXTERNAL_DATA_BYTES = 2**31 - 2**26
#: Constants smaller than this stay in the graph file.
EXTERNAL_MIN_BYTES = 1024
#: Offsets of tensors in the data file are multiples of this (memory-mappable).
EXTERNAL_ALIGN = 4096


def needs_external_data(model: onnx.ModelProto) -> bool:
    return sum(len(t.raw_data) for t in model.graph.initializer) > EXTERNAL_DATA_BYTES


def save(model: onnx.ModelProto, path: str | Path) -> int:
    """Write ``model`` atomically (temporary file in the target folder, then rename); an existing
    file is replaced only on success. Returns the number of bytes written.

    A graph over the protobuf limit (:func:`needs_external_data`) is written as ONNX external
    data: ``path`` holds the graph, ``<name>.<digest>.data`` beside it its constants (keep them
    together; onnxruntime and ``onnx.load`` find the data by that name, see
    :func:`external_data_file`). The written graph is checked with ``onnx.checker`` (full check)
    before it replaces anything; a data file the replaced graph used is deleted afterwards.

    >>> import os, tempfile, tree2mat
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> onx = tree2mat.convert(DecisionTreeClassifier(max_depth=3, random_state=0).fit(X, y))
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
        if len(os.fsencode(keep)) > NAME_MAX:
            raise OptionError(
                f"{path}: a graph over 2 GiB keeps its constants in {keep!r} beside it, a name over the file system's "
                f"{NAME_MAX} bytes: give the graph a name of at most {NAME_MAX - len(os.fsencode(keep)) + len(os.fsencode(target.name))} bytes"
            )
        written = atomic_write_files(path, lambda tmp: write_external(model, tmp, keep), (keep,))
    for name in old - {keep}:
        target.with_name(name).unlink(missing_ok=True)
    return written


def external_data_file(path: str | Path) -> Path | None:
    """The data file a graph written by :func:`save` keeps its constants in, or None."""
    names = _own_data_files(Path(path))
    return Path(path).with_name(sorted(names)[0]) if names else None


def data_files(path: str | Path) -> list[Path]:
    """Every file the graph at ``path`` keeps constants in (ONNX external data, whoever wrote
    it), beside it; empty when ``path`` is no readable graph."""
    path = Path(path)
    return [path.parent / name for name in sorted(_locations(path))]


def _locations(path: Path) -> set[str]:
    """The external data locations the graph at ``path`` names (empty: none, or no graph)."""
    if not path.is_file():
        return set()
    try:
        graph = onnx.load(str(path), load_external_data=False)
    except Exception:  # not an ONNX file: it names no data files
        return set()
    return {entry.value for tensor in graph.graph.initializer for entry in tensor.external_data if entry.key == "location"}


def _own_data_files(path: Path) -> set[str]:
    """Names of the data files the graph at ``path`` refers to that :func:`save` could have made
    (``<name>.<hex>.data`` in the same folder); empty when ``path`` is no readable graph."""
    pattern = re.compile(re.escape(path.name) + r"\.[0-9a-f]{16}\.data")
    return {name for name in _locations(path) if pattern.fullmatch(name)}


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

"""Traverse's walks: a graph that walks small batches another way (its ``If`` s) copied once
per walk, each forced to walk every batch that way (:func:`walks`, :func:`forced_walk`), so that
verify checks every row through every walk."""

from __future__ import annotations

import numpy as np
import onnx

from tree2mat.verify.runners import _metadata


def walks(model: onnx.ModelProto, chunk: int) -> tuple[list[tuple[str, onnx.ModelProto, int]], str | None]:
    """(walk, graph, rows per run): ``model`` run in chunks of ``chunk`` rows (walk "");
    where it walks small batches another way (traverse's ``If``, see
    :class:`tree2mat.forms._walk.Walks`; ``tree2mat.walk_rows*`` in the metadata, one entry
    per tree step of a pipeline), two copies instead, each walking every batch one way (the
    constants the ``If`` compares the rows with set past any batch, or below), and a third
    where it walks the fewest rows a third way (``tree2mat.walk_few*``): every row checked every
    way. And a note where the walks cannot be forced (a graph rewritten since tree2mat wrote
    it): then ``model`` as it is, each row through the walk its chunk takes."""
    meta = _metadata(model)
    names = walk_limit_names(model, "tree2mat.walk_rows")
    if not names:
        return [("", model, chunk)], None
    few_names = walk_limit_names(model, "tree2mat.walk_few")
    try:
        rows, most = _walk_limits(model, meta, "tree2mat.walk_rows", names)
        few_rows, few_most = _walk_limits(model, meta, "tree2mat.walk_few", few_names) if few_names else ([], [])
    except (KeyError, ValueError) as exc:
        note = (f"the graph's walks could not be forced ({exc}): each row was checked through the walk its batch of "
                f"{chunk} rows takes")
        return [("", model, chunk)], note
    few = min(rows)
    out = [(f">{few} rows", forced_walk(model, -1), chunk), (f"<={few} rows", forced_walk(model, 2**62), max(1, min(chunk, *most)))]
    if few_names:
        out.append((f"<={min(few_rows)} rows", forced_walk(model, dict.fromkeys(few_names, 2**62)), max(1, min(chunk, *few_most))))
    return out, None


def _walk_limits(model: onnx.ModelProto, meta: dict[str, str], key: str, names: list[str]) -> tuple[list[int], list[int]]:
    """The rows each of the ``If`` limits ``names`` holds and the most rows its walk takes
    (``key`` and ``key_max`` in the metadata), checked against the graph's constants."""
    inits = {t.name: t for t in model.graph.initializer}
    rows = [int(v) for v in meta[key].split(",")]
    most = [int(v) for v in meta[f"{key}_max"].split(",")]
    if len(rows) != len(names) or len(most) != len(names):
        raise ValueError("not one value per walk")
    for name, value in zip(names, rows):
        if name not in inits:
            raise ValueError(f"no initializer {name!r}")
        if onnx.numpy_helper.to_array(inits[name]).tolist() != [value]:
            raise ValueError(f"{name!r} is not [{value}]")
    return rows, most


def walk_limit_names(model: onnx.ModelProto, walk: str) -> list[str]:
    """The constants the ``If``s of ``walk`` (``tree2mat.walk_rows``: the flat walk's;
    ``tree2mat.walk_few``: the decided walk's) compare a batch's rows with, one per tree step
    (``walk``'s ``_tensor`` metadata); none where the graph has no such walk."""
    return [n for n in _metadata(model).get(f"{walk}_tensor", "").split(",") if n]


def forced_walk(model: onnx.ModelProto, limits: dict[str, int] | int) -> onnx.ModelProto:
    """A copy of ``model`` whose walks' ``If`` limits are ``limits`` (name -> rows: -1 never
    takes that ``If``'s walk for fewer rows, 2**62 always); an int: every limit of
    ``tree2mat.walk_rows_tensor`` set to it, and the decided walk's (``tree2mat.walk_few_tensor``)
    to -1, so that every batch takes the flat walk (2**62) or the wide one (-1)."""
    if isinstance(limits, int):
        limits = {**dict.fromkeys(walk_limit_names(model, "tree2mat.walk_few"), -1),
                  **dict.fromkeys(walk_limit_names(model, "tree2mat.walk_rows"), limits)}
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for tensor in out.graph.initializer:
        if tensor.name in limits:
            tensor.CopyFrom(onnx.numpy_helper.from_array(np.asarray([limits[tensor.name]], np.int64), tensor.name))
    return out

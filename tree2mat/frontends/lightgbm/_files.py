"""The LightGBM model text file: recognized by its first line, read without lightgbm, and
loaded by LightGBM's own Booster for ``verify``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tree2mat.errors import ModelFileError
from tree2mat.frontends._spec import FileFormat
from tree2mat.frontends.lightgbm._ensemble import from_text
from tree2mat.frontends.loading import MALFORMED, read_head
from tree2mat.ir.core import Ensemble
from tree2mat.ir.limits import Declared, declare


def is_model_text(head: bytes) -> bool:
    """Whether a file's first bytes open a LightGBM model text: its first line is the booster's
    name, ``tree`` (or ``gbdt`` in early texts such as LightGBM's 2016 examples); LightGBM ends
    a line at CR or LF."""
    return re.split(rb"[\r\n]", head, maxsplit=1)[0].strip() in (b"tree", b"gbdt")


def load_text(path: Path) -> Ensemble:
    """The IR of a LightGBM model text file, read without lightgbm (its first line and its size
    checked first: anything else, however large, is refused unread)."""
    if not is_model_text(read_head(path)):
        raise ModelFileError(f"{path}: not a LightGBM model text (its first line is not 'tree')")
    declare(Declared(text_bytes=path.stat().st_size), str(path))
    try:
        data = path.read_bytes()  # as LightGBM reads it: tree_sizes count bytes, line ends included
    except OSError as exc:
        raise ModelFileError(f"{path}: not a readable LightGBM model text: {exc}") from exc
    try:
        return from_text(data, str(path))
    except MALFORMED as exc:
        raise ModelFileError(f"{path}: ill-formed LightGBM model text: {type(exc).__name__}: {exc}") from exc


TEXT = FileFormat("LightGBM model text", (".txt",), sniff=is_model_text, load=load_text)


def native_model(path: Path, ens: Ensemble) -> Any:
    """LightGBM's own Booster of a model text (None without lightgbm, or for another file: an
    IR document naming LightGBM as its source)."""
    if not (ens.source.startswith("lightgbm") and is_model_text(read_head(path))):
        return None
    try:
        import lightgbm
    except ImportError:
        return None
    try:
        return lightgbm.Booster(model_file=str(path))
    except lightgbm.basic.LightGBMError as exc:  # tree2mat read it, LightGBM cannot: refuse
        raise ModelFileError(f"{path}: LightGBM itself cannot load this model text: {exc}") from exc
    except ValueError:  # its Python package cannot parse the parameters section (below)
        pass
    try:
        return lightgbm.Booster(model_str=_escaped_parameters(path.read_bytes()).decode("utf-8", "replace"))
    except (ValueError, lightgbm.basic.LightGBMError) as exc:
        raise ModelFileError(f"{path}: LightGBM's Python package cannot load this model text: {type(exc).__name__}: {exc}") from exc


def _escaped_parameters(text: bytes) -> bytes:
    """A model text with the backslashes of its ``parameters:`` section doubled. LightGBM (4.7)
    writes a Windows path there as it is (``[data: ..\\tests\\train.csv]``) and its Python
    package then fails to read the parameters as JSON ("Invalid \\escape"; LightGBM issue 6349),
    although its C++ loader reads the model; the parameters play no part in prediction, and
    nothing else in the text changes."""
    head, sep, rest = text.partition(b"\nparameters:\n")
    params, end, tail = rest.partition(b"\nend of parameters")
    return head + sep + params.replace(b"\\", b"\\\\") + end + tail if sep and end else text

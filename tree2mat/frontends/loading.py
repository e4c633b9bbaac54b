"""Reading model files. Pickles run code: load only files you trust (unless safe mode is on or
off by choice, loading one warns first). A ``.skops`` file is built only from the types
:mod:`tree2mat.frontends._skops` allows, checked on its schema first, in every mode.

Safe mode (:func:`safe_loading`, the CLI's ``--safe``, or ``TREE2MAT_SAFE=1`` in the
environment) refuses pickles outright and reads only formats that cannot run code: XGBoost
``.json``/``.ubj``, LightGBM model text, CatBoost JSON, tree2mat IR ``.json`` (all parsed by
tree2mat itself), ``.skops`` and a tree's matrices ``.npz`` (arrays only, never objects)."""

from __future__ import annotations

import json
import os
import warnings
import zipfile
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tree2mat.errors import ModelFileError, OptionError, PickleWarning, is_missing, missing, require
from tree2mat.frontends import _skops
from tree2mat.frontends._spec import HEAD_BYTES, FileFormat
from tree2mat.frontends._ubjson import decode
from tree2mat.ir.core import Ensemble
from tree2mat.ir.from_matrices import ensemble_from_matrices
from tree2mat.ir.io import ensemble_from_dict, is_ir_document
from tree2mat.ir.limits import Declared, declare

PICKLE_SUFFIXES = (".pkl", ".pickle", ".joblib")
#: The suffixes read here whatever the frontends: pickles, .skops, tree2mat's IR (.json) and a
#: tree's matrices (.npz, as ``inspect --tree K --format npz`` writes them).
SUFFIXES = PICKLE_SUFFIXES + (".skops", ".json", ".npz")

#: The environment variable that turns safe mode on for every call in the process (1 or 0).
SAFE_ENV = "TREE2MAT_SAFE"
_SAFE: ContextVar[bool | None] = ContextVar("tree2mat_safe", default=None)


@contextmanager
def safe_loading(on: bool = True) -> Iterator[None]:
    """Within the block, model files are loaded in safe mode (``on``) or not, whatever
    ``TREE2MAT_SAFE`` says. Safe mode refuses pickles before opening them.

    >>> import joblib, os, tempfile, tree2mat
    >>> path = os.path.join(tempfile.mkdtemp(), "model.joblib")
    >>> _ = joblib.dump({"any": "object"}, path)
    >>> with tree2mat.safe_loading():
    ...     tree2mat.load(path)
    Traceback (most recent call last):
    ...
    tree2mat.errors.ModelFileError: ...model.joblib: safe mode refuses pickle files (loading one can run any code); ...
    """
    token = _SAFE.set(on)
    try:
        yield
    finally:
        _SAFE.reset(token)


def safe_mode() -> bool:
    """Whether pickles are refused: :func:`safe_loading`'s setting, else ``TREE2MAT_SAFE``."""
    return bool(_safe_setting())


def _safe_setting() -> bool | None:
    """Safe mode as chosen: :func:`safe_loading`'s setting, else ``TREE2MAT_SAFE``'s; None when
    neither is set (pickles load, with a warning)."""
    on = _SAFE.get()
    if on is not None:
        return on
    raw = os.environ.get(SAFE_ENV, "").strip().lower()
    if raw == "":
        return None
    if raw in ("0", "false", "no", "off"):
        return False
    if raw in ("1", "true", "yes", "on"):
        return True
    raise OptionError(f"{SAFE_ENV}={raw!r}: set it to 1 (refuse pickles) or 0 (load them)")


def _check_file(path: Path) -> None:
    if not path.exists():
        raise ModelFileError(f"{path}: no such file")
    if not path.is_file():
        raise ModelFileError(f"{path}: not a regular file")


def load_file(path: str | Path, formats: Sequence[FileFormat]) -> Any:
    """The model object (or an ``Ensemble``, for tree2mat IR JSON and a tree's matrices) stored
    in ``path``: a pickle, a ``.skops`` file, tree2mat IR, a ``.npz`` of a tree's matrices, or one
    of the frontends' native ``formats``, by its name or, under another name, by its first bytes."""
    path = Path(path)
    safe_mode()  # (a bad TREE2MAT_SAFE is an error whatever the file)
    _check_file(path)
    suffix = path.suffix.lower()
    if suffix in PICKLE_SUFFIXES:
        return _load_pickle(path)
    if suffix == ".skops":
        return _load_skops(path)
    if suffix == ".npz":
        return _load_matrices(path)
    if suffix == ".onnx":
        raise ModelFileError(f"{path}: this is an ONNX file; pass the original model file")
    documents = [f for f in formats if f.document is not None]
    if suffix == ".json" or any(suffix in f.suffixes for f in documents):
        return _load_document(path, [f for f in documents if suffix in f.suffixes], ir=suffix == ".json")
    for fmt in formats:
        if suffix in fmt.suffixes and fmt.load is not None:
            return fmt.load(path)
    # Another name (LightGBM text as .model, XGBoost JSON as .bin, ...): what the bytes say
    kind = file_kind(path, formats)
    if isinstance(kind, FileFormat) and kind.load is not None:
        return kind.load(path)
    if kind == PICKLE:
        return _load_pickle(path)
    if kind in (JSON, UBJSON):
        return _load_document(path, documents, ir=kind == JSON)
    known = [*SUFFIXES, *sorted({x for f in formats for x in f.suffixes} - set(SUFFIXES))]
    raise ModelFileError(
        f"{path}: unknown model file type {suffix or '(no extension)'!r}, and its contents are none of the "
        f"formats tree2mat reads; supported: {', '.join(known)} (or those contents under any name)"
    )


#: What :func:`file_kind` tells apart by a file's first bytes, besides the frontends' formats.
JSON, UBJSON, PICKLE = "JSON", "UBJSON", "pickle"


def file_kind(path: Path, formats: Sequence[FileFormat] = ()) -> FileFormat | str | None:
    """The format of ``path`` by its first bytes, whatever its name: the first of ``formats``
    whose ``sniff`` recognises them, else JSON or UBJSON (an object: ``{`` then a key, in text
    or in UBJSON's typed form) or a pickle (protocol 2 on); None if none of those."""
    head = read_head(path)
    for fmt in formats:
        if fmt.sniff is not None and fmt.sniff(head):
            return fmt
    head = head[:64]
    if len(head) > 1 and head[0] == 0x80 and 2 <= head[1] <= 5:
        return PICKLE
    body = head.lstrip()
    if body[:1] == b"{":
        after = body[1:].lstrip()
        if after[:1] in (b'"', b"}"):
            return JSON
        if head[1:2] in (b"i", b"U", b"I", b"l", b"L", b"$", b"#", b"}"):
            return UBJSON
    return None


def read_head(path: Path) -> bytes:
    """The first HEAD_BYTES bytes of ``path`` (what formats are recognised by)."""
    try:
        with open(path, "rb") as f:
            return f.read(HEAD_BYTES)
    except OSError as exc:
        raise ModelFileError(f"{path}: cannot read: {exc}") from exc


def _load_pickle(path: Path) -> Any:
    """A pickle (or joblib) file; refused in safe mode before it is opened."""
    if safe_mode():
        raise ModelFileError(
            f"{path}: safe mode refuses pickle files (loading one can run any code); save the model "
            "as .skops, an XGBoost .json/.ubj or a LightGBM model .txt, or leave out --safe / "
            f"{SAFE_ENV} for files you trust"
        )
    import joblib

    if _safe_setting() is None:  # (TREE2MAT_SAFE=0 or safe_loading(False): the user chose to load pickles)
        warnings.warn(PickleWarning(
            f"{path} is a pickle: loading it (joblib.load) runs whatever code the file names; load only files you trust, "
            f"or refuse pickles with --safe ({SAFE_ENV}=1) and save models as .skops or the library's own format "
            f"({SAFE_ENV}=0 loads pickles without this warning)"
        ), stacklevel=2)
    try:
        return joblib.load(path)
    except ModuleNotFoundError as exc:
        if (module := is_missing(exc)) is not None:  # a library's model: the extra installs it
            raise missing(f"{path}: the pickle", module) from exc
        raise ModelFileError(
            f"{path}: the pickle needs the module {exc.name!r}, which is not installed"
        ) from exc
    except Exception as exc:  # unpickling raises anything at all on a broken file
        detail = f": {exc}" if str(exc) else " (truncated or not a pickle)"
        raise ModelFileError(f"{path}: cannot unpickle: {type(exc).__name__}{detail}") from exc


def _load_skops(path: Path) -> Any:
    """A ``.skops`` file, read once and built only once every node of it passed tree2mat's
    checks (:mod:`tree2mat.frontends._skops`), whatever skops itself trusts."""
    data = _skops.read(path)
    _skops.audit(data, str(path))  # (its schema alone, before skops reads anything)
    sio = require("skops.io", f"{path}: reading .skops files")
    try:
        untrusted = sio.get_untrusted_types(data=data)
    except Exception as exc:
        raise ModelFileError(f"{path}: not a readable .skops file: {exc}") from exc
    trusted = _skops.confirmed(str(path), untrusted)
    try:
        return sio.loads(data, trusted=trusted)
    except Exception as exc:
        raise ModelFileError(f"{path}: cannot load .skops file: {type(exc).__name__}: {exc}") from exc


def _load_matrices(path: Path) -> Ensemble:
    """A tree's matrices, ``.npz`` (:mod:`tree2mat.ir.from_matrices`): arrays only, never pickled
    objects, their sizes as each array's header declares them checked (:func:`declare`) before
    any is read."""
    try:
        with zipfile.ZipFile(path) as z:
            stored = sum(_array_bytes(z, member) for member in z.namelist())
        declare(Declared(stored_bytes=stored), str(path))
        with np.load(path, allow_pickle=False) as npz:
            arrays = {key: npz[key] for key in npz.files}
    except (OSError, EOFError, ValueError, NotImplementedError, zipfile.BadZipFile, zlib.error) as exc:
        raise ModelFileError(f"{path}: not a readable .npz of a tree's matrices (tree2mat inspect --format npz): {exc}") from exc
    return ensemble_from_matrices(arrays, str(path))


def _array_bytes(z: zipfile.ZipFile, member: str) -> int:
    """The bytes the array ``member`` of an ``.npz`` declares in its header (an object array: refused)."""
    fmt = np.lib.format
    with z.open(member) as fh:
        version = fmt.read_magic(fh)
        header = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        shape, _, dtype = header(fh)
    if dtype.hasobject:
        raise ValueError(f"{member} holds Python objects")
    return int(np.prod(shape, dtype=object)) * dtype.itemsize


def read_document(path: Path) -> Any:
    """The document of a JSON or UBJSON file (``.ubj``, or UBJSON by its contents). Its first
    byte must open an object or an array, and its size is declared
    (:func:`tree2mat.ir.limits.declare`), before it is read: a file of anything else, however
    large, is refused unread."""
    head = read_head(path)
    if head.lstrip()[:1] not in (b"{", b"["):  # (a document's first byte opens an object or an array, in either)
        raise ModelFileError(f"{path}: not a JSON or UBJSON model document (it begins {head[:16]!r})" if head else f"{path}: an empty file")
    declare(Declared(text_bytes=path.stat().st_size), str(path))
    if path.suffix.lower() == ".ubj" or file_kind(path) == UBJSON:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ModelFileError(f"{path}: cannot read: {exc}") from exc
        return decode(data, str(path))
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:  # ValueError: also huge integers
        raise ModelFileError(f"{path}: not valid JSON: {exc}") from exc
    except RecursionError as exc:
        raise ModelFileError(f"{path}: not valid JSON: nested too deeply") from exc


def _load_document(path: Path, formats: Sequence[FileFormat], ir: bool) -> Any:
    """The model of a JSON / UBJSON document: tree2mat IR (``ir``), else the first of the
    document ``formats`` that takes it."""
    doc = read_document(path)
    if ir and is_ir_document(doc):
        return ensemble_from_dict(doc, name=str(path))
    if isinstance(doc, dict) and ATTENTION_KEY in doc:
        return AttentionDocument(doc, str(path))
    for fmt in formats:
        assert fmt.document is not None
        model = fmt.document(doc, str(path))
        if model is not None:
            return model
    named = [f for f in formats if f.expects]
    what = " nor ".join(f.expects for f in named)
    keys = " or ".join(f"'{f.key}'" for f in named if f.key)
    if ir:
        raise ModelFileError(f"{path}: neither a tree2mat IR document nor {what} (no 'tree2mat_ir' or {keys} key)" if what
                             else f"{path}: not a tree2mat IR document (no 'tree2mat_ir' key)")
    raise ModelFileError(f"{path}: not {what} (no {keys} key)" if what else f"{path}: not a model document tree2mat reads")


#: The key of an attention forest's document (tree2mat.attention, which reads it).
ATTENTION_KEY = "tree2mat_attention"


@dataclass(frozen=True)
class AttentionDocument:
    """An attention-based forest's file, as read (:mod:`tree2mat.attention` makes the model of
    it: ``convert`` and ``verify`` take it; every other use refuses it by name)."""

    doc: dict
    name: str


#: What a reader may raise on a document (or a fitted object's attributes) of the wrong shape that
#: no check of its own caught: a malformed input, not tree2mat's own failure (make fuzz hunts
#: these down one by one).
MALFORMED = (TypeError, ValueError, KeyError, IndexError, AttributeError, OverflowError)

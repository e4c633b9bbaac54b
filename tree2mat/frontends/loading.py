"""Reading model files. Pickles run code: load only files you trust (``.skops`` does not).

Safe mode (:func:`safe_loading`, the CLI's ``--safe``, or ``TREE2MAT_SAFE=1`` in the
environment) refuses pickles outright and reads only formats that cannot run code: XGBoost
``.json``/``.ubj``, LightGBM model text, tree2mat IR ``.json`` (all parsed by tree2mat itself) and
``.skops`` (scikit-learn and numpy types only)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from tree2mat.errors import ModelFileError, OptionError, UnsupportedModelError
from tree2mat.frontends._ubjson import decode
from tree2mat.frontends.lightgbm import from_text
from tree2mat.frontends.xgboost import from_document
from tree2mat.ir.io import ensemble_from_dict, is_ir_document

PICKLE_SUFFIXES = (".pkl", ".pickle", ".joblib")
SUFFIXES = PICKLE_SUFFIXES + (".skops", ".json", ".txt", ".ubj")

#: Types a ``.skops`` file may hold: scikit-learn's and numpy's own, plus ``functools.partial``
#: (HistGradientBoosting keeps one around ``check_array``); anything else is refused by name.
SKOPS_TRUSTED_PREFIXES = ("sklearn.", "numpy.")
SKOPS_TRUSTED_NAMES = ("functools.partial",)


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
    on = _SAFE.get()
    if on is not None:
        return on
    raw = os.environ.get(SAFE_ENV, "").strip().lower()
    if raw in ("", "0", "false", "no", "off"):
        return False
    if raw in ("1", "true", "yes", "on"):
        return True
    raise OptionError(f"{SAFE_ENV}={raw!r}: set it to 1 (refuse pickles) or 0")


def _check_file(path: Path) -> None:
    if not path.exists():
        raise ModelFileError(f"{path}: no such file")
    if not path.is_file():
        raise ModelFileError(f"{path}: not a regular file")


def load_file(path: str | Path) -> Any:
    """The model object (or an ``Ensemble``, for tree2mat IR JSON) stored in ``path``."""
    path = Path(path)
    _check_file(path)
    suffix = path.suffix.lower()
    if suffix in PICKLE_SUFFIXES:
        return _load_pickle(path)
    if suffix == ".skops":
        return _load_skops(path)
    if suffix == ".json":
        return _load_json(path)
    if suffix == ".txt":
        return _load_lightgbm_text(path)
    if suffix == ".ubj":
        return _load_xgboost(path)
    if suffix == ".onnx":
        raise ModelFileError(f"{path}: this is an ONNX file; pass the original model file")
    # Another name (LightGBM text as .model, XGBoost JSON as .bin, ...): what the bytes say
    kind = file_kind(path)
    if kind == LEGACY_XGBOOST:
        raise UnsupportedModelError(
            f"{path}: this is XGBoost's legacy binary model format (deprecated in XGBoost 1.6; XGBoost 3.1 and later "
            "no longer read it either), which tree2mat does not read; load it with xgboost 3.0 or older and "
            "save_model('model.json'), then convert model.json"
        )
    loaders = {LIGHTGBM_TEXT: _load_lightgbm_text, JSON: _load_json, UBJSON: _load_xgboost, PICKLE: _load_pickle}
    if kind in loaders:
        return loaders[kind](path)
    raise ModelFileError(
        f"{path}: unknown model file type {suffix or '(no extension)'!r}, and its contents are none of the "
        f"formats tree2mat reads; supported: {', '.join(SUFFIXES)} (or those contents under any name)"
    )


#: What :func:`file_kind` tells apart by a file's first bytes.
LIGHTGBM_TEXT, JSON, UBJSON, PICKLE, LEGACY_XGBOOST = "LightGBM model text", "JSON", "UBJSON", "pickle", "legacy XGBoost binary"


def file_kind(path: Path) -> str | None:
    """The format of ``path`` by its first bytes, whatever its name: LightGBM model text (its
    first line the booster's name: ``tree``, or ``gbdt`` in early texts such as LightGBM's 2016
    examples), JSON or XGBoost's UBJSON (an object: ``{`` then a key, in text or in UBJSON's
    typed form), a pickle (protocol 2 on), XGBoost's legacy binary (``binf``, the magic older
    XGBoost writes); None if none of those."""
    try:
        with open(path, "rb") as f:
            head = f.read(_LEGACY_HEAD)
    except OSError as exc:
        raise ModelFileError(f"{path}: cannot read: {exc}") from exc
    first = re.split(rb"[\r\n]", head, maxsplit=1)[0].strip()  # (LightGBM ends a line at CR or LF)
    if first in (b"tree", b"gbdt"):
        return LIGHTGBM_TEXT
    # (XGBoost4J-Spark writes 4 bytes, the class count, before the booster's own bytes)
    if any(head[at:].startswith(b"binf") or _legacy_xgboost(head[at:]) for at in (0, 4)):
        return LEGACY_XGBOOST
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


#: Bytes read to recognise XGBoost's legacy binary: its 136-byte LearnerModelParam, then the
#: objective's and the booster's names, each after a uint64 length.
_LEGACY_HEAD = 4 + 136 + 8 + 64 + 8 + 8


def _legacy_xgboost(head: bytes) -> bool:
    """Whether ``head`` opens an XGBoost legacy binary model without the ``binf`` magic (as
    XGBoost 0.90 to 1.0 wrote it): the learner's parameters (136 bytes), then the objective's
    name (e.g. ``reg:squarederror``) and the booster's (``gbtree``, ``gblinear`` or ``dart``),
    each after a uint64 length."""
    at = 136
    if len(head) < at + 8:
        return False
    n = int.from_bytes(head[at : at + 8], "little")
    objective = head[at + 8 : at + 8 + n]
    if not 0 < n <= 64 or b":" not in objective or not objective.isascii():
        return False
    at += 8 + n
    m = int.from_bytes(head[at : at + 8], "little")
    return head[at + 8 : at + 8 + m] in (b"gbtree", b"gblinear", b"dart")


def _load_pickle(path: Path) -> Any:
    """A pickle (or joblib) file; refused in safe mode before it is opened."""
    if safe_mode():
        raise ModelFileError(
            f"{path}: safe mode refuses pickle files (loading one can run any code); save the model "
            "as .skops, an XGBoost .json/.ubj or a LightGBM model .txt, or leave out --safe / "
            f"{SAFE_ENV} for files you trust"
        )
    import joblib

    try:
        return joblib.load(path)
    except ModuleNotFoundError as exc:
        raise ModelFileError(
            f"{path}: the pickle needs the module {exc.name!r}, which is not installed"
        ) from exc
    except Exception as exc:  # unpickling raises anything at all on a broken file
        detail = f": {exc}" if str(exc) else " (truncated or not a pickle)"
        raise ModelFileError(f"{path}: cannot unpickle: {type(exc).__name__}{detail}") from exc


def _load_skops(path: Path) -> Any:
    try:
        import skops.io as sio
    except ImportError as exc:
        raise ModelFileError(
            f"{path}: reading .skops files needs skops (pip install 'tree2mat[skops]')"
        ) from exc
    try:
        untrusted = sio.get_untrusted_types(file=path)
    except Exception as exc:
        raise ModelFileError(f"{path}: not a readable .skops file: {exc}") from exc
    refused = [
        t for t in untrusted
        if not t.startswith(SKOPS_TRUSTED_PREFIXES) and t not in SKOPS_TRUSTED_NAMES
    ]
    if refused:
        raise UnsupportedModelError(
            f"{path}: .skops file holds types tree2mat does not trust: {', '.join(refused)}"
        )
    try:
        return sio.load(path, trusted=list(untrusted))
    except Exception as exc:
        raise ModelFileError(f"{path}: cannot load .skops file: {type(exc).__name__}: {exc}") from exc


def _read_document(path: Path) -> Any:
    """The document of a JSON or XGBoost UBJSON file (``.ubj``, or UBJSON by its contents)."""
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


def xgboost_document(path: Path) -> dict:
    """An XGBoost model document from a native ``.json`` or ``.ubj`` file (xgboost not needed)."""
    doc = _read_document(path)
    if not isinstance(doc, dict) or "learner" not in doc:
        raise ModelFileError(f"{path}: not an XGBoost model (no 'learner' key)")
    return doc


def _load_json(path: Path) -> Any:
    doc = _read_document(path)
    if is_ir_document(doc):
        return ensemble_from_dict(doc, name=str(path))
    if not (isinstance(doc, dict) and "learner" in doc):
        raise ModelFileError(f"{path}: neither a tree2mat IR document nor an XGBoost model (no 'tree2mat_ir' or 'learner' key)")
    return _load_xgboost(path, doc)


#: What a reader may raise on a document (or a fitted object's attributes) of the wrong shape that
#: no check of its own caught: a malformed input, not tree2mat's own failure (make fuzz hunts
#: these down one by one).
MALFORMED = (TypeError, ValueError, KeyError, IndexError, AttributeError, OverflowError)


def _load_xgboost(path: Path, doc: dict | None = None) -> Any:
    """An XGBoost model file (UBJSON, or JSON already read as ``doc``), read without xgboost."""
    doc = xgboost_document(path) if doc is None else doc
    try:
        return from_document(doc, str(path))
    except MALFORMED as exc:
        raise ModelFileError(f"{path}: ill-formed XGBoost model: {type(exc).__name__}: {exc}") from exc


def _load_lightgbm_text(path: Path) -> Any:
    try:
        data = path.read_bytes()  # as LightGBM reads it: tree_sizes count bytes, line ends included
    except OSError as exc:
        raise ModelFileError(f"{path}: not a readable LightGBM model text: {exc}") from exc
    try:
        return from_text(data, str(path))
    except MALFORMED as exc:
        raise ModelFileError(f"{path}: ill-formed LightGBM model text: {type(exc).__name__}: {exc}") from exc

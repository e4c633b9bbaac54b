"""XGBoost's native files: the ``.json`` / ``.ubj`` model document (read without xgboost), the
legacy binary format (recognised and refused), and XGBoost's own Booster of a file for
``verify``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tree2mat.errors import ModelFileError, UnsupportedModelError
from tree2mat.frontends._spec import FileFormat
from tree2mat.frontends.loading import MALFORMED, read_document
from tree2mat.frontends.xgboost._document import from_document
from tree2mat.ir.core import Ensemble


def model_document(doc: Any, name: str) -> Ensemble | None:
    """The IR of a decoded ``.json`` / ``.ubj`` document that is an XGBoost model (None for any
    other document)."""
    if not (isinstance(doc, dict) and "learner" in doc):
        return None
    try:
        return from_document(doc, name)
    except MALFORMED as exc:
        raise ModelFileError(f"{name}: ill-formed XGBoost model: {type(exc).__name__}: {exc}") from exc


def xgboost_document(path: Path) -> dict:
    """An XGBoost model document from a native ``.json`` or ``.ubj`` file (xgboost not needed)."""
    doc = read_document(path)
    if not isinstance(doc, dict) or "learner" not in doc:
        raise ModelFileError(f"{path}: not an XGBoost model (no 'learner' key)")
    return doc


def is_legacy_binary(head: bytes) -> bool:
    """Whether a file's first bytes are XGBoost's legacy binary model: the ``binf`` magic older
    XGBoost writes, or (as XGBoost 0.90 to 1.0 wrote it) the learner's parameters (136 bytes),
    then the objective's name (e.g. ``reg:squarederror``) and the booster's (``gbtree``,
    ``gblinear`` or ``dart``), each after a uint64 length. XGBoost4J-Spark writes 4 bytes, the
    class count, before the booster's own bytes."""
    return any(head[at:].startswith(b"binf") or _legacy_layout(head[at:]) for at in (0, 4))


def _legacy_layout(head: bytes) -> bool:
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


def refuse_legacy_binary(path: Path) -> Any:
    raise UnsupportedModelError(
        f"{path}: this is XGBoost's legacy binary model format (deprecated in XGBoost 1.6; XGBoost 3.1 and later "
        "no longer read it either), which tree2mat does not read; load it with xgboost 3.0 or older and "
        "save_model('model.json'), then convert model.json"
    )


DOCUMENT = FileFormat("XGBoost model", (".json", ".ubj"), document=model_document, expects="an XGBoost model", key="learner")
LEGACY_BINARY = FileFormat("legacy XGBoost binary", sniff=is_legacy_binary, load=refuse_legacy_binary)


def native_model(path: Path, ens: Ensemble) -> Any:
    """XGBoost's own Booster of a native file (None without xgboost, or for a file XGBoost does
    not read: an IR document naming XGBoost as its source). A model file XGBoost refuses is
    refused (ModelFileError, XGBoost's reason): verify would otherwise compare the graph with
    tree2mat's own reading of a file its library does not read at all."""
    if not ens.source.startswith("xgboost"):
        return None
    try:
        import xgboost
    except ImportError:
        return None
    if any(t.n_outputs > 1 for t in ens.trees) and int(xgboost.__version__.split(".")[0]) >= 3:
        try:  # XGBoost 3 crashes (segfault) loading a 2.x file with vector leaves: read its writer first
            if _writer_major(xgboost_document(path)) < 3:
                return None
        except ModelFileError:  # not XGBoost's file (an IR naming it its source)
            return None
    try:
        data = bytearray(path.read_bytes())
    except OSError as exc:
        raise ModelFileError(f"{path}: cannot read: {exc}") from exc
    try:  # (from its bytes, XGBoost tells JSON from UBJSON by them, as tree2mat does, not by the name)
        return xgboost.Booster(model_file=data)
    except xgboost.core.XGBoostError as exc:
        try:
            xgboost_document(path)
        except ModelFileError:  # not XGBoost's file after all (an IR naming it its source)
            return None
        raise ModelFileError(f"{path}: XGBoost itself cannot load this model: {_reason(exc)}") from exc


def _reason(exc: Exception) -> str:
    """An XGBoostError's message in one line: its first, without the native stack trace, nor
    the time and source line it starts with ("[23:01:31] .../tree_model.cc:1071: Check failed:
    ...")."""
    text = str(exc).split("Stack trace:")[0].strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    return re.sub(r"^\[[\d:]+\]\s+\S+:\d+:\s*", "", first).rstrip(" :") or first


def _writer_major(document: dict) -> int:
    """The major version of the XGBoost that wrote a model document (its ``version`` field)."""
    version = document.get("version", [0])
    return int(version[0]) if isinstance(version, list) and version and isinstance(version[0], int) else 0

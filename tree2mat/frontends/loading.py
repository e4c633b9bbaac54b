"""Reading model files. Pickles run code: load only files you trust (``.skops`` does not)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tree2mat.errors import ModelFileError, UnsupportedModelError

PICKLE_SUFFIXES = (".pkl", ".pickle", ".joblib")
SUFFIXES = PICKLE_SUFFIXES + (".skops", ".json")

#: Types a ``.skops`` file may hold: scikit-learn's and numpy's own, plus ``functools.partial``
#: (HistGradientBoosting keeps one around ``check_array``); anything else is refused by name.
SKOPS_TRUSTED_PREFIXES = ("sklearn.", "numpy.")
SKOPS_TRUSTED_NAMES = ("functools.partial",)


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
    if suffix == ".ubj":
        raise ModelFileError(f"{path}: XGBoost UBJSON files are not supported yet; save the model as .json")
    if suffix == ".onnx":
        raise ModelFileError(f"{path}: this is an ONNX file; pass the original model file")
    raise ModelFileError(
        f"{path}: unknown model file type {suffix or '(no extension)'!r}; "
        f"supported: {', '.join(SUFFIXES)}"
    )


def _load_pickle(path: Path) -> Any:
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


def _load_json(path: Path) -> Any:
    from tree2mat.ir.io import ensemble_from_dict, is_ir_document

    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:  # ValueError: also huge integers
        raise ModelFileError(f"{path}: not valid JSON: {exc}") from exc
    except RecursionError as exc:
        raise ModelFileError(f"{path}: not valid JSON: nested too deeply") from exc
    if is_ir_document(doc):
        return ensemble_from_dict(doc, name=str(path))
    if isinstance(doc, dict) and "learner" in doc:
        from tree2mat.frontends.xgboost import from_document

        return from_document(doc, str(path))
    raise ModelFileError(f"{path}: neither a tree2mat IR document nor an XGBoost model (no 'tree2mat_ir' or 'learner' key)")

"""Frontends: model objects and native model files to the IR. ``FRONTENDS`` is the one registry
of them: each entry is the :class:`FrontendSpec` its module ends in (a new frontend is one
module and one entry)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tree2mat.errors import ModelFileError, Tree2MatError, UnsupportedModelError
from tree2mat.frontends import catboost, lightgbm, loading, sklearn, treeple, xgboost
from tree2mat.frontends._spec import FileFormat, FrontendSpec
from tree2mat.frontends.loading import MALFORMED
from tree2mat.ir.core import Ensemble

FRONTENDS: dict[str, FrontendSpec] = {spec.name: spec for spec in (sklearn.SPEC, xgboost.SPEC, lightgbm.SPEC, treeple.SPEC, catboost.SPEC)}


def file_formats() -> list[FileFormat]:
    """Every frontend's native file formats, in registry order."""
    return [fmt for spec in FRONTENDS.values() for fmt in spec.formats]


def load_file(path: str | Path) -> Any:
    """The model object (or an ``Ensemble``) stored in ``path``, in any format tree2mat reads."""
    return loading.load_file(path, file_formats())


def file_kind(path: str | Path) -> str | None:
    """The name of the format ``path`` holds by its first bytes (a frontend's format, JSON,
    UBJSON or pickle), or None."""
    kind = loading.file_kind(Path(path), file_formats())
    return kind.name if isinstance(kind, FileFormat) else kind


def frontend_for(model: Any) -> FrontendSpec:
    for spec in FRONTENDS.values():
        if spec.handles(model):
            return spec
    kind = f"{type(model).__module__}.{type(model).__qualname__}"
    libraries = ", ".join(spec.library for spec in FRONTENDS.values())
    raise UnsupportedModelError(f"{kind} is not a supported model (supported libraries: {libraries})")


def is_pipeline(model: Any) -> bool:
    """Whether ``model`` is a pipeline that convert and verify take whole (its frontend says)."""
    return any(spec.is_pipeline is not None and spec.is_pipeline(model) for spec in FRONTENDS.values())


def library_model(path: Any, ens: Ensemble) -> Any:
    """For a native model file already loaded as ``ens``, the library's own object to compare
    with (None when the library is not installed, or the file is tree2mat's IR)."""
    if not isinstance(path, (str, Path)):
        return None
    for spec in FRONTENDS.values():
        if spec.native_model is not None:
            model = spec.native_model(Path(path), ens)
            if model is not None:
                return model
    return None


def resolve(model_or_path: Any) -> Any:
    """A model object from an object or a file path."""
    if isinstance(model_or_path, (str, Path)):
        return load_file(model_or_path)
    return model_or_path


def load_model(model_or_path: Any) -> tuple[Any, Ensemble]:
    """The model object (see :func:`resolve`) and its validated IR; an error about a file's
    content names the file."""
    model = load_object(model_or_path)
    return model, named(model_or_path, to_ensemble, model)


def load_object(model_or_path: Any) -> Any:
    """The model object of an object or a file path; an error names the file."""
    return named(model_or_path, resolve, model_or_path)


def named(model_or_path: Any, step: Callable[[Any], Any], arg: Any) -> Any:
    """``step(arg)``, its errors naming the file when ``model_or_path`` is one."""
    if not isinstance(model_or_path, (str, Path)):
        return step(arg)
    try:
        return step(arg)
    except Tree2MatError as exc:
        if str(model_or_path) in str(exc):
            raise
        raise type(exc)(f"{model_or_path}: {exc}") from exc


def to_ensemble(model: Any) -> Ensemble:
    """The validated IR of a model object (an ``Ensemble`` passes through)."""
    if isinstance(model, Ensemble):
        return model.validate()
    if isinstance(model, loading.AttentionDocument):
        raise UnsupportedModelError(
            f"{model.name}: an attention-based forest (tree2mat attend): convert and verify take it; "
            "for anything else, use the forest it was fitted on"
        )
    spec = frontend_for(model)
    try:
        return spec.to_ensemble(model)
    except Tree2MatError:
        raise
    except MALFORMED as exc:
        # Fitted attributes that are missing or not what the library writes: a tampered file,
        # or a library version outside the supported range.
        raise ModelFileError(
            f"{spec.library} {type(model).__name__}: its fitted attributes are not as expected "
            f"({type(exc).__name__}: {exc}); supported: {spec.library} versions of "
            "pyproject.toml's range, unmodified models"
        ) from exc


__all__ = ["FRONTENDS", "FileFormat", "FrontendSpec", "file_kind", "frontend_for", "is_pipeline", "load_file", "resolve", "to_ensemble"]

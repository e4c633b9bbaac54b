"""Frontends: model objects to the IR. ``FRONTENDS`` is the one registry of them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tree2mat.errors import ModelFileError, Tree2MatError, UnsupportedModelError
from tree2mat.frontends import lightgbm as _lightgbm
from tree2mat.frontends import loading
from tree2mat.frontends import sklearn as _sklearn
from tree2mat.frontends import xgboost as _xgboost
from tree2mat.frontends._support import SupportRow
from tree2mat.frontends.loading import MALFORMED, load_file, xgboost_document
from tree2mat.ir.core import Ensemble


@dataclass(frozen=True)
class FrontendSpec:
    name: str
    library: str
    handles: Callable[[Any], bool]
    to_ensemble: Callable[[Any], Ensemble]
    reference_outputs: Callable[[Any, np.ndarray, bool, Ensemble], dict[str, np.ndarray]]
    estimators: Mapping[str, SupportRow]


FRONTENDS: dict[str, FrontendSpec] = {
    spec.name: spec
    for spec in (
        FrontendSpec(
            name="sklearn",
            library="scikit-learn",
            handles=_sklearn.handles,
            to_ensemble=_sklearn.to_ensemble,
            reference_outputs=_sklearn.reference_outputs,
            estimators=_sklearn.ESTIMATORS,
        ),
        FrontendSpec(
            name="xgboost",
            library="XGBoost",
            handles=_xgboost.handles,
            to_ensemble=_xgboost.to_ensemble,
            reference_outputs=_xgboost.reference_outputs,
            estimators=_xgboost.SUPPORT,
        ),
        FrontendSpec(
            name="lightgbm",
            library="LightGBM",
            handles=_lightgbm.handles,
            to_ensemble=_lightgbm.to_ensemble,
            reference_outputs=_lightgbm.reference_outputs,
            estimators=_lightgbm.SUPPORT,
        ),
    )
}


def frontend_for(model: Any) -> FrontendSpec:
    for spec in FRONTENDS.values():
        if spec.handles(model):
            return spec
    kind = f"{type(model).__module__}.{type(model).__qualname__}"
    libraries = ", ".join(spec.library for spec in FRONTENDS.values())
    raise UnsupportedModelError(f"{kind} is not a supported model (supported libraries: {libraries})")


def library_model(path: Any, ens: Ensemble) -> Any:
    """For a native model file already loaded as ``ens``, the library's own object to compare
    with (None when the library is not installed, or the file is tree2mat's IR)."""
    if not isinstance(path, (str, Path)):
        return None
    if ens.source.startswith("lightgbm") and loading.file_kind(Path(path)) == loading.LIGHTGBM_TEXT:
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
            return lightgbm.Booster(model_str=_escaped_parameters(Path(path).read_bytes()).decode("utf-8", "replace"))
        except (ValueError, lightgbm.basic.LightGBMError) as exc:
            raise ModelFileError(f"{path}: LightGBM's Python package cannot load this model text: {type(exc).__name__}: {exc}") from exc
    if not ens.source.startswith("xgboost"):
        return None
    try:
        import xgboost
    except ImportError:
        return None
    if any(t.n_outputs > 1 for t in ens.trees) and int(xgboost.__version__.split(".")[0]) >= 3 and _writer_major(path) < 3:
        return None  # XGBoost 3 crashes (segfault) loading a 2.x file with vector leaves
    try:
        return xgboost.Booster(model_file=str(path))
    except xgboost.core.XGBoostError:  # not XGBoost's file after all (an IR naming it its source)
        return None


def _escaped_parameters(text: bytes) -> bytes:
    """A model text with the backslashes of its ``parameters:`` section doubled. LightGBM (4.7)
    writes a Windows path there as it is (``[data: ..\\tests\\train.csv]``) and its Python
    package then fails to read the parameters as JSON ("Invalid \\escape"; LightGBM issue 6349),
    although its C++ loader reads the model; the parameters play no part in prediction, and
    nothing else in the text changes."""
    head, sep, rest = text.partition(b"\nparameters:\n")
    params, end, tail = rest.partition(b"\nend of parameters")
    return head + sep + params.replace(b"\\", b"\\\\") + end + tail if sep and end else text


def _writer_major(path: str | Path) -> int:
    """The major version of the XGBoost that wrote a native file (its ``version`` field)."""
    version = xgboost_document(Path(path)).get("version", [0])
    return int(version[0]) if isinstance(version, list) and version and isinstance(version[0], int) else 0


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


__all__ = ["FRONTENDS", "FrontendSpec", "frontend_for", "load_file", "resolve", "to_ensemble"]

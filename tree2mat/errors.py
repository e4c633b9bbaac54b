"""Typed errors. The CLI turns each into one line on stderr and its ``exit_code``."""

from __future__ import annotations

import importlib
from types import ModuleType


class Tree2MatError(Exception):
    """Base class of every error tree2mat raises on purpose."""

    exit_code = 2


class UnsupportedModelError(Tree2MatError):
    """The model (or one of its settings) cannot be converted exactly."""


class ModelFileError(Tree2MatError):
    """A model file is missing, unreadable or malformed."""


class InvalidTreeError(Tree2MatError):
    """The IR breaks one of its invariants (see ``Tree.validate``)."""


class DataError(Tree2MatError):
    """Input data is unreadable or has the wrong shape."""


class OptionError(Tree2MatError):
    """A bad option value."""


class DeviceUnavailableError(Tree2MatError):
    """The requested execution provider is not available in this onnxruntime."""


class LibraryUnavailableError(Tree2MatError):
    """The library's own predictions cannot be had (``verify --require-library``)."""


class GraphTimeoutError(Tree2MatError):
    """A runtime ran a graph past the time limit (``verify --timeout``) and was stopped."""


class MissingDependencyError(Tree2MatError):
    """An optional library that a feature needs is not installed (the message names the extra
    that installs it: :func:`require`)."""


#: The extra that installs each optional module tree2mat imports (the top-level module's name):
#: one table, so that every missing-dependency error names an extra that exists (a test holds it
#: against the built wheel's metadata).
EXTRAS = {
    "pandas": "data", "pyarrow": "data", "skops": "skops", "xgboost": "xgboost", "lightgbm": "lightgbm",
    "catboost": "catboost", "treeple": "treeple", "skl2onnx": "pipelines", "onnxmltools": "bench", "matplotlib": "plot",
    "clarabel": "attention", "openvino": "openvino", "tract": "tract", "iree": "iree",
}


def install_command(extra: str) -> str:
    """The command that adds ``extra`` to the environment tree2mat is installed in (pip takes
    the installed tree2mat's metadata for the extra's requirements: no index serves tree2mat)."""
    return f"pip install 'tree2mat[{extra}]'"


def missing(what: str, module: str, hint: str = "") -> MissingDependencyError:
    """The error for ``what`` (a feature, a file) needing ``module``, which is not installed:
    the extra that installs it and, after it, ``hint`` (another way round, if there is one)."""
    top = module.split(".")[0]
    return MissingDependencyError(f"{what} needs {top}, which is not installed: {install_command(EXTRAS[top])}" + (f"; {hint}" if hint else ""))


def is_missing(exc: BaseException) -> str | None:
    """The optional module (top-level name) whose absence ``exc`` is, or None: an import of a
    module of :data:`EXTRAS` that failed because it is not there (not one that broke inside)."""
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        top = exc.name.split(".")[0]
        return top if top in EXTRAS else None
    return None


def require(module: str, what: str, hint: str = "") -> ModuleType:
    """``module``, imported; a :class:`MissingDependencyError` naming its extra when it is
    missing. An import that fails inside the library (a broken install) says so in one line."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if is_missing(exc) == module.split(".")[0]:
            raise missing(what, module, hint) from exc
        raise MissingDependencyError(f"{what} needs {module.split('.')[0]}, which cannot be imported: {exc}") from exc
    except ImportError as exc:  # (a binary incompatible with this numpy, say)
        raise MissingDependencyError(f"{what} needs {module.split('.')[0]}, which cannot be imported: {exc}") from exc


class VerificationError(Tree2MatError):
    """The ONNX graph does not reproduce the model (or does not fit it at all)."""

    exit_code = 1


class Tree2MatWarning(UserWarning):
    """tree2mat's own warnings: the CLI prints each as one line on stderr (``tree2mat: warning:``)."""


class PickleWarning(Tree2MatWarning):
    """A pickle is about to be loaded, which runs whatever code it names (safe mode refuses
    pickles instead)."""


class TargetWarning(Tree2MatWarning):
    """``verify`` proves a graph on another runtime than the one it was built for (``--target``):
    it proves it anyway, and says so."""

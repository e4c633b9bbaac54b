"""Typed errors. The CLI turns each into one line on stderr and its ``exit_code``."""

from __future__ import annotations


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

"""tree2mat: exact ONNX graphs of standard operators from trained tree models.

The Python API: :func:`convert` (a fitted model, a model file or a scikit-learn Pipeline to an
ONNX model), :func:`save` (atomic write), :func:`verify` (run the graph in onnxruntime against
the model: a :class:`Report`), :func:`load` (the IR), :func:`register_skl2onnx` (tree2mat's
converters inside ``skl2onnx.to_onnx``), :func:`safe_loading` (refuse pickles). Errors are
:class:`Tree2MatError` subclasses (``tree2mat.errors``).

>>> import tree2mat
>>> from sklearn.datasets import load_iris
>>> from sklearn.ensemble import HistGradientBoostingClassifier
>>> X, y = load_iris(return_X_y=True)
>>> model = HistGradientBoostingClassifier(max_iter=5).fit(X, y)
>>> onx = tree2mat.convert(model, "bitvector")
>>> tree2mat.verify(model, onx).passed
True
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

from tree2mat._version import __version__

if TYPE_CHECKING:
    from tree2mat.convert import convert, load
    from tree2mat.errors import Tree2MatError
    from tree2mat.forms import FORMS
    from tree2mat.frontends import FRONTENDS
    from tree2mat.frontends.loading import safe_loading
    from tree2mat.onnx_io import save
    from tree2mat.pipelines import register_skl2onnx
    from tree2mat.verify import Report, verify

#: The public names and the modules that define them, imported on first use: ``import tree2mat``
#: itself imports nothing heavy, so the command line can take Ctrl-C before numpy and onnx load.
_PUBLIC = {
    "convert": "tree2mat.convert", "load": "tree2mat.convert", "Tree2MatError": "tree2mat.errors", "FORMS": "tree2mat.forms",
    "FRONTENDS": "tree2mat.frontends", "safe_loading": "tree2mat.frontends.loading", "save": "tree2mat.onnx_io",
    "register_skl2onnx": "tree2mat.pipelines", "Report": "tree2mat.verify", "verify": "tree2mat.verify",
}

__all__ = ["FORMS", "FRONTENDS", "Report", "Tree2MatError", "__version__", "convert", "load", "register_skl2onnx", "safe_loading", "save", "verify"]


class _Package(types.ModuleType):
    """``tree2mat``'s module type: the import system binds each imported submodule as an attribute
    of its package, which would make ``tree2mat.convert`` and ``tree2mat.verify`` the modules
    once anything imports them; here they stay the functions (:func:`__getattr__`)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _PUBLIC and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'tree2mat' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

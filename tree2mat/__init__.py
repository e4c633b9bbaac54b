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

from tree2mat._version import __version__
from tree2mat.convert import convert, load
from tree2mat.errors import Tree2MatError
from tree2mat.forms import FORMS
from tree2mat.frontends import FRONTENDS
from tree2mat.frontends.loading import safe_loading
from tree2mat.onnx_io import save
from tree2mat.pipelines import register_skl2onnx
from tree2mat.verify import Report, verify

__all__ = ["FORMS", "FRONTENDS", "Report", "Tree2MatError", "__version__", "convert", "load", "register_skl2onnx", "safe_loading", "save", "verify"]

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

__version__ = "0.1.0"

from tree2mat.convert import convert, load, save  # noqa: E402
from tree2mat.errors import Tree2MatError  # noqa: E402
from tree2mat.forms import FORMS  # noqa: E402
from tree2mat.frontends import FRONTENDS  # noqa: E402
from tree2mat.frontends.loading import safe_loading  # noqa: E402
from tree2mat.pipelines import register_skl2onnx  # noqa: E402
from tree2mat.verify import Report, verify  # noqa: E402

__all__ = ["FORMS", "FRONTENDS", "Report", "Tree2MatError", "__version__", "convert", "load", "register_skl2onnx", "safe_loading", "save", "verify"]

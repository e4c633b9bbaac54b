"""tree2mat: exact ONNX graphs of standard operators from trained tree models.

>>> import tree2mat
>>> onx = tree2mat.convert("model.joblib")            # doctest: +SKIP
>>> report = tree2mat.verify("model.joblib", onx)     # doctest: +SKIP
>>> report.passed                                      # doctest: +SKIP
True
"""

__version__ = "0.1.0"

from tree2mat.convert import convert, load, save  # noqa: E402
from tree2mat.errors import Tree2MatError  # noqa: E402
from tree2mat.forms import FORMS  # noqa: E402
from tree2mat.frontends import FRONTENDS  # noqa: E402
from tree2mat.frontends.loading import safe_loading  # noqa: E402
from tree2mat.verify import Report, verify  # noqa: E402

__all__ = ["FORMS", "FRONTENDS", "Report", "Tree2MatError", "__version__", "convert", "load", "safe_loading", "save", "verify"]

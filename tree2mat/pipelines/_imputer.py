"""``SimpleImputer`` on doubles in standard operators (skl2onnx's converter writes
``ai.onnx.ml.Imputer``, which onnxruntime runs on float only)."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from tree2mat.errors import UnsupportedModelError


def _register_imputer(skl2onnx: Any) -> None:
    from skl2onnx.common._registration import get_shape_calculator
    from skl2onnx.operator_converters.imputer_op import convert_sklearn_imputer
    from sklearn.impute import SimpleImputer

    shape = get_shape_calculator("SklearnSimpleImputer")

    def convert(scope: Any, operator: Any, container: Any) -> None:
        from skl2onnx.common.data_types import DoubleTensorType

        if getattr(operator.raw_operator, "add_indicator", False):  # (skl2onnx's graph gets the width wrong)
            raise UnsupportedModelError("SimpleImputer(add_indicator=True) is not supported in a pipeline tree2mat converts")
        if not isinstance(operator.inputs[0].type, DoubleTensorType):
            return convert_sklearn_imputer(scope, operator, container)
        _convert_imputer_double(scope, operator, container)
        return None

    skl2onnx.update_registered_converter(SimpleImputer, "SklearnSimpleImputer", shape, convert, overwrite=True)


def _convert_imputer_double(scope: Any, operator: Any, container: Any) -> None:
    """``where(x is missing, statistic, x)`` in double: what ``SimpleImputer.transform`` computes."""
    imputer = operator.raw_operator
    stats = np.asarray(imputer.statistics_, dtype=np.float64)
    missing = imputer.missing_values
    if np.isnan(stats).any() and not getattr(imputer, "keep_empty_features", False):
        raise UnsupportedModelError(
            "SimpleImputer dropped all-missing columns (statistics NaN); refit it with keep_empty_features=True"
        )
    if len(operator.inputs) != 1:
        raise UnsupportedModelError("SimpleImputer on double inputs takes one input matrix")
    x = operator.inputs[0].full_name
    is_missing = scope.get_unique_variable_name("imputer_missing")
    values = scope.get_unique_variable_name("imputer_statistics")
    container.add_initializer(values, onnx.TensorProto.DOUBLE, [1, stats.size], stats.tolist())
    if isinstance(missing, float) and np.isnan(missing):
        container.add_node("IsNaN", [x], [is_missing], name=scope.get_unique_operator_name("ImputerIsNaN"))
    elif isinstance(missing, (int, float, np.number)) and not isinstance(missing, bool):
        value = scope.get_unique_variable_name("imputer_missing_value")
        container.add_initializer(value, onnx.TensorProto.DOUBLE, [], [float(missing)])
        container.add_node("Equal", [x, value], [is_missing], name=scope.get_unique_operator_name("ImputerEqual"))
    else:
        raise UnsupportedModelError(f"SimpleImputer(missing_values={missing!r}) on double inputs is not supported")
    container.add_node("Where", [is_missing, values, x], [operator.outputs[0].full_name],
                       name=scope.get_unique_operator_name("ImputerWhere"))

"""The IR: trees as struct-of-arrays, their matrices, and the reference evaluator."""

from tree2mat.ir.core import (
    Aggregation,
    Comparison,
    Ensemble,
    LabelRule,
    Link,
    OutlierParams,
    Task,
    Tree,
    leaf_ref,
)
from tree2mat.ir.evaluate import apply, margin, predict

__all__ = [
    "Aggregation",
    "Comparison",
    "Ensemble",
    "LabelRule",
    "Link",
    "OutlierParams",
    "Task",
    "Tree",
    "apply",
    "leaf_ref",
    "margin",
    "predict",
]

"""tree2mat's own IR JSON format: a safe, library-free way to write an ensemble down.

Used for hand-built fixtures (the papers' worked example) and for ``tree2mat inspect`` on trees
that come from no library. Top-level key ``"tree2mat_ir"`` holds the format version.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from tree2mat.errors import ModelFileError
from tree2mat.ir.core import (
    Aggregation,
    Comparison,
    Ensemble,
    LabelRule,
    Link,
    OutlierParams,
    Task,
    Tree,
)

FORMAT_VERSION = 1


def is_ir_document(doc: Any) -> bool:
    return isinstance(doc, dict) and "tree2mat_ir" in doc


def ensemble_to_dict(ens: Ensemble) -> dict[str, Any]:
    def tree_dict(t: Tree) -> dict[str, Any]:
        d: dict[str, Any] = {
            "feature": t.feature.tolist(),
            "threshold": t.threshold.tolist(),
            "default_left": t.default_left.tolist(),
            "left": t.left.tolist(),
            "right": t.right.tolist(),
            "value": t.value.tolist(),
        }
        if t.has_categorical:
            d["categorical"] = [
                {
                    "node": int(node),
                    "values": vals[~np.isnan(vals)].tolist(),
                    "left": left[~np.isnan(vals)].tolist(),
                }
                for node, vals, left in zip(t.cat_nodes, t.cat_values, t.cat_left)
            ]
        return d

    return {
        "tree2mat_ir": FORMAT_VERSION,
        "n_features": ens.n_features,
        "n_outputs": ens.n_outputs,
        "comparison": ens.comparison.value,
        "source_dtype": np.dtype(ens.source_dtype).name,
        "aggregation": ens.aggregation.value,
        "base_score": ens.base_score.tolist(),
        "link": ens.link.value,
        "task": ens.task.value,
        "label_rule": ens.label_rule.value,
        "classes": [c.tolist() for c in ens.classes],
        "output_index": ens.output_index.tolist(),
        "outlier": None
        if ens.outlier is None
        else {"denominator": ens.outlier.denominator, "offset": ens.outlier.offset},
        "feature_names": list(ens.feature_names) if ens.feature_names else None,
        "source": ens.source,
        "accepts_nan": ens.accepts_nan,
        "accepts_inf": ens.accepts_inf,
        "finite_features": list(ens.finite_features),
        "trees": [tree_dict(t) for t in ens.trees],
    }


def ensemble_from_dict(doc: dict[str, Any], name: str = "IR document") -> Ensemble:
    """Parse and validate; any missing or ill-typed field is a :class:`ModelFileError`."""
    if doc.get("tree2mat_ir") != FORMAT_VERSION:
        raise ModelFileError(f"{name}: unsupported tree2mat_ir version {doc.get('tree2mat_ir')!r}")
    try:
        trees = tuple(_tree_from_dict(t) for t in doc["trees"])
        n_outputs = int(doc.get("n_outputs", 1))
        return Ensemble(
            trees=trees,
            n_features=int(doc["n_features"]),
            n_outputs=n_outputs,
            output_index=np.asarray(doc.get("output_index", [-1] * len(trees)), np.int64),
            comparison=Comparison(doc.get("comparison", "<=")),
            source_dtype=np.dtype(doc.get("source_dtype", "float64")),
            aggregation=Aggregation(doc.get("aggregation", "sum")),
            base_score=np.asarray(doc.get("base_score", [0.0] * n_outputs), np.float64),
            link=Link(doc.get("link", "identity")),
            task=Task(doc.get("task", "regression")),
            classes=tuple(np.asarray(c) for c in doc.get("classes", [])),
            label_rule=LabelRule(doc.get("label_rule", "argmax")),
            outlier=None if not doc.get("outlier") else OutlierParams(**doc["outlier"]),
            feature_names=tuple(doc["feature_names"]) if doc.get("feature_names") else None,
            source=str(doc.get("source", "tree2mat IR")),
            accepts_nan=bool(doc.get("accepts_nan", True)),
            accepts_inf=bool(doc.get("accepts_inf", True)),
            finite_features=tuple(int(f) for f in doc.get("finite_features", [])),
        ).validate()
    except (KeyError, TypeError, ValueError) as exc:
        what = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
        raise ModelFileError(f"{name}: ill-formed tree2mat IR: {what}") from exc


def _tree_from_dict(d: dict[str, Any]) -> Tree:
    value = np.asarray(d["value"], np.float64)
    if value.ndim == 1:
        value = value[:, None]
    cats = d.get("categorical", [])
    width = max((len(c["values"]) for c in cats), default=0)
    cat_values = np.full((len(cats), width), np.nan)
    cat_left = np.zeros((len(cats), width), bool)
    for i, c in enumerate(cats):
        cat_values[i, : len(c["values"])] = c["values"]
        cat_left[i, : len(c["left"])] = c["left"]
    return Tree(
        feature=np.asarray(d["feature"], np.int64),
        threshold=np.asarray(d["threshold"], np.float64),
        default_left=np.asarray(d["default_left"], bool),
        left=np.asarray(d["left"], np.int64),
        right=np.asarray(d["right"], np.int64),
        value=value,
        cat_nodes=np.asarray([c["node"] for c in cats], np.int64),
        cat_values=cat_values,
        cat_left=cat_left,
    )


def dumps(ens: Ensemble) -> str:
    return json.dumps(ensemble_to_dict(ens), indent=1)

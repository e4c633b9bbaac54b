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
    MAX_OUTPUTS,
    Aggregation,
    CategoryCodes,
    Comparison,
    Ensemble,
    LabelRule,
    Link,
    OutlierParams,
    Projections,
    Task,
    Tree,
)
from tree2mat.ir.limits import Declared, category_sizes, declare, trees_read

FORMAT_VERSION = 1
#: Most padded projection terms (projections x longest projection) a document may hold: 2**24
#: (256 MiB of int64 features and float64 weights), whatever few terms the file itself lists.
MAX_PROJECTION_CELLS = 2**24


def is_ir_document(doc: Any) -> bool:
    return isinstance(doc, dict) and "tree2mat_ir" in doc


def ensemble_to_dict(ens: Ensemble) -> dict[str, Any]:
    doc = {
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
        "accumulate_dtype": np.dtype(ens.accumulate_dtype).name,
        "missing_value": None if np.isnan(ens.missing_value) else ens.missing_value,
        "label_cutoff": ens.label_cutoff,
        "zero_band": ens.zero_band,
        "category_codes": ens.category_codes.value,
        "category_labels": [{"feature": f, "labels": list(labels)} for f, labels in ens.category_labels],
        "trees": [_tree_to_dict(t) for t in ens.trees],
    }
    if ens.projections is not None:
        doc["projections"] = _projections_to_list(ens.projections)
    return doc


def _tree_to_dict(t: Tree) -> dict[str, Any]:
    """One tree as the document lists it (categorical and linear parts only where it has them)."""
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
        if t.cat_other_left is not None:
            for entry, other in zip(d["categorical"], t.cat_other_left):
                entry["other_left"] = bool(other)
    if t.zero_missing.size:
        d["zero_missing"] = t.zero_missing.tolist()
    if t.is_linear:
        d["linear"] = {
            "const": t.linear_const.tolist(),  # type: ignore[union-attr]
            "feature": t.linear_feature.tolist(),  # type: ignore[union-attr]
            "coef": t.linear_coef.tolist(),  # type: ignore[union-attr]
        }
    return d


def _projections_to_list(pr: Projections) -> list[dict[str, Any]]:
    """Each projection's terms, unpadded, in summation order (what :func:`_projections` reads)."""
    return [{"feature": f.tolist(), "weight": w.tolist()} for f, w in (pr.terms(m) for m in range(pr.n_projections))]


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what} must be an integer, got {value!r:.40}")
    return value


def _array(value: Any, what: str, kind: str, ndim: int) -> np.ndarray:
    """A numpy array of the given kind: 'i' integers, 'f' numbers, 'b' booleans."""
    if not isinstance(value, list):
        raise ValueError(f"{what} must be a list")
    try:
        arr = np.asarray(value) if value else np.zeros((0,) * ndim)
    except (ValueError, OverflowError) as exc:
        raise ValueError(f"{what}: {exc}") from exc
    if arr.size == 0 and arr.ndim <= ndim:
        return arr.reshape(arr.shape if arr.ndim == ndim else (0,) * ndim).astype({"i": np.int64, "f": np.float64, "b": bool}[kind])
    ok = {"i": arr.dtype.kind == "i", "f": arr.dtype.kind in "if", "b": arr.dtype.kind == "b"}[kind]
    if not ok or arr.ndim != ndim:
        name = {"i": "integers", "f": "numbers", "b": "true/false values"}[kind]
        raise ValueError(f"{what} must be a {ndim}-D list of {name}")
    return arr.astype({"i": np.int64, "f": np.float64, "b": bool}[kind])


def _classes(value: Any) -> tuple[np.ndarray, ...]:
    if not isinstance(value, list):
        raise ValueError("classes must be a list of lists")
    out = []
    for group in value:
        if not isinstance(group, list) or not group:
            raise ValueError("classes must be a list of non-empty lists")
        if all(isinstance(c, str) for c in group):
            out.append(np.asarray(group, dtype=str))
        elif all(isinstance(c, int) and not isinstance(c, bool) for c in group):
            out.append(_array(group, "classes", "i", 1))
        else:
            raise ValueError("class labels must be all integers or all strings")
    return tuple(out)


def ensemble_from_dict(doc: dict[str, Any], name: str = "IR document") -> Ensemble:
    """Parse (types checked strictly, nothing coerced) and validate; any problem is a
    :class:`ModelFileError` naming the field, or an :class:`InvalidTreeError`."""
    version = doc.get("tree2mat_ir")
    if type(version) is not int or version != FORMAT_VERSION:  # (True == 1 and 1.0 == 1: not versions)
        raise ModelFileError(f"{name}: unsupported tree2mat_ir version {doc.get('tree2mat_ir')!r}")
    try:
        n_outputs, trees = _trees(doc, name)
        settings = _settings(doc)
        return Ensemble(
            trees=trees,
            n_features=_int(doc["n_features"], "n_features"),
            n_outputs=n_outputs,
            output_index=_array(doc.get("output_index", [-1] * len(trees)), "output_index", "i", 1),
            comparison=Comparison(doc.get("comparison", "<=")),
            source_dtype=np.dtype(settings["source_dtype"]),
            aggregation=Aggregation(doc.get("aggregation", "sum")),
            base_score=_array(doc["base_score"] if "base_score" in doc else [0.0] * n_outputs, "base_score", "f", 1),
            link=Link(doc.get("link", "identity")),
            task=Task(doc.get("task", "regression")),
            classes=_classes(doc.get("classes", [])),
            label_rule=LabelRule(doc.get("label_rule", "argmax")),
            outlier=_outlier(doc.get("outlier")),
            feature_names=tuple(settings["feature_names"]) if settings["feature_names"] else None,
            source=str(doc.get("source", "tree2mat IR")),
            accepts_nan=settings["accepts_nan"],
            accepts_inf=settings["accepts_inf"],
            finite_features=tuple(_array(doc.get("finite_features", []), "finite_features", "i", 1).tolist()),
            accumulate_dtype=np.dtype(settings["accumulate_dtype"]),
            missing_value=float("nan") if settings["missing_value"] is None else float(settings["missing_value"]),
            label_cutoff=float(settings["label_cutoff"]),
            zero_band=float(settings["zero_band"]),
            category_codes=CategoryCodes(doc.get("category_codes", "exact")),
            category_labels=_labels(doc.get("category_labels", [])),
            projections=_projections(doc.get("projections")),
        ).validate()
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        what = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
        raise ModelFileError(f"{name}: ill-formed tree2mat IR: {what}") from exc


def _trees(doc: dict[str, Any], name: str) -> tuple[int, tuple[Tree, ...]]:
    """``n_outputs`` and the trees: the sizes the trees declare are checked (:func:`declare`)
    before any of them is built, so that a small file cannot ask for huge arrays."""
    if not isinstance(doc["trees"], list):
        raise ValueError("trees must be a list")
    n_outputs = _int(doc.get("n_outputs", 1), "n_outputs")
    if not 1 <= n_outputs <= MAX_OUTPUTS:
        raise ValueError(f"n_outputs must be between 1 and {MAX_OUTPUTS}, got {n_outputs}")
    declare(_declared(doc["trees"], n_outputs), name)
    return n_outputs, tuple(_tree_from_dict(t, f"trees[{i}]") for i, t in trees_read(list(enumerate(doc["trees"]))))


def _settings(doc: dict[str, Any]) -> dict[str, Any]:
    """The feature names, dtypes, numbers and flags of ``doc`` by field name (defaults filled in),
    their types checked, as the document holds them: :func:`ensemble_from_dict` converts each in
    its field's turn."""
    names = doc.get("feature_names")
    if names is not None and (not isinstance(names, list) or not all(isinstance(n, str) for n in names)):
        raise ValueError("feature_names must be a list of strings")
    dtype = doc.get("source_dtype", "float64")
    acc = doc.get("accumulate_dtype", "float64")
    if dtype not in ("float32", "float64") or acc not in ("float32", "float64"):
        raise ValueError("source_dtype and accumulate_dtype must be 'float32' or 'float64'")
    missing = doc.get("missing_value")
    cutoff = doc.get("label_cutoff", 0.0)
    band = doc.get("zero_band", 0.0)
    if not (missing is None or isinstance(missing, (int, float))) or any(
        isinstance(v, bool) or not isinstance(v, (int, float)) for v in (cutoff, band)
    ):
        raise ValueError("missing_value, label_cutoff and zero_band must be numbers")
    flags = {k: doc.get(k, True) for k in ("accepts_nan", "accepts_inf")}
    if not all(isinstance(v, bool) for v in flags.values()):
        raise ValueError("accepts_nan and accepts_inf must be true or false")
    return {"feature_names": names, "source_dtype": dtype, "accumulate_dtype": acc, "missing_value": missing,
            "label_cutoff": cutoff, "zero_band": band, **flags}


def _outlier(value: Any) -> OutlierParams | None:
    """``outlier``: IsolationForest's ``denominator`` and ``offset``, numbers; none when absent."""
    if not value:
        return None
    return OutlierParams(
        denominator=float(_array([value["denominator"]], "outlier.denominator", "f", 1)[0]),
        offset=float(_array([value["offset"]], "outlier.offset", "f", 1)[0]),
    )


def _declared(trees: list[Any], n_outputs: int) -> Declared:
    """The sizes the document's trees declare (what is not of the expected shape is counted as
    empty here: parsing the tree refuses it by name)."""
    internal, columns, sets = 0, [], []
    for t in trees:
        feature = t.get("feature") if isinstance(t, dict) else None
        internal += len(feature) if isinstance(feature, list) else 0
        listed = t.get("categorical") if isinstance(t, dict) else None
        for c in listed if isinstance(listed, list) else []:
            node, values = (c.get("node"), c.get("values")) if isinstance(c, dict) else (None, None)
            if isinstance(feature, list) and type(node) is int and 0 <= node < len(feature) and isinstance(values, list):
                columns.append(feature[node] if type(feature[node]) is int else -1)
                sets.append(np.unique(np.asarray([v for v in values if type(v) in (int, float)], np.float64)))
    return Declared(trees=len(trees), internal=internal, leaves=internal + len(trees), outputs=n_outputs,
                    **category_sizes(np.asarray(columns, np.int64), sets))


def _projections(value: Any) -> Projections | None:
    """``projections``: a list of ``{"feature": [...], "weight": [...]}``, the terms of each in
    summation order (nodes test projection m as feature ``n_features + m``)."""
    if value is None:
        return None
    if not isinstance(value, list) or not value or not all(isinstance(v, dict) for v in value):
        raise ValueError("projections must be a non-empty list of {feature, weight}")
    rows = [
        (_array(v["feature"], f"projections[{m}].feature", "i", 1), _array(v["weight"], f"projections[{m}].weight", "f", 1))
        for m, v in enumerate(value)
    ]
    if any(f.shape != w.shape or f.size == 0 for f, w in rows):
        raise ValueError("each projection needs as many weights as features, at least one")
    P = max(f.size for f, _ in rows)
    if len(rows) * P > MAX_PROJECTION_CELLS:
        raise ValueError(f"{len(rows)} projections of up to {P} terms pass the limit of {MAX_PROJECTION_CELLS} padded terms")
    if any((f < 0).any() for f, _ in rows):
        raise ValueError("projection features must be feature indices (>= 0)")
    return Projections.from_terms(rows)


def _labels(value: Any) -> tuple[tuple[int, tuple[str | int | float, ...]], ...]:
    if not isinstance(value, list) or not all(isinstance(v, dict) and isinstance(v.get("labels"), list) for v in value):
        raise ValueError("category_labels must be a list of {feature, labels}")
    for v in value:
        if any(isinstance(label, bool) or not isinstance(label, (str, int, float)) for label in v["labels"]):
            raise ValueError("category labels must be strings or numbers")
    return tuple((_int(v.get("feature"), "category_labels.feature"), tuple(v["labels"])) for v in value)


def _tree_from_dict(d: Any, where: str) -> Tree:
    if not isinstance(d, dict):
        raise ValueError(f"{where} must be an object")
    raw = d["value"]
    ndim = 2 if isinstance(raw, list) and raw and isinstance(raw[0], list) else 1  # K = 1: flat
    value = _array(raw, f"{where}.value", "f", ndim)
    if value.ndim == 1:
        value = value[:, None]
    cats = d.get("categorical", [])
    if not isinstance(cats, list) or not all(isinstance(c, dict) for c in cats):
        raise ValueError(f"{where}.categorical must be a list of objects")
    width = max((len(c["values"]) for c in cats), default=0)
    cat_values = np.full((len(cats), width), np.nan)
    cat_left = np.zeros((len(cats), width), bool)
    others = [c.get("other_left") for c in cats]
    if any(o is not None for o in others) and not all(isinstance(o, bool) for o in others):
        raise ValueError(f"{where}.categorical: other_left must be given for every node, true or false")
    for i, c in enumerate(cats):
        vals = _array(c["values"], f"{where}.categorical[{i}].values", "f", 1)
        left = _array(c["left"], f"{where}.categorical[{i}].left", "b", 1)
        if left.shape != vals.shape:
            raise ValueError(f"{where}.categorical[{i}]: values and left differ in length")
        cat_values[i, : vals.size] = vals
        cat_left[i, : left.size] = left
    linear = d.get("linear")
    if linear is not None and not isinstance(linear, dict):
        raise ValueError(f"{where}.linear must be an object")
    lin = {} if linear is None else {
        "linear_const": _array(linear["const"], f"{where}.linear.const", "f", 1),
        "linear_feature": _array(linear["feature"], f"{where}.linear.feature", "i", 2),
        "linear_coef": _array(linear["coef"], f"{where}.linear.coef", "f", 2),
    }
    return Tree(
        **lin,
        cat_other_left=np.asarray(others, bool) if cats and others[0] is not None else None,
        zero_missing=_array(d.get("zero_missing", []), f"{where}.zero_missing", "b", 1),
        feature=_array(d["feature"], f"{where}.feature", "i", 1),
        threshold=_array(d["threshold"], f"{where}.threshold", "f", 1),
        default_left=_array(d["default_left"], f"{where}.default_left", "b", 1),
        left=_array(d["left"], f"{where}.left", "i", 1),
        right=_array(d["right"], f"{where}.right", "i", 1),
        value=value,
        cat_nodes=np.asarray([_int(c["node"], f"{where}.categorical.node") for c in cats], np.int64),
        cat_values=cat_values,
        cat_left=cat_left,
    )


def dumps(ens: Ensemble) -> str:
    return json.dumps(ensemble_to_dict(ens), indent=1)

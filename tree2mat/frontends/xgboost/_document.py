"""An XGBoost model document (``Booster.save_raw("json")``, a saved ``.json`` or ``.ubj``) to
the IR, field by field: the objective, the declared outputs, the booster's trees, the base
score, the feature names and the categories stored for them."""

from __future__ import annotations

from typing import Any

import numpy as np

from tree2mat.errors import ModelFileError, UnsupportedModelError
from tree2mat.frontends.xgboost._fields import F32, _field, _floats
from tree2mat.frontends.xgboost._objectives import _margin_base, _objective
from tree2mat.frontends.xgboost._trees import _read_trees
from tree2mat.ir.core import Aggregation, CategoryCodes, Comparison, Ensemble, Task


def from_document(
    doc: Any,
    name: str = "XGBoost model",
    *,
    missing: float = float("nan"),
    classes: np.ndarray | None = None,
    iteration_limit: int | None = None,
) -> Ensemble:
    """The IR of an XGBoost JSON document (``Booster.save_raw("json")`` or a saved ``.json``).

    ``iteration_limit``: use the trees of the first so many boosting rounds (a wrapper's
    ``best_iteration + 1``); by default all trees, as ``Booster.predict`` does even after early
    stopping.
    """
    learner = _field(doc, "learner", name)
    objective, obj = _objective(learner, classes, name)
    params = _field(learner, "learner_model_param", name)
    n_features, k = _outputs(params, name)
    model, weights = _tree_model(learner, name)
    trees, tree_info = _read_trees(model, weights, k, iteration_limit, name)
    margin_base = _margin_base(_base_score(params, k, name), obj.base).astype(np.float64)
    names = _feature_names(learner, n_features, name)
    vector = np.asarray([t.n_outputs > 1 for t in trees])  # multi-target trees add to every output
    common: dict[str, Any] = dict(
        trees=trees, n_features=n_features, output_index=np.where(vector, -1, tree_info),
        comparison=Comparison.LT, source_dtype=F32, aggregation=Aggregation.SUM,
        base_score=margin_base, link=obj.link, task=obj.task, n_outputs=k,
        feature_names=names, source=f"xgboost {objective}",
        accepts_nan=True, accepts_inf=False, accumulate_dtype=F32, missing_value=missing,  # XGBoost refuses inf
        category_codes=CategoryCodes.NONNEGATIVE_TRUNCATE,
        category_labels=stored_categories(model, n_features, doc.get("version")),
    )
    if obj.task is Task.CLASSIFICATION:  # binary: one margin column per target (multi-label)
        labels = np.arange(2 if obj.label else k) if classes is None else np.asarray(classes).astype(np.int64)
        common.update(classes=(labels,) * (k if obj.label else 1))
        if obj.label:
            common.update(label_rule=obj.label[0], label_cutoff=obj.label[1])
    return Ensemble(**common).validate()


def _outputs(params: Any, name: str) -> tuple[int, int]:
    """The feature count and the margin columns ``learner_model_param`` declares, refused where
    XGBoost's loader would refuse them or tree2mat has no layout for them (classes and targets)."""
    try:
        n_features = int(_field(params, "num_feature", name))
        num_class = int(params.get("num_class", "0"))
        num_target = int(params.get("num_target", "1"))
    except (TypeError, ValueError, OverflowError) as exc:
        raise ModelFileError(f"{name}: ill-formed XGBoost model: {exc}") from exc
    # (XGBoost refuses them: "value -5 for Parameter num_class should be greater equal to 0")
    for key, count, least in (("num_class", num_class, 0), ("num_target", num_target, 1)):
        if count < least:
            raise ModelFileError(f"{name}: ill-formed XGBoost model: learner_model_param {key} is {count}; it must be {least} or more")
    if num_class > 1 and num_target > 1:
        raise UnsupportedModelError(f"{name}: XGBoost models with {num_class} classes and {num_target} targets are not supported")
    return n_features, max(num_class, num_target, 1)  # margin columns: classes, or targets (quantiles, labels)


def _tree_model(learner: Any, name: str) -> tuple[Any, list[float] | None]:
    """The booster's tree model and, for DART (whose predictions scale each tree), its weight per
    tree (None for gbtree); any other booster (gblinear) is refused: it has no trees."""
    booster = _field(learner, "gradient_booster", name)
    kind = _field(booster, "name", name)
    if kind == "dart":
        weights = [float(w) for w in _field(booster, "weight_drop", name)]
        model = _field(_field(booster, "gbtree", name), "model", name)
        if len(weights) != len(_field(model, "trees", name)):
            raise ModelFileError(f"{name}: ill-formed XGBoost model: weight_drop needs one weight per tree")
        return model, weights
    if kind == "gbtree":
        return _field(booster, "model", name), None
    raise UnsupportedModelError(f"{name}: XGBoost booster {kind!r} is not supported (trees only)")


def _base_score(params: Any, k: int, name: str) -> np.ndarray:
    """The base score of each of the ``k`` outputs (one value given serves them all)."""
    base = _floats(_field(params, "base_score", name), name)
    base = np.broadcast_to(base, (k,)) if base.size in (1, k) else base
    if base.size != k:
        raise ModelFileError(f"{name}: ill-formed XGBoost model: base_score has {base.size} values for {k} outputs")
    return base


def _feature_names(learner: dict, n_features: int, name: str) -> tuple[str, ...] | None:
    """The names the model was fitted with (None where it has none), one string per feature."""
    names = learner.get("feature_names") or None
    if names is not None and (
        not isinstance(names, list) or len(names) != n_features or not all(isinstance(v, str) for v in names)
    ):
        raise ModelFileError(f"{name}: ill-formed XGBoost model: feature_names must be {n_features} strings")
    return tuple(names) if names else None


def stored_categories(model: Any, n_features: int, version: Any) -> tuple[tuple[int, tuple[str | int | float, ...]], ...]:
    """The categories XGBoost (3.1 on) stores for the pandas ``category`` columns a model was
    fitted on (``model.cats``): per feature, names as UTF-8 bytes cut by ``offsets``, or numbers
    in ``values``; a category's code in the trees is its position (the dtype's order at fit).
    Nothing for older models, for features without categories, or, for the whole model, where
    some names cannot be trusted (XGBoost reads names for all its category columns or none):
    XGBoost 3.2.0 and earlier cut non-ASCII names at character, not byte, counts (fixed in later
    versions). The graph then takes XGBoost's codes."""
    cats = model.get("cats") if isinstance(model, dict) else None
    enc = cats.get("enc") if isinstance(cats, dict) else None
    if not isinstance(enc, list) or len(enc) != n_features:
        return ()
    old = not (isinstance(version, list) and [v for v in version if isinstance(v, int)] > [3, 2, 0])
    out: list[tuple[int, tuple[str | int | float, ...]]] = []
    for j, entry in enumerate(enc):
        if not isinstance(entry, dict):
            return ()
        try:
            values, offsets = (np.asarray(entry.get(key, [])) for key in ("values", "offsets"))
            values, offsets = (a if a.size else np.zeros(0, np.int64) for a in (values, offsets))
        except (TypeError, ValueError, OverflowError):
            return ()
        if values.dtype.kind not in "iu" or offsets.dtype.kind not in "iu" or values.ndim != 1 or offsets.ndim != 1:
            return ()  # not what XGBoost writes (integers: bytes of names, or integer categories)
        if not values.size:
            continue
        if not offsets.size:  # numbers
            labels: tuple[str | int | float, ...] = tuple(int(v) for v in values)
        else:
            if old and np.any(values < 0):  # a non-ASCII byte: names cut at the wrong places; and
                return ()  # XGBoost reads names for all its category columns or for none
            data = (values & 0xFF).astype(np.uint8).tobytes()
            if offsets[0] != 0 or offsets[-1] != len(data) or np.any(np.diff(offsets) < 0):
                return ()
            try:
                labels = tuple(data[a:b].decode("utf-8") for a, b in zip(offsets[:-1], offsets[1:]))
            except UnicodeDecodeError:
                return ()
        if len(set(labels)) != len(labels):
            return ()
        out.append((j, labels))
    return tuple(out)

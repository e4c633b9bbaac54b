"""What ``tree2mat inspect`` shows: a summary of an ensemble, or one tree's paper matrices."""

from __future__ import annotations

from typing import Any

import numpy as np

from tree2mat.errors import OptionError, Tree2MatError
from tree2mat.forms import FORMS, auto
from tree2mat.ir.core import Ensemble
from tree2mat.ir.matrices import level_arrays, oblivious_levels, paper_matrices


def matrices_of(ens: Ensemble, tree: int) -> dict[str, np.ndarray]:
    if not 0 <= tree < ens.n_trees:
        raise OptionError(f"--tree {tree} is out of range: the model has {ens.n_trees} trees (0 to {ens.n_trees - 1})")
    return {**paper_matrices(ens.trees[tree], ens.n_features, ens.projections), **level_arrays(ens.trees[tree])}


def features_used(ens: Ensemble) -> list[int]:
    """The input features some node reads (an oblique node: each feature of its projection)."""
    used = {int(f) for t in ens.trees for f in t.feature if f < ens.n_features}
    if ens.projections is not None:
        oblique = {int(f) - ens.n_features for t in ens.trees for f in t.feature if f >= ens.n_features}
        used |= {int(f) for m in oblique for f in ens.projections.terms(m)[0]}
    return sorted(used)


def summary(ens: Ensemble, max_memory: int = auto.DEFAULT_MAX_MEMORY, batch_hint: int = auto.DEFAULT_BATCH_HINT,
            target: str | None = None) -> dict[str, Any]:
    """Machine-readable facts about the ensemble (``inspect --format json``); ``auto``: the form
    ``--form auto`` would pick for ``target`` (None: portable)."""
    depths = ens.tree_depths().tolist()
    leaves = [t.n_leaves for t in ens.trees]
    used = features_used(ens)
    info: dict[str, Any] = {
        "source": ens.source,
        "task": ens.task.value,
        "trees": ens.n_trees,
        "features": ens.n_features,
        "features_used": len(used),
        "margin_columns": ens.n_outputs,
        "depth": {"min": min(depths), "mean": float(np.mean(depths)), "max": max(depths)},
        "leaves": {"total": sum(leaves), "max": max(leaves)},
        "categorical_nodes": int(sum(t.cat_nodes.size for t in ens.trees)),
        "category_codes": ens.category_codes.value,
        "zero_missing_nodes": int(sum(t.zero_missing.sum() for t in ens.trees)),
        "linear_leaf_trees": sum(t.is_linear for t in ens.trees),
        "oblique_nodes": int(sum((t.feature >= ens.n_features).sum() for t in ens.trees)),
        "oblivious_trees": sum(t.n_internal > 0 and oblivious_levels(t) is not None for t in ens.trees),
        "comparison": ens.comparison.value,
        "aggregation": ens.aggregation.value,
        "link": ens.link.value,
    }
    if ens.projections is not None:
        terms = (ens.projections.feature >= 0).sum(axis=1)
        info["projections"] = {"count": ens.projections.n_projections, "max_terms": int(terms.max()), "mean_terms": float(terms.mean())}
    if ens.classes:
        info["classes"] = [c.tolist() for c in ens.classes]
    if ens.category_labels:
        info["categories"] = ens.category_table()
    info["forms"] = {
        name: {
            "exact": spec.exact,
            "constant_bytes": spec.constant_bytes(ens),
            "bytes_per_row": spec.bytes_per_row(ens),
            **({"estimated_us_per_row": spec.us_per_row(ens)} if spec.us_per_row is not None else {}),
            **({"estimated_us_per_run_of_one_row": spec.call_us(ens)} if spec.call_us is not None else {}),
        }
        for name, spec in FORMS.items()
    }
    try:
        choice = auto.choose(ens, max_memory, batch_hint, target)
        info["auto"] = {"form": choice.form, "reason": choice.reason, "batch_hint": batch_hint, "target": target}
    except Tree2MatError as exc:
        info["auto"] = {"form": None, "reason": str(exc), "batch_hint": batch_hint, "target": target}
    return info

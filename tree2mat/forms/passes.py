"""What each pass of an exact form makes of a model (``tree2mat inspect --plan``), as tl2cgen's
``DumpAST`` shows its compiler's: the trees stacked (:mod:`_stack`), the node tests on the
augmented input (:mod:`_nodes`), the exit the form finds (:mod:`_exit`), the leaf values summed
(:mod:`_sums`). Read from the passes' own results, so what it prints is what ``convert`` builds."""

from __future__ import annotations

from typing import Any

import numpy as np

from tree2mat.errors import OptionError
from tree2mat.forms import _nodes, _stack, _sums
from tree2mat.forms._graph import GraphOptions
from tree2mat.forms._spec import FormSpec
from tree2mat.ir.core import Ensemble


def plan(ens: Ensemble, spec: FormSpec, dtype: np.dtype = np.dtype(np.float32)) -> list[tuple[str, dict[str, Any]]]:
    """(pass, its result in figures) for each pass of the exact form ``spec``'s graph of ``ens``
    taking ``dtype`` rows."""
    if not spec.exact or spec.exit_layout is None:
        raise OptionError(f"--plan shows an exact form's passes; {spec.name} is an approximation (its tests are sigmoids, not exits)")
    if spec.node_tests is None:
        raise OptionError(f"--plan shows the passes of the exact forms that test the augmented input; {spec.name}'s graph tests columns of its own "
                          "(docs/graph.md#treeensemble): choose another --form")
    st = _stack.stack(ens, dtype)
    return [("stack", _stacked(ens, st)), ("nodes", _node_tests(ens, st, spec.node_tests(ens, st))), ("exit", _exit(ens, spec, dtype)),
            ("sums", _summed(ens, st, dtype))]


def _stacked(ens: Ensemble, st: _stack.Stacked) -> dict[str, Any]:
    return {
        "trees": st.n_trees, "internal_nodes_per_tree": st.n_internal, "leaves_per_tree": st.n_leaves,
        "threshold_dtype": st.threshold.dtype.name, "value_rows": int(st.values.shape[0]), "value_columns": int(st.values.shape[1]),
        "value_dtype": st.values.dtype.name, "categorical_nodes": int(st.cat_position.size),
        "zero_missing_nodes": 0 if st.zero_missing is None else int(st.zero_missing.sum()),
        "linear_leaf_terms": 0 if st.linear is None else int(st.linear[1].shape[1]),
    }


def _node_tests(ens: Ensemble, st: _stack.Stacked, tests: _nodes.NodeTests) -> dict[str, Any]:
    """The input's preparation, then per block of the augmented input its columns and the
    nodes (not the padding) that read it."""
    real = np.arange(st.n_internal)[None, :] < np.asarray([t.n_internal for t in ens.trees])[:, None]
    ends = [*(tests.offset[b] for b in tests.blocks[1:]), tests.width]
    blocks = {
        b: {"columns": int(end - tests.offset[b]), "nodes": int(np.count_nonzero(real & (tests.column >= tests.offset[b]) & (tests.column < end)))}
        for b, end in zip(tests.blocks, ends)
    }
    return {
        "input": {
            "missing_value": None if np.isnan(ens.missing_value) else float(ens.missing_value),
            "zero_band": float(ens.zero_band), "projections": 0 if ens.projections is None else ens.projections.n_projections,
        },
        "columns": int(tests.width), "blocks": blocks, "swapped_nodes": int(np.count_nonzero(real & tests.swap)),
    }


def _exit(ens: Ensemble, spec: FormSpec, dtype: np.dtype) -> dict[str, Any]:
    assert spec.exit_layout is not None
    order, slots, index_dtype = spec.exit_layout(ens, dtype)
    T, S = slots.shape
    ids = bool(np.all((slots == np.arange(S)[None, :]) | (slots == -1)))  # (-1: past a tree's leaves)
    return {
        "index": f"[{T}, N] {np.dtype(index_dtype).name}", "positions_per_tree": int(S),
        "positions_are": "leaf ids" if ids else "nodes of the tree (leaves among them)",
        "trees_in_order": bool(np.array_equal(order, np.arange(T))),
    }


def _summed(ens: Ensemble, st: _stack.Stacked, dtype: np.dtype) -> dict[str, Any]:
    internal = _sums.internal_dtype(ens, GraphOptions(dtype=dtype))
    out: dict[str, Any] = {"margin_dtype": internal.name, "aggregation": ens.aggregation.value, "link": ens.link.value}
    # (exact float32 sums of a library that sums in float64: the values split into digits on
    # fixed grids; a library that sums in float32 is summed as it does, in its order)
    if internal == np.float32 and np.dtype(ens.accumulate_dtype) != np.float32:
        digits = _sums.digit_plan(ens, st)
        out["float32_digits"] = {"count": digits.n_digits, "bits_between_grids": digits.bits}
    return out

"""The ``oblivious`` form: exact; for oblivious trees (CatBoost's symmetric trees), the decision
machine at its purest.

An oblivious tree of depth D tests one feature against one threshold per level: every node of
level d is the same test. Its leaves, numbered left to right, are the binary numbers of the
decisions, root first: the exit leaf is ``sum_d 2^(D-1-d) r_d``, r_d = 1 where the row goes
right at level d. So per tree the graph makes D comparisons (not 2^D - 1) and weighs the
decision bits [T, D, N] by the powers of two [T, D, 1] and sums them over the levels (``Mul``,
``ReduceSum``): 0/1 bits times powers of two up to 2^23, distinct integers below 2^24, exact in
float32 in any order. Not a ``MatMul``: OpenVINO's CPU plugin at its default bf16 precision
gave wrong leaves through one (exact with f32 precision and with ``Mul`` and ``ReduceSum``:
benchmarks/RESULTS.md, "Measurements cited by the code"), and a MatMul would run in TF32 on
CUDA. A tree deeper than 24 levels is taken as any tree.

Trees that are not oblivious (any other tree: ordinary greedy trees, categorical or deeper than
24 levels) find their exit leaf as the ``sign`` form does (Decision Machines eq. 5), in the same
graph, so the form is exact on every model and matches the other forms' results everywhere; its
speed is for oblivious ensembles.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx

from tree2mat.forms import _exact, _exit, _nodes, _stack, _templates, costs
from tree2mat.forms._graph import GraphBuilder, GraphOptions
from tree2mat.forms._spec import ALL_RUNTIMES, FormSpec
from tree2mat.ir.core import Ensemble
from tree2mat.ir.matrices import oblivious_levels


def split(ens: Ensemble) -> tuple[np.ndarray, np.ndarray]:
    """The oblivious trees' indices and the others', ascending."""
    levelled, other, _ = _parts(ens)
    return levelled, other


def _parts(ens: Ensemble) -> tuple[np.ndarray, np.ndarray, int]:
    """:func:`split`, and the oblivious trees' levels in all (the cost model's unit)."""
    levels = [oblivious_levels(t) for t in ens.trees]
    oblivious = np.asarray([lv is not None for lv in levels])
    return np.flatnonzero(oblivious), np.flatnonzero(~oblivious), sum(lv.size for lv in levels if lv is not None)


def _subset(ens: Ensemble, trees: np.ndarray) -> Ensemble:
    """The ensemble of ``trees`` alone (for their exits: the head is the whole ensemble's)."""
    return dataclasses.replace(ens, trees=tuple(ens.trees[t] for t in trees), output_index=ens.output_index[trees])


def exit_layout(ens: Ensemble, dtype: np.dtype | None = None) -> tuple[np.ndarray, np.ndarray, np.dtype]:
    """The exit index's layout (:class:`_exit.Exit`): the oblivious trees first, in order, then
    the others in the sign form's order; positions are leaf ids (-1 past a tree's leaves); int32
    (tract 0.23 takes a float ``Cast`` to int64 for a shape tensor and cannot return it:
    "Unsupported DatumType in the public API TDim")."""
    levelled, other = split(ens)
    order = levelled.astype(np.int64)
    if other.size:
        order = np.concatenate([order, other[_exact.exit_layout(_subset(ens, other))[0]]])
    S = max(t.n_leaves for t in ens.trees)
    sizes = np.asarray([ens.trees[t].n_leaves for t in order])
    slots = np.where(np.arange(S)[None, :] < sizes[:, None], np.arange(S)[None, :], -1).astype(np.int64)
    return order, slots, np.dtype(np.int32)


def _levels_exit(g: GraphBuilder, ens: Ensemble, x: _nodes.Compared, opts: GraphOptions) -> str:
    """The oblivious trees' exit leaves [T_o, N] (int32): per tree and level the test of the
    level's node (:func:`_nodes.node_tests`: one ``value > threshold`` on a NaN-free column,
    negated at swap nodes), then the bits times the powers of two, summed over the levels."""
    st = _stack.stack(ens, opts.dtype)
    tests = _nodes.node_tests(ens, st)
    levels = [oblivious_levels(t) for t in ens.trees]
    T, D = ens.n_trees, max(1, max(lv.size for lv in levels if lv is not None))
    # Per tree and level its node (padding levels: node 0, weight 0); as [T * D] rows.
    node = np.zeros((T, D), np.int64)
    power = np.zeros((T, D, 1), np.float32)
    for t, lv in enumerate(levels):
        assert lv is not None
        node[t, : lv.size] = lv
        power[t, : lv.size, 0] = 2.0 ** np.arange(lv.size - 1, -1, -1)
    rows = (np.arange(T)[:, None], node)
    xa = _nodes.augmented_input(g, ens, st, x, tests.blocks)
    columns = g.op("Transpose", [xa], "x_columns", perm=[1, 0])
    values = g.op("Gather", [columns, g.const(tests.column[rows].reshape(-1), "level_column")], "level_values", axis=0)
    holds = g.op("Greater", [values, g.const(tests.threshold[rows].reshape(-1, 1), "level_threshold")], "level_test")
    swap = tests.swap[rows].reshape(-1, 1)
    right = g.op("Xor", [holds, g.const(swap, "level_swap")], "level_right") if swap.any() else holds
    bits = g.op("Reshape", [g.op("Cast", [right], "level_bits_flat", to=onnx.TensorProto.FLOAT),
                            g.const(np.asarray([T, D, -1], np.int64), "level_bits_shape")], "level_bits")
    leaf = g.reduce_sum(g.op("Mul", [bits, g.const(power, "level_powers")], "level_weighted"), [1], True, "level_leaf")  # [T, 1, N]
    flat = g.op("Squeeze", [leaf, g.const(np.asarray([1], np.int64), "level_leaf_axis")], "level_leaf_rows")
    return g.op("Cast", [flat], "level_exit", to=onnx.TensorProto.INT32)


def exit_leaf(g: GraphBuilder, ens: Ensemble, st: _stack.Stacked, x: _nodes.Compared, opts: GraphOptions) -> _exit.Exit:
    levelled, other = split(ens)
    parts = []
    if levelled.size:
        parts.append(_levels_exit(g, _subset(ens, levelled), x, opts))
    if other.size:
        sub = _subset(ens, other)
        scores = _templates.exit_leaf(g, sub, _stack.stack(sub, opts.dtype), x, opts).index
        parts.append(g.op("Cast", [scores], "score_exit32", to=onnx.TensorProto.INT32))
    index = parts[0] if len(parts) == 1 else g.op("Concat", parts, "exit_levels_and_scores", axis=0)
    return _exit.Exit(index, *exit_layout(ens))


def build(ens: Ensemble, opts: GraphOptions) -> onnx.ModelProto:
    return _exact.build(ens, opts, "oblivious", exit_leaf, constant_bytes=constant_bytes)


def constant_bytes(ens: Ensemble) -> int:
    """The leaf values (up to four float32 digits, or float64: 16 bytes a value), the levels'
    tests and powers, and the sign form's constants of the trees that are not oblivious."""
    _, other, levels = _parts(ens)
    L = max(t.n_leaves for t in ens.trees)
    rest = _exact.dense_constant_bytes(_subset(ens, other)) if other.size else 0
    return ens.n_trees * L * ens.n_outputs * 16 + levels * 24 + rest


def bytes_per_row(ens: Ensemble) -> int:
    """Per row: each level's value, test, bit and product (13 bytes a level), the leaf indices
    and values, and the sign form's intermediates of the trees that are not oblivious."""
    _, other, levels = _parts(ens)
    rest = _exact.dense_bytes_per_row(_subset(ens, other)) if other.size else 0
    return levels * 13 + ens.n_trees * (8 + ens.n_outputs * 8) + _stack.input_bytes_per_row(ens) + rest


#: Cost model, microseconds per level and per tree; the trees that are not oblivious at the sign
#: form's on top. Solved from two runs' times against the traverse form's (deep oblivious trees
#: and stumps), not fitted: benchmarks/RESULTS.md, "Measurements cited by the code".
PER_LEVEL_US, PER_TREE_US = costs.of("oblivious", "per_level_us", "per_tree_us")


def us_per_row(ens: Ensemble) -> float:
    _, other, levels = _parts(ens)
    rest = _templates.COST.us_per_row(_subset(ens, other)) if other.size else 0.0
    return PER_LEVEL_US * levels + PER_TREE_US * ens.n_trees + rest


#: Latency model (microseconds, one row's run): per run, and per level of the oblivious trees;
#: the other trees' run as the sign form's (whose per-run part then stands for the run's).
#: Solved from benchmarks/catboost_speed.json's batch-1 figures (depth 6 x 300 and x 1 000).
CALL_US, PER_LEVEL_CALL_US = costs.of("oblivious", "call_us", "per_level_call_us")


def call_us(ens: Ensemble) -> float:
    _, other, levels = _parts(ens)
    rest = _templates.COST.call_us(_subset(ens, other)) if other.size else CALL_US
    return rest + PER_LEVEL_CALL_US * levels


FORM = FormSpec(
    name="oblivious", build=build, exact=True,
    summary="oblivious (symmetric) trees as D comparisons, the leaf the decisions weighed by powers of two (sum_d 2^(D-1-d) r_d); other trees as sign",
    constant_bytes=constant_bytes, bytes_per_row=bytes_per_row, us_per_row=us_per_row, call_us=call_us, matmul=("float32",),
    exit_layout=exit_layout, proven_on=ALL_RUNTIMES,
)

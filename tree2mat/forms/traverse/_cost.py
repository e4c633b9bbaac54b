"""What the walk costs and which walk takes a batch of rows: the flat walk up to
:func:`flat_rows`, the decided walk up to :func:`decided_rows` where its latency model is under
the flat walk's, the wide walk above (the walks: :mod:`._walks`); the form's cost models for
``--form auto`` (``us_per_row``, ``call_us``, ``run_us``), their constants fitted in
:mod:`tree2mat.forms.costs`."""

from __future__ import annotations

from tree2mat.forms import _stack, _walk, costs
from tree2mat.ir.core import Ensemble

#: Batches of up to FLAT_ELEMENTS // T rows (at least one) walk the flat tables
#: (:func:`walk_flat`), larger ones the trees x rows tables (:func:`walk_wide`): the flat walk
#: is ahead at one row and at a hundred, the wide one from a thousand rows on the larger models
#: (benchmarks/walk_speed.py; benchmarks/RESULTS.md, "Measurements cited by the code").
FLAT_ELEMENTS = 8192


def flat_rows_max(width: int) -> int:
    """The most rows the flat walk can take: every offset into the flat input (rows x
    ``width`` columns) an int32."""
    return max(1, (2**31 - 1) // max(width, 1))


def flat_rows(n_trees: int, width: int) -> int:
    """The most rows the graph walks flat: FLAT_ELEMENTS trees x rows, at least one row."""
    return min(max(1, FLAT_ELEMENTS // n_trees), flat_rows_max(width))


#: The decided walk (:func:`walk_decided`): built where its one-row latency model
#: (:func:`decided_call_us`) is under the flat walk's (:func:`flat_call_us`): DECIDED_CALL_US,
#: DECIDED_DEPTH_US a level of the deepest tree (the walk runs 8 operators and one a level) and
#: DECIDED_TEST_US a node test (trees x nodes), fitted to one-row p50s of 18 models
#: (benchmarks/latency_fit.json), within 33 %. It takes batches up to where the flat walk catches
#: up (each further row costs DECIDED_ROW_TEST_US a node test there, PER_LEVEL_CALL_US a tree
#: level in the flat walk), at most DECIDED_ELEMENTS node tests (rows x trees x nodes). It pays on
#: trees deep for their nodes (leaf-wise) at a few rows, and not on full trees (the walks timed:
#: benchmarks/RESULTS.md, "Measurements cited by the code").
DECIDED_ELEMENTS = 32768
DECIDED_CALL_US, DECIDED_DEPTH_US, DECIDED_TEST_US, DECIDED_ROW_TEST_US = costs.of(
    "traverse", "decided_call_us", "decided_depth_us", "decided_test_us", "decided_row_test_us")
#: The most node tests one run of the decided walk may hold: verify forces batches of up to
#: this many through it (each a few int32 and float tensors of that size).
DECIDED_MAX_ELEMENTS = 2**22


def decided_call_us(n_trees: int, nodes: int, depth: int) -> float:
    """The decided walk's one-row latency model (microseconds)."""
    return DECIDED_CALL_US + DECIDED_DEPTH_US * depth + DECIDED_TEST_US * n_trees * nodes


def decided_rows(n_trees: int, nodes: int, depth: int, levels: int, width: int) -> int:
    """The rows the decided walk takes (0: not built): trees x ``nodes`` node tests per row, up
    to where the flat walk (``levels``: the trees' levels) is modelled as fast, fewer than the
    flat walk takes (:func:`flat_rows`)."""
    tests = n_trees * nodes
    gain = flat_call_us(depth, levels) - decided_call_us(n_trees, nodes, depth)
    if tests > DECIDED_ELEMENTS or gain <= 0:
        return 0
    slower = DECIDED_ROW_TEST_US * tests - PER_LEVEL_CALL_US * levels  # (each further row)
    rows = DECIDED_ELEMENTS // tests if slower <= 0 else min(DECIDED_ELEMENTS // tests, 1 + int(gain / slower))
    return min(rows, flat_rows(n_trees, width) - 1)


def decided_rows_max(n_trees: int, nodes: int) -> int:
    """The most rows the decided walk is run on: at most DECIDED_MAX_ELEMENTS node tests."""
    return max(1, DECIDED_MAX_ELEMENTS // (n_trees * nodes))


#: Cost model (microseconds; benchmarks/form_speed.py fits them): per level walked, per tree.
PER_LEVEL_US, PER_TREE_US = costs.of("traverse", "per_level_us", "per_tree_us")


tree_levels = _stack.tree_levels


def us_per_row(ens: Ensemble) -> float:
    return PER_LEVEL_US * tree_levels(ens) + PER_TREE_US * ens.n_trees


#: Latency model (microseconds; one row, the flat walk; :func:`call_us`): per run, per level of the
#: deepest tree (the walk's operators), per tree level. Fitted to one-row p50s of 18 models
#: (benchmarks/latency_fit.json): within 20 %.
CALL_US, PER_DEPTH_CALL_US, PER_LEVEL_CALL_US = costs.of("traverse", "call_us", "per_depth_call_us", "per_level_call_us")


def flat_call_us(depth: int, levels: int) -> float:
    """The flat walk's one-row latency model: ``depth`` of the deepest tree, ``levels`` of all."""
    return CALL_US + PER_DEPTH_CALL_US * max(depth, 1) + PER_LEVEL_CALL_US * levels


def run_us(ens: Ensemble, rows: int) -> float:
    """A run of ``rows`` rows through the walk the graph takes for them: the decided walk's model
    up to its rows (each further row DECIDED_ROW_TEST_US a node test), the flat walk's up to
    :func:`flat_rows` (PER_LEVEL_CALL_US a tree level), the wide walk's above (``us_per_row``)."""
    depth, levels = max(int(ens.tree_depths().max()), 1), tree_levels(ens)
    T, P = ens.n_trees, _walk.table_nodes(ens)
    width = ens.n_features  # (the augmented input's width only caps rows past 2**31 offsets)
    if depth > 1 and rows <= decided_rows(T, P, depth, levels, width):
        return decided_call_us(T, P, depth) + (rows - 1) * DECIDED_ROW_TEST_US * T * P
    if depth > 1 and rows <= flat_rows(T, width):  # (trees of depth 1: one step, no walks)
        return flat_call_us(depth, levels) + (rows - 1) * PER_LEVEL_CALL_US * levels
    return flat_call_us(depth, levels) + (rows - 1) * us_per_row(ens)


def call_us(ens: Ensemble) -> float:
    """One row's run: the decided walk's model where the graph has it, else the flat walk's."""
    return run_us(ens, 1)


"""Greedy growth (Hehn et al., section 2.5): the model's trees grown stump by stump, each new split
oblique and trained by the paper's Finetune on the rows its ancestors route to it, before the
whole tree is fine-tuned (:func:`tree2mat.learn.learn`).

The paper's steps, here. (1) The candidates are the start tree's leaves (the paper's single root
is a model of one leaf, e.g. scikit-learn's tree with ``min_samples_split`` above the number of
rows). (2) The fitting rows are routed deterministically (left iff ``w . z <= t``); each
candidate holds the rows that reach it. (3) Each candidate, in turn: if its rows are pure (one
class; a regressor's: one target value, or fewer than two rows) it stays a leaf; otherwise it
becomes a stump — one split, two leaves — trained alone on its rows for ``epochs`` epochs (EM,
Adam, the steepness annealed from the start, as the fine-tuning); a stump that sends every row to
one side has failed and a new one is drawn, up to ``attempts`` times, after which the node stays
a leaf. (4)-(5) The new leaves are the next round's candidates; growth ends when there are none,
every candidate at ``max_depth`` or the tree at ``max_leaves``.

Decided where the paper is silent: the candidates are split breadth-first (a round's candidates
left to right before the leaves they make), so ``max_leaves`` stops growth at the rightmost leaves
of the last round. A new split starts from a random direction (normal, unit length; with
``features_per_split=K`` on K features drawn for the split) and the median of its rows'
projections as threshold, so that it starts cutting its rows in half. A trained stump's leaves
are then the M-step at ``gamma -> infinity`` (eq. 13 with the deterministic routing as
responsibilities: each side's class frequencies, a regressor's target means): the deterministic
training loss of the tree (:class:`GrowthStep`) then never rises with a split (a split of a
leaf's rows lowers their entropy, or their squared error, or keeps it).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from tree2mat.errors import OptionError
from tree2mat.ir.build import tree_from_nodes
from tree2mat.ir.core import Ensemble, Task, Tree
from tree2mat.ir.matrices import template_matrix
from tree2mat.learn.em import m_step, start_variance
from tree2mat.learn.soft import SoftTree
from tree2mat.learn.steps import _Schedule, _train

#: Defaults: epochs per stump (the paper trains each split for the epochs of its Table 1, 15 to 45,
#: and fine-tunes the grown tree three times as long) and attempts per candidate (the paper gives none).
GROW_EPOCHS = 10
GROW_ATTEMPTS = 3


@dataclass(frozen=True)
class Growth:
    """Greedy growth's limits and settings: the grown trees' ``max_depth`` and ``max_leaves``
    (None: no limit; at least one is needed), the ``epochs`` each new stump is trained and the
    ``attempts`` at a stump per candidate."""

    max_depth: int | None = None
    max_leaves: int | None = None
    epochs: int = GROW_EPOCHS
    attempts: int = GROW_ATTEMPTS

    def check(self, oblique: bool) -> None:
        """An OptionError naming the first setting out of its range, or growth with axis-aligned splits."""
        def integer(v: Any, low: int) -> bool:
            return isinstance(v, (int, np.integer)) and not isinstance(v, bool) and bool(v >= low)

        if self.max_depth is None and self.max_leaves is None:
            raise OptionError("greedy growth needs a limit: give --grow-depth or --grow-leaves (or both)")
        for name, value, low in (("--grow-depth", self.max_depth, 1), ("--grow-leaves", self.max_leaves, 2)):
            if value is not None and not integer(value, low):
                raise OptionError(f"{name} must be an integer >= {low}, got {value!r}")
        for name, value in (("--grow-epochs", self.epochs), ("--grow-attempts", self.attempts)):
            if not integer(value, 1):
                raise OptionError(f"{name} must be an integer >= 1, got {value!r}")
        if not oblique:
            raise OptionError("greedy growth (--grow-depth, --grow-leaves) trains oblique splits (a new split's weights are learnt); "
                              "for deeper axis-aligned trees fit a deeper scikit-learn tree")

    def check_model(self, ens: Ensemble) -> None:
        """An OptionError where a limit lies below the start's trees: growth adds splits, it never prunes."""
        depth = max((int(t.leaf_depths().max()) for t in ens.trees), default=0)
        leaves = max((t.n_leaves for t in ens.trees), default=1)
        if self.max_depth is not None and depth > self.max_depth:
            raise OptionError(f"--grow-depth {self.max_depth}: the model's trees reach depth {depth}; growth adds splits, it never prunes")
        if self.max_leaves is not None and leaves > self.max_leaves:
            raise OptionError(f"--grow-leaves {self.max_leaves}: the model's trees have up to {leaves} leaves; growth adds splits, it never prunes")


@dataclass(frozen=True)
class GrowthStep:
    """One candidate a stump was trained for: its ``tree``, its ``depth`` (0: the root), the
    fitting ``rows`` that reach it, the stumps tried (``attempts``), whether one was kept
    (``split``), and after the step the tree's ``leaves`` and its deterministic training loss
    ``objective`` (the mean over the fitting rows of ``-log pi_leaf[y]``, a regressor's squared
    error per target; routing and leaves as grown, in float64)."""

    tree: int
    depth: int
    rows: int
    attempts: int
    split: bool
    leaves: int
    objective: float


@dataclass(eq=False)
class _Node:
    """A node of a growing tree: its depth, the fitting rows reaching it, its value (a leaf's) and,
    once split, its weight, offset, starting feature, feature subset and children's node ids."""

    depth: int
    rows: np.ndarray
    value: np.ndarray
    weight: np.ndarray | None = None
    offset: float = 0.0
    feature: int = 0
    allowed: np.ndarray | None = None
    children: tuple[int, int] | None = None


def grow(
    ens: Ensemble, trees: list[SoftTree], Z: np.ndarray, y: np.ndarray, growth: Growth, schedule: _Schedule, features_per_split: int | None,
    rng: np.random.Generator,
) -> tuple[Ensemble, list[SoftTree], list[GrowthStep]]:
    """The grown trees (each on all fitting rows ``Z``, labels or targets ``y``, section 2.7): the
    IR's structure (its tests are placeholders, the hardening's to set), the probabilistic trees
    and the steps taken."""
    out, softs, steps = [], [], []
    for k, (tree, soft) in enumerate(zip(ens.trees, trees)):
        nodes = _nodes(tree, soft, Z)
        steps += _grow_tree(k, nodes, Z, y, growth, schedule, features_per_split, ens.task is Task.REGRESSION, rng)
        ir, grown = _assemble(nodes, soft, ens.n_features)
        if soft.variance is not None:
            grown.variance = start_variance(grown, Z, y, schedule.steepness)
        out.append(ir)
        softs.append(grown)
    return dataclasses.replace(ens, trees=tuple(out)), softs, steps


def _nodes(tree: Tree, soft: SoftTree, Z: np.ndarray) -> list[_Node]:
    """The start tree as nodes (internal node i: node i; leaf j: node I + j), the fitting rows
    routed deterministically."""
    I = tree.n_internal
    nodes = [_Node(0, np.zeros(0, np.int64), soft.leaves[j]) for j in range(tree.n_leaves)]
    nodes = [_Node(0, np.zeros(0, np.int64), soft.leaves[0]) for _ in range(I)] + nodes
    nodes[0].rows = np.arange(Z.shape[0])
    for i in range(I):  # (breadth-first: a parent's rows are routed before its children's)
        node = nodes[i]
        node.weight, node.offset, node.feature = soft.weight[i], float(soft.offset[i]), int(soft.feature[i])
        node.allowed = None if soft.allowed is None else soft.allowed[i]
        left, right_child = (int(c) if c >= 0 else I - 1 - int(c) for c in (tree.left[i], tree.right[i]))
        node.children = (left, right_child)
        right = Z[node.rows] @ node.weight - node.offset > 0
        for child, rows in zip(node.children, (node.rows[~right], node.rows[right])):
            nodes[child].rows, nodes[child].depth = rows, node.depth + 1
    return nodes


def _grow_tree(
    k: int, nodes: list[_Node], Z: np.ndarray, y: np.ndarray, growth: Growth, schedule: _Schedule, features_per_split: int | None,
    regression: bool, rng: np.random.Generator,
) -> list[GrowthStep]:
    """The paper's steps 2-5 on one tree's nodes (grown in place), breadth-first."""
    candidates = [i for i, node in enumerate(nodes) if node.children is None]
    loss = {i: _loss(nodes[i].value, y[nodes[i].rows], regression) for i in candidates}
    steps: list[GrowthStep] = []
    while candidates:
        new: list[int] = []
        for i in candidates:
            node = nodes[i]
            if growth.max_leaves is not None and len(loss) >= growth.max_leaves:
                return steps
            if (growth.max_depth is not None and node.depth >= growth.max_depth) or node.rows.size < 2 or bool(np.all(y[node.rows] == y[node.rows][0])):
                continue  # (pure, or at the depth limit: a leaf)
            stump, attempts = _stump(Z[node.rows], y[node.rows], node.value, growth, schedule, features_per_split, rng)
            if stump is not None:
                new += _split(nodes, i, stump, Z)
                del loss[i]
                for c in new[-2:]:
                    loss[c] = _loss(nodes[c].value, y[nodes[c].rows], regression)
            objective = math.fsum(loss.values()) / (Z.shape[0] * (y.shape[1] if regression else 1))
            steps.append(GrowthStep(k, node.depth, int(node.rows.size), attempts, stump is not None, len(loss), objective))
        candidates = new
    return steps


def _stump(
    Z: np.ndarray, y: np.ndarray, value: np.ndarray, growth: Growth, schedule: _Schedule, features_per_split: int | None, rng: np.random.Generator,
) -> tuple[SoftTree | None, int]:
    """A stump trained on a candidate's rows and its leaves set by its deterministic routing (None:
    every attempt sent all rows one side), and the attempts made."""
    F = Z.shape[1]
    for attempt in range(1, growth.attempts + 1):
        allowed: np.ndarray | None = None
        weight: np.ndarray = rng.standard_normal(size=(F,))
        if features_per_split is not None:
            allowed = np.zeros(F, bool)
            allowed[rng.choice(F, features_per_split, replace=False)] = True
            weight[~allowed] = 0.0
        weight /= max(float(np.linalg.norm(weight)), np.finfo(np.float64).tiny)
        offset = float(np.median(Z @ weight))
        regression = y.ndim == 2  # (a regressor's targets are [N, K]; a classifier's labels [N])
        stump = SoftTree(weight[None, :], np.array([offset]), np.tile(value, (2, 1)), np.array([[False], [True]]), np.array([[True], [False]]),
                         np.array([int(np.argmax(np.abs(weight)))]), 1.0 if regression else None, None if allowed is None else allowed[None, :])
        _hard_leaves(stump, Z, y)
        if regression:  # (the fine-tuning's first variance: under the stump's routing at the starting steepness)
            stump.variance = start_variance(stump, Z, y, schedule.steepness)
        _train(stump, Z, y, growth.epochs, schedule, rng)
        right = Z @ stump.weight[0] - stump.offset[0] > 0
        if right.any() and not right.all():
            _hard_leaves(stump, Z, y)
            return stump, attempt
    return None, growth.attempts


def _hard_leaves(stump: SoftTree, Z: np.ndarray, y: np.ndarray) -> None:
    """The stump's leaves by the M-step with its deterministic routing as responsibilities (eq. 13
    at ``gamma -> infinity``); a side no row reaches keeps its leaf."""
    right = Z @ stump.weight[0] - stump.offset[0] > 0
    m_step(stump, np.stack([~right, right], axis=1).astype(np.float64), y)


def _split(nodes: list[_Node], i: int, stump: SoftTree, Z: np.ndarray) -> list[int]:
    """Node ``i`` made the stump's split, its rows routed to two new leaves; their node ids."""
    node = nodes[i]
    node.weight, node.offset, node.feature = stump.weight[0], float(stump.offset[0]), int(stump.feature[0])
    node.allowed = None if stump.allowed is None else stump.allowed[0]
    right = Z[node.rows] @ node.weight - node.offset > 0
    ids = [len(nodes), len(nodes) + 1]
    nodes += [_Node(node.depth + 1, node.rows[~right], stump.leaves[0]), _Node(node.depth + 1, node.rows[right], stump.leaves[1])]
    node.children = (ids[0], ids[1])
    return ids


def _loss(value: np.ndarray, y: np.ndarray, regression: bool) -> float:
    """A leaf's deterministic training loss summed over its rows: ``-log pi[y]`` (inf where a row's
    class has probability 0) or the squared error."""
    if regression:
        return float(np.sum((y - value) ** 2))
    with np.errstate(divide="ignore"):
        return float(-np.sum(np.log(value[y])))


def _assemble(nodes: list[_Node], start: SoftTree, n_features: int) -> tuple[Tree, SoftTree]:
    """The grown tree as an IR tree (numbered as the IR requires; tests and leaves placeholders,
    the hardening's to set) and as a probabilistic tree in that numbering."""
    n = len(nodes)
    leaf = np.array([node.children is None for node in nodes])
    children = np.array([node.children or (-1, -1) for node in nodes], np.int64)
    feature = np.array([node.feature for node in nodes], np.int64)
    values = np.stack([node.value for node in nodes])
    # (the threshold carries each node's id through tree_from_nodes' renumbering)
    ir = tree_from_nodes(children[:, 0], children[:, 1], leaf, feature, np.arange(n, dtype=np.float64), np.zeros(n, bool), values)
    order = ir.threshold.astype(np.int64)
    ir = dataclasses.replace(ir, threshold=np.zeros(ir.n_internal), leaf_source_id=None)
    weight = np.stack([nodes[i].weight for i in order]) if order.size else np.zeros((0, n_features))
    allowed = None
    if start.allowed is not None or any(nodes[i].allowed is not None for i in order):
        allowed = np.stack([nodes[i].allowed for i in order]) if order.size else np.zeros((0, n_features), bool)
    B = template_matrix(ir)
    soft = SoftTree(weight.astype(np.float64), np.array([nodes[i].offset for i in order]), ir.value.copy(), B == 1, B == -1, feature[order], None, allowed)
    return ir, soft

"""One EM epoch of one probabilistic tree (Hehn et al., section 2.3: Adam on the splits' eq. 14 over
shuffled batches, then the leaves in closed form), shared by :mod:`tree2mat.learn.training`'s
fine-tuning and :mod:`tree2mat.learn.growth`'s stumps."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tree2mat.errors import OptionError
from tree2mat.learn.em import e_step, m_step
from tree2mat.learn.soft import SoftTree, log_paths, split_objective

#: The paper's Adam (section 3: alpha 0.001, beta1 0.9, beta2 0.999, epsilon 1e-8; batch 1000).
ADAM_BETAS = (0.9, 0.999)
ADAM_EPSILON = 1e-8


@dataclass(frozen=True)
class _Schedule:
    """The EM settings of :func:`tree2mat.learn.learn`: the starting steepness, its increase per
    epoch, Adam's step size and the rows per step."""

    steepness: float
    increase: float
    rate: float
    batch: int


def _train(tree: SoftTree, Z: np.ndarray, y: np.ndarray, epochs: int, schedule: _Schedule, rng: np.random.Generator) -> None:
    """``epochs`` epochs of one tree on its own (oblique), the steepness from the schedule's start."""
    adam = _Adam(tree.weight.shape)
    gamma = schedule.steepness
    for epoch in range(1, epochs + 1):
        with np.errstate(over="ignore", invalid="ignore"):
            _epoch(tree, adam, Z, y, gamma, True, schedule.rate, schedule.batch, rng)
        _check_finite(tree, epoch, gamma, schedule.rate)
        gamma += schedule.increase


def _check_finite(tree: SoftTree, epoch: int, gamma: float, rate: float) -> None:
    """An OptionError where an epoch took the tree's parameters past float64's range (the steps
    overflowed: they run with float errors ignored), naming the options that set the step."""
    if not (np.isfinite(tree.weight).all() and np.isfinite(tree.offset).all() and np.isfinite(tree.leaves).all()):
        raise OptionError(
            f"fine-tuning diverged in epoch {epoch} (split parameters past float64's range at steepness {gamma:g}, "
            f"--learning-rate {rate:g}): lower --learning-rate or --steepness"
        )


def _epoch(
    tree: SoftTree, adam: _Adam, Z: np.ndarray, y: np.ndarray, gamma: float, oblique: bool, rate: float, batch: int,
    rng: np.random.Generator,
) -> None:
    """One epoch of one tree: Adam on eq. 14 over shuffled batches (E-step per batch), then the
    leaves (eq. 13; Gaussian leaves: their means and variance) from every row's responsibilities."""
    order = rng.permutation(Z.shape[0])
    for start in range(0, Z.shape[0], batch):
        rows = order[start : start + batch]
        Zb = Z[rows]
        h = e_step(tree, log_paths(tree, Zb, gamma), y[rows])
        _, dW, dt = split_objective(tree, Zb, h, gamma)
        if not oblique:  # the node's own feature's weight stays 1: the threshold alone moves
            dW = np.zeros_like(dW)
        elif tree.allowed is not None:  # (Adam's moments stay 0 there: the weights stay exactly 0)
            dW = np.where(tree.allowed, dW, 0.0)
        step_w, step_t = adam.step(dW / rows.size, dt / rows.size, rate)
        tree.weight += step_w  # (ascent: eq. 14 is maximized)
        tree.offset += step_t
    m_step(tree, e_step(tree, log_paths(tree, Z, gamma), y), y)


class _Adam:
    """Adam (Kingma & Ba) for one tree's (weight, offset), ascending."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.m = [np.zeros(shape), np.zeros(shape[0])]
        self.v = [np.zeros(shape), np.zeros(shape[0])]
        self.t = 0

    def step(self, dW: np.ndarray, dt: np.ndarray, rate: float) -> tuple[np.ndarray, np.ndarray]:
        b1, b2 = ADAM_BETAS
        self.t += 1
        out = []
        for k, g in enumerate((dW, dt)):
            self.m[k] = b1 * self.m[k] + (1 - b1) * g
            self.v[k] = b2 * self.v[k] + (1 - b2) * g * g
            m_hat, v_hat = self.m[k] / (1 - b1**self.t), self.v[k] / (1 - b2**self.t)
            out.append(rate * m_hat / (np.sqrt(v_hat) + ADAM_EPSILON))
        return out[0], out[1]

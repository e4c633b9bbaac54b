"""The projections oblique nodes test (:class:`Projections`): their terms, checks and the
float sum that defines their values."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tree2mat.errors import InvalidTreeError


@dataclass(frozen=True, eq=False)
class Projections:
    """The linear combinations of the input that oblique nodes test (``w . x <= t``).

    ``M`` projections of up to ``P`` terms each:

    - ``feature`` int64 [M, P]: the input feature of each term; ``-1`` pads a row after its terms
    - ``weight`` float64 [M, P]: each term's weight (finite, non-zero; 0 at pads)

    A tree node tests projection ``m`` by naming column ``n_features + m`` as its ``feature``; it
    compares the projection's value with its threshold as any node compares a feature value.

    The value is defined as a float sum in the ensemble's ``source_dtype``, in the order of the
    terms: ``s = 0; s = s + w_p * x_p`` for p = 0, 1, ..., each product and each sum rounded to
    ``source_dtype`` (no fused multiply-add), with the weights as values of that dtype (validation
    refuses a weight it cannot hold). treeple sums so (float32, in its stored order); so does the
    graph, with elementwise ``Mul`` and ``Add`` (never a ``MatMul``: its order is the runtime's, and
    CUDA's TF32 rounds ``x`` to 10 bits). A NaN input in a term makes ``s`` NaN, and a NaN ``s``
    (also ``inf - inf``) counts as missing: the node sends the row where ``default_left`` says.
    """

    feature: np.ndarray
    weight: np.ndarray

    @classmethod
    def from_terms(cls, terms: Sequence[tuple[Any, Any]]) -> Projections:
        """The projections of ``terms``: per projection its features and weights (equal lengths,
        in summation order), padded to the longest with feature -1 and weight 0. (Checked by
        :meth:`validate`, not here.)"""
        rows = [(np.asarray(f, np.int64).reshape(-1), np.asarray(w, np.float64).reshape(-1)) for f, w in terms]
        width = max([f.size for f, _ in rows] + [1])
        feature = np.full((len(rows), width), -1, np.int64)
        weight = np.zeros((len(rows), width))
        for m, (f, w) in enumerate(rows):
            feature[m, : f.size], weight[m, : w.size] = f, w
        return cls(feature, weight)

    @property
    def n_projections(self) -> int:
        return int(self.feature.shape[0])

    def terms(self, m: int) -> tuple[np.ndarray, np.ndarray]:
        """Projection ``m``'s features and weights, in summation order."""
        used = self.feature[m] >= 0
        return self.feature[m][used], self.weight[m][used]

    def validate(self, n_features: int, dtype: np.dtype) -> None:
        """Raise :class:`InvalidTreeError` naming the first broken invariant (the terms of
        projections over ``n_features`` inputs, summed in ``dtype``)."""
        f, w = self.feature, self.weight
        if (
            not isinstance(f, np.ndarray) or not isinstance(w, np.ndarray) or not np.issubdtype(f.dtype, np.integer)
            or not np.issubdtype(w.dtype, np.floating) or f.ndim != 2 or w.shape != f.shape or f.shape[1] < 1
        ):
            raise InvalidTreeError("projections need feature (integers) and weight (numbers) of one shape [M, P], P >= 1")
        used = f >= 0
        if f.size and (f.min() < -1 or f.max() >= n_features):
            raise InvalidTreeError(f"a projection term names a feature outside [0, {n_features})")
        if (used[:, 1:] & ~used[:, :-1]).any() or not used[:, 0].all():
            raise InvalidTreeError("every projection needs a term, and its padding (-1) after its terms")
        if not np.all(np.isfinite(w)) or (w[used] == 0).any() or (w[~used] != 0).any():
            raise InvalidTreeError("projection weights must be finite and non-zero (0 at padding)")
        with np.errstate(over="ignore"):
            held = w.astype(dtype).astype(np.float64)
        if (held != w).any():
            m, p = (int(v[0]) for v in np.nonzero(held != w))
            raise InvalidTreeError(
                f"projection {m}'s weight {float(w[m, p])!r} is no {np.dtype(dtype).name} number (the projections sum in the "
                "model's source dtype: store the weights as values of it)"
            )

    def products(self, X: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Per term position p, in summation order: which projections have a term there (bool
        [M]) and the products ``w_p * x_p`` of rows ``X`` [N, M], in ``X``'s dtype (each rounded
        to it; anything at a padding position)."""
        w = self.weight.astype(X.dtype)
        with np.errstate(invalid="ignore", over="ignore"):
            for p in range(self.feature.shape[1]):
                yield self.feature[:, p] >= 0, X[:, np.maximum(self.feature[:, p], 0)] * w[:, p]

    def values(self, X: np.ndarray) -> np.ndarray:
        """The projections of rows ``X`` (in the sum dtype, NaN-coded), [N, M] in ``X``'s dtype,
        summed as the class says."""
        s = np.zeros((X.shape[0], self.n_projections), X.dtype)
        with np.errstate(invalid="ignore", over="ignore"):
            for used, term in self.products(X):
                s = np.where(used, s + term, s)
        return s

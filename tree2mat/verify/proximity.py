"""The ``proximity`` output of a ``--proximity`` graph, checked independently of the graph: the
reference rows read from its metadata (``tree2mat.proximity_rows``), their leaves and the checked
rows' taken from the library (:meth:`Subject.leaves`: scikit-learn's ``apply``, XGBoost's and
LightGBM's ``pred_leaf``, else tree2mat's reference evaluator), and for each row and reference
row the fraction of trees where the two leaves are equal, in the graph's dtype, compared exactly."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tree2mat.contract import PROXIMITY_KEY, read_proximity_rows
from tree2mat.errors import VerificationError
from tree2mat.forms._exit import MAX_PROXIMITY_PAIRS
from tree2mat.verify.subject import Subject

#: The output's name.
PROXIMITY = "proximity"
#: Memory a run of the graph may take for its [T, N, R] comparisons (rows per run are cut to it).
RUN_BYTES = 256 * 2**20


@dataclass(frozen=True)
class ProximityCheck:
    """The reference rows' leaves [R, T] (int64, the IR's numbering), whose they are and why
    not the library's (where it refused them, see :meth:`Subject.leaves`); the graph's float dtype."""

    reference: np.ndarray
    whose: str
    why_not: str | None
    dtype: np.dtype

    def expected(self, leaves: np.ndarray) -> np.ndarray:
        """The proximity [N, R] of rows whose leaves are ``leaves`` [N, T]: equal leaves counted
        tree by tree (an integer), divided once by T in the graph's dtype."""
        R, T = self.reference.shape
        count = np.zeros((leaves.shape[0], R), np.int64)
        for t in range(T):
            count += leaves[:, t, None] == self.reference[None, :, t]
        return count.astype(self.dtype) / self.dtype.type(T)

    @property
    def rows_per_run(self) -> int:
        """The most rows a run of the graph takes: its [T, N, R] comparisons (5 bytes a cell)
        within :data:`RUN_BYTES`."""
        return max(1, RUN_BYTES // (5 * self.reference.size))

    def note(self) -> str:
        R, T = self.reference.shape
        why = f" ({self.why_not})" if self.why_not else ""
        return (f"proximity: each row against the graph's {R} reference rows ({PROXIMITY_KEY}), the fraction of the {T} trees "
                f"in which the two share a leaf, compared exactly; the reference rows' leaves by {self.whose}{why}, the rows' "
                "as the routing's")


def proximity_check(meta: dict[str, str], subject: Subject, dtype: np.dtype) -> ProximityCheck | None:
    """The check of a graph whose metadata carries reference rows (None for any other graph);
    a VerificationError where that metadata is malformed."""
    text = meta.get(PROXIMITY_KEY)
    if text is None:
        return None
    ens = subject.ens
    try:
        rows = read_proximity_rows(text, ens.n_features, max(1, MAX_PROXIMITY_PAIRS // max(ens.n_trees, 1)))
    except ValueError as exc:
        raise VerificationError(f"the graph's reference rows: {exc}") from None
    with np.errstate(over="ignore", invalid="ignore"):
        leaves, whose, why_not = subject.leaves(np.ascontiguousarray(rows, dtype))
    return ProximityCheck(leaves, whose, why_not, np.dtype(dtype))

"""Every chunk of rows through every run of the graph: each output compared with the model's
(:class:`_Checks`), the reports merged per output (:func:`_check_rows`), and what the checks met
said in notes (:meth:`_Checks.notes`)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from tree2mat.data import Rows, read_chunks
from tree2mat.errors import VerificationError
from tree2mat.ir import evaluate
from tree2mat.ir.core import Ensemble, named_codes
from tree2mat.verify.checks import compare, merge, tie_gaps
from tree2mat.verify.exits import LeafIds
from tree2mat.verify.masks import TreeMask
from tree2mat.verify.proximity import PROXIMITY, ProximityCheck
from tree2mat.verify.report import OutputReport
from tree2mat.verify.runners import GraphRunner
from tree2mat.verify.subject import EVALUATOR, Subject

#: An attention graph's per-row tree weights [N, T] (``convert --tree-weights``), checked against
#: the model's (:meth:`tree2mat.attention.AttentionForest.attention`) where the graph has them.
TREE_WEIGHTS = "tree_weights"
#: Rows on which verify asks tree2mat's reference evaluator for the leaves too, where it checks the
#: routing against the library's own (a check of the IR's reading of the model, not of the graph).
CROSS_CHECK_ROWS = 256


@dataclass(frozen=True)
class _Checks:
    """What every chunk of rows is checked on: the graph's runs against the subject's outputs."""

    subject: Subject
    #: (runner, device, walk, rows per run): every device, each with every walk (see :func:`~tree2mat.verify.walking.walks`).
    runners: list[tuple[GraphRunner, str, str, int]]
    raw: bool
    #: Leaf ids off the graph's exit index (the output ``leaf_name``), or None: routing unchecked.
    leaf_ids: LeafIds | None
    leaf_name: str
    atol: float
    rtol: float
    max_report: int
    #: ``row_atol(X)`` [N]: each row's atol (an attention forest's default, see
    #: :func:`tree2mat.verify._values_atol`); None: ``atol`` for every row.
    row_atol: Callable[[np.ndarray], np.ndarray] | None = None
    #: With ``row_atol``: the span of the outputs' values; rows whose atol passes it are counted in
    #: ``loose`` (their values checked to no purpose: a note says how many).
    span: float = np.inf
    loose: list[int] = field(default_factory=lambda: [0])
    #: Rows near an oblique node's hyperplane (see :func:`tree2mat.ir.evaluate.near_hyperplanes`).
    near: list[int] = field(default_factory=lambda: [0])
    #: Label rows that differ where the library's scores lie within this of each other are at
    #: a tie (see :func:`tie_bound`); 0: none is.
    tie_bound: float = 0.0
    #: An attention classifier: a label row that differs where the model's probabilities of the
    #: two labels lie within twice the probabilities' tolerance of each other is at a tie.
    forest_ties: bool = False
    #: Whose leaves the routing was checked against (see :meth:`Subject.leaves`), in the order met.
    routing_by: list[str] = field(default_factory=list)
    #: The cross-check (see :meth:`_leaves`): [rows where the library's leaves and the reference
    #: evaluator's differ, rows compared, rows of the chunk they were taken from].
    disagree: list[int] = field(default_factory=lambda: [0, 0, 0])
    #: Why the library's leaves could not be used (:meth:`Subject.leaves`), where its frontend
    #: gives them: then the reference evaluator's, for this chunk and every later one.
    why_not: list[str] = field(default_factory=list)
    #: ``weights(X)``: the per-row tree weights the graph's :data:`TREE_WEIGHTS` output must give
    #: (an attention forest's) [N, T] and each row's atol [N]; None: the graph has none to check.
    weights: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]] | None = None
    #: Rows whose tree weights' atol reaches 1, their whole range (checked to no purpose: a note).
    loose_weights: list[int] = field(default_factory=lambda: [0])
    #: The graph's tree mask (``convert --tree-mask``), or None: fed with every tree kept for the
    #: model's outputs, and cut after random counts of trees for the staged check (:meth:`_staged`).
    mask: TreeMask | None = None
    #: A ``--proximity`` graph's check (its reference rows' leaves), or None.
    proximity: ProximityCheck | None = None

    def chunk(self, X: np.ndarray, names: dict[int, np.ndarray] | None, offset: int) -> Iterator[tuple[str, OutputReport]]:
        """(walk, report) of each output on each run of the rows ``X``, row ``offset`` of the
        whole rows onwards; ``names``: the category names of the data's columns."""
        expected, X_tree = self.subject.expected(X, self.raw, names)
        weights_atol = None
        if self.weights is not None:
            expected[TREE_WEIGHTS], weights_atol = self.weights(X_tree)
            if self.row_atol is not None:  # (the default tolerance: a given --atol is as asked)
                self.loose_weights[0] += int(np.count_nonzero(weights_atol >= 1.0))
        atol: Any = self.atol
        if self.row_atol is not None:  # (once a chunk: the same rows on every device and walk)
            atol = self.row_atol(X)[:, None]
            self.loose[0] += int(np.count_nonzero(atol[:, 0] > self.span))
        ens = self.subject.ens
        leaves_ref = self._leaves(X_tree, names) if self.leaf_ids is not None or self.proximity is not None else None
        if self.proximity is not None and leaves_ref is not None:
            expected[PROXIMITY] = self.proximity.expected(leaves_ref)
        near = evaluate.near_hyperplanes(ens, X_tree) if ens.is_oblique else None
        self.near[0] += 0 if near is None else int(np.count_nonzero(near))
        every = None if self.mask is None else self.mask.every_tree(X.shape[0])
        for runner, dev, walk, rows_per_run in self.runners:
            got = runner.run(X, self._per_run(rows_per_run), every)
            for rep in self._outputs(got, dev, expected, leaves_ref, X, offset, near, atol, names, weights_atol):
                yield walk, rep
        if self.mask is not None:
            yield from self._staged(self.mask, X, X_tree, offset, near, atol)

    def _per_run(self, rows_per_run: int) -> int:
        """Rows per run: a walk's, fewer for a ``--proximity`` graph (its [T, N, R] comparison)."""
        return rows_per_run if self.proximity is None else min(rows_per_run, self.proximity.rows_per_run)

    def _staged(self, mask: TreeMask, X: np.ndarray, X_tree: np.ndarray, offset: int, near: np.ndarray | None,
                atol: Any) -> Iterator[tuple[str, OutputReport]]:
        """(walk, report) of each output with the trees cut after random counts (a staged
        prediction: :meth:`TreeMask.staged`, drawn from the chunk's ``offset``), against the
        reference evaluator's outputs of the kept trees; label rows at a tie (:func:`tie_gaps`
        on its margins, within ``tie_bound``) counted apart."""
        ens = self.subject.ens
        feed, keep = mask.staged(X.shape[0], offset)
        margins = evaluate.margin(ens, X_tree, keep=keep)
        expected = evaluate.outputs(ens, margins, self.raw)
        label = expected.get("label")
        for runner, dev, walk, rows_per_run in self.runners:
            got = runner.run(X, self._per_run(rows_per_run), feed)
            for name, exp in expected.items():
                ties = None
                if name == "label" and label is not None and self.tie_bound > 0 and name in got:
                    ties = functools.partial(_tie_rows, ens, margins, label, got[name], self.tie_bound)
                if name not in got:
                    yield walk, OutputReport(f"{name} (tree mask)", dev, 0, 0, 0.0, 0.0, problem="output missing from the graph")
                    continue
                yield walk, compare(f"{name} (tree mask)", dev, got[name], np.asarray(exp), X, atol, self.rtol, name == "label",
                                    self.max_report, offset, near, ties)

    def _leaves(self, X_tree: np.ndarray, names: dict[int, np.ndarray] | None) -> np.ndarray:
        """The leaves the graph's routing must give (:meth:`Subject.leaves`), whose they are
        recorded in ``routing_by``; where they are the library's, on :data:`CROSS_CHECK_ROWS`
        rows of the first chunk the reference evaluator's too, the rows where the two disagree
        counted in ``disagree`` (what the IR read of the model would misroute)."""
        leaves, whose, why_not = self.subject.leaves(X_tree, names, library=not self.why_not)
        if why_not is not None:  # (the library is not asked again: the rest of the rows go the same way)
            self.why_not.append(why_not)
        if not self.routing_by:
            self.routing_by.append(whose)
            if whose != EVALUATOR:  # (rows spread over the chunk: random, threshold, NaN, extreme alike)
                sample = np.unique(np.linspace(0, X_tree.shape[0] - 1, min(X_tree.shape[0], CROSS_CHECK_ROWS)).astype(np.intp))
                differ = (evaluate.apply(self.subject.ens, X_tree[sample]) != leaves[sample]).any(axis=1)
                self.disagree[:] = [int(np.count_nonzero(differ)), int(differ.size), int(X_tree.shape[0])]
        elif whose not in self.routing_by:
            self.routing_by.append(whose)
        return leaves

    def _ties(self, X: np.ndarray, names: dict[int, np.ndarray] | None, expected: dict[str, np.ndarray], got: np.ndarray,
              atol: Any) -> Callable[[np.ndarray], np.ndarray] | None:
        """``ties(rows)`` for :func:`compare` of the labels: the gaps between the scores of the
        model's label and the graph's, where they are a tie: the library's raw scores of the
        differing rows alone (a second call to the library, on those rows only) within
        ``tie_bound``; an attention classifier's probabilities within twice their tolerance
        (``atol``: a number, or [N, 1] per row; and ``rtol``, probabilities being at most 1)."""
        label = np.asarray(expected["label"])
        if self.forest_ties and "probabilities" in expected:
            proba = np.asarray(expected["probabilities"])
            bound = 2.0 * (np.broadcast_to(np.asarray(atol, np.float64).reshape(-1), (proba.shape[0],)) + self.rtol)
            return lambda rows: tie_gaps(self.subject.ens, proba[rows], label[rows], got[rows], bound[rows])
        if self.tie_bound <= 0:
            return None

        def gaps(rows: np.ndarray) -> np.ndarray:
            subset = None if names is None else {j: v[rows] for j, v in names.items()}
            scores = self.subject.expected(X[rows], True, subset)[0].get("variable")
            if scores is None:
                return np.full(rows.size, np.nan)
            return tie_gaps(self.subject.ens, np.asarray(scores).reshape(rows.size, -1), label[rows], got[rows], self.tie_bound)

        return gaps

    def _outputs(self, got: dict[str, np.ndarray], dev: str, expected: dict[str, np.ndarray], leaves_ref: np.ndarray | None,
                 X: np.ndarray, offset: int, near: np.ndarray | None, atol: Any, names: dict[int, np.ndarray] | None = None,
                 weights_atol: np.ndarray | None = None) -> Iterator[OutputReport]:
        """The report of each output of one run: the model's outputs (within ``atol``: a number,
        or [N, 1] per row; an attention graph's :data:`TREE_WEIGHTS` among them, within
        ``weights_atol`` [N]), routing (leaf ids) and a ``--leaves`` graph's own leaf output."""
        for name, exp in expected.items():
            if name not in got:
                yield OutputReport(name, dev, 0, 0, 0.0, 0.0, problem="output missing from the graph")
                continue
            ties = self._ties(X, names, expected, got[name], atol) if name == "label" else None
            tol: Any = weights_atol[:, None] if name == TREE_WEIGHTS and weights_atol is not None else atol
            yield compare(name, dev, got[name], np.asarray(exp), X, tol, self.rtol, name in ("label", PROXIMITY), self.max_report, offset, near, ties)
        if leaves_ref is not None and self.leaf_ids is not None:
            try:
                got_leaves = self.leaf_ids(got[self.leaf_name])
            except ValueError as exc:  # an index of the wrong shape: a broken graph
                raise VerificationError(f"the graph's leaf ids: {exc}") from exc
            yield compare("routing", dev, got_leaves, leaves_ref, X, 0, 0, True, self.max_report, offset, near)
        if leaves_ref is not None and self.leaf_ids is not None and "leaves" in got:  # a --leaves graph's own output
            yield compare("leaves", dev, got["leaves"], leaves_ref, X, 0, 0, True, self.max_report, offset, near)

    def notes(self) -> list[str]:
        """The report's notes on what the checks met: rows whose tolerance passes the outputs'
        whole range (``loose``, ``loose_weights``), an oblique model's rows near a hyperplane (``near``), the
        library's leaves and the reference evaluator's apart (``disagree``), the library's
        leaves unusable (``why_not``)."""
        notes = []
        if self.loose[0]:
            notes.append(
                f"{self.loose[0]} rows lie so far from every leaf mean they reach (for the softmax's scale) that "
                "float32 cannot weigh their trees: their tolerance passes the outputs' whole range, so their values are not "
                "checked (their routing is); a --dtype float64 graph checks them"
            )
        if self.loose_weights[0]:
            notes.append(
                f"{self.loose_weights[0]} rows' tree weights are not checked: the bound on the graph's rounding of them reaches 1, "
                "their whole range (rows so far from their leaf means, for the softmax's scale, that float32 cannot weigh their "
                "trees; a --dtype float64 graph checks them)"
            )
        if self.subject.ens.is_oblique:
            notes.append(_oblique_note(self.subject, self.near[0]))
        if self.disagree[0]:
            notes.append(
                f"tree2mat's reference evaluator and {self.routing_by[0]} put {self.disagree[0]} of {self.disagree[1]} "
                f"rows spread over the first {self.disagree[2]} in different leaves: tree2mat read the model wrong (a bug: please "
                f"report it); the routing above is checked against {self.routing_by[0]}'s own leaves"
            )
        if self.proximity is not None:
            notes.append(self.proximity.note())
        if self.why_not:
            notes.append(f"routing checked against tree2mat's reference evaluator, not the library's own leaves: {self.why_not[0]} (please report it)")
        return notes


def _tie_rows(ens: Ensemble, margins: np.ndarray, label: np.ndarray, got: np.ndarray, bound: float, rows: np.ndarray) -> np.ndarray:
    """:func:`tie_gaps` of the ``rows`` (a staged check's: margins of the kept trees)."""
    return tie_gaps(ens, margins[rows], label[rows], got[rows], bound)


def _check_rows(checks: _Checks, source: Rows, data_rows: int, cast: np.dtype | None, named: bool,
                progress: Callable[[int, float], None] | None) -> tuple[list[OutputReport], int, set[int]]:
    """Every chunk of ``source`` (``data_rows`` rows at a time; ``cast``: your data's numbers to
    the graph's dtype, see :func:`_data_rows`) checked on every run: the reports merged per
    output, the rows checked, and of your data's named-category columns (``named``) those no row
    reached. ``progress(rows_done, fraction)`` as the checks begin and after each chunk."""
    reports: dict[tuple[str, str, str], OutputReport] = {}
    done = 0
    # (your data's named-category columns: whether any row holds one of the model's categories)
    unreached = set(dict(checks.subject.ens.category_labels)) if named else set()
    if progress is not None:  # (the model read, the rows ready: the checks begin)
        progress(0, 0.0)
    for X in read_chunks(source, data_rows):
        X = _data_rows(X, cast) if cast is not None else X
        for walk, rep in checks.chunk(X, source.names, done):
            _add(reports, walk, checks.max_report, rep)
        unreached -= _reached(checks.subject.ens, X, unreached)
        done += X.shape[0]
        if progress is not None:
            progress(done, source.fraction_read)
    return list(reports.values()), done, unreached


def _oblique_note(subject: Subject, near: int) -> str:
    """What verify did with an oblique model's rows near its hyperplanes."""
    ens = subject.ens
    dtype = np.dtype(ens.source_dtype).name
    return (
        f"oblique nodes: {near} rows lie within {dtype} rounding of a hyperplane on their path (near-boundary); the graph "
        f"sums w . x term by term in {dtype} as the model's definition does, so they are checked exactly like any row; a "
        "mismatch among them is still a mismatch, counted apart as near a hyperplane (a runtime that sums in another order "
        "or fuses multiply-adds)"
    )


def _add(reports: dict[tuple[str, str, str], OutputReport], walk: str, max_report: int, rep: OutputReport) -> None:
    """``rep``, of the graph's ``walk``, merged into ``reports``."""
    key = (rep.device, walk, rep.name)
    reports[key] = merge(reports.get(key), replace(rep, walk=walk), max_report)


def _data_rows(X: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Rows of the user's data (numeric: every :class:`Rows` checks) as the graph takes them
    (beyond float32 is inf, as any cast makes it)."""
    with np.errstate(over="ignore"):
        return np.ascontiguousarray(X, dtype)


def _reached(ens: Ensemble, X: np.ndarray, columns: set[int]) -> set[int]:
    """Of ``columns`` (named categories), those where a row of ``X`` holds one of the model's
    categories (a code the model takes as one)."""
    labels = dict(ens.category_labels)
    return {j for j in columns if named_codes(X[:, j], ens.category_codes, len(labels[j]))[1].any()}



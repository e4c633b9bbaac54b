"""The rows a check or timing reads (:class:`Rows`): their interface, rows already in memory
(:class:`ArrayRows`), and what every file reader shares: the codes of named categories
(:func:`encoder`) and reading chunks with a file's errors as :class:`DataError`
(:func:`read_chunks`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from tree2mat.errors import DataError


class Rows:
    """A source of rows [N, F]. ``n_rows`` is None until known (a .csv, before its end);
    ``fraction_read`` says how far :meth:`chunks` has got (0 to 1): the rows yielded so far
    (``_done``) of ``n_rows``; by bytes for a .csv. ``names``: for the chunk last yielded, the
    cells of each column of named categories as the file holds them (empty: none)."""

    name: str
    n_features: int
    n_rows: int | None
    dtype: np.dtype
    _done: int = 0
    names: dict[int, np.ndarray] = {}  # noqa: RUF012 (replaced, never changed in place)
    #: Per column of named categories: [cells given, cells naming no category, a few of those].
    unnamed: dict[int, list[Any]]

    def _tally(self, j: int, cells: np.ndarray, codes: np.ndarray) -> None:
        """Count the cells of column ``j`` that name no category (their codes NaN, the cell not
        empty): they are read as an unseen category, and a file of codes would be all of them."""
        if not hasattr(self, "unnamed"):
            self.unnamed = {}
        given = np.asarray([c is not None and not (isinstance(c, float) and np.isnan(c)) and c != "" for c in cells], bool)
        lost = given & np.isnan(codes)
        entry = self.unnamed.setdefault(j, [0, 0, []])
        entry[0] += int(given.sum())
        entry[1] += int(lost.sum())
        for c in cells[lost][:3]:
            if len(entry[2]) < 3 and str(c) not in entry[2]:
                entry[2].append(str(c))

    def unnamed_notes(self, labels: Labels, columns: Sequence[str] | None = None) -> list[str]:
        """What the report says of the named-category columns whose cells named no category."""
        notes = []
        for j, (given, lost, examples) in sorted(getattr(self, "unnamed", {}).items()):
            if not lost:
                continue
            known = ", ".join(repr(v) for v in list(labels[j])[:5]) + (", ..." if len(labels[j]) > 5 else "")
            what = f"column {j}" + (f" ({columns[j]})" if columns else "")
            shown = ", ".join(repr(v) for v in examples)
            if lost == given:
                notes.append(f"{what}: none of its {given:,} cells names one of the model's categories ({known}), e.g. {shown}: all read "
                             "as an unseen category; if the file holds the categories' codes, give --category-codes")
            else:
                notes.append(f"{what}: {lost:,} of {given:,} cells name none of the model's categories, e.g. {shown}: read as an unseen category")
        return notes

    def chunks(self, rows: int) -> Iterator[np.ndarray]:  # pragma: no cover - interface
        raise NotImplementedError

    @property
    def fraction_read(self) -> float:
        return self._done / max(self.n_rows or 1, 1)


class ArrayRows(Rows):
    """Rows already in memory."""

    def __init__(self, X: Any, name: str = "data") -> None:
        X = np.asarray(X)
        _check_array_shape(X.shape, X.dtype, name)
        self.X, self.name = X, name
        self.n_rows, self.n_features, self.dtype = int(X.shape[0]), int(X.shape[1]), X.dtype

    def chunks(self, rows: int) -> Iterator[np.ndarray]:
        for start in range(0, self.X.shape[0], rows):
            self._done = min(start + rows, self.X.shape[0])
            yield self.X[start:start + rows]


Labels = Mapping[int, Sequence[Any]]


def encoder(labels: Sequence[Any]) -> Callable[[Any], float]:
    """A cell (text, or a value read from parquet) to the code of the category it names: its
    position in ``labels``; NaN for an empty cell or a name not among them. Numbers name numeric
    labels by value ("2.0" is the category 2)."""
    by_name = {str(label): float(i) for i, label in enumerate(labels)}
    by_value = {float(label): float(i) for i, label in enumerate(labels) if not isinstance(label, str)}

    def code(cell: Any) -> float:
        if cell is None or (isinstance(cell, float) and np.isnan(cell)):
            return np.nan
        text = cell if isinstance(cell, str) else str(cell)  # a name matches exactly, as in pandas
        if text in by_name:
            return by_name[text]
        try:
            return by_value.get(float(text), np.nan)
        except ValueError:
            return np.nan

    return code


def read_chunks(rows: Rows, n: int) -> Iterator[np.ndarray]:
    """``rows.chunks(n)``, with a file's read errors as :class:`DataError`, and a file with no
    rows refused."""
    seen = 0
    try:
        for chunk in rows.chunks(n):
            seen += chunk.shape[0]
            yield chunk
    except DataError:
        raise
    except Exception as exc:
        raise DataError(f"{rows.name}: cannot read data: {type(exc).__name__}: {exc}") from exc
    if seen == 0:
        raise DataError(f"{rows.name}: data must be a non-empty 2-D array [rows, features], got no rows")


def _check_array_shape(shape: tuple, dtype: np.dtype, name: str) -> None:
    if len(shape) != 2 or shape[0] == 0:
        raise DataError(f"{name}: data must be a non-empty 2-D array [rows, features], got shape {tuple(shape)}")
    if dtype.kind not in "biuf" or dtype.hasobject or dtype.fields is not None:
        raise DataError(f"{name}: data must be numeric, got {dtype}")

""".csv files, read a chunk of lines at a time, and whether their first line is a header
(:func:`_has_header`; see :mod:`tree2mat.data`)."""

from __future__ import annotations

import codecs
import csv
import itertools
import re
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

from tree2mat.data._rows import Labels, Rows, encoder
from tree2mat.errors import DataError

#: Longest .csv line read (a file without line breaks is not read whole into memory).
MAX_CSV_LINE = 64 * 2**20


class _CsvRows(Rows):
    dtype = np.dtype(np.float64)

    def __init__(self, path: Path, labels: Labels, header: bool | None = None) -> None:
        self.name, self.path = str(path), path
        self.size = max(path.stat().st_size, 1)
        self.labels = labels
        with path.open("rb") as fh:
            _skip_bom(fh)
            while True:  # (blank lines are skipped, before the first line too)
                self.start = fh.tell()
                line = _csv_line(fh, self.name)
                if not line or line.strip():
                    break
            first = line.decode("utf-8").strip()
        if not first:
            raise DataError(f"{path}: data must be a non-empty 2-D array [rows, features], got an empty file")
        #: The first line's cells as the csv module reads them (quotes removed; names may hold
        #: quoted commas); ``start``: the byte it starts at (past a byte order mark, blank lines).
        self.first = next(csv.reader([first]))
        self.header = _has_header(self.first, _quoted(first, len(self.first)), labels, header, self.name)
        self.n_features = len(self.first)
        self.n_rows = None
        self._read = 0

    def chunks(self, rows: int) -> Iterator[np.ndarray]:
        def cell(text: str) -> float:
            return float(text.strip() or "nan")  # an empty cell is a missing value

        converters = {j: encoder(names) for j, names in self.labels.items() if j < self.n_features}

        seen = 0
        with self.path.open("rb") as fh:
            fh.seek(self.start)
            self._read += self.start
            if self.header:
                self._read += len(_csv_line(fh, self.name))
            while True:
                raw = list(itertools.takewhile(bool, (_csv_line(fh, self.name) for _ in range(rows))))
                if not raw:
                    break
                self._read += sum(len(line) for line in raw)
                lines = [line.decode("utf-8") for line in raw]
                lines = [line for line in lines if line.strip()]
                if not lines:
                    continue
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    if converters:
                        X = self._named_rows(lines, converters, cell, seen)
                    else:
                        X = np.loadtxt(lines, delimiter=",", dtype=np.float64, ndmin=2, converters=cell, quotechar='"')
                if X.shape[1] != self.n_features:
                    raise DataError(
                        f"{self.name}: row {seen + 1} onwards has {X.shape[1]} columns, the first line {self.n_features}"
                    )
                seen += X.shape[0]
                yield X
        self.n_rows = seen

    def _named_rows(self, lines: list[str], converters: dict[int, Callable[[Any], float]], cell: Callable[[str], float], seen: int) -> np.ndarray:
        """Rows with named categories (read as CSV, quotes and all): numbers, and the codes of
        the names; the names as read kept in ``names``."""
        table = list(csv.reader(lines))
        if any(len(row) != self.n_features for row in table):
            raise DataError(f"{self.name}: row {seen + 1} onwards has a row of another width than the first line's {self.n_features}")
        self.names = {j: np.asarray([row[j] if row[j] else None for row in table], object) for j in converters}
        X = np.asarray([[converters[j](v) if j in converters else cell(v) for j, v in enumerate(row)] for row in table], np.float64)
        for j, cells in self.names.items():
            self._tally(j, cells, X[:, j])
        return X

    @property
    def fraction_read(self) -> float:
        return min(self._read / self.size, 1.0)


def _has_header(cells: list[str], quoted: list[bool], labels: Labels, header: bool | None, name: str) -> bool:
    """Whether a .csv's first line (``cells``, and which were ``quoted``) is a header: ``header``
    when given (``False`` refused where a numeric column holds text there: the rows would fail to
    read on it anyway, here named); else detected, never guessed:

    - a header when a numeric column holds text: a cell that is neither empty nor a number the
      reader takes (``float``'s spellings: ``nan``, ``inf``, ``1e5``, ...);
    - refused when the line could be either: every cell empty (a row of missing values, or a
      header of blank names), a quoted number in a numeric column (``csv.QUOTE_NONNUMERIC``
      quotes header names and nothing else, ``csv.QUOTE_ALL`` quotes every number), or cells that
      number the columns 0 to F - 1 (the header pandas writes for unnamed columns: a
      ``DataFrame`` of an array, a ``Series``);
    - with only named-category columns, a header when no cell names a category;
    - otherwise a row of data.
    """
    texts = [c.strip() for c in cells]
    numeric = [j for j in range(len(cells)) if j not in labels]
    words = [j for j in numeric if texts[j] and not _is_number(texts[j])]
    if header is False and words:
        raise DataError(
            f"{name}: --no-header, but the first line holds {cells[words[0]]!r} in column {words[0]} (from 0), "
            "which is no number: if the line is a header, leave out --no-header"
        )
    if header is not None:
        return header
    if words:
        return True
    why = ""
    if not any(texts):
        why = "every cell is empty (a row of missing values, or a header of blank names)"
    elif any(quoted[j] and texts[j] for j in numeric):
        j = next(j for j in numeric if quoted[j] and texts[j])
        why = f"column {j} (from 0) holds the quoted number {cells[j]!r} (a header's name, or a number quoted as every cell is)"
    elif texts == [str(i) for i in range(len(texts))]:
        why = f"its cells {','.join(texts)} number the columns, as pandas' header of unnamed columns does"
    if why:
        raise DataError(
            f"{name}: cannot tell whether the first line is a header or a row of data: {why}; "
            "give --header or --no-header (in Python, header=True or False)"
        )
    if not numeric:  # a header names none of the categories (a row of data names some)
        return not any(np.isfinite(encoder(labels[j])(tok)) for j, tok in enumerate(cells))
    return False


def _is_number(text: str) -> bool:
    """Whether a cell is a number the reader takes (``float``'s spellings, as the rows are read)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


#: A quoted .csv cell from its start (a doubled quote inside is a quote).
_QUOTED_CELL = re.compile(r'"(?:[^"]|"")*"')


def _quoted(line: str, n: int) -> list[bool]:
    """Which of the ``n`` cells of a .csv line (as the csv module splits it) open with a quote;
    none, where the line does not split into ``n`` cells this way (a malformed quote: the csv
    module's reading of it decides)."""
    flags: list[bool] = []
    at = 0
    while True:
        cell = _QUOTED_CELL.match(line, at)
        flags.append(cell is not None)
        comma = line.find(",", cell.end() if cell else at)
        if comma < 0:
            break
        at = comma + 1
    return flags if len(flags) == n else [False] * n


def _skip_bom(fh: IO[bytes]) -> None:
    """Skip a UTF-8 byte order mark (Excel's "CSV UTF-8" writes one) at the start of ``fh``: a
    part of no cell (read as text, it would make the first cell no number)."""
    if fh.read(len(codecs.BOM_UTF8)) != codecs.BOM_UTF8:
        fh.seek(0)


def _csv_line(fh: IO[bytes], name: str) -> bytes:
    """The next line (b"" at the end); one over MAX_CSV_LINE bytes is an error."""
    line = fh.readline(MAX_CSV_LINE + 1)
    if len(line) > MAX_CSV_LINE:
        raise DataError(f"{name}: a line is longer than {MAX_CSV_LINE // 2**20} MiB")
    return line

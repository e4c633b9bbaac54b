"""Rows to check or time: a whole array, or a file read a chunk of rows at a time.

:func:`open_rows` opens ``.npy``, ``.npz``, ``.csv`` or ``.parquet`` and reads only the header;
:meth:`Rows.chunks` then yields 2-D arrays of at most ``rows`` rows each, so a file of many GB
is checked in constant memory (``verify --data``). Files are read with plain reads, not memory
maps: pages of a mapped file count in the process's resident memory.

- ``.npy``: row-major files a chunk of rows at a time; column-major (``fortran_order``, what
  ``np.save`` writes for a transposed or many pandas arrays) a chunk of each column at a time.
- ``.npz``: the array named ``X``, or the only array; streamed out of the zip member (compressed
  or not); a column-major one is read whole.
- ``.csv``: comma-separated numbers (quoted or not), a UTF-8 byte order mark skipped, empty cells
  missing values; a header line where the first line holds text (:func:`_has_header`: detected,
  or said with ``header``; a first line that could be either is refused, never guessed).
- ``.parquet``: numeric columns, in batches of rows (pyarrow, the ``data`` extra).

A model whose categorical columns hold named categories (``Ensemble.category_labels``) takes
those columns of a ``.csv`` or ``.parquet`` file as the names (:func:`encoder`): each becomes its
code; a name the model never saw, and an empty cell, become NaN (no known category).
"""

from __future__ import annotations

import codecs
import csv
import itertools
import os
import re
import warnings
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Literal

import numpy as np

from tree2mat.errors import DataError, OptionError, require

DATA_SUFFIXES = (".npy", ".npz", ".csv", ".parquet")
#: Longest .csv line read (a file without line breaks is not read whole into memory).
MAX_CSV_LINE = 64 * 2**20
#: Largest .npy header read (numpy's own default limit).
MAX_HEADER_BYTES = 10_000


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


def open_rows(path: str | Path, labels: Labels | None = None, header: bool | None = None) -> Rows:
    """The rows of a data file (only its header is read here); ``labels``: per column whose
    categories are named, the names (their positions are the codes the rows get); ``header``:
    whether a ``.csv`` file's first line is a header (None: detected, see :func:`_has_header`)."""
    check_header_option(path, header)
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: no such file")
    if not path.is_file():
        raise DataError(f"{path}: not a regular file")
    suffix = path.suffix.lower()
    kinds: dict[str, Callable[[Path, Labels], Rows]] = {
        ".npy": lambda p, _: _NpyRows(p), ".npz": lambda p, _: _NpzRows(p), ".csv": lambda p, n: _CsvRows(p, n, header),
        ".parquet": _ParquetRows,
    }
    if suffix not in kinds:
        raise DataError(f"{path}: unknown data file type {suffix!r}; supported: {', '.join(DATA_SUFFIXES)}")
    try:
        return kinds[suffix](path, labels or {})
    except DataError:
        raise
    except Exception as exc:  # numpy, zipfile and pyarrow raise many types on broken files
        raise DataError(f"{path}: cannot read data: {type(exc).__name__}: {exc}") from exc


def check_header_option(data: Any, header: bool | None) -> None:
    """An OptionError where ``header`` is given for data that is no ``.csv`` file (where it would
    change nothing, so it is a mistake about the data)."""
    path = isinstance(data, (str, os.PathLike))
    if header is None or (path and Path(data).suffix.lower() == ".csv"):
        return
    what = "no --data is given" if data is None else f"{data} is no .csv file" if path else "the rows are an array"
    raise OptionError(f"--{'' if header else 'no-'}header says whether the first line of a .csv --data file is a header, and {what}")


def load_data(path: str | Path, header: bool | None = None, labels: Labels | None = None) -> np.ndarray:
    """A whole data file as one 2-D array (for data that fits in memory, e.g. ``bench``);
    ``header``, ``labels``: as for :func:`open_rows`."""
    rows = open_rows(path, labels, header)
    return np.concatenate(list(read_chunks(rows, 1 << 16)), axis=0)


def load_labelled(path: str | Path, target: str | None = None, header: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Rows and their targets, whole (``attend --data``): ``.npz``, the arrays ``X`` and ``y``
    (``target``: another name for ``y``); ``.npy``, the rows, with ``target`` the ``.npy`` file of
    the targets; ``.csv`` / ``.parquet``, every column but ``target`` (its name in the header, or
    its 0-based number), which holds the targets. ``header``: as for :func:`open_rows`."""
    check_header_option(path, header)
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".npz":
        rows = open_rows(path)
        if not isinstance(rows, _NpzRows) or rows.member != "X.npy":
            raise DataError(f"{path}: a .npz of rows and targets holds the arrays X and {target or 'y'}")
        return load_data(path), _npz_array(path, target or "y")
    if suffix == ".npy":
        if target is None or Path(target).suffix.lower() != ".npy":
            raise DataError(f"{path}: a .npy file holds the rows; name the .npy file of their targets with --target")
        return load_data(path), _targets_file(Path(target))
    if suffix not in (".csv", ".parquet"):
        raise DataError(f"{path}: unknown data file type {suffix!r}; rows with targets come as .npz, .npy (and --target y.npy), .csv or .parquet")
    if target is None:
        raise DataError(f"{path}: name the column of targets with --target (its header name or 0-based number)")
    try:
        table = load_data(path, header)
    except DataError as exc:
        raise DataError(f"{exc} (every column of a .csv or .parquet must be numbers: give text labels in a .npz or .npy)") from exc
    names = _column_names(path, header)
    if target in names:
        column = names.index(target)
    elif target.isdigit() and int(target) < table.shape[1]:
        column = int(target)
    else:
        raise DataError(f"{path}: no column {target!r} (columns: {', '.join(names[:10]) if names else f'0 to {table.shape[1] - 1}'})")
    return np.delete(table, column, axis=1), table[:, column]


def _targets_file(path: Path) -> np.ndarray:
    """A .npy file of one number per row."""
    try:
        y = np.load(path, allow_pickle=False)
    except Exception as exc:  # (numpy raises many types on a broken file)
        raise DataError(f"{path}: cannot read targets: {type(exc).__name__}: {exc}") from exc
    return _target_vector(y, str(path))


def _npz_array(path: Path, key: str) -> np.ndarray:
    try:
        with np.load(path, allow_pickle=False) as z:
            if key not in z.files:
                raise DataError(f"{path}: no array {key!r} of targets (arrays: {', '.join(z.files)})")
            y = z[key]
    except DataError:
        raise
    except Exception as exc:
        raise DataError(f"{path}: cannot read targets: {type(exc).__name__}: {exc}") from exc
    return _target_vector(y, f"{path}: {key}")


def _target_vector(y: np.ndarray, what: str) -> np.ndarray:
    """Targets [N] from [N] or [N, 1] numbers (as float64) or text labels (kept)."""
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1 or y.dtype.kind not in "biufU":
        raise DataError(f"{what}: targets must be numbers or text labels, one per row ([N] or [N, 1]); got shape {y.shape} of {y.dtype}")
    return y if y.dtype.kind == "U" else y.astype(np.float64)


def _column_names(path: Path, header: bool | None) -> list[str]:
    """A .csv's header cells (none without a header) or a .parquet's column names."""
    if path.suffix.lower() == ".parquet":
        return [f.name for f in _ParquetRows(path, {}).file.schema_arrow]
    rows = _CsvRows(path, {}, header)
    return [c.strip() for c in rows.first] if rows.header else []


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


# ----------------------------------------------------------------------------------- .npy/.npz


def _npy_header(fh: IO[bytes], name: str) -> tuple[tuple[int, ...], bool, np.dtype]:
    """Shape, column-major flag and dtype of the .npy stream ``fh``, left at its data."""
    fmt = np.lib.format
    version = fmt.read_magic(fh)
    readers = {(1, 0): fmt.read_array_header_1_0, (2, 0): fmt.read_array_header_2_0}
    if version not in readers:
        raise DataError(f"{name}: .npy format version {version[0]}.{version[1]} is not supported (1.0 or 2.0)")
    shape, fortran, dtype = readers[version](fh, max_header_size=MAX_HEADER_BYTES)
    _check_array_shape(shape, np.dtype(dtype), name)
    return tuple(int(s) for s in shape), bool(fortran), np.dtype(dtype)


def _read_rows(fh: IO[bytes], shape: tuple[int, ...], dtype: np.dtype, name: str, order: Literal["C", "F"] = "C") -> np.ndarray:
    """The next ``shape`` array of ``dtype`` from ``fh`` (read straight into a writable array)."""
    out = np.empty(shape, dtype, order=order)
    view = out.reshape(-1, order="A").data.cast("B")
    got = 0
    while got < view.nbytes:  # (a zip member's readinto may return less than asked)
        # (files opened "rb" and zip members have readinto; typeshed's IO[bytes], which ZipFile.open
        # returns for both modes, does not)
        n = fh.readinto(view[got:])  # type: ignore[attr-defined]
        if not n:
            raise DataError(f"{name}: the file is truncated (its header promises more rows than it holds)")
        got += n
    return out


class _NpyRows(Rows):
    def __init__(self, path: Path) -> None:
        self.name = str(path)
        self.path = path
        with path.open("rb") as fh:
            (n, f), self.fortran, self.dtype = _npy_header(fh, self.name)
            self.offset = fh.tell()
        self.n_rows, self.n_features = n, f
        need = self.offset + n * f * self.dtype.itemsize
        if path.stat().st_size < need:
            raise DataError(
                f"{path}: the file is truncated: its header says {n} x {f} {self.dtype} "
                f"({need} bytes with the header), the file has {path.stat().st_size}"
            )

    def chunks(self, rows: int) -> Iterator[np.ndarray]:
        n, f, item = self.n_rows or 0, self.n_features, self.dtype.itemsize
        with self.path.open("rb") as fh:
            fh.seek(self.offset)
            for start in range(0, n, rows):
                k = min(rows, n - start)
                if self.fortran:  # column j's rows start:start+k, one read each
                    out = np.empty((k, f), self.dtype)
                    for j in range(f):
                        fh.seek(self.offset + (j * n + start) * item)
                        out[:, j] = _read_rows(fh, (k,), self.dtype, self.name)
                else:
                    out = _read_rows(fh, (k, f), self.dtype, self.name)
                self._done = start + k
                yield out


class _NpzRows(Rows):
    def __init__(self, path: Path) -> None:
        self.name, self.path = str(path), path
        with zipfile.ZipFile(path) as z:
            members = [m for m in z.namelist() if m.endswith(".npy")]
            keys = [m[:-4] for m in members]
            if "X" not in keys and len(keys) != 1:
                raise DataError(f"{path}: .npz needs an array named 'X' or exactly one array; has {keys}")
            self.member = "X.npy" if "X" in keys else members[0]
            with z.open(self.member) as fh:
                (self.n_rows, self.n_features), self.fortran, self.dtype = _npy_header(fh, self.name)

    def chunks(self, rows: int) -> Iterator[np.ndarray]:
        n, f = self.n_rows or 0, self.n_features
        with zipfile.ZipFile(self.path) as z, z.open(self.member) as fh:
            _npy_header(fh, self.name)
            if self.fortran:  # a zip member cannot be read column by column: whole
                whole = _read_rows(fh, (n, f), self.dtype, self.name, order="F")
                for start in range(0, n, rows):
                    self._done = min(start + rows, n)
                    yield whole[start:start + rows]
                return
            for start in range(0, n, rows):
                k = min(rows, n - start)
                self._done = start + k
                yield _read_rows(fh, (k, f), self.dtype, self.name)


# ----------------------------------------------------------------------------------------- .csv


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


# ------------------------------------------------------------------------------------- .parquet


class _ParquetRows(Rows):
    dtype = np.dtype(np.float64)

    def __init__(self, path: Path, labels: Labels) -> None:
        self.name, self.path, self.labels = str(path), path, labels
        pq = require("pyarrow.parquet", f"{path}: reading parquet")
        self.file = pq.ParquetFile(path)
        schema = self.file.schema_arrow
        import pyarrow.types as pt

        bad = [f.name for j, f in enumerate(schema) if j not in labels and not (pt.is_integer(f.type) or pt.is_floating(f.type) or pt.is_boolean(f.type))]
        if bad:
            raise DataError(f"{path}: non-numeric columns {bad[:5]}")
        self.n_rows, self.n_features = int(self.file.metadata.num_rows), len(schema)
        if self.n_rows == 0 or self.n_features == 0:
            raise DataError(f"{path}: data must be a non-empty 2-D array [rows, features], got shape ({self.n_rows}, {self.n_features})")

    def chunks(self, rows: int) -> Iterator[np.ndarray]:
        for batch in self.file.iter_batches(batch_size=rows):
            frame = batch.to_pandas()
            self.names = {}
            for j, names in self.labels.items():
                if j < frame.shape[1]:
                    code = encoder(names)
                    self.names[j] = frame.iloc[:, j].astype(object).to_numpy()
                    codes = np.asarray([code(v) for v in self.names[j]], np.float64)
                    self._tally(j, self.names[j], codes)
                    frame.isetitem(j, codes)
            X = frame.to_numpy(dtype=np.float64, na_value=np.nan)  # nulls: missing values
            self._done += batch.num_rows
            yield X


class ColumnRows(Rows):
    """Rows of named columns for a graph with one input per column (a pipeline with string
    columns): a pandas DataFrame, or a .csv (header required) or .parquet file read by column
    name, ``columns`` picked in that order, the ``text`` ones kept as text (str, None where
    empty), the others float64. Chunks are object arrays [n, len(columns)]."""

    dtype = np.dtype(object)

    def __init__(self, data: Any, columns: Sequence[str], text: Sequence[str], header: bool | None = None) -> None:
        pd = require("pandas", "rows of named columns")
        self.columns, self.text = list(columns), set(text)
        self.n_features = len(self.columns)
        if isinstance(data, (str, os.PathLike)):
            path = Path(data)
            self.name = str(path)
            suffix = path.suffix.lower()
            if header is False:
                raise OptionError(f"{path}: the graph takes named columns ({', '.join(self.columns[:5])}...): the file needs a header naming them")
            if not path.is_file():
                raise DataError(f"{path}: no such file")
            if suffix == ".csv":
                # (text columns as written: "1" stays the category "1", not the number 1.0, and
                # "NA" the category NA; only an empty text cell is missing)
                from pandas._libs.parsers import STR_NA_VALUES

                usecols = self._present(pd.read_csv(path, nrows=0).columns)
                missing = {c: [""] if c in self.text else sorted(STR_NA_VALUES) for c in usecols}
                self._frames = lambda rows: pd.read_csv(path, usecols=usecols, dtype={c: str for c in self.text}, keep_default_na=False,
                                                        na_values=missing, chunksize=rows)
                self.n_rows = None
            elif suffix == ".parquet":
                pq = require("pyarrow.parquet", f"{path}: reading parquet")
                file = pq.ParquetFile(path)
                present = self._present(file.schema_arrow.names)
                self._frames = lambda rows: (b.to_pandas() for b in file.iter_batches(batch_size=rows, columns=present))
                self.n_rows = int(file.metadata.num_rows)
            else:
                raise DataError(f"{path}: the graph takes named columns: give a .csv (with a header) or .parquet file, not {suffix or 'this file'}")
        else:
            frame = data if isinstance(data, pd.DataFrame) else pd.DataFrame(np.asarray(data), columns=self.columns if np.ndim(data) == 2 and np.shape(data)[1] == len(self.columns) else None)
            self.name = "data"
            present = self._present([str(c) for c in frame.columns])
            frame = frame.rename(columns=str)[present]
            self._frames = lambda rows: (frame.iloc[i:i + rows] for i in range(0, len(frame), rows))
            self.n_rows = len(frame)
        if self.n_rows == 0:
            raise DataError(f"{self.name}: data must be a non-empty 2-D array [rows, features], got no rows")

    def _present(self, have: Sequence[str]) -> list[str]:
        missing = [c for c in self.columns if c not in set(map(str, have))]
        if missing:
            raise DataError(f"{self.name}: no column {', '.join(repr(c) for c in missing[:5])}: the graph takes the columns "
                            f"{', '.join(self.columns)} by name (a header row names them)")
        return self.columns

    def chunks(self, rows: int) -> Iterator[np.ndarray]:
        for frame in self._frames(rows):
            out = np.empty((len(frame), self.n_features), dtype=object)
            for j, c in enumerate(self.columns):
                col = frame[c]
                if c in self.text:
                    out[:, j] = [None if v is None or (isinstance(v, float) and np.isnan(v)) else str(v) for v in col]
                else:
                    try:
                        out[:, j] = col.to_numpy(dtype=np.float64, na_value=np.nan)
                    except (TypeError, ValueError) as exc:
                        raise DataError(f"{self.name}: column {c!r} must be numeric (the graph takes it as a number): {exc}") from exc
            self._done += len(frame)
            yield out

    @property
    def fraction_read(self) -> float:
        return 0.0 if self.n_rows is None else self._done / max(self.n_rows, 1)


def one_hot(y: Any, classes: np.ndarray) -> np.ndarray:
    """Bool [N, C]: which of ``classes`` each label of ``y`` is (none for an unknown label);
    text (str or object arrays) compared as text, numbers as numbers."""
    y, classes = np.asarray(y).reshape(-1), np.asarray(classes)
    if y.dtype.kind in "OUS" or classes.dtype.kind in "OUS":
        return y.astype(str)[:, None] == classes.astype(str)[None, :]
    return y[:, None] == classes[None, :]

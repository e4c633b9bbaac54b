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
  missing values; a header line where the first line holds text
  (:func:`~tree2mat.data._csv._has_header`: detected, or said with ``header``; a first line that
  could be either is refused, never guessed).
- ``.parquet``: numeric columns, in batches of rows (pyarrow, the ``data`` extra).

A model whose categorical columns hold named categories (``Ensemble.category_labels``) takes
those columns of a ``.csv`` or ``.parquet`` file as the names (:func:`encoder`): each becomes its
code; a name the model never saw, and an empty cell, become NaN (no known category).

The package: :mod:`~tree2mat.data._rows` (the :class:`Rows` interface, rows in memory, the codes
of named categories), a reader per file type (:mod:`~tree2mat.data._npy` for ``.npy`` and
``.npz``, :mod:`~tree2mat.data._csv`, :mod:`~tree2mat.data._parquet`) and
:mod:`~tree2mat.data._columns` (rows of named columns, for a pipeline with string columns); here,
opening a file by its type, and whole files of rows (and of rows with their targets).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tree2mat.data._columns import ColumnRows
from tree2mat.data._csv import _CsvRows
from tree2mat.data._npy import _NpyRows, _NpzRows
from tree2mat.data._parquet import _ParquetRows
from tree2mat.data._rows import ArrayRows, Labels, Rows, encoder, read_chunks
from tree2mat.errors import DataError, OptionError

DATA_SUFFIXES = (".npy", ".npz", ".csv", ".parquet")


def open_rows(path: str | Path, labels: Labels | None = None, header: bool | None = None) -> Rows:
    """The rows of a data file (only its header is read here); ``labels``: per column whose
    categories are named, the names (their positions are the codes the rows get); ``header``:
    whether a ``.csv`` file's first line is a header (None: detected, see
    :func:`~tree2mat.data._csv._has_header`)."""
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


def one_hot(y: Any, classes: np.ndarray) -> np.ndarray:
    """Bool [N, C]: which of ``classes`` each label of ``y`` is (none for an unknown label);
    text (str or object arrays) compared as text, numbers as numbers."""
    y, classes = np.asarray(y).reshape(-1), np.asarray(classes)
    if y.dtype.kind in "OUS" or classes.dtype.kind in "OUS":
        return y.astype(str)[:, None] == classes.astype(str)[None, :]
    return y[:, None] == classes[None, :]


__all__ = [
    "DATA_SUFFIXES", "ArrayRows", "ColumnRows", "Labels", "Rows", "check_header_option", "encoder", "load_data", "load_labelled",
    "one_hot", "open_rows", "read_chunks",
]

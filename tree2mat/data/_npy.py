""".npy and .npz files, read a chunk of rows at a time (see :mod:`tree2mat.data`)."""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Literal

import numpy as np

from tree2mat.data._rows import Rows, _check_array_shape
from tree2mat.errors import DataError

#: Largest .npy header read (numpy's own default limit).
MAX_HEADER_BYTES = 10_000


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

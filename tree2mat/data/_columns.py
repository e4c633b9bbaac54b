"""Rows of named columns (:class:`ColumnRows`), for the graph of a pipeline with string columns
(:func:`tree2mat.pipelines.graph_columns`)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tree2mat.data._rows import Rows
from tree2mat.errors import DataError, OptionError, require


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
            if isinstance(data, pd.DataFrame):
                frame = data
            else:
                named = np.ndim(data) == 2 and np.shape(data)[1] == len(self.columns)
                frame = pd.DataFrame(np.asarray(data), columns=self.columns if named else None)
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

""".parquet files, read in batches of rows (pyarrow, the ``data`` extra; see :mod:`tree2mat.data`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from tree2mat.data._rows import Labels, Rows, encoder
from tree2mat.errors import DataError, require


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

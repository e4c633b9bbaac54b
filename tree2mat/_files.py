"""Atomic file writes: a temporary file in the target folder, then a rename. A failed or
interrupted write leaves no partial file and never touches an existing one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from tree2mat.errors import OptionError, Tree2MatError


def atomic_write(path: str | Path, data: bytes) -> int:
    """Write ``data`` to ``path`` atomically; return the number of bytes written."""
    path = Path(path)
    if path.is_dir():
        raise OptionError(f"{path}: is a directory")
    if not path.parent.exists():
        raise OptionError(f"{path.parent}: no such directory")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise Tree2MatError(f"{path}: cannot write: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise Tree2MatError(f"{path}: cannot write: {exc.strerror or exc}") from exc
        raise
    return len(data)

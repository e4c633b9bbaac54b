"""Atomic file writes: a temporary file in the target folder, then a rename. A failed or
interrupted write leaves no partial file and never touches an existing one."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from tree2mat.errors import OptionError, Tree2MatError


def _mode_for(path: Path) -> int:
    """The mode of the file being replaced, else 0666 less the umask."""
    try:
        return path.stat().st_mode & 0o777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def writable_target(path: str | Path) -> Path:
    """The file a write to ``path`` replaces: a symbolic link is written through (its target is
    replaced); anything else that is not a regular file (a directory, a device, a FIFO) is
    refused, as is a missing folder."""
    path = Path(path)
    if str(path) == "-":
        raise OptionError("'-' is not a file name here; give a path")
    if path.is_symlink():
        path = path.resolve()
    if path.exists() and not path.is_file():
        raise OptionError(f"{path}: exists and is not a regular file")
    if not path.parent.is_dir():
        raise OptionError(f"{path.parent}: no such directory")
    return path


def atomic_write(path: str | Path, data: bytes) -> int:
    """Write ``data`` to ``path`` atomically (see :func:`writable_target`); return the number of
    bytes written."""
    path = writable_target(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise Tree2MatError(f"{path}: cannot write: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, _mode_for(path))  # mkstemp makes 0600; give the file the usual mode
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise Tree2MatError(f"{path}: cannot write: {exc.strerror or exc}") from exc
        raise
    return len(data)


def atomic_write_files(path: str | Path, write: Callable[[Path], None], companions: tuple[str, ...]) -> int:
    """Write a file and its companion files (``path`` + each suffix in ``companions``) atomically
    as a set: ``write(tmp)`` writes them under a temporary folder in the target folder, then they
    are renamed into place, companions first. Returns the bytes written in all."""
    path = writable_target(path)
    for suffix in companions:
        writable_target(path.with_name(path.name + suffix))
    try:
        tmpdir = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    except OSError as exc:
        raise Tree2MatError(f"{path}: cannot write: {exc.strerror or exc}") from exc
    try:
        tmp = tmpdir / path.name
        write(tmp)
        total = 0
        for suffix in (*companions, ""):
            part = tmpdir / (path.name + suffix)
            os.chmod(part, _mode_for(path))
            total += part.stat().st_size
            os.replace(part, path.with_name(path.name + suffix))
        return total
    except OSError as exc:
        raise Tree2MatError(f"{path}: cannot write: {exc.strerror or exc}") from exc
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)

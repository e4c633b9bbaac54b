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
    """Write a file and companion files beside it (``companions``: their names) as a set:
    ``write(tmp)`` writes ``tmp`` (named as ``path``) and the companions into a temporary folder
    in the target folder; then the companions are renamed into place, and the file last, so that
    the file never refers to companions that are not there yet. Returns the bytes written."""
    if Path(path).is_symlink():
        raise OptionError(f"{path}: a file with companion files is not written through a symbolic link; give the real path")
    path = writable_target(path)
    for name in companions:
        writable_target(path.with_name(name))
    try:
        tmpdir = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    except OSError as exc:
        raise Tree2MatError(f"{path}: cannot write: {exc.strerror or exc}") from exc
    try:
        write(tmpdir / path.name)
        total = 0
        for name in (*companions, path.name):
            part = tmpdir / name
            os.chmod(part, _mode_for(path))
            total += part.stat().st_size
            os.replace(part, path.with_name(name))
        return total
    except OSError as exc:
        raise Tree2MatError(f"{path}: cannot write: {exc.strerror or exc}") from exc
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)

"""Atomic file writes: a temporary file in the target folder, then a rename. A failed or
interrupted write leaves no partial file and never touches an existing one."""

from __future__ import annotations

import functools
import os
import secrets
import shutil
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


#: The longest file name (bytes) the file systems tree2mat writes to take.
NAME_MAX = 255


def check_name(path: Path, flag: str = "") -> None:
    """An OptionError when ``path``'s name is longer than a file system takes (the command line
    checks its outputs before any work: ``flag`` names the option)."""
    size = len(os.fsencode(path.name))
    if size > NAME_MAX:
        raise OptionError(f"{flag + ' ' if flag else ''}{path}: a file name of {size} bytes; the file system takes {NAME_MAX} at most")


def writable_target(path: str | Path) -> Path:
    """The file a write to ``path`` replaces: a symbolic link is written through (its target is
    replaced); anything else that is not a regular file (a directory, a device, a FIFO) is
    refused, as are a missing folder and a name the file system cannot take."""
    path = Path(path)
    if str(path) == "-":
        raise OptionError("'-' is not a file name here; give a path")
    check_name(path)
    if path.is_symlink():
        path = path.resolve()
    if path.exists() and not path.is_file():
        raise OptionError(f"{path}: exists and is not a regular file")
    if not path.parent.is_dir():
        raise OptionError(f"{path.parent}: no such directory")
    return path


def temporary_name(path: Path) -> Path:
    """A fresh name for a temporary file beside ``path``: its name (cut so that the whole fits in
    255 bytes, as any legal ``path`` does), 16 random hex digits, ``.tmp``. The name is known
    before the file exists, so that whatever interrupts a write (Ctrl-C, SIGTERM: exceptions
    here, raised at any point) finds it to remove."""
    name = path.name.encode("utf-8", "surrogateescape")[:200].decode("utf-8", "ignore")
    return path.with_name(f".{name}.{secrets.token_hex(8)}.tmp")


def atomic_write(path: str | Path, data: bytes) -> int:
    """Write ``data`` to ``path`` atomically (see :func:`writable_target`); return the number of
    bytes written. No temporary file survives an error, Ctrl-C or SIGTERM at any point."""
    path = writable_target(path)
    tmp = temporary_name(path)
    try:
        # O_EXCL: the file is this write's own (so it is this write's to remove, made or not)
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as fh:
            fh.write(data)
        os.chmod(tmp, _mode_for(path))  # made 0600; give the file the usual mode
        os.replace(tmp, path)
    except BaseException as exc:
        if not isinstance(exc, FileExistsError):  # (that name, 64 random bits, was not ours)
            _remove(lambda: tmp.unlink(missing_ok=True))
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
    tmpdir, ours = temporary_name(path), True
    placed: list[Path] = []  # companions renamed into place that were not there before
    try:
        try:
            os.mkdir(tmpdir, 0o700)  # (fails if it exists: the folder is this write's own)
        except FileExistsError:
            ours = False
            raise
        write(tmpdir / path.name)
        total = 0
        for name in (*companions, path.name):
            part, target = tmpdir / name, path.with_name(name)
            os.chmod(part, _mode_for(path))
            total += part.stat().st_size
            if name != path.name and not target.exists():
                placed.append(target)  # (before the rename: an interruption during it still finds it)
            os.replace(part, target)
        return total
    except BaseException as exc:
        if (tmpdir / path.name).exists():  # (the file itself not yet in place: the companions placed refer to nothing)
            for target in placed:
                _remove(functools.partial(target.unlink, missing_ok=True))
        if isinstance(exc, OSError):
            raise Tree2MatError(f"{path}: cannot write: {exc.strerror or exc}") from exc
        raise
    finally:
        if ours:
            _remove(lambda: shutil.rmtree(tmpdir, ignore_errors=True))


def _remove(clean: Callable[[], None]) -> None:
    """``clean()``, again if a second Ctrl-C or SIGTERM (an exception here) breaks into it: a
    temporary file is removed however often the user presses."""
    for _ in range(8):
        try:
            clean()
            return
        except KeyboardInterrupt:
            continue


def _same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file: the same path once symbolic links are followed, or the
    same inode (a hard link)."""
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and os.path.samefile(a, b))
    except OSError:  # (a loop of links, a folder that cannot be read: not provably one file)
        return False


def check_outputs(outputs: dict[str, str | Path | None], inputs: dict[str, str | Path | None]) -> None:
    """An OptionError, before any work, when an output (``flag -> path``; ``-`` is stdout) names
    one of the command's inputs (``name -> path``) or another of its outputs, through symbolic or
    hard links too: no command writes over what it reads, or writes two results to one file."""
    given = [(flag, Path(p)) for flag, p in outputs.items() if p is not None and str(p) != "-"]
    read = [(name, Path(p)) for name, p in inputs.items() if p is not None and str(p) != "-"]
    for i, (flag, out) in enumerate(given):
        for name, src in read:
            if _same_file(out, src):
                raise OptionError(f"{flag} {out} is {name} ({src}): a command never writes over its input; write to another file")
        for other, path in given[i + 1:]:
            if _same_file(out, path):
                raise OptionError(f"{flag} {out} and {other} {path} are one file; give each its own")

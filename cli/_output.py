"""What the commands share for output: checking output paths, writing files, describing a
graph's inputs and outputs, sizes, and the libraries' prints sent to stderr."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import typer

from tree2mat._files import atomic_write, check_name, check_outputs
from tree2mat.errors import OptionError


def _check_written_model(output: Path, what: str, example: str, *, model: Path, data: Path, target: str | None, json_out: Path | None = None) -> None:
    """An OptionError unless ``-o`` names a file to write ``what`` to (not ``-``, writable) that is
    none of the command's inputs (MODEL, --data, a --target file) nor its --json report."""
    if str(output) == "-":
        raise OptionError(f"-o -: {what} is a file; name it, e.g. {example}")
    _check_output("-o", output)
    _check_output("--json", json_out)
    target_file = Path(target) if target and Path(target).is_file() else None  # (else a column's name)
    check_outputs({"-o": output, "--json": json_out}, {"MODEL": model, "--data": data, "--target": target_file})


def _finite(figures: dict[str, float]) -> dict[str, float | None]:
    """Figures for JSON: NaN (R^2 of a constant target) as null."""
    return {k: (v if np.isfinite(v) else None) for k, v in figures.items()}


def _figure(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def _auto_number(flag: str, text: str) -> float | str:
    """``auto`` or a number, from an option's text."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        return float(text)
    except ValueError:
        raise OptionError(f"{flag} {text!r}: give a number or auto") from None


def _describe_io(io: dict[str, Any]) -> str:
    return f"{io['name']} [{', '.join('?' if d is None else str(d) for d in io['shape'])}] {io['dtype']}"


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _write_text(path: Path, text: str) -> None:
    atomic_write(path, text.encode("utf-8"))


def _check_output(flag: str, path: Path | None, png: bool = False) -> None:
    """An output file option, checked before any work: its folder exists; a picture is named
    *.png. A report's '-' is stdout (a picture has no '-')."""
    if path is None or (str(path) == "-" and not png):
        return
    if png and path.suffix.lower() != ".png":
        raise OptionError(f"{flag} {path}: the picture is a PNG; name the file *.png")
    check_name(path, flag)
    if not path.parent.is_dir():
        raise OptionError(f"{flag} {path}: no such directory {path.parent}")


def _emit(text: str, output: Path | None) -> None:
    if output is None or str(output) == "-":
        typer.echo(text)
    else:
        _write_text(output, text + "\n")


@contextlib.contextmanager
def _libraries_to_stderr() -> Iterator[None]:
    """While a command works, what the libraries print goes to stderr: stdout holds the command's
    result alone (``--json -`` pipes into a parser). LightGBM writes its warnings (e.g. "Ignoring
    unrecognized parameter" on an older model text) through Python's ``print``, other native code
    to the process's file descriptor 1: both are redirected, and C's buffers flushed before the
    descriptor is put back."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
        os.dup2(2, 1)
    except OSError:  # no file descriptor 1 (an embedding without one): Python's stream only
        saved = None
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stderr.flush()
        if saved is not None:
            _flush_c_streams()
            os.dup2(saved, 1)
            os.close(saved)


def _flush_c_streams() -> None:
    """``fflush(NULL)``: what native code left in C's stdout buffer goes out now, to stderr."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
        libc.fflush(None)
    except (OSError, AttributeError):  # no C library to reach (then nothing buffered there either)
        pass


def _one_line(text: str) -> str:
    return " ".join(str(text).split())

"""The ``tree2mat`` command line (packaged as ``tree2mat.cli``): parsing arguments and printing.
One module per command (``convert``, ``verify``, ``inspect``, ``bench``, ``attend``, ``learn``),
the app and its shared options (``_app``), output helpers (``_output``), progress
(``_progress``); here, the entry: errors as one line, exit codes, signals.

Exit codes: 0 success / verification passed; 1 verification failed (the graph does not reproduce
the model); 2 bad usage or input (unreadable file, wrong shape, unsupported model, bad option,
unavailable device); 3 internal error (a bug: please report it with ``--debug`` output);
130 interrupted.
"""

from __future__ import annotations

import os
import signal
import sys
import threading


def _interrupted_while_loading(signum: int, frame: object) -> None:
    sys.stderr.write("tree2mat: interrupted\n")
    sys.stderr.flush()
    os._exit(130)


# Ctrl-C while the libraries below load (a second or more, the forms' modules included, which
# the options' help reads): the one line and exit 130 that the commands give, not Python's
# traceback; nothing has been written yet. Python's own handler is back at the end of this module.
_LOADING = threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is signal.default_int_handler
if _LOADING:
    signal.signal(signal.SIGINT, _interrupted_while_loading)

import contextlib  # noqa: E402
import traceback  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from typing import Any  # noqa: E402

import typer  # noqa: E402

from tree2mat.errors import Tree2MatError, Tree2MatWarning  # noqa: E402
from tree2mat.frontends.loading import safe_loading  # noqa: E402 (loaded here, under the handler above: main() runs without it)

# The commands, one module each, register on the app as they load, in the order of the help.
# isort: off
from . import convert, verify, inspect, bench, attend, learn  # noqa: E402, F401
# isort: on
from ._app import app  # noqa: E402
from ._output import _one_line  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; errors are one line on stderr. ``--debug`` (anywhere on the line) adds the
    traceback before that line; exit codes stay the same."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug, safe = "--debug" in args, "--safe" in args
    args = [a for a in args if a not in ("--debug", "--safe")]
    with warnings.catch_warnings(), safe_loading(True) if safe else contextlib.nullcontext():
        if not debug:  # library warnings are not ours to print; errors say what matters
            warnings.simplefilter("ignore")
        warnings.simplefilter("always", Tree2MatWarning)  # ours: one line each, as an error is
        warnings.showwarning = _warning_line
        return _main(args, debug)


def _warning_line(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None, line: str | None = None) -> None:
    """tree2mat's own warnings, one line each on stderr (library warnings show only with --debug,
    in Python's own format)."""
    if issubclass(category, Tree2MatWarning):
        typer.echo(f"tree2mat: warning: {_one_line(str(message))}", err=True)
    else:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


#: Exit codes of a run ended by a signal: Ctrl-C (SIGINT), SIGTERM (128 + the signal's number).
INTERRUPTED, TERMINATED = 130, 143


class _Stop:
    """SIGTERM handled as Ctrl-C is (an exception where the command is, so that every temporary
    file is removed on the way out), and remembered, for the message and the exit code."""

    def __init__(self) -> None:
        self.terminated = False

    def __call__(self, signum: int, frame: object) -> None:
        self.terminated = True
        raise KeyboardInterrupt

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        own = threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
        if own:
            signal.signal(signal.SIGTERM, self)
        try:
            yield
        finally:
            if own:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)

    def report(self) -> int:
        typer.echo(f"tree2mat: {'terminated' if self.terminated else 'interrupted'}", err=True)
        return TERMINATED if self.terminated else INTERRUPTED


def _main(args: list[str], debug: bool) -> int:
    stop = _Stop()
    try:
        with stop.installed():
            return _run(args, debug, stop)
    except KeyboardInterrupt:  # (a signal as the handler is put back: the command is done or ended)
        return stop.report()


def _run(args: list[str], debug: bool, stop: _Stop) -> int:
    try:
        code = app(args=args, prog_name="tree2mat", standalone_mode=False)
        if code == INTERRUPTED:  # click turns Ctrl-C in a command into exit code 130, silently
            return stop.report()
        return code if isinstance(code, int) else 0
    except Tree2MatError as exc:
        _traceback(debug)
        typer.echo(f"tree2mat: error: {_one_line(str(exc))}", err=True)
        return exc.exit_code
    except typer.Exit as exc:
        return int(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        return stop.report()
    except MemoryError:
        _traceback(debug)
        typer.echo("tree2mat: error: out of memory", err=True)
        return 2
    except Exception as exc:
        _traceback(debug)
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):  # click's usage errors
            message = exc.format_message()
            if message:  # (bare `tree2mat` has printed the help already)
                typer.echo(f"tree2mat: error: {_one_line(message)} (see tree2mat --help)", err=True)
            return 2
        # A bug: one line, and how to get more.
        typer.echo(
            f"tree2mat: internal error: {type(exc).__name__}: {_one_line(str(exc))} "
            "(run with --debug for the traceback)",
            err=True,
        )
        return 3


def _traceback(debug: bool) -> None:
    if debug:
        traceback.print_exc()


def run() -> None:
    """The ``tree2mat`` command: :func:`main`, then the process's exit."""
    code = main()
    left = any(t.name == "tree2mat-run" and t.is_alive() for t in threading.enumerate())
    if left or code in (INTERRUPTED, TERMINATED):
        # Everything was cleaned up on the way out; exit now. A run past --timeout that its runtime
        # cannot stop would go on in native code while the interpreter shuts down, and may crash
        # it; and CPython 3.11 remembers a Ctrl-C that passed out of code run by exec() (a
        # dataclass being made as a module loads), even when caught, and would end the process
        # by SIGINT at exit instead of with this code.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if _LOADING:  # (the module has loaded: see the top)
    signal.signal(signal.SIGINT, signal.default_int_handler)

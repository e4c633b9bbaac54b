"""The Typer app every command registers on, the root options, and the options and help the commands share."""

from __future__ import annotations

from typing import Annotated

import typer

from tree2mat import __version__

FORMAT_CHOICES = ("text", "json", "npz")


def _libraries_help() -> str:
    from tree2mat.frontends import FRONTENDS

    return ", ".join(spec.library for spec in FRONTENDS.values())


def _native_files_help() -> str:
    """The native model files tree2mat reads, by library: "XGBoost .json/.ubj, LightGBM .txt"."""
    from tree2mat.frontends import FRONTENDS

    named = [(spec.library, [s for fmt in spec.formats for s in fmt.suffixes]) for spec in FRONTENDS.values()]
    return ", ".join(f"{library} {'/'.join(dict.fromkeys(suffixes))}" for library, suffixes in named if suffixes)


app = typer.Typer(
    name="tree2mat",
    help=f"Convert tree models ({_libraries_help()}) to exact ONNX graphs of standard operators, and prove them.",
    epilog="Exit codes: 0 success/pass, 1 verify mismatch, 2 bad usage or input, 3 internal error, 130 interrupted.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"tree2mat {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
    debug: bool = typer.Option(False, "--debug", help="Show the full traceback on errors."),
    safe: bool = typer.Option(False, "--safe", help=(
        "Refuse pickle files (.pkl/.pickle/.joblib: loading one can run any code); read only .skops, "
        f"{_native_files_help()}, tree2mat IR and a tree's matrices (.npz). Also TREE2MAT_SAFE=1. Anywhere on the line."
    )),
) -> None:
    """tree2mat: exact decision-machine ONNX graphs for tree models."""


def _runtimes_help() -> str:
    from tree2mat.runtimes import RUNTIMES

    return "; ".join(f"{name}: {spec.summary}" for name, spec in RUNTIMES.items())


def _target_help() -> str:
    from tree2mat.forms.auto import TARGETS

    return (
        f"The runtime the graph is for: {', '.join(TARGETS[:-1])} (as verify --runtime) or cuda (onnxruntime's CUDA "
        "provider). --form auto then picks the fastest form proven exact there (the runtime matrix; on onnxruntime, "
        "its Node.js and WebAssembly builds and the reference evaluator that can be treeensemble, one ai.onnx.ml node, "
        "its speed estimated as on onnxruntime's CPU); default: a portable graph, exact on every runtime."
    )


def _forms_help() -> str:
    from tree2mat.forms import FORMS

    return ", ".join(f"{name} ({'exact' if spec.exact else 'approximate, differentiable'})" for name, spec in FORMS.items())


#: The help of --header/--no-header, which every command that reads --data takes.
HEADER_HELP = ("Whether the first line of a .csv --data file is a header (default: detected: a header where a cell holds text; "
               "a line that could be either, e.g. 0,1,2,3 or quoted numbers, is refused with a request for one of these).")
#: --header/--no-header, declared once for the commands that read --data (default None: detected).
HeaderOption = Annotated[bool | None, typer.Option("--header/--no-header", help=HEADER_HELP)]

"""``tree2mat verify``: the graph against the model, the report and its exit code."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Annotated

import typer

from tree2mat._files import check_outputs
from tree2mat.errors import TargetWarning

from ._app import HeaderOption, _runtimes_help, app
from ._output import _check_output, _libraries_to_stderr, _write_text
from ._progress import _Progress

# verify's arguments and options as Typer's Annotated aliases (their defaults stay in the command's signature).
ModelArgument = Annotated[Path, typer.Argument(metavar="MODEL", help="The original fitted model file.")]
OnnxArgument = Annotated[Path, typer.Argument(metavar="ONNX", help="The ONNX graph to check.")]
DataOption = Annotated[Path | None, typer.Option("--data", help="Rows to check (.npy, .npz, .csv, .parquet); default: synthesized.")]
DeviceOption = Annotated[str, typer.Option("--device", help="onnxruntime's provider: cpu, cuda or all (all available providers).")]
RuntimeOption = Annotated[str, typer.Option("--runtime", help=(
    "The ONNX runtime to run the graph on (all but onnxruntime and reference are optional installs; a missing one "
    "is an error naming its install command): "
) + _runtimes_help() + ".")]
RowsOption = Annotated[int, typer.Option("--rows", help="Random rows to synthesize (threshold, NaN, inf and extreme rows come on top); unused with --data.")]
AtolOption = Annotated[float | None, typer.Option("--atol", help=(
    "Absolute tolerance on values (default: 4 float32 epsilons for the default float32 graph, or 1e-12 x the "
    "model's output scale if more; XGBoost: 4 epsilons x that scale)."
))]
RtolOption = Annotated[float, typer.Option("--rtol", help="Relative tolerance on values.")]
SeedOption = Annotated[int, typer.Option("--seed", help="Seed for synthesized rows.")]
JsonOption = Annotated[Path | None, typer.Option("--json", help="Write the report as JSON to this file ('-' for stdout).")]
ProgressOption = Annotated[bool, typer.Option("--progress/--no-progress", help=(
    "Show progress on stderr: while --data is read, a bar on a terminal and a line every 10 % otherwise; with "
    "synthesized rows, a bar on a terminal only (none with --json -)."
))]
TimeoutOption = Annotated[float | None, typer.Option("--timeout", help=(
    "The longest one run of the graph on a chunk of rows may take, in seconds (default 600); past it the run is "
    "stopped (exit 2)."
))]
ForeignGraphOption = Annotated[bool, typer.Option("--foreign-graph", help=(
    "Run a graph with operators tree2mat never writes (a peer's TreeEnsemble graph, a Loop, a custom domain): "
    "refused by default, as it may run as long as it says."
))]
RequireLibraryOption = Annotated[bool, typer.Option("--require-library", help=(
    "Exit 2 where the library's own predictions cannot be had (a native model file without its library installed, "
    "tree2mat's IR) instead of comparing with tree2mat's reference evaluator."
))]
CategoryCodesOption = Annotated[bool, typer.Option("--category-codes", help=(
    "The --data file's columns of named categories (a model fitted on pandas categories) hold the categories' "
    "codes, not their names (by default: names; a cell naming no category is an unseen one, and the report says how"
    " many)."
))]
StrictOption = Annotated[bool, typer.Option("--strict", help=(
    "Fail on label rows at a tie too: rows whose label differs where the library's scores of the two labels lie "
    "within the rounding of the sums (reported apart, as ties, and passed by default; a --dtype float64 graph gives"
    " the library's labels there)."
))]


@app.command()
def verify(
    model: ModelArgument,
    onnx_file: OnnxArgument,
    data: DataOption = None,
    header: HeaderOption = None,
    device: DeviceOption = "cpu",
    runtime: RuntimeOption = "onnxruntime",
    rows: RowsOption = 1000,
    atol: AtolOption = None,
    rtol: RtolOption = 1e-6,
    seed: SeedOption = 0,
    json_out: JsonOption = None,
    progress: ProgressOption = True,
    timeout: TimeoutOption = None,
    foreign_graph: ForeignGraphOption = False,
    require_library: RequireLibraryOption = False,
    category_codes: CategoryCodesOption = False,
    strict: StrictOption = False,
) -> None:
    """Check that ONNX reproduces MODEL: exit 0 pass, 1 mismatch, 2 bad input."""
    import tree2mat
    from tree2mat.onnx_io import data_files
    from tree2mat.verify import DEFAULT_TIMEOUT_S

    _check_output("--json", json_out)
    check_outputs({"--json": json_out}, {"MODEL": model, "ONNX": onnx_file, "--data": data,
                                         **{f"its data file {p.name}": p for p in data_files(onnx_file)}})
    # Synthesized rows (a big model's take a minute): a bar on a terminal only, not with --json -.
    # --data: also a line every 10 % elsewhere (a CI log of a long file).
    bar = sys.stderr.isatty() and (json_out is None or str(json_out) != "-")
    with _libraries_to_stderr(), _Progress("verify", enabled=progress and (data is not None or bar)) as shown, warnings.catch_warnings():
        if progress and bar:  # (until the checks begin: the library imported, the model read, the rows made)
            shown.stage("reading the model" + (" and making the rows" if data is None else ""), 1)
        if json_out is None or str(json_out) != "-":  # (the text report says it in a note: once is enough)
            warnings.simplefilter("ignore", TargetWarning)
        report = tree2mat.verify(model, onnx_file, data, header=header, device=device, rows=rows, atol=atol, rtol=rtol, seed=seed,
                                 progress=shown.update, runtime=runtime, foreign_graph=foreign_graph, require_library=require_library, strict=strict,
                                 category_codes=category_codes,
                                 timeout=DEFAULT_TIMEOUT_S if timeout is None else timeout)
    if json_out is not None and str(json_out) == "-":
        typer.echo(report.to_json())
    else:
        typer.echo(report.summary())
        if json_out is not None:
            _write_text(json_out, report.to_json() + "\n")
    if not report.passed:
        raise typer.Exit(1)

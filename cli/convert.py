"""``tree2mat convert``: a model to an ONNX graph, and what was written (``--json``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from tree2mat._files import check_outputs

from . import _progress
from ._app import _forms_help, _native_files_help, _target_help, app
from ._output import _check_output, _describe_io, _human, _libraries_to_stderr
from ._progress import _Progress

# convert's argument and options as Typer's Annotated aliases (their defaults stay in the command's signature).
ModelArgument = Annotated[Path, typer.Argument(metavar="MODEL", help=(
    "Fitted model: .pkl/.joblib (trusted files only: pickles run code), .skops, "
    f"{_native_files_help()}, or tree2mat IR .json; or a scikit-learn Pipeline ending in a tree model (through skl2onnx: the "
    "pipelines extra)."
))]
OutputOption = Annotated[Path, typer.Option("-o", "--output", help="Where to write the ONNX file (replaced only on success).")]
FormOption = Annotated[str, typer.Option("--form", help=f"Graph form: auto (default: the fastest exact form within --max-memory), {_forms_help()}.")]
DtypeOption = Annotated[str | None, typer.Option("--dtype", help=(
    "Input dtype: float32 (default for a tree model) or float64 (default for a pipeline: its preprocessing then "
    "computes what scikit-learn computes); float outputs follow it."
))]
OpsetOption = Annotated[int | None, typer.Option("--opset", help=(
    "ONNX opset, 13 to 26 (default 19, which onnxruntime 1.16 and newer load; for a pipeline up to the newest "
    "skl2onnx converts)."
))]
RawOption = Annotated[bool, typer.Option("--raw", help="Output the margin before the link (label kept for classifiers).")]
LeavesOption = Annotated[bool, typer.Option("--leaves", help="Add a 'leaves' output [N, trees] with each row's leaf ids (exact forms).")]
ProximityOption = Annotated[Path | None, typer.Option("--proximity", metavar="REF_ROWS", help=(
    "Exact forms: add a 'proximity' output [N, R]: for each row and each of the R reference rows in this file (.npy, .npz, "
    ".csv, .parquet, read as verify reads --data), the fraction of trees in which the two share a leaf (the random-forest "
    "kernel); the graph carries the rows, and verify checks the output against the library's own leaves."
))]
TreeWeightsOption = Annotated[bool, typer.Option("--tree-weights", help=(
    "Attention forests (tree2mat attend's files): add a 'tree_weights' output [N, trees], each row's weight of each tree "
    "(the softmax mixed with w by epsilon; each row sums to 1), which verify checks too; any other model refuses it."
))]
TreeMaskOption = Annotated[str | None, typer.Option("--tree-mask", metavar="request|rows", help=(
    "Add a second input 'tree_mask' (bool) that keeps or drops each tree: 'request', one mask [trees] for every row of a "
    "run; 'rows', one per row [N, trees]. The first k rounds give the library's staged predictions (XGBoost iteration_range, "
    "LightGBM num_iteration, ...), every leaf exact; summed ensembles only. Without it the graph is unchanged."
))]
MaxMemoryOption = Annotated[str | None, typer.Option("--max-memory", help=(
    "Memory the graph may take (constants and intermediates for 10 000 rows), e.g. 4G (the default), 512M: auto "
    "picks the fastest form within it; an explicit form over it is refused, naming one that fits."
))]
BatchHintOption = Annotated[int | None, typer.Option("--batch-hint", help=(
    "--form auto: rows per run the graph will mostly see (default 10000); auto picks the form fastest for such runs"
    " (1: latency, where the operators' overhead counts most)."
))]
TemperatureOption = Annotated[float | None, typer.Option("--temperature", help=(
    "soft/softmax forms: temperature, in input-feature units (default 1); the graph is exact only as it goes to 0."
))]
MatmulOption = Annotated[str, typer.Option("--matmul", help=(
    "sign/bitvector forms: element type of the path-matching MatMul: float32, float16 or int8 (MatMulInteger); "
    "exact in each."
))]
TargetOption = Annotated[str | None, typer.Option("--target", help=_target_help() + " Recorded in the graph (metadata tree2mat.target).")]
JsonOption = Annotated[bool, typer.Option("--json", help=(
    "Print what was written as one JSON object on stdout (path, form, sizes, opset, inputs, outputs, ...) instead "
    "of the sentence."
))]
ProgressOption = Annotated[bool, typer.Option("--progress/--no-progress", help=(
    "Show the steps of a convert that takes over a second on stderr (a bar on a terminal, a line per step "
    "otherwise)."
))]


@app.command()
def convert(
    model: ModelArgument,
    output: OutputOption,
    form: FormOption = "auto",
    dtype: DtypeOption = None,
    opset: OpsetOption = None,
    raw: RawOption = False,
    leaves: LeavesOption = False,
    proximity: ProximityOption = None,
    tree_weights: TreeWeightsOption = False,
    tree_mask: TreeMaskOption = None,
    max_memory: MaxMemoryOption = None,
    batch_hint: BatchHintOption = None,
    temperature: TemperatureOption = None,
    matmul: MatmulOption = "float32",
    target: TargetOption = None,
    json_out: JsonOption = False,
    progress: ProgressOption = True,
) -> None:
    """Convert MODEL to an ONNX graph."""
    import tree2mat
    from tree2mat.convert import written
    from tree2mat.forms.auto import parse_memory

    _check_output("-o", output)
    check_outputs({"-o": output}, {"MODEL": model, "--proximity": proximity})
    with _libraries_to_stderr(), _Progress("convert", enabled=progress, delay=_progress.PROGRESS_DELAY_S) as shown:
        onx = tree2mat.convert(
            model, form, dtype=dtype, opset=opset, raw=raw, leaves=leaves, temperature=temperature, matmul=matmul,
            max_memory=None if max_memory is None else parse_memory(max_memory), batch_hint=batch_hint, target=target,
            tree_weights=tree_weights, tree_mask=tree_mask, proximity=proximity, progress=lambda text: shown.stage(text, 4),
        )
        shown.stage(f"writing {output}", 4)
        size = tree2mat.save(onx, output)
    info = written(onx, output, size)
    if json_out:
        typer.echo(json.dumps(info, indent=1))
        return
    typer.echo(_sentence(info, output, size))
    if info.get("auto_reason"):
        typer.echo(f"auto picked {info['form']}: {info['auto_reason']}")


def _sentence(info: dict[str, Any], output: Path, size: int) -> str:
    """The sentence convert prints for what it wrote (``--json`` prints ``info`` itself)."""
    data = info["data_file"]
    where = _human(size) if data is None else f"{_human(size)}, constants in {Path(data).name}: keep both files together"
    picked = info["form"]
    if info["matmul"] != "float32":
        picked += f" (MatMul in {info['matmul']})"
    if info.get("temperature") is not None:
        picked += f" at temperature {info['temperature']:g} (an approximation, not exact)"
    what = f"{info['pipeline']}, tree steps: " if info["pipeline"] else ""
    return (
        f"wrote {output} ({where}): {what}form {picked}, {info['n_trees']} trees, {info['n_features']} features, "
        f"opset {info['opset']}, {info['nodes']} nodes; outputs: {', '.join(_describe_io(o) for o in info['outputs'])}"
    )

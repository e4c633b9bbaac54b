"""``tree2mat bench``: the graphs timed next to the peers."""

from __future__ import annotations

from pathlib import Path

import typer

from tree2mat._files import atomic_write, check_outputs

from ._app import HeaderOption, app
from ._output import _check_output, _libraries_to_stderr, _write_text


@app.command()
def bench(
    model: Path = typer.Argument(..., metavar="MODEL", help="Fitted model file (as for convert)."),
    data: Path | None = typer.Option(None, "--data", help="Rows to score (.npy, .npz, .csv, .parquet); default: synthesized (threshold, NaN, random rows)."),
    header: HeaderOption = None,
    rows: int = typer.Option(100_000, "--rows", help="Rows to synthesize; unused with --data."),
    batch: str = typer.Option("1,1000,100000", "--batch", help="Batch sizes, comma-separated."),
    form: str = typer.Option("auto", "--form", help="tree2mat forms to time, comma-separated (auto, sign, bitvector, traverse, ...)."),
    peers: bool = typer.Option(True, "--peers/--no-peers", help="Also time the peer TreeEnsemble converter (skl2onnx / onnxmltools: the bench extra)."),
    repeat: int = typer.Option(5, "--repeat", help="Timed runs per batch size (at least 50 at batch 1)."),
    threads: int | None = typer.Option(None, "--threads", help="onnxruntime intra-op threads (default: onnxruntime's)."),
    device: str = typer.Option("cpu", "--device", help=(
        "cpu, or cuda: tree2mat's and Hummingbird's graphs on the CUDA provider, none timed with row data on the CPU "
        "(TreeEnsemble has no CUDA kernel: CPU)."
    )),
    max_memory: str | None = typer.Option(None, "--max-memory", help=(
        "Largest estimated memory of a tree2mat graph at one batch, e.g. 8G (default: half this machine's memory); "
        "larger batches are not timed."
    )),
    batch_hint: int | None = typer.Option(None, "--batch-hint", help="--form auto's batch hint (as for convert; default 10000)."),
    target: str | None = typer.Option(None, "--target", help=(
        "--form auto's target runtime (as for convert; default: portable). The timings are onnxruntime's (--device) "
        "whatever the target."
    )),
    json_out: Path | None = typer.Option(None, "--json", help="Write the figures as JSON to this file ('-' for stdout)."),
    plot: Path | None = typer.Option(None, "--plot", help="Draw rows/s per contender and batch size to this PNG (needs matplotlib: the plot extra)."),
) -> None:
    """Time MODEL's graphs next to the peers (TreeEnsemble, Hummingbird when installed) and the library's predict: rows/s, latency, peak memory, mismatch counts."""  # noqa: E501
    from tree2mat.bench import bench as run_bench
    from tree2mat.bench import parse_batches, plot_report
    from tree2mat.forms.auto import parse_memory

    _check_output("--json", json_out)
    _check_output("--plot", plot, png=True)
    check_outputs({"--json": json_out, "--plot": plot}, {"MODEL": model, "--data": data})
    with _libraries_to_stderr():
        report = run_bench(
            model, data, header=header, rows=rows, batches=parse_batches(batch), forms=tuple(f.strip() for f in form.split(",") if f.strip()),
            use_peers=peers, repeat=repeat, threads=threads, device=device,
            max_memory=None if max_memory is None else parse_memory(max_memory), batch_hint=batch_hint, target=target,
        )
    if plot is not None:
        atomic_write(plot, plot_report(report))
    if json_out is not None and str(json_out) == "-":
        typer.echo(report.to_json())
        return
    typer.echo(report.summary())
    if json_out is not None:
        _write_text(json_out, report.to_json() + "\n")

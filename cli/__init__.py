"""The ``tree2mat`` command line (packaged as ``tree2mat.cli``): parsing arguments and printing.

Exit codes: 0 success / verification passed; 1 verification failed (the graph does not reproduce
the model); 2 bad usage or input (unreadable file, wrong shape, unsupported model, bad option,
unavailable device); 3 internal error (a bug: please report it with ``--debug`` output);
130 interrupted.
"""

from __future__ import annotations

import contextlib
import json
import sys
import traceback
import warnings
from pathlib import Path
from typing import Any, Optional

import numpy as np
import typer

from tree2mat import __version__
from tree2mat._files import atomic_write
from tree2mat.errors import OptionError, Tree2MatError

FORMAT_CHOICES = ("text", "json", "npz")

app = typer.Typer(
    name="tree2mat",
    help="Convert tree models (scikit-learn, XGBoost, LightGBM) to exact ONNX graphs of standard operators, and prove them.",
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
    safe: bool = typer.Option(False, "--safe", help="Refuse pickle files (.pkl/.pickle/.joblib: loading one can run any code); read only .skops, XGBoost .json/.ubj, LightGBM .txt and tree2mat IR. Also TREE2MAT_SAFE=1. Anywhere on the line."),
) -> None:
    """tree2mat: exact decision-machine ONNX graphs for tree models."""


def _forms_help() -> str:
    from tree2mat.forms import FORMS

    return ", ".join(f"{name} ({'exact' if spec.exact else 'approximate, differentiable'})" for name, spec in FORMS.items())


@app.command()
def convert(
    model: Path = typer.Argument(..., metavar="MODEL", help="Fitted model: .pkl/.joblib (trusted files only: pickles run code), .skops, XGBoost .json/.ubj, LightGBM model text .txt, or tree2mat IR .json."),
    output: Path = typer.Option(..., "-o", "--output", help="Where to write the ONNX file (replaced only on success)."),
    form: str = typer.Option("auto", "--form", help=f"Graph form: auto (default: the fastest exact form within --max-memory), {_forms_help()}."),
    dtype: str = typer.Option("float32", "--dtype", help="Input dtype: float32 or float64 (float outputs follow it)."),
    opset: Optional[int] = typer.Option(None, "--opset", help="ONNX opset, 13 to 26 (default 26, the newest the pinned onnxruntime runs)."),
    raw: bool = typer.Option(False, "--raw", help="Output the margin before the link (label kept for classifiers)."),
    leaves: bool = typer.Option(False, "--leaves", help="Add a 'leaves' output [N, trees] with each row's leaf ids (exact forms)."),
    max_memory: Optional[str] = typer.Option(None, "--max-memory", help="Memory the graph may take (constants and intermediates for 10 000 rows), e.g. 4G (the default), 512M: auto picks the fastest form within it; an explicit form over it is refused, naming one that fits."),
    temperature: Optional[float] = typer.Option(None, "--temperature", help="soft/softmax forms: temperature, in input-feature units (default 1); the graph is exact only as it goes to 0."),
    matmul: str = typer.Option("float32", "--matmul", help="sign/bitvector forms: element type of the path-matching MatMul: float32, float16 or int8 (MatMulInteger); exact in each."),
) -> None:
    """Convert MODEL to an ONNX graph."""
    import tree2mat
    from tree2mat.forms import DEFAULT_OPSET
    from tree2mat.forms.auto import parse_memory

    onx = tree2mat.convert(
        model, form, dtype=dtype, opset=DEFAULT_OPSET if opset is None else opset, raw=raw, leaves=leaves,
        temperature=temperature, matmul=matmul, max_memory=None if max_memory is None else parse_memory(max_memory),
    )
    from tree2mat.convert import external_data_file

    size = tree2mat.save(onx, output)
    data = external_data_file(output)
    where = _human(size) if data is None else f"{_human(size)}, constants in {data.name}: keep both files together"
    meta = {p.key: p.value for p in onx.metadata_props}
    outs = ", ".join(_describe(o) for o in onx.graph.output)
    picked = meta["tree2mat.form"]
    if "tree2mat.matmul" in meta:
        picked += f" (MatMul in {meta['tree2mat.matmul']})"
    if "tree2mat.temperature" in meta:
        picked += f" at temperature {float(meta['tree2mat.temperature']):g} (an approximation, not exact)"
    typer.echo(
        f"wrote {output} ({where}): form {picked}, {meta['tree2mat.n_trees']} trees, "
        f"{meta['tree2mat.n_features']} features, opset {onx.opset_import[0].version}, "
        f"{len(onx.graph.node)} nodes; outputs: {outs}"
    )
    if "tree2mat.auto" in meta:
        typer.echo(f"auto picked {meta['tree2mat.form']}: {meta['tree2mat.auto']}")


@app.command()
def verify(
    model: Path = typer.Argument(..., metavar="MODEL", help="The original fitted model file."),
    onnx_file: Path = typer.Argument(..., metavar="ONNX", help="The ONNX graph to check."),
    data: Optional[Path] = typer.Option(None, "--data", help="Rows to check (.npy, .npz, .csv, .parquet); default: synthesized."),
    device: str = typer.Option("cpu", "--device", help="cpu, cuda or all (all available providers)."),
    rows: int = typer.Option(1000, "--rows", help="Random rows to synthesize (threshold, NaN, inf and extreme rows come on top); unused with --data."),
    atol: Optional[float] = typer.Option(None, "--atol", help="Absolute tolerance on values (default: 1e-12 x the model's output scale)."),
    rtol: float = typer.Option(1e-6, "--rtol", help="Relative tolerance on values."),
    seed: int = typer.Option(0, "--seed", help="Seed for synthesized rows."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Write the report as JSON to this file ('-' for stdout)."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show progress on stderr while --data is read (a bar on a terminal, a line every 10 % otherwise)."),
) -> None:
    """Check that ONNX reproduces MODEL: exit 0 pass, 1 mismatch, 2 bad input."""
    import tree2mat

    if json_out is not None and str(json_out) != "-" and not json_out.parent.is_dir():
        raise OptionError(f"--json {json_out}: no such directory {json_out.parent}")
    with _Progress("verify", enabled=progress and data is not None) as shown:
        report = tree2mat.verify(model, onnx_file, data, device=device, rows=rows, atol=atol, rtol=rtol, seed=seed,
                                 progress=shown.update)
    if json_out is not None and str(json_out) == "-":
        typer.echo(report.to_json())
    else:
        typer.echo(report.summary())
        if json_out is not None:
            _write_text(json_out, report.to_json() + "\n")
    if not report.passed:
        raise typer.Exit(1)


@app.command()
def inspect(
    model: Path = typer.Argument(..., metavar="MODEL", help="Fitted model file."),
    tree: Optional[int] = typer.Option(None, "--tree", help="Show the matrices of this tree (0-based)."),
    fmt: str = typer.Option("text", "--format", help="text, json or npz (npz needs -o)."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write to this file instead of stdout ('-': stdout)."),
    max_memory: str = typer.Option("4G", "--max-memory", help="Memory budget for the form auto would pick (as for convert)."),
) -> None:
    """Summarize MODEL, or print one tree as the papers' matrices (S, t, B, bitvector, v, depth)."""
    import tree2mat
    from tree2mat.inspect import matrices_of, summary

    from tree2mat.forms.auto import parse_memory

    if fmt not in FORMAT_CHOICES:
        raise OptionError(f"unknown format {fmt!r}; choose one of {', '.join(FORMAT_CHOICES)}")
    budget = parse_memory(max_memory)
    ens = tree2mat.load(model)
    if tree is None:
        info = summary(ens, budget)
        if fmt == "npz":
            raise OptionError("--format npz needs --tree")
        text = json.dumps(info, indent=1) if fmt == "json" else _summary_text(info)
        return _emit(text, output)
    mats = matrices_of(ens, tree)
    if fmt == "npz":
        if output is None:
            raise OptionError("--format npz needs -o FILE")
        _write_npz(output, mats)
        return None
    if fmt == "json":
        return _emit(json.dumps({"tree": tree, **{k: v.tolist() for k, v in mats.items()}}, indent=1), output)
    return _emit(_matrices_text(tree, mats, ens.feature_names), output)


@app.command()
def bench(
    model: Path = typer.Argument(..., metavar="MODEL", help="Fitted model file (as for convert)."),
    data: Optional[Path] = typer.Option(None, "--data", help="Rows to score (.npy, .npz, .csv, .parquet); default: synthesized (threshold, NaN, random rows)."),
    rows: int = typer.Option(100_000, "--rows", help="Rows to synthesize; unused with --data."),
    batch: str = typer.Option("1,1000,100000", "--batch", help="Batch sizes, comma-separated."),
    form: str = typer.Option("auto", "--form", help="tree2mat forms to time, comma-separated (auto, sign, bitvector, traverse, ...)."),
    peers: bool = typer.Option(True, "--peers/--no-peers", help="Also time the peer TreeEnsemble converter (skl2onnx / onnxmltools: the bench extra)."),
    repeat: int = typer.Option(5, "--repeat", help="Timed runs per batch size (at least 50 at batch 1)."),
    threads: Optional[int] = typer.Option(None, "--threads", help="onnxruntime intra-op threads (default: onnxruntime's)."),
    device: str = typer.Option("cpu", "--device", help="cpu, or cuda: tree2mat's and Hummingbird's graphs on the CUDA provider alone (TreeEnsemble has no CUDA kernel: CPU)."),
    max_memory: Optional[str] = typer.Option(None, "--max-memory", help="Largest estimated memory of a tree2mat graph at one batch, e.g. 8G (default: half this machine's memory); larger batches are not timed."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Write the figures as JSON to this file ('-' for stdout)."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Draw rows/s per contender and batch size to this PNG (needs matplotlib: the plot extra)."),
) -> None:
    """Time MODEL's graphs next to the peers (TreeEnsemble, Hummingbird when installed) and the library's predict: rows/s, latency, peak memory, mismatch counts."""
    from tree2mat.bench import bench as run_bench, parse_batches, plot_report
    from tree2mat.forms.auto import parse_memory

    for path, flag in ((json_out, "--json"), (plot, "--plot")):
        if path is not None and str(path) != "-" and not path.parent.is_dir():
            raise OptionError(f"{flag} {path}: no such directory {path.parent}")
    if plot is not None and plot.suffix.lower() != ".png":
        raise OptionError(f"--plot {plot}: the plot is a PNG; name the file *.png")
    report = run_bench(
        model, data, rows=rows, batches=parse_batches(batch), forms=tuple(f.strip() for f in form.split(",") if f.strip()),
        use_peers=peers, repeat=repeat, threads=threads, device=device,
        max_memory=None if max_memory is None else parse_memory(max_memory),
    )
    if plot is not None:
        atomic_write(plot, plot_report(report))
    if json_out is not None and str(json_out) == "-":
        typer.echo(report.to_json())
        return
    typer.echo(report.summary())
    if json_out is not None:
        _write_text(json_out, report.to_json() + "\n")


# ------------------------------------------------------------------------------------- helpers


def _describe(o: Any) -> str:
    import onnx

    tt = o.type.tensor_type
    dims = [d.dim_param or str(d.dim_value) for d in tt.shape.dim]
    return f"{o.name} [{', '.join(dims)}] {onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type).name if tt.elem_type != onnx.TensorProto.STRING else 'string'}"


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _write_text(path: Path, text: str) -> None:
    atomic_write(path, text.encode("utf-8"))


def _write_npz(path: Path, mats: dict[str, np.ndarray]) -> None:
    import io

    buf = io.BytesIO()
    np.savez(buf, **mats)
    atomic_write(path, buf.getvalue())


def _emit(text: str, output: Optional[Path]) -> None:
    if output is None or str(output) == "-":
        typer.echo(text)
    else:
        _write_text(output, text + "\n")


def _summary_text(info: dict[str, Any]) -> str:
    lines = []
    for key, value in info.items():
        if key in ("forms", "auto"):
            continue
        if isinstance(value, dict):
            value = ", ".join(f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}" for k, v in value.items())
        lines.append(f"{key.replace('_', ' ')}: {value}")
    lines.append("forms:")
    for name, f in info["forms"].items():
        speed = f", estimated {f['estimated_us_per_row']:.3g} us per row on the CPU" if "estimated_us_per_row" in f else ""
        lines.append(
            f"  {name}: constants {_human(f['constant_bytes'])}, about {_human(f['bytes_per_row'])} "
            f"of runtime memory per row{speed}{'' if f['exact'] else ' (approximate)'}"
        )
    lines.append(f"auto: {info['auto']['form']}: {info['auto']['reason']}")
    return "\n".join(lines)


def _matrices_text(tree: int, mats: dict[str, np.ndarray], names: Optional[tuple[str, ...]]) -> str:
    n_int, n_leaf = mats["B"].shape[1], mats["B"].shape[0]
    nodes = [f"n{i + 1}" for i in range(n_int)]
    leaves = [f"v{j + 1}" for j in range(n_leaf)]
    feats = list(names) if names else [f"x{f + 1}" for f in range(mats["S"].shape[1])]
    out = [f"tree {tree}: {n_int} internal nodes (breadth-first n1..), {n_leaf} leaves (left to right v1..)"]

    def table(title: str, m: np.ndarray, rows: list[str], cols: list[str]) -> None:
        out.append(f"\n{title}")
        w = max([len(c) for c in cols] + [len(f"{v:g}") for v in m.ravel()] + [2])
        out.append(" " * 6 + " ".join(c.rjust(w) for c in cols))
        for r, row in zip(rows, m):
            out.append(r.ljust(6) + " ".join(f"{v:g}".rjust(w) for v in row))

    table("S (node x feature)", mats["S"], nodes, feats)
    table("t (thresholds)", mats["t"][:, None], nodes, ["t"])
    table("B (template: -1 left subtree, +1 right, 0 off path)", mats["B"], leaves, nodes)
    table("bitvector (QuickScorer: 0 iff leaf in left subtree)", mats["bitvector"], leaves, nodes)
    table("depth", mats["depth"][:, None], leaves, ["d"])
    table("v (leaf values)", mats["v"], leaves, [f"k{k}" for k in range(mats["v"].shape[1])])
    return "\n".join(out)


# ------------------------------------------------------------------------------------- progress


class _Progress:
    """Progress of a long run on stderr: a live bar on a terminal; elsewhere (CI logs, pipes) a
    plain line at every further 10 % and at the end. Nothing for a run done in one step."""

    def __init__(self, label: str, enabled: bool = True) -> None:
        self.label, self.enabled = label, enabled
        self.bar: Any = None
        self.task: Any = None
        self.next_line = 0.1
        self.steps = 0

    def __enter__(self) -> "_Progress":
        return self

    def update(self, rows: int, fraction: float) -> None:
        self.steps += 1
        if not self.enabled or (self.steps == 1 and fraction >= 1.0):
            return
        if sys.stderr.isatty():
            if self.bar is None:
                from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

                self.bar = Progress(TextColumn(f"{self.label}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%  {task.fields[rows]:,} rows"),
                                    TimeRemainingColumn(), transient=True)
                self.bar.start()
                self.task = self.bar.add_task(self.label, total=1.0, rows=0)
            self.bar.update(self.task, completed=fraction, rows=rows)
        elif fraction >= self.next_line or fraction >= 1.0:
            typer.echo(f"{self.label}: {rows:,} rows ({100 * fraction:.0f}% of the data read)", err=True)
            self.next_line = (int(fraction * 10) + 1) / 10

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()


# ------------------------------------------------------------------------------------ the entry


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def main(argv: Optional[list[str]] = None) -> int:
    """Run the CLI; errors are one line on stderr. ``--debug`` (anywhere on the line) adds the
    traceback before that line; exit codes stay the same."""
    from tree2mat.frontends.loading import safe_loading

    args = list(sys.argv[1:] if argv is None else argv)
    debug, safe = "--debug" in args, "--safe" in args
    args = [a for a in args if a not in ("--debug", "--safe")]
    with warnings.catch_warnings(), safe_loading(True) if safe else contextlib.nullcontext():
        if not debug:  # library warnings are not ours to print; errors say what matters
            warnings.simplefilter("ignore")
        return _main(args, debug)


def _main(args: list[str], debug: bool) -> int:
    try:
        code = app(args=args, prog_name="tree2mat", standalone_mode=False)
        if code == 130:  # click turns Ctrl-C in a command into exit code 130, silently
            typer.echo("tree2mat: interrupted", err=True)
        return code if isinstance(code, int) else 0
    except Tree2MatError as exc:
        _traceback(debug)
        typer.echo(f"tree2mat: error: {_one_line(str(exc))}", err=True)
        return exc.exit_code
    except typer.Exit as exc:
        return int(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("tree2mat: interrupted", err=True)
        return 130
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
    sys.exit(main())

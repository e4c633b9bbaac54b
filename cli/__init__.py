"""The ``tree2mat`` command line (packaged as ``tree2mat.cli``): parsing arguments and printing.

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
import json  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import typer  # noqa: E402

from tree2mat import __version__  # noqa: E402
from tree2mat._files import atomic_write, check_name, check_outputs  # noqa: E402
from tree2mat.errors import OptionError, TargetWarning, Tree2MatError, Tree2MatWarning  # noqa: E402

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


@app.command()
def convert(
    model: Path = typer.Argument(..., metavar="MODEL", help="Fitted model: .pkl/.joblib (trusted files only: pickles run code), .skops, XGBoost .json/.ubj, LightGBM model text .txt, or tree2mat IR .json; or a scikit-learn Pipeline ending in a tree model (through skl2onnx: the pipelines extra)."),
    output: Path = typer.Option(..., "-o", "--output", help="Where to write the ONNX file (replaced only on success)."),
    form: str = typer.Option("auto", "--form", help=f"Graph form: auto (default: the fastest exact form within --max-memory), {_forms_help()}."),
    dtype: str | None = typer.Option(None, "--dtype", help="Input dtype: float32 (default for a tree model) or float64 (default for a pipeline: its preprocessing then computes what scikit-learn computes); float outputs follow it."),
    opset: int | None = typer.Option(None, "--opset", help="ONNX opset, 13 to 26 (default 19, which onnxruntime 1.16 and newer load; for a pipeline up to the newest skl2onnx converts)."),
    raw: bool = typer.Option(False, "--raw", help="Output the margin before the link (label kept for classifiers)."),
    leaves: bool = typer.Option(False, "--leaves", help="Add a 'leaves' output [N, trees] with each row's leaf ids (exact forms)."),
    max_memory: str | None = typer.Option(None, "--max-memory", help="Memory the graph may take (constants and intermediates for 10 000 rows), e.g. 4G (the default), 512M: auto picks the fastest form within it; an explicit form over it is refused, naming one that fits."),
    batch_hint: int | None = typer.Option(None, "--batch-hint", help="--form auto: rows per run the graph will mostly see (default 10000); auto picks the form fastest for such runs (1: latency, where the operators' overhead counts most)."),
    temperature: float | None = typer.Option(None, "--temperature", help="soft/softmax forms: temperature, in input-feature units (default 1); the graph is exact only as it goes to 0."),
    matmul: str = typer.Option("float32", "--matmul", help="sign/bitvector forms: element type of the path-matching MatMul: float32, float16 or int8 (MatMulInteger); exact in each."),
    target: str | None = typer.Option(None, "--target", help=_target_help() + " Recorded in the graph (metadata tree2mat.target)."),
    json_out: bool = typer.Option(False, "--json", help="Print what was written as one JSON object on stdout (path, form, sizes, opset, inputs, outputs, ...) instead of the sentence."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show the steps of a convert that takes over a second on stderr (a bar on a terminal, a line per step otherwise)."),
) -> None:
    """Convert MODEL to an ONNX graph."""
    import tree2mat
    from tree2mat.forms.auto import parse_memory

    _check_output("-o", output)
    check_outputs({"-o": output}, {"MODEL": model})
    with _libraries_to_stderr(), _Progress("convert", enabled=progress, delay=PROGRESS_DELAY_S) as shown:
        onx = tree2mat.convert(
            model, form, dtype=dtype, opset=opset, raw=raw, leaves=leaves, temperature=temperature, matmul=matmul,
            max_memory=None if max_memory is None else parse_memory(max_memory), batch_hint=batch_hint, target=target,
            progress=lambda text: shown.stage(text, 4),
        )
        shown.stage(f"writing {output}", 4)
        size = tree2mat.save(onx, output)
    info = written(onx, output, size)
    if json_out:
        typer.echo(json.dumps(info, indent=1))
        return
    data = info["data_file"]
    where = _human(size) if data is None else f"{_human(size)}, constants in {Path(data).name}: keep both files together"
    picked = info["form"]
    if info["matmul"] != "float32":
        picked += f" (MatMul in {info['matmul']})"
    if info.get("temperature") is not None:
        picked += f" at temperature {info['temperature']:g} (an approximation, not exact)"
    what = f"{info['pipeline']}, tree steps: " if info["pipeline"] else ""
    typer.echo(
        f"wrote {output} ({where}): {what}form {picked}, {info['n_trees']} trees, {info['n_features']} features, "
        f"opset {info['opset']}, {info['nodes']} nodes; outputs: {', '.join(_describe_io(o) for o in info['outputs'])}"
    )
    if info.get("auto_reason"):
        typer.echo(f"auto picked {info['form']}: {info['auto_reason']}")


#: ``convert --json``'s schema version (fields are only added within a version).
CONVERT_SCHEMA = 1


def written(onx: Any, output: Path, size: int) -> dict[str, Any]:
    """What ``convert`` wrote, as ``--json`` prints it (documented in docs/cli.md)."""
    from tree2mat.forms._graph import all_nodes
    from tree2mat.onnx_io import external_data_file

    meta = {p.key: p.value for p in onx.metadata_props}
    data = external_data_file(output)
    temperature = meta.get("tree2mat.temperature")
    return {
        "schema": CONVERT_SCHEMA,
        "path": str(output),
        "bytes": size,
        "data_file": None if data is None else str(data),
        "data_bytes": None if data is None else data.stat().st_size,
        "form": meta["tree2mat.form"],
        "exact": meta["tree2mat.exact"] == "1",
        "auto_reason": meta.get("tree2mat.auto"),
        "target": meta.get("tree2mat.target"),
        "matmul": meta.get("tree2mat.matmul", "float32"),
        "temperature": None if temperature is None else float(temperature),
        "source": meta["tree2mat.source"],
        "pipeline": meta["tree2mat.source"].split(" ", 1)[1] if "tree2mat.pipeline" in meta else None,
        "n_trees": int(meta["tree2mat.n_trees"]),
        "n_features": int(meta["tree2mat.n_features"]),
        "opset": next(i.version for i in onx.opset_import if i.domain in ("", "ai.onnx")),
        "nodes": sum(1 for _ in all_nodes(onx.graph)),
        "inputs": [_io(i) for i in onx.graph.input],
        "outputs": [_io(o) for o in onx.graph.output],
        "categories": json.loads(meta["tree2mat.categories"]) if "tree2mat.categories" in meta else None,
    }


#: The help of --header/--no-header, which every command that reads --data takes.
HEADER_HELP = ("Whether the first line of a .csv --data file is a header (default: detected: a header where a cell holds text; "
               "a line that could be either, e.g. 0,1,2,3 or quoted numbers, is refused with a request for one of these).")


@app.command()
def verify(
    model: Path = typer.Argument(..., metavar="MODEL", help="The original fitted model file."),
    onnx_file: Path = typer.Argument(..., metavar="ONNX", help="The ONNX graph to check."),
    data: Path | None = typer.Option(None, "--data", help="Rows to check (.npy, .npz, .csv, .parquet); default: synthesized."),
    header: bool | None = typer.Option(None, "--header/--no-header", help=HEADER_HELP),
    device: str = typer.Option("cpu", "--device", help="onnxruntime's provider: cpu, cuda or all (all available providers)."),
    runtime: str = typer.Option("onnxruntime", "--runtime", help="The ONNX runtime to run the graph on (all but onnxruntime and reference are optional installs; a missing one is an error naming its install command): " + _runtimes_help() + "."),
    rows: int = typer.Option(1000, "--rows", help="Random rows to synthesize (threshold, NaN, inf and extreme rows come on top); unused with --data."),
    atol: float | None = typer.Option(None, "--atol", help="Absolute tolerance on values (default: 4 float32 epsilons for the default float32 graph, or 1e-12 x the model's output scale if more; XGBoost: 4 epsilons x that scale)."),
    rtol: float = typer.Option(1e-6, "--rtol", help="Relative tolerance on values."),
    seed: int = typer.Option(0, "--seed", help="Seed for synthesized rows."),
    json_out: Path | None = typer.Option(None, "--json", help="Write the report as JSON to this file ('-' for stdout)."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show progress on stderr: while --data is read, a bar on a terminal and a line every 10 % otherwise; with synthesized rows, a bar on a terminal only (none with --json -)."),
    timeout: float | None = typer.Option(None, "--timeout", help="The longest one run of the graph on a chunk of rows may take, in seconds (default 600); past it the run is stopped (exit 2)."),
    foreign_graph: bool = typer.Option(False, "--foreign-graph", help="Run a graph with operators tree2mat never writes (a peer's TreeEnsemble graph, a Loop, a custom domain): refused by default, as it may run as long as it says."),
    require_library: bool = typer.Option(False, "--require-library", help="Exit 2 where the library's own predictions cannot be had (a native model file without its library installed, tree2mat's IR) instead of comparing with tree2mat's reference evaluator."),
    category_codes: bool = typer.Option(False, "--category-codes", help="The --data file's columns of named categories (a model fitted on pandas categories) hold the categories' codes, not their names (by default: names; a cell naming no category is an unseen one, and the report says how many)."),
    strict: bool = typer.Option(False, "--strict", help="Fail on label rows at a tie too: rows whose label differs where the library's scores of the two labels lie within the rounding of the sums (reported apart, as ties, and passed by default; a --dtype float64 graph gives the library's labels there)."),
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


@app.command()
def inspect(
    model: Path = typer.Argument(..., metavar="MODEL", help="Fitted model file."),
    tree: int | None = typer.Option(None, "--tree", help="Show the matrices of this tree (0-based)."),
    fmt: str = typer.Option("text", "--format", help="text, json or npz (npz needs -o)."),
    output: Path | None = typer.Option(None, "-o", "--output", help="Write to this file instead of stdout ('-': stdout)."),
    max_memory: str = typer.Option("4G", "--max-memory", help="Memory budget for the form auto would pick (as for convert)."),
    batch_hint: int | None = typer.Option(None, "--batch-hint", help="Rows per run for the form auto would pick (as for convert; default 10000)."),
    target: str | None = typer.Option(None, "--target", help="The runtime for the form auto would pick (as for convert; default: portable)."),
    png: Path | None = typer.Option(None, "--png", help="With --tree K: draw the tree beside its matrices to this PNG instead of printing them (a large tree summarized; needs matplotlib: the plot extra)."),
    plan: bool = typer.Option(False, "--plan", help="Print what each pass of an exact form's graph makes of MODEL: the trees stacked, the node tests, the exit, the sums."),
    form: str = typer.Option("auto", "--form", help="With --plan: the exact form (default: the one --form auto picks, as for convert)."),
    dtype: str = typer.Option("float32", "--dtype", help="With --plan: the graph's input type, float32 or float64 (as for convert)."),
) -> None:
    """Summarize MODEL, print one tree as the papers' matrices (S, t, B, bitvector, v, depth) or draw it beside them (--png), or print an exact form's passes (--plan)."""
    import tree2mat
    from tree2mat.build import DTYPES
    from tree2mat.forms import FORMS, auto, check_form
    from tree2mat.forms.auto import check_batch_hint, check_target, parse_memory
    from tree2mat.forms.passes import plan as forms_plan
    from tree2mat.inspect import matrices_of, summary
    from tree2mat.ir.limits import physical_memory

    if fmt not in FORMAT_CHOICES:
        raise OptionError(f"unknown format {fmt!r}; choose one of {', '.join(FORMAT_CHOICES)}")
    budget = parse_memory(max_memory)
    hint = check_batch_hint(batch_hint)
    check_target(target)
    if png is not None:
        _check_png(png, tree, fmt, output)
    if plan and (tree is not None or fmt == "npz"):
        raise OptionError("--plan shows the whole model's passes: leave out --tree, and --format npz (text or json)")
    if not plan and (form != "auto" or dtype != "float32"):
        raise OptionError("--form and --dtype choose the graph --plan shows: add --plan")
    if dtype not in DTYPES:
        raise OptionError(f"--dtype {dtype}: choose float32 or float64")
    spec = None if form == "auto" else check_form(form)
    _check_output("-o", output)
    check_outputs({"-o": output, "--png": png}, {"MODEL": model})
    with _libraries_to_stderr():
        # (a model whose every graph passes both --max-memory and half this machine's memory for
        # 10 000 rows is refused unread; one that only passes --max-memory is summarized)
        ens = tree2mat.load(model, max_memory=max(budget, physical_memory() // 2))
    if plan:
        spec = spec or FORMS[auto.choose(ens, budget, hint, target).form]
        passes = forms_plan(ens, spec, DTYPES[dtype])
        doc = {"form": spec.name, "dtype": dtype, "passes": [{"pass": name, **facts} for name, facts in passes]}
        return _emit(json.dumps(doc, indent=1) if fmt == "json" else _plan_text(doc), output)
    if tree is None:
        info = summary(ens, budget, hint, target)
        if fmt == "npz":
            raise OptionError("--format npz needs --tree")
        text = json.dumps(info, indent=1) if fmt == "json" else _summary_text(info)
        return _emit(text, output)
    mats = matrices_of(ens, tree)
    if png is not None:
        from tree2mat.pictures import draw_tree

        size = atomic_write(png, draw_tree(ens, tree, model_name=model.name))
        n_leaf, n_int = mats["B"].shape
        typer.echo(f"wrote {png} ({_human(size)}): tree {tree} ({n_int} internal nodes, {n_leaf} leaves) beside {'W' if 'W' in mats else 'S'}, t, B, the bitvector and v")
        return None
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
    data: Path | None = typer.Option(None, "--data", help="Rows to score (.npy, .npz, .csv, .parquet); default: synthesized (threshold, NaN, random rows)."),
    header: bool | None = typer.Option(None, "--header/--no-header", help=HEADER_HELP),
    rows: int = typer.Option(100_000, "--rows", help="Rows to synthesize; unused with --data."),
    batch: str = typer.Option("1,1000,100000", "--batch", help="Batch sizes, comma-separated."),
    form: str = typer.Option("auto", "--form", help="tree2mat forms to time, comma-separated (auto, sign, bitvector, traverse, ...)."),
    peers: bool = typer.Option(True, "--peers/--no-peers", help="Also time the peer TreeEnsemble converter (skl2onnx / onnxmltools: the bench extra)."),
    repeat: int = typer.Option(5, "--repeat", help="Timed runs per batch size (at least 50 at batch 1)."),
    threads: int | None = typer.Option(None, "--threads", help="onnxruntime intra-op threads (default: onnxruntime's)."),
    device: str = typer.Option("cpu", "--device", help="cpu, or cuda: tree2mat's and Hummingbird's graphs on the CUDA provider, none timed with row data on the CPU (TreeEnsemble has no CUDA kernel: CPU)."),
    max_memory: str | None = typer.Option(None, "--max-memory", help="Largest estimated memory of a tree2mat graph at one batch, e.g. 8G (default: half this machine's memory); larger batches are not timed."),
    batch_hint: int | None = typer.Option(None, "--batch-hint", help="--form auto's batch hint (as for convert; default 10000)."),
    target: str | None = typer.Option(None, "--target", help="--form auto's target runtime (as for convert; default: portable). The timings are onnxruntime's (--device) whatever the target."),
    json_out: Path | None = typer.Option(None, "--json", help="Write the figures as JSON to this file ('-' for stdout)."),
    plot: Path | None = typer.Option(None, "--plot", help="Draw rows/s per contender and batch size to this PNG (needs matplotlib: the plot extra)."),
) -> None:
    """Time MODEL's graphs next to the peers (TreeEnsemble, Hummingbird when installed) and the library's predict: rows/s, latency, peak memory, mismatch counts."""
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


def _check_written_model(output: Path, what: str, example: str, *, model: Path, data: Path, target: str | None, json_out: Path | None = None) -> None:
    """An OptionError unless ``-o`` names a file to write ``what`` to (not ``-``, writable) that is
    none of the command's inputs (MODEL, --data, a --target file) nor its --json report."""
    if str(output) == "-":
        raise OptionError(f"-o -: {what} is a file; name it, e.g. {example}")
    _check_output("-o", output)
    _check_output("--json", json_out)
    target_file = Path(target) if target and Path(target).is_file() else None  # (else a column's name)
    check_outputs({"-o": output, "--json": json_out}, {"MODEL": model, "--data": data, "--target": target_file})


#: ``attend --json``'s schema version (fields are only added within a version).
ATTEND_SCHEMA = 1


@app.command()
def attend(
    model: Path = typer.Argument(..., metavar="MODEL", help="A fitted scikit-learn RandomForestRegressor/Classifier or ExtraTreesRegressor/Classifier (any file convert reads)."),
    data: Path = typer.Option(..., "--data", help="Rows and targets (a classifier's: its class labels) the attention is fitted on (leaf means, epsilon, tau, w): .npz with arrays X and y; .npy rows with --target y.npy; .csv or .parquet with --target COLUMN."),
    header: bool | None = typer.Option(None, "--header/--no-header", help=HEADER_HELP),
    output: Path = typer.Option(..., "-o", "--output", help="Where to write the attention forest (JSON; replaced only on success); tree2mat convert and verify take it."),
    target: str | None = typer.Option(None, "--target", help="The targets: a .csv/.parquet column (header name or 0-based number), a .npz array name (default y), or the .npy file of them."),
    variant: int = typer.Option(1, "--variant", help="ABRF variant: 1 (the contamination model, eq. 14-16: w by a quadratic or linear program), 2 (a softmax with trainable tree scales v and feature weights z, eq. 23, by gradients), 3 (both, eq. 24); 2 and 3 start from ABRF-1's tau and take --loss l2."),
    loss: str = typer.Option("l2", "--loss", help="l2 (the quadratic program, eq. 15) or l1 (the linear program, eq. 20-22) for w, and the error epsilon and tau are chosen by."),
    epsilon: str = typer.Option("auto", "--epsilon", help="Contamination epsilon in [0, 1], or auto: cross-validated over 0, 0.25, 0.5, 0.75, 1."),
    tau: str = typer.Option("auto", "--tau", help="Softmax temperature tau > 0, or auto: cross-validated over 0.01 to 100 times the rows' median ||x - A||^2 / 2."),
    folds: int = typer.Option(5, "--folds", help="Cross-validation folds (for auto, and the scores printed)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the folds' shuffle."),
    json_out: bool = typer.Option(False, "--json", help="Print the result as one JSON object on stdout instead of the table."),
) -> None:
    """Fit an attention-based random forest (ABRF) on MODEL's trees and write it to OUT; print the forest's R^2 and MAE (classifiers: accuracy and log-loss) as fitted, next to the ABRF's, cross-validated (epsilon and tau chosen within each training fold)."""
    import tree2mat
    from tree2mat import attention
    from tree2mat.data import load_labelled

    _check_written_model(output, "the attention forest", "forest.abrf.json", model=model, data=data, target=target)
    eps, temp = _auto_number("--epsilon", epsilon), _auto_number("--tau", tau)
    first = attention.check_variant(variant, eps, loss)  # (before any work)
    X, y = load_labelled(data, target, header)
    start = time.perf_counter()
    with _libraries_to_stderr():
        ens = tree2mat.load(model)  # (read once: select, fit and the scores take the IR)
        chosen = attention.select(ens, X, y, epsilon=first, tau=temp, loss=loss, folds=folds, seed=seed)
        forest = attention.fit(ens, X, y, epsilon=chosen.epsilon, tau=chosen.tau, loss=loss, variant=variant)
        seconds = time.perf_counter() - start
        # the ABRF's score: each fold predicted by the ABRF fitted on the others, epsilon and tau chosen there (nested)
        held = attention.held_out(ens, X, y, epsilon=first, tau=temp, variant=variant, loss=loss, folds=folds, seed=seed)
        size = forest.save(output)
    chosen_eps = eps == "auto" and variant != 2
    info: dict[str, Any] = {
        "schema": ATTEND_SCHEMA, "path": str(output), "bytes": size, "variant": variant, "loss": loss, "rows": int(X.shape[0]),
        "folds": folds, "seed": seed, "epsilon": forest.epsilon, "tau": forest.tau, "auto": {"epsilon": chosen_eps, "tau": temp == "auto"},
        "forest": _finite(attention.scores(y, chosen.forest_predictions, forest.classes)),
        "attention": _finite(attention.scores(y, held, forest.classes)),
        "n_trees": forest.n_trees, "weights_nonzero": int(np.count_nonzero(forest.weights)), "seconds": round(seconds, 3),
    }
    if json_out:
        typer.echo(json.dumps(info, indent=1))
        return
    first_score, second_score = ("accuracy", "log_loss") if forest.is_classifier else ("r2", "mae")
    typer.echo(f"{'':24}{'accuracy' if forest.is_classifier else 'R^2':>9}{'log-loss' if forest.is_classifier else 'MAE':>11}")
    for name, got in (("forest (as fitted)", info["forest"]), (f"ABRF-{variant} ({folds}-fold CV)", info["attention"])):
        typer.echo(f"{name:24}{_figure(got[first_score], '.4f'):>9}{_figure(got[second_score], '.4g'):>11}")
    how = lambda auto: "cross-validated" if auto else "given"  # noqa: E731
    eps_how = "ABRF-2 has none" if variant == 2 else how(chosen_eps)
    start_note = "" if variant == 1 else ", where the gradient fit of v and z started"
    typer.echo(
        f"epsilon {forest.epsilon:g} ({eps_how}), tau {forest.tau:.4g} ({how(temp == 'auto')}{start_note}), "
        f"loss {loss}; {info['weights_nonzero']} of {forest.n_trees} trees weigh in w; fitted in {seconds:.2f} s on {X.shape[0]} rows"
    )
    typer.echo(f"wrote {output} ({_human(size)}): tree2mat convert {output} -o OUT.onnx")


#: ``learn --json``'s schema version (fields are only added within a version).
LEARN_SCHEMA = 1


@app.command()
def learn(
    model: Path = typer.Argument(..., metavar="MODEL", help="A fitted scikit-learn DecisionTreeClassifier, RandomForestClassifier or ExtraTreesClassifier (any file convert reads): the start."),
    data: Path = typer.Option(..., "--data", help="Rows and class labels to fine-tune on: .npz with arrays X and y; .npy rows with --target y.npy; .csv or .parquet with --target COLUMN."),
    header: bool | None = typer.Option(None, "--header/--no-header", help=HEADER_HELP),
    output: Path = typer.Option(..., "-o", "--output", help="Where to write the hardened model (tree2mat IR JSON; replaced only on success); tree2mat convert and verify take it."),
    target: str | None = typer.Option(None, "--target", help="The labels: a .csv/.parquet column (header name or 0-based number), a .npz array name (default y), or the .npy file of them."),
    epochs: int = typer.Option(50, "--epochs", help="EM epochs (each: Adam over shuffled batches for the splits, eq. 14; the leaves in closed form, eq. 13)."),
    steepness: float = typer.Option(1.0, "--steepness", help="The splits' starting steepness gamma (sigma(gamma f(x)); the paper: 1)."),
    steepness_increase: float = typer.Option(0.1, "--steepness-increase", help="Added to gamma after every epoch (the paper: 0.1; 0 keeps it)."),
    oblique: bool = typer.Option(True, "--oblique/--axis-aligned", help="Tune every split's weights (oblique splits: linear combinations of the features) or only each split's threshold on its own feature."),
    held_out: float = typer.Option(0.2, "--held-out", help="Fraction of the rows kept out of fine-tuning and only measured on (0: none)."),
    learning_rate: float = typer.Option(0.01, "--learning-rate", help="Adam's step size."),
    batch_size: int = typer.Option(256, "--batch-size", help="Rows per Adam step."),
    seed: int = typer.Option(0, "--seed", help="Seed of the held-out rows and the batches' shuffle."),
    json_out: Path | None = typer.Option(None, "--json", help="Write the result as JSON to this file ('-': stdout, only the JSON)."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show each epoch's accuracies on stderr (a bar on a terminal, a line per epoch otherwise)."),
) -> None:
    """Fine-tune MODEL's splits and leaves end to end (Hehn et al., End-to-End Learning of Decision Trees and Forests: probabilistic splits, EM, steepness annealing), harden it into a deterministic tree or forest and write it to OUT as tree2mat IR; print the accuracies of the start and of the fine-tuned model, probabilistic and deterministic, on the fitting and the held-out rows."""
    from dataclasses import asdict

    import tree2mat
    from tree2mat import learn as learning
    from tree2mat.data import load_labelled
    from tree2mat.ir.io import dumps

    _check_written_model(output, "the fine-tuned model", "tuned.json", model=model, data=data, target=target, json_out=json_out)
    learning.check_options(epochs, steepness, steepness_increase, held_out, learning_rate, batch_size)  # (before any work)
    X, y = load_labelled(data, target, header)
    start = time.perf_counter()
    with _libraries_to_stderr(), _Progress("learn", enabled=progress) as shown:
        def report(e: Any) -> None:
            held = "" if e.held_out_deterministic is None else f", held-out {e.held_out_probabilistic:.4f} / {e.held_out_deterministic:.4f}"
            shown.line(f"epoch {e.epoch:>3} of {epochs}, gamma {e.steepness:.2f}: train {e.train_probabilistic:.4f} / {e.train_deterministic:.4f}{held} (probabilistic / deterministic)",
                       e.epoch / max(epochs, 1))

        ens = tree2mat.load(model)
        result = learning.learn(ens, X, y, epochs=epochs, steepness=steepness, steepness_increase=steepness_increase, oblique=oblique,
                                held_out=held_out, seed=seed, learning_rate=learning_rate, batch_size=batch_size, progress=report)
        seconds = time.perf_counter() - start
        size = atomic_write(output, (dumps(result.ensemble) + "\n").encode())
    final = result.final
    info: dict[str, Any] = {
        "schema": LEARN_SCHEMA, "path": str(output), "bytes": size, "splits": "oblique" if oblique else "axis-aligned",
        "rows": result.rows, "held_out_rows": result.held_out_rows, "epochs": epochs, "steepness": steepness,
        "steepness_increase": steepness_increase, "learning_rate": learning_rate, "batch_size": batch_size, "seed": seed,
        "n_trees": result.ensemble.n_trees,
        "n_projections": 0 if result.ensemble.projections is None else result.ensemble.projections.n_projections,
        "initial": {"train": result.initial_train, "held_out": result.initial_held_out},
        "final": asdict(final),
        "history": [asdict(e) for e in result.history],
        "seconds": round(seconds, 3),
    }
    if json_out is not None and str(json_out) == "-":
        typer.echo(json.dumps(info, indent=1))
        return
    if json_out is not None:
        _write_text(json_out, json.dumps(info, indent=1) + "\n")
    typer.echo(f"{'accuracy':38}{'train':>9}{'held-out':>10}")
    rows = (
        ("start (the model, deterministic)", result.initial_train, result.initial_held_out),
        (f"fine-tuned, probabilistic (gamma {final.steepness:.2f})", final.train_probabilistic, final.held_out_probabilistic),
        ("fine-tuned, deterministic (as written)", final.train_deterministic, final.held_out_deterministic),
    )
    for name, train, held in rows:
        typer.echo(f"{name:38}{train:>9.4f}{_figure(held, '.4f'):>10}")
    typer.echo(f"{info['splits']} splits, {epochs} epochs on {result.rows} rows ({result.held_out_rows} held out) in {seconds:.2f} s")
    typer.echo(f"wrote {output} ({_human(size)}): tree2mat convert {output} -o OUT.onnx")


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


# ------------------------------------------------------------------------------------- helpers


def _io(value: Any) -> dict[str, Any]:
    """An ONNX graph input or output: name, shape (a dimension's name where it has no size), dtype."""
    import onnx

    tt = value.type.tensor_type
    dims = [d.dim_param or (d.dim_value if d.HasField("dim_value") else None) for d in tt.shape.dim]
    dtype = "string" if tt.elem_type == onnx.TensorProto.STRING else onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type).name
    return {"name": value.name, "shape": dims, "dtype": dtype}


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


def _check_png(png: Path, tree: int | None, fmt: str, output: Path | None) -> None:
    """inspect --png's checks, before the model is read."""
    from tree2mat.pictures import require_matplotlib

    if tree is None:
        raise OptionError("--png needs --tree K: it draws one tree")
    if output is not None or fmt != "text":
        raise OptionError("--png writes only the picture; run inspect again for -o / --format")
    _check_output("--png", png, png=True)
    require_matplotlib("--png")


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


def _write_npz(path: Path, mats: dict[str, np.ndarray]) -> None:
    import io

    buf = io.BytesIO()
    np.savez(buf, allow_pickle=True, **mats)  # (explicit: no matrix is taken for the flag)
    atomic_write(path, buf.getvalue())


def _emit(text: str, output: Path | None) -> None:
    if output is None or str(output) == "-":
        typer.echo(text)
    else:
        _write_text(output, text + "\n")


def _plan_text(doc: dict[str, Any]) -> str:
    """``inspect --plan`` as text: one block per pass, a line per figure (nested ones inline)."""
    lines = [f"passes of the {doc['form']} form's graph ({doc['dtype']} input):"]
    for k, step in enumerate(doc["passes"], 1):
        lines.append(f"{k}. {step['pass']}")
        for key, value in step.items():
            if key == "pass":
                continue
            if isinstance(value, dict):
                value = ", ".join(f"{k2} {_plan_value(v2)}" for k2, v2 in value.items())
            lines.append(f"   {key.replace('_', ' ')}: {value}")
    return "\n".join(lines)


def _plan_value(value: Any) -> str:
    return ", ".join(f"{k} {v}" for k, v in value.items()).join("()") if isinstance(value, dict) else str(value)


def _summary_text(info: dict[str, Any]) -> str:
    lines = []
    for key, value in info.items():
        if key in ("forms", "auto"):
            continue
        if key == "categories":
            for col in value:
                codes = ", ".join(f"{label}={code}" for code, label in enumerate(col["categories"]))
                lines.append(f"categories of column {col['column']}{' (' + col['name'] + ')' if col['name'] else ''}: {codes}")
            continue
        if isinstance(value, dict):
            value = ", ".join(f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}" for k, v in value.items())
        lines.append(f"{key.replace('_', ' ')}: {value}")
    lines.append("forms:")
    for name, f in info["forms"].items():
        speed = f", estimated {f['estimated_us_per_row']:.3g} us per row on the CPU" if "estimated_us_per_row" in f else ""
        if "estimated_us_per_run_of_one_row" in f:
            speed += f" ({f['estimated_us_per_run_of_one_row']:.3g} us for a run of one row)"
        lines.append(
            f"  {name}: constants {_human(f['constant_bytes'])}, about {_human(f['bytes_per_row'])} "
            f"of runtime memory per row{speed}{'' if f['exact'] else ' (approximate)'}"
        )
    lines.append(f"auto: {info['auto']['form']}: {info['auto']['reason']}")
    return "\n".join(lines)


def _matrices_text(tree: int, mats: dict[str, np.ndarray], names: tuple[str, ...] | None) -> str:
    n_int, n_leaf = mats["B"].shape[1], mats["B"].shape[0]
    nodes = [f"n{i + 1}" for i in range(n_int)]
    leaves = [f"v{j + 1}" for j in range(n_leaf)]
    selection = "W" if "W" in mats else "S"
    feats = list(names) if names else [f"x{f + 1}" for f in range(mats[selection].shape[1])]
    out = [f"tree {tree}: {n_int} internal nodes (breadth-first n1..), {n_leaf} leaves (left to right v1..)"]

    def table(title: str, m: np.ndarray, rows: list[str], cols: list[str]) -> None:
        out.append(f"\n{title}")
        w = max([len(c) for c in cols] + [len(f"{v:g}") for v in m.ravel()] + [2])
        out.append(" " * 6 + " ".join(c.rjust(w) for c in cols))
        for r, row in zip(rows, m):
            out.append(r.ljust(6) + " ".join(f"{v:g}".rjust(w) for v in row))

    if selection == "W":
        table("W (node x feature weights: a node tests W x <= t)", mats["W"], nodes, feats)
    else:
        table("S (node x feature)", mats["S"], nodes, feats)
    table("t (thresholds)", mats["t"][:, None], nodes, ["t"])
    table("B (template: -1 left subtree, +1 right, 0 off path)", mats["B"], leaves, nodes)
    table("bitvector (QuickScorer: 0 iff leaf in left subtree)", mats["bitvector"], leaves, nodes)
    table("depth", mats["depth"][:, None], leaves, ["d"])
    if "level_feature" in mats:
        levels = [f"d{d}" for d in range(mats["level_feature"].size)]
        out.append("\nlevels (an oblivious tree: every node of a level tests the same; leaf = sum of power x [right at the level])")
        w = max([len(f"{v:g}") for v in mats["level_threshold"]] + [len(str(v)) for v in mats["level_power"]] + [len(c) for c in feats] + [9])
        out.append(" " * 6 + " ".join(c.rjust(w) for c in ("feature", "threshold", "power")))
        for name, f, thr, power in zip(levels, mats["level_feature"], mats["level_threshold"], mats["level_power"]):
            col = feats[int(f)] if int(f) < len(feats) else f"W x (column {int(f)})"
            out.append(name.ljust(6) + " ".join(v.rjust(w) for v in (col, f"{thr:g}", str(int(power)))))
    table("v (leaf values)", mats["v"], leaves, [f"k{k}" for k in range(mats["v"].shape[1])])
    return "\n".join(out)


# ------------------------------------------------------------------------------------- progress


#: A convert shows its steps only once it has run this long (seconds): a quick one prints nothing.
PROGRESS_DELAY_S = 1.0


class _Progress:
    """Progress of a long run on stderr: a live bar on a terminal; elsewhere (CI logs, pipes)
    plain lines. ``update`` (verify: rows read) prints a line at every further 10 % and nothing
    for a run done in one step; ``stage`` (convert: its steps) a line per step, from the first
    step that begins ``delay`` seconds or more after the start."""

    def __init__(self, label: str, enabled: bool = True, delay: float = 0.0) -> None:
        self.label, self.enabled, self.delay = label, enabled, delay
        self.start = time.monotonic()
        self.bar: Any = None
        self.task: Any = None
        self.next_line = 0.1
        self.steps = 0
        self.last_stage = ""

    def __enter__(self) -> _Progress:
        return self

    def update(self, rows: int, fraction: float) -> None:
        self.steps += 1
        if not self.enabled or (self.steps == 1 and fraction >= 1.0):
            return
        if sys.stderr.isatty():
            self._bar(fraction, f"{rows:,} rows", eta=True)
        elif fraction >= self.next_line or fraction >= 1.0:
            typer.echo(f"{self.label}: {rows:,} rows ({100 * fraction:.0f}% of the data read)", err=True)
            self.next_line = (int(fraction * 10) + 1) / 10

    def stage(self, text: str, total: int) -> None:
        name = text.split(" (")[0]  # ("reading the model (1,200 of 5,000 trees)": still the step it was)
        if name != self.last_stage:
            self.steps, self.last_stage = self.steps + 1, name
        if not self.enabled or time.monotonic() - self.start < self.delay:
            return
        if sys.stderr.isatty():
            self._bar((self.steps - 1) / total, text, eta=False)
        else:
            typer.echo(f"{self.label}: {text} (step {self.steps} of {total})", err=True)

    def line(self, text: str, fraction: float) -> None:
        """A line that stays (learn: an epoch's accuracies), under a bar at ``fraction`` on a
        terminal."""
        if not self.enabled:
            return
        if sys.stderr.isatty():
            self._bar(fraction, "", eta=True)
            self.bar.console.print(f"{self.label}: {text}", highlight=False, markup=False)
        else:
            typer.echo(f"{self.label}: {text}", err=True)

    def _bar(self, fraction: float, text: str, eta: bool) -> None:
        if self.bar is None:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            self.bar = Progress(TextColumn(self.label), BarColumn(), TextColumn("{task.percentage:>3.0f}%  {task.fields[what]}"),
                                TimeRemainingColumn() if eta else TimeElapsedColumn(), transient=True,
                                console=Console(stderr=True))  # stdout is for results (--json -)
            self.bar.start()
            self.task = self.bar.add_task(self.label, total=1.0, what="")
        self.bar.update(self.task, completed=fraction, what=text)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()


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


# ------------------------------------------------------------------------------------ the entry


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; errors are one line on stderr. ``--debug`` (anywhere on the line) adds the
    traceback before that line; exit codes stay the same."""
    from tree2mat.frontends.loading import safe_loading

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

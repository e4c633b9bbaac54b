"""``tree2mat learn``: a tree or forest fine-tuned end to end, hardened again."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import typer

from tree2mat._files import atomic_write

from ._app import HEADER_HELP, app
from ._output import _check_written_model, _figure, _human, _libraries_to_stderr, _write_text
from ._progress import _Progress

#: ``learn --json``'s schema version (fields are only added within a version).
LEARN_SCHEMA = 1


@app.command()
def learn(
    model: Path = typer.Argument(..., metavar="MODEL", help=(
        "A fitted scikit-learn DecisionTreeClassifier, RandomForestClassifier or ExtraTreesClassifier (any file convert"
        " reads): the start."
    )),
    data: Path = typer.Option(..., "--data", help=(
        "Rows and class labels to fine-tune on: .npz with arrays X and y; .npy rows with --target y.npy; .csv or "
        ".parquet with --target COLUMN."
    )),
    header: bool | None = typer.Option(None, "--header/--no-header", help=HEADER_HELP),
    output: Path = typer.Option(..., "-o", "--output", help=(
        "Where to write the hardened model (tree2mat IR JSON; replaced only on success); tree2mat convert and verify "
        "take it."
    )),
    target: str | None = typer.Option(None, "--target", help=(
        "The labels: a .csv/.parquet column (header name or 0-based number), a .npz array name (default y), or the .npy"
        " file of them."
    )),
    epochs: int = typer.Option(50, "--epochs", help="EM epochs (each: Adam over shuffled batches for the splits, eq. 14; the leaves in closed form, eq. 13)."),
    steepness: float = typer.Option(1.0, "--steepness", help="The splits' starting steepness gamma (sigma(gamma f(x)); the paper: 1)."),
    steepness_increase: float = typer.Option(0.1, "--steepness-increase", help="Added to gamma after every epoch (the paper: 0.1; 0 keeps it)."),
    oblique: bool = typer.Option(True, "--oblique/--axis-aligned", help=(
        "Tune every split's weights (oblique splits: linear combinations of the features) or only each split's "
        "threshold on its own feature."
    )),
    held_out: float = typer.Option(0.2, "--held-out", help="Fraction of the rows kept out of fine-tuning and only measured on (0: none)."),
    learning_rate: float = typer.Option(0.01, "--learning-rate", help="Adam's step size."),
    batch_size: int = typer.Option(256, "--batch-size", help="Rows per Adam step."),
    seed: int = typer.Option(0, "--seed", help="Seed of the held-out rows and the batches' shuffle."),
    json_out: Path | None = typer.Option(None, "--json", help="Write the result as JSON to this file ('-': stdout, only the JSON)."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help=(
        "Show each epoch's accuracies on stderr (a bar on a terminal, a line per epoch otherwise)."
    )),
) -> None:
    """Fine-tune MODEL's splits and leaves end to end (Hehn et al., End-to-End Learning of Decision Trees and Forests: probabilistic splits, EM, steepness annealing), harden it into a deterministic tree or forest and write it to OUT as tree2mat IR; print the accuracies of the start and of the fine-tuned model, probabilistic and deterministic, on the fitting and the held-out rows."""  # noqa: E501
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
            shown.line(f"epoch {e.epoch:>3} of {epochs}, gamma {e.steepness:.2f}: train {e.train_probabilistic:.4f} / "
                       f"{e.train_deterministic:.4f}{held} (probabilistic / deterministic)",
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

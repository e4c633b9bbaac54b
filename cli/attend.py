"""``tree2mat attend``: an attention-based forest fitted over a forest."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from ._app import HeaderOption, app
from ._output import _auto_number, _check_written_model, _figure, _finite, _human, _libraries_to_stderr

#: ``attend --json``'s schema version (fields are only added within a version).
ATTEND_SCHEMA = 1


# attend's argument and options as Typer's Annotated aliases (their defaults stay in the command's signature).
ModelArgument = Annotated[Path, typer.Argument(metavar="MODEL", help=(
    "A fitted scikit-learn RandomForestRegressor/Classifier or ExtraTreesRegressor/Classifier (any file convert "
    "reads)."
))]
DataOption = Annotated[Path, typer.Option("--data", help=(
    "Rows and targets (a classifier's: its class labels) the attention is fitted on (leaf means, epsilon, tau, w): "
    ".npz with arrays X and y; .npy rows with --target y.npy; .csv or .parquet with --target COLUMN."
))]
OutputOption = Annotated[Path, typer.Option("-o", "--output", help=(
    "Where to write the attention forest (JSON; replaced only on success); tree2mat convert and verify take it."
))]
TargetOption = Annotated[str | None, typer.Option("--target", help=(
    "The targets: a .csv/.parquet column (header name or 0-based number), a .npz array name (default y), or the "
    ".npy file of them."
))]
VariantOption = Annotated[int, typer.Option("--variant", help=(
    "ABRF variant: 1 (the contamination model, eq. 14-16: w by a quadratic or linear program), 2 (a softmax with "
    "trainable tree scales v and feature weights z, eq. 23, by gradients), 3 (both, eq. 24); 2 and 3 start from "
    "ABRF-1's tau and take --loss l2."
))]
LossOption = Annotated[str, typer.Option("--loss", help=(
    "l2 (the quadratic program, eq. 15) or l1 (the linear program, eq. 20-22) for w, and the error epsilon and tau "
    "are chosen by."
))]
EpsilonOption = Annotated[str, typer.Option("--epsilon", help="Contamination epsilon in [0, 1], or auto: cross-validated over 0, 0.25, 0.5, 0.75, 1.")]
TauOption = Annotated[str, typer.Option("--tau", help=(
    "Softmax temperature tau > 0, or auto: cross-validated over 0.01 to 100 times the rows' median ||x - A||^2 / 2."
))]
FoldsOption = Annotated[int, typer.Option("--folds", help="Cross-validation folds (for auto, and the scores printed).")]
SeedOption = Annotated[int, typer.Option("--seed", help="Seed of the folds' shuffle.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the result as one JSON object on stdout instead of the table.")]


@app.command()
def attend(
    model: ModelArgument,
    *,
    data: DataOption,
    header: HeaderOption = None,
    output: OutputOption,
    target: TargetOption = None,
    variant: VariantOption = 1,
    loss: LossOption = "l2",
    epsilon: EpsilonOption = "auto",
    tau: TauOption = "auto",
    folds: FoldsOption = 5,
    seed: SeedOption = 0,
    json_out: JsonOption = False,
) -> None:
    """Fit an attention-based random forest (ABRF) on MODEL's trees and write it to OUT; print the forest's R^2 and MAE (classifiers: accuracy and log-loss) as fitted, next to the ABRF's, cross-validated (epsilon and tau chosen within each training fold)."""  # noqa: E501
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
    _print_table(info, forest.is_classifier, seconds)


def _print_table(info: dict[str, Any], classifier: bool, seconds: float) -> None:
    """attend's text: the forest's scores next to the ABRF's, how epsilon and tau were had, what was written
    (all from ``info``, what ``--json`` prints, but the unrounded ``seconds``)."""
    variant, folds = info["variant"], info["folds"]
    first_score, second_score = ("accuracy", "log_loss") if classifier else ("r2", "mae")
    typer.echo(f"{'':24}{'accuracy' if classifier else 'R^2':>9}{'log-loss' if classifier else 'MAE':>11}")
    for name, got in (("forest (as fitted)", info["forest"]), (f"ABRF-{variant} ({folds}-fold CV)", info["attention"])):
        typer.echo(f"{name:24}{_figure(got[first_score], '.4f'):>9}{_figure(got[second_score], '.4g'):>11}")
    how = lambda auto: "cross-validated" if auto else "given"  # noqa: E731
    eps_how = "ABRF-2 has none" if variant == 2 else how(info["auto"]["epsilon"])
    start_note = "" if variant == 1 else ", where the gradient fit of v and z started"
    typer.echo(
        f"epsilon {info['epsilon']:g} ({eps_how}), tau {info['tau']:.4g} ({how(info['auto']['tau'])}{start_note}), "
        f"loss {info['loss']}; {info['weights_nonzero']} of {info['n_trees']} trees weigh in w; fitted in {seconds:.2f} s on {info['rows']} rows"
    )
    typer.echo(f"wrote {info['path']} ({_human(info['bytes'])}): tree2mat convert {info['path']} -o OUT.onnx")

"""``tree2mat learn``: a tree or forest fine-tuned end to end, hardened again."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tree2mat._files import atomic_write

from ._app import HeaderOption, app
from ._output import _check_written_model, _figure, _human, _libraries_to_stderr, _write_text
from ._progress import _Progress

if TYPE_CHECKING:
    from tree2mat.learn import Epoch, Learned

#: ``learn --json``'s schema version (fields are only added within a version).
LEARN_SCHEMA = 1


# learn's argument and options as Typer's Annotated aliases (their defaults stay in the command's signature).
ModelArgument = Annotated[Path, typer.Argument(metavar="MODEL", help=(
    "A fitted scikit-learn DecisionTree, RandomForest or ExtraTrees Classifier or Regressor (any file convert"
    " reads): the start."
))]
DataOption = Annotated[Path, typer.Option("--data", help=(
    "Rows and class labels (a regressor's targets) to fine-tune on: .npz with arrays X and y; .npy rows with "
    "--target y.npy; .csv or .parquet with --target COLUMN."
))]
OutputOption = Annotated[Path, typer.Option("-o", "--output", help=(
    "Where to write the hardened model (tree2mat IR JSON; replaced only on success); tree2mat convert and verify "
    "take it."
))]
TargetOption = Annotated[str | None, typer.Option("--target", help=(
    "The labels or targets: a .csv/.parquet column (header name or 0-based number), a .npz array name (default y), or the .npy"
    " file of them."
))]
EpochsOption = Annotated[int, typer.Option("--epochs", help=(
    "EM epochs (each: Adam over shuffled batches for the splits, eq. 14; the leaves in closed form, eq. 13, a "
    "regressor's as responsibility-weighted means of the targets)."
))]
SteepnessOption = Annotated[float, typer.Option("--steepness", help="The splits' starting steepness gamma (sigma(gamma f(x)); the paper: 1).")]
SteepnessIncreaseOption = Annotated[float, typer.Option("--steepness-increase", help="Added to gamma after every epoch (the paper: 0.1; 0 keeps it).")]
ObliqueOption = Annotated[bool, typer.Option("--oblique/--axis-aligned", help=(
    "Tune every split's weights (oblique splits: linear combinations of the features) or only each split's "
    "threshold on its own feature."
))]
HeldOutOption = Annotated[float, typer.Option("--held-out", help="Fraction of the rows kept out of fine-tuning and only measured on (0: none).")]
LearningRateOption = Annotated[float, typer.Option("--learning-rate", help="Adam's step size.")]
BatchSizeOption = Annotated[int, typer.Option("--batch-size", help="Rows per Adam step.")]
FeaturesPerSplitOption = Annotated[int | None, typer.Option("--features-per-split", metavar="K", help=(
    "Each oblique split weighs only K features: its own and K-1 others drawn per split by --seed, fixed for the whole"
    " fine-tuning (the paper's forests, section 2.7: decorrelated trees; a tree's: sparser splits, smaller graphs). "
    "Default: every feature."
))]
GrowDepthOption = Annotated[int | None, typer.Option("--grow-depth", metavar="D", help=(
    "First grow each tree greedily (the paper's section 2.5) to depth at most D: the model's leaves are split one by one into"
    " oblique stumps, each trained alone on the rows that reach it; a pure leaf stays one. Then the whole tree is fine-tuned "
    "(--epochs). A model of one leaf starts from the root, as the paper does."
))]
GrowLeavesOption = Annotated[int | None, typer.Option("--grow-leaves", metavar="L", help=(
    "Grow greedily (as --grow-depth) to at most L leaves per tree, breadth-first."
))]
GrowEpochsOption = Annotated[int | None, typer.Option("--grow-epochs", metavar="E", help=(
    "Epochs each new stump is trained while growing (default 10; the steepness annealed as in fine-tuning)."
))]
GrowAttemptsOption = Annotated[int | None, typer.Option("--grow-attempts", metavar="A", help=(
    "Stumps tried per leaf while growing before it stays a leaf (a stump fails when it sends every row one side; default 3)."
))]
SeedOption = Annotated[int, typer.Option("--seed", help="Seed of the held-out rows, the batches' shuffle and the feature subsets.")]
JsonOption = Annotated[Path | None, typer.Option("--json", help="Write the result as JSON to this file ('-': stdout, only the JSON).")]
ProgressOption = Annotated[bool, typer.Option("--progress/--no-progress", help=(
    "Show each epoch's accuracies on stderr (a bar on a terminal, a line per epoch otherwise)."
))]


@app.command()
def learn(
    model: ModelArgument,
    *,
    data: DataOption,
    header: HeaderOption = None,
    output: OutputOption,
    target: TargetOption = None,
    epochs: EpochsOption = 50,
    steepness: SteepnessOption = 1.0,
    steepness_increase: SteepnessIncreaseOption = 0.1,
    oblique: ObliqueOption = True,
    held_out: HeldOutOption = 0.2,
    learning_rate: LearningRateOption = 0.01,
    batch_size: BatchSizeOption = 256,
    features_per_split: FeaturesPerSplitOption = None,
    grow_depth: GrowDepthOption = None,
    grow_leaves: GrowLeavesOption = None,
    grow_epochs: GrowEpochsOption = None,
    grow_attempts: GrowAttemptsOption = None,
    seed: SeedOption = 0,
    json_out: JsonOption = None,
    progress: ProgressOption = True,
) -> None:
    """Fine-tune MODEL's splits and leaves end to end (Hehn et al., End-to-End Learning of Decision Trees and Forests: probabilistic splits, EM, steepness annealing), harden it into a deterministic tree or forest and write it to OUT as tree2mat IR; print the accuracies (a regressor's mean squared errors) of the start and of the fine-tuned model, probabilistic and deterministic, on the fitting and the held-out rows."""  # noqa: E501
    from dataclasses import asdict

    import tree2mat
    from tree2mat import learn as learning
    from tree2mat.data import load_labelled
    from tree2mat.ir.io import dumps

    _check_written_model(output, "the fine-tuned model", "tuned.json", model=model, data=data, target=target, json_out=json_out)
    learning.check_options(epochs, steepness, steepness_increase, held_out, learning_rate, batch_size, features_per_split, oblique)  # (before any work)
    growth = _growth(grow_depth, grow_leaves, grow_epochs, grow_attempts, oblique)
    X, y = load_labelled(data, target, header)
    start = time.perf_counter()
    with _libraries_to_stderr(), _Progress("learn", enabled=progress) as shown:
        ens = tree2mat.load(model)
        result = learning.learn(ens, X, y, epochs=epochs, steepness=steepness, steepness_increase=steepness_increase, oblique=oblique,
                                held_out=held_out, seed=seed, learning_rate=learning_rate, batch_size=batch_size, features_per_split=features_per_split,
                                grow=growth, progress=_epoch_lines(shown, epochs, _metric(ens)))
        seconds = time.perf_counter() - start
        size = atomic_write(output, (dumps(result.ensemble) + "\n").encode())
    info: dict[str, Any] = {
        "schema": LEARN_SCHEMA, "path": str(output), "bytes": size, "splits": "oblique" if oblique else "axis-aligned",
        "rows": result.rows, "held_out_rows": result.held_out_rows, "epochs": epochs, "steepness": steepness,
        "steepness_increase": steepness_increase, "learning_rate": learning_rate, "batch_size": batch_size, "seed": seed,
        "features_per_split": features_per_split, "grow": None if growth is None else asdict(growth), "growth": _grown(result, growth),
        "metric": result.metric, "n_trees": result.ensemble.n_trees,
        "n_projections": 0 if result.ensemble.projections is None else result.ensemble.projections.n_projections,
        "initial": {"train": result.initial_train, "held_out": result.initial_held_out}, "final": asdict(result.final),
        "history": [asdict(e) for e in result.history], "seconds": round(seconds, 3),
    }
    if json_out is not None and str(json_out) == "-":
        typer.echo(json.dumps(info, indent=1))
        return
    if json_out is not None:
        _write_text(json_out, json.dumps(info, indent=1) + "\n")
    _print_table(info, result, seconds)


def _growth(depth: int | None, leaves: int | None, epochs: int | None, attempts: int | None, oblique: bool) -> Any:
    """The :class:`tree2mat.learn.Growth` the options ask for (None: no growth), checked."""
    from tree2mat.errors import OptionError
    from tree2mat.learn import GROW_ATTEMPTS, GROW_EPOCHS, Growth

    if depth is None and leaves is None:
        given = [name for name, v in (("--grow-epochs", epochs), ("--grow-attempts", attempts)) if v is not None]
        if given:
            raise OptionError(f"{given[0]} sets greedy growth: give --grow-depth or --grow-leaves too")
        return None
    growth = Growth(depth, leaves, GROW_EPOCHS if epochs is None else epochs, GROW_ATTEMPTS if attempts is None else attempts)
    growth.check(oblique)
    return growth


def _grown(result: Learned, growth: Any) -> dict[str, Any] | None:
    """What greedy growth did (None: none asked): the stumps kept, the leaves left so after every attempt at a stump failed,
    and each grown tree's leaves and depth."""
    if growth is None:
        return None
    return {
        "splits": sum(s.split for s in result.growth), "failed": sum(not s.split for s in result.growth),
        "leaves": [t.n_leaves for t in result.ensemble.trees], "depth": [int(t.leaf_depths().max()) for t in result.ensemble.trees],
    }


#: How learn shows each metric: its name and format (an accuracy in [0, 1]; a mean squared error in the targets' units, squared).
_METRICS = {"accuracy": ("accuracy", ".4f", 9), "mse": ("mean squared error", ".6g", 12)}


def _metric(ens: Any) -> str:
    """The metric :func:`tree2mat.learn.learn` reports for the model (its ``Learned.metric``)."""
    from tree2mat.ir.core import Task

    return "mse" if ens.task is Task.REGRESSION else "accuracy"


def _epoch_lines(shown: _Progress, epochs: int, metric: str) -> Callable[[Epoch], None]:
    """learn's progress: after each epoch, its accuracies (mean squared errors) on the fitting and the held-out rows (probabilistic / deterministic)."""
    name, f, _ = _METRICS[metric]

    def report(e: Epoch) -> None:
        held = "" if e.held_out_deterministic is None else f", held-out {e.held_out_probabilistic:{f}} / {e.held_out_deterministic:{f}}"
        shown.line(f"epoch {e.epoch:>3} of {epochs}, gamma {e.steepness:.2f}: {name}, train {e.train_probabilistic:{f}} / "
                   f"{e.train_deterministic:{f}}{held} (probabilistic / deterministic)",
                   e.epoch / max(epochs, 1))

    return report


def _print_table(info: dict[str, Any], result: Learned, seconds: float) -> None:
    """learn's text: the accuracies (mean squared errors) of the start and of the fine-tuned model, probabilistic and
    deterministic (``info``: what ``--json`` writes, but the unrounded ``seconds``)."""
    final = result.final
    name, f, width = _METRICS[result.metric]
    typer.echo(f"{name:38}{'train':>{width}}{'held-out':>{width + 1}}")
    grown = info["growth"]
    rows = (
        ("start (the model, deterministic)", result.initial_train, result.initial_held_out),
        *((("grown greedily (deterministic)", result.history[0].train_deterministic, result.history[0].held_out_deterministic),) if grown else ()),
        (f"fine-tuned, probabilistic (gamma {final.steepness:.2f})", final.train_probabilistic, final.held_out_probabilistic),
        ("fine-tuned, deterministic (as written)", final.train_deterministic, final.held_out_deterministic),
    )
    for row, train, held in rows:
        typer.echo(f"{row:38}{train:>{width}{f}}{_figure(held, f):>{width + 1}}")
    if grown:
        typer.echo(f"grown: {grown['splits']} stumps kept, {grown['failed']} leaves after failed attempts; leaves per tree "
                   f"{min(grown['leaves'])}-{max(grown['leaves'])}, depth {min(grown['depth'])}-{max(grown['depth'])}")
    typer.echo(f"{info['splits']} splits, {info['epochs']} epochs on {result.rows} rows ({result.held_out_rows} held out) in {seconds:.2f} s")
    typer.echo(f"wrote {info['path']} ({_human(info['bytes'])}): tree2mat convert {info['path']} -o OUT.onnx")

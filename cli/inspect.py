"""``tree2mat inspect``: a model's summary, one tree's matrices or picture, an exact form's passes (``--plan``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
import typer

from tree2mat._files import atomic_write, check_outputs
from tree2mat.errors import OptionError

from ._app import FORMAT_CHOICES, app
from ._output import _check_output, _emit, _human, _libraries_to_stderr

if TYPE_CHECKING:
    from tree2mat.forms import FormSpec
    from tree2mat.ir.core import Ensemble


# inspect's argument and options as Typer's Annotated aliases (their defaults stay in the command's signature).
ModelArgument = Annotated[Path, typer.Argument(metavar="MODEL", help="Fitted model file (or a tree's matrices, .npz as --format npz writes them).")]
TreeOption = Annotated[int | None, typer.Option("--tree", help="Show the matrices of this tree (0-based).")]
FormatOption = Annotated[str, typer.Option("--format", help="text, json or npz (npz needs -o; it reads back as MODEL).")]
OutputOption = Annotated[Path | None, typer.Option("-o", "--output", help="Write to this file instead of stdout ('-': stdout).")]
MaxMemoryOption = Annotated[str, typer.Option("--max-memory", help="Memory budget for the form auto would pick (as for convert).")]
BatchHintOption = Annotated[int | None, typer.Option("--batch-hint", help="Rows per run for the form auto would pick (as for convert; default 10000).")]
TargetOption = Annotated[str | None, typer.Option("--target", help="The runtime for the form auto would pick (as for convert; default: portable).")]
PngOption = Annotated[Path | None, typer.Option("--png", help=(
    "With --tree K: draw the tree beside its matrices to this PNG instead of printing them (a large tree "
    "summarized; needs matplotlib: the plot extra)."
))]
PlanOption = Annotated[bool, typer.Option("--plan", help=(
    "Print what each pass of an exact form's graph makes of MODEL: the trees stacked, the node tests, the exit, the"
    " sums."
))]
FormOption = Annotated[str | None, typer.Option("--form", help="With --plan: the exact form (default: the one --form auto picks, as for convert).")]
DtypeOption = Annotated[str | None, typer.Option("--dtype", help="With --plan: the graph's input type, float32 or float64 (as for convert).")]


@app.command()
def inspect(
    model: ModelArgument,
    tree: TreeOption = None,
    fmt: FormatOption = "text",
    output: OutputOption = None,
    max_memory: MaxMemoryOption = "4G",
    batch_hint: BatchHintOption = None,
    target: TargetOption = None,
    png: PngOption = None,
    plan: PlanOption = False,
    form: FormOption = None,
    dtype: DtypeOption = None,
) -> None:
    """Summarize MODEL, print one tree as the papers' matrices (S, t, B, bitvector, v, depth) or draw it beside them (--png), or print an exact form's passes (--plan)."""  # noqa: E501
    import tree2mat
    from tree2mat.forms.auto import check_batch_hint, check_target, parse_memory
    from tree2mat.inspect import summary
    from tree2mat.ir.limits import physical_memory

    if fmt not in FORMAT_CHOICES:
        raise OptionError(f"unknown format {fmt!r}; choose one of {', '.join(FORMAT_CHOICES)}")
    budget = parse_memory(max_memory)
    hint = check_batch_hint(batch_hint)
    check_target(target)
    if png is not None:
        _check_png(png, tree, fmt, output)
    spec, dtype = _check_plan(plan, tree, fmt, form, dtype)
    _check_output("-o", output)
    check_outputs({"-o": output, "--png": png}, {"MODEL": model})
    with _libraries_to_stderr():
        # (a model whose every graph passes both --max-memory and half this machine's memory for
        # 10 000 rows is refused unread; one that only passes --max-memory is summarized)
        ens = tree2mat.load(model, max_memory=max(budget, physical_memory() // 2))
    if plan:
        doc = _plan(ens, spec, dtype, budget, hint, target)
        return _emit(json.dumps(doc, indent=1) if fmt == "json" else _plan_text(doc), output)
    if tree is None:
        info = summary(ens, budget, hint, target)
        if fmt == "npz":
            raise OptionError("--format npz needs --tree")
        text = json.dumps(info, indent=1) if fmt == "json" else _summary_text(info)
        return _emit(text, output)
    return _show_tree(ens, tree, fmt, output, png, model.name)


def _check_plan(plan: bool, tree: int | None, fmt: str, form: str | None, dtype: str | None) -> tuple[FormSpec | None, str]:
    """inspect --plan's checks, before the model is read: the form asked for (None: auto's pick, made once the
    model is read) and the input type's name (default float32)."""
    from tree2mat.build import DTYPES
    from tree2mat.forms import check_form

    if plan and (tree is not None or fmt == "npz"):
        raise OptionError("--plan shows the whole model's passes: leave out --tree, and --format npz (text or json)")
    if not plan and (form is not None or dtype is not None):
        raise OptionError("--form and --dtype choose the graph --plan shows: add --plan")
    if dtype is not None and dtype not in DTYPES:
        raise OptionError(f"--dtype {dtype}: choose float32 or float64")
    return (None if form in (None, "auto") else check_form(form)), dtype or "float32"


def _plan(ens: Ensemble, spec: FormSpec | None, dtype: str, budget: int, hint: int, target: str | None) -> dict[str, Any]:
    """What ``inspect --plan`` prints: each pass of the form's graph (``spec``, else auto's pick) with what it made of ``ens``."""
    from tree2mat.build import DTYPES
    from tree2mat.forms import FORMS, GraphOptions, auto
    from tree2mat.forms.passes import plan as forms_plan

    # (auto's pick as convert's at the default opset; --target may raise convert's opset)
    spec = spec or FORMS[auto.choose(ens, budget, hint, target, GraphOptions(dtype=DTYPES[dtype])).form]
    passes = forms_plan(ens, spec, DTYPES[dtype])
    return {"form": spec.name, "dtype": dtype, "passes": [{"pass": name, **facts} for name, facts in passes]}


def _show_tree(ens: Ensemble, tree: int, fmt: str, output: Path | None, png: Path | None, model_name: str) -> None:
    """``inspect --tree K``: the tree's matrices printed (text or json), written (npz) or drawn beside them (--png)."""
    from tree2mat.inspect import matrices_of

    mats = matrices_of(ens, tree)
    if png is not None:
        from tree2mat.pictures import draw_tree

        size = atomic_write(png, draw_tree(ens, tree, model_name=model_name))
        n_leaf, n_int = mats["B"].shape
        typer.echo(f"wrote {png} ({_human(size)}): tree {tree} ({n_int} internal nodes, {n_leaf} leaves) "
                   f"beside {'W' if 'W' in mats else 'S'}, t, B, the bitvector and v")
        return None
    if fmt == "npz":
        from tree2mat.ir.from_matrices import tree_arrays

        if output is None:
            raise OptionError("--format npz needs -o FILE")
        _write_npz(output, {**mats, **tree_arrays(ens, tree)})  # (and what reading it back needs besides)
        return None
    if fmt == "json":
        return _emit(json.dumps({"tree": tree, **{k: v.tolist() for k, v in mats.items()}}, indent=1), output)
    return _emit(_matrices_text(tree, mats, ens.feature_names), output)


def _check_png(png: Path, tree: int | None, fmt: str, output: Path | None) -> None:
    """inspect --png's checks, before the model is read."""
    from tree2mat.pictures import require_matplotlib

    if tree is None:
        raise OptionError("--png needs --tree K: it draws one tree")
    if output is not None or fmt != "text":
        raise OptionError("--png writes only the picture; run inspect again for -o / --format")
    _check_output("--png", png, png=True)
    require_matplotlib("--png")


def _write_npz(path: Path, mats: dict[str, np.ndarray]) -> None:
    import io

    buf = io.BytesIO()
    np.savez(buf, allow_pickle=True, **mats)  # (explicit: no matrix is taken for the flag)
    atomic_write(path, buf.getvalue())


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

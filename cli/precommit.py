"""The ``tree2mat-verify`` pre-commit hook (.pre-commit-hooks.yaml, docs/ci.md): ``tree2mat verify``
for every model and graph pair among the files pre-commit passes.

A pair is ``NAME.onnx`` and the one model file beside it with the same stem (``NAME.joblib``,
``NAME.skops``, ``NAME.json``, ...). pre-commit passes the files a commit changes, so either half of
a pair brings in the other. Arguments that start with ``-`` are ``verify``'s options, passed to each
run (``--require-library``, ``--rows=2000``: a value joined with ``=``, since pre-commit puts the
files after them and a bare value would read as a file). Exit code: the worst of the runs (0 when
no pair was passed), 2 for a graph without exactly one model beside it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

#: The model files ``verify`` reads (docs/cli.md#convert), in the order a stem's are looked for.
MODEL_SUFFIXES = (".joblib", ".skops", ".pkl", ".pickle", ".json", ".ubj", ".txt", ".cbm")


def pairs(files: list[str]) -> tuple[list[tuple[Path, Path]], list[str]]:
    """(model, graph) pairs of the files, each once, and one error line per graph without a model.
    A model file with no graph beside it is not one (a ``.json`` or ``.txt`` that is no model)."""
    found: dict[Path, Path] = {}
    errors = []
    for name in files:
        path = Path(name)
        graph = path if path.suffix.lower() == ".onnx" else path.with_suffix(".onnx")
        if graph in found or not graph.is_file():
            continue
        models = [m for m in (graph.with_suffix(s) for s in MODEL_SUFFIXES) if m.is_file()]
        if len(models) != 1:
            which = "no model file" if not models else "several model files (" + ", ".join(m.name for m in models) + ")"
            errors.append(f"tree2mat-verify: error: {graph}: {which} beside it named {graph.stem}.*; "
                          f"a graph is checked against the one model with its stem ({', '.join(MODEL_SUFFIXES)})")
            found[graph] = graph  # (reported once)
            continue
        found[graph] = models[0]
    return [(model, graph) for graph, model in found.items() if model != graph], errors


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    options = [a for a in args if a.startswith("-")]
    todo, errors = pairs([a for a in args if not a.startswith("-")])
    for line in errors:
        print(line, file=sys.stderr)
    codes = [2] if errors else []
    for model, graph in todo:
        print(f"tree2mat verify {model} {graph}", flush=True)
        codes.append(subprocess.run([sys.executable, "-m", "tree2mat", "verify", str(model), str(graph), *options]).returncode)
    return max(codes, default=0)


if __name__ == "__main__":
    sys.exit(main())

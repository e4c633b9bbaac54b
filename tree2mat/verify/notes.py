"""The report's notes on the graph: what the comparison is (:func:`_notes`), where the graph was
built or is proven for another runtime (:func:`_target_elsewhere`, :func:`_below_proven_opset`),
and your data's named-category columns (:func:`_category_notes`)."""

from __future__ import annotations

import onnx

from tree2mat import attention, pipelines
from tree2mat.data import Rows
from tree2mat.forms import FORMS
from tree2mat.ir.core import Ensemble
from tree2mat.verify.subject import Subject


def _target_elsewhere(meta: dict[str, str], runtime: str, devices: list[str]) -> str | None:
    """What to say when the graph was built for another runtime (``tree2mat.target``) than the
    one it is proved on (``cuda``: onnxruntime's CUDA provider), else None."""
    target = meta.get("tree2mat.target")
    on = {f"{runtime} ({d})" if runtime == "onnxruntime" else runtime for d in devices}
    proved = {"cuda" if (runtime == "onnxruntime" and d == "cuda") else runtime for d in devices}
    if target is None or target in proved:
        return None
    how = "--device cuda" if target == "cuda" else "--device cpu" if target == runtime else f"--runtime {target}"
    return (
        f"the graph was built for --target {target} but is proved here on {', '.join(sorted(on))}: this proves it there, "
        f"not on {target}; verify with {how} where it will run"
    )


def _below_proven_opset(onx: onnx.ModelProto, meta: dict[str, str], runtime: str, ens: Ensemble) -> str | None:
    """What to say when the graph's form is proven on ``runtime`` for ``ens`` only from a newer
    opset than the graph's (``FormSpec.proven_from``: the runtime matrix saw that runtime misroute
    rows of such models below it), else None. The rows below prove or disprove this graph all the same."""
    spec = FORMS.get(meta.get("tree2mat.form", ""))
    opset = next((o.version for o in onx.opset_import if o.domain in ("", "ai.onnx")), None)
    if spec is None or opset is None or runtime not in spec.proven_on or spec.proven(runtime, opset, ens):
        return None
    floor = spec.floor(runtime, ens)
    assert floor is not None  # (in proven_on, not proven at this opset: a floor holds)
    return (
        f"a {spec.name} graph of opset {opset}: the runtime matrix saw {runtime} misroute rows of {spec.name} graphs of {floor.which} "
        f"below opset {floor.opset} (docs/runtimes.md); for {runtime}, convert with --target {runtime} (or --opset {floor.opset})"
    )


#: The note of a graph that exposes no exit index.
_NO_ROUTING = "the graph exposes no tree2mat leaf ids: routing checked through outputs only"


def _notes(meta: dict[str, str], subject: Subject, unrouted: str | None, walk_note: str | None) -> list[str]:
    """The report's notes: what the comparison is (an approximation, a pipeline, the reference
    evaluator), routing unchecked (``unrouted``: why), the walks unforced."""
    notes = []
    if meta.get("tree2mat.exact") == "0":
        notes.append(
            f"the graph is the {meta.get('tree2mat.form', '?')} form at temperature {meta.get('tree2mat.temperature', '?')}: "
            "an approximation of the model, so mismatches are expected; convert with an exact form to ship"
        )
    if subject.pipeline is not None:
        notes.append(f"a pipeline: {pipelines.describe(subject.pipeline)}'s own predictions compared with the graph's outputs")
    if subject.library is None:
        notes.append("no original library model: compared with tree2mat's reference evaluator")
    if attention.as_forest(subject.model) is not None:
        notes.append(
            "an attention forest: compared with tree2mat.attention's predict (float64); routing exactly, values "
            "within the rounding of the graph's softmax (by default atol x (1 + the row's smallest softmax argument): docs/attention.md)"
        )
    if unrouted:
        notes.append(unrouted)
    if walk_note:
        notes.append(walk_note)
    return notes


def _category_notes(ens: Ensemble, source: Rows, unreached: set[int]) -> list[str]:
    """The report's notes on your data's named-category columns: cells naming none of the
    model's categories, and columns whose categories no row reached (their splits unchecked)."""
    names = list(ens.feature_names) if ens.feature_names else None
    notes = source.unnamed_notes(dict(ens.category_labels), names)
    for j in sorted(unreached):
        what = f"column {j}" + (f" ({names[j]})" if names else "")
        notes.append(f"{what}: no row of the data holds one of the model's categories, so the splits on its categories were not checked")
    return notes

"""Forms: functions from the IR to an ONNX graph. ``FORMS`` is the one registry of them: each
entry is the :class:`FormSpec` its module ends in (a new form is one module and one entry)."""

from __future__ import annotations

from tree2mat.errors import OptionError
from tree2mat.forms import bitvector, hierarchical, oblivious, sign, soft, traverse, treeensemble
from tree2mat.forms._graph import DEFAULT_OPSET, MIN_OPSET, NEWEST_OPSET, GraphOptions
from tree2mat.forms._spec import FormSpec

FORMS: dict[str, FormSpec] = {
    spec.name: spec
    for spec in (sign.FORM, bitvector.FORM, hierarchical.FORM, traverse.FORM, oblivious.FORM, treeensemble.FORM, soft.SOFT, soft.SOFTMAX)
}

#: Not a form: picks the fastest exact form within the memory budget (tree2mat.forms.auto).
AUTO = "auto"
DEFAULT_FORM: str = AUTO


def check_form(name: str) -> FormSpec:
    """The form called ``name``; an OptionError naming the choices for any other name."""
    if name not in FORMS:
        raise OptionError(f"unknown form {name!r}; choose one of {AUTO}, {', '.join(FORMS)}")
    return FORMS[name]

__all__ = ["AUTO", "DEFAULT_FORM", "check_form", "DEFAULT_OPSET", "FORMS", "MIN_OPSET", "NEWEST_OPSET", "FormSpec", "GraphOptions"]

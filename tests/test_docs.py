"""The examples in the public API's docstrings run and print what they say (doctest), and the
README's Python examples name only what the package exports."""

from __future__ import annotations

import doctest
import importlib
import re
from pathlib import Path

import pytest

import tree2mat

#: Modules whose docstrings document the public API, with their examples.
DOCUMENTED = ["tree2mat", "tree2mat.convert", "tree2mat.verify", "tree2mat.pipelines", "tree2mat.frontends.loading"]


@pytest.mark.parametrize("name", DOCUMENTED)
def test_docstring_examples_run(name):
    from tree2mat.pipelines import restored

    module = importlib.import_module(name)
    with restored():  # the examples of register_skl2onnx change skl2onnx for the process: undone
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.attempted > 0, f"{name} documents no example"
    assert result.failed == 0


def test_every_export_is_documented_with_an_example():
    for name in tree2mat.__all__:
        obj = getattr(tree2mat, name)
        if callable(obj) and not isinstance(obj, type):
            assert obj.__doc__ and ">>>" in obj.__doc__, f"tree2mat.{name} has no example in its docstring"


def test_readme_python_api_names_exist():
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    used = set(re.findall(r"tree2mat\.([a-z_]+)\(", readme))
    assert used, "the README shows no Python API"
    missing = sorted(n for n in used if not hasattr(tree2mat, n))
    assert not missing, f"README calls tree2mat.{missing} which the package does not export"

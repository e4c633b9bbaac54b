"""One source of truth: the README's support table and the test matrix read the registries."""


import dataclasses
import sys

import pytest

from tree2mat import FORMS, FRONTENDS
from tree2mat.forms import FormSpec
from tree2mat.frontends import FrontendSpec
from tree2mat.support import SECTIONS, support_table

import test_sklearn
from conftest import ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # (import-linter, a test dependency, brings tomli where tomllib is not yet)
    import tomli as tomllib

README = ROOT / "README.md"


@pytest.mark.parametrize("section", SECTIONS, ids=lambda s: s.name)
def test_documented_lists_are_generated_from_the_registries(section):
    text = (ROOT / section.path).read_text(encoding="utf-8")
    assert section.render(text) == text, "run: python -m tree2mat.support"


def test_readme_support_table_lists_every_registered_estimator_and_form():
    support = next(s for s in SECTIONS if s.name == "support-table")
    text = README.read_text(encoding="utf-8")
    section = text.split(support.start, 1)[1].split(support.end, 1)[0]
    assert support_table() in section
    for name in list(FRONTENDS["sklearn"].estimators) + list(FORMS):
        assert f"`{name}`" in section


def test_every_spec_field_is_documented_in_extending():
    """extending.md's lists of a spec's fields are written by hand: every field is named there."""
    text = (ROOT / "docs" / "extending.md").read_text(encoding="utf-8")
    for spec in (FormSpec, FrontendSpec):
        missing = [f.name for f in dataclasses.fields(spec) if f"`{f.name}" not in text]
        assert not missing, f"{spec.__name__} fields not in docs/extending.md: {missing}"


def _contracts() -> list[dict]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"]


def test_the_independence_contracts_cover_every_registered_form_and_frontend():
    """A form is one file, a frontend is one file: import-linter checks that only for the modules
    its contracts list, so every registered one must be listed."""
    independent = {m for c in _contracts() if c["type"] == "independence" for m in c["modules"]}
    homes = {spec.build.__module__ for spec in FORMS.values()} | {spec.handles.__module__ for spec in FRONTENDS.values()}
    uncovered = {m for m in homes if not any(m == i or m.startswith(i + ".") for i in independent)}
    assert not uncovered


def test_architecture_layers_table_is_the_layers_contract():
    layers = next(c for c in _contracts() if c["type"] == "layers")["layers"]
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = text.split("| layer | modules |", 1)[1].split("\n\n", 1)[0].strip().splitlines()[1:]
    documented = [row.split("|")[2].strip() for row in rows]
    assert documented == [", ".join(f"`{m.strip()}`" for m in layer.split("|")) for layer in layers]


def test_every_registered_estimator_is_in_the_test_matrix():
    tested = set(test_sklearn.CLASSIFIERS) | set(test_sklearn.REGRESSORS) | {"IsolationForest"}
    assert tested == set(FRONTENDS["sklearn"].estimators)


def test_readme_shows_the_two_commands_first():
    text = README.read_text(encoding="utf-8")
    first_block = text.split("```sh", 1)[1].split("```", 1)[0]
    assert [line.split("#")[0].strip() for line in first_block.strip().splitlines()] == ["make demo", "make test"]


def test_the_cli_help_names_every_library_and_native_file(capsys):
    """The help's lists of libraries and of native files come from FRONTENDS (they had drifted:
    three libraries and no CatBoost file were named)."""
    from tree2mat.cli import main

    main(["--help"])
    text = " ".join(capsys.readouterr().out.replace("│", " ").split())
    for spec in FRONTENDS.values():
        assert spec.library in text
        for fmt in spec.formats:
            for suffix in fmt.suffixes:
                assert suffix in text, (spec.library, suffix)


def test_architecture_names_every_module():
    """docs/architecture.md's table of modules is written by hand: every module is in it (a
    package's ``__init__.py`` by its package)."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    missing = []
    for package in ("tree2mat", "cli"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if f"`{path.relative_to(ROOT).as_posix()}`" in text:
                continue
            if path.name == "__init__.py":
                named = f"`{path.parent.name}/`" in text or f"`{path.parent.relative_to(ROOT).as_posix()}/`" in text
            else:
                named = f"`{path.name}`" in text
            if not named:
                missing.append(path.relative_to(ROOT).as_posix())
    assert not missing, f"not in docs/architecture.md: {missing}"

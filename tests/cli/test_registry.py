"""One source of truth: the README's support table and the test matrix read the registries."""


from tree2mat import FORMS, FRONTENDS
from tree2mat.support import END, START, render, support_table

import test_sklearn
from conftest import ROOT

README = ROOT / "README.md"


def test_readme_support_table_is_generated_from_the_registries():
    text = README.read_text(encoding="utf-8")
    assert render(text) == text, "run: python -m tree2mat.support README.md"
    section = text.split(START, 1)[1].split(END, 1)[0]
    assert support_table() in section
    for name in list(FRONTENDS["sklearn"].estimators) + list(FORMS):
        assert f"`{name}`" in section


def test_every_registered_estimator_is_in_the_test_matrix():
    tested = set(test_sklearn.CLASSIFIERS) | set(test_sklearn.REGRESSORS) | {"IsolationForest"}
    assert tested == set(FRONTENDS["sklearn"].estimators)


def test_readme_shows_the_two_commands_first():
    text = README.read_text(encoding="utf-8")
    first_block = text.split("```sh", 1)[1].split("```", 1)[0]
    assert [line.split("#")[0].strip() for line in first_block.strip().splitlines()] == ["make demo", "make test"]

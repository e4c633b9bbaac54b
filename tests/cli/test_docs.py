"""The documentation works: the examples in the public API's docstrings run and print what they
say (doctest); every code block of the README and of docs/*.md runs, or says why it does not; the
Python the pages show names only what the package exports; and every relative link resolves."""

from __future__ import annotations

import doctest
import importlib
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import tree2mat

from conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: Modules whose docstrings document the public API, with their examples.
DOCUMENTED = ["tree2mat", "tree2mat.convert", "tree2mat.verify", "tree2mat.pipelines", "tree2mat.frontends.loading"]

#: Code block languages: run as Python, run through bash, or output (never run). A YAML block is a
#: configuration file (docs/ci.md's workflow and pre-commit hook), never run here:
#: tests/cli/test_ci_recipe.py runs those, and checks each against the file it shows.
PYTHON = {"python", "py"}
SHELL = {"sh", "bash", "shell", "console"}
OUTPUT = {"text", "json", "output", "yaml"}
#: The comment line that marks the next block as not run, with the reason.
NOT_RUN = re.compile(r"^<!-- not run: (?P<reason>\S.*?) -->$")


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


def test_readme_and_docs_python_api_names_exist():
    used = {}
    for page in PAGES:
        for name in re.findall(r"tree2mat\.([a-z_]+)\(", page.read_text(encoding="utf-8")):
            used.setdefault(name, page.relative_to(ROOT))
    assert used, "the documentation shows no Python API"
    missing = sorted(f"tree2mat.{n} ({where})" for n, where in used.items() if not hasattr(tree2mat, n))
    assert not missing, f"the documentation calls {missing}, which the package does not export"


# ----------------------------------------------------------------------------- code blocks


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    language: str
    code: str
    not_run: str | None  # the reason, when marked

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def code_blocks(page: Path) -> list[Block]:
    """The fenced blocks of a Markdown page (fences may be indented, in list items)."""
    blocks, lines = [], page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        if not stripped.startswith("```"):
            i += 1
            continue
        indent = len(lines[i]) - len(lines[i].lstrip())
        language = stripped[3:].strip().lower()
        before = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marked = NOT_RUN.match(before)
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == "```"), None)
        assert end is not None, f"{page.name}:{i + 1}: a code block that never closes"
        body = lines[i + 1 : end]
        code = "\n".join(line[indent:] if not line[:indent].strip() else line.lstrip() for line in body)
        blocks.append(Block(page, i + 1, language, code + "\n", marked.group("reason") if marked else None))
        i = end + 1
    return blocks


BLOCKS = [block for page in PAGES for block in code_blocks(page)]
RUNNABLE = [b for b in BLOCKS if b.not_run is None and b.language in PYTHON | SHELL]


def test_every_code_block_is_run_marked_or_output():
    """Each block says what it is: Python or shell (run below, unless marked with a reason), or
    output; a marked block is code, not output."""
    assert len(PAGES) > 1 and RUNNABLE
    for block in BLOCKS:
        assert block.language in PYTHON | SHELL | OUTPUT, f"{block.id}: give the block a language ({block.language or 'none'})"
        if block.not_run is not None:
            assert block.language not in OUTPUT, f"{block.id}: an output block is never run; drop the not-run mark"


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    """What the examples assume: the demo's model (examples/train_demo.py, as `make demo` trains
    it) and its graph, in the folder the examples run in."""
    folder = tmp_path_factory.mktemp("docs")
    subprocess.run([sys.executable, str(ROOT / "examples" / "train_demo.py"), str(folder / "model.joblib")], check=True, capture_output=True)
    tree2mat.save(tree2mat.convert(folder / "model.joblib"), folder / "model.onnx")
    return folder


@pytest.fixture
def workdir(prepared, tmp_path) -> Path:
    """A fresh copy of the prepared folder, with the checkout's examples/ and fixtures/ at hand."""
    work = tmp_path / "work"
    shutil.copytree(prepared, work)
    for name in ("examples", "fixtures"):
        (work / name).symlink_to(ROOT / name, target_is_directory=True)
    return work


def _shell_script(block: Block) -> str:
    if block.language != "console":
        return block.code
    commands = [line[2:] for line in block.code.splitlines() if line.startswith("$ ")]
    assert commands, f"{block.id}: a console block without a `$ ` command"
    return "\n".join(commands) + "\n"


@pytest.mark.slow
@pytest.mark.parametrize("block", RUNNABLE, ids=[b.id for b in RUNNABLE])
def test_code_block_runs(block, workdir, monkeypatch):
    if block.language in PYTHON:
        from tree2mat.pipelines import restored

        monkeypatch.chdir(workdir)
        with restored():  # register_skl2onnx changes skl2onnx for the process: undone
            exec(compile(block.code, block.id, "exec"), {"__name__": "__main__"})
        return
    env = {k: v for k, v in os.environ.items() if not k.startswith("TREE2MAT_SAFE")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["OMP_NUM_THREADS"] = "1"  # the libraries' own predict, timed by bench, beside a busy suite
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", _shell_script(block)],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, f"{block.id} exited {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


# ----------------------------------------------------------------------------- links


def _prose(text: str) -> str:
    """A page without its fenced blocks and inline code (where brackets are no links)."""
    text = re.sub(r"^[ \t]*```.*?^[ \t]*```[ \t]*$", "", text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings."""
    seen: dict[str, int] = {}
    out = set()
    prose = re.sub(r"^[ \t]*```.*?^[ \t]*```[ \t]*$", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)  # (a "#" line in a code block heads nothing)
    for heading in re.findall(r"^#{1,6}[ \t]+(.+?)[ \t]*#*$", prose, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _links(page: Path) -> list[str]:
    return re.findall(r"\]\(([^)\s]+)\)", _prose(page.read_text(encoding="utf-8")))


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_relative_links_resolve(page):
    broken = []
    for link in _links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", link):  # https:, mailto: ...
            continue
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            broken.append(f"{link}: no such file")
        elif anchor and target.suffix == ".md" and anchor not in _anchors(target):
            broken.append(f"{link}: no heading #{anchor} in {target.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_readme_links_every_docs_page():
    readme = ROOT / "README.md"
    linked = {(readme.parent / link.partition("#")[0]).resolve() for link in _links(readme)}
    pages = sorted((ROOT / "docs").glob("*.md"))
    assert pages, "docs/ holds no page"
    missing = [p.name for p in pages if p.resolve() not in linked]
    assert not missing, f"README.md does not link docs/{missing}"


def test_the_architecture_page_lists_the_layers_of_the_contract():
    """docs/architecture.md's layer table is pyproject.toml's layers contract, line for line."""
    import tomllib

    layers = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]["layers"]
    page = (ROOT / "docs" / "architecture.md").read_text()
    rows = re.findall(r"^\| (\d+) \| (.*) \|$", page.split("## The layers", 1)[1], re.M)
    assert [sorted(m.strip("`") for m in row.split(", ")) for _, row in rows] == [sorted(m.strip() for m in layer.split("|")) for layer in layers]

"""What a user installs, and how. The wheel holds what this checkout holds: every module of the
package and of the CLI (packaged as tree2mat.cli), the Node.js and browser runners (package data:
a pip install without them would find node and fail at run time) and the forms' cost constants
(tree2mat/forms/costs.json, which the package reads on import), and nothing else; the sdist
holds what the wheel is built from (a wheel built from it is the same). Every ``pip install``
of the README, docs/, benchmarks/*.md and tree2mat's own messages resolves as written, against
that wheel, in an environment of its own (``pip install --dry-run``), or is listed below as not
run with the reason; no installed help sends a pip user to a file of the repository."""

from __future__ import annotations

import email.parser
import importlib.metadata
import json
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tree2mat.errors import EXTRAS, install_command

from conftest import ROOT

pytestmark = pytest.mark.slow  # builds a wheel and an sdist

#: The build backend pyproject.toml declares (its [build-system] requires).
BACKEND = "setuptools>=77"

#: Commands the test does not run, and why: they install other projects' packages (from an index,
#: which a test must not need) and name no extra of tree2mat's.
NOT_RUN = {
    "pip install onnxruntime": "the core's own requirement, named where it is missing; another project's package",
    "pip install onnx": "the core's own requirement, named where it is missing; another project's package",
    "pip install hummingbird-ml": "an optional peer of bench, not an extra of tree2mat's; another project's package",
    "pip install torch==2.13.0 hummingbird-ml onnxscript": "bench's optional peers, not an extra of tree2mat's; other projects' packages",
    "pip install --no-deps 'onnxruntime-gpu>=1.20,<2'": "onnxruntime-gpu from an index (the gpu extra's swap, docs/cli.md#install; "
                                                         "checked by hand, benchmarks/RESULTS.md)",
    'pip install "$TREE2MAT"': "the CI workflow's install of the wheel its TREE2MAT names (docs/ci.md); "
                               "tests/cli/test_ci_recipe.py runs it with this checkout's wheel and no index",
}


def _backend_ok() -> bool:
    try:
        return Version(importlib.metadata.version("setuptools")) >= Version(BACKEND.split(">=")[1])
    except importlib.metadata.PackageNotFoundError:
        return False


def _build_env(tmp: Path) -> tuple[list[str], dict[str, str]]:
    """pip's build options and an environment for the setuptools hooks: offline with this venv's
    setuptools where it is new enough (the test extra installs it), else a setuptools fetched
    from the index into a folder of its own, as pip's isolated build would."""
    if _backend_ok():
        return ["--no-build-isolation"], {}
    backend = tmp / "backend"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--target", str(backend), BACKEND],
                   check=True, capture_output=True)
    return ["--no-build-isolation"], {"PYTHONPATH": str(backend)}


def _source(dest: Path) -> Path:
    """The checkout's package sources, copied, so that nothing left in build/ can slip in."""
    dest.mkdir()
    for name in ("tree2mat", "cli"):
        # (a development checkout may link tree2mat/cli to cli/: the package-dir mapping is the real one)
        shutil.copytree(ROOT / name, dest / name, ignore=lambda d, names: [n for n in names if n == "__pycache__" or Path(d, n).is_symlink()])
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, dest / name)
    return dest


def _pip_wheel(src: Path, out: Path, opts: list[str], env: dict[str, str]) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", *opts, "-w", str(out), str(src)],
                   check=True, capture_output=True, env=_env(env))
    (wheel,) = out.glob("tree2mat-*.whl")
    return wheel


def _env(extra: dict[str, str]) -> dict[str, str]:
    import os

    return {**os.environ, **extra}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("dist")
    opts, env = _build_env(tmp)
    src = _source(tmp / "src")
    wheel = _pip_wheel(src, tmp / "wheel", opts, env)
    (tmp / "sdist").mkdir()
    hook = "import sys; from setuptools import build_meta; print(build_meta.build_sdist(sys.argv[1]))"
    name = subprocess.run([sys.executable, "-c", hook, str(tmp / "sdist")], cwd=src, check=True, capture_output=True, text=True,
                          env=_env(env)).stdout.split()[-1]
    return {"wheel": wheel, "sdist": tmp / "sdist" / name, "tmp": tmp, "src": src}


def _metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as archive:
        (meta,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return email.parser.Parser().parsestr(archive.read(meta).decode())


def _extras(wheel: Path) -> dict[str, set[str]]:
    """Each extra of the wheel's metadata -> the distributions it requires."""
    meta = _metadata(wheel)
    extras: dict[str, set[str]] = {e: set() for e in meta.get_all("Provides-Extra") or []}
    for line in meta.get_all("Requires-Dist") or []:
        req = Requirement(line)
        for extra in extras:
            if req.marker is not None and req.marker.evaluate({"extra": extra}):
                extras[extra].add(canonicalize_name(req.name))
    return extras


def test_the_wheel_holds_every_module_and_the_runners(built):
    names = set(zipfile.ZipFile(built["wheel"]).namelist())
    modules = {f"tree2mat/{p.relative_to(ROOT / 'tree2mat').as_posix()}" for p in (ROOT / "tree2mat").rglob("*.py")}
    modules |= {f"tree2mat/cli/{p.relative_to(ROOT / 'cli').as_posix()}" for p in (ROOT / "cli").rglob("*.py")}
    assert {n for n in names if n.endswith(".py")} == modules
    runners = {f"tree2mat/js/{p.name}" for p in (ROOT / "tree2mat" / "js").iterdir() if p.is_file()}
    assert runners and runners <= names
    assert "tree2mat/forms/costs.json" in names


def test_the_sdist_builds_the_same_wheel(built):
    """A wheel built from the unpacked sdist has the same files as the one built from the
    checkout: the sdist holds every module, the runners and the metadata's sources."""
    tmp = built["tmp"]
    with tarfile.open(built["sdist"]) as archive:
        archive.extractall(tmp / "unpacked", filter="data")
    (top,) = (tmp / "unpacked").iterdir()
    assert {"pyproject.toml", "README.md", "PKG-INFO"} <= {p.name for p in top.iterdir()}
    opts, env = _build_env(tmp)
    again = _pip_wheel(top, tmp / "again", opts, env)
    assert again.name == built["wheel"].name
    assert set(zipfile.ZipFile(again).namelist()) == set(zipfile.ZipFile(built["wheel"]).namelist())


def test_every_missing_module_names_an_extra_that_installs_it(built):
    """tree2mat.errors.EXTRAS (what the missing-dependency errors name) against the wheel's
    metadata: the extra exists and requires the module's distribution."""
    extras = _extras(built["wheel"])
    dists = {"iree": "iree-base-runtime", "skops": "skops"}
    for module, extra in EXTRAS.items():
        assert extra in extras, (module, extra)
        assert canonicalize_name(dists.get(module, module)) in extras[extra], (module, extra, extras[extra])
    assert extras["gpu"] == {"onnxruntime-gpu"}
    # The swap's command (docs, --device cuda's error) asks for the versions the gpu extra declares.
    (gpu,) = [Requirement(r) for r in _metadata(built["wheel"]).get_all("Requires-Dist") if Requirement(r).name == "onnxruntime-gpu"]
    (swap,) = [c for c in NOT_RUN if "onnxruntime-gpu" in c]
    assert Requirement(shlex.split(swap)[-1]).specifier == gpu.specifier


def _commands() -> list[tuple[str, str]]:
    """(where, command) for every ``pip install`` in the docs and in tree2mat's messages."""
    found = []
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "benchmarks").glob("*.md"))]
    for path in docs:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            # (a command ends at its inline code's backtick or at a shell comment)
            for m in re.finditer(r"pip install [^`#\n]*", line):
                found.append((f"{path.relative_to(ROOT)}:{n}", m.group(0).strip()))
    for path in sorted([*(ROOT / "tree2mat").rglob("*.py"), *(ROOT / "cli").rglob("*.py")]):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for m in re.finditer(r"pip install [^\"\n)]*", line):
                if "{" not in m.group(0):  # (install_command's template: its commands are added below)
                    found.append((f"{path.relative_to(ROOT)}:{n}", m.group(0).strip()))
    found += [(f"tree2mat.errors.install_command({extra!r})", install_command(extra)) for extra in sorted(set(EXTRAS.values()))]
    return found


@pytest.fixture(scope="module")
def side(built) -> Path:
    """A venv holding the wheel, which sees this environment's packages (a path entry, not its
    .pth files), so that pip resolves every requirement installed here without an index."""
    venv = built["tmp"] / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "_outer.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # (--ignore-installed: the tree2mat this environment has, editable, is seen through the path
    # entry and would count as installed; it is neither replaced nor removed)
    _pip(python, "install", "--no-deps", "--no-index", "--ignore-installed", str(built["wheel"]), check=True)
    return python


def _pip(python: Path, *args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "--disable-pip-version-check", *args],
                          capture_output=True, text=True, check=check, cwd=ROOT)


def test_every_install_command_works_as_written(built, side):
    """Each command, its options kept, dry-run in the side venv with no index: ``.`` is the
    checkout (its wheel, built above, stands for it), ``tree2mat[...]`` the installed wheel. pip
    must accept every extra named; a requirement not installed here (onnxruntime-gpu, xgboost,
    treeple) must be what stops it, and one the extra declares."""
    extras = _extras(built["wheel"])
    commands = _commands()
    assert {c for _, c in commands} >= {"pip install .", "pip install 'tree2mat[plot]'"}
    ran: list[str] = []
    for where, command in commands:
        if command in NOT_RUN or command in ran:  # (one run per command, wherever it is written)
            continue
        words = shlex.split(command)
        assert words[:2] == ["pip", "install"], (where, command)
        args, named = [], set()
        for word in words[2:]:
            spec = re.fullmatch(r"(\.|tree2mat|\./tree2mat-[^\[]+\.whl)(?:\[([\w,-]+)\])?", word)
            if spec is None:
                assert word.startswith("-") or word == "constraints.txt", f"{where}: {command}: {word} is not tree2mat (add it to NOT_RUN with why)"
                if word != "-e":  # (a wheel stands for the checkout: nothing to edit)
                    args.append(word)
                continue
            target, wanted = spec.groups()
            assert target != "tree2mat" or wanted, f"{where}: {command}: no index serves tree2mat; an installed tree2mat takes extras only"
            if target.endswith(".whl"):
                assert Path(target).name == built["wheel"].name, f"{where}: {command}: the wheel is {built['wheel'].name}"
            named |= set((wanted or "").split(",")) - {""}
            path = str(built["wheel"]) if target != "tree2mat" else "tree2mat"
            args.append(f"{path}[{wanted}]" if wanted else path)
        assert named <= set(extras), f"{where}: {command}: no extra {sorted(named - set(extras))}"
        done = _pip(side, "install", "--dry-run", "--no-index", *args)
        assert "does not provide the extra" not in done.stderr, (where, command, done.stderr)
        if done.returncode != 0:
            stopped = re.search(r"No matching distribution found for ([\w.-]+)", done.stderr)
            assert stopped, (where, command, done.stderr)
            name = canonicalize_name(stopped.group(1))
            assert any(name in extras[e] for e in named), (where, command, name)
            with pytest.raises(importlib.metadata.PackageNotFoundError):
                importlib.metadata.distribution(name)
        ran.append(command)
    assert len(ran) >= 15, ran


def test_the_installed_help_names_no_file_of_the_repository(side):
    """A pip user has the installed help, not docs/: no help text sends them there."""
    tree2mat = side.parent / "tree2mat"
    commands = json.loads(subprocess.run([str(side), "-c", "import json, tree2mat.cli as c; import typer.main as t; "
                                          "print(json.dumps(sorted(t.get_command(c.app).commands)))"],
                                         check=True, capture_output=True, text=True, cwd=side.parent).stdout)  # (not the checkout's tree2mat/)
    assert "verify" in commands
    for args in ([], *([c] for c in commands)):
        done = subprocess.run([str(tree2mat), *args, "--help"], capture_output=True, text=True, env=_env({"COLUMNS": "300"}))
        assert done.returncode == 0, done.stderr
        assert "Usage: tree2mat" in done.stdout
        assert not re.search(r"\b(docs|benchmarks|examples)/|\.md\b", done.stdout), (args, done.stdout)

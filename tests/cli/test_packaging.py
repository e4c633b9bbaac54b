"""The wheel a user installs holds what this checkout holds: every module of the package and of
the CLI (packaged as tree2mat.cli), the Node.js and browser runners (package data: a pip install
without them would find node and fail at run time), and nothing else."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile

import pytest

from conftest import ROOT

pytestmark = pytest.mark.slow  # builds a wheel



def test_the_wheel_holds_every_module_and_the_runners(tmp_path):
    src = tmp_path / "src"  # a copy, so that nothing left in build/ can slip into the wheel
    for name in ("tree2mat", "cli"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(src)], check=True, capture_output=True)
    (wheel,) = tmp_path.glob("tree2mat-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    modules = {f"tree2mat/{p.relative_to(ROOT / 'tree2mat').as_posix()}" for p in (ROOT / "tree2mat").rglob("*.py")}
    modules |= {f"tree2mat/cli/{p.relative_to(ROOT / 'cli').as_posix()}" for p in (ROOT / "cli").rglob("*.py")}
    assert {n for n in names if n.endswith(".py")} == modules
    runners = {f"tree2mat/js/{p.name}" for p in (ROOT / "tree2mat" / "js").iterdir() if p.is_file()}
    assert runners and runners <= names

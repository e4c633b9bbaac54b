"""docs/ci.md's CI recipes, run: the GitHub Actions workflow (examples/ci/tree2mat-gate.yml) step by
step in a sample repository, and the pre-commit hook (.pre-commit-hooks.yaml) through
``pre-commit try-repo``. Each must pass with the model's own graph and fail with the graph of
another model in its place; the page shows the very files that run here."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import joblib
import pytest
import yaml
from sklearn.datasets import load_breast_cancer
from sklearn.ensemble import RandomForestClassifier

import tree2mat
from tree2mat.cli import precommit

from conftest import ROOT
from test_docs import code_blocks
from test_packaging import _build_env, _pip_wheel, _source

PAGE = ROOT / "docs" / "ci.md"
WORKFLOW = ROOT / "examples" / "ci" / "tree2mat-gate.yml"
HOOKS = ROOT / ".pre-commit-hooks.yaml"

#: The workflow's `uses:` steps, which need GitHub's runner, and what stands for each here.
SUBSTITUTED = {
    "actions/checkout": "the sample repository is the working folder",
    "actions/setup-python": "a venv of the test's Python (it sees the test environment's packages, so pip needs no index)",
    "actions/upload-artifact": "the file it would upload must exist",
}


def _yaml_blocks() -> list[str]:
    return [b.code for b in code_blocks(PAGE) if b.language == "yaml"]


def test_the_page_shows_the_committed_files():
    blocks = _yaml_blocks()
    assert WORKFLOW.read_text() in blocks, f"docs/ci.md does not show {WORKFLOW.relative_to(ROOT)} as it is"
    assert HOOKS.read_text() in blocks, "docs/ci.md does not show .pre-commit-hooks.yaml as it is"


def test_the_pages_pre_commit_config_names_the_hook():
    """The configuration docs/ci.md gives a user names a hook the repository declares."""
    hook_ids = {h["id"] for h in yaml.safe_load(HOOKS.read_text())}
    (config,) = [yaml.safe_load(b) for b in _yaml_blocks() if b.startswith("repos:")]
    assert [h["id"] for r in config["repos"] for h in r["hooks"]] == ["tree2mat-verify"]
    assert hook_ids == {"tree2mat-verify"}


# ----------------------------------------------------------------------------- the sample repository


def _model(seed: int) -> RandomForestClassifier:
    X, y = load_breast_cancer(return_X_y=True)
    return RandomForestClassifier(n_estimators=5, max_depth=4, random_state=seed).fit(X, y)


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    """A model saved with joblib, its graph, and the graph of another model (another seed: other
    trees), which must fail the gate."""
    folder = tmp_path_factory.mktemp("models")
    model, other = _model(0), _model(1)
    joblib.dump(model, folder / "model.joblib")
    tree2mat.save(tree2mat.convert(model), folder / "model.onnx")
    tree2mat.save(tree2mat.convert(other), folder / "other.onnx")
    return {"model": folder / "model.joblib", "graph": folder / "model.onnx", "wrong": folder / "other.onnx"}


def _clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without what would make a child import tree2mat from the
    checkout (PYTHONPATH) or from this venv, so the installed tree2mat is the one that runs."""
    drop = ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith(("TREE2MAT_SAFE", "PIP_", "PRE_COMMIT"))}
    return {**env, "OMP_NUM_THREADS": "1", **extra}


# ----------------------------------------------------------------------------- the hook's entry


def test_the_hook_pairs_graphs_with_their_models(models, tmp_path, capsys, monkeypatch):
    """The hook's entry on the files pre-commit would pass: the pair verified (exit 0), then the
    other model's graph under the model's name (exit 1), and graphs without one model (exit 2)."""
    shutil.copy(models["model"], tmp_path / "model.joblib")
    shutil.copy(models["graph"], tmp_path / "model.onnx")
    (tmp_path / "package.json").write_text("{}")  # a .json with no graph beside it: no model
    monkeypatch.setenv("TREE2MAT_SAFE", "0")  # (joblib files: no pickle warning in the runs' output)
    files = [str(tmp_path / n) for n in ("model.joblib", "model.onnx", "package.json")]
    assert precommit.pairs(files) == ([(tmp_path / "model.joblib", tmp_path / "model.onnx")], [])
    assert precommit.main(["--require-library", "--rows=200", *files]) == 0
    shutil.copy(models["wrong"], tmp_path / "model.onnx")
    assert precommit.main(["--require-library", "--rows=200", *files]) == 1
    shutil.copy(models["graph"], tmp_path / "alone.onnx")
    shutil.copy(models["model"], tmp_path / "twice.joblib")
    shutil.copy(models["model"], tmp_path / "twice.pkl")
    shutil.copy(models["graph"], tmp_path / "twice.onnx")
    capsys.readouterr()
    assert precommit.main([str(tmp_path / "alone.onnx"), str(tmp_path / "twice.onnx")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and "alone.onnx: no model file beside it" in err[0] and "several model files (twice.joblib, twice.pkl)" in err[1]


# ----------------------------------------------------------------------------- the workflow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel of this checkout, as the workflow's TREE2MAT expects it."""
    tmp = tmp_path_factory.mktemp("wheel")
    opts, env = _build_env(tmp)
    return _pip_wheel(_source(tmp / "src"), tmp / "wheel", opts, env)


@pytest.fixture(scope="module")
def runner(tmp_path_factory) -> Path:
    """setup-python's stand-in: a venv that sees this environment's packages through a path entry
    (not its .pth files: this environment's editable tree2mat stays out), so that the workflow's
    pip install resolves tree2mat's requirements with no index, and installs the wheel itself."""
    venv = tmp_path_factory.mktemp("runner") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "_outer.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv / "bin"


def _run_workflow(repo: Path, bin_dir: Path) -> list[tuple[str, int]]:
    """Every step of the workflow's job, in order, as GitHub runs them: a `run:` step through bash
    (-e, pipefail), a failed step skipping the rest but those with `if: always()`; a `uses:` step by
    its stand-in (SUBSTITUTED). (step name, exit code) for each step that ran."""
    workflow = yaml.safe_load(WORKFLOW.read_text())
    (job,) = workflow["jobs"].values()
    env = _clean_env(**workflow["env"], PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", PIP_NO_INDEX="1",
                     PIP_DISABLE_PIP_VERSION_CHECK="1", TREE2MAT_SAFE="0")
    ran: list[tuple[str, int]] = []
    failed = False
    for step in job["steps"]:
        if failed and step.get("if") != "always()":
            continue
        name = step.get("name") or step.get("uses") or step["run"]
        if "uses" in step:
            action = step["uses"].split("@")[0]
            assert action in SUBSTITUTED, f"the workflow uses {action}, which this test does not stand in for"
            code = 0
            if action == "actions/upload-artifact":
                code = 0 if (repo / step["with"]["path"]).is_file() else 1
        else:
            code = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=repo, env=env,
                                  capture_output=True, text=True, timeout=300).returncode
        ran.append((name, code))
        failed = failed or code != 0
    return ran


@pytest.mark.slow
def test_the_workflow_gates_the_model(models, wheel, runner, tmp_path):
    env = yaml.safe_load(WORKFLOW.read_text())["env"]
    named = Path(re.sub(r"\[[\w,]*\]$", "", env["TREE2MAT"]))
    assert named.name == wheel.name, f"the workflow installs {named.name}; this checkout builds {wheel.name}"
    repo = tmp_path / "sample"
    for where, what in ((named, wheel), (Path(env["MODEL"]), models["model"]), (Path(env["GRAPH"]), models["graph"])):
        (repo / where).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(what, repo / where)

    ran = _run_workflow(repo, runner)
    assert [code for _, code in ran] == [0] * 5, ran
    installed = subprocess.run([str(runner / "python"), "-c", "import tree2mat; print(tree2mat.__file__)"],
                               capture_output=True, text=True, check=True, env=_clean_env(), cwd=repo).stdout
    assert installed.startswith(str(runner.parent)), f"the steps ran tree2mat from {installed}, not the installed wheel"
    report = json.loads((repo / "report.json").read_text())
    assert report["passed"] is True and report["model"].endswith("model.joblib")

    shutil.copy(models["wrong"], repo / env["GRAPH"])  # another model's graph, committed by mistake
    (repo / "report.json").unlink()
    ran = _run_workflow(repo, runner)
    verify = next(code for name, code in ran if "Verify" in name)
    assert verify == 1, ran
    assert ran[-1] == ("Keep the report", 0), ran  # the report of the failure is still kept
    assert json.loads((repo / "report.json").read_text())["passed"] is False


# ----------------------------------------------------------------------------- pre-commit


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory) -> Path:
    """This checkout as pre-commit clones it: the package's sources and .pre-commit-hooks.yaml,
    committed in a git repository of their own (uncommitted work in the checkout included)."""
    repo = _source(tmp_path_factory.mktemp("hook") / "tree2mat")
    shutil.copy(HOOKS, repo / HOOKS.name)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "tree2mat")
    return repo


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=test", "-c", "user.email=test@example.com", *args], cwd=repo, check=True, capture_output=True)


def _try_repo(hook_repo: Path, sample: Path, home: Path) -> subprocess.CompletedProcess[str]:
    # pre-commit builds the hook's environment from the clone: a virtualenv and `pip install .`,
    # tree2mat's requirements from the package index (this environment's pip cache helps).
    return subprocess.run([sys.executable, "-m", "pre_commit", "try-repo", str(hook_repo), "tree2mat-verify", "--all-files", "--verbose"],
                          cwd=sample, capture_output=True, text=True, timeout=600,
                          env=_clean_env(PRE_COMMIT_HOME=str(home), TREE2MAT_SAFE="0"))


@pytest.mark.slow
def test_pre_commit_try_repo_gates_the_model(models, hook_repo, tmp_path):
    sample = tmp_path / "sample"
    (sample / "models").mkdir(parents=True)
    shutil.copy(models["model"], sample / "models" / "model.joblib")
    shutil.copy(models["graph"], sample / "models" / "model.onnx")
    _git(sample, "init", "-q")
    _git(sample, "add", "-A")

    done = _try_repo(hook_repo, sample, tmp_path / "home")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"tree2mat verify\.+Passed", done.stdout) and "tree2mat verify models/model.joblib models/model.onnx" in done.stdout
    assert "\nPASS" in done.stdout, done.stdout[-3000:]

    shutil.copy(models["wrong"], sample / "models" / "model.onnx")
    done = _try_repo(hook_repo, sample, tmp_path / "home")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"tree2mat verify\.+Failed", done.stdout) and "exit code: 1" in done.stdout, done.stdout[-3000:]

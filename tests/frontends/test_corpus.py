"""The corpus: real model files from the libraries' own repositories (fixtures/corpus/, origin and
license of each in fixtures/SOURCES.md), kept compressed (``.xz``) where they are large. Each is
loaded by the library itself: where the library loads it, ``tree2mat convert`` writes a graph and
``tree2mat verify --json -`` passes against the library's own predictions (threshold, NaN, inf
rows) with nothing but the JSON report on stdout; where the library refuses it, tree2mat refuses
it too, in one line naming why, and writes nothing."""

from __future__ import annotations

import ctypes
import json
import lzma
import warnings
from pathlib import Path

import pytest

from tree2mat import frontends
from tree2mat.cli import main
from tree2mat.frontends import lightgbm

from conftest import ROOT

pytestmark = pytest.mark.slow  # every real model file, converted and verified

CORPUS = sorted((ROOT / "fixtures" / "corpus").iterdir())


def _unpacked(path: Path, tmp_path: Path) -> Path:
    """The file as the library wrote it (``.xz`` unpacked), under its own name."""
    if path.suffix != ".xz":
        return path
    out = tmp_path / path.stem
    out.write_bytes(lzma.decompress(path.read_bytes()))
    return out


def _library_loads(path: Path) -> bool:
    """Whether the library that wrote ``path`` loads it (its own loader, not tree2mat's; for
    LightGBM its C API, which also loads texts whose parameters its Python package cannot
    read)."""
    if frontends.file_kind(path) == lightgbm.TEXT.name:  # (also the early texts headed "gbdt")
        from lightgbm.basic import _LIB

        handle, iterations = ctypes.c_void_p(), ctypes.c_int(0)
        if _LIB.LGBM_BoosterCreateFromModelfile(str(path).encode(), ctypes.byref(iterations), ctypes.byref(handle)) != 0:
            return False
        _LIB.LGBM_BoosterFree(handle)
        return True
    import xgboost

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "Unknown file format ... as a guess"
            xgboost.Booster(model_file=str(path))
    except xgboost.core.XGBoostError:
        return False
    return True


def test_corpus_is_there():
    assert CORPUS, "fixtures/corpus is empty"
    listed = (CORPUS[0].parent.parent / "SOURCES.md").read_text()
    missing = [p.name for p in CORPUS if p.name not in listed]
    assert not missing, f"files without their origin in fixtures/SOURCES.md: {missing}"


@pytest.mark.parametrize("packed", CORPUS, ids=lambda p: p.name)
def test_corpus_file(packed, tmp_path, capsys):
    path = _unpacked(packed, tmp_path)
    loads = _library_loads(path)
    capsys.readouterr()  # (what the library printed loading it)
    out = tmp_path / "model.onnx"
    code = main(["convert", str(path), "-o", str(out)])
    captured = capsys.readouterr()
    if not loads:
        assert code == 2 and not out.exists()
        assert captured.out == "" and len(captured.err.strip().splitlines()) == 1, captured.err
        return
    assert code == 0, captured.err
    assert main(["verify", str(path), str(out), "--json", "-"]) == 0
    report = json.loads(capsys.readouterr().out)  # stdout holds the report and nothing else
    assert report["passed"] and report["rows"] > 1000
    assert not any("no original library model" in note for note in report["notes"]), report["notes"]

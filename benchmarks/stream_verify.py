"""Issue 6's memory target, measured: ``tree2mat verify --data`` on a float32 ``.npy`` of 5 GiB
keeps its resident memory under 1 GB (the file is read a chunk of rows at a time).

Writes the file a chunk at a time (this process never holds it), trains a model on a sample of
the same distribution, converts it, and runs ``tree2mat verify MODEL ONNX --data X.npy`` in a
child process whose peak resident memory (``ru_maxrss`` from ``wait4``) is the figure. Run:
``python -m benchmarks.stream_verify --out stream_verify.json`` (about 10 minutes on 2 cores;
needs the file's size free on the disk of ``--dir``, default the system's temporary folder).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import joblib
import numpy as np
from sklearn.ensemble import RandomForestClassifier

import tree2mat

BIN = Path(sys.executable).parent


def rows(rng: np.random.Generator, n: int, features: int) -> tuple[np.ndarray, np.ndarray]:
    X = rng.normal(size=(n, features)).astype(np.float32)
    X[rng.random(X.shape) < 0.01] = np.nan
    y = (np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) * np.nan_to_num(X[:, 2]) > 0).astype(int)
    return X, y


def write_npy(path: Path, n_rows: int, features: int, seed: int, chunk: int = 65536) -> None:
    """A row-major float32 .npy of ``n_rows`` x ``features``, written a chunk at a time."""
    rng = np.random.default_rng(seed)
    with path.open("wb") as fh:
        np.lib.format.write_array_header_2_0(fh, {"descr": "<f4", "fortran_order": False, "shape": (n_rows, features)})
        for start in range(0, n_rows, chunk):
            fh.write(rows(rng, min(chunk, n_rows - start), features)[0].tobytes())


def peak_rss(cmd: list[str]) -> tuple[int, float, int]:
    """Exit code, wall seconds and peak resident bytes of ``cmd`` run as a child."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        print("   ", line.rstrip(), flush=True)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, time.perf_counter() - start, usage.ru_maxrss * 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=5.0, help="size of the data file (GiB)")
    parser.add_argument("--features", type=int, default=200)
    parser.add_argument("--dir", type=Path, default=None, help="where to write the file (default: a temporary folder)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    n_rows = int(args.gib * 2**30) // (4 * args.features)
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="tree2mat-stream-") as tmp:
        d = Path(tmp)
        X, y = rows(np.random.default_rng(args.seed + 1), 20_000, args.features)
        model = RandomForestClassifier(50, max_depth=8, random_state=args.seed).fit(X, y)
        joblib.dump(model, d / "model.joblib")
        tree2mat.save(tree2mat.convert(model), d / "model.onnx")
        start = time.perf_counter()
        write_npy(d / "X.npy", n_rows, args.features, args.seed)
        size = (d / "X.npy").stat().st_size
        print(f"wrote {size / 2**30:.2f} GiB ({n_rows} x {args.features} float32) in {time.perf_counter() - start:.0f} s", flush=True)
        cmd = [str(BIN / "tree2mat"), "verify", str(d / "model.joblib"), str(d / "model.onnx"),
               "--data", str(d / "X.npy"), "--json", str(d / "report.json")]
        code, seconds, rss = peak_rss(cmd)
        report = json.loads((d / "report.json").read_text()) if (d / "report.json").exists() else {}
    doc = {
        "machine": f"{platform.machine()}, {len(os.sched_getaffinity(0))} CPUs, {platform.system()}",
        "python": platform.python_version(), "tree2mat": tree2mat.__version__,
        "model": "RandomForestClassifier(50, max_depth=8)", "file_bytes": size, "rows": n_rows,
        "features": args.features, "exit_code": code, "verify_seconds": round(seconds, 1),
        "peak_rss_bytes": rss, "passed": report.get("passed"),
        "outputs": [{k: o[k] for k in ("name", "compared", "mismatches")} for o in report.get("outputs", [])],
    }
    print(json.dumps(doc, indent=1))
    if args.out:
        args.out.write_text(json.dumps(doc, indent=1) + "\n")
    return 0 if code == 0 and rss < 2**30 else 1


if __name__ == "__main__":
    sys.exit(main())

"""Data files read a chunk of rows at a time (verify --data): the rows numpy, pandas and pyarrow
read themselves, in any chunking; broken and hostile files refused with one line; a streamed
verify reports what a whole-array verify reports."""

from __future__ import annotations

import io
import re
import zipfile

import joblib
import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier

import tree2mat
from tree2mat.cli import main
from tree2mat.data import load_data, open_rows, read_chunks
from tree2mat.errors import DataError, OptionError

pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")

RNG = np.random.default_rng(0)
X = RNG.normal(size=(257, 5)).astype(np.float32)
X[3, 1] = np.nan
X[7, 4] = np.inf


def _write(path, X):
    """``X`` written in the format of ``path``'s name (one variant per name)."""
    name = path.name
    if name == "c.npy":
        np.save(path, X)
    elif name == "f.npy":
        np.save(path, np.asfortranarray(X))
    elif name == "big_endian.npy":
        np.save(path, X.astype(">f8"))
    elif name == "int.npy":
        np.save(path, np.nan_to_num(X, posinf=9).astype(np.int16))
    elif name == "z.npz":
        np.savez_compressed(path, X=np.asfortranarray(X), y=np.zeros(3))
    elif name == "one.npz":
        np.savez(path, rows=X)
    elif name == "h.csv":
        pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])]).to_csv(path, index=False)
    elif name == "plain.csv":
        np.savetxt(path, X, delimiter=",")
    elif name == "x.parquet":
        frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
        frame["f0"] = frame["f0"].astype("float64")
        frame.loc[5, "f2"] = None
        frame.to_parquet(path, row_group_size=50)
    return path


def _theirs(path) -> np.ndarray:
    """The rows as numpy or pandas read the file themselves."""
    if path.suffix == ".npy":
        return np.load(path)
    if path.suffix == ".npz":
        with np.load(path) as z:
            return z["X"] if "X" in z else z[list(z.keys())[0]]
    if path.suffix == ".csv":
        return pd.read_csv(path, header=0 if path.name == "h.csv" else None).to_numpy(np.float64)
    return pd.read_parquet(path).to_numpy(np.float64, na_value=np.nan)


NAMES = ["c.npy", "f.npy", "big_endian.npy", "int.npy", "z.npz", "one.npz", "h.csv", "plain.csv", "x.parquet"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("rows", [1, 50, 256, 10_000])
def test_chunks_are_the_rows_numpy_and_pandas_read(tmp_path, name, rows):
    path = _write(tmp_path / name, X)
    expected = _theirs(path)
    source = open_rows(path)
    chunks = list(read_chunks(source, rows))
    assert all(c.shape[0] <= rows for c in chunks)
    got = np.concatenate(chunks)
    assert got.shape == expected.shape and source.n_features == expected.shape[1]
    np.testing.assert_array_equal(got.astype(np.float64), expected.astype(np.float64))
    assert source.fraction_read == pytest.approx(1.0)
    assert source.n_rows == expected.shape[0]
    np.testing.assert_array_equal(load_data(path).astype(np.float64), expected.astype(np.float64))


def _npy_bytes(X) -> bytes:
    buf = io.BytesIO()
    np.save(buf, X)
    return buf.getvalue()


def _header(shape, descr="<f4") -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False, "shape": shape})
    return buf.getvalue()


@pytest.mark.parametrize(
    "name, content, needle",
    [
        ("cut.npy", _npy_bytes(X)[:-7], "truncated"),
        ("header_only.npy", _npy_bytes(X)[:128], "truncated"),
        # A header that promises 10**15 rows: refused before any allocation.
        ("huge.npy", _header((10**15, 5)) + b"\0" * 64, "truncated"),
        ("objects.npy", None, "numeric"),
        ("one_d.npy", _npy_bytes(X[:, 0]), "2-D"),
        ("three_d.npy", _npy_bytes(X.reshape(257, 5, 1)), "2-D"),
        ("no_rows.npy", _npy_bytes(X[:0]), "non-empty"),
        ("garbage.npy", b"not numpy at all", "cannot read data"),
        ("garbage.npz", b"PK\x03\x04 broken zip", "cannot read data"),
        ("ragged.csv", b"1,2,3\n4,5,6\n7,8\n", "columns"),
        ("text.csv", b"a,b\n1,x\n", "cannot read data"),
        ("empty.csv", b"", "non-empty"),
        ("header_only.csv", b"a,b,c\n", "non-empty"),
        ("latin1.csv", b"a,\xff\n1,2\n", "cannot read data"),
        ("x.feather", b"", "unknown data file type"),
    ],
)
def test_broken_and_hostile_files_are_one_data_error(tmp_path, name, content, needle):
    path = tmp_path / name
    if content is None:  # an object array: loading it would unpickle
        buf = io.BytesIO()
        np.save(buf, np.asarray([[object()]], dtype=object), allow_pickle=True)
        content = buf.getvalue()
    path.write_bytes(content)
    with pytest.raises(DataError, match=needle):
        load_data(path)


def test_npz_with_several_arrays_and_no_X_is_refused(tmp_path):
    path = tmp_path / "two.npz"
    np.savez(path, a=X, b=X)
    with pytest.raises(DataError, match="named 'X' or exactly one"):
        open_rows(path)
    with zipfile.ZipFile(tmp_path / "none.npz", "w") as z:
        z.writestr("readme.txt", "no arrays")
    with pytest.raises(DataError, match="named 'X' or exactly one"):
        open_rows(tmp_path / "none.npz")


def test_a_csv_broken_past_its_first_chunk_is_refused_where_it_breaks(tmp_path):
    path = tmp_path / "late.csv"
    path.write_text("".join(f"{i},{i}\n" for i in range(100)) + "1,2,3\n")
    with pytest.raises(DataError, match="row 101 onwards has 3 columns"):
        list(read_chunks(open_rows(path), 10))


@pytest.fixture(scope="module")
def wrong_pair(tmp_path_factory):
    """A forest and the graph of another forest (so that rows mismatch), as files."""
    d = tmp_path_factory.mktemp("stream")
    y = (X[:, 0] > 0).astype(int)
    Xf = np.nan_to_num(X, nan=0.0, posinf=0.0)
    a = RandomForestClassifier(5, max_depth=4, random_state=0).fit(Xf, y)
    b = RandomForestClassifier(5, max_depth=4, random_state=1).fit(Xf, y)
    joblib.dump(b, d / "b.joblib")
    tree2mat.save(tree2mat.convert(a), d / "a.onnx")
    np.save(d / "x.npy", Xf)
    return d, b, Xf


def test_streamed_verify_reports_what_a_whole_array_verify_reports(wrong_pair, monkeypatch):
    d, model, Xf = wrong_pair
    whole = tree2mat.verify(model, d / "a.onnx", Xf)
    assert not whole.passed
    import sys

    monkeypatch.setattr(sys.modules["tree2mat.verify"], "DATA_CHUNK_BYTES", 8 * X.shape[1] * 10)  # 10 rows a chunk
    seen = []
    streamed = tree2mat.verify(model, d / "a.onnx", d / "x.npy", max_report=40, progress=lambda n, f: seen.append((n, f)))
    assert len(seen) == 27 and seen[0] == (0, 0.0) and seen[-1] == (257, 1.0) and [n for n, _ in seen] == sorted(n for n, _ in seen)
    assert streamed.rows == whole.rows == 257
    for a, b in zip(whole.outputs, streamed.outputs):
        assert (a.name, a.compared, a.mismatches) == (b.name, b.compared, b.mismatches)
        assert a.max_abs_error == b.max_abs_error
        # The rows reported are the data's row numbers, with the inputs found there.
        assert [m.row for m in b.first_mismatches[:5]] == [m.row for m in a.first_mismatches]
        for m in b.first_mismatches:
            np.testing.assert_array_equal(np.asarray(m.input, np.float32), Xf[m.row])


def test_progress_lines_off_a_terminal(wrong_pair, monkeypatch, capsys):
    d, _, Xf = wrong_pair
    import sys

    monkeypatch.setattr(sys.modules["tree2mat.verify"], "DATA_CHUNK_BYTES", 8 * X.shape[1] * 10)
    main(["verify", str(d / "b.joblib"), str(d / "a.onnx"), "--data", str(d / "x.npy")])
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("verify:")]
    assert 9 <= len(lines) <= 11 and lines[-1] == "verify: 257 rows (100% of the data read)", lines
    main(["verify", str(d / "b.joblib"), str(d / "a.onnx"), "--data", str(d / "x.npy"), "--no-progress"])
    assert "verify:" not in capsys.readouterr().err


def test_chunks_are_writable_arrays_of_their_own(tmp_path):
    """Libraries may write into their input: chunks are writable arrays, not views of bytes."""
    for name in ("c.npy", "f.npy", "z.npz", "one.npz"):
        for chunk in open_rows(_write(tmp_path / name, X)).chunks(100):
            assert chunk.flags.writeable


def test_a_csv_without_line_breaks_is_not_read_whole(tmp_path, monkeypatch):
    import tree2mat.data._csv as csv_rows

    monkeypatch.setattr(csv_rows, "MAX_CSV_LINE", 1000)
    (tmp_path / "long.csv").write_text(",".join(["1"] * 600) + "\n")
    with pytest.raises(DataError, match="a line is longer than"):
        list(read_chunks(open_rows(tmp_path / "long.csv"), 10))
    (tmp_path / "ok.csv").write_text("1,2\n3,4\n")
    assert load_data(tmp_path / "ok.csv").tolist() == [[1, 2], [3, 4]]


# ------------------------------------------------------------------------- .csv header lines

IRIS_HEADER = b"sepal length,sepal width,petal length,petal width\n"
IRIS_ROWS = b"5.1,,1.4,0.2\n4.9,3.0,1.4,0.2\n6.2,3.4,5.4,2.3\n"  # the first row's empty cell: NaN
BOM = b"\xef\xbb\xbf"

#: name -> (the file, --header/--no-header (None: detected), whether pandas reads a header there)
CSV_CASES = {
    "empty first cell": (IRIS_ROWS, None, False),
    "BOM, no header": (BOM + IRIS_ROWS, None, False),
    "BOM, header": (BOM + IRIS_HEADER + IRIS_ROWS, None, True),
    "one row, no line end": (b"5.1,3.5,1.4,0.2", None, False),
    "blank lines before the rows": (b"\n\n" + IRIS_ROWS, None, False),
    "a blank line before the header": (b"\n" + IRIS_HEADER + IRIS_ROWS, None, True),
    "CRLF line ends": (IRIS_HEADER.replace(b"\n", b"\r\n") + IRIS_ROWS.replace(b"\n", b"\r\n"), None, True),
    "quoted cells": (b'"sepal length","sepal width","petal length","petal width"\n"5.1","3.5","1.4","0.2"\n4.9,"",1.4,0.2\n', None, True),
    "NaN spellings first": (b"nan,NaN,1E0,+2.5\n" + IRIS_ROWS, None, False),
    "--header, a numeric first line": (b"0,1,2,3\n" + IRIS_ROWS, True, True),
    "--no-header, the column numbers as a row": (b"0,1,2,3\n" + IRIS_ROWS, False, False),
    "--no-header, BOM": (BOM + IRIS_ROWS, False, False),
}


@pytest.fixture(scope="module")
def iris_forest(tmp_path_factory):
    """A forest on iris (it predicts NaN cells too), its file and its graph."""
    from sklearn.datasets import load_iris

    d = tmp_path_factory.mktemp("iris")
    model = RandomForestClassifier(5, max_depth=4, random_state=0).fit(*load_iris(return_X_y=True))
    joblib.dump(model, d / "rf.joblib")
    tree2mat.save(tree2mat.convert(model), d / "rf.onnx")
    return d, model


@pytest.mark.parametrize("case", CSV_CASES)
def test_csv_rows_are_every_row_pandas_reads(tmp_path, iris_forest, case):
    """No row is lost or gained: the rows read are pandas' (told where the header is), and
    verify compares the graph with scikit-learn's predictions on every one of them, as it does
    on those rows given as an array."""
    content, header, pandas_header = CSV_CASES[case]
    path = tmp_path / "rows.csv"
    path.write_bytes(content)
    expected = pd.read_csv(path, header=0 if pandas_header else None).to_numpy(np.float64)
    got = load_data(path, header)
    assert got.shape == expected.shape and expected.shape[1] == 4
    np.testing.assert_array_equal(got, expected)
    d, model = iris_forest
    report = tree2mat.verify(model, d / "rf.onnx", path, header=header)
    whole = tree2mat.verify(model, d / "rf.onnx", expected)
    assert report.passed and report.rows == whole.rows == expected.shape[0], report.summary()
    assert [(o.name, o.compared) for o in report.outputs] == [(o.name, o.compared) for o in whole.outputs]


@pytest.mark.parametrize(
    "content, header, needle",
    [
        # pandas' header of unnamed columns (DataFrame(X).to_csv(index=False)), or a row
        (b"0,1,2,3\n" + IRIS_ROWS, None, "cannot tell whether the first line is a header or a row of data: its cells 0,1,2,3 number the columns"),
        # csv.QUOTE_NONNUMERIC quotes a header's names, csv.QUOTE_ALL every number
        (b'"5.1","3.5","1.4","0.2"\n' + IRIS_ROWS, None, "column 0 (from 0) holds the quoted number '5.1'"),
        (b",,,\n" + IRIS_ROWS, None, "every cell is empty"),
        (IRIS_HEADER + IRIS_ROWS, False, "--no-header, but the first line holds 'sepal length' in column 0 (from 0), which is no number"),
        (BOM + b"5.1,3.5,width,0.2\n" + IRIS_ROWS, False, "holds 'width' in column 2"),
    ],
)
def test_a_csv_first_line_that_could_be_either_is_refused(tmp_path, iris_forest, capsys, content, header, needle):
    path = tmp_path / "rows.csv"
    path.write_bytes(content)
    with pytest.raises(DataError, match=re.escape(needle)):
        load_data(path, header)
    d, _ = iris_forest
    flag = [] if header is None else ["--header" if header else "--no-header"]
    assert main(["verify", str(d / "rf.joblib"), str(d / "rf.onnx"), "--data", str(path), *flag]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"tree2mat: error: {path}: ") and needle in err, err
    if header is None:  # said either way, the file reads (as pandas reads it, told the same)
        for given in (True, False):
            expected = pd.read_csv(path, header=0 if given else None).to_numpy(np.float64)
            np.testing.assert_array_equal(load_data(path, given), expected)


def test_header_options_are_for_csv_files_only(tmp_path, iris_forest):
    d, model = iris_forest
    np.save(tmp_path / "x.npy", np.ones((2, 4)))
    for data in (tmp_path / "x.npy", np.ones((2, 4)), None):
        with pytest.raises(OptionError, match="--header says whether the first line of a .csv --data file is a header"):
            tree2mat.verify(model, d / "rf.onnx", data, header=True)
    with pytest.raises(OptionError, match="--no-header says"):
        load_data(tmp_path / "x.npy", False)

"""The LightGBM model text read as LightGBM's loader reads it: the header, each tree's
``key=value`` block, and the fields' integers and numbers (ASCII, as LightGBM writes them)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from tree2mat.errors import ModelFileError, UnsupportedModelError


@dataclass
class ModelText:
    header: dict[str, str]
    trees: list[dict[str, str]]
    name: str
    rest: str  # what follows the trees: feature importances, parameters, pandas_categorical


#: Line ends as LightGBM's reader takes them (``Common::GetLine`` / ``SkipNewLine``).
_NEWLINE = re.compile(rb"\r\n|\r|\n")
#: Lines of a tree block LightGBM reads at most (``Tree::Tree(const char*, size_t*)``).
_TREE_LINES = 22
#: Header keys whose value may hold '=' (LightGBM refuses such a line under any other key).
_FREE_TEXT_KEYS = ("feature_names", "monotone_constraints")


def _lines(data: bytes, start: int) -> Iterator[tuple[int, bytes]]:
    """``(offset, line)`` for each line of ``data`` from ``start``, an empty line for each
    blank one."""
    pos = start
    while pos < len(data):
        match = _NEWLINE.search(data, pos)
        end = match.start() if match else len(data)
        yield pos, data[pos:end]
        pos = match.end() if match else len(data)


def parse_text(text: str | bytes, name: str = "LightGBM model") -> ModelText:
    """Split a model text into its header and per-tree ``key=value`` blocks as LightGBM's loader
    does (``GBDT::LoadModelFromString``, LightGBM 4.x): the header runs to the first ``Tree=``
    line; with ``tree_sizes`` tree ``i`` is read at that line's offset plus the sizes (bytes) of
    the trees before it, and there are as many trees as sizes; without it (texts written before
    mid-2018) the trees follow one another and the first other line (``end of trees``, or
    ``feature importances:`` in older texts) ends them. A tree block ends at a blank line (or
    after 22 lines). The number after ``Tree=`` is not read. Where LightGBM refuses the text, or
    would read past its end, the text is refused."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    if b"\0" in data:
        raise ModelFileError(f"{name}: not a LightGBM model text (it holds a NUL byte)")
    if b"\r" in data and b"\n" not in data[:-1]:  # (LightGBM's Python package loops on a lone final LF too)
        raise ModelFileError(
            f"{name}: a LightGBM model text whose lines end in CR alone, which LightGBM's file loader does not "
            "finish reading (4.7 never returns); convert its line ends to LF"
        )
    first = next(_lines(data, 0), (0, b""))[1].strip()
    if first == b"gbdt":
        raise UnsupportedModelError(
            f"{name}: an early LightGBM model text (first line 'gbdt', as LightGBM wrote them in 2016), which LightGBM itself no "
            "longer loads (4.x: 'Unknown model format or submodel type'); re-train the model with a current LightGBM"
        )
    if first != b"tree":
        raise ModelFileError(f"{name}: not a LightGBM model text (first line is not 'tree')")
    header: dict[str, str] = {}
    trees_at = len(data)
    for number, (offset, raw) in enumerate(_lines(data, 0), start=1):
        if raw.startswith(b"Tree="):
            trees_at = offset
            break
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ModelFileError(f"{name}: line {number}: not UTF-8 text ({exc.reason})") from exc
        parts = [p for p in line.split("=") if p]  # Common::Split drops empty parts
        if len(parts) == 1:
            header[parts[0]] = ""  # flags such as average_output
        elif len(parts) == 2:
            header[parts[0]] = parts[1]
        elif parts and parts[0] in _FREE_TEXT_KEYS:
            header[parts[0]] = line[len(parts[0]) + 1 :]
        elif parts:
            raise ModelFileError(f"{name}: line {number}: LightGBM refuses this line ('Wrong line at model file'): {line[:40]!r}")
    for key in ("num_class", "label_index", "max_feature_idx", "feature_names", "feature_infos"):
        if key not in header:  # LightGBM: "Model file doesn't contain ..."
            raise ModelFileError(f"{name}: ill-formed LightGBM model: need {key} (LightGBM refuses a model text without it)")
    if "tree_sizes" in header:
        starts = _sized_tree_starts(data, trees_at, header["tree_sizes"], name)
        trees = [_tree_block(data, start, name, t)[0] for t, start in enumerate(starts)]
        rest_at = trees_at + sum(_sizes(header["tree_sizes"], name))
    else:
        trees, rest_at = _sequential_trees(data, trees_at, name)
    if not trees:
        raise ModelFileError(f"{name}: truncated LightGBM model text (no trees)")
    return ModelText(header, trees, name, data[min(rest_at, len(data)) :].decode("utf-8", "replace"))


def split_list(value: str) -> list[str]:
    """``value`` split as LightGBM splits a list (``Common::Split(str, ' ')``): on spaces alone,
    empty parts dropped."""
    return [part for part in value.split(" ") if part]


def _sizes(value: str, name: str) -> list[int]:
    sizes = split_list(value)
    if any(not s.isdigit() or not s.isascii() or len(s) > 18 for s in sizes):
        raise ModelFileError(f"{name}: ill-formed LightGBM model: tree_sizes must be byte counts")
    return [int(s) for s in sizes]


def _sized_tree_starts(data: bytes, trees_at: int, value: str, name: str) -> list[int]:
    """Where each tree's block starts when ``tree_sizes`` places the trees (after its
    ``Tree=`` line)."""
    starts = []
    offset = trees_at
    for t, size in enumerate(_sizes(value, name)):
        line = next(_lines(data, offset), (offset, b""))[1] if offset < len(data) else None
        if line is None:
            raise ModelFileError(f"{name}: truncated LightGBM model text (tree_sizes places tree {t} past the end)")
        if not line.startswith(b"Tree="):
            raise ModelFileError(
                f"{name}: ill-formed LightGBM model: tree_sizes does not match the tree blocks: it places tree {t} "
                f"at byte {offset}, where no 'Tree=' line starts (LightGBM cannot load it either: 'Model format "
                "error, expect a tree here'); remove the tree_sizes line or correct it"
            )
        starts.append(_after_line(data, offset + len(line)))
        offset += size
    return starts


def _after_line(data: bytes, end: int) -> int:
    """The offset after the line end at ``end`` (``Common::SkipNewLine``)."""
    match = _NEWLINE.match(data, end)
    return match.end() if match else end


def _sequential_trees(data: bytes, trees_at: int, name: str) -> tuple[list[dict[str, str]], int]:
    """Trees one after another (no ``tree_sizes``): a ``Tree=`` line, its block; blank lines
    between; the first other line ends the trees."""
    trees: list[dict[str, str]] = []
    pos = trees_at
    while pos < len(data):
        line = next(_lines(data, pos))[1]
        if not line:
            pos = _after_line(data, pos)
            continue
        if not line.startswith(b"Tree="):
            break
        block, pos = _tree_block(data, _after_line(data, pos + len(line)), name, len(trees))
        trees.append(block)
    return trees, pos


def _tree_block(data: bytes, start: int, name: str, t: int) -> tuple[dict[str, str], int]:
    """Tree ``t``'s ``key=value`` lines from ``start`` up to a blank line (or 22 lines, as
    LightGBM reads them), and where the block ends."""
    block: dict[str, str] = {}
    pos = start
    for _ in range(_TREE_LINES):
        if pos >= len(data):
            raise ModelFileError(f"{name}: truncated LightGBM model text (tree {t} has no blank line after it)")
        line = next(_lines(data, pos))[1]
        if not line:
            break
        try:
            key, sep, value = line.decode("utf-8").partition("=")
        except UnicodeDecodeError as exc:
            raise ModelFileError(f"{name}: tree {t}: not UTF-8 text ({exc.reason})") from exc
        if not sep:
            raise ModelFileError(f"{name}: tree {t}: expected key=value, found {key[:40]!r}")
        block[key] = value
        pos = _after_line(data, pos + len(line))
    return block, pos


def _get(block: dict[str, str], key: str, where: str) -> str:
    if key not in block:
        raise ModelFileError(f"{where}: ill-formed LightGBM model: need {key}")
    return block[key]


#: Numbers as LightGBM writes and reads them (ASCII only: Python alone would also take "1_000"
#: or non-ASCII digits, which LightGBM reads differently).
_INT = re.compile(r"[+-]?[0-9]+")
_NOT_INT_CHAR = re.compile(r"[^0-9 +-]")
FLOAT = re.compile(r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|nan)", re.IGNORECASE)


def read_int(block: dict[str, str], key: str, where: str) -> int:
    value = _get(block, key, where)
    if not _INT.fullmatch(value) or len(value) > 18:
        raise ModelFileError(f"{where}: ill-formed LightGBM model: {key} is not an integer")
    return int(value)


def read_numbers(block: dict[str, str], key: str, where: str, n: int, dtype: type) -> np.ndarray:
    text = _get(block, key, where).split()
    if len(text) != n:
        raise ModelFileError(f"{where}: ill-formed LightGBM model: {key} has {len(text)} values, expected {n}")
    if dtype is int and text and not _NOT_INT_CHAR.search(" ".join(text)) and max(map(len, text)) <= 18:
        try:  # the common case, at numpy's speed: a bitset can hold millions of words
            return np.asarray(text, dtype=np.int64)
        except ValueError:  # a sign inside a number: the message below names it
            pass
    pattern = _INT if dtype is int else FLOAT
    bad = next((v for v in text if not pattern.fullmatch(v) or (dtype is int and len(v) > 18)), None)
    if bad is not None:
        raise ModelFileError(f"{where}: ill-formed LightGBM model: {key}: {bad[:30]!r} is not a number")
    return np.asarray([dtype(v) for v in text], np.int64 if dtype is int else np.float64)

